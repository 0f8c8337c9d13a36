/* schedule.c: the linear order the step runs in.
 *
 * requires: dce.
 * guarantees: the node list is the schedule; it honours every data and
 *   ordering edge.
 *
 * First, under strategy revnet or where a unit is inverted (unless
 * ctx->no_order_edges), the ordering
 * edges of the reversible backward pass (edges.c).
 *
 * Order: with no ordering edges, a naive as-soon-as-possible order (each
 * node at its dependency depth), to show what the edges buy.  Otherwise the
 * order with the lowest simulated peak (memory.c) among: the order the
 * passes left (where the edges just inserted contradict it, the nearest
 * order that honours them), list scheduling that prefers the node freeing
 * the most bytes, and a depth-first post-order from the graph's results.
 * As XLA's scheduler does, the simulation is the judge. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* ---- dependency structure ----------------------------------------------- */

/* Readers (through data and ordering edges) of every node, as CSR. */
typedef struct {
	int *start, *list;
	int *ndeps; /* distinct dependencies per node */
} deps;

static int dep_count(const ir_node *n)
{
	return n->nin + n->nafter;
}

static ir_node *dep(const ir_node *n, int k)
{
	return k < n->nin ? n->in[k] : n->after[k - n->nin];
}

static void deps_build(const ir_graph *g, deps *d)
{
	int n = g->n;
	d->start = calloc((size_t)n + 2, sizeof *d->start);
	d->ndeps = calloc((size_t)n + 1, sizeof *d->ndeps);
	int total = 0;
	for (int i = 0; i < n; i++)
		total += dep_count(g->nodes[i]);
	d->list = malloc(((size_t)total + 1) * sizeof *d->list);
	if (!d->start || !d->ndeps || !d->list)
		IR_DIE("out of memory");
	/* Distinct dependencies only: a node may read a value twice. */
	for (int i = 0; i < n; i++) {
		const ir_node *x = g->nodes[i];
		for (int k = 0; k < dep_count(x); k++) {
			bool again = false;
			for (int j = 0; j < k && !again; j++)
				again = dep(x, j) == dep(x, k);
			if (!again) {
				d->start[dep(x, k)->id + 1]++;
				d->ndeps[i]++;
			}
		}
	}
	for (int i = 0; i < n; i++)
		d->start[i + 1] += d->start[i];
	int *fill = calloc((size_t)n + 1, sizeof *fill);
	if (!fill)
		IR_DIE("out of memory");
	for (int i = 0; i < n; i++) {
		const ir_node *x = g->nodes[i];
		for (int k = 0; k < dep_count(x); k++) {
			bool again = false;
			for (int j = 0; j < k && !again; j++)
				again = dep(x, j) == dep(x, k);
			if (!again) {
				int p = dep(x, k)->id;
				d->list[d->start[p] + fill[p]++] = i;
			}
		}
	}
	free(fill);
}

static void deps_free(deps *d)
{
	free(d->start);
	free(d->list);
	free(d->ndeps);
}

/* ---- orders --------------------------------------------------------------- */

/* As soon as possible: by dependency depth, then list position. */
static int *depth_key;
static int by_depth(const void *a, const void *b)
{
	const ir_node *x = *(ir_node *const *)a, *y = *(ir_node *const *)b;
	if (depth_key[x->id] != depth_key[y->id])
		return depth_key[x->id] - depth_key[y->id];
	return x->id - y->id;
}

static void order_asap(const ir_graph *g, ir_node **out)
{
	int *depth = calloc((size_t)g->n + 1, sizeof *depth);
	if (!depth)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		const ir_node *x = g->nodes[i];
		for (int k = 0; k < dep_count(x); k++)
			if (depth[dep(x, k)->id] + 1 > depth[i])
				depth[i] = depth[dep(x, k)->id] + 1;
	}
	memcpy(out, g->nodes, (size_t)g->n * sizeof *out);
	depth_key = depth;
	qsort(out, (size_t)g->n, sizeof *out, by_depth);
	depth_key = NULL;
	free(depth);
}

/* Bytes a node's value takes in the step's memory (0 for those without a
 * buffer of their own). */
static int64_t own_bytes(const ir_node *n)
{
	if (!ir_node_has_own_buffer(n))
		return 0;
	return ir_type_bytes(&n->type);
}

/* The ready set of list scheduling: a binary max-heap on (score, then
 * earlier list position).  Scores only grow, so an entry whose score is no
 * longer the node's is stale and skipped when it surfaces; a newer entry
 * was pushed when the score changed. */
typedef struct {
	int64_t score;
	int id;
} ready_entry;

typedef struct {
	ready_entry *e;
	int n, cap;
} ready_heap;

static bool above(ready_entry a, ready_entry b)
{
	return a.score != b.score ? a.score > b.score : a.id < b.id;
}

static void heap_push(ready_heap *h, int64_t score, int id)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 256;
		h->e = realloc(h->e, (size_t)h->cap * sizeof *h->e);
		if (!h->e)
			IR_DIE("out of memory");
	}
	int i = h->n++;
	ready_entry x = {score, id};
	while (i > 0 && above(x, h->e[(i - 1) / 2])) {
		h->e[i] = h->e[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->e[i] = x;
}

static ready_entry heap_pop(ready_heap *h)
{
	ready_entry top = h->e[0], x = h->e[--h->n];
	int i = 0;
	for (;;) {
		int c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && above(h->e[c + 1], h->e[c]))
			c++;
		if (!above(h->e[c], x))
			break;
		h->e[i] = h->e[c];
		i = c;
	}
	if (h->n > 0)
		h->e[i] = x;
	return top;
}

static bool first_use(const ir_node *x, int k)
{
	for (int j = 0; j < k; j++)
		if (x->in[j] == x->in[k])
			return false;
	return true;
}

typedef struct {
	const ir_graph *g;
	int *readers;  /* unscheduled data readers of each value */
	bool *pinned;  /* read by an output: never freed */
} greedy_state;

/* Bytes freed by running x (operands it is the last reader of) net of the
 * bytes its result takes. */
static int64_t greedy_score(const greedy_state *s, const ir_node *x)
{
	int64_t score = -own_bytes(x);
	for (int k = 0; k < x->nin; k++) {
		const ir_node *o = x->in[k];
		if (first_use(x, k) && s->readers[o->id] == 1 && !s->pinned[o->id])
			score += own_bytes(o);
	}
	return score;
}

/* List scheduling: among ready nodes, the one that frees the most bytes
 * net of what it allocates; ties to the earlier list position. */
static void order_greedy(const ir_graph *g, const deps *d, ir_node **out)
{
	int n = g->n;
	greedy_state s = {g, calloc((size_t)n + 1, sizeof(int)), calloc((size_t)n + 1, sizeof(bool))};
	int *waiting = malloc(((size_t)n + 1) * sizeof *waiting);
	bool *done = calloc((size_t)n + 1, sizeof *done);
	ready_heap h = {0};
	if (!waiting || !s.readers || !s.pinned || !done)
		IR_DIE("out of memory");
	for (int i = 0; i < n; i++) {
		const ir_node *x = g->nodes[i];
		waiting[i] = d->ndeps[i];
		for (int k = 0; k < x->nin; k++) {
			if (first_use(x, k))
				s.readers[x->in[k]->id]++;
			if (x->op == IR_OP_OUTPUT)
				s.pinned[x->in[k]->id] = true;
		}
	}
	for (int i = 0; i < n; i++)
		if (waiting[i] == 0)
			heap_push(&h, greedy_score(&s, g->nodes[i]), i);
	for (int t = 0; t < n;) {
		IR_ASSERT(h.n > 0);
		ready_entry top = heap_pop(&h);
		const ir_node *x = g->nodes[top.id];
		if (done[top.id] || top.score != greedy_score(&s, x))
			continue; /* stale */
		done[top.id] = true;
		out[t++] = (ir_node *)x;
		for (int k = 0; k < x->nin; k++) {
			const ir_node *o = x->in[k];
			if (!first_use(x, k) || --s.readers[o->id] != 1)
				continue;
			/* o's last reader now frees it: if ready, its score grew. */
			for (int p = d->start[o->id]; p < d->start[o->id + 1]; p++) {
				int r = d->list[p];
				if (!done[r] && waiting[r] == 0)
					heap_push(&h, greedy_score(&s, g->nodes[r]), r);
			}
		}
		for (int p = d->start[top.id]; p < d->start[top.id + 1]; p++)
			if (--waiting[d->list[p]] == 0)
				heap_push(&h, greedy_score(&s, g->nodes[d->list[p]]), d->list[p]);
	}
	free(waiting);
	free(done);
	free(s.readers);
	free(s.pinned);
	free(h.e);
}

/* The order the passes left, as far as the edges allow: a topological sort
 * that always takes the ready node listed first.  That is the list itself
 * when it honours every edge; the passes before this one made it an
 * execution order, but not one that waits for the ordering edges inserted
 * here (a unit's reconstruction may come before the gradients it must
 * follow). */
static void order_listed(const ir_graph *g, const deps *d, ir_node **out)
{
	int n = g->n;
	int *waiting = malloc(((size_t)n + 1) * sizeof *waiting);
	ready_heap h = {0};
	if (!waiting)
		IR_DIE("out of memory");
	for (int i = 0; i < n; i++) {
		waiting[i] = d->ndeps[i];
		if (waiting[i] == 0)
			heap_push(&h, 0, i);
	}
	for (int t = 0; t < n; t++) {
		IR_ASSERT(h.n > 0);
		int id = heap_pop(&h).id;
		out[t] = g->nodes[id];
		for (int p = d->start[id]; p < d->start[id + 1]; p++)
			if (--waiting[d->list[p]] == 0)
				heap_push(&h, 0, d->list[p]);
	}
	free(waiting);
	free(h.e);
}

/* Depth-first post-order from the nodes nothing depends on, in list order,
 * visiting each node's dependencies in order. */
static void order_dfs(const ir_graph *g, const deps *d, ir_node **out)
{
	int n = g->n, t = 0;
	char *state = calloc((size_t)n + 1, 1); /* 0 new, 1 open, 2 done */
	int *stack = malloc(((size_t)n + 1) * sizeof *stack);
	int *edge = malloc(((size_t)n + 1) * sizeof *edge);
	if (!state || !stack || !edge)
		IR_DIE("out of memory");
	for (int root = 0; root < n; root++) {
		if (d->start[root + 1] != d->start[root] || state[root])
			continue;
		int sp = 0;
		stack[0] = root;
		edge[0] = 0;
		state[root] = 1;
		while (sp >= 0) {
			const ir_node *x = g->nodes[stack[sp]];
			if (edge[sp] < dep_count(x)) {
				int m = dep(x, edge[sp]++)->id;
				if (!state[m]) {
					state[m] = 1;
					stack[++sp] = m;
					edge[sp] = 0;
				}
				continue;
			}
			state[stack[sp]] = 2;
			out[t++] = (ir_node *)x;
			sp--;
		}
	}
	IR_ASSERT(t == n);
	free(state);
	free(stack);
	free(edge);
}

int ps_schedule(ir_graph *g, ps_ctx *ctx)
{
	bool edges = (ctx->strategy == PS_REVNET || ps_keep_inverts(g)) && !ctx->no_order_edges;
	if (edges)
		ps_order_edges(g);
	ir_graph_renumber(g);
	int n = g->n;
	ir_node **best = malloc(((size_t)n + 1) * sizeof *best);
	if (!best)
		IR_DIE("out of memory");
	if (ctx->no_order_edges) {
		order_asap(g, best);
		ctx->schedule = "asap";
	} else {
		static const char *const names[] = {"original", "greedy", "dfs"};
		ir_node **cand = malloc(((size_t)n + 1) * sizeof *cand);
		if (!cand)
			IR_DIE("out of memory");
		deps d;
		deps_build(g, &d);
		int64_t best_peak = -1;
		for (int h = 0; h < 3; h++) {
			if (h == 0)
				order_listed(g, &d, cand);
			else if (h == 1)
				order_greedy(g, &d, cand);
			else
				order_dfs(g, &d, cand);
			ps_memory m;
			ps_memory_compute(g, cand, ctx->workspace, ctx->workspace_user, &m);
			if (best_peak < 0 || m.peak < best_peak) {
				best_peak = m.peak;
				memcpy(best, cand, (size_t)n * sizeof *best);
				ctx->schedule = names[h];
			}
			ps_memory_free(&m);
		}
		deps_free(&d);
		free(cand);
	}
	ir_graph_reorder(g, best);
	free(best);
	return 0;
}
