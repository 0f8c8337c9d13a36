/* checkpoint.c: the checkpointing strategy, for comparison with revbwd.
 *
 * requires: autodiff.
 * guarantees (strategy checkpoint; otherwise nothing changes): each chain's
 *   n units (ps_unit: a RevNet's stage) are cut into segments of
 *   k = ceil(sqrt(n)) units, written as the units' decisions (rerun from the
 *   segment's first unit; passes/keep.c carries them out), unless the graph
 *   carries decisions already.  Only the segments' inputs stay stored;
 *   during the backward pass each segment's
 *   forward work is recomputed (role recompute, batch statistics, no
 *   running-statistic updates) from its stored input just before its
 *   gradients, which then read the recomputed values.  Memory grows as
 *   sqrt(n) instead of n. */
#include <math.h>
#include <stdlib.h>

#include "passes.h"

int ps_checkpoint(ir_graph *g, ps_ctx *ctx)
{
	if (ctx->strategy != PS_CHECKPOINT)
		return 0;
	ps_unit *u;
	int nu = ps_units_find(g, &u);
	ps_keep *keep = calloc((size_t)nu + 1, sizeof *keep);
	if (!keep)
		IR_DIE("out of memory");
	if (ps_keep_read(u, nu, keep)) { /* decided: revbwd carried them out */
		free(keep);
		free(u);
		return 0;
	}
	if (nu == 0) {
		free(keep);
		free(u);
		ir_diag_add(&ctx->diags, (ir_pos){0}, "checkpoint: graph @%s has no reversible units", g->name);
		return 1;
	}
	for (int end = nu - 1; end >= 0;) {
		int start = end;
		while (start > 0 && u[start - 1].chain == u[end].chain)
			start--;
		int n = end - start + 1, k = (int)ceil(sqrt((double)n));
		for (int j = start; j <= end; j++)
			keep[j] = (ps_keep){IR_KEEP_RERUN, start + (j - start) / k * k};
		end = start - 1;
	}
	ps_keep_apply(g, u, nu, keep, NULL, NULL, 0);
	free(keep);
	free(u);
	return 0;
}
