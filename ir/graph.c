/* graph.c: building and editing graphs: nodes, attributes, ordering edges,
 * removal and reordering.  All storage comes from the graph's arena except
 * the node list itself, which grows with realloc. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

ir_graph *ir_graph_new(const char *name)
{
	ir_arena *a = ir_arena_new();
	ir_graph *g = ir_arena_alloc(a, sizeof *g);
	g->arena = a;
	g->name = ir_arena_strdup(a, name ? name : "main");
	return g;
}

void ir_graph_free(ir_graph *g)
{
	if (!g)
		return;
	free(g->nodes);
	free(g->passes);
	free(g->pass_pos);
	ir_arena_free(g->arena);
}

ir_node *ir_node_insert(ir_graph *g, int at, ir_op op, ir_node *const *in, int nin)
{
	IR_ASSERT(at >= 0 && at <= g->n && nin >= 0);
	if (g->n == g->cap) {
		int cap = g->cap ? 2 * g->cap : 64;
		ir_node **nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
		if (!nodes)
			IR_DIE("out of memory");
		g->nodes = nodes;
		g->cap = cap;
	}
	ir_node *n = ir_arena_alloc(g->arena, sizeof *n);
	n->op = op;
	n->type.rank = -1;
	n->nin = nin;
	n->in = ir_arena_array(g->arena, (size_t)nin, sizeof *n->in);
	if (nin)
		memcpy(n->in, in, (size_t)nin * sizeof *in);
	n->group = -1;
	n->offset = -1;
	n->ws_offset = -1;
	n->live_begin = n->live_end = -1;
	n->label = -1;
	n->unit = -1;
	memmove(g->nodes + at + 1, g->nodes + at, (size_t)(g->n - at) * sizeof *g->nodes);
	g->nodes[at] = n;
	g->n++;
	for (int i = at; i < g->n; i++)
		g->nodes[i]->id = i;
	return n;
}

ir_node *ir_node_new(ir_graph *g, ir_op op, ir_node *const *in, int nin)
{
	return ir_node_insert(g, g->n, op, in, nin);
}

bool ir_node_infer(ir_node *n, ir_diags *d)
{
	const ir_op_info *info = ir_op_get(n->op);
	if (n->nin < info->min_arity || n->nin > info->max_arity) {
		ir_diag_add(d, n->pos, "%s: takes %d to %d operands, got %d", info->name,
			info->min_arity, info->max_arity, n->nin);
		return false;
	}
	for (int k = 0; k < IR_ATTR_COUNT; k++)
		if ((info->req_attrs & (1u << k)) && !ir_node_attr(n, (ir_attr_kind)k)) {
			ir_diag_add(d, n->pos, "%s: missing attribute '%s'", info->name,
				ir_attr_name((ir_attr_kind)k));
			return false;
		}
	ir_type t = n->type;
	if (!info->rule(n, &t, d))
		return false;
	if (!ir_type_size_ok(&t)) {
		char type[160];
		ir_type_str(&t, type, sizeof type);
		ir_diag_add(d, n->pos, "%s: result type %s is larger than 2^40 bytes", info->name, type);
		return false;
	}
	n->type = t;
	return true;
}

/* Returns the slot for attribute k, inserting it in kind order if absent. */
static ir_attr *attr_slot(ir_graph *g, ir_node *n, ir_attr_kind k)
{
	int i = 0;
	while (i < n->nattrs && n->attrs[i].kind < k)
		i++;
	if (i < n->nattrs && n->attrs[i].kind == k)
		return &n->attrs[i];
	ir_attr *attrs = ir_arena_array(g->arena, (size_t)n->nattrs + 1, sizeof *attrs);
	if (i > 0)
		memcpy(attrs, n->attrs, (size_t)i * sizeof *attrs);
	if (n->nattrs > i)
		memcpy(attrs + i + 1, n->attrs + i, (size_t)(n->nattrs - i) * sizeof *attrs);
	n->attrs = attrs;
	n->nattrs++;
	attrs[i].kind = k;
	return &attrs[i];
}

void ir_node_set_int(ir_graph *g, ir_node *n, ir_attr_kind k, int64_t v)
{
	IR_ASSERT(ir_attr_vtype_of(k) == IR_AV_INT);
	attr_slot(g, n, k)->u.i = v;
}

void ir_node_set_float(ir_graph *g, ir_node *n, ir_attr_kind k, double v)
{
	IR_ASSERT(ir_attr_vtype_of(k) == IR_AV_FLOAT);
	attr_slot(g, n, k)->u.f = v;
}

void ir_node_set_str(ir_graph *g, ir_node *n, ir_attr_kind k, const char *s)
{
	IR_ASSERT(ir_attr_vtype_of(k) == IR_AV_STR);
	attr_slot(g, n, k)->u.s = ir_arena_strdup(g->arena, s);
}

void ir_node_set_ints(ir_graph *g, ir_node *n, ir_attr_kind k, const int64_t *v, int count)
{
	IR_ASSERT(ir_attr_vtype_of(k) == IR_AV_INTS && count >= 0 && count <= IR_MAX_INTS);
	ir_attr *a = attr_slot(g, n, k);
	a->u.ints.n = count;
	for (int i = 0; i < count; i++)
		a->u.ints.v[i] = v[i];
}

const ir_attr *ir_node_attr(const ir_node *n, ir_attr_kind k)
{
	for (int i = 0; i < n->nattrs; i++)
		if (n->attrs[i].kind == k)
			return &n->attrs[i];
	return NULL;
}

static const ir_attr *need_attr(const ir_node *n, ir_attr_kind k)
{
	const ir_attr *a = ir_node_attr(n, k);
	if (!a)
		IR_DIE("%s node lacks attribute '%s'", ir_op_name(n->op), ir_attr_name(k));
	return a;
}

int64_t ir_node_int(const ir_node *n, ir_attr_kind k) { return need_attr(n, k)->u.i; }
double ir_node_float(const ir_node *n, ir_attr_kind k) { return need_attr(n, k)->u.f; }
const char *ir_node_str(const ir_node *n, ir_attr_kind k) { return need_attr(n, k)->u.s; }

void ir_node_add_after(ir_graph *g, ir_node *n, ir_node *dep)
{
	for (int i = 0; i < n->nafter; i++)
		if (n->after[i] == dep)
			return;
	if (n->nafter == n->cap_after) {
		int cap = n->cap_after ? 2 * n->cap_after : 2;
		ir_node **after = ir_arena_array(g->arena, (size_t)cap, sizeof *after);
		if (n->nafter)
			memcpy(after, n->after, (size_t)n->nafter * sizeof *after);
		n->after = after;
		n->cap_after = cap;
	}
	n->after[n->nafter++] = dep;
}

bool ir_node_has_own_buffer(const ir_node *n)
{
	return !ir_op_is_persistent(n->op) && n->op != IR_OP_OUTPUT && !ir_op_has(n->op, IR_OPF_UPD);
}

const char *ir_node_ref(const ir_node *n, char *buf, size_t len)
{
	if (n->name)
		snprintf(buf, len, "$%s", n->name);
	else
		snprintf(buf, len, "%%%d", n->label >= 0 ? n->label : n->id);
	return buf;
}

void ir_diag_node(ir_diags *d, const ir_node *n, const char *fmt, ...)
{
	char msg[600], ref[80];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ir_diag_add(d, n->pos, "%s (%s): %s", ir_node_ref(n, ref, sizeof ref), ir_op_name(n->op), msg);
}

void ir_graph_renumber(ir_graph *g)
{
	for (int i = 0; i < g->n; i++)
		g->nodes[i]->id = i;
}

bool ir_graph_ids_current(const ir_graph *g)
{
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->id != i)
			return false;
	return true;
}

void ir_graph_remove(ir_graph *g, const bool *dead)
{
	int j = 0;
	for (int i = 0; i < g->n; i++) {
		ir_node *n = g->nodes[i];
		IR_ASSERT(n->id == i);
		if (dead[i])
			continue;
		for (int k = 0; k < n->nin; k++)
			if (dead[n->in[k]->id])
				IR_DIE("removing %s node %d that live node %d uses",
					ir_op_name(n->in[k]->op), n->in[k]->id, i);
		int m = 0;
		for (int k = 0; k < n->nafter; k++)
			if (!dead[n->after[k]->id])
				n->after[m++] = n->after[k];
		n->nafter = m;
		g->nodes[j++] = n;
	}
	g->n = j;
	ir_graph_renumber(g);
	for (int i = 0; i < g->n; i++)
		g->nodes[i]->label = -1; /* parsed numbers no longer match the list */
}

void ir_graph_reorder(ir_graph *g, ir_node **order)
{
	memcpy(g->nodes, order, (size_t)g->n * sizeof *order);
	ir_graph_renumber(g);
	for (int i = 0; i < g->n; i++)
		g->nodes[i]->label = -1;
}

void ir_graph_mark_pass_at(ir_graph *g, const char *pass, ir_pos pos)
{
	if (ir_graph_has_pass(g, pass))
		return;
	const char **p = realloc(g->passes, (size_t)(g->npasses + 1) * sizeof *p);
	ir_pos *at = p ? realloc(g->pass_pos, (size_t)(g->npasses + 1) * sizeof *at) : NULL;
	if (!at)
		IR_DIE("out of memory");
	g->passes = p;
	g->pass_pos = at;
	g->pass_pos[g->npasses] = pos;
	g->passes[g->npasses++] = ir_arena_strdup(g->arena, pass);
}

void ir_graph_mark_pass(ir_graph *g, const char *pass)
{
	ir_graph_mark_pass_at(g, pass, (ir_pos){0});
}

static int pass_index(const ir_graph *g, const char *pass)
{
	for (int i = 0; i < g->npasses; i++)
		if (strcmp(g->passes[i], pass) == 0)
			return i;
	return -1;
}

bool ir_graph_has_pass(const ir_graph *g, const char *pass)
{
	return pass_index(g, pass) >= 0;
}

ir_pos ir_graph_pass_pos(const ir_graph *g, const char *pass)
{
	int i = pass_index(g, pass);
	return i >= 0 ? g->pass_pos[i] : (ir_pos){0};
}

bool ir_node_is_dbeta(const ir_node *d, const ir_node *r)
{
	if (r->op != IR_OP_REDUCE_SUM || r->in[0] != d->in[0] || !ir_type_eq(&r->type, &d->type))
		return false;
	const ir_type *x = &d->in[0]->type;
	const ir_attr *axes = ir_node_attr(r, IR_ATTR_AXES);
	if (x->rank < 2 || axes->u.ints.n != x->rank - 1)
		return false;
	for (int i = 0; i < axes->u.ints.n; i++)
		if (axes->u.ints.v[i] != (i == 0 ? 0 : i + 1))
			return false;
	return true;
}
