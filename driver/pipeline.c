/* pipeline.c: the choices every input path makes the same way: a spec
 * lowered and run through the pipeline with its optimiser settings and
 * the engine's workspace, the evaluation graph's passes, and the check of
 * a plan against a memory limit before anything is allocated. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

void drv_ctx_settings(ps_ctx *ctx, const fe_spec *s)
{
	ctx->momentum = s->momentum;
	ctx->weight_decay = s->weight_decay;
	ctx->adamw = s->optimizer == FE_OPT_ADAMW;
	ctx->beta1 = s->beta1;
	ctx->beta2 = s->beta2;
	ctx->eps = s->eps;
	if (!ctx->workspace)
		ctx->workspace = rt_workspace_fn;
}

ir_graph *drv_spec_plan(const fe_spec *s, ir_dtype dt, fe_lower_mode mode, ps_ctx *ctx, const ps_options *opts)
{
	drv_ctx_settings(ctx, s);
	if (!fe_spec_check_sizes(s, dt, &ctx->diags)) {
		ctx->too_large = fe_spec_too_large(s, dt); /* a tensor beyond IR_MAX_BYTES */
		return NULL;
	}
	ir_graph *g = fe_lower(s, dt, mode);
	if (ps_run(g, ctx, opts) != 0) {
		ir_graph_free(g);
		return NULL;
	}
	return g;
}

const ps_options drv_eval_passes = {.only = "shape,dce,schedule,fuse,liveness,plan"};

const ps_options *drv_eval_options(const ps_options *user, ps_options *out, char *only, size_t n)
{
	*out = *user;
	out->dump_tag = "eval";
	out->only = only;
	size_t used = 0, len;
	only[0] = 0;
	const char *p = drv_eval_passes.only, *pass;
	while (ps_list_next(&p, &pass, &len))
		if ((!user->only || ps_list_has(user->only, pass, len)) && used + len + 2 <= n)
			used += (size_t)snprintf(only + used, n - used, "%s%.*s", used ? "," : "", (int)len, pass);
	return out;
}

int64_t drv_plan_bytes(ir_graph *const *graphs, int n, int64_t *part)
{
	int64_t persistent[PS_MEM_CAT_COUNT] = {0}, arena = 0;
	ps_memory_persistent(graphs[0], persistent);
	for (int k = 0; k < n; k++)
		arena += ps_arena_bytes(graphs[k]);
	if (part) {
		part[0] = persistent[PS_MEM_PARAMS];
		part[1] = persistent[PS_MEM_OPTSTATE];
		part[2] = arena;
	}
	return persistent[PS_MEM_PARAMS] + persistent[PS_MEM_OPTSTATE] + arena;
}

bool drv_check_max_memory(int64_t limit, ir_graph *const *graphs, int n, revc_error **err)
{
	if (limit < 0 || n < 1)
		return true;
	int64_t part[3];
	int64_t total = drv_plan_bytes(graphs, n, part);
	if (total <= limit)
		return true;
	char t[32], p[32], o[32], a[32], l[32];
	revc_format_bytes(t, sizeof t, total);
	revc_format_bytes(p, sizeof p, part[0]);
	revc_format_bytes(o, sizeof o, part[1]);
	revc_format_bytes(a, sizeof a, part[2]);
	revc_format_bytes(l, sizeof l, limit);
	return drv_errorf(err, REVC_ERR_USER, "the plan needs %s (%lld bytes: parameters %s + optimiser state %s + "
		"arena%s %s), more than --max-memory %s (%lld bytes)", t, (long long)total, p, o, n > 1 ? "s" : "", a, l,
		(long long)limit);
}
