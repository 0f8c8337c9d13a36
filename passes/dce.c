/* dce.c: dead-code elimination.
 *
 * requires: nothing (a verified graph).
 * guarantees: every remaining node is a root (an output, an in-place update,
 *   or an interface node: input, param, state) or something a remaining node
 *   needs.  Ordering edges count as needs, as TensorFlow's control
 *   dependencies do: a node that another must run after is kept, so removing
 *   dead code never weakens an ordering.  One kind of edge is not a need:
 *   an in-place update's edge to another reader of the storage it updates
 *   (the optim pass gives sgd, momentum and adamw one to every reader of
 *   their parameter), which only keeps the update from overtaking that
 *   read.  A reader nothing else needs, such as the recomputed last
 *   convolution of a reconstruction whose result the revnet step never
 *   reads, is removed, and the update's edge to it with it.  Edges from and
 *   to removed nodes vanish with them.  A reversible unit whose y1 or y2 was dead (and so its G, or
 *   F) is no longer a coupling: its remaining nodes lose the marking and
 *   the units after it move down a number, so the marking stays what the
 *   verifier checks.
 *
 * The node list is an execution order, so one backward sweep suffices. */
#include <stdlib.h>

#include "passes.h"

static bool is_root(const ir_node *n)
{
	return ir_op_has(n->op, IR_OPF_FX) || n->op == IR_OP_INPUT || ir_op_is_persistent(n->op);
}

/* Does update u run after r only to protect r's read of the storage u
 * updates in place? */
static bool guards_read(const ir_node *u, const ir_node *r)
{
	if (!ir_op_has(u->op, IR_OPF_UPD) || u->nin < 1)
		return false;
	for (int k = 0; k < r->nin; k++)
		if (r->in[k] == u->in[0])
			return true;
	return false;
}

/* live[i]: node i is a root or something a live node needs. */
static void mark_live(ir_graph *g, bool *live)
{
	ir_graph_renumber(g);
	for (int i = g->n - 1; i >= 0; i--) {
		const ir_node *n = g->nodes[i];
		if (is_root(n))
			live[i] = true;
		if (!live[i])
			continue;
		for (int k = 0; k < n->nin; k++)
			live[n->in[k]->id] = true;
		for (int k = 0; k < n->nafter; k++)
			if (!guards_read(n, n->after[k]))
				live[n->after[k]->id] = true;
	}
}

int ps_dce_first_dead(ir_graph *g)
{
	bool *live = calloc((size_t)g->n + 1, sizeof *live);
	if (!live)
		IR_DIE("out of memory");
	mark_live(g, live);
	int first = -1;
	for (int i = 0; i < g->n && first < 0; i++)
		if (!live[i])
			first = i;
	free(live);
	return first;
}

static void dissolve_broken_units(ir_graph *g)
{
	int nu = 0;
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->unit >= nu)
			nu = g->nodes[i]->unit + 1;
	if (nu == 0)
		return;
	int *seen = calloc((size_t)nu, sizeof *seen), *number = malloc((size_t)nu * sizeof *number);
	if (!seen || !number)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->unit >= 0 && n->role == IR_ROLE_FWD && (n->part == IR_PART_Y1 || n->part == IR_PART_Y2))
			seen[n->unit] |= n->part == IR_PART_Y1 ? 1 : 2;
	}
	for (int k = 0, next = 0; k < nu; k++)
		number[k] = seen[k] == 3 ? next++ : -1;
	for (int i = 0; i < g->n; i++) {
		ir_node *n = g->nodes[i];
		if (n->unit < 0)
			continue;
		if (n->keep != IR_KEEP_NONE) /* a segment that lost its start begins here */
			n->keep_from = number[n->keep_from] >= 0 ? number[n->keep_from] : number[n->unit];
		ir_node_set_unit(n, number[n->unit], n->part);
		if (n->unit < 0)
			n->keep = IR_KEEP_NONE;
	}
	free(seen);
	free(number);
}

int ps_dce(ir_graph *g, ps_ctx *ctx)
{
	(void)ctx;
	bool *mark = calloc((size_t)g->n + 1, sizeof *mark);
	if (!mark)
		IR_DIE("out of memory");
	mark_live(g, mark);
	for (int i = 0; i < g->n; i++)
		mark[i] = !mark[i]; /* now: dead */
	ir_graph_remove(g, mark);
	free(mark);
	dissolve_broken_units(g);
	return 0;
}
