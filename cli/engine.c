/* engine.c: how the spec-reading commands run a graph: the reference
 * interpreter, or native code from the LLVM JIT (the default) for the CPU
 * --cpu names.  The engine decides how many threads work and what
 * workspace the planner reserves. */
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "cli.h"

bool cli_engine_parse(const char *cmd, const char *val, cli_engine_kind *out)
{
	if (strcmp(val, "interp") == 0)
		*out = CLI_ENGINE_INTERP;
	else if (strcmp(val, "jit") == 0)
		*out = CLI_ENGINE_JIT;
	else {
		cli_usage_error(cmd, "--engine must be interp or jit, not '%s'", val);
		return false;
	}
	return true;
}

bool cli_cpu_parse(const char *cmd, const char *val, const char **out)
{
	if (!cg_cpu_known(val)) {
		cli_usage_error(cmd, "--cpu must be native or an LLVM CPU name such as x86-64-v3 or znver3, not '%s'", val);
		return false;
	}
	*out = val;
	return true;
}

int cli_engine_check(const char *cmd, cli_engine_kind kind, const char *cpu)
{
	if (!cpu)
		return EXIT_OK;
	if (kind != CLI_ENGINE_JIT)
		return cli_usage_error(cmd, "--cpu applies to --engine jit (the interpreter is plain C)");
	ir_diags d;
	ir_diags_init(&d);
	bool ok = cg_jit_cpu_ok(cpu, &d);
	if (!ok)
		cli_report(&d, NULL, 0);
	ir_diags_free(&d);
	return ok ? EXIT_OK : EXIT_USER;
}

void cli_engine_init(cli_engine *e, cli_engine_kind kind, int threads, const char *cpu)
{
	memset(e, 0, sizeof *e);
	e->kind = kind;
	e->threads = threads < 1 ? 1 : threads;
	e->cg = (cg_options){.threads = e->threads, .optimize = true, .cpu = cpu};
	/* The interpreter lets BLAS use the threads; native code divides
	 * kernels among its own pool and keeps BLAS to one thread each. */
	rt_set_threads(kind == CLI_ENGINE_JIT ? 1 : e->threads);
}

void cli_engine_plan(cli_engine *e, ps_ctx *ctx)
{
	if (e->kind == CLI_ENGINE_JIT) {
		ctx->workspace = cg_workspace;
		ctx->workspace_user = &e->cg;
	} else {
		ctx->workspace = rt_workspace_fn;
		ctx->workspace_user = NULL;
	}
}

rt_exec *cli_engine_exec(cli_engine *e, const ir_graph *g, rt_store *store)
{
	rt_err err;
	if (e->kind == CLI_ENGINE_INTERP) {
		rt_exec *x = rt_exec_new(g, store, RT_EXEC_AUTO, &err);
		if (!x)
			cli_error("%s", err.msg);
		return x;
	}
	if (e->njit == CLI_MAX_JITS)
		IR_DIE("too many compiled graphs");
	ir_diags d;
	ir_diags_init(&d);
	cg_jit *j = cg_jit_compile(g, &e->cg, &e->stats, &d);
	if (!j) {
		cli_report(&d, NULL, 0);
		ir_diags_free(&d);
		return NULL;
	}
	ir_diags_free(&d);
	e->jit[e->njit++] = j;
	if (!e->pool)
		e->pool = rt_pool_new(e->threads);
	rt_exec *x = rt_exec_new_native(g, store, cg_jit_step(j), e->pool, &err);
	if (!x)
		cli_error("%s", err.msg);
	return x;
}

void cli_engine_free(cli_engine *e)
{
	for (int i = 0; i < e->njit; i++)
		cg_jit_free(e->jit[i]);
	rt_pool_free(e->pool);
	memset(e, 0, sizeof *e);
}

const char *cli_engine_name(const cli_engine *e)
{
	return e->kind == CLI_ENGINE_JIT ? "jit" : "interp";
}

const char *cli_engine_label(const cli_engine *e, char *buf, size_t len)
{
	char cpu[64];
	bool native;
	if (e->kind == CLI_ENGINE_JIT)
		snprintf(buf, len, "jit (%s)", cli_engine_cpu(e, cpu, sizeof cpu, &native));
	else
		snprintf(buf, len, "%s", cli_engine_name(e));
	return buf;
}

void cli_engine_json(const cli_engine *e)
{
	char cpu[64];
	bool native;
	printf("\"engine\":\"%s\",", cli_engine_name(e));
	if (e->kind == CLI_ENGINE_JIT)
		printf("\"cpu\":\"%s\",", cli_engine_cpu(e, cpu, sizeof cpu, &native));
	else
		printf("\"cpu\":null,");
}

const char *cli_engine_cpu(const cli_engine *e, char *buf, size_t len, bool *native)
{
	*native = cg_cpu_is_native(e->cg.cpu);
	if (*native)
		cg_host_cpu(buf, len);
	else
		snprintf(buf, len, "%s", e->cg.cpu);
	return buf;
}
