/* auto_plan.c: revc_auto_plan, the step every caller of strategy auto
 * makes: its decisions chosen under the options (the minimum, or the
 * fastest within a budget) unless the options give them, then the plan
 * under them.  revc mem, its --max-batch search, revc_model_compile, the
 * gradient check, emission and the Python module's memory calls share it,
 * so they cannot choose apart.
 *
 * requires: a model (a spec, or an IR file's step); guarantees: *out is
 * revc_memory_plan's figures for exactly the decisions *au reports (o's
 * own, when it gives them and *au is all zero). */
#include <string.h>

#include "revc.h"

bool revc_auto_plan(revc_model *m, revc_strategy s, const revc_options *o, int64_t budget, revc_auto *au,
	revc_memory *out, revc_error **err)
{
	revc_options defaults;
	if (!o) {
		revc_options_init(&defaults);
		o = &defaults;
	}
	revc_auto mine;
	if (!au)
		au = &mine;
	memset(au, 0, sizeof *au);
	revc_options q = *o;
	if (s == REVC_AUTO && !o->decisions) {
		if (budget < 0)
			budget = o->budget >= 0 ? o->budget : o->max_memory;
		if (o->minimum ? !revc_auto_minimum(m, o, au, err) : !revc_auto_choose(m, o, budget, au, err))
			return false;
		q.decisions = au->decisions;
	}
	return !out || revc_memory_plan(m, s, &q, out, err);
}
