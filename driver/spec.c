/* spec.c: a model spec read from a file or a string, with KEY=VALUE
 * overrides, keeping the texts its diagnostics point into (the spec, and
 * the overrides one per line as the source "--set"). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static char *copy(const char *s, size_t len)
{
	char *c = malloc(len + 1);
	if (!c)
		IR_DIE("out of memory");
	memcpy(c, s, len);
	c[len] = 0;
	return c;
}

bool drv_spec_error(const drv_spec *s, const ir_diags *d, revc_error **err)
{
	drv_source srcs[2] = {{s->path, s->text, s->len}, {"--set", s->sets_text, s->sets_len}};
	return drv_error_diags(err, REVC_ERR_USER, d, srcs, 2);
}

/* Takes text (malloc'd, NUL after len bytes). */
static bool parse(drv_spec *s, const char *name, char *text, size_t len, const char *const *sets, int nsets,
	revc_error **err)
{
	memset(s, 0, sizeof *s);
	s->path = copy(name, strlen(name));
	s->text = text;
	s->len = len;
	/* All sets, one per line, so a caret can point into one. */
	size_t n = 0;
	for (int i = 0; i < nsets; i++)
		n += strlen(sets[i]) + 1;
	s->sets_text = calloc(1, n + 1);
	if (!s->sets_text)
		IR_DIE("out of memory");
	for (int i = 0; i < nsets; i++) {
		strcat(s->sets_text, sets[i]);
		strcat(s->sets_text, "\n");
	}
	s->sets_len = n;

	ir_diags d;
	ir_diags_init(&d);
	bool ok = fe_spec_parse(&s->spec, s->path, s->text, s->len, &d);
	for (int i = 0; ok && i < nsets; i++)
		ok = fe_spec_set(&s->spec, sets[i], i + 1, &d);
	ok = ok && fe_spec_check(&s->spec, &d);
	if (!ok) {
		drv_spec_error(s, &d, err);
		drv_spec_free(s);
	}
	ir_diags_free(&d);
	return ok;
}

bool drv_spec_parse(drv_spec *s, const char *name, const char *text, size_t len, const char *const *sets,
	int nsets, revc_error **err)
{
	return parse(s, name, copy(text, len), len, sets, nsets, err);
}

bool drv_spec_load(drv_spec *s, const char *path, const char *const *sets, int nsets, revc_error **err)
{
	rt_err e;
	char *text;
	size_t len;
	memset(s, 0, sizeof *s);
	if (!rt_file_read(path, FE_MAX_FILE, &text, &len, &e))
		return drv_error_rt(err, &e);
	return parse(s, path, text, len, sets, nsets, err);
}

void drv_spec_free(drv_spec *s)
{
	free(s->path);
	free(s->text);
	free(s->sets_text);
	s->path = s->text = s->sets_text = NULL;
}
