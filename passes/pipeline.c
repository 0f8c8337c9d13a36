/* pipeline.c: the pass pipeline, as a table.  Order matters: each pass
 * names the pass it requires, and the manager runs them top to bottom. */
#include <string.h>

#include "passes.h"

static const ps_pass pipeline[] = {
	{"shape", ps_shape, NULL, "infer every value's type and check it against its op's rule"},
	{"autodiff", ps_autodiff, "shape", "reverse mode: gradients of the loss for every parameter"},
	{"allreduce", ps_allreduce, "autodiff", "data parallelism: sum gradients and batch statistics over the ranks"},
	{"revbwd", ps_revbwd, "autodiff", "strategy revnet: reconstruct unit inputs instead of storing them"},
	{"checkpoint", ps_checkpoint, "autodiff", "strategy checkpoint: keep sqrt(n) unit outputs, recompute the rest"},
	{"optim", ps_optim, "autodiff", "momentum SGD with weight decay consumes the gradients"},
	{"dce", ps_dce, NULL, "remove nodes no output, update or ordering edge needs"},
	{"schedule", ps_schedule, "dce", "ordering edges for reconstruction; the lowest-peak linear order"},
	{"fuse", ps_fuse, "schedule", "group elementwise chains into one kernel each, never across an edge"},
	{"liveness", ps_liveness, "schedule", "live range of every buffer over the schedule"},
	{"plan", ps_plan, "liveness", "arena offsets: greedy by size, best fit, in place where allowed"},
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

bool ps_pass_applies(const ps_pass *p, const ps_ctx *ctx)
{
	return p->run != ps_allreduce || ps_allreduce_applies(ctx);
}
