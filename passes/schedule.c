/* schedule.c: ordering edges for the reversible backward pass, and the
 * linear order the step runs in.
 *
 * requires: dce.
 * guarantees: the node list is the schedule; it honours every data and
 *   ordering edge.
 *
 * Edges (strategy revnet, unless ctx->no_order_edges): as the TensorFlow
 * RevNet example's control dependencies, for each invertible unit
 *     x2 = y2 - G(y1)  runs after G's weight gradients and dx1,
 *     x1 = y1 - F(x2)  runs after F's weight gradients and dx2,
 * so a unit's reconstruction waits until the unit after it is done, and at
 * most one unit's recomputed activations are live at a time.  Autodiff puts
 * G's whole backward, the accumulation into dx1 included, in scope
 * "sS.uU.g" (and F's, with dx2, in ".f"), so the edges go to the gradient
 * nodes of that scope that nothing else in it reads.
 *
 * Order: with no ordering edges, a naive as-soon-as-possible order (each
 * node at its dependency depth), to show what the edges buy.  Otherwise the
 * order with the lowest simulated peak (memory.c) among: the order the
 * passes left, list scheduling that prefers the node freeing the most
 * bytes, and a depth-first post-order from the graph's results.  As XLA's
 * scheduler does, the simulation is the judge. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* ---- ordering edges ----------------------------------------------------- */

/* The recompute subtraction of unit scope whose second operand comes from
 * scope.part: a reconstruction made by revbwd. */
static ir_node *reconstruction(const ir_graph *g, const char *unit, const char *part)
{
	for (int i = 0; i < g->n; i++) {
		ir_node *n = g->nodes[i];
		if (n->op == IR_OP_SUB && n->role == IR_ROLE_RECOMPUTE && ps_scope_is(n->scope, unit, NULL) &&
		    ps_scope_is(n->in[1]->scope, unit, part))
			return n;
	}
	return NULL;
}

/* r runs after every gradient node of scope unit.part that no other
 * gradient node of that scope reads. */
static void after_sinks(ir_graph *g, ir_node *r, const char *unit, const char *part,
	const bool *read_in_scope)
{
	for (int i = 0; i < g->n; i++) {
		ir_node *n = g->nodes[i];
		if (n->role == IR_ROLE_BWD && ps_scope_is(n->scope, unit, part) && !read_in_scope[i])
			ir_node_add_after(g, r, n);
	}
}

static void insert_edges(ir_graph *g)
{
	ir_graph_renumber(g);
	/* read_in_scope[id]: a gradient node of the same scope reads it. */
	bool *read_in_scope = calloc((size_t)g->n + 1, sizeof *read_in_scope);
	if (!read_in_scope)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		const ir_node *r = g->nodes[i];
		if (r->role != IR_ROLE_BWD || !r->scope)
			continue;
		for (int k = 0; k < r->nin; k++) {
			const ir_node *o = r->in[k];
			if (o->role == IR_ROLE_BWD && o->scope && strcmp(o->scope, r->scope) == 0)
				read_in_scope[o->id] = true;
		}
	}
	ps_unit *u;
	int nu = ps_units_find(g, &u);
	for (int k = 0; k < nu; k++) {
		ir_node *x2 = reconstruction(g, u[k].scope, "g");
		ir_node *x1 = reconstruction(g, u[k].scope, "f");
		if (x2)
			after_sinks(g, x2, u[k].scope, "g", read_in_scope);
		if (x1)
			after_sinks(g, x1, u[k].scope, "f", read_in_scope);
	}
	free(u);
	free(read_in_scope);
}

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
	if (n->op == IR_OP_PARAM || n->op == IR_OP_STATE || n->op == IR_OP_OUTPUT ||
	    ir_op_has(n->op, IR_OPF_UPD))
		return 0;
	return ir_type_bytes(&n->type);
}

/* List scheduling: among ready nodes, the one that frees the most bytes
 * net of what it allocates; ties to the earlier list position. */
static void order_greedy(const ir_graph *g, const deps *d, ir_node **out)
{
	int n = g->n;
	int *waiting = malloc(((size_t)n + 1) * sizeof *waiting);
	int *readers = calloc((size_t)n + 1, sizeof *readers); /* unscheduled data readers */
	bool *pinned = calloc((size_t)n + 1, sizeof *pinned);
	int *ready = malloc(((size_t)n + 1) * sizeof *ready);
	if (!waiting || !readers || !pinned || !ready)
		IR_DIE("out of memory");
	int nready = 0;
	for (int i = 0; i < n; i++) {
		const ir_node *x = g->nodes[i];
		waiting[i] = d->ndeps[i];
		for (int k = 0; k < x->nin; k++) {
			bool again = false;
			for (int j = 0; j < k && !again; j++)
				again = x->in[j] == x->in[k];
			if (!again)
				readers[x->in[k]->id]++;
			if (x->op == IR_OP_OUTPUT)
				pinned[x->in[k]->id] = true;
		}
		if (waiting[i] == 0)
			ready[nready++] = i;
	}
	for (int t = 0; t < n; t++) {
		int best = -1;
		int64_t best_score = 0;
		for (int r = 0; r < nready; r++) {
			const ir_node *x = g->nodes[ready[r]];
			int64_t score = -own_bytes(x);
			for (int k = 0; k < x->nin; k++) {
				const ir_node *o = x->in[k];
				bool again = false;
				for (int j = 0; j < k && !again; j++)
					again = x->in[j] == o;
				if (!again && readers[o->id] == 1 && !pinned[o->id])
					score += own_bytes(o);
			}
			if (best < 0 || score > best_score || (score == best_score && ready[r] < ready[best])) {
				best = r;
				best_score = score;
			}
		}
		IR_ASSERT(best >= 0);
		int id = ready[best];
		ready[best] = ready[--nready];
		const ir_node *x = g->nodes[id];
		out[t] = (ir_node *)x;
		for (int k = 0; k < x->nin; k++) {
			bool again = false;
			for (int j = 0; j < k && !again; j++)
				again = x->in[j] == x->in[k];
			if (!again)
				readers[x->in[k]->id]--;
		}
		for (int p = d->start[id]; p < d->start[id + 1]; p++)
			if (--waiting[d->list[p]] == 0)
				ready[nready++] = d->list[p];
	}
	free(waiting);
	free(readers);
	free(pinned);
	free(ready);
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
	bool edges = ctx->strategy == PS_REVNET && !ctx->no_order_edges;
	if (edges)
		insert_edges(g);
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
		deps d;
		deps_build(g, &d);
		int64_t best_peak = -1;
		for (int h = 0; h < 3; h++) {
			if (h == 0)
				memcpy(cand, g->nodes, (size_t)n * sizeof *cand);
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
