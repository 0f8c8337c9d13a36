/* sweep.c: the memory/time frontier of a model's training step
 * (revc_sweep_run, `revc mem --sweep`): strategy auto's choices for the
 * budgets from the minimum-memory decisions' total up to store's, with the
 * fixed strategies on the same axes, and the largest batch whose best
 * schedule fits a size (revc_max_batch, `revc mem --max-batch`).
 *
 * Everything here goes through the public entry points of strategy auto
 * (revc_auto_choose, revc_auto_cost) and of the planner
 * (revc_memory_plan): a point is what `revc mem --strategy auto --budget B`
 * reports for its budget B.  The walk starts at store's total and lowers
 * the budget below each choice's planned total (by at least the span over
 * max_points), then tries the minimum itself and stops at the first budget
 * auto cannot meet; the three fixed strategies' totals are budgets too.
 * The frontier keeps the choices no other choice beats in both total and
 * cost: auto is a heuristic above the chain's exact optimum, so a choice
 * at a larger budget can cost more than one at a smaller. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Seconds a FLOP of the cost model takes on the machine the constant was
 * measured on (docs/mem.md): what "predicted seconds" scale FLOPs by. */
#define SECONDS_PER_FLOP (1.0 / REVC_SWEEP_FLOP_RATE)

void revc_sweep_options_init(revc_sweep_options *so)
{
	memset(so, 0, sizeof *so);
	so->max_points = 40;
}

static revc_options quiet(const revc_options *o)
{
	revc_options q = *o;
	q.dump_after = q.dump_dir = q.dump_tag = q.stop_after = q.passes = NULL;
	q.verify_each = q.measure = false;
	return q;
}

/* The planned figures and cost of strategy s (REVC_AUTO: decisions d). */
static bool point(revc_model *m, const revc_options *o, revc_strategy s, const char *d, double step_flops,
	revc_sweep_point *p, revc_error **err)
{
	revc_options q = quiet(o);
	q.strategy = s;
	q.decisions = s == REVC_AUTO ? d : NULL;
	revc_memory r;
	if (!revc_memory_plan(m, s, &q, &r, err))
		return false;
	p->strategy = s;
	snprintf(p->decisions, sizeof p->decisions, "%s", r.decisions);
	p->total_bytes = r.total_bytes;
	p->saved_transient_bytes = r.saved_transient_peak_bytes;
	p->recompute_flops = 0;
	if (r.decisions[0] && !revc_auto_cost(m, &q, r.decisions, &p->recompute_flops, err))
		return false;
	p->flops = step_flops + p->recompute_flops;
	p->predicted_seconds = p->flops * SECONDS_PER_FLOP;
	p->measured_seconds = p->measured_cpu_seconds = -1;
	return true;
}

/* Auto's choice within budget into p (*fits false when the budget is
 * below every schedule auto finds). */
static bool choose(revc_model *m, const revc_options *o, int64_t budget, revc_sweep *out, revc_sweep_point *p,
	bool *fits, revc_error **err)
{
	revc_options q = quiet(o);
	revc_auto au;
	revc_error *e = NULL;
	*fits = revc_auto_choose(m, &q, budget, &au, &e);
	if (!*fits) {
		if (revc_error_kind_of(e) != REVC_ERR_BUDGET) {
			*err = e;
			return false;
		}
		revc_error_free(e);
		return true;
	}
	out->plans += au.plans;
	out->choices++;
	out->step_flops = au.step_flops;
	if (out->minimum_bytes < 0 || au.minimum_bytes < out->minimum_bytes)
		out->minimum_bytes = au.minimum_bytes;
	if (!point(m, &q, REVC_AUTO, au.decisions, au.step_flops, p, err))
		return false;
	p->budget_bytes = budget;
	return true;
}

static bool push(revc_sweep *s, const revc_sweep_point *p, int *cap)
{
	for (int i = 0; i < s->npoints; i++)
		if (strcmp(s->points[i].decisions, p->decisions) == 0) {
			if (p->budget_bytes < s->points[i].budget_bytes)
				s->points[i].budget_bytes = p->budget_bytes; /* the least budget it answers */
			return true;
		}
	if (s->npoints == *cap) {
		*cap = *cap ? 2 * *cap : 16;
		revc_sweep_point *np = realloc(s->points, (size_t)*cap * sizeof *np);
		if (!np)
			IR_DIE("out of memory");
		s->points = np;
	}
	s->points[s->npoints++] = *p;
	return true;
}

static int by_total_desc(const void *a, const void *b)
{
	const revc_sweep_point *x = a, *y = b;
	if (x->total_bytes != y->total_bytes)
		return x->total_bytes < y->total_bytes ? 1 : -1;
	return x->flops < y->flops ? -1 : x->flops > y->flops;
}

/* Keeps the points no other beats in both total and cost, by total
 * descending (so cost ascending). */
static void frontier(revc_sweep *s)
{
	qsort(s->points, (size_t)s->npoints, sizeof *s->points, by_total_desc);
	bool *beaten = calloc((size_t)s->npoints + 1, sizeof *beaten);
	if (!beaten)
		IR_DIE("out of memory");
	for (int i = 0; i < s->npoints; i++) {
		const revc_sweep_point *a = &s->points[i];
		for (int j = 0; j < s->npoints && !beaten[i]; j++) {
			const revc_sweep_point *b = &s->points[j];
			beaten[i] = j != i && b->total_bytes <= a->total_bytes && b->flops <= a->flops
				&& (b->total_bytes < a->total_bytes || b->flops < a->flops || j < i);
		}
	}
	int k = 0;
	for (int i = 0; i < s->npoints; i++) {
		if (beaten[i])
			s->dominated++;
		else
			s->points[k++] = s->points[i];
	}
	s->npoints = k;
	free(beaten);
}

bool revc_sweep_run(revc_model *m, const revc_options *o, const revc_sweep_options *so, revc_sweep *out,
	revc_error **err)
{
	revc_options defaults;
	revc_sweep_options sdef;
	if (!o) {
		revc_options_init(&defaults);
		o = &defaults;
	}
	if (!so) {
		revc_sweep_options_init(&sdef);
		so = &sdef;
	}
	memset(out, 0, sizeof *out);
	out->minimum_bytes = -1;
	int cap = 0;
	/* Store's cost is the step's FLOPs: auto without a budget says them. */
	revc_sweep_point p;
	bool fits;
	if (!choose(m, o, -1, out, &p, &fits, err))
		goto fail;
	double step = out->step_flops;
	static const revc_strategy fixed[] = {REVC_STORE, REVC_REVNET, REVC_CHECKPOINT};
	for (int i = 0; i < 3; i++)
		if (!point(m, o, fixed[i], NULL, step, &out->fixed[i], err))
			goto fail;
	int64_t top = out->fixed[0].total_bytes, budget = top, tried_min = 0;
	int maxp = so->max_points > 1 ? so->max_points : 2;
	for (int n = 0;; n++) {
		if (so->on_point)
			so->on_point(so->user, n, budget);
		if (!choose(m, o, budget, out, &p, &fits, err))
			goto fail;
		if (!fits)
			break;
		push(out, &p, &cap);
		int64_t stride = (top - out->minimum_bytes) / maxp, next = p.total_bytes - 1;
		if (budget - stride < next)
			next = budget - stride;
		if (next < out->minimum_bytes && !tried_min++)
			next = out->minimum_bytes;
		if (next < 0)
			break;
		budget = next;
	}
	/* Each fixed strategy's own total, as a budget. */
	for (int i = 0; i < 3; i++) {
		if (!choose(m, o, out->fixed[i].total_bytes, out, &p, &fits, err))
			goto fail;
		if (fits)
			push(out, &p, &cap);
	}
	frontier(out);
	return true;
fail:
	revc_sweep_free(out);
	return false;
}

void revc_sweep_free(revc_sweep *s)
{
	free(s->points);
	s->points = NULL;
	s->npoints = 0;
}

const revc_sweep_point *revc_sweep_at(const revc_sweep *s, int64_t budget)
{
	for (int i = 0; i < s->npoints; i++) /* by total descending */
		if (s->points[i].total_bytes <= budget)
			return &s->points[i];
	return NULL;
}
