/* engine.c: the engine options of the commands that run graphs (--engine,
 * --cpu) and the driver's engine (driver/engine.c) with its errors
 * printed, for the commands not yet moved onto revc.h. */
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

/* Prints err's message and frees it; returns status. */
static int print_error(revc_error *err, int status)
{
	fputs(revc_error_message(err), stderr);
	revc_error_free(err);
	return status;
}

int cli_engine_check(const char *cmd, cli_engine_kind kind, const char *cpu)
{
	if (!cpu)
		return EXIT_OK;
	if (kind != CLI_ENGINE_JIT)
		return cli_usage_error(cmd, "--cpu applies to --engine jit (the interpreter is plain C)");
	revc_error *err = NULL;
	return drv_engine_check(kind, cpu, &err) ? EXIT_OK : print_error(err, EXIT_USER);
}

rt_exec *cli_engine_exec(cli_engine *e, const ir_graph *g, rt_store *store)
{
	revc_error *err = NULL;
	rt_exec *x = drv_engine_exec(e, g, store, &err);
	if (!x)
		print_error(err, EXIT_USER);
	return x;
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

void cli_model_engine_json(const revc_model *m)
{
	printf("\"engine\":\"%s\",", revc_model_engine(m));
	if (revc_model_cpu(m))
		printf("\"cpu\":\"%s\",", revc_model_cpu(m));
	else
		printf("\"cpu\":null,");
}
