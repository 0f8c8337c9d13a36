/* tools_api.c: revc.h's ahead-of-time emission and drift report, over the
 * driver's tools (aot.c, drift.c).  Both work from a model's spec: an IR
 * model has neither. */
#include <stdlib.h>

#include "internal.h"
#include "tools.h"

static bool need_spec(const revc_model *m, const char *what, revc_error **err)
{
	if (m->is_spec)
		return true;
	return drv_errorf(err, REVC_ERR_USAGE, "%s needs a model from a spec; %s is an IR file", what, m->name);
}

static bool spec_error(const revc_model *m, const ir_diags *d, revc_error **err)
{
	const drv_spec *s = &m->spec;
	drv_source srcs[2] = {{s->path, s->text, s->len}, {"--set", s->sets_text, s->sets_len}};
	return drv_error_diags(err, REVC_ERR_USER, d, srcs, 2);
}

void revc_emit_options_init(revc_emit_options *e)
{
	*e = (revc_emit_options){.strategy = REVC_REVNET, .budget = -1};
}

bool revc_emit_default_prefix(const char *path, char *buf, size_t n)
{
	bool shared;
	return drv_aot_default_name(path, buf, n, &shared);
}

bool revc_emit_prefix_ok(const char *s)
{
	return drv_aot_valid_prefix(s);
}

bool revc_emit_with(const revc_model *m, const char *path, revc_emit_options *e, revc_error **err)
{
	if (!drv_model_settings(m))
		return drv_no_settings(m, "ahead-of-time emission", err);
	if (drv_model_dtype(m, REVC_F32) != REVC_F32)
		return drv_errorf(err, REVC_ERR_USER, "ahead-of-time emission is f32, and %s is an f64 graph", m->ir_path);
	if (!m->is_spec && !drv_ir_evaluable(m->ir))
		return drv_errorf(err, REVC_ERR_USER, "ahead-of-time emission needs the forward graph, but %s lists passes "
			"after shape", m->ir_path);
	char name[64];
	if (!path || !revc_emit_default_prefix(path, name, sizeof name))
		return drv_errorf(err, REVC_ERR_USAGE, "the output must be a libNAME.so or NAME.o file, not '%s'",
			path ? path : "(none)");
	if (e->prefix)
		snprintf(name, sizeof name, "%s", e->prefix);
	if (!drv_aot_valid_prefix(name))
		return drv_errorf(err, REVC_ERR_USAGE, "'%s' is not a C identifier", name);
	revc_auto au;
	const char *decisions = e->decisions;
	if (e->strategy == REVC_AUTO && !decisions) {
		revc_options ao;
		revc_options_init(&ao);
		ao.engine = REVC_JIT;
		ao.cpu = e->cpu;
		ao.minimum = e->minimum;
		/* choosing plans the model; it changes nothing the caller sees */
		if (!revc_auto_plan((revc_model *)m, REVC_AUTO, &ao, e->budget, &au, NULL, err))
			return false;
		decisions = au.decisions;
	}
	drv_aot_options o = {.out = path, .header = e->header, .prefix = name, .strategy = (ps_strategy)e->strategy,
		.cpu = e->cpu, .dump_llvm = e->dump_llvm, .source = m->is_spec ? m->spec.path : m->ir_path,
		.decisions = decisions};
	drv_aot a;
	ir_diags d;
	ir_diags_init(&d);
	bool begun = drv_aot_begin(&a, &o, &d);
	bool ok = begun && drv_aot_emit(&a, m, &d);
	if (!ok)
		begun ? drv_model_error(m, &d, err) : drv_error_diags(err, REVC_ERR_USER, &d, NULL, 0);
	e->arena_bytes = a.arena_bytes;
	drv_aot_end(&a);
	ir_diags_free(&d);
	return ok;
}

bool revc_emit(const revc_model *m, const char *path, const char *header, const char *prefix, revc_error **err)
{
	revc_emit_options e;
	revc_emit_options_init(&e);
	e.header = header;
	e.prefix = prefix;
	if (m->compiled) {
		e.strategy = m->opts.strategy;
		e.cpu = m->opts.cpu;
	}
	return revc_emit_with(m, path, &e, err);
}

bool revc_drift(const revc_model *m, const revc_options *o, uint64_t seed, revc_drift_report *r, revc_error **err)
{
	if (!need_spec(m, "the drift report", err))
		return false;
	revc_options opts;
	drv_model_options(m, o, &opts);
	if (!revc_options_check(&opts, err))
		return false;
	drv_engine e;
	drv_engine_init(&e, opts.engine, opts.threads, opts.cpu);
	ir_diags d;
	ir_diags_init(&d);
	bool ok = drv_drift(&m->spec.spec, &e, seed, r, &d);
	if (!ok)
		spec_error(m, &d, err);
	ir_diags_free(&d);
	drv_engine_free(&e);
	return ok;
}

char *revc_drift_json(const revc_model *m, const revc_options *o, uint64_t seed, revc_error **err)
{
	drv_drift_report r;
	char *json = NULL;
	if (revc_drift(m, o, seed, &r, err)) {
		json = drv_drift_json(&r);
		revc_drift_report_free(&r);
	}
	return json;
}
