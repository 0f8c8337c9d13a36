/* verify.c: every invariant a graph must hold, checked, with every violation
 * reported at its node.
 *
 * Per node: arity, attributes (required present, none foreign), a declared
 * result type that the op's shape rule agrees with, names only on param and
 * state.  Per graph: each node listed once, operands and ordering edges
 * inside the graph, no edge to itself, no cycle through data or ordering
 * edges, the list order an execution order, fusion groups that one loop
 * can compute, and for ops that update a parameter or state in place: one
 * update per storage, ordered after every other reader of it, and never
 * inside a recomputation. */
#include <stdint.h>
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
	bool named = ir_op_is_persistent(n->op);
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
	int64_t before = v->d->total;
	if (!info->rule(n, &t, v->d)) {
		v->errors += (int)(v->d->total - before);
		return;
	}
	if (!ir_type_eq(&t, &n->type)) {
		ir_type_str(&n->type, a, sizeof a);
		ir_type_str(&t, b, sizeof b);
		report(v, n, "declared type %s, but its operands give %s", a, b);
	}
}

/* Finds cycles through operands and ordering edges with an iterative DFS
 * (graphs can be deep).  Reports each back edge it finds.  topo receives
 * the nodes' ids in the order the search finishes them: every node after
 * its operands and edge targets when the graph is acyclic. */
static bool check_acyclic(verifier *v, int *topo)
{
	const ir_graph *g = v->g;
	enum { WHITE, GREY, BLACK };
	int *color = calloc((size_t)g->n + 1, sizeof *color);
	int *stack = malloc(((size_t)g->n + 1) * sizeof *stack);
	int *edge = malloc(((size_t)g->n + 1) * sizeof *edge);
	if (!color || !stack || !edge)
		IR_DIE("out of memory");
	bool acyclic = true;
	int done = 0;
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
				topo[done++] = stack[sp];
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

/* In-place updates of parameters and state: the storage must be a param or
 * state, updated once, after all its other readers, never in a recompute.
 *
 * "After" is through operands and ordering edges, directly (the common
 * case, and what the optim pass writes) or through a chain of them.  The
 * chains are followed back from 64 updaters at a time, each node entered
 * once per batch (follow_chains), in batches of updaters near each other
 * in topological order. */
typedef struct {
	const ir_graph *g;
	ir_users users;
	const ir_node **updater; /* by storage id: its first updater */
	int stamp;
} updates;

/* Calls visit(u, r, ...) (when not NULL) for each updater u, in list
 * order, and each other reader r of its storage it does not name directly;
 * returns how many.  Reports the other violations to report_to (when not
 * NULL). */
typedef void (*unordered_fn)(void *user, const ir_node *u, const ir_node *r, int pair);

static int each_unordered(updates *s, verifier *report_to, unordered_fn visit, void *user)
{
	const ir_graph *g = s->g;
	char r1[80], r2[80];
	int pairs = 0;
	for (int i = 0; i < g->n; i++)
		s->updater[i] = NULL;
	for (int i = 0; i < g->n; i++) {
		const ir_node *u = g->nodes[i];
		if (!ir_op_has(u->op, IR_OPF_UPD) || u->nin < 1)
			continue;
		const ir_node *p = u->in[0];
		if (report_to && u->role == IR_ROLE_RECOMPUTE)
			report(report_to, u, "a recomputation must not update %s", ir_node_ref(p, r1, sizeof r1));
		if (!ir_op_is_persistent(p->op)) {
			if (report_to)
				report(report_to, u, "operand 0 must be a param or state to update, got %s",
					ir_node_ref(p, r1, sizeof r1));
			continue;
		}
		if (s->updater[p->id]) {
			if (report_to)
				report(report_to, u, "updates %s, which %s already updates", ir_node_ref(p, r1, sizeof r1),
					ir_node_ref(s->updater[p->id], r2, sizeof r2));
			continue;
		}
		s->updater[p->id] = u;
		/* Readers u names need no search. */
		s->stamp++;
		for (int k = 0; k < u->nin + u->nafter; k++)
			(k < u->nin ? u->in[k] : u->after[k - u->nin])->mark = s->stamp;
		const ir_node *prev = NULL;
		for (int k = s->users.start[p->id]; k < s->users.start[p->id + 1]; k++) {
			const ir_node *r = s->users.user[k];
			if (r == u || r == prev || r->mark == s->stamp)
				continue;
			prev = r;
			if (visit)
				visit(user, u, r, pairs);
			pairs++;
		}
	}
	return pairs;
}

typedef struct {
	const ir_node **u, **r; /* by pair */
	bool *ok;
} pair_list;

static void collect(void *user, const ir_node *u, const ir_node *r, int pair)
{
	pair_list *l = user;
	l->u[pair] = u;
	l->r[pair] = r;
}

typedef struct {
	verifier *v;
	const bool *ok;
} pair_report;

static void report_pair(void *user, const ir_node *u, const ir_node *r, int pair)
{
	pair_report *pr = user;
	char r1[80], r2[80];
	if (!pr->ok[pair])
		report(pr->v, u, "updates %s in place but is not ordered after %s, which reads it",
			ir_node_ref(u->in[0], r1, sizeof r1), ir_node_ref(r, r2, sizeof r2));
}

/* The nodes the chains of one batch reach, latest first: a max-heap on
 * topological position. */
typedef struct {
	const int *pos;
	int *node, n;
} pos_heap;

static void heap_push(pos_heap *h, int x)
{
	int i = h->n++;
	while (i > 0 && h->pos[h->node[(i - 1) / 2]] < h->pos[x]) {
		h->node[i] = h->node[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->node[i] = x;
}

static int heap_pop(pos_heap *h)
{
	int top = h->node[0], x = h->node[--h->n], i = 0;
	for (;;) {
		int c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->pos[h->node[c + 1]] > h->pos[h->node[c]])
			c++;
		if (h->pos[h->node[c]] <= h->pos[x])
			break;
		h->node[i] = h->node[c];
		i = c;
	}
	if (h->n > 0)
		h->node[i] = x;
	return top;
}

/* Sets ok for pairs [first, last), whose updaters are at most 64 distinct
 * nodes, each pair's at one place in slot[].  From the updaters back
 * through operands and edges, latest first, each node hands on the set of
 * updaters it runs before; nodes placed before every reader of the batch
 * cannot lead to one and are not entered.  So the work is the ancestors of
 * the batch's updaters that lie after its first reader.  reach[] is zero
 * outside a call; touched has room for every node. */
static void follow_chains(const ir_graph *g, const int *pos, uint64_t *reach, pos_heap *h, int *touched,
	const pair_list *l, const int *slot, int first, int last)
{
	int lo = g->n, nt = 0;
	for (int k = first; k < last; k++)
		if (pos[l->r[k]->id] < lo)
			lo = pos[l->r[k]->id];
	h->n = 0;
	for (int k = first; k < last; k++) {
		int u = l->u[k]->id;
		if (!reach[u]) {
			heap_push(h, u);
			touched[nt++] = u;
		}
		reach[u] |= (uint64_t)1 << slot[k];
	}
	while (h->n > 0) {
		const ir_node *x = g->nodes[heap_pop(h)];
		uint64_t m = reach[x->id];
		for (int k = 0; k < x->nin + x->nafter; k++) {
			int d = (k < x->nin ? x->in[k] : x->after[k - x->nin])->id;
			if (pos[d] < lo)
				continue;
			if (!reach[d]) {
				heap_push(h, d);
				touched[nt++] = d;
			}
			reach[d] |= m;
		}
	}
	for (int k = first; k < last; k++) {
		int r = l->r[k]->id;
		l->ok[k] = pos[r] < pos[l->u[k]->id] && (reach[r] >> slot[k] & 1);
	}
	for (int i = 0; i < nt; i++)
		reach[touched[i]] = 0;
}

static const int *sort_pos;
static const pair_list *sort_pairs;
static int by_updater_pos(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	int px = sort_pos[sort_pairs->u[x]->id], py = sort_pos[sort_pairs->u[y]->id];
	return px != py ? px - py : x - y;
}

static void check_updates(verifier *v, const int *topo)
{
	const ir_graph *g = v->g;
	updates s = {g, {0}, calloc((size_t)g->n + 1, sizeof *s.updater), 0};
	int *pos = malloc(((size_t)g->n + 1) * sizeof *pos);
	if (!s.updater || !pos)
		IR_DIE("out of memory");
	ir_users_build(g, &s.users);
	for (int i = 0; i < g->n; i++) {
		g->nodes[i]->mark = 0;
		pos[topo[i]] = i;
	}
	int n = each_unordered(&s, NULL, NULL, NULL);
	pair_list l = {malloc(((size_t)n + 1) * sizeof *l.u), malloc(((size_t)n + 1) * sizeof *l.r),
		calloc((size_t)n + 1, sizeof *l.ok)};
	int *order = malloc(((size_t)n + 1) * sizeof *order), *slot = malloc(((size_t)n + 1) * sizeof *slot);
	uint64_t *reach = calloc((size_t)g->n + 1, sizeof *reach);
	int *touched = malloc(((size_t)g->n + 1) * sizeof *touched);
	pos_heap h = {pos, malloc(((size_t)g->n + 1) * sizeof *h.node), 0};
	if (!l.u || !l.r || !l.ok || !order || !slot || !reach || !touched || !h.node)
		IR_DIE("out of memory");
	each_unordered(&s, NULL, collect, &l);
	/* Batches of 64 updaters, taken in topological order so that each
	 * sweep stays near them. */
	for (int k = 0; k < n; k++)
		order[k] = k;
	sort_pos = pos;
	sort_pairs = &l;
	qsort(order, (size_t)n, sizeof *order, by_updater_pos);
	sort_pos = NULL;
	sort_pairs = NULL;
	pair_list sorted = {malloc(((size_t)n + 1) * sizeof *l.u), malloc(((size_t)n + 1) * sizeof *l.r),
		calloc((size_t)n + 1, sizeof *l.ok)};
	if (!sorted.u || !sorted.r || !sorted.ok)
		IR_DIE("out of memory");
	for (int k = 0; k < n; k++) {
		sorted.u[k] = l.u[order[k]];
		sorted.r[k] = l.r[order[k]];
	}
	for (int first = 0; first < n;) {
		int last = first, slots = 0;
		for (; last < n; last++) {
			if (last > first && sorted.u[last] != sorted.u[last - 1] && ++slots == 64)
				break;
			slot[last] = slots;
		}
		follow_chains(g, pos, reach, &h, touched, &sorted, slot, first, last);
		first = last;
	}
	for (int k = 0; k < n; k++)
		l.ok[order[k]] = sorted.ok[k];
	pair_report pr = {v, l.ok};
	each_unordered(&s, v, report_pair, &pr);
	free(sorted.u);
	free(sorted.r);
	free(sorted.ok);
	free(l.u);
	free(l.r);
	free(l.ok);
	free(order);
	free(slot);
	free(reach);
	free(touched);
	free(h.node);
	free(pos);
	free(s.updater);
	ir_users_free(&s.users);
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

/* Does n read a member of the group run [first, i), or, an optimiser node
 * as a sibling, a full-size operand a member reads (AdamW's moments share
 * the gradient; passes/fuse.c)? */
static bool reads_member(const ir_graph *g, const ir_node *n, int first, int i)
{
	for (int k = 0; k < n->nin; k++) {
		const ir_node *o = n->in[k];
		if (o->id >= first && o->id < i)
			return true;
		if (n->role != IR_ROLE_OPT || !ir_type_eq(&o->type, &n->type))
			continue;
		for (int j = first; j < i; j++)
			for (int l = 0; l < g->nodes[j]->nin; l++)
				if (g->nodes[j]->in[l] == o)
					return true;
	}
	return false;
}

/* Can r follow member m of an epilogue group: the bn_stats of m's result,
 * or, after a conv2d, an add or sub of its type reading it (sub: as the
 * one subtracted); after a conv2d_dx, a relu_grad of its type masking it
 * (reading it as operand 0)? */
static bool epilogue_follows(const ir_node *m, const ir_node *r)
{
	if (m->op == IR_OP_CONV2D_DX)
		return r->op == IR_OP_RELU_GRAD && r->in[0] == m && r->in[1] != m && ir_type_eq(&r->type, &m->type);
	if (r->op == IR_OP_BN_STATS)
		return r->in[0] == m;
	if (m->op != IR_OP_CONV2D || !ir_type_eq(&r->type, &m->type) || r->in[0] == r->in[1])
		return false;
	return (r->op == IR_OP_ADD && (r->in[0] == m || r->in[1] == m)) || (r->op == IR_OP_SUB && r->in[1] == m);
}

static bool opens_epilogue(const ir_node *n)
{
	return n->op == IR_OP_CONV2D || n->op == IR_OP_CONV2D_DX;
}

/* An epilogue group (passes/fuse.c): a float conv2d first, then the
 * bn_stats of its result, or an add or sub reading it and maybe the
 * bn_stats of that; or a float conv2d_dx, then the relu_grad masking it
 * and maybe the bn_dgamma of that one's result and its dbeta.  After a
 * prologue (`pro`: check_prologue) the conv2d may have no epilogue.
 * Member i of the run from first, the convolution. */
static void check_epilogue(verifier *v, int first, int i, bool pro)
{
	const ir_graph *g = v->g;
	const ir_node *n = g->nodes[i], *next = i + 1 < g->n ? g->nodes[i + 1] : NULL;
	bool last = !next || next->group != n->group;
	if (i > first && opens_epilogue(n))
		report(v, n, "is in group %d, but a convolution can only be a group's first member, or follow its "
			"prologue's bn_norm and relu", n->group);
	else if (i == first && !ir_dtype_is_float(n->type.dtype))
		report(v, n, "is in group %d, but a convolution opens a group only on floats", n->group);
	else if (i == first && pro && last)
		return;
	else if (i == first && n->op == IR_OP_CONV2D_DX && (last || !epilogue_follows(n, next)))
		report(v, n, "is in group %d, but a data gradient's group holds the relu_grad masking it, which must "
			"follow it", n->group);
	else if (i == first && (last || !epilogue_follows(n, next)))
		report(v, n, "is in group %d, but a convolution's group holds the bn_stats of its result or an add or "
			"sub reading it, which must follow it", n->group);
	else if (i > first && g->nodes[first]->op == IR_OP_CONV2D_DX) {
		const ir_node *d = i == first + 3 ? g->nodes[first + 2] : NULL;
		bool ok = i == first + 1 ||
			  (i == first + 2 && n->op == IR_OP_BN_DGAMMA && n->in[0] == g->nodes[first + 1] && next &&
				  next->group == n->group && ir_node_is_dbeta(n, next)) ||
			  (d && d->op == IR_OP_BN_DGAMMA && ir_node_is_dbeta(d, n));
		if (!ok)
			report(v, n, "is in group %d, which a data gradient opens: it holds the relu_grad masking it and "
				"then, optionally, the bn_dgamma of that one's result and its dbeta, nothing else", n->group);
	} else if (i > first + 1 && (i > first + 2 || g->nodes[i - 1]->op == IR_OP_BN_STATS ||
				   !epilogue_follows(g->nodes[i - 1], n) || n->op != IR_OP_BN_STATS))
		report(v, n, "is in group %d, which a convolution opens: it holds at most an add or sub reading the "
			"convolution and the bn_stats of that one's result", n->group);
}

/* The position of the conv2d of the prologue group that opens at `first`
 * (passes/fuse.c): a bn_norm, the relu reading it, and a conv2d reading
 * that one as its input x, the three in one group; or -1. */
static int prologue_conv(const ir_graph *g, int first)
{
	if (first + 2 >= g->n)
		return -1;
	const ir_node *n = g->nodes[first], *r = g->nodes[first + 1], *c = g->nodes[first + 2];
	if (n->op != IR_OP_BN_NORM || r->op != IR_OP_RELU || c->op != IR_OP_CONV2D || r->group != n->group ||
		c->group != n->group || r->in[0] != n || c->in[0] != r)
		return -1;
	return first + 2;
}

/* Member i of a prologue group's bn_norm and relu (the run from first):
 * floats, and read by nothing but the next member (readers[i] counts the
 * operands that are node i), since the conv2d's kernel never stores
 * them. */
static void check_prologue(verifier *v, const int *readers, int first, int i)
{
	const ir_graph *g = v->g;
	const ir_node *n = g->nodes[i];
	char r[80];
	if (!ir_dtype_is_float(n->type.dtype))
		report(v, n, "is in group %d, but a convolution's prologue is on floats only", n->group);
	for (int j = 0; readers[i] > 1 && j < g->n; j++) /* name the others: an error, so rare */
		for (int k = 0; k < g->nodes[j]->nin; k++)
			if (g->nodes[j]->in[k] == n && j != i + 1)
				report(v, n, "is in group %d, a convolution's prologue, whose %s is not stored, but %s reads it",
					n->group, i == first ? "batch norm" : "relu", ir_node_ref(g->nodes[j], r, sizeof r));
}

/* A dbeta group (passes/fuse.c): a float bn_dgamma first, then a
 * reduce_sum of its dy of its type over all but axis 1, and nothing else.
 * Member i of the run from first. */
static void check_dbeta(verifier *v, int first, int i)
{
	const ir_graph *g = v->g;
	const ir_node *n = g->nodes[i], *d = g->nodes[first];
	if (i == first) {
		const ir_node *next = i + 1 < g->n ? g->nodes[i + 1] : NULL;
		if (!ir_dtype_is_float(n->type.dtype) || !next || next->group != n->group)
			report(v, n, "is in group %d, but a bn_dgamma opens a group only on floats, followed by its dbeta",
				n->group);
		return;
	}
	if (i != first + 1 || d->op != IR_OP_BN_DGAMMA || !ir_node_is_dbeta(d, n))
		report(v, n, "is in group %d, which a bn_dgamma opens: it holds only the reduce_sum of the same dy over "
			"all but the channel axis", n->group);
}

/* Fusion groups (IR_MAX_GROUP): contiguous runs of the schedule, a group
 * that starts again after it ended being reported; in each run, members
 * computable element by element (the first may be a row reduction), of one
 * result type (the group's: ir_group_type), each after the first
 * reading an earlier member (an optimiser node: or a full-size operand of
 * one), at most IR_MAX_GROUP of them, broadcasting along one kind of row
 * (ir_bcast); or an epilogue group (check_epilogue). */
static void check_groups(verifier *v)
{
	static const char *const bcast_names[] = {"nothing", "per channel", "along the last axis"};
	const ir_graph *g = v->g;
	int top = -1;
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->group > top)
			top = g->nodes[i]->group;
	bool *ended = calloc((size_t)top + 2, sizeof *ended);
	int *readers = calloc((size_t)g->n + 1, sizeof *readers);
	if (!ended || !readers)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++)
		for (int k = 0; k < g->nodes[i]->nin; k++)
			readers[g->nodes[i]->in[k]->id]++;
	char a[128], b[128];
	ir_bcast kind = IR_BCAST_NONE; /* of the current run */
	for (int i = 0, first = 0, pro = -1; i < g->n; i++) {
		const ir_node *n = g->nodes[i], *prev = i > 0 ? g->nodes[i - 1] : NULL;
		if (prev && prev->group >= 0 && prev->group != n->group)
			ended[prev->group] = true;
		if (n->group < 0)
			continue;
		if (!prev || n->group != prev->group) {
			first = i;
			kind = IR_BCAST_NONE;
			if (ended[n->group])
				report(v, n, "group %d is not contiguous in the schedule", n->group);
			pro = prologue_conv(g, first);
		}
		if (pro >= 0 && i < pro) {
			check_prologue(v, readers, first, i);
			continue;
		}
		if (pro >= 0 || opens_epilogue(g->nodes[first]) || opens_epilogue(n)) {
			check_epilogue(v, pro >= 0 ? pro : first, i, pro >= 0);
			continue;
		}
		if (g->nodes[first]->op == IR_OP_BN_DGAMMA || n->op == IR_OP_BN_DGAMMA) {
			check_dbeta(v, first, i);
			continue;
		}
		const ir_type *ft = ir_group_type(g->nodes[first]);
		bool row = i == first && ir_op_has(n->op, IR_OPF_ROW);
		if ((!ir_op_has(n->op, IR_OPF_FUSE) && !row) || !ir_dtype_is_float(n->type.dtype)) {
			ir_type_str(&n->type, a, sizeof a);
			report(v, n, "is in group %d, but %s %s is not computed element by element%s", n->group,
				ir_op_name(n->op), a, ir_op_has(n->op, IR_OPF_ROW) ? " (a row reduction can only be a group's first member)" : "");
		} else if (i > first && !ir_type_eq(&n->type, ft)) {
			ir_type_str(&n->type, a, sizeof a);
			ir_type_str(ft, b, sizeof b);
			report(v, n, "is in group %d, but its result %s is not the group's %s", n->group, a, b);
		} else if (i > first && !reads_member(g, n, first, i)) {
			report(v, n, "is in group %d, but reads no member before it", n->group);
		}
		if (i - first == IR_MAX_GROUP)
			report(v, n, "is in group %d, which has more than %d members", n->group, IR_MAX_GROUP);
		ir_bcast nb = ir_op_has(n->op, IR_OPF_FUSE) || row ? ir_node_bcast(n) : IR_BCAST_NONE;
		if (kind != IR_BCAST_NONE && nb != IR_BCAST_NONE && nb != kind)
			report(v, n, "is in group %d, which broadcasts %s, but %s broadcasts %s", n->group,
				bcast_names[kind], ir_op_name(n->op), bcast_names[nb]);
		else if (nb != IR_BCAST_NONE)
			kind = nb;
	}
	free(readers);
	free(ended);
}

bool ir_verify(const ir_graph *g, ir_diags *d)
{
	verifier v = {g, d, 0};
	char r1[80];
	IR_ASSERT(ir_graph_ids_current(g));
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

	int *topo = malloc(((size_t)g->n + 1) * sizeof *topo);
	if (!topo)
		IR_DIE("out of memory");
	if (check_acyclic(&v, topo)) {
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
		check_updates(&v, topo);
		check_groups(&v);
		if (!ir_verify_units(g, d))
			v.errors++;
		bool planned = false;
		for (int i = 0; i < g->n && !planned; i++)
			planned = g->nodes[i]->offset >= 0 || g->nodes[i]->ws_offset >= 0;
		if (planned && !ir_verify_plan(g, d))
			v.errors++;
	}
	free(topo);
	return v.errors == 0;
}
