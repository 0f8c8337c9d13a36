/* auto.c: strategy auto's choice of decisions (ir_unit_keep) under a memory
 * budget: the cost and memory model of each unit, read from the training
 * step after autodiff (before any decision), and the dynamic program over
 * the chain of units that minimises the cost within a budget.
 *
 * Cost: floating-point operations.  A convolution (forward or either
 * gradient) costs 2 N O Ho Wo C KH KW, a matrix product 2 M N K per matrix,
 * any other node one per element of its result.  Storing a unit costs
 * nothing extra; inverting it costs its F and G again and the two
 * subtractions, recomputing it F and G again, rerunning it its whole
 * forward (D and the additions too).
 *
 * Memory, per unit k (bytes):
 *   A_k  forward values inside the unit (F, G, D) that a gradient reads:
 *        what storing it keeps;
 *   O_k  its outputs y1, y2: kept unless the next unit (continuing the
 *        chain) is inverted and reconstructs them;
 *   T_k  its gradients in flight: 2 O_k;
 *   I_k  its inputs, when no unit made them (the stem's): x2 kept unless
 *        inverted (x1 too when rerun).
 * During its backward a unit holds A_k + O_k + T_k (+ I_k) whatever its
 * decision (stored, or recomputed just then).  With P_k the bytes kept for units
 * before k, the model's total is
 *   max( C_bwd + max_k (P_k + A_k + O_k + T_k),  C_fwd + P_n )
 * the peak of the backward pass or the end of the forward pass, where the
 * constants (what the rest of the step needs then: parameters, optimiser
 * state, the stem, the head, kernel workspace) are calibrated by the
 * caller on the real planner's plan of the minimum-memory decisions: the
 * bytes live at its forward pass's end, and at its backward's peak.  The program walks the units in order, keeping
 * for each last decision the pairs (P_k, cost) that no other pair beats in
 * both and whose every prefix fits; the cheapest pair at the end wins.
 * The choices are store, recompute and (where the unit has no D) invert.
 * Rerunning costs more than recomputing and, in the model, holds the same,
 * so the program never chooses it (the decision exists for checkpointing).
 *
 * Segments (the forward outside the units: the stem, the head) are stored
 * or recomputed: a stored one keeps its values S_j (those a gradient
 * reads) from its place until its backward, which holds 2 S_j either way
 * (values and gradients); recomputing costs its forward again.  The
 * program runs once for each choice of the segments it decides
 * (ps_auto_seg_choice: the head stays stored), each segment at its place
 * in the walk, and keeps the cheapest. */
#include <stdlib.h>
#include <string.h>

#include "conv_geom.h"
#include "passes.h"

double ps_node_flops(const ir_node *n)
{
	switch (n->op) {
	case IR_OP_CONV2D:
	case IR_OP_CONV2D_DX:
	case IR_OP_CONV2D_DW: {
		ir_conv_geom c = ir_conv_geom_of(n);
		return 2.0 * (double)c.n * (double)c.o * (double)c.ho * (double)c.wo * (double)c.c * (double)c.kh *
			(double)c.kw;
	}
	case IR_OP_MATMUL:
	case IR_OP_BMATMUL: {
		const ir_type *a = &n->in[0]->type;
		const ir_attr *t = ir_node_attr(n, IR_ATTR_TRANS_A);
		int64_t k = t && t->u.i ? a->dim[a->rank - 2] : a->dim[a->rank - 1];
		return 2.0 * (double)ir_type_elems(&n->type) * (double)k;
	}
	default:
		return ir_op_has(n->op, IR_OPF_SRC) ? 0.0 : (double)ir_type_elems(&n->type);
	}
}

void ps_auto_model_build(const ir_graph *g, ps_auto_model *am)
{
	ps_unit *u;
	int nu = ps_units_find(g, &u);
	memset(am, 0, sizeof *am);
	am->n = nu;
	am->unit = calloc((size_t)nu + 1, sizeof *am->unit);
	bool *read = calloc((size_t)g->n + 1, sizeof *read);
	if (!am->unit || !read)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++)
		IR_ASSERT(g->nodes[i]->id == i);
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->role != IR_ROLE_FWD)
			for (int k = 0; k < n->nin; k++)
				read[n->in[k]->id] = true;
		am->step_flops += ps_node_flops(n);
	}
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->unit < 0 || n->role != IR_ROLE_FWD || ir_op_has(n->op, IR_OPF_SRC))
			continue;
		ps_auto_unit *t = &am->unit[n->unit];
		int64_t b = ir_type_bytes(&n->type);
		if (n->part == IR_PART_Y1 || n->part == IR_PART_Y2) {
			t->out_bytes += b;
			t->rerun_flops += ps_node_flops(n);
			continue;
		}
		if (read[i])
			t->saved_bytes += b;
		if (n->part == IR_PART_F || n->part == IR_PART_G)
			t->recompute_flops += ps_node_flops(n);
		t->rerun_flops += ps_node_flops(n);
	}
	int *seg = malloc(((size_t)g->n + 1) * sizeof *seg);
	am->seg = calloc((size_t)nu + 2, sizeof *am->seg);
	if (!seg || !am->seg)
		IR_DIE("out of memory");
	ps_segments_index(g, seg);
	for (int j = 0; j <= nu; j++) {
		ps_auto_seg t = {j, 0, 0.0};
		for (int i = 0; i < g->n; i++)
			if (seg[i] == j) {
				t.saved_bytes += read[i] ? ir_type_bytes(&g->nodes[i]->type) : 0;
				t.flops += ps_node_flops(g->nodes[i]);
			}
		if (t.saved_bytes > 0) /* present: a gradient reads it */
			am->seg[am->nseg++] = t;
	}
	free(seg);
	for (int k = 0; k < nu; k++) {
		ps_auto_unit *t = &am->unit[k];
		t->invertible = u[k].invertible;
		t->follows = k > 0 && u[k].chain == u[k - 1].chain;
		/* Inputs no unit made (the stem's): kept unless inverted. */
		if (u[k].x1 && u[k].x1->unit < 0)
			t->in1_bytes = ir_type_bytes(&u[k].x1->type);
		if (u[k].x2 && u[k].x2->unit < 0)
			t->in2_bytes = ir_type_bytes(&u[k].x2->type);
		t->invert_flops = t->recompute_flops + (double)(u[k].y1 ? ir_type_elems(&u[k].y1->type) : 0) +
			(double)(u[k].y2 ? ir_type_elems(&u[k].y2->type) : 0);
	}
	free(read);
	free(u);
}

void ps_auto_model_free(ps_auto_model *am)
{
	free(am->unit);
	free(am->seg);
	am->unit = NULL;
	am->seg = NULL;
}

static double unit_cost(const ps_auto_unit *t, ir_unit_keep d)
{
	switch (d) {
	case IR_KEEP_INVERT: return t->invert_flops;
	case IR_KEEP_RECOMPUTE: return t->recompute_flops;
	case IR_KEEP_RERUN: return t->rerun_flops;
	default: return 0.0;
	}
}

/* Bytes of inputs no unit made that unit t keeps: x2 for F (and x1 when
 * rerun), none when inverted. */
static int64_t inputs(const ps_auto_unit *t, ir_unit_keep d)
{
	return d == IR_KEEP_INVERT ? 0 : d == IR_KEEP_RERUN ? t->in1_bytes + t->in2_bytes : t->in2_bytes;
}

/* Bytes unit k keeps for the backward pass, given the next unit's decision
 * (IR_KEEP_NONE past the last). */
static int64_t kept(const ps_auto_model *am, int k, ir_unit_keep d, ir_unit_keep next)
{
	const ps_auto_unit *t = &am->unit[k];
	bool reconstructed = next == IR_KEEP_INVERT && k + 1 < am->n && am->unit[k + 1].follows;
	return (d == IR_KEEP_STORE ? t->saved_bytes : 0) + (reconstructed ? 0 : t->out_bytes) + inputs(t, d);
}

/* What unit k holds during its own backward, whatever its decision: the
 * values its gradients read (stored or recomputed), its outputs and their
 * gradients. */
static int64_t working(const ps_auto_unit *t, ir_unit_keep d)
{
	return t->saved_bytes + 3 * t->out_bytes + inputs(t, d);
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* A segment's backward holds its values (stored or recomputed) and their
 * gradients; a stored one keeps its values until then. */
static int64_t seg_working(const ps_auto_seg *s)
{
	return 2 * s->saved_bytes;
}

/* Decisions d, rec without the constants: the bytes kept when the forward
 * pass ends (*fwd) and the largest backward working set (*bwd). */
static void phases(const ps_auto_model *am, const ps_keep *d, const bool *rec, int64_t *fwd, int64_t *bwd)
{
	int64_t p = 0, peak = 0;
	for (int k = 0, j = 0; k <= am->n; k++) {
		for (; j < am->nseg && am->seg[j].at == k; j++) {
			peak = max64(peak, p + seg_working(&am->seg[j]));
			p += rec[j] ? 0 : am->seg[j].saved_bytes;
		}
		if (k == am->n)
			break;
		peak = max64(peak, p + working(&am->unit[k], d[k].keep));
		p += kept(am, k, d[k].keep, k + 1 < am->n ? d[k + 1].keep : IR_KEEP_NONE);
	}
	*fwd = p;
	*bwd = peak;
}

int64_t ps_auto_model_peak(const ps_auto_model *am, const ps_keep *d, const bool *rec)
{
	int64_t p, peak;
	phases(am, d, rec, &p, &peak);
	return max64(p + am->c_fwd, peak + am->c_bwd);
}

void ps_auto_model_calibrate(ps_auto_model *am, const ps_keep *d, const bool *rec, int64_t fwd_end, int64_t bwd_peak)
{
	int64_t p, peak;
	phases(am, d, rec, &p, &peak);
	am->c_fwd = fwd_end - p;
	am->c_bwd = bwd_peak - peak;
}

static double seg_cost(const ps_auto_model *am, const bool *rec)
{
	double c = 0;
	for (int j = 0; j < am->nseg; j++)
		c += rec[j] ? am->seg[j].flops : 0.0;
	return c;
}

double ps_auto_model_cost(const ps_auto_model *am, const ps_keep *d, const bool *rec)
{
	double c = seg_cost(am, rec);
	for (int k = 0; k < am->n; k++)
		c += unit_cost(&am->unit[k], d[k].keep);
	return c;
}

/* ---- the dynamic program ------------------------------------------------- */

/* A state after unit k's decision: bytes kept for units before k, cost so
 * far, and the state of unit k - 1 it extends. */
typedef struct {
	int64_t p;
	double cost;
	int parent;
	ir_unit_keep d;
} state;

typedef struct {
	state *s;
	int n, cap;
} states;

static void push(states *v, state s)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 16;
		v->s = realloc(v->s, (size_t)v->cap * sizeof *v->s);
		if (!v->s)
			IR_DIE("out of memory");
	}
	v->s[v->n++] = s;
}

static int by_p_then_cost(const void *a, const void *b)
{
	const state *x = a, *y = b;
	if (x->d != y->d)
		return (x->d > y->d) - (x->d < y->d);
	if (x->p != y->p)
		return (x->p > y->p) - (x->p < y->p);
	return (x->cost > y->cost) - (x->cost < y->cost);
}

/* Keeps, for each decision, the states no other beats in both p and cost. */
static void prune(states *v)
{
	if (v->n == 0)
		return;
	qsort(v->s, (size_t)v->n, sizeof *v->s, by_p_then_cost);
	int m = 0;
	for (int i = 0; i < v->n; i++) {
		if (m > 0 && v->s[m - 1].d == v->s[i].d && v->s[m - 1].cost <= v->s[i].cost)
			continue;
		v->s[m++] = v->s[i];
	}
	v->n = m;
}

static int options(const ps_auto_unit *t, ir_unit_keep *out)
{
	int n = 0;
	out[n++] = IR_KEEP_STORE;
	out[n++] = IR_KEEP_RECOMPUTE;
	if (t->invertible)
		out[n++] = IR_KEEP_INVERT;
	return n;
}

/* The segments at place k with decisions rec, from bytes kept *p: false
 * when one's backward does not fit budget; *p grows by what they keep. */
static bool segs_fit(const ps_auto_model *am, int k, const bool *rec, int64_t budget, int64_t *p)
{
	for (int j = 0; j < am->nseg; j++) {
		if (am->seg[j].at != k)
			continue;
		if (*p + seg_working(&am->seg[j]) + am->c_bwd > budget)
			return false;
		*p += rec[j] ? 0 : am->seg[j].saved_bytes;
	}
	return true;
}

/* The program for one choice of the segments (rec): the cheapest units'
 * decisions into out, and their cost, or a negative cost when none fits. */
static double solve_units(const ps_auto_model *am, int64_t budget, const bool *rec, ps_keep *out)
{
	int n = am->n;
	states *layer = calloc((size_t)n + 1, sizeof *layer);
	if (!layer)
		IR_DIE("out of memory");
	int64_t p0 = 0;
	bool fits = segs_fit(am, 0, rec, budget, &p0);
	/* layer[k]: states after unit k's decision; p counts what is kept before k. */
	for (int k = 0; k < n && fits; k++) {
		ir_unit_keep opt[3];
		int no = options(&am->unit[k], opt);
		int nprev = k == 0 ? 1 : layer[k - 1].n;
		for (int i = 0; i < nprev; i++) {
			const state *prev = k == 0 ? NULL : &layer[k - 1].s[i];
			for (int j = 0; j < no; j++) {
				int64_t p = prev ? prev->p + kept(am, k - 1, prev->d, opt[j]) : p0;
				if ((k > 0 && !segs_fit(am, k, rec, budget, &p)) ||
				    p + working(&am->unit[k], opt[j]) + am->c_bwd > budget)
					continue;
				push(&layer[k], (state){p, (prev ? prev->cost : 0) + unit_cost(&am->unit[k], opt[j]), i, opt[j]});
			}
		}
		prune(&layer[k]);
	}
	int best = -1;
	if (n > 0)
		for (int i = 0; i < layer[n - 1].n; i++) {
			const state *s = &layer[n - 1].s[i];
			int64_t p = s->p + kept(am, n - 1, s->d, IR_KEEP_NONE);
			if (segs_fit(am, n, rec, budget, &p) && p + am->c_fwd <= budget &&
			    (best < 0 || s->cost < layer[n - 1].s[best].cost))
				best = i;
		}
	double cost = best >= 0 ? layer[n - 1].s[best].cost + seg_cost(am, rec) : -1.0;
	for (int k = n - 1, i = best; k >= 0 && best >= 0; k--) {
		out[k] = (ps_keep){layer[k].s[i].d, k};
		i = layer[k].s[i].parent;
	}
	for (int k = 0; k < n; k++)
		free(layer[k].s);
	free(layer);
	return cost;
}

bool ps_auto_seg_choice(const ps_auto_model *am, int j)
{
	return am->seg[j].at < am->n && j < 4;
}

/* Every choice of the segments that are choices (ps_auto_seg_choice) is
 * tried; the others stay stored. */
bool ps_auto_solve(const ps_auto_model *am, int64_t budget, ps_keep *out, bool *rec)
{
	int ns = am->nseg;
	bool *r = calloc((size_t)ns + 1, sizeof *r);
	ps_keep *d = calloc((size_t)am->n + 1, sizeof *d);
	if (!r || !d)
		IR_DIE("out of memory");
	double best = -1;
	int free_bits = 0;
	while (free_bits < ns && ps_auto_seg_choice(am, free_bits))
		free_bits++;
	for (int mask = 0; mask < 1 << free_bits; mask++) {
		for (int j = 0; j < ns; j++)
			r[j] = j < free_bits && (mask >> j & 1);
		double c = solve_units(am, budget, r, d);
		if (c >= 0 && (best < 0 || c < best)) {
			best = c;
			memcpy(out, d, (size_t)am->n * sizeof *d);
			memcpy(rec, r, (size_t)ns * sizeof *r);
		}
	}
	free(r);
	free(d);
	return am->n > 0 && best >= 0;
}
