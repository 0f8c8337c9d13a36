/* cmd_grad.c: `revc grad` computes the loss and the gradient of every
 * trainable parameter for one batch, and writes them as .npy files. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"revc grad SPEC|FILE.ir --params DIR --input X.npy --labels Y.npy --out DIR\n"
	"                 [--dtype f32|f64] [--strategy NAME] [--engine interp|jit]\n"
	"                 [--cpu NAME] [--threads N] [--state-out DIR] [--check-numerics] [--max-memory SIZE]\n"
	"                 [--set KEY=VALUE ...] [--decisions LETTERS] [pass options]\n"
	"       revc grad SPEC --params DIR --input X.npy --labels Y.npy --train-steps K --lr LR\n"
	"                 --params-out DIR [...]";
static const char about[] =
	"Runs one training-mode forward and backward pass on the batch X (N,C,H,W,\n"
	"float) with labels Y (N, integer), using the parameters and batch-norm state\n"
	"in DIR/NAME.npy, and writes OUT/loss.npy (0-d) and OUT/NAME.npy for every\n"
	"trainable parameter: the gradient of the mean cross-entropy alone (weight\n"
	"decay belongs to the optimiser).  The batch size is X's first dimension.\n"
	"With --train-steps K it runs K momentum-SGD steps on that batch instead\n"
	"(momentum from zero unless DIR holds it), prints each step's loss, and writes\n"
	"every parameter, running statistic and momentum buffer to --params-out.\n"
	"\n"
	"DIR needs no manifest: a directory of NAME.npy files from NumPy will do.\n"
	"The directories written (--out, --state-out, --params-out) get a\n"
	"revc-manifest.txt listing their files, and replace an existing directory\n"
	"only when it is empty or revc wrote it as one of that kind (gradients never\n"
	"replace a checkpoint); any other is refused before the work.\n"
	"The pass options apply to the step's pipeline; with --stop-after or --passes\n"
	"revc grad builds and dumps the step and exits without running it.\n"
	"\n"
	"FILE.ir is a forward graph in revc's IR with its couplings marked, such as\n"
	"`revc dump SPEC` prints: the same gradients as the spec's, in the graph's\n"
	"dtype and batch (X's must be it), with the optimiser of its training\n"
	"settings (a train { ... } block: docs/ir.md; the defaults without one).";

static const cli_opt opts[] = {
	{"params", 0, "DIR", "parameters and state to start from (required)"},
	{"input", 0, "X.npy", "the batch, float32 or float64 [N,C,H,W] (required)"},
	{"labels", 0, "Y.npy", "its labels, integer [N] (required)"},
	{"out", 'o', "DIR", "directory to write (required; replaced whole, see below)"},
	{"dtype", 0, "f32|f64", "precision of the computation (default f32)"},
	CLI_STRATEGY_OPT,
	CLI_BUDGET_OPT,
	{"state-out", 0, "DIR", "also write the batch-norm running statistics after the step"},
	{"train-steps", 0, "K", "run K optimiser steps on the batch instead of writing gradients"},
	{"lr", 0, "LR", "learning rate of those steps (default: the spec's first)"},
	{"params-out", 0, "DIR", "where --train-steps writes the model (replaced whole)"},
	CLI_ENGINE_OPT,
	CLI_CPU_OPT,
	{"threads", 0, "N", "threads to use (default 2)"},
	CLI_CHECK_NUMERICS_OPT,
	CLI_MAX_MEMORY_OPT,
	CLI_SET_OPT,
	CLI_DECISIONS_OPT,
	CLI_DP_OPTS, /* (bucket) */
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_PARAMS, OPT_INPUT, OPT_LABELS, OPT_OUT, OPT_DTYPE, OPT_STRATEGY, OPT_BUDGET, OPT_STATE_OUT, OPT_STEPS,
	OPT_LR, OPT_PARAMS_OUT, OPT_ENGINE, OPT_CPU, OPT_THREADS, OPT_CHECK_NUMERICS, OPT_MAX_MEMORY, OPT_SET, OPT_DECISIONS, OPT_BUCKET, OPT_OVERLAP, OPT_HELP,
	OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

/* The gradients, or --train-steps K optimiser steps on the batch; then
 * what the command writes. */
static int run(revc_model *m, const revc_batch *b, int64_t steps, double lr, const char *out, const char *state_out)
{
	revc_error *err = NULL;
	double loss;
	for (int64_t s = 0; s < steps; s++) {
		if (!revc_train_step(m, b, lr, &loss, &err)) {
			if (!revc_model_faulted(m))
				return cli_revc_error(err);
			const char *msg = revc_error_message(err);
			fprintf(stderr, "%.*s, step %lld\n", (int)strcspn(msg, "\n"), msg, (long long)s + 1);
			revc_error_free(err);
			return EXIT_USER;
		}
		printf("step %lld loss %.9g\n", (long long)s + 1, loss);
	}
	if (!steps && !revc_grad(m, b, &loss, &err))
		return cli_revc_error(err);
	if (steps ? !revc_save(m, out, 0, &err) : !revc_save_gradients(m, out, loss, &err))
		return cli_revc_error(err);
	if (state_out && !revc_save_state(m, state_out, &err))
		return cli_revc_error(err);
	return EXIT_OK;
}

typedef struct {
	const char *spec, *params, *xpath, *ypath, *out, *state_out, *params_out;
	int64_t steps;
	double lr;
	revc_options o;
	cli_sets sets;
} grad_args;

/* The checks of the options together. */
static int check(const char *cmd, grad_args *g)
{
	if (!g->spec)
		return cli_usage_error(cmd, "missing SPEC or FILE.ir");
	const char *missing = !g->params ? "--params DIR" : !g->xpath ? "--input X.npy" : !g->ypath ? "--labels Y.npy"
		: g->steps ? (!g->params_out ? "--params-out DIR" : NULL) : !g->out ? "--out DIR" : NULL;
	if (missing)
		return cli_usage_error(cmd, "missing %s", missing);
	if (g->steps && g->out)
		return cli_usage_error(cmd, "--train-steps writes --params-out, not gradients: drop --out");
	if (!g->steps && (g->params_out || g->lr > 0))
		return cli_usage_error(cmd, "--params-out and --lr go with --train-steps");
	if (g->steps)
		g->out = g->params_out;
	if (g->state_out && revc_dir_same(g->out, g->state_out))
		return cli_usage_error(cmd, "%s and --state-out name the same directory", g->steps ? "--params-out" : "--out");
	int ready = cli_engine_check(cmd, g->o.engine, g->o.cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(cmd, &g->o);
	if (ready != EXIT_OK)
		return ready;
	g->o.graphs = g->steps ? REVC_GRAPH_STEP : REVC_GRAPH_GRAD;
	g->o.no_run = true; /* (prepared once the parameters are in) */
	return -1;
}

/* The options into *g; -1 when the command goes on, else its exit status. */
static int parse(int argc, char **argv, grad_args *g)
{
	cli_args a;
	cli_args_init(&a, "revc grad", argc, argv);
	const char *val;
	for (int k; (k = cli_next(&a, opts, &val)) != CLI_END;) {
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (g->spec)
				return cli_usage_error(a.cmd, "unexpected argument '%s'", val);
			g->spec = val;
			break;
		case OPT_PARAMS: g->params = val; break;
		case OPT_INPUT: g->xpath = val; break;
		case OPT_LABELS: g->ypath = val; break;
		case OPT_OUT: g->out = val; break;
		case OPT_STATE_OUT: g->state_out = val; break;
		case OPT_STEPS:
			if (!cli_parse_int(a.cmd, "--train-steps", val, 1, 1000000, &g->steps))
				return EXIT_USAGE;
			break;
		case OPT_LR: {
			char *end;
			g->lr = strtod(val, &end);
			if (!*val || *end || !(g->lr > 0 && g->lr < 1e6))
				return cli_usage_error(a.cmd, "--lr must be a positive number, not '%s'", val);
			break;
		}
		case OPT_PARAMS_OUT: g->params_out = val; break;
		case OPT_SET:
			if (!cli_sets_add(&g->sets, a.cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (k < OPT_PASS0 && cli_revc_option(a.cmd, opts[k].name, val, &g->o) < 0)
				return EXIT_USAGE;
			if (k >= OPT_PASS0 && !cli_pass_option(k - OPT_PASS0, val, &g->o))
				return EXIT_OK;
		}
	}
	return check(a.cmd, g);
}

/* Reads the batch into *b, and fails now on an output that cannot be
 * written, not after the work; then compiles the model, loads the
 * parameters and runs. */
static int grad(revc_model *m, const grad_args *g, revc_batch *b)
{
	revc_error *err = NULL;
	if (!revc_batch_load(m, g->xpath, g->ypath, g->o.dtype, b, &err) || !revc_model_set_batch(m, b->n, &err) ||
	    !revc_dir_check(g->out, g->steps ? REVC_DIR_PARAMS : REVC_DIR_GRADIENTS, NULL, &err) ||
	    (g->state_out && !revc_dir_check(g->state_out, REVC_DIR_STATE, NULL, &err)))
		return cli_revc_error(err);
	bool ok = revc_model_compile(m, &g->o, &err);
	cli_print_dumps(m);
	if (ok && revc_model_cut(m)) {
		cli_pipeline_cut("revc grad", &g->o);
		return EXIT_OK;
	}
	if (!ok || !revc_load(m, g->params, NULL, &err))
		return cli_revc_error(err);
	return run(m, b, g->steps, g->lr > 0 ? g->lr : revc_model_lr(m), g->out, g->state_out);
}

int cmd_grad(int argc, char **argv)
{
	grad_args g = {.lr = -1};
	revc_options_init(&g.o);
	int status = parse(argc, argv, &g);
	if (status >= 0)
		return status;
	revc_model *m = cli_model_open("revc grad", g.spec, &g.sets, &status);
	if (!m)
		return status;
	revc_batch b = {0};
	status = grad(m, &g, &b);
	revc_batch_free(&b);
	revc_model_free(m);
	return status;
}
