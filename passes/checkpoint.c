/* checkpoint.c: the checkpointing strategy, for comparison with revbwd.
 *
 * requires: autodiff.
 * guarantees (strategy checkpoint; otherwise nothing changes): each stage's
 *   n units are cut into segments of k = ceil(sqrt(n)) units.  Only the
 *   segments' inputs stay stored; during the backward pass each segment's
 *   forward work is recomputed (role recompute, batch statistics, no
 *   running-statistic updates) from its stored input just before its
 *   gradients, which then read the recomputed values.  Memory grows as
 *   sqrt(n) instead of n. */
#include <math.h>
#include <stdlib.h>

#include "passes.h"

static bool recomputable(const ir_node *n)
{
	return n->role == IR_ROLE_FWD && !ir_op_has(n->op, IR_OPF_SRC) && !ir_op_has(n->op, IR_OPF_FX);
}

static bool in_units(const char *scope, const ps_unit *u, int a, int b)
{
	for (int k = a; k <= b; k++)
		if (ps_scope_within(scope, u[k].scope))
			return true;
	return false;
}

/* Recomputes units a..b (one segment) before the first of their gradients. */
static void segment(ps_recompute *r, const ps_unit *u, int a, int b)
{
	ir_graph *g = r->g;
	int at = -1;
	for (int i = 0; i < g->n && at < 0; i++)
		if (g->nodes[i]->role == IR_ROLE_BWD && in_units(g->nodes[i]->scope, u, a, b))
			at = i;
	if (at < 0)
		return;
	for (int i = 0; i < r->n; i++) {
		ir_node *n = r->orig[i];
		if (recomputable(n) && in_units(n->scope, u, a, b))
			ps_recompute_set(r, n, ps_recompute_clone(r, n, at++));
	}
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->role == IR_ROLE_BWD && in_units(g->nodes[i]->scope, u, a, b))
			ps_recompute_redirect(r, g->nodes[i]);
}

int ps_checkpoint(ir_graph *g, ps_ctx *ctx)
{
	if (ctx->strategy != PS_CHECKPOINT)
		return 0;
	ps_unit *u;
	int nu = ps_units_find(g, &u);
	if (nu == 0) {
		free(u);
		ir_diag_add(&ctx->diags, (ir_pos){0}, "checkpoint: graph @%s has no reversible units", g->name);
		return 1;
	}
	ps_recompute r;
	ps_recompute_init(&r, g);
	/* Segments from the last back: the gradients of later units come first. */
	for (int end = nu - 1; end >= 0;) {
		int start = end;
		while (start > 0 && u[start - 1].stage == u[end].stage)
			start--;
		int n = end - start + 1, k = (int)ceil(sqrt((double)n)), nseg = (n + k - 1) / k;
		for (int j = nseg - 1; j >= 0; j--) {
			int a = start + j * k, b = a + k - 1 < end ? a + k - 1 : end;
			segment(&r, u, a, b);
		}
		end = start - 1;
	}
	ps_recompute_free(&r);
	free(u);
	ir_graph_renumber(g);
	return 0;
}
