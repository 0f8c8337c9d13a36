/* units.c: the reversible units of a graph, read from their marking
 * (node->unit, node->part: ir.h, docs/ir.md), and the graph edits the
 * backward strategies share (cloning forward work as recompute nodes,
 * redirecting gradients to the clones).
 *
 * A unit is y1 = D(x1) + F(x2), y2 = D(x2) + G(y1): its forward nodes
 * marked y1 and y2 are the two additions, whose operand 1 is F's (G's)
 * output and operand 0 x1 (x2), or D's output when the unit has D nodes
 * (then it is not invertible).  The verifier has checked the marking. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* Follows D (the unit's nodes marked d) back to the unit's input. */
static ir_node *strip_downsample(ir_node *n, int unit)
{
	while (n->unit == unit && n->part == IR_PART_D && n->nin > 0)
		n = n->in[0];
	return n;
}

int ps_units_find(const ir_graph *g, ps_unit **out)
{
	int nu = 0;
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->unit >= nu)
			nu = g->nodes[i]->unit + 1;
	ps_unit *u = calloc((size_t)nu + 1, sizeof *u);
	if (!u)
		IR_DIE("out of memory");
	for (int k = 0; k < nu; k++)
		u[k].invertible = true;
	for (int i = 0; i < g->n; i++) {
		ir_node *y = g->nodes[i];
		if (y->unit < 0 || y->role != IR_ROLE_FWD)
			continue;
		ps_unit *t = &u[y->unit];
		if (y->part == IR_PART_D)
			t->invertible = false;
		if ((y->part != IR_PART_Y1 && y->part != IR_PART_Y2) || y->op != IR_OP_ADD)
			continue;
		if (y->part == IR_PART_Y1) {
			t->y1 = y;
			t->f_out = y->in[1];
			t->x1 = strip_downsample(y->in[0], y->unit);
		} else {
			t->y2 = y;
			t->g_out = y->in[1];
			t->x2 = strip_downsample(y->in[0], y->unit);
		}
	}
	for (int k = 0; k < nu; k++) {
		bool follows = k > 0 && u[k].invertible && u[k].y1 && u[k].y2 && u[k].x1 == u[k - 1].y1 &&
			u[k].x2 == u[k - 1].y2;
		u[k].chain = k == 0 ? 0 : follows ? u[k - 1].chain : u[k - 1].chain + 1;
	}
	*out = u;
	return nu;
}

/* ---- the unit map ------------------------------------------------------- */

void ps_unit_map_build(ir_graph *g, int nu, ps_unit_map *m)
{
	ir_graph_renumber(g);
	m->n = g->n;
	m->unit = malloc(((size_t)g->n + 1) * sizeof *m->unit);
	m->part = calloc((size_t)g->n + 1, sizeof *m->part);
	m->start = calloc((size_t)nu + 2, sizeof *m->start);
	m->ids = malloc(((size_t)g->n + 1) * sizeof *m->ids);
	int *fill = calloc((size_t)nu + 1, sizeof *fill);
	if (!m->unit || !m->part || !m->start || !m->ids || !fill)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		IR_ASSERT(n->unit < nu);
		m->unit[i] = n->unit;
		m->part[i] = n->part;
		if (m->unit[i] >= 0)
			m->start[m->unit[i] + 1]++;
	}
	for (int k = 0; k < nu; k++)
		m->start[k + 1] += m->start[k];
	for (int i = 0; i < g->n; i++)
		if (m->unit[i] >= 0)
			m->ids[m->start[m->unit[i]] + fill[m->unit[i]]++] = i;
	free(fill);
}

void ps_unit_map_free(ps_unit_map *m)
{
	free(m->unit);
	free(m->part);
	free(m->start);
	free(m->ids);
}

/* ---- recomputation ------------------------------------------------------ */

/* The map is indexed by the ids nodes had when it was made.  New nodes are
 * appended, so original ids stay valid until ps_recompute_finish. */
void ps_recompute_init(ps_recompute *r, ir_graph *g)
{
	ir_graph_renumber(g);
	r->g = g;
	r->n = g->n;
	r->map = calloc((size_t)g->n + 1, sizeof *r->map);
	r->orig = malloc(((size_t)g->n + 1) * sizeof *r->orig);
	if (!r->map || !r->orig)
		IR_DIE("out of memory");
	memcpy(r->orig, g->nodes, (size_t)g->n * sizeof *r->orig);
	r->before = NULL;
	r->nadded = r->cap_added = 0;
}

void ps_recompute_finish(ps_recompute *r)
{
	ir_graph *g = r->g;
	IR_ASSERT(g->n == r->n + r->nadded);
	/* Counting sort of the appended nodes by the original they precede. */
	int *start = calloc((size_t)r->n + 2, sizeof *start);
	ir_node **order = malloc(((size_t)g->n + 1) * sizeof *order);
	ir_node **sorted = malloc(((size_t)r->nadded + 1) * sizeof *sorted);
	if (!start || !order || !sorted)
		IR_DIE("out of memory");
	for (int k = 0; k < r->nadded; k++)
		start[r->before[k] + 1]++;
	for (int i = 0; i < r->n; i++)
		start[i + 1] += start[i];
	for (int k = 0; k < r->nadded; k++)
		sorted[start[r->before[k]]++] = g->nodes[r->n + k];
	/* start[i] now ends original i's run; runs are contiguous in order. */
	int n = 0, k = 0;
	for (int i = 0; i < r->n; i++) {
		for (; k < start[i]; k++)
			order[n++] = sorted[k];
		order[n++] = r->orig[i];
	}
	IR_ASSERT(n == g->n);
	ir_graph_reorder(g, order);
	free(sorted);
	free(order);
	free(start);
	free(r->map);
	free(r->orig);
	free(r->before);
	r->map = NULL;
	r->orig = NULL;
	r->before = NULL;
}

static bool original(const ps_recompute *r, const ir_node *n)
{
	return n->id >= 0 && n->id < r->n && r->orig[n->id] == n;
}

ir_node *ps_recompute_of(const ps_recompute *r, ir_node *n)
{
	return original(r, n) && r->map[n->id] ? r->map[n->id] : n;
}

void ps_recompute_set(ps_recompute *r, ir_node *fwd, ir_node *value)
{
	IR_ASSERT(original(r, fwd));
	r->map[fwd->id] = value;
}

void ps_recompute_place(ps_recompute *r, ir_node *n, const ir_node *at)
{
	IR_ASSERT(original(r, at) && n->id == r->n + r->nadded);
	if (r->nadded == r->cap_added) {
		r->cap_added = r->cap_added ? 2 * r->cap_added : 64;
		r->before = realloc(r->before, (size_t)r->cap_added * sizeof *r->before);
		if (!r->before)
			IR_DIE("out of memory");
	}
	r->before[r->nadded++] = at->id;
}

void ps_recompute_redirect(const ps_recompute *r, ir_node *n)
{
	for (int k = 0; k < n->nin; k++)
		n->in[k] = ps_recompute_of(r, n->in[k]);
}

ir_node *ps_recompute_clone(ps_recompute *r, ir_node *n, const ir_node *at)
{
	ir_node *in[16];
	IR_ASSERT(n->nin <= 16);
	for (int k = 0; k < n->nin; k++)
		in[k] = ps_recompute_of(r, n->in[k]);
	ir_node *c = ir_node_new(r->g, n->op, in, n->nin);
	ps_recompute_place(r, c, at);
	c->role = IR_ROLE_RECOMPUTE;
	c->type = n->type;
	c->scope = n->scope;
	ir_node_set_unit(c, n->unit, n->part);
	c->pos = n->pos;
	c->pos_printed = n->pos_printed;
	for (int k = 0; k < n->nattrs; k++) {
		const ir_attr *a = &n->attrs[k];
		switch (ir_attr_vtype_of(a->kind)) {
		case IR_AV_INT: ir_node_set_int(r->g, c, a->kind, a->u.i); break;
		case IR_AV_FLOAT: ir_node_set_float(r->g, c, a->kind, a->u.f); break;
		case IR_AV_STR: ir_node_set_str(r->g, c, a->kind, a->u.s); break;
		case IR_AV_INTS: ir_node_set_ints(r->g, c, a->kind, a->u.ints.v, a->u.ints.n); break;
		}
	}
	return c;
}

void ps_reconstructions(const ir_graph *g, const ps_unit_map *m, int nu, ir_node **x)
{
	for (int k = 0; k < 2 * nu; k++)
		x[k] = NULL;
	for (int i = 0; i < g->n; i++) {
		ir_node *r = g->nodes[i];
		int k = m->unit[i];
		if (r->op != IR_OP_SUB || r->role != IR_ROLE_RECOMPUTE || k < 0)
			continue;
		int op = r->in[1]->id;
		bool x2 = m->part[i] == IR_PART_Y2 && m->part[op] == IR_PART_G;
		bool x1 = m->part[i] == IR_PART_Y1 && m->part[op] == IR_PART_F;
		if ((x1 || x2) && m->unit[op] == k && !x[2 * k + x1])
			x[2 * k + x1] = r;
	}
}
