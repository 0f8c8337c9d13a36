/* cmd_eval.c: `revc eval` reports a model's loss and accuracy on the test
 * split, normalising with the running statistics. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"revc eval SPEC|FILE.ir --params DIR [--data fashion-mnist[:DIR] | cifar10:DIR | synthetic]\n"
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
	"with --stop-after or --passes revc eval builds and dumps it and exits.\n"
	"\n"
	"FILE.ir is a forward graph in revc's IR with its couplings marked, such as\n"
	"`revc dump SPEC` prints: its evaluation graph is the forward graph with\n"
	"batch norm on the running statistics (docs/ir.md); the data is --data, or\n"
	"the dataset of its training settings (a train { ... } block).";

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

static void print(const revc_model *m, const revc_dataset *d, bool train_split, bool json, double loss, double acc)
{
	const char *split = train_split ? "train" : "test";
	long long n = (long long)revc_dataset_count(d);
	if (json) {
		printf("{\"split\":\"%s\",\"images\":%lld,", split, n);
		cli_model_engine_json(m);
		printf("\"loss\":%.6g,\"accuracy\":%.6g}\n", loss, acc);
	} else {
		printf("%s on %s %s (%lld images): loss %.4f, accuracy %.2f%%; engine %s\n", revc_model_name(m),
			revc_dataset_name(d), split, n, loss, 100 * acc, revc_model_engine_label(m));
	}
}

typedef struct {
	const char *spec, *params, *data;
	bool json, train_split;
	revc_options o;
	cli_sets sets;
} eval_args;

/* The options into *e; -1 when the command goes on, else its exit status. */
static int parse(int argc, char **argv, eval_args *e)
{
	cli_args a;
	cli_args_init(&a, "revc eval", argc, argv);
	const char *val;
	for (int k; (k = cli_next(&a, opts, &val)) != CLI_END;) {
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (e->spec)
				return cli_usage_error(a.cmd, "unexpected argument '%s'", val);
			e->spec = val;
			break;
		case OPT_PARAMS: e->params = val; break;
		case OPT_DATA: e->data = val; break;
		case OPT_SPLIT:
			if (strcmp(val, "test") != 0 && strcmp(val, "train") != 0)
				return cli_usage_error(a.cmd, "--split must be test or train, not '%s'", val);
			e->train_split = strcmp(val, "train") == 0;
			break;
		case OPT_JSON: e->json = true; break;
		case OPT_SET:
			if (!cli_sets_add(&e->sets, a.cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (k < OPT_PASS0 && cli_revc_option(a.cmd, opts[k].name, val, &e->o) < 0)
				return EXIT_USAGE;
			if (k >= OPT_PASS0 && !cli_pass_option(k - OPT_PASS0, val, &e->o))
				return EXIT_OK;
		}
	}
	if (!e->spec)
		return cli_usage_error(a.cmd, "missing SPEC or FILE.ir");
	if (!e->params)
		return cli_usage_error(a.cmd, "missing --params DIR");
	int ready = cli_engine_check(a.cmd, e->o.engine, e->o.cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(a.cmd, &e->o);
	if (ready != EXIT_OK)
		return ready;
	e->o.graphs = REVC_GRAPH_EVAL;
	e->o.no_run = true; /* (prepared once the parameters and data are in) */
	return -1;
}

int cmd_eval(int argc, char **argv)
{
	eval_args e = {0};
	revc_options_init(&e.o);
	int status = parse(argc, argv, &e);
	if (status >= 0)
		return status;
	status = EXIT_OK;
	revc_error *err = NULL;
	revc_dataset *d = NULL;
	double loss, acc;
	revc_model *model = cli_model_open("revc eval", e.spec, &e.sets, &status);
	if (!model)
		return status;
	bool ok = revc_model_compile(model, &e.o, &err);
	if (model)
		cli_print_dumps(model);
	if (ok && revc_model_cut(model))
		cli_pipeline_cut("revc eval", &e.o);
	else if (ok && revc_load(model, e.params, NULL, &err) &&
		(d = revc_dataset_load(model, e.data, e.train_split, &err)) && revc_evaluate(model, d, &loss, &acc, &err))
		print(model, d, e.train_split, e.json, loss, acc);
	else
		status = cli_revc_error(err);
	revc_dataset_free(d);
	revc_model_free(model);
	return status;
}
