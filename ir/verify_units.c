/* verify_units.c: the marking of reversible units (ir.h, docs/ir.md) says
 * what the graph does.  A unit k is the additive coupling
 *     y1 = D(x1) + F(x2),   y2 = D(x2) + G(y1)
 * and its forward nodes must be exactly that: one addition marked y1 and
 * one marked y2, whose operand 1 is F's (G's) output and operand 0 x1
 * (x2), or D's output; F reads nothing computed outside it but x2, G
 * nothing but y1 (parameters, state, inputs and constants aside); D nodes,
 * present only in a unit that is not invertible, form the paths from x1
 * and x2 to the additions.  Units are numbered 0, 1, ... without gaps, a
 * unit reading another's outputs after it.  Nodes of other roles
 * (gradients, recomputations) carry markings without these rules; their
 * units must exist.
 *
 * Requires an acyclic graph whose operands are in it (ir_verify checks
 * that first).  Linear in the graph. */
#include <stdlib.h>

#include "ir.h"

typedef struct {
	const ir_node *y[2];  /* y1, y2 */
	const ir_node *x[2];  /* x1, x2: the additions' operand 0 with D followed back */
	const ir_node *first; /* its first node */
	bool bad_y;           /* a node marked y1 or y2 that is not an add */
	bool bad_d;           /* a D node off the paths, reported */
} unit_info;

static const ir_unit_part fn_part[2] = {IR_PART_F, IR_PART_G};
static const char *const fn_name[2] = {"F", "G"};

static bool fwd_in(const ir_node *n, int k, ir_unit_part part)
{
	return n->role == IR_ROLE_FWD && n->unit == k && n->part == part;
}

/* Follows D back from an addition's operand 0. */
static const ir_node *unit_input(const ir_node *a, int k)
{
	while (fwd_in(a, k, IR_PART_D) && a->nin > 0)
		a = a->in[0];
	return a;
}

/* One addition y1 or y2 (j = 0, 1) of unit k. */
static int check_addition(ir_diags *d, unit_info *u, int k, int j)
{
	char r1[80];
	const ir_node *y = u->y[j];
	if (!fwd_in(y->in[1], k, fn_part[j])) {
		ir_diag_node(d, y, "is y%d of unit %d, but its operand 1, %s, is not an output of the unit's %s", j + 1,
			k, ir_node_ref(y->in[1], r1, sizeof r1), fn_name[j]);
		return 1;
	}
	u->x[j] = unit_input(y->in[0], k);
	if (u->x[j]->unit == k && u->x[j]->role == IR_ROLE_FWD) {
		ir_diag_node(d, y, "is y%d of unit %d, but its input x%d, %s, is inside the unit", j + 1, k, j + 1,
			ir_node_ref(u->x[j], r1, sizeof r1));
		u->x[j] = NULL;
		return 1;
	}
	return 0;
}

/* Whether forward node n of a unit (u) may read o: operands of D past
 * operand 0 only. */
static bool may_read(const ir_node *n, const ir_node *o, const unit_info *u)
{
	if (ir_op_has(o->op, IR_OPF_SRC) || (o->unit == n->unit && o->part == n->part && o->role == IR_ROLE_FWD))
		return true;
	switch (n->part) {
	case IR_PART_F: return o == u->x[1];
	case IR_PART_G: return o == u->y[0];
	case IR_PART_D: return false; /* beyond operand 0, the path checked above */
	default: return true;          /* the additions: check_addition */
	}
}

/* The decisions (node->keep): on forward y1 nodes only, every unit's or
 * none; invert only where the unit has no D; a rerun segment of units
 * J..K each rerun from J. */
static int check_decisions(const ir_graph *g, ir_diags *d, const unit_info *u, int nu)
{
	int errors = 0, decided = 0;
	bool *has_d = calloc((size_t)nu + 1, sizeof *has_d);
	if (!has_d)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->unit >= 0 && n->role == IR_ROLE_FWD && n->part == IR_PART_D)
			has_d[n->unit] = true;
		if (n->keep == IR_KEEP_NONE)
			continue;
		if (n->unit < 0 && n->role == IR_ROLE_FWD && !ir_op_has(n->op, IR_OPF_SRC) && !ir_op_has(n->op, IR_OPF_FX)) {
			if (n->keep != IR_KEEP_STORE && n->keep != IR_KEEP_RECOMPUTE) {
				ir_diag_node(d, n, "is outside the units and carries decision %s: a segment's node is stored or recomputed",
					ir_unit_keep_name(n->keep));
				errors++;
			}
		} else if (n->unit < 0 && n->role == IR_ROLE_FWD) {
			ir_diag_node(d, n, "carries a decision (%s), but a %s is neither a unit's y1 nor recomputable",
				ir_unit_keep_name(n->keep), ir_op_has(n->op, IR_OPF_SRC) ? "source" : "node with side effects");
			errors++;
		} else if (n->unit < 0 || n->role != IR_ROLE_FWD || n->part != IR_PART_Y1) {
			ir_diag_node(d, n, "carries a unit's decision (%s), which only a unit's forward y1 may", ir_unit_keep_name(n->keep));
			errors++;
		} else {
			decided++;
		}
	}
	for (int k = 0; k < nu && decided > 0 && errors == 0; k++) {
		const ir_node *y = u[k].y[0];
		if (!y)
			continue;
		int from = y->keep_from;
		const ir_node *start = from >= 0 && from <= k ? u[from].y[0] : NULL;
		const ir_node *prev = k > 0 ? u[k - 1].y[0] : NULL;
		if (y->keep == IR_KEEP_NONE) {
			ir_diag_node(d, y, "is y1 of unit %d, which has no decision while other units have one: decide every unit or none", k);
			errors++;
		} else if (y->keep == IR_KEEP_INVERT && has_d[k]) {
			ir_diag_node(d, y, "is y1 of unit %d, which has a downsample (d nodes) and cannot be inverted", k);
			errors++;
		} else if (y->keep == IR_KEEP_RERUN &&
			   (!start || start->keep != IR_KEEP_RERUN || start->keep_from != from ||
			    (from < k && (!prev || prev->keep != IR_KEEP_RERUN || prev->keep_from != from)))) {
			ir_diag_node(d, y, "is y1 of unit %d, rerun from unit %d, but units %d to %d are not all rerun from unit %d",
				k, from, from, k, from);
			errors++;
		}
	}
	free(has_d);
	return errors;
}

bool ir_verify_units(const ir_graph *g, ir_diags *d)
{
	char r1[80], r2[80];
	int nu = 0, errors = 0;
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->unit >= nu)
			nu = g->nodes[i]->unit + 1;
	if (nu == 0)
		return true;
	if (nu > g->n) { /* a gap, surely: and no table that large */
		for (int i = 0; i < g->n; i++)
			if (g->nodes[i]->unit == nu - 1) {
				ir_diag_node(d, g->nodes[i], "is in unit %d, but the graph has %d nodes: units are numbered 0, 1, 2, ... without gaps",
					nu - 1, g->n);
				break;
			}
		return false;
	}
	unit_info *u = calloc((size_t)nu, sizeof *u);
	if (!u)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->unit < 0)
			continue;
		unit_info *t = &u[n->unit];
		if (!t->first)
			t->first = n;
		if (n->role != IR_ROLE_FWD)
			continue;
		int j = n->part == IR_PART_Y1 ? 0 : n->part == IR_PART_Y2 ? 1 : -1;
		if (j < 0)
			continue;
		if (n->op != IR_OP_ADD) {
			t->bad_y = true;
			ir_diag_node(d, n, "is marked y%d of unit %d, but y%d = x%d + %s(...) is an add", j + 1, n->unit,
				j + 1, j + 1, fn_name[j]);
			errors++;
		} else if (t->y[j]) {
			ir_diag_node(d, n, "is marked y%d of unit %d, which %s already is", j + 1, n->unit,
				ir_node_ref(t->y[j], r1, sizeof r1));
			errors++;
		} else {
			t->y[j] = n;
		}
	}
	/* Numbers without gaps, each unit whole. */
	for (int k = 0; k < nu; k++) {
		if (!u[k].first) {
			int next = k + 1;
			while (!u[next].first)
				next++;
			if (k == 0 || u[k - 1].first) { /* once for each gap */
				ir_diag_node(d, u[next].first,
					"is in unit %d, but no node is in unit %d: units are numbered 0, 1, 2, ... without gaps",
					next, k);
				errors++;
			}
			continue;
		}
		for (int j = 0; j < 2 && !u[k].bad_y; j++)
			if (!u[k].y[j] && (j == 0 || u[k].y[0])) {
				ir_diag_node(d, u[k].first, "is in unit %d, which has no y%d (a forward add marked unit(%d, y%d))",
					k, j + 1, k, j + 1);
				errors++;
			}
	}
	/* The additions and D: on_path[id] marks the D nodes between x and y. */
	bool *on_path = calloc((size_t)g->n + 1, sizeof *on_path);
	if (!on_path)
		IR_DIE("out of memory");
	for (int k = 0; k < nu; k++) {
		if (!u[k].y[0] || !u[k].y[1])
			continue;
		for (int j = 0; j < 2; j++) {
			errors += check_addition(d, &u[k], k, j);
			for (const ir_node *a = u[k].y[j]->in[0]; fwd_in(a, k, IR_PART_D) && a->nin > 0; a = a->in[0])
				on_path[a->id] = true;
		}
		for (int j = 0; j < 2; j++) {
			const ir_node *x = u[k].x[j];
			if (x && x->unit > k && x->role == IR_ROLE_FWD && (x->part == IR_PART_Y1 || x->part == IR_PART_Y2)) {
				ir_diag_node(d, u[k].y[j], "is y%d of unit %d, which reads %s of unit %d: a unit reading another's outputs must have the higher number",
					j + 1, k, ir_node_ref(x, r1, sizeof r1), x->unit);
				errors++;
				break;
			}
		}
	}
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->role == IR_ROLE_FWD && n->part == IR_PART_D && !on_path[i] && u[n->unit].x[0] && u[n->unit].x[1] &&
		    !u[n->unit].bad_d) {
			ir_diag_node(d, n, "is marked d of unit %d, but is not on the path from x1 or x2 to y1 or y2", n->unit);
			u[n->unit].bad_d = true; /* once for each unit */
			errors++;
		}
	}
	free(on_path);
	/* What F, G and D read. */
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->unit < 0 || n->role != IR_ROLE_FWD)
			continue;
		const unit_info *t = &u[n->unit];
		if (!t->x[0] || !t->x[1])
			continue; /* reported above */
		for (int e = n->part == IR_PART_D ? 1 : 0; e < n->nin; e++) {
			const ir_node *o = n->in[e];
			if (may_read(n, o, t))
				continue;
			if (n->part == IR_PART_D)
				ir_diag_node(d, n, "is in D of unit %d, which reads only its input (operand 0), parameters and state, not %s",
					n->unit, ir_node_ref(o, r1, sizeof r1));
			else
				ir_diag_node(d, n, "is in %s of unit %d, which may read only %s (%s), its own nodes, parameters and state, not %s",
					fn_name[n->part == IR_PART_G], n->unit, n->part == IR_PART_G ? "y1" : "x2",
					ir_node_ref(n->part == IR_PART_G ? t->y[0] : t->x[1], r1, sizeof r1),
					ir_node_ref(o, r2, sizeof r2));
			errors++;
			break;
		}
	}
	errors += check_decisions(g, d, u, nu);
	free(u);
	return errors == 0;
}
