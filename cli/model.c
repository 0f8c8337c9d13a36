/* model.c: what every spec-reading command shares: reading a spec with its
 * --set overrides, reporting errors against the right source, and building
 * a model's graph through the pipeline. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rt.h"
#include "tools.h"

bool cli_is_spec(const char *path)
{
	size_t n = strlen(path);
	return n > 4 && strcmp(path + n - 4, ".rev") == 0;
}

bool cli_model_add_set(cli_model *m, const char *cmd, const char *assignment)
{
	if (m->nsets == CLI_MAX_SETS) {
		cli_usage_error(cmd, "more than %d --set options", CLI_MAX_SETS);
		return false;
	}
	m->sets[m->nsets++] = assignment;
	return true;
}

void cli_model_report(const cli_model *m, const ir_diags *d)
{
	cli_source srcs[2] = {{m->path, m->text, m->len}, {"--set", m->sets_text, m->sets_len}};
	cli_report(d, srcs, 2);
}

bool cli_model_load(cli_model *m, const char *path)
{
	rt_err e;
	m->path = path;
	if (!rt_file_read(path, FE_MAX_FILE, &m->text, &m->len, &e)) {
		cli_error("%s", e.msg);
		return false;
	}
	/* All --set strings, one per line, so a caret can point into one. */
	size_t len = 0;
	for (int i = 0; i < m->nsets; i++)
		len += strlen(m->sets[i]) + 1;
	m->sets_text = calloc(1, len + 1);
	if (!m->sets_text)
		IR_DIE("out of memory");
	for (int i = 0; i < m->nsets; i++) {
		strcat(m->sets_text, m->sets[i]);
		strcat(m->sets_text, "\n");
	}
	m->sets_len = len;

	ir_diags d;
	ir_diags_init(&d);
	bool ok = fe_spec_parse(&m->spec, path, m->text, m->len, &d);
	for (int i = 0; ok && i < m->nsets; i++)
		ok = fe_spec_set(&m->spec, m->sets[i], i + 1, &d);
	ok = ok && fe_spec_check(&m->spec, &d);
	if (!ok) {
		cli_model_report(m, &d);
		cli_model_free(m); /* callers may return without it */
	}
	ir_diags_free(&d);
	return ok;
}

void cli_model_free(cli_model *m)
{
	free(m->text);
	free(m->sets_text);
	m->text = m->sets_text = NULL;
}

ir_graph *cli_model_plan(const cli_model *m, ir_dtype dt, fe_lower_mode mode, ps_ctx *ctx,
	const ps_options *opts)
{
	return drv_spec_plan(&m->spec, dt, mode, ctx, opts);
}

ir_graph *cli_model_graph(const cli_model *m, ir_dtype dt, fe_lower_mode mode, ps_ctx *ctx,
	const ps_options *opts)
{
	ir_graph *g = cli_model_plan(m, dt, mode, ctx, opts);
	if (!g)
		cli_model_report(m, &ctx->diags);
	return g;
}

const ps_options cli_eval_passes = {.only = DRV_EVAL_PASSES};

const ps_options *cli_eval_options(const ps_options *user, ps_options *out, char *only, size_t n)
{
	*out = *user;
	out->dump_tag = "eval";
	out->only = only;
	size_t used = 0, len;
	only[0] = 0;
	const char *p = cli_eval_passes.only, *pass;
	while (ps_list_next(&p, &pass, &len))
		if ((!user->only || ps_list_has(user->only, pass, len)) && used + len + 2 <= n)
			used += (size_t)snprintf(only + used, n - used, "%s%.*s", used ? "," : "", (int)len, pass);
	return out;
}

bool cli_parse_dtype(const char *cmd, const char *val, ir_dtype *out)
{
	if (strcmp(val, "f32") == 0)
		*out = IR_F32;
	else if (strcmp(val, "f64") == 0)
		*out = IR_F64;
	else {
		cli_usage_error(cmd, "--dtype must be f32 or f64, not '%s'", val);
		return false;
	}
	return true;
}

_Static_assert(PS_STRATEGY_DEFAULT == PS_REVNET, "CLI_STRATEGY_DEFAULT must name PS_STRATEGY_DEFAULT");

bool cli_parse_strategy(const char *cmd, const char *val, ps_strategy *out)
{
	if (ps_strategy_lookup(val, out))
		return true;
	cli_usage_error(cmd, "--strategy must be store, revnet or checkpoint, not '%s'", val);
	return false;
}

bool cli_parse_int(const char *cmd, const char *opt, const char *val, int64_t lo, int64_t hi,
	int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(val, &end, 10);
	if (!*val || *end || errno || v < lo || v > hi) {
		cli_usage_error(cmd, "%s must be an integer from %lld to %lld, not '%s'", opt,
			(long long)lo, (long long)hi, val);
		return false;
	}
	*out = v;
	return true;
}
