/* pipeline.c: the pass pipeline, as a table.  Order matters: each pass
 * names the pass it requires, and the manager runs them top to bottom. */
#include <string.h>

#include "passes.h"

static const ps_pass pipeline[] = {
	{"dce", ps_dce, NULL, "remove nodes no output, update or ordering edge needs"},
};

const ps_pass *ps_pipeline(int *count)
{
	*count = (int)(sizeof pipeline / sizeof pipeline[0]);
	return pipeline;
}

const ps_pass *ps_pass_lookup(const char *name)
{
	for (size_t i = 0; i < sizeof pipeline / sizeof pipeline[0]; i++)
		if (strcmp(pipeline[i].name, name) == 0)
			return &pipeline[i];
	return NULL;
}
