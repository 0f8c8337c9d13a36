/* fuse.c: fusion groups for code generation.
 *
 * requires: schedule.
 * guarantees: nodes sharing a group(N) annotation are contiguous in the
 *   schedule, all flagged FUSE (computable element by element), all of one
 *   result shape, and each after the first reads an earlier member (or, for
 *   optimiser nodes, shares a full-size operand with one): a chain one
 *   kernel computes in one loop (codegen/k_elementwise.c).  The first
 *   member may instead be a row reduction flagged ROW (ln_stats, ln_dx):
 *   the kernel then visits each row of the last axis once, reducing it
 *   before computing the row's elements while it is in cache, and the
 *   group's shape is that of the rows reduced (ir_group_type).  Typical
 *   groups: batch-norm apply + ReLU, the reconstruction subtraction with
 *   what follows it, batch-norm backward + gradient accumulation, the
 *   optimiser's momentum + SGD update, AdamW's two moments (siblings
 *   reading the same gradient) + its weight update; in a transformer, a
 *   dense layer's bias + GELU, a bias + the residual add (+ a positional
 *   embedding), layer norm's statistics + its apply, and ln_dx + the
 *   gradient accumulation that reads it.  A row reduction joins a group
 *   only as its first member: its result is needed for a whole row before
 *   the row's first element.
 *
 * A group grows from a FUSE node by pulling a reader of its members up to
 * just after the group, and only when everything that reader depends on
 * (operands and ordering edges) already runs by then -- except that its
 * operands that depend on nothing (a parameter, a parameter's states, the
 * lr input) move up to just before the group with it.  So fusion never
 * moves a node ahead of anything it must run after, ordering edges
 * included, and never moves anything else at all.
 *
 * A group broadcasts along one kind of row only (ir_bcast): per channel, or
 * along the last axis, never both.
 *
 * An epilogue group is a convolution (conv2d) and what its kernel
 * computes while each tile of images it has just written is in cache
 * (codegen/k_conv.c), pulled up to just after it: the bn_stats of its
 * result (so bn_stats' own pass over the tensor goes away); or the add or
 * sub reading it (the residual y1 = x1 + F(x2), the reconstruction
 * x2 = y2 - G(y1)), and then the bn_stats of that one's result.  A data
 * gradient (conv2d_dx) opens one too: the relu_grad that masks it (the
 * gradient through the ReLU before the convolution), then batch norm's
 * bn_dgamma of that one's result with its dbeta (the reduce_sum beside
 * it, as in a dbeta group), so relu_grad's pass over the tensor goes
 * away and bn_dgamma's reads it while it is in cache.
 * REVC_EPILOGUE=0 in the environment turns them off, for comparisons (as
 * REVC_CONV forces a convolution's lowering).
 *
 * A conv2d may also have a prologue: a group that opens with a bn_norm,
 * then the relu reading it, then the conv2d reading that, and then the
 * conv2d's epilogue if any.  The convolution's kernel applies batch norm
 * and ReLU to each element of x as it copies it (codegen/k_conv_prologue.c),
 * so the two results are never stored and nothing outside the group may
 * read them: in the `revnet` step, the forward pass's pre-activations.
 * REVC_PROLOGUE=0 turns prologues off. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static bool fusable(const ir_node *n)
{
	return ir_op_has(n->op, IR_OPF_FUSE) && ir_dtype_is_float(n->type.dtype);
}

/* Can a group start at n: an elementwise op, or a row reduction? */
static bool opens_group(const ir_node *n)
{
	if (n->op == IR_OP_CONST)
		return false;
	return fusable(n) || (ir_op_has(n->op, IR_OPF_ROW) && ir_dtype_is_float(n->type.dtype));
}

/* The kind of broadcast of the group [first, last] (ir_bcast). */
static ir_bcast group_bcast(const ir_graph *g, int first, int last)
{
	ir_bcast b = IR_BCAST_NONE;
	for (int m = first; m <= last && b == IR_BCAST_NONE; m++)
		b = ir_node_bcast(g->nodes[m]);
	return b;
}

/* A source that depends on nothing (input, param, state): moving it
 * earlier changes no result and no buffer's life (inputs live from step 0,
 * params and state outside the arena). */
static bool free_source(const ir_node *n)
{
	return ir_op_has(n->op, IR_OPF_SRC) && n->op != IR_OP_CONST && n->nin == 0 && n->nafter == 0;
}

/* Does every dependency of c run at or before position `last`?  An operand
 * that is a free source may come later: the schedule places a parameter (a
 * bias, a positional embedding, an optimiser's states) just before its
 * first use, and fusion moves it up, ahead of the group, instead. */
static bool deps_before(const ir_node *c, int last)
{
	for (int k = 0; k < c->nin; k++)
		if (c->in[k]->id > last && !free_source(c->in[k]))
			return false;
	for (int k = 0; k < c->nafter; k++)
		if (c->after[k]->id > last)
			return false;
	return true;
}

/* The earliest operand of c after position `last` (a free source:
 * deps_before), or NULL. */
static ir_node *late_operand(const ir_node *c, int last)
{
	ir_node *best = NULL;
	for (int k = 0; k < c->nin; k++)
		if (c->in[k]->id > last && (!best || c->in[k]->id < best->id))
			best = c->in[k];
	return best;
}

/* Moves the node at `from` to position `to` (to < from), shifting the rest. */
static void move_up(ir_graph *g, int from, int to)
{
	ir_node *c = g->nodes[from];
	memmove(g->nodes + to + 1, g->nodes + to, (size_t)(from - to) * sizeof *g->nodes);
	g->nodes[to] = c;
	for (int i = to; i <= from; i++)
		g->nodes[i]->id = i;
}

/* The earliest of the readers of node id s (a start_id) after `last` that
 * can join a group of this shape and broadcast kind and move up to last + 1
 * (only optimiser nodes when `opt`); best so far, else -1. */
static int earliest_reader(const ir_users *u, int s, int last, const ir_type *shape, ir_bcast kind, bool opt,
	int best)
{
	for (int k = u->start[s]; k < u->start[s + 1]; k++) {
		const ir_node *c = u->user[k];
		if (c->id <= last || (best >= 0 && c->id >= best))
			continue;
		if (!fusable(c) || c->group >= 0 || !ir_type_eq(&c->type, shape) || (opt && c->role != IR_ROLE_OPT))
			continue;
		ir_bcast cb = ir_node_bcast(c);
		if (kind != IR_BCAST_NONE && cb != IR_BCAST_NONE && cb != kind)
			continue;
		if (deps_before(c, last))
			best = c->id;
	}
	return best;
}

/* The earliest node after `last` that reads a member of the group
 * [first, last], can join it, and can move up to last + 1; or -1.  An
 * optimiser node may also join as a sibling of an optimiser member, reading
 * the same full-size operand (AdamW's adam_m and adam_v both read the
 * gradient).  Only readers of members and of their operands are candidates,
 * so this costs the group's fan-out, not the graph's length. */
static int next_member(const ir_graph *g, const ir_users *u, int first, int last)
{
	const ir_type *shape = ir_group_type(g->nodes[first]);
	ir_bcast kind = group_bcast(g, first, last);
	int best = -1;
	for (int m = first; m <= last; m++) {
		const ir_node *n = g->nodes[m];
		best = earliest_reader(u, n->start_id, last, shape, kind, false, best);
		if (n->role != IR_ROLE_OPT)
			continue;
		for (int k = 0; k < n->nin; k++)
			if (ir_type_eq(&n->in[k]->type, shape))
				best = earliest_reader(u, n->in[k]->start_id, last, shape, kind, true, best);
	}
	return best;
}

static bool epilogues_off(void)
{
	const char *e = getenv("REVC_EPILOGUE");
	return e && strcmp(e, "0") == 0;
}

/* The earliest reader of n (at list position `at`) not grouped yet that can
 * move up to at + 1: a bn_stats of n when `stats`, else an add or sub of
 * n's type taking n as an operand (sub: as the one subtracted), or NULL. */
static ir_node *epilogue_reader(const ir_users *u, const ir_node *n, int at, bool stats)
{
	ir_node *best = NULL;
	for (int k = u->start[n->start_id]; k < u->start[n->start_id + 1]; k++) {
		ir_node *c = u->user[k];
		if (c->id <= at || c->group >= 0 || !deps_before(c, at) || (best && c->id >= best->id))
			continue;
		bool fits = stats ? c->op == IR_OP_BN_STATS
		                  : (c->op == IR_OP_ADD || (c->op == IR_OP_SUB && c->in[1] == n)) &&
		                        ir_type_eq(&c->type, &n->type) && c->in[0] != c->in[1];
		if (fits)
			best = c;
	}
	return best;
}

/* The earliest relu_grad not grouped yet that masks conv2d_dx n (at list
 * position `at`: n its operand 0, the mask another value) and can move up
 * to at + 1, or NULL. */
static ir_node *masking_reader(const ir_users *u, const ir_node *n, int at)
{
	ir_node *best = NULL;
	for (int k = u->start[n->start_id]; k < u->start[n->start_id + 1]; k++) {
		ir_node *c = u->user[k];
		if (c->id <= at || c->group >= 0 || !deps_before(c, at) || (best && c->id >= best->id))
			continue;
		if (c->op == IR_OP_RELU_GRAD && c->in[0] == n && c->in[1] != n && ir_type_eq(&c->type, &n->type))
			best = c;
	}
	return best;
}

/* The bn_dgamma not grouped yet of the result of m (at list position
 * `at`) and its dbeta (ir_node_is_dbeta), both able to move up to at + 1:
 * in *d and *r, or false. */
static bool dgamma_readers(const ir_users *u, const ir_node *m, int at, ir_node **d, ir_node **r)
{
	*d = *r = NULL;
	for (int k = u->start[m->start_id]; k < u->start[m->start_id + 1]; k++) {
		ir_node *c = u->user[k];
		if (c->id > at && c->group < 0 && c->op == IR_OP_BN_DGAMMA && c->in[0] == m && deps_before(c, at) &&
			(!*d || c->id < (*d)->id))
			*d = c;
	}
	if (!*d)
		return false;
	for (int k = u->start[m->start_id]; k < u->start[m->start_id + 1]; k++) {
		ir_node *c = u->user[k];
		if (c->id > at && c->group < 0 && ir_node_is_dbeta(*d, c) && deps_before(c, at) &&
			(!*r || c->id < (*r)->id))
			*r = c;
	}
	return *r != NULL;
}

/* Makes the epilogue group convolution n (at list position i) opens, if
 * any: a conv2d's bn_stats; or the add or sub reading it, then that one's
 * bn_stats if it can follow; a conv2d_dx's masking relu_grad, then the
 * bn_dgamma of that one's result and its dbeta if they can follow.  The
 * group starts at `first`: i, or a conv2d's prologue before it
 * (prologue_group).  Returns the group's last position, or -1; the free
 * sources the add or sub reads move up ahead of the group, as in any group
 * (deps_before). */
static int epilogue_group(ir_graph *g, const ir_users *u, int first, int i, int group)
{
	ir_node *n = g->nodes[i];
	bool dx = n->op == IR_OP_CONV2D_DX;
	if ((n->op != IR_OP_CONV2D && !dx) || !ir_dtype_is_float(n->type.dtype) || epilogues_off())
		return -1;
	ir_node *m = dx ? masking_reader(u, n, i) : epilogue_reader(u, n, i, true);
	if (!m && !dx)
		m = epilogue_reader(u, n, i, false);
	if (!m)
		return -1;
	for (ir_node *s; (s = late_operand(m, i));) { /* a free source: ahead of the group */
		move_up(g, s->id, first);
		first++;
		i++;
	}
	move_up(g, m->id, i + 1);
	int last = i + 1;
	ir_node *st = m->op == IR_OP_BN_STATS || dx ? NULL : epilogue_reader(u, m, last, true);
	if (st) {
		move_up(g, st->id, last + 1);
		last++;
	}
	ir_node *d, *r;
	if (dx && dgamma_readers(u, m, last, &d, &r)) {
		for (ir_node *s; (s = late_operand(d, last));) { /* a free source: ahead of the group */
			move_up(g, s->id, first);
			first++;
			last++;
		}
		move_up(g, d->id, last + 1);
		move_up(g, r->id, last + 2);
		last += 2;
	}
	for (int k = first; k <= last; k++)
		g->nodes[k]->group = group;
	return last;
}

static bool prologues_off(void)
{
	const char *e = getenv("REVC_PROLOGUE");
	return e && strcmp(e, "0") == 0;
}

/* The one reader of n (by the ids before any move), or NULL when it has
 * none or several (an output counts as one). */
static ir_node *only_reader(const ir_users *u, const ir_node *n)
{
	int s = n->start_id;
	return u->start[s + 1] - u->start[s] == 1 ? u->user[u->start[s]] : NULL;
}

/* Makes the prologue group bn_norm n (at list position i) opens, if any:
 * n, the relu that alone reads it, the conv2d that alone reads that one
 * (as its input x), and then the conv2d's epilogue, if it has one.  The
 * convolution's kernel applies batch norm and ReLU to x's elements as it
 * copies them (codegen/k_conv_prologue.c), so neither result is stored:
 * nothing else may read them.  The relu and the conv2d move up to just
 * after n when everything they depend on runs by then (the filter, a free
 * source, ahead of the group).  Returns the group's last position, or -1. */
static int prologue_group(ir_graph *g, const ir_users *u, int i, int group)
{
	ir_node *n = g->nodes[i];
	if (n->op != IR_OP_BN_NORM || !ir_dtype_is_float(n->type.dtype) || prologues_off())
		return -1;
	ir_node *r = only_reader(u, n), *c = r ? only_reader(u, r) : NULL;
	if (!c || r->op != IR_OP_RELU || r->group >= 0 || r->id <= i || c->op != IR_OP_CONV2D || c->in[0] != r ||
		c->in[1] == r || c->group >= 0 || !ir_type_eq(&c->in[0]->type, &n->type) || !deps_before(r, i))
		return -1;
	for (int k = 0; k < c->nafter; k++)
		if (c->after[k]->id > i && c->after[k] != r)
			return -1;
	for (int k = 1; k < c->nin; k++)
		if (c->in[k]->id > i && !free_source(c->in[k]))
			return -1;
	move_up(g, r->id, i + 1);
	int first = i;
	for (ir_node *s; (s = late_operand(c, first + 1));) { /* a free source: ahead of the group */
		move_up(g, s->id, first);
		first++;
	}
	move_up(g, c->id, first + 2);
	int last = epilogue_group(g, u, first, first + 2, group);
	if (last < 0) {
		last = first + 2;
		for (int k = first; k <= last; k++)
			g->nodes[k]->group = group;
	}
	return last;
}

/* Does every dependency of c run at or before position `last`? */
static bool runs_before(const ir_node *c, int last)
{
	for (int k = 0; k < c->nin; k++)
		if (c->in[k]->id > last)
			return false;
	for (int k = 0; k < c->nafter; k++)
		if (c->after[k]->id > last)
			return false;
	return true;
}

/* Makes the dbeta group node i opens or closes: a float bn_dgamma first,
 * then the reduce_sum of the same dy (ir_node_is_dbeta), so one kernel reads dy
 * once for both sums (codegen/k_bn.c).  Whichever of the two runs later
 * moves up to the other: the reduce_sum when it reads nothing but dy, the
 * bn_dgamma when its operands all run before the reduce_sum.  Returns the
 * group's last position, or -1. */
static int dbeta_group(ir_graph *g, const ir_users *u, int i, int group)
{
	ir_node *n = g->nodes[i];
	if ((n->op != IR_OP_BN_DGAMMA && n->op != IR_OP_REDUCE_SUM) || !ir_dtype_is_float(n->type.dtype) ||
		epilogues_off())
		return -1;
	const ir_node *dy = n->in[0];
	for (int k = u->start[dy->start_id]; k < u->start[dy->start_id + 1]; k++) {
		ir_node *c = u->user[k];
		if (c->id <= i || c->group >= 0)
			continue;
		ir_node *d = n->op == IR_OP_BN_DGAMMA ? n : c, *r = n->op == IR_OP_BN_DGAMMA ? c : n;
		if (d->op != IR_OP_BN_DGAMMA || !ir_node_is_dbeta(d, r) || !runs_before(c, i - (c == d)))
			continue;
		move_up(g, c->id, c == d ? i : i + 1);
		g->nodes[i]->group = g->nodes[i + 1]->group = group;
		return i + 1;
	}
	return -1;
}

int ps_fuse(ir_graph *g, ps_ctx *ctx)
{
	(void)ctx;
	ir_users u; /* keyed by the ids before any move: kept in `start_id` */
	ir_users_build(g, &u);
	for (int i = 0; i < g->n; i++) {
		g->nodes[i]->group = -1;
		g->nodes[i]->start_id = i;
	}
	int groups = 0;
	for (int i = 0; i < g->n; i++) {
		int end = epilogue_group(g, &u, i, i, groups);
		if (end < 0)
			end = dbeta_group(g, &u, i, groups);
		if (end < 0)
			end = prologue_group(g, &u, i, groups);
		if (end >= 0) {
			groups++;
			i = end;
			continue;
		}
		if (!opens_group(g->nodes[i]))
			continue;
		int first = i, last = i;
		for (int j; last - first + 1 < IR_MAX_GROUP && (j = next_member(g, &u, first, last)) >= 0;) {
			ir_node *c = g->nodes[j];
			/* in the schedule's order, so what moves keeps its order */
			for (ir_node *s; (s = late_operand(c, last));) {
				move_up(g, s->id, first);
				first++;
				last++;
			}
			move_up(g, c->id, last + 1);
			last++;
		}
		if (last > first) {
			for (int k = first; k <= last; k++)
				g->nodes[k]->group = groups;
			groups++;
		}
		i = last;
	}
	ir_users_free(&u);
	ir_graph_renumber(g);
	return 0;
}
