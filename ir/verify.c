/* verify.c: every invariant a graph must hold, checked, with every violation
 * reported at its node.
 *
 * Per node: arity, attributes (required present, none foreign), a declared
 * result type that the op's shape rule agrees with, names only on param and
 * state.  Per graph: each node listed once, operands and ordering edges
 * inside the graph, no edge to itself, no cycle through data or ordering
 * edges, the list order an execution order, and for ops that update a
 * parameter or state in place: one update per storage, ordered after every
 * other reader of it, and never inside a recomputation. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct {
	const ir_graph *g;
	ir_diags *d;
	int errors;
} verifier;

static void report(verifier *v, const ir_node *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void report(verifier *v, const ir_node *n, const char *fmt, ...)
{
	char msg[600], ref[80];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ir_diag_add(v->d, n->pos, "%s (%s): %s", ir_node_ref(n, ref, sizeof ref), ir_op_name(n->op), msg);
	v->errors++;
}

static bool in_graph(const ir_graph *g, const ir_node *m)
{
	return m && m->id >= 0 && m->id < g->n && g->nodes[m->id] == m;
}

/* Arity, attributes and the result type of one node.  Operands are known to
 * be in the graph. */
static void check_node(verifier *v, const ir_node *n)
{
	const ir_op_info *info = ir_op_get(n->op);
	char a[128], b[128];
	bool ok = true;
	if (n->nin < info->min_arity || n->nin > info->max_arity) {
		if (info->min_arity == info->max_arity)
			report(v, n, "takes %d operand%s, got %d", info->min_arity,
				info->min_arity == 1 ? "" : "s", n->nin);
		else
			report(v, n, "takes %d to %d operands, got %d", info->min_arity, info->max_arity, n->nin);
		ok = false;
	}
	for (int i = 0; i < n->nattrs; i++) {
		ir_attr_kind k = n->attrs[i].kind;
		if (!((info->req_attrs | info->opt_attrs) & (1u << k))) {
			report(v, n, "has no attribute '%s'", ir_attr_name(k));
			ok = false;
		}
	}
	for (int k = 0; k < IR_ATTR_COUNT; k++)
		if ((info->req_attrs & (1u << k)) && !ir_node_attr(n, (ir_attr_kind)k)) {
			report(v, n, "missing attribute '%s'", ir_attr_name((ir_attr_kind)k));
			ok = false;
		}
	bool named = n->op == IR_OP_PARAM || n->op == IR_OP_STATE;
	if (named != (n->name != NULL)) {
		report(v, n, named ? "needs a $name" : "only param and state have a $name");
		ok = false;
	}
	if (n->type.rank < 0 || n->type.rank > IR_MAX_RANK || !ir_type_size_ok(&n->type)) {
		report(v, n, "has no valid result type");
		return;
	}
	if (!ok)
		return;
	ir_type t = n->type;
	int before = v->d->n;
	if (!info->rule(n, &t, v->d)) {
		v->errors += v->d->n - before;
		return;
	}
	if (!ir_type_eq(&t, &n->type)) {
		ir_type_str(&n->type, a, sizeof a);
		ir_type_str(&t, b, sizeof b);
		report(v, n, "declared type %s, but its operands give %s", a, b);
	}
}

/* Finds cycles through operands and ordering edges with an iterative DFS
 * (graphs can be deep).  Reports each back edge it finds. */
static bool check_acyclic(verifier *v)
{
	const ir_graph *g = v->g;
	enum { WHITE, GREY, BLACK };
	int *color = calloc((size_t)g->n + 1, sizeof *color);
	int *stack = malloc(((size_t)g->n + 1) * sizeof *stack);
	int *edge = malloc(((size_t)g->n + 1) * sizeof *edge);
	if (!color || !stack || !edge)
		IR_DIE("out of memory");
	bool acyclic = true;
	for (int root = 0; root < g->n; root++) {
		if (color[root] != WHITE)
			continue;
		int sp = 0;
		stack[sp] = root;
		edge[sp] = 0;
		color[root] = GREY;
		while (sp >= 0) {
			const ir_node *n = g->nodes[stack[sp]];
			int e = edge[sp]++;
			if (e >= n->nin + n->nafter) {
				color[stack[sp--]] = BLACK;
				continue;
			}
			bool ordering = e >= n->nin;
			const ir_node *m = ordering ? n->after[e - n->nin] : n->in[e];
			if (m == n)
				continue; /* reported as a self edge */
			if (color[m->id] == GREY) {
				char r1[80];
				report(v, n, "is part of a cycle: it %s %s, which depends on it",
					ordering ? "must run after" : "uses", ir_node_ref(m, r1, sizeof r1));
				acyclic = false;
			} else if (color[m->id] == WHITE) {
				color[m->id] = GREY;
				stack[++sp] = m->id;
				edge[sp] = 0;
			}
		}
	}
	free(color);
	free(stack);
	free(edge);
	return acyclic;
}

/* Marks every node that must run before `from` (its transitive operands and
 * ordering-edge targets) with mark == stamp. */
static void mark_ancestors(const ir_graph *g, const ir_node *from, int stamp, int *stack)
{
	int sp = 0;
	stack[sp++] = from->id;
	while (sp > 0) {
		const ir_node *n = g->nodes[stack[--sp]];
		for (int e = 0; e < n->nin + n->nafter; e++) {
			ir_node *m = e < n->nin ? n->in[e] : n->after[e - n->nin];
			if (m->mark != stamp) {
				m->mark = stamp;
				stack[sp++] = m->id;
			}
		}
	}
}

static bool direct_dep(const ir_node *n, const ir_node *dep)
{
	for (int k = 0; k < n->nin; k++)
		if (n->in[k] == dep)
			return true;
	for (int k = 0; k < n->nafter; k++)
		if (n->after[k] == dep)
			return true;
	return false;
}

/* In-place updates of parameters and state: the storage must be a param or
 * state, updated once, after all its other readers, never in a recompute. */
static void check_updates(verifier *v)
{
	const ir_graph *g = v->g;
	ir_users users;
	ir_users_build((ir_graph *)g, &users);
	int *stack = malloc(((size_t)g->n + 1) * sizeof *stack);
	const ir_node **updater = calloc((size_t)g->n + 1, sizeof *updater);
	if (!stack || !updater)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++)
		g->nodes[i]->mark = 0;
	int stamp = 0;
	char r1[80], r2[80];
	for (int i = 0; i < g->n; i++) {
		const ir_node *u = g->nodes[i];
		if (!ir_op_has(u->op, IR_OPF_UPD) || u->nin < 1)
			continue;
		const ir_node *p = u->in[0];
		if (u->role == IR_ROLE_RECOMPUTE)
			report(v, u, "a recomputation must not update %s", ir_node_ref(p, r1, sizeof r1));
		if (p->op != IR_OP_PARAM && p->op != IR_OP_STATE) {
			report(v, u, "operand 0 must be a param or state to update, got %s",
				ir_node_ref(p, r1, sizeof r1));
			continue;
		}
		if (updater[p->id]) {
			report(v, u, "updates %s, which %s already updates", ir_node_ref(p, r1, sizeof r1),
				ir_node_ref(updater[p->id], r2, sizeof r2));
			continue;
		}
		updater[p->id] = u;
		/* Readers ordered directly (operand or edge) need no search; the
		 * ancestors are marked only when some reader is not. */
		bool marked = false;
		for (int k = users.start[p->id]; k < users.start[p->id + 1]; k++) {
			const ir_node *r = users.user[k];
			if (r == u || direct_dep(u, r))
				continue;
			if (!marked) {
				mark_ancestors(g, u, ++stamp, stack);
				marked = true;
			}
			if (r->mark != stamp)
				report(v, u, "updates %s in place but is not ordered after %s, which reads it",
					ir_node_ref(p, r1, sizeof r1), ir_node_ref(r, r2, sizeof r2));
		}
	}
	ir_users_free(&users);
	free(stack);
	free(updater);
}

/* Names that must be unique: a param's or state's, an output's. */
static const char *param_name(const ir_node *n) { return n->name; }

static const char *output_name(const ir_node *n)
{
	return n->op == IR_OP_OUTPUT && ir_node_attr(n, IR_ATTR_NAME) ? ir_node_str(n, IR_ATTR_NAME) : NULL;
}

typedef struct {
	const char *key;
	int index;
} keyed;

static int keyed_cmp(const void *a, const void *b)
{
	const keyed *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* repeats[i] is true when node i's key (if any) is also an earlier node's:
 * sorting, not pairwise comparison, so large graphs verify quickly. */
static bool *repeats(const ir_graph *g, const char *(*key)(const ir_node *))
{
	bool *rep = calloc((size_t)g->n + 1, sizeof *rep);
	keyed *k = malloc(((size_t)g->n + 1) * sizeof *k);
	if (!rep || !k)
		IR_DIE("out of memory");
	int n = 0;
	for (int i = 0; i < g->n; i++) {
		const char *s = key(g->nodes[i]);
		if (s)
			k[n++] = (keyed){s, i};
	}
	qsort(k, (size_t)n, sizeof *k, keyed_cmp);
	for (int i = 1; i < n; i++)
		if (strcmp(k[i].key, k[i - 1].key) == 0)
			rep[k[i].index] = true;
	free(k);
	return rep;
}

/* Fusion groups are contiguous runs of the schedule: a group that starts
 * again after it ended is reported. */
static void check_groups(verifier *v)
{
	const ir_graph *g = v->g;
	int top = -1;
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->group > top)
			top = g->nodes[i]->group;
	bool *ended = calloc((size_t)top + 2, sizeof *ended);
	if (!ended)
		IR_DIE("out of memory");
	for (int i = 1; i < g->n; i++) {
		const ir_node *n = g->nodes[i], *prev = g->nodes[i - 1];
		if (prev->group >= 0 && prev->group != n->group)
			ended[prev->group] = true;
		if (n->group >= 0 && n->group != prev->group && ended[n->group])
			report(v, n, "group %d is not contiguous in the schedule", n->group);
	}
	free(ended);
}

bool ir_verify(const ir_graph *g, ir_diags *d)
{
	verifier v = {g, d, 0};
	char r1[80];
	ir_graph_renumber((ir_graph *)g);
	/* Membership first: everything below follows pointers. */
	bool linked = true;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->id != i) {
			report(&v, n, "is listed twice in the graph");
			linked = false;
			continue;
		}
		for (int e = 0; e < n->nin + n->nafter; e++) {
			const ir_node *m = e < n->nin ? n->in[e] : n->after[e - n->nin];
			if (!in_graph(g, m)) {
				report(&v, n, "%s %d refers to a node outside the graph",
					e < n->nin ? "operand" : "ordering edge", e < n->nin ? e : e - n->nin);
				linked = false;
			}
		}
	}
	if (!linked)
		return false;

	bool *dup_name = repeats(g, param_name), *dup_output = repeats(g, output_name);
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		for (int e = 0; e < n->nin; e++)
			if (n->in[e] == n)
				report(&v, n, "uses its own result");
		for (int e = 0; e < n->nafter; e++)
			if (n->after[e] == n)
				report(&v, n, "has an ordering edge to itself");
		if (n->name && dup_name[i])
			report(&v, n, "$%s is defined twice", n->name);
		if (dup_output[i])
			report(&v, n, "output \"%s\" is defined twice", ir_node_str(n, IR_ATTR_NAME));
		check_node(&v, n);
	}
	free(dup_name);
	free(dup_output);

	if (check_acyclic(&v)) {
		/* Acyclic: the list must be an execution order. */
		for (int i = 0; i < g->n; i++) {
			const ir_node *n = g->nodes[i];
			for (int e = 0; e < n->nin + n->nafter; e++) {
				const ir_node *m = e < n->nin ? n->in[e] : n->after[e - n->nin];
				if (m->id > i)
					report(&v, n, "%s %s, which comes later in the graph",
						e < n->nin ? "uses" : "must run after", ir_node_ref(m, r1, sizeof r1));
			}
		}
		check_updates(&v);
		check_groups(&v);
		bool planned = false;
		for (int i = 0; i < g->n && !planned; i++)
			planned = g->nodes[i]->offset >= 0 || g->nodes[i]->ws_offset >= 0;
		if (planned && !ir_verify_plan(g, d))
			v.errors++;
	}
	return v.errors == 0;
}
