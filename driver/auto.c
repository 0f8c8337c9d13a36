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
enum { WALK_TRIES = 24, MAX_TRIES = 40, IMPROVE_PLANS = 48, PROBE_STEPS = 8, PAIR_PLANS = 32, TRIPLE_PLANS = 128, PAIR_ROUNDS = 4,
	PAIR_PLACES = 12, TRIPLE_PLACES = 8, ALL_PLANS = 512 };

/* Decisions under way: each unit's, and each segment's (recomputed?). */
typedef struct {
	const ps_auto_model *am;
	ps_keep *d;
	bool *rec;
	int *at; /* the segments' places */
} choice;

static void choice_init(choice *c, const ps_auto_model *am)
{
	c->am = am;
	c->d = calloc((size_t)am->n + 1, sizeof *c->d);
	c->rec = calloc((size_t)am->nseg + 1, sizeof *c->rec);
	c->at = calloc((size_t)am->nseg + 1, sizeof *c->at);
	if (!c->d || !c->rec || !c->at)
		IR_DIE("out of memory");
	for (int j = 0; j < am->nseg; j++)
		c->at[j] = am->seg[j].at;
}

static void choice_copy(choice *to, const choice *from)
{
	memcpy(to->d, from->d, (size_t)from->am->n * sizeof *to->d);
	memcpy(to->rec, from->rec, (size_t)from->am->nseg * sizeof *to->rec);
}

static void choice_free(choice *c)
{
	free(c->d);
	free(c->rec);
	free(c->at);
}

static void choice_letters(const choice *c, char *buf)
{
	ps_decisions_format(c->d, c->am->n, c->at, c->rec, c->am->nseg, buf);
}

static double choice_cost(const choice *c)
{
	return ps_auto_model_cost(c->am, c->d, c->rec);
}

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

static revc_options plan_options(const revc_options *o, const char *d)
{
	revc_options to = *o;
	to.strategy = REVC_AUTO;
	to.decisions = d;
	to.dump_after = to.dump_dir = to.stop_after = to.passes = NULL;
	to.verify_each = to.measure = false;
	return to;
}

/* The planned total of choice c: DRV_TOO_LARGE, more than any budget, when
 * its arena would be larger than the planner's limit (IR_MAX_BYTES). */
static bool plan_total(revc_model *m, const revc_options *o, const choice *c, int64_t *total, revc_error **err)
{
	char s[REVC_MAX_LETTERS + 1];
	choice_letters(c, s);
	revc_options to = plan_options(o, s);
	return drv_memory_total(m, &to, total, err);
}

/* The single changes of a choice: unit k to decision alt (k < n), or
 * segment k - n stored or recomputed the other way. */
static const ir_unit_keep alts[] = {IR_KEEP_STORE, IR_KEEP_RECOMPUTE, IR_KEEP_INVERT, IR_KEEP_RERUN};
enum { NALT = sizeof alts / sizeof alts[0] };

/* Makes change (k, j) on c (false: not a change there), undone by the
 * same call with undo. */
static bool change(choice *c, int k, int j, ps_keep *was, bool undo)
{
	int n = c->am->n;
	if (k >= n) {
		if (j > 0 || !ps_auto_seg_choice(c->am, k - n))
			return false;
		c->rec[k - n] = !c->rec[k - n];
		return true;
	}
	if (undo) {
		c->d[k] = *was;
		return true;
	}
	*was = c->d[k];
	if (alts[j] == was->keep || (alts[j] == IR_KEEP_INVERT && !c->am->unit[k].invertible))
		return false;
	if (was->keep == IR_KEEP_RERUN && (was->from != k || (k + 1 < n && c->d[k + 1].keep == IR_KEEP_RERUN &&
							      c->d[k + 1].from == k)))
		return false; /* inside a segment, or its head */
	c->d[k] = (ps_keep){alts[j], k};
	return true;
}

/* Below the minimum-memory decisions c (total *total): while some single
 * change makes the plan need less, take the one that needs least, until the
 * total fits budget (< 0: as low as it goes).  At most IMPROVE_PLANS plans. */
static bool lower(revc_model *m, const revc_options *o, int64_t budget, choice *c, int64_t *total, revc_auto *out,
	revc_error **err)
{
	int n = c->am->n, plans = 0;
	for (bool better = true; better && *total > budget && plans < IMPROVE_PLANS;) {
		better = false;
		int bk = -1, bj = 0;
		int64_t bt = *total;
		for (int k = 0; k < n + c->am->nseg && plans < IMPROVE_PLANS; k++)
			for (int j = 0; j < NALT && plans < IMPROVE_PLANS; j++) {
				ps_keep was;
				if (!change(c, k, j, &was, false))
					continue;
				int64_t t;
				bool ok = plan_total(m, o, c, &t, err);
				change(c, k, j, &was, true);
				if (!ok)
					return false;
				plans++;
				if (t < bt) {
					bt = t;
					bk = k;
					bj = j;
				}
			}
		if (bk >= 0) {
			ps_keep was;
			change(c, bk, bj, &was, false);
			*total = bt;
			better = true;
		}
	}
	out->plans += plans;
	return true;
}

/* The planner's word on the program's choice c (fitting, total in out):
 * while some single change to a cheaper choice still fits when planned,
 * take the cheapest such change.  At most IMPROVE_PLANS plans. */
static bool improve(revc_model *m, const revc_options *o, int64_t budget, choice *c, revc_auto *out,
	revc_error **err)
{
	int n = c->am->n, plans = 0;
	for (bool better = true; better && plans < IMPROVE_PLANS;) {
		better = false;
		double best = choice_cost(c);
		int bk = -1, bj = 0;
		int64_t bt = 0;
		for (int k = 0; k < n + c->am->nseg && plans < IMPROVE_PLANS; k++)
			for (int j = 0; j < NALT && plans < IMPROVE_PLANS; j++) {
				ps_keep was;
				if (!change(c, k, j, &was, false))
					continue;
				double cost = choice_cost(c);
				int64_t total = 0;
				bool ok = true, planned = cost < best;
				if (planned)
					ok = plan_total(m, o, c, &total, err);
				change(c, k, j, &was, true);
				if (!ok)
					return false;
				plans += planned;
				if (planned && total <= budget) {
					best = cost;
					bk = k;
					bj = j;
					bt = total;
				}
			}
		if (bk >= 0) {
			ps_keep was;
			change(c, bk, bj, &was, false);
			out->total_bytes = bt;
			out->improved++;
			better = true;
		}
	}
	out->plans += plans;
	return true;
}

/* A change of up to three places (k[i] < 0: none), and the cost of the
 * choice it makes. */
typedef struct {
	int k[3], j[3];
	double cost;
	int64_t peak; /* the model's total */
} multi_move;

static int by_cost(const void *a, const void *b)
{
	double x = ((const multi_move *)a)->cost, y = ((const multi_move *)b)->cost;
	return (x > y) - (x < y);
}

static int by_peak(const void *a, const void *b)
{
	int64_t x = ((const multi_move *)a)->peak, y = ((const multi_move *)b)->peak;
	return (x > y) - (x < y);
}

typedef struct {
	multi_move *v;
	int n, cap;
} moves;

/* Adds to mv the changes of places from `from` on, on top of cur (depth
 * places so far), whose choice costs less than base. */
static void collect(choice *c, int from, int depth, int max_depth, multi_move cur, double base, moves *mv)
{
	int places = c->am->n + c->am->nseg;
	for (int k = from; k < places; k++)
		for (int j = 0; j < NALT; j++) {
			ps_keep was;
			if (!change(c, k, j, &was, false))
				continue;
			multi_move m = cur;
			m.k[depth] = k;
			m.j[depth] = j;
			m.cost = choice_cost(c);
			m.peak = ps_auto_model_peak(c->am, c->d, c->rec);
			if (depth > 0 && m.cost < base) {
				if (mv->n == mv->cap && !(mv->v = realloc(mv->v, (size_t)(mv->cap = 2 * mv->cap + 64) * sizeof *mv->v)))
					IR_DIE("out of memory");
				mv->v[mv->n++] = m;
			}
			if (depth + 1 < max_depth)
				collect(c, k + 1, depth + 1, max_depth, m, base, mv);
			change(c, k, j, &was, true);
		}
}

static void apply_move(choice *c, const multi_move *m, ps_keep *was, bool undo)
{
	for (int i = undo ? 2 : 0; undo ? i >= 0 : i < 3; i += undo ? -1 : 1)
		if (m->k[i] >= 0)
			change(c, m->k[i], m->j[i], &was[i], undo);
}

/* Changes of two (or, max_depth 3, three) places at once, which single
 * changes cannot reach one at a time (each alone does not fit, or costs
 * more): those cheaper than c, planned cheapest first (three: those the
 * model gives least memory first) until one fits (at most PAIR_PLANS plans,
 * TRIPLE_PLANS for three); that one is taken.  *found says whether one was. */
static bool improve_multi(revc_model *m, const revc_options *o, int64_t budget, choice *c, int max_depth,
	revc_auto *out, bool *found, revc_error **err)
{
	moves mv = {0};
	multi_move none = {{-1, -1, -1}, {0, 0, 0}, 0, 0};
	collect(c, 0, 0, max_depth, none, choice_cost(c), &mv);
	/* Pairs cheapest first; triples (many more) least memory first. */
	if (mv.n > 0)
		qsort(mv.v, (size_t)mv.n, sizeof *mv.v, max_depth > 2 ? by_peak : by_cost);
	*found = false;
	bool ok = true;
	int limit = max_depth > 2 ? TRIPLE_PLANS : PAIR_PLANS;
	for (int i = 0, plans = 0; i < mv.n && plans < limit && ok && !*found; i++, plans++) {
		ps_keep was[3];
		apply_move(c, &mv.v[i], was, false);
		int64_t total;
		ok = plan_total(m, o, c, &total, err);
		out->plans++;
		*found = ok && total <= budget;
		if (*found) {
			out->total_bytes = total;
			out->improved++;
		} else {
			apply_move(c, &mv.v[i], was, true);
		}
	}
	free(mv.v);
	return ok;
}

/* Every choice that changes any places of c, on the smallest chains (at
 * most TRIPLE_PLACES places): those cheaper than c whose modelled total is
 * within an eighth over the budget (the model errs by several percent
 * either way), planned cheapest first until one fits (at most ALL_PLANS
 * plans: on fashion's units at batch 4 the first that fit was the 397th of
 * 484); that one replaces c.  Changes of four places and more, which the pairs
 * and triples below cannot reach, are among them. */
typedef struct {
	double cost;
	char letters[REVC_MAX_LETTERS + 1];
} candidate;

typedef struct {
	candidate *v;
	int n, cap;
	double base;
	int64_t limit;
} candidates;

static int by_candidate_cost(const void *a, const void *b)
{
	double x = ((const candidate *)a)->cost, y = ((const candidate *)b)->cost;
	return (x > y) - (x < y);
}

static void enumerate(choice *c, int k, bool changed, candidates *cs)
{
	if (k == c->am->n + c->am->nseg) {
		double cost = choice_cost(c);
		if (!changed || !(cost < cs->base) || ps_auto_model_peak(c->am, c->d, c->rec) > cs->limit)
			return;
		if (cs->n == cs->cap && !(cs->v = realloc(cs->v, (size_t)(cs->cap = 2 * cs->cap + 64) * sizeof *cs->v)))
			IR_DIE("out of memory");
		cs->v[cs->n].cost = cost;
		choice_letters(c, cs->v[cs->n++].letters);
		return;
	}
	enumerate(c, k + 1, changed, cs);
	for (int j = 0; j < NALT; j++) {
		ps_keep was;
		if (!change(c, k, j, &was, false))
			continue;
		enumerate(c, k + 1, true, cs);
		change(c, k, j, &was, true);
	}
}

static bool improve_all(revc_model *m, const revc_options *o, int64_t budget, choice *c, revc_auto *out,
	revc_error **err)
{
	candidates cs = {.base = choice_cost(c), .limit = budget + budget / 8};
	enumerate(c, 0, false, &cs);
	if (cs.n > 0)
		qsort(cs.v, (size_t)cs.n, sizeof *cs.v, by_candidate_cost);
	bool ok = true;
	for (int i = 0; i < cs.n && i < ALL_PLANS && ok; i++) {
		revc_options to = plan_options(o, cs.v[i].letters);
		int64_t total;
		ok = drv_memory_total(m, &to, &total, err);
		out->plans++;
		if (ok && total <= budget) {
			char why[200];
			bool parsed = ps_keep_parse(cs.v[i].letters, c->am->n, c->d, why, sizeof why) &&
				      ps_segments_parse(cs.v[i].letters, c->am->nseg, c->rec, why, sizeof why);
			IR_ASSERT(parsed);
			out->total_bytes = total;
			out->improved++;
			break;
		}
	}
	free(cs.v);
	return ok;
}

/* The program's choices at budgets raised step by step above budget (by
 * budget / 2^k, k = PROBE_STEPS .. 1): a cheaper one than c the model puts
 * over the budget may fit when planned (the model errs either way); the
 * cheapest that does replaces c. */
static bool probe(revc_model *m, const revc_options *o, const ps_auto_model *am, int64_t budget, choice *c,
	revc_auto *out, revc_error **err)
{
	choice t;
	choice_init(&t, am);
	bool ok = true;
	double best = choice_cost(c), tried = -1;
	for (int k = PROBE_STEPS; k >= 1 && ok; k--) {
		if (!ps_auto_solve(am, budget + (budget >> k), t.d, t.rec))
			continue;
		double cost = choice_cost(&t);
		if (!(cost < best) || cost == tried)
			continue;
		tried = cost;
		int64_t total;
		ok = plan_total(m, o, &t, &total, err);
		out->plans++;
		if (ok && total <= budget) {
			choice_copy(c, &t);
			best = cost;
			out->total_bytes = total;
			out->improved++;
		}
	}
	choice_free(&t);
	return ok;
}

/* The minimum-memory decisions, planned: every unit inverted or, with a
 * downsample, recomputed (revnet's), and each segment recomputed where the
 * plan then needs less (one at a time); calibrates the model on them. */
static bool minimum(revc_model *m, const revc_options *o, ps_auto_model *am, choice *low, revc_auto *out,
	revc_error **err)
{
	for (int k = 0; k < am->n; k++)
		low->d[k] = (ps_keep){am->unit[k].invertible ? IR_KEEP_INVERT : IR_KEEP_RECOMPUTE, k};
	if (!plan_total(m, o, low, &out->minimum_bytes, err))
		return false;
	out->plans++;
	for (int j = 0; j < am->nseg && ps_auto_seg_choice(am, j); j++) {
		low->rec[j] = true;
		int64_t t;
		if (!plan_total(m, o, low, &t, err))
			return false;
		out->plans++;
		if (t < out->minimum_bytes)
			out->minimum_bytes = t;
		else
			low->rec[j] = false;
	}
	/* Too large to plan: single changes may bring the arena under the
	 * planner's limit (the model is calibrated on a plan). */
	if (out->minimum_bytes == DRV_TOO_LARGE && !lower(m, o, IR_MAX_BYTES, low, &out->minimum_bytes, out, err))
		return false;
	if (out->minimum_bytes == DRV_TOO_LARGE) {
		char s[REVC_MAX_LETTERS + 1];
		choice_letters(low, s);
		return drv_errorf(err, REVC_ERR_BUDGET,
			"strategy auto: %s at batch %lld needs an arena larger than 2^40 bytes, the most revc plans, "
			"even with the minimum-memory decisions (%s)", m->name, (long long)revc_model_batch(m), s);
	}
	char s[REVC_MAX_LETTERS + 1];
	choice_letters(low, s);
	revc_options lo = plan_options(o, s);
	int64_t total, fwd_end, bwd_peak;
	if (!drv_memory_phases(m, &lo, &total, &fwd_end, &bwd_peak, err))
		return false;
	out->plans++;
	ps_auto_model_calibrate(am, low->d, low->rec, fwd_end, bwd_peak);
	return true;
}

/* What revc_auto_choose and revc_auto_minimum share: m's model, or an
 * error when it has no units to decide. */
static bool model_of(revc_model *m, const revc_options *o, ps_auto_model *am, revc_auto *out, revc_error **err)
{
	memset(out, 0, sizeof *out);
	ir_graph *g = step_graph(m, o, err);
	if (!g)
		return false;
	ps_auto_model_build(g, am);
	ir_graph_free(g);
	if (am->n == 0 || am->n > REVC_MAX_UNITS) {
		drv_errorf(err, REVC_ERR_USAGE, "strategy auto: %s has %d reversible units (it decides for 1 to %d)", m->name,
			am->n, REVC_MAX_UNITS);
		ps_auto_model_free(am);
		return false;
	}
	out->units = am->n;
	out->step_flops = am->step_flops;
	return true;
}

bool revc_auto_minimum(revc_model *m, const revc_options *o, revc_auto *out, revc_error **err)
{
	revc_options defaults;
	if (!o) {
		revc_options_init(&defaults);
		o = &defaults;
	}
	ps_auto_model am;
	if (!model_of(m, o, &am, out, err))
		return false;
	choice low;
	choice_init(&low, &am);
	bool ok = minimum(m, o, &am, &low, out, err) && lower(m, o, -1, &low, &out->minimum_bytes, out, err);
	if (ok) {
		choice_letters(&low, out->decisions);
		out->minimum = true;
		out->total_bytes = out->minimum_bytes;
		out->model_bytes = ps_auto_model_peak(&am, low.d, low.rec);
		out->recompute_flops = choice_cost(&low);
	}
	choice_free(&low);
	ps_auto_model_free(&am);
	return ok;
}

bool revc_auto_choose(revc_model *m, const revc_options *o, int64_t budget, revc_auto *out, revc_error **err)
{
	revc_options defaults;
	if (!o) {
		revc_options_init(&defaults);
		o = &defaults;
	}
	ps_auto_model am;
	if (!model_of(m, o, &am, out, err))
		return false;
	int n = am.n;
	bool ok = false;
	choice c, low;
	choice_init(&c, &am);
	choice_init(&low, &am);
	if (!minimum(m, o, &am, &low, out, err))
		goto done;
	if (budget < 0) { /* no budget: the fastest */
		for (int k = 0; k < n; k++)
			c.d[k] = (ps_keep){IR_KEEP_STORE, k};
		if (!plan_total(m, o, &c, &out->total_bytes, err))
			goto done;
		out->plans++;
		if (out->total_bytes == DRV_TOO_LARGE) /* the fastest that the planner takes */
			budget = out->minimum_bytes > IR_MAX_BYTES ? out->minimum_bytes : IR_MAX_BYTES;
	}
	if (budget >= 0 && budget < out->minimum_bytes) {
		if (!lower(m, o, budget, &low, &out->minimum_bytes, out, err))
			goto done;
	}
	if (budget >= 0 && budget < out->minimum_bytes) {
		char b1[32], b2[32], s[REVC_MAX_LETTERS + 1];
		choice_letters(&low, s);
		revc_format_bytes(b1, sizeof b1, out->minimum_bytes);
		revc_format_bytes(b2, sizeof b2, budget);
		drv_errorf(err, REVC_ERR_BUDGET,
			"strategy auto: the budget of %s is below the minimum, %s (%lld bytes: decisions %s)", b2, b1,
			(long long)out->minimum_bytes, s);
		goto done;
	}
	int64_t model_budget = budget;
	if (budget >= 0 && ps_auto_model_peak(&am, low.d, low.rec) > budget)
		model_budget = -1; /* only what lower found fits */
	for (int tries = 0; budget >= 0; tries++) {
		if (tries == MAX_TRIES || !ps_auto_solve(&am, model_budget, c.d, c.rec)) {
			choice_copy(&c, &low); /* fits: planned above */
			out->total_bytes = out->minimum_bytes;
			break;
		}
		if (!plan_total(m, o, &c, &out->total_bytes, err))
			goto done;
		out->plans++;
		if (out->total_bytes <= budget)
			break;
		out->retries++;
		/* Next the cheapest the model puts lower, one by one at first (and
		 * after a plan too large to say by how much it is over). */
		int64_t mp = ps_auto_model_peak(&am, c.d, c.rec);
		bool walk = tries < WALK_TRIES || out->total_bytes == DRV_TOO_LARGE;
		model_budget = walk ? mp - 1 : mp - (out->total_bytes - budget);
	}
	if (budget >= 0 && (!probe(m, o, &am, budget, &c, out, err) || !improve(m, o, budget, &c, out, err)))
		goto done;
	/* Small chains: pairs too, and on the smallest triples (on long ones
	 * the plans would cost too much). */
	int depth = n + am.nseg <= TRIPLE_PLACES ? 3 : n + am.nseg <= PAIR_PLACES ? 2 : 0;
	if (budget >= 0 && n + am.nseg <= TRIPLE_PLACES && !improve_all(m, o, budget, &c, out, err))
		goto done;
	for (int dd = 2; budget >= 0 && dd <= depth; dd++)
		for (int r = 0, found = 1; found && r < PAIR_ROUNDS; r++) {
			bool f;
			if (!improve_multi(m, o, budget, &c, dd, out, &f, err) || (f && !improve(m, o, budget, &c, out, err)))
				goto done;
			found = f;
		}
	choice_letters(&c, out->decisions);
	out->model_bytes = ps_auto_model_peak(&am, c.d, c.rec);
	out->recompute_flops = choice_cost(&c);
	ok = true;
done:
	choice_free(&c);
	choice_free(&low);
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
	choice c;
	choice_init(&c, &am);
	char why[200];
	bool ok = ps_keep_parse(decisions, am.n, c.d, why, sizeof why) &&
		  ps_segments_parse(decisions, am.nseg, c.rec, why, sizeof why);
	if (ok)
		*recompute_flops = choice_cost(&c);
	else
		drv_errorf(err, REVC_ERR_USAGE, "decisions '%s' for %s: %s", decisions, m->name, why);
	choice_free(&c);
	ps_auto_model_free(&am);
	return ok;
}
