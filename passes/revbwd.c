/* revbwd.c: the reversible backward rewrite: each unit's decision.
 *
 * requires: autodiff.
 * guarantees: the decisions (ir_unit_keep, docs/ir.md) the graph carries,
 *   or else those of strategy revnet (every invertible unit inverted, a unit
 *   with a downsample recomputed: F and G again from its stored x2 and the
 *   y1 the next unit reconstructed, as the TensorFlow example's
 *   backward_grads_with_downsample does) or auto (ctx->decisions; none:
 *   every unit stored, the fastest), are
 *   written on the units' y1 and carried out (passes/keep.c): working from
 *   the last unit back, each unit's backward reads forward values it
 *   recomputes instead of stored ones.  For an inverted unit (x1, x2) ->
 *   (y1, y2), with y1, y2 the values the next unit reconstructed (or the
 *   stored outputs of a stage's last unit):
 *       G(y1) recomputed;   x2 = y2 - G(y1)
 *       F(x2) recomputed;   x1 = y1 - F(x2)
 *   Each recomputation serves both the reconstruction and the gradients.
 *   Under other strategies a graph without decisions is left alone.  The
 *   ordering edges that make this pay are the schedule pass's job. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

int ps_revbwd(ir_graph *g, ps_ctx *ctx)
{
	ps_unit *units;
	int nu = ps_units_find(g, &units);
	ps_keep *keep = calloc((size_t)nu + 1, sizeof *keep);
	if (!keep)
		IR_DIE("out of memory");
	int *at = malloc(((size_t)nu + 1) * sizeof *at);
	bool *rec = calloc((size_t)nu + 1, sizeof *rec);
	if (!at || !rec)
		IR_DIE("out of memory");
	int ns = ps_segments_find(g, nu, at);
	ps_segments_read(g, nu, at, ns, rec);
	/* The graph's own decisions: the units' (then the segments' too), or
	 * only the segments' (the strategy decides the units). */
	bool given = ps_keep_read(units, nu, keep), segs_given = given || memchr(rec, true, (size_t)ns);
	int rc = 0;
	if (!given && ctx->strategy != PS_REVNET && ctx->strategy != PS_AUTO) {
		if (segs_given && ctx->strategy == PS_STORE) /* checkpoint carries them out with its own */
			ps_keep_apply(g, units, nu, keep, at, NULL, ns);
		goto done;
	}
	if (nu == 0) {
		ir_diag_add(&ctx->diags, (ir_pos){0}, "revbwd: graph @%s has no reversible units", g->name);
		rc = 1;
		goto done;
	}
	char why[200];
	if (given) {
		/* the graph's own decisions */
	} else if (ctx->strategy == PS_REVNET) {
		for (int k = 0; k < nu; k++)
			keep[k] = (ps_keep){units[k].invertible ? IR_KEEP_INVERT : IR_KEEP_RECOMPUTE, k};
	} else if (!ctx->decisions) { /* auto without a budget: the fastest */
		for (int k = 0; k < nu; k++)
			keep[k] = (ps_keep){IR_KEEP_STORE, k};
	} else if (!ps_keep_parse(ctx->decisions, nu, keep, why, sizeof why) ||
		   (!segs_given && !ps_segments_parse(ctx->decisions, ns, rec, why, sizeof why))) {
		ir_diag_add(&ctx->diags, (ir_pos){0}, "revbwd: strategy auto for graph @%s: %s", g->name, why);
		rc = 1;
		goto done;
	}
	for (int k = 0; k < nu && !given; k++)
		if (keep[k].keep == IR_KEEP_INVERT && !units[k].invertible) {
			ir_diag_add(&ctx->diags, (ir_pos){0}, "revbwd: unit %d of graph @%s has a downsample and cannot be inverted",
				k, g->name);
			rc = 1;
			goto done;
		}
	ps_keep_apply(g, units, nu, keep, at, segs_given ? NULL : rec, ns);
done:
	free(at);
	free(rec);
	free(keep);
	free(units);
	return rc;
}
