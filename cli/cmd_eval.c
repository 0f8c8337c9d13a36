/* cmd_eval.c: `revc eval` reports a model's loss and accuracy on the test
 * split, normalising with the running statistics. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "rt.h"

static const char usage[] =
	"revc eval SPEC --params DIR [--data fashion-mnist[:DIR] | cifar10:DIR | synthetic]\n"
	"                 [--split test|train] [--json] [--engine interp|jit] [--cpu NAME] [--threads N]\n"
	"                 [--max-memory SIZE] [--set KEY=VALUE ...] [pass options]";
static const char about[] =
	"Loads the parameters and batch-norm running statistics in DIR (NAME.npy, e.g.\n"
	"a checkpoint of revc train) and prints the mean cross-entropy and the accuracy\n"
	"over the whole split, in batches of the spec's batch size.  Every tensor the\n"
	"model has must be in DIR with its shape; others are ignored, so a checkpoint\n"
	"of a deeper model evaluates a shallower one.  DIR may come from NumPy (no\n"
	"revc-manifest.txt needed).  When any image's logits are not finite (NaN or\n"
	"Inf in the parameters, say), it reports that as an error instead.  The pass\n"
	"options apply to the evaluation graph's pipeline (its dumps: eval-NN-PASS.ir);\n"
	"with --stop-after or --passes revc eval builds and dumps it and exits.";

static const cli_opt opts[] = {
	{"params", 0, "DIR", "parameters and running statistics (required)"},
	{"data", 0, "DATA", "fashion-mnist[:DIR], cifar10:DIR or synthetic (default: the spec's)"},
	{"split", 0, "NAME", "test (default) or train"},
	{"json", 0, NULL, "print one JSON object"},
	{"threads", 0, "N", "threads to use (default 2)"},
	CLI_ENGINE_OPT,
	CLI_CPU_OPT,
	CLI_MAX_MEMORY_OPT,
	CLI_SET_OPT,
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_PARAMS, OPT_DATA, OPT_SPLIT, OPT_JSON, OPT_THREADS, OPT_ENGINE, OPT_CPU, OPT_MAX_MEMORY, OPT_SET,
	OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

int cmd_eval(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc eval", argc, argv);
	const char *spec = NULL, *params = NULL, *data = NULL, *cpu = NULL, *val;
	cli_engine_kind engine_kind = CLI_ENGINE_JIT;
	bool json = false, train_split = false;
	int64_t threads = 2, max_memory = -1;
	ps_options popts = {0};
	cli_model m = {0};
	for (int k; (k = cli_next(&a, opts, &val)) != CLI_END;) {
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (spec)
				return cli_usage_error(a.cmd, "unexpected argument '%s'", val);
			spec = val;
			break;
		case OPT_PARAMS: params = val; break;
		case OPT_DATA: data = val; break;
		case OPT_SPLIT:
			if (strcmp(val, "test") != 0 && strcmp(val, "train") != 0)
				return cli_usage_error(a.cmd, "--split must be test or train, not '%s'", val);
			train_split = strcmp(val, "train") == 0;
			break;
		case OPT_JSON: json = true; break;
		case OPT_THREADS:
			if (!cli_parse_int(a.cmd, "--threads", val, 1, 256, &threads))
				return EXIT_USAGE;
			break;
		case OPT_ENGINE:
			if (!cli_engine_parse(a.cmd, val, &engine_kind))
				return EXIT_USAGE;
			break;
		case OPT_CPU:
			if (!cli_cpu_parse(a.cmd, val, &cpu))
				return EXIT_USAGE;
			break;
		case OPT_MAX_MEMORY:
			if (!cli_parse_max_memory(a.cmd, val, &max_memory))
				return EXIT_USAGE;
			break;
		case OPT_SET:
			if (!cli_model_add_set(&m, a.cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (!cli_pass_option(k - OPT_PASS0, val, &popts))
				return EXIT_OK;
		}
	}
	if (!spec)
		return cli_usage_error(a.cmd, "missing SPEC");
	if (!params)
		return cli_usage_error(a.cmd, "missing --params DIR");
	int ready = cli_engine_check(a.cmd, engine_kind, cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(a.cmd, &popts);
	if (ready != EXIT_OK)
		return ready;
	cli_engine engine;
	cli_engine_init(&engine, engine_kind, (int)threads, cpu);

	int status = EXIT_USER;
	rt_dataset d = {0};
	rt_store store;
	rt_store_init(&store);
	ir_graph *g = NULL;
	rt_exec *x = NULL;
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.optimizer = false;
	cli_engine_plan(&engine, &ctx);
	rt_err e;
	double loss, acc;
	int64_t bad;
	ps_options eopts;
	char eval_only[128];
	if (!cli_model_load(&m, spec))
		goto done;
	g = cli_model_graph(&m, IR_F32, FE_LOWER_EVAL, &ctx, cli_eval_options(&popts, &eopts, eval_only, sizeof eval_only));
	if (g && cli_pipeline_cut(a.cmd, &popts)) {
		status = EXIT_OK;
		goto done;
	}
	if (!g || !cli_check_max_memory(max_memory, &g, 1))
		goto done;
	/* The parameters before the data: a wrong DIR fails at once. */
	if (!rt_store_load(&store, g, params, false, &e)) {
		cli_error("%s", e.msg);
		goto done;
	}
	if (!data)
		data = m.spec.dataset;
	cli_budget budget = cli_data_budget(max_memory, &g, 1);
	if (!cli_data_load(data, &m.spec, train_split, &budget, &d))
		goto done;
	if (!(x = cli_engine_exec(&engine, g, &store)))
		goto done;
	if (!rt_evaluate(x, &d, &loss, &acc, &bad, &e)) {
		cli_error("%s", e.msg);
		goto done;
	}
	if (bad > 0) { /* no plausible accuracy from broken outputs */
		rt_err why;
		rt_error_nonfinite_logits(&e, "the loss", loss, bad, d.n);
		if (!rt_store_check_finite(&store, params, &why))
			rt_err_appendf(&e, "; %s", why.msg);
		cli_error("%s", e.msg);
		goto done;
	}
	char label[96];
	if (json) {
		printf("{\"split\":\"%s\",\"images\":%lld,", train_split ? "train" : "test", (long long)d.n);
		cli_engine_json(&engine);
		printf("\"loss\":%.6g,\"accuracy\":%.6g}\n", loss, acc);
	} else {
		printf("%s on %s %s (%lld images): loss %.4f, accuracy %.2f%%; engine %s\n", m.spec.name, data,
			train_split ? "train" : "test", (long long)d.n, loss, 100 * acc,
			cli_engine_label(&engine, label, sizeof label));
	}
	status = EXIT_OK;
done:
	rt_exec_free(x);
	rt_store_free(&store);
	ir_graph_free(g);
	rt_dataset_free(&d);
	ps_ctx_free(&ctx);
	cli_model_free(&m);
	cli_engine_free(&engine);
	return status;
}
