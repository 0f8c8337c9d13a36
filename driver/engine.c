/* engine.c: how the driver runs a graph: the reference interpreter, or
 * native code from the LLVM JIT (the default) for a CPU.  The engine
 * decides how many threads work and what workspace the planner reserves,
 * so every model plans the arena the engine that runs it needs. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool drv_engine_check(revc_engine kind, const char *cpu, revc_error **err)
{
	if (!cpu || kind != REVC_JIT)
		return true;
	ir_diags d;
	ir_diags_init(&d);
	bool ok = cg_jit_cpu_ok(cpu, &d);
	if (!ok)
		drv_error_diags(err, REVC_ERR_USER, &d, NULL, 0);
	ir_diags_free(&d);
	return ok;
}

void drv_engine_init(drv_engine *e, revc_engine kind, int threads, const char *cpu)
{
	memset(e, 0, sizeof *e);
	e->kind = kind;
	e->threads = threads < 1 ? 1 : threads;
	e->cg = (cg_options){.threads = e->threads, .optimize = true, .cpu = cpu};
	/* The graphs an engine compiles (the step, then the evaluation graph)
	 * share many kernels: each is compiled once, in the first JIT that
	 * needs it, which lives as long as the engine. */
	if (kind == REVC_JIT)
		e->cg.kcache = e->kcache = cg_kcache_new();
	/* The interpreter lets BLAS use the threads; native code divides
	 * kernels among its own pool and keeps BLAS to one thread each. */
	rt_set_threads(kind == REVC_JIT ? 1 : e->threads);
}

void drv_engine_plan(drv_engine *e, ps_ctx *ctx)
{
	if (e->kind == REVC_JIT) {
		ctx->workspace = cg_workspace;
		ctx->workspace_user = &e->cg;
	} else {
		ctx->workspace = rt_workspace_fn;
		ctx->workspace_user = NULL;
	}
}

rt_exec *drv_engine_exec_diags(drv_engine *e, const ir_graph *g, rt_store *store, ir_diags *d)
{
	rt_err re;
	rt_exec *x = NULL;
	if (e->kind == REVC_INTERP) {
		if (!(x = rt_exec_new(g, store, RT_EXEC_AUTO, &re)))
			ir_diag_add(d, (ir_pos){0}, "%s", re.msg);
		return x;
	}
	if (e->njit == DRV_MAX_JITS)
		IR_DIE("too many compiled graphs");
	cg_jit *j = cg_jit_compile(g, &e->cg, &e->stats, d);
	if (!j)
		return NULL;
	e->jit[e->njit++] = j;
	if (!e->pool)
		e->pool = rt_pool_new(e->threads);
	if (!(x = rt_exec_new_native(g, store, cg_jit_step(j), e->pool, &re)))
		ir_diag_add(d, (ir_pos){0}, "%s", re.msg);
	return x;
}

rt_exec *drv_engine_exec(drv_engine *e, const ir_graph *g, rt_store *store, revc_error **err)
{
	ir_diags d;
	ir_diags_init(&d);
	rt_exec *x = drv_engine_exec_diags(e, g, store, &d);
	if (!x)
		drv_error_diags(err, REVC_ERR_USER, &d, NULL, 0);
	ir_diags_free(&d);
	return x;
}

void drv_engine_share_pool(drv_engine *to, const drv_engine *from)
{
	IR_ASSERT(from->pool && !to->pool && from->threads == to->threads);
	to->pool = from->pool;
	to->pool_borrowed = true;
}

void drv_engine_free(drv_engine *e)
{
	for (int i = 0; i < e->njit; i++)
		cg_jit_free(e->jit[i]);
	cg_kcache_free(e->kcache);
	if (!e->pool_borrowed)
		rt_pool_free(e->pool);
	memset(e, 0, sizeof *e);
}

const char *drv_engine_name(const drv_engine *e)
{
	return e->kind == REVC_JIT ? "jit" : "interp";
}

const char *drv_engine_cpu(const drv_engine *e, char *buf, size_t len, bool *native)
{
	*native = cg_cpu_is_native(e->cg.cpu);
	if (*native)
		cg_host_cpu(buf, len);
	else
		snprintf(buf, len, "%s", e->cg.cpu);
	return buf;
}

const char *drv_engine_label(const drv_engine *e, char *buf, size_t len)
{
	char cpu[64];
	bool native;
	if (e->kind == REVC_JIT)
		snprintf(buf, len, "jit (%s)", drv_engine_cpu(e, cpu, sizeof cpu, &native));
	else
		snprintf(buf, len, "%s", drv_engine_name(e));
	return buf;
}
