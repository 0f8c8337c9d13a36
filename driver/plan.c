/* plan.c: a spec's graph through the pipeline, as the driver's tools build
 * them: the spec's optimiser settings, and the interpreter's workspace
 * unless the caller chose an engine's. */
#include <stdio.h>

#include "tools.h"

ir_graph *drv_spec_plan(const fe_spec *s, ir_dtype dt, fe_lower_mode mode, ps_ctx *ctx, const ps_options *opts)
{
	ctx->momentum = s->momentum;
	ctx->weight_decay = s->weight_decay;
	if (!ctx->workspace)
		ctx->workspace = rt_workspace_fn;
	if (!fe_spec_check_sizes(s, dt, &ctx->diags))
		return NULL;
	ir_graph *g = fe_lower(s, dt, mode);
	if (ps_run(g, ctx, opts) != 0) {
		ir_graph_free(g);
		return NULL;
	}
	return g;
}

const ps_options drv_eval_passes = {.only = DRV_EVAL_PASSES};

void drv_diag_rt(ir_diags *d, const rt_err *e)
{
	ir_diag_add(d, (ir_pos){0}, "%s", e->msg);
}

void drv_diags_append(ir_diags *to, const ir_diags *from)
{
	for (int i = 0; i < from->n; i++)
		ir_diag_add(to, from->items[i].pos, "%s", from->items[i].msg);
	to->total += from->total - from->n;
}
