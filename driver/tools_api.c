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

bool revc_emit(const revc_model *m, const char *path, const char *header, const char *prefix, revc_error **err)
{
	if (!need_spec(m, "ahead-of-time emission", err))
		return false;
	char name[64];
	bool shared;
	if (!path || !drv_aot_default_name(path, name, sizeof name, &shared))
		return drv_errorf(err, REVC_ERR_USAGE, "the output must be a libNAME.so or NAME.o file, not '%s'",
			path ? path : "(none)");
	if (prefix)
		snprintf(name, sizeof name, "%s", prefix);
	if (!drv_aot_valid_prefix(name))
		return drv_errorf(err, REVC_ERR_USAGE, "'%s' is not a C identifier", name);
	drv_aot_options o = {.out = path, .header = header, .prefix = name, .strategy = (ps_strategy)m->opts.strategy,
		.cpu = m->opts.cpu, .source = m->spec.path};
	drv_aot a;
	ir_diags d;
	ir_diags_init(&d);
	bool begun = drv_aot_begin(&a, &o, &d);
	bool ok = begun && drv_aot_emit(&a, &m->spec.spec, &d);
	if (!ok)
		begun ? spec_error(m, &d, err) : drv_error_diags(err, REVC_ERR_USER, &d, NULL, 0);
	drv_aot_end(&a);
	ir_diags_free(&d);
	return ok;
}

char *revc_drift_json(const revc_model *m, uint64_t seed, revc_error **err)
{
	if (!need_spec(m, "the drift report", err))
		return NULL;
	drv_drift_report r;
	ir_diags d;
	ir_diags_init(&d);
	char *json = NULL;
	if (drv_drift(&m->spec.spec, seed, &r, &d)) {
		json = drv_drift_json(&r);
		drv_drift_report_free(&r);
	} else {
		spec_error(m, &d, err);
	}
	ir_diags_free(&d);
	return json;
}
