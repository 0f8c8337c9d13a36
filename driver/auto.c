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
	if (!plan_total(m, o, low_s, &out->minimum_bytes, err))
		goto done;
	out->plans = 1;
	char store_s[REVC_MAX_UNITS + 1];
	int64_t store_total;
	for (int k = 0; k < n; k++)
		d[k] = (ps_keep){IR_KEEP_STORE, k};
	ps_keep_format(d, n, store_s);
	if (!plan_total(m, o, store_s, &store_total, err))
		goto done;
	out->plans = 2;
	ps_auto_model_calibrate(&am, d, store_total, low, out->minimum_bytes);
	if (budget < 0) { /* no budget: the fastest */
		for (int k = 0; k < n; k++)
			d[k] = (ps_keep){IR_KEEP_STORE, k};
	} else if (budget < out->minimum_bytes) {
		char b1[32], b2[32];
		revc_format_bytes(b1, sizeof b1, out->minimum_bytes);
		revc_format_bytes(b2, sizeof b2, budget);
		drv_errorf(err, REVC_ERR_BUDGET,
			"strategy auto: the budget of %s is below the minimum, %s (%lld bytes: decisions %s)", b2, b1,
			(long long)out->minimum_bytes, low_s);
		goto done;
	}
	int64_t model_budget = budget;
	for (int tries = 0; budget >= 0; tries++) {
		if (tries == 16 || !ps_auto_solve(&am, model_budget, d)) {
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
		model_budget = ps_auto_model_peak(&am, d) - (out->total_bytes - budget);
	}
	ps_keep_format(d, n, out->decisions);
	if (budget < 0)
		out->total_bytes = store_total;
	out->model_bytes = ps_auto_model_peak(&am, d);
	out->recompute_flops = ps_auto_model_cost(&am, d);
	ok = true;
done:
	free(d);
	free(low);
	ps_auto_model_free(&am);
	return ok;
}
