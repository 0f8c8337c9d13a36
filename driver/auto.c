/* auto.c: strategy auto under a budget (revc_auto_choose): the dynamic
 * program of passes/auto.c over the model's units, calibrated against the
 * real planner and confirmed by it.
 *
 * The program's model leaves out what the units do not change (parameters,
 * optimiser state, the stem, the head, workspace): two constants, taken
 * from the plans of storing everything and of the minimum-memory decisions
 * (every unit inverted or, with a downsample, recomputed: revnet's), so
 * the model agrees with the planner on both.  Each choice is then planned for real; when the
 * planned total exceeds the budget, the program's budget is lowered by the
 * excess below the choice's modelled peak and it chooses again. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Plans at most: one by one down the model's order, then by the excess. */
enum { WALK_TRIES = 24, MAX_TRIES = 40, IMPROVE_PLANS = 48 };

/* The training step after autodiff, decided nothing (strategy store). */
static ir_graph *step_graph(revc_model *m, const revc_options *o, revc_error **err)
{
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.strategy = PS_STORE;
	drv_engine e;
	drv_engine_init(&e, o->engine, o->threads, o->cpu);
	drv_engine_plan(&e, &ctx);
	ps_options popts;
	memset(&popts, 0, sizeof popts);
	popts.stop_after = "autodiff";
	ir_graph *g = m->is_spec ? drv_model_plan_spec(m, drv_dtype(o->dtype), FE_LOWER_TRAIN, &ctx, &popts, err)
				 : drv_model_plan_ir(m, &ctx, &popts, err);
	if (g)
		ir_graph_renumber(g);
	ps_ctx_free(&ctx);
	drv_engine_free(&e);
	return g;
}

/* The planned total of decisions d (letters). */
static bool plan_total(revc_model *m, const revc_options *o, const char *d, int64_t *total, revc_error **err)
{
	revc_options to = *o;
	to.strategy = REVC_AUTO;
	to.decisions = d;
	to.dump_after = to.dump_dir = to.stop_after = to.passes = NULL;
	to.verify_each = to.measure = false;
	revc_memory r;
	if (!revc_memory_plan(m, REVC_AUTO, &to, &r, err))
		return false;
	*total = r.total_bytes;
	return true;
}

/* Below the minimum-memory decisions d (total *total): while some unit's
 * decision can change so that the plan needs less, take the change that
 * needs least, until the total fits budget.  At most IMPROVE_PLANS plans. */
static bool lower(revc_model *m, const revc_options *o, const ps_auto_model *am, int64_t budget, ps_keep *d,
	int64_t *total, revc_auto *out, revc_error **err)
{
	static const ir_unit_keep alt[] = {IR_KEEP_STORE, IR_KEEP_RECOMPUTE, IR_KEEP_INVERT, IR_KEEP_RERUN};
	int n = am->n, plans = 0;
	char s[REVC_MAX_UNITS + 1];
	for (bool better = true; better && *total > budget && plans < IMPROVE_PLANS;) {
		better = false;
		int bk = -1;
		ir_unit_keep bd = IR_KEEP_NONE;
		int64_t bt = *total;
		for (int k = 0; k < n && plans < IMPROVE_PLANS; k++) {
			ps_keep was = d[k];
			for (size_t j = 0; j < sizeof alt / sizeof alt[0] && plans < IMPROVE_PLANS; j++) {
				if (alt[j] == was.keep || (alt[j] == IR_KEEP_INVERT && !am->unit[k].invertible))
					continue;
				d[k] = (ps_keep){alt[j], k};
				ps_keep_format(d, n, s);
				int64_t t;
				if (!plan_total(m, o, s, &t, err))
					return false;
				plans++;
				if (t < bt) {
					bt = t;
					bk = k;
					bd = alt[j];
				}
				d[k] = was;
			}
		}
		if (bk >= 0) {
			d[bk] = (ps_keep){bd, bk};
			*total = bt;
			better = true;
		}
	}
	out->plans += plans;
	return true;
}

/* The planner's word on the program's choice d (fitting, total in out):
 * while some unit's decision can change to a cheaper one whose plan still
 * fits, take the cheapest such change.  At most IMPROVE_PLANS plans. */
static bool improve(revc_model *m, const revc_options *o, const ps_auto_model *am, int64_t budget, ps_keep *d,
	revc_auto *out, revc_error **err)
{
	static const ir_unit_keep alt[] = {IR_KEEP_STORE, IR_KEEP_RECOMPUTE, IR_KEEP_INVERT, IR_KEEP_RERUN};
	int n = am->n, plans = 0;
	char s[REVC_MAX_UNITS + 1];
	for (bool better = true; better && plans < IMPROVE_PLANS;) {
		better = false;
		double base = ps_auto_model_cost(am, d), best = base;
		int bk = -1;
		ir_unit_keep bd = IR_KEEP_NONE;
		int64_t bt = 0;
		for (int k = 0; k < n && plans < IMPROVE_PLANS; k++) {
			ps_keep was = d[k];
			for (size_t j = 0; j < sizeof alt / sizeof alt[0] && plans < IMPROVE_PLANS; j++) {
				if (alt[j] == was.keep || (alt[j] == IR_KEEP_INVERT && !am->unit[k].invertible))
					continue;
				if (was.keep == IR_KEEP_RERUN && was.from != k)
					continue; /* inside a segment */
				d[k] = (ps_keep){alt[j], k};
				double c = ps_auto_model_cost(am, d);
				int64_t total;
				if (c < best) {
					ps_keep_format(d, n, s);
					if (!plan_total(m, o, s, &total, err))
						return false;
					plans++;
					if (total <= budget) {
						best = c;
						bk = k;
						bd = alt[j];
						bt = total;
					}
				}
				d[k] = was;
			}
		}
		if (bk >= 0) {
			d[bk] = (ps_keep){bd, bk};
			out->total_bytes = bt;
			out->improved++;
			better = true;
		}
	}
	out->plans += plans;
	return true;
}

bool revc_auto_choose(revc_model *m, const revc_options *o, int64_t budget, revc_auto *out, revc_error **err)
{
	revc_options defaults;
	if (!o) {
		revc_options_init(&defaults);
		o = &defaults;
	}
	memset(out, 0, sizeof *out);
	ir_graph *g = step_graph(m, o, err);
	if (!g)
		return false;
	ps_auto_model am;
	ps_auto_model_build(g, &am);
	ir_graph_free(g);
	int n = am.n;
	bool ok = false;
	ps_keep *d = calloc((size_t)n + 1, sizeof *d), *low = calloc((size_t)n + 1, sizeof *low);
	if (!d || !low)
		IR_DIE("out of memory");
	if (n == 0 || n > REVC_MAX_UNITS) {
		drv_errorf(err, REVC_ERR_USAGE, "strategy auto: %s has %d reversible units (it decides for 1 to %d)", m->name,
			n, REVC_MAX_UNITS);
		goto done;
	}
	out->units = n;
	out->step_flops = am.step_flops;
	char low_s[REVC_MAX_UNITS + 1];
	for (int k = 0; k < n; k++)
		low[k] = (ps_keep){am.unit[k].invertible ? IR_KEEP_INVERT : IR_KEEP_RECOMPUTE, k};
	ps_keep_format(low, n, low_s);
	revc_options lo = *o;
	lo.strategy = REVC_AUTO;
	lo.decisions = low_s;
	lo.dump_after = lo.dump_dir = lo.stop_after = lo.passes = NULL;
	lo.verify_each = lo.measure = false;
	int64_t fwd_end, bwd_peak;
	if (!drv_memory_phases(m, &lo, &out->minimum_bytes, &fwd_end, &bwd_peak, err))
		goto done;
	out->plans = 1;
	ps_auto_model_calibrate(&am, low, fwd_end, bwd_peak);
	if (budget < 0) { /* no budget: the fastest */
		for (int k = 0; k < n; k++)
			d[k] = (ps_keep){IR_KEEP_STORE, k};
	} else if (budget < out->minimum_bytes) {
		if (!lower(m, o, &am, budget, low, &out->minimum_bytes, out, err))
			goto done;
	}
	if (budget >= 0 && budget < out->minimum_bytes) {
		ps_keep_format(low, n, low_s);
		char b1[32], b2[32];
		revc_format_bytes(b1, sizeof b1, out->minimum_bytes);
		revc_format_bytes(b2, sizeof b2, budget);
		drv_errorf(err, REVC_ERR_BUDGET,
			"strategy auto: the budget of %s is below the minimum, %s (%lld bytes: decisions %s)", b2, b1,
			(long long)out->minimum_bytes, low_s);
		goto done;
	}
	int64_t model_budget = budget;
	if (budget >= 0 && budget >= out->minimum_bytes && ps_auto_model_peak(&am, low) > budget)
		model_budget = -1; /* only what lower found fits */
	for (int tries = 0; budget >= 0; tries++) {
		if (tries == MAX_TRIES || !ps_auto_solve(&am, model_budget, d)) {
			memcpy(d, low, (size_t)n * sizeof *d); /* fits: planned above */
			out->total_bytes = out->minimum_bytes;
			break;
		}
		ps_keep_format(d, n, out->decisions);
		if (!plan_total(m, o, out->decisions, &out->total_bytes, err))
			goto done;
		out->plans++;
		if (out->total_bytes <= budget)
			break;
		out->retries++;
		/* Next the cheapest the model puts lower, one by one at first. */
		int64_t mp = ps_auto_model_peak(&am, d);
		model_budget = tries < WALK_TRIES ? mp - 1 : mp - (out->total_bytes - budget);
	}
	if (budget >= 0 && !improve(m, o, &am, budget, d, out, err))
		goto done;
	ps_keep_format(d, n, out->decisions);
	if (budget < 0) {
		if (!plan_total(m, o, out->decisions, &out->total_bytes, err))
			goto done;
		out->plans++;
	}
	out->model_bytes = ps_auto_model_peak(&am, d);
	out->recompute_flops = ps_auto_model_cost(&am, d);
	ok = true;
done:
	free(d);
	free(low);
	ps_auto_model_free(&am);
	return ok;
}

bool revc_auto_cost(revc_model *m, const revc_options *o, const char *decisions, double *recompute_flops,
	revc_error **err)
{
	revc_options defaults;
	if (!o) {
		revc_options_init(&defaults);
		o = &defaults;
	}
	ir_graph *g = step_graph(m, o, err);
	if (!g)
		return false;
	ps_auto_model am;
	ps_auto_model_build(g, &am);
	ir_graph_free(g);
	ps_keep *d = calloc((size_t)am.n + 1, sizeof *d);
	if (!d)
		IR_DIE("out of memory");
	char why[200];
	bool ok = ps_keep_parse(decisions, am.n, d, why, sizeof why);
	if (ok)
		*recompute_flops = ps_auto_model_cost(&am, d);

	else
		drv_errorf(err, REVC_ERR_USAGE, "decisions '%s' for %s: %s", decisions, m->name, why);
	free(d);
	ps_auto_model_free(&am);
	return ok;
}
