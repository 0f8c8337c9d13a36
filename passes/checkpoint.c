/* checkpoint.c: the checkpointing strategy, for comparison with revbwd.
 *
 * requires: autodiff.
 * guarantees (strategy checkpoint; otherwise nothing changes): each chain's
 *   n units (ps_unit: a RevNet's stage) are cut into segments of
 *   k = ceil(sqrt(n)) units.  Only the segments' inputs stay stored;
 *   during the backward pass each segment's
 *   forward work is recomputed (role recompute, batch statistics, no
 *   running-statistic updates) from its stored input just before its
 *   gradients, which then read the recomputed values.  Memory grows as
 *   sqrt(n) instead of n. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static int int_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static bool recomputable(const ir_node *n)
{
	return n->role == IR_ROLE_FWD && !ir_op_has(n->op, IR_OPF_SRC) && !ir_op_has(n->op, IR_OPF_FX);
}

/* Recomputes units a..b (one segment) before the first of their gradients.
 * Their nodes, in list order, are a run of the unit map's ids once sorted. */
static void segment(ps_recompute *r, const ps_unit_map *m, int a, int b)
{
	ir_graph *g = r->g;
	int lo = m->start[a], hi = m->start[b + 1];
	int *ids = malloc(((size_t)(hi - lo) + 1) * sizeof *ids);
	if (!ids)
		IR_DIE("out of memory");
	memcpy(ids, m->ids + lo, (size_t)(hi - lo) * sizeof *ids);
	qsort(ids, (size_t)(hi - lo), sizeof *ids, int_cmp);
	const ir_node *at = NULL;
	for (int j = 0; j < hi - lo && !at; j++)
		if (g->nodes[ids[j]]->role == IR_ROLE_BWD)
			at = g->nodes[ids[j]];
	if (at) {
		for (int j = 0; j < hi - lo; j++) {
			ir_node *n = r->orig[ids[j]];
			if (recomputable(n))
				ps_recompute_set(r, n, ps_recompute_clone(r, n, at));
		}
		for (int j = 0; j < hi - lo; j++)
			if (g->nodes[ids[j]]->role == IR_ROLE_BWD)
				ps_recompute_redirect(r, g->nodes[ids[j]]);
	}
	free(ids);
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
	ps_unit_map map;
	ps_unit_map_build(g, nu, &map);
	ps_recompute r;
	ps_recompute_init(&r, g);
	/* Segments from the last back: the gradients of later units come first. */
	for (int end = nu - 1; end >= 0;) {
		int start = end;
		while (start > 0 && u[start - 1].chain == u[end].chain)
			start--;
		int n = end - start + 1, k = (int)ceil(sqrt((double)n)), nseg = (n + k - 1) / k;
		for (int j = nseg - 1; j >= 0; j--) {
			int a = start + j * k, b = a + k - 1 < end ? a + k - 1 : end;
			segment(&r, &map, a, b);
		}
		end = start - 1;
	}
	ps_recompute_finish(&r);
	ps_unit_map_free(&map);
	free(u);
	return 0;
}
