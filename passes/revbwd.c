/* revbwd.c: the reversible backward rewrite.
 *
 * requires: autodiff.
 * guarantees (strategy revnet; otherwise nothing changes): working from the
 *   last unit back, each unit's backward reads forward values it recomputes
 *   instead of stored ones.  For unit (x1, x2) -> (y1, y2), with y1, y2 the
 *   values the next unit reconstructed (or the stored outputs of a stage's
 *   last unit):
 *       G(y1) recomputed;   x2 = y2 - G(y1)   (invertible units)
 *       F(x2) recomputed;   x1 = y1 - F(x2)
 *   Each recomputation serves both the reconstruction and the gradients;
 *   all new nodes have role recompute and the marking (and scope) of the
 *   node they stand for, a reconstruction that of y2 (y1), and batch norms
 *   among them use batch statistics and never touch running statistics.  A
 *   unit whose downsample is not the identity (unit 0 of a stage that
 *   strides or widens) cannot be inverted: it recomputes F from its stored
 *   input, as the TensorFlow example's backward_grads_with_downsample does.
 *   A unit whose two inputs are one value (duplicated streams) reconstructs
 *   it once, as x2.
 *   The ordering edges that make this pay are the schedule pass's job. */
#include <stdlib.h>

#include "passes.h"

static bool recomputable(const ir_node *n)
{
	return n->role == IR_ROLE_FWD && !ir_op_has(n->op, IR_OPF_SRC) && !ir_op_has(n->op, IR_OPF_FX);
}

/* The first gradient node of unit k, or NULL. */
static ir_node *first_bwd(const ir_graph *g, const ps_unit_map *m, int k)
{
	for (int j = m->start[k]; j < m->start[k + 1]; j++)
		if (g->nodes[m->ids[j]]->role == IR_ROLE_BWD)
			return g->nodes[m->ids[j]];
	return NULL;
}

/* Clones the forward nodes of part (F or G) of unit k, in order, to go
 * before `at`. */
static void clone_part(ps_recompute *r, const ps_unit_map *m, int k, ir_unit_part part, const ir_node *at)
{
	for (int j = m->start[k]; j < m->start[k + 1]; j++) {
		ir_node *n = r->orig[m->ids[j]];
		if (m->part[m->ids[j]] == part && recomputable(n))
			ps_recompute_set(r, n, ps_recompute_clone(r, n, at));
	}
}

/* y - f, reconstructing an input of a unit, to go before `at`. */
static ir_node *reconstruct(ps_recompute *r, ir_node *y, ir_node *f, const ir_node *at, const ir_node *like)
{
	ir_node *in[2] = {y, f};
	ir_node *x = ir_node_new(r->g, IR_OP_SUB, in, 2);
	ps_recompute_place(r, x, at);
	x->role = IR_ROLE_RECOMPUTE;
	x->type = like->type;
	x->scope = like->scope;
	ir_node_set_unit(x, like->unit, like->part);
	x->pos = like->pos;
	x->pos_printed = like->pos_printed;
	return x;
}

int ps_revbwd(ir_graph *g, ps_ctx *ctx)
{
	if (ctx->strategy != PS_REVNET)
		return 0;
	ps_unit *units;
	int nu = ps_units_find(g, &units);
	if (nu == 0) {
		free(units);
		ir_diag_add(&ctx->diags, (ir_pos){0}, "revbwd: graph @%s has no reversible units", g->name);
		return 1;
	}
	ps_unit_map m;
	ps_unit_map_build(g, nu, &m);
	ps_recompute r;
	ps_recompute_init(&r, g);
	for (int u = nu - 1; u >= 0; u--) {
		const ps_unit *U = &units[u];
		ir_node *at = first_bwd(g, &m, u);
		if (!at || !U->y1 || !U->y2)
			continue; /* nothing of it is differentiated, or it is not whole */
		ir_node *y1 = ps_recompute_of(&r, U->y1), *y2 = ps_recompute_of(&r, U->y2);
		clone_part(&r, &m, u, IR_PART_G, at);
		if (U->invertible)
			ps_recompute_set(&r, U->x2, reconstruct(&r, y2, ps_recompute_of(&r, U->g_out), at, U->y2));
		clone_part(&r, &m, u, IR_PART_F, at);
		/* Duplicated streams (RevViT's first unit, x1 = x2): x2 is x1. */
		if (U->invertible && U->x1 != U->x2)
			ps_recompute_set(&r, U->x1, reconstruct(&r, y1, ps_recompute_of(&r, U->f_out), at, U->y1));
		for (int j = m.start[u]; j < m.start[u + 1]; j++)
			if (g->nodes[m.ids[j]]->role == IR_ROLE_BWD)
				ps_recompute_redirect(&r, g->nodes[m.ids[j]]);
	}
	ps_recompute_finish(&r);
	ps_unit_map_free(&m);
	free(units);
	return 0;
}
