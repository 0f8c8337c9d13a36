/* memory.c: the planned memory of a training step as revc mem reports it
 * (docs/mem.md): the fragmentation-free peak by category, the planned
 * arena and the total with parameters and optimiser state, of the compiled
 * model or of a spec planned under another strategy without allocating. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void fill(const ir_graph *g, const ps_ctx *ctx, revc_strategy s, const char *schedule, revc_memory *out)
{
	ps_memory pm;
	ps_memory_compute(g, g->nodes, ctx->workspace, ctx->workspace_user, &pm);
	memset(out, 0, sizeof *out);
	out->strategy = s;
	out->schedule = schedule;
	out->steps = pm.steps;
	out->peak_step = pm.peak_step;
	out->peak_bytes = pm.peak;
	out->arena_bytes = ps_arena_bytes(g);
	out->saved_transient_peak_bytes = pm.saved_transient_peak;
	out->total_bytes = pm.persistent[PS_MEM_PARAMS] + pm.persistent[PS_MEM_OPTSTATE] + out->arena_bytes;
	const int64_t *live = &pm.live[(size_t)pm.peak_step * PS_MEM_CAT_COUNT];
	out->at_peak.parameters = pm.persistent[PS_MEM_PARAMS];
	out->at_peak.gradients = live[PS_MEM_GRADS];
	out->at_peak.optimizer_state = pm.persistent[PS_MEM_OPTSTATE];
	out->at_peak.saved = live[PS_MEM_SAVED];
	out->at_peak.transient = live[PS_MEM_TRANSIENT];
	out->at_peak.workspace = live[PS_MEM_WORKSPACE];
	ps_memory_free(&pm);
}

bool revc_model_memory(const revc_model *m, revc_memory *out, revc_error **err)
{
	if (!m->compiled || m->cut)
		return drv_errorf(err, REVC_ERR_USAGE, "%s is not compiled (or its pipeline was cut short)", m->name);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	drv_engine_plan((drv_engine *)&m->engine, &ctx);
	fill(m->step, &ctx, m->opts.strategy, m->schedule, out);
	ps_ctx_free(&ctx);
	return true;
}

bool revc_memory_plan(revc_model *m, revc_strategy s, const revc_options *o, revc_memory *out, revc_error **err)
{
	if (!m->is_spec)
		return drv_errorf(err, REVC_ERR_USAGE, "%s: planning another strategy needs a spec, not IR", m->name);
	revc_options def;
	if (!o) {
		revc_options_init(&def);
		o = &def;
	}
	drv_engine e;
	drv_engine_init(&e, o->engine, o->threads, o->cpu);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.strategy = (ps_strategy)s;
	ctx.no_order_edges = o->no_order_edges;
	drv_engine_plan(&e, &ctx);
	ps_options popts;
	drv_pass_options(o, &popts);
	char *dumps = NULL;
	size_t dlen = 0;
	FILE *df = NULL;
	if (popts.dump_after && !popts.dump_dir) {
		if (!(df = open_memstream(&dumps, &dlen)))
			IR_DIE("out of memory");
		popts.dump_out = df;
	}
	ir_graph *g = drv_spec_plan(&m->spec.spec, drv_dtype(o->dtype), FE_LOWER_TRAIN, &ctx, &popts);
	if (df) {
		if (fclose(df) != 0)
			IR_DIE("out of memory");
		drv_model_add_dumps(m, dumps, dlen);
		free(dumps);
	}
	bool ok = g != NULL;
	if (!g)
		drv_model_error(m, &ctx.diags, err);
	else if (!ir_graph_has_pass(g, "plan"))
		*out = (revc_memory){.strategy = s, .cut = true};
	else
		fill(g, &ctx, s, ctx.schedule ? ctx.schedule : "given", out);
	ir_graph_free(g);
	ps_ctx_free(&ctx);
	drv_engine_free(&e);
	return ok;
}
