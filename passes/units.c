/* units.c: finding the reversible units of a lowered RevNet, and the graph
 * edits the backward strategies share (cloning forward work as recompute
 * nodes, redirecting gradients to the clones).
 *
 * A unit is recognised by its scopes (frontend/lower.c): in scope "sS.uU"
 * two forward additions, y1 = D(x1) + F(x2) whose second operand comes from
 * scope "sS.uU.f", and y2 = D(x2) + G(y1) whose second operand comes from
 * "sS.uU.g".  D is the identity or an average pool and channel padding in
 * scope "sS.uU"; a unit whose D is the identity is invertible. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

bool ps_scope_is(const char *scope, const char *unit, const char *part)
{
	if (!scope)
		return false;
	size_t n = strlen(unit);
	if (strncmp(scope, unit, n) != 0)
		return false;
	if (!part)
		return scope[n] == 0;
	return scope[n] == '.' && strcmp(scope + n + 1, part) == 0;
}

bool ps_scope_within(const char *scope, const char *unit)
{
	size_t n = strlen(unit);
	return scope && strncmp(scope, unit, n) == 0 && (scope[n] == 0 || scope[n] == '.');
}

/* Parses a unit scope "sS.uU" exactly. */
static bool unit_scope(const char *scope, int *stage, int *index)
{
	int len = 0;
	if (!scope || sscanf(scope, "s%d.u%d%n", stage, index, &len) != 2)
		return false;
	return scope[len] == 0;
}

/* Follows D (average pool, channel padding in the unit's scope) back to the
 * unit's input. */
static ir_node *strip_downsample(ir_node *n, const char *unit)
{
	while ((n->op == IR_OP_AVGPOOL || n->op == IR_OP_CHANNEL_PAD) && ps_scope_is(n->scope, unit, NULL))
		n = n->in[0];
	return n;
}

static int unit_cmp(const void *a, const void *b)
{
	const ps_unit *x = a, *y = b;
	return x->stage != y->stage ? x->stage - y->stage : x->index - y->index;
}

int ps_units_find(const ir_graph *g, ps_unit **out)
{
	int n = 0, cap = 16;
	ps_unit *u = malloc((size_t)cap * sizeof *u);
	if (!u)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		ir_node *y = g->nodes[i];
		int stage, index;
		if (y->op != IR_OP_ADD || y->role != IR_ROLE_FWD || !unit_scope(y->scope, &stage, &index))
			continue;
		bool is_y1 = ps_scope_is(y->in[1]->scope, y->scope, "f");
		bool is_y2 = ps_scope_is(y->in[1]->scope, y->scope, "g");
		if (!is_y1 && !is_y2)
			continue;
		ps_unit *t = NULL; /* a unit's additions are near each other: look back */
		for (int k = n - 1; k >= 0 && !t; k--)
			if (u[k].stage == stage && u[k].index == index)
				t = &u[k];
		if (!t) {
			if (n == cap) {
				cap *= 2;
				u = realloc(u, (size_t)cap * sizeof *u);
				if (!u)
					IR_DIE("out of memory");
			}
			t = &u[n++];
			memset(t, 0, sizeof *t);
			snprintf(t->scope, sizeof t->scope, "%s", y->scope);
			t->stage = stage;
			t->index = index;
		}
		if (is_y1) {
			t->y1 = y;
			t->f_out = y->in[1];
			t->x1 = strip_downsample(y->in[0], y->scope);
		} else {
			t->y2 = y;
			t->g_out = y->in[1];
			t->x2 = strip_downsample(y->in[0], y->scope);
		}
	}
	/* Keep only complete units. */
	int m = 0;
	for (int k = 0; k < n; k++)
		if (u[k].y1 && u[k].y2) {
			u[k].invertible = u[k].y1->in[0] == u[k].x1 && u[k].y2->in[0] == u[k].x2;
			u[m++] = u[k];
		}
	qsort(u, (size_t)m, sizeof *u, unit_cmp);
	*out = u;
	return m;
}

/* ---- the unit map ------------------------------------------------------- */

/* The unit whose scope `scope` is in, found by its stage and index, or -1;
 * *part as ps_unit_map describes. */
static int unit_of_scope(const char *scope, const ps_unit *u, int nu, char *part)
{
	int stage, index;
	if (!scope || sscanf(scope, "s%d.u%d", &stage, &index) != 2)
		return -1;
	int lo = 0, hi = nu;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		ps_unit key = {.stage = stage, .index = index};
		int c = unit_cmp(&u[mid], &key);
		if (c == 0) {
			lo = mid;
			break;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= nu || !ps_scope_within(scope, u[lo].scope))
		return -1;
	const char *rest = scope + strlen(u[lo].scope);
	*part = rest[0] == 0 ? 0 : strcmp(rest, ".f") == 0 ? 'f' : strcmp(rest, ".g") == 0 ? 'g' : '.';
	return lo;
}

void ps_unit_map_build(ir_graph *g, const ps_unit *units, int nu, ps_unit_map *m)
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
		m->unit[i] = unit_of_scope(g->nodes[i]->scope, units, nu, &m->part[i]);
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
		int k = m->unit[i], op = r->nin > 1 ? r->in[1]->id : -1;
		if (r->op == IR_OP_SUB && r->role == IR_ROLE_RECOMPUTE && k >= 0 && m->part[i] == 0 &&
		    m->unit[op] == k && (m->part[op] == 'g' || m->part[op] == 'f')) {
			ir_node **slot = &x[2 * k + (m->part[op] == 'f')];
			if (!*slot)
				*slot = r;
		}
	}
}
