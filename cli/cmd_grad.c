/* cmd_grad.c: `revc grad` computes the loss and the gradient of every
 * trainable parameter for one batch, and writes them as .npy files. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rt.h"

static const char usage[] =
	"revc grad SPEC --params DIR --input X.npy --labels Y.npy --out DIR\n"
	"                 [--dtype f32|f64] [--strategy store|revnet|checkpoint] [--engine interp|jit]\n"
	"                 [--cpu NAME] [--threads N] [--state-out DIR] [--check-numerics] [--max-memory SIZE]\n"
	"                 [--set KEY=VALUE ...] [pass options]\n"
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
	"revc grad builds and dumps the step and exits without running it.";

static const cli_opt opts[] = {
	{"params", 0, "DIR", "parameters and state to start from (required)"},
	{"input", 0, "X.npy", "the batch, float32 or float64 [N,C,H,W] (required)"},
	{"labels", 0, "Y.npy", "its labels, integer [N] (required)"},
	{"out", 'o', "DIR", "directory to write (required; replaced whole, see below)"},
	{"dtype", 0, "f32|f64", "precision of the computation (default f32)"},
	CLI_STRATEGY_OPT,
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
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_PARAMS, OPT_INPUT, OPT_LABELS, OPT_OUT, OPT_DTYPE, OPT_STRATEGY, OPT_STATE_OUT, OPT_STEPS,
	OPT_LR, OPT_PARAMS_OUT, OPT_ENGINE, OPT_CPU, OPT_THREADS, OPT_CHECK_NUMERICS, OPT_MAX_MEMORY, OPT_SET, OPT_HELP,
	OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

/* Reads X and Y and checks them against the model's input. */
static bool read_batch(const revc_model *m, const char *xpath, const char *ypath, rt_npy *x, rt_npy *y)
{
	rt_err e;
	if (!rt_npy_read(xpath, x, &e) || !rt_npy_read(ypath, y, &e)) {
		cli_error("%s", e.msg);
		return false;
	}
	int64_t in[3];
	revc_model_input(m, in);
	if (x->rank != 4 || x->dim[1] != in[0] || x->dim[2] != in[1] || x->dim[3] != in[2] ||
	    (x->dtype != RT_NPY_F32 && x->dtype != RT_NPY_F64)) {
		cli_error("%s: need float [N,%lld,%lld,%lld] for this model", xpath, (long long)in[0],
			(long long)in[1], (long long)in[2]);
		return false;
	}
	if (x->dim[0] < 1 || x->dim[0] > FE_INT_MAX) {
		cli_error("%s: batch size %lld out of range", xpath, (long long)x->dim[0]);
		return false;
	}
	if (y->rank != 1 || y->dim[0] != x->dim[0] || (y->dtype != RT_NPY_I64 && y->dtype != RT_NPY_I32 &&
		y->dtype != RT_NPY_U8)) {
		cli_error("%s: need integer labels [%lld]", ypath, (long long)x->dim[0]);
		return false;
	}
	return true;
}

/* The batch in the model's dtype, in buffers the caller frees. */
typedef struct {
	void *x;
	int32_t *labels;
	revc_batch b;
} batch;

static bool to_batch(const rt_npy *x, const rt_npy *y, revc_dtype dt, batch *out)
{
	size_t es = dt == REVC_F64 ? sizeof(double) : sizeof(float);
	out->x = malloc((size_t)x->count * es + 1);
	out->labels = malloc((size_t)y->count * sizeof(int32_t) + 1);
	double *tmp = malloc((size_t)y->count * sizeof(double) + 1);
	if (!out->x || !out->labels || !tmp) {
		free(tmp);
		rt_err e;
		rt_error_oom(&e, "the batch", (int64_t)((size_t)x->count * es));
		return cli_error("%s", e.msg) == EXIT_OK;
	}
	if (dt == REVC_F64)
		rt_npy_to_f64(x, out->x);
	else
		rt_npy_to_f32(x, out->x);
	rt_npy_to_f64(y, tmp);
	for (int64_t i = 0; i < y->count; i++)
		out->labels[i] = (int32_t)tmp[i];
	free(tmp);
	out->b = (revc_batch){.x = out->x, .labels = out->labels, .n = y->count};
	return true;
}

static bool write_npy(rt_dir *d, const revc_tensor *t, rt_err *e)
{
	return rt_dir_write_npy(d, t->name, t->dtype == REVC_F64 ? RT_NPY_F64 : RT_NPY_F32, t->rank, t->dim, t->data, e);
}

/* Writes loss.npy and one NAME.npy per parameter gradient into dir. */
static bool write_grads(const revc_model *m, double loss, revc_dtype dt, const char *dir, rt_err *e)
{
	rt_dir d;
	if (!rt_dir_begin(&d, dir, RT_DIR_GRADIENTS, revc_model_name(m), e))
		return false;
	float lf = (float)loss;
	bool ok = rt_dir_write_npy(&d, "loss", dt == REVC_F64 ? RT_NPY_F64 : RT_NPY_F32, 0, NULL,
		dt == REVC_F64 ? (const void *)&loss : (const void *)&lf, e);
	revc_tensor t;
	for (int i = 0; ok && i < revc_param_count(m); i++)
		ok = !revc_grad_at(m, i, &t) || write_npy(&d, &t, e);
	if (!ok) {
		rt_dir_abort(&d);
		return false;
	}
	return rt_dir_commit(&d, e);
}

/* Writes the state tensors but momentum buffers (the running statistics,
 * or the whole model with all) into dir, replacing it whole. */
static bool write_store(const revc_model *m, const char *dir, rt_dir_kind kind, bool all, rt_err *e)
{
	rt_dir d;
	if (!rt_dir_begin(&d, dir, kind, revc_model_name(m), e))
		return false;
	bool ok = true;
	revc_tensor t;
	for (int i = 0; ok && revc_param_at(m, i, &t); i++) {
		size_t len = strlen(t.name);
		if (all || (!t.trainable && !(len > 4 && strcmp(t.name + len - 4, ".mom") == 0)))
			ok = write_npy(&d, &t, e);
	}
	if (!ok) {
		rt_dir_abort(&d);
		return false;
	}
	return rt_dir_commit(&d, e);
}

/* The gradients, or --train-steps K optimiser steps on the batch; then
 * what the command writes. */
static int run(revc_model *m, const revc_batch *b, revc_dtype dt, int64_t steps, double lr, const char *out,
	const char *state_out)
{
	revc_error *err = NULL;
	rt_err e;
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
	if (steps ? !write_store(m, out, RT_DIR_PARAMS, true, &e) : !write_grads(m, loss, dt, out, &e))
		return cli_error("%s", e.msg);
	if (state_out && !write_store(m, state_out, RT_DIR_STATE, false, &e))
		return cli_error("%s", e.msg);
	return EXIT_OK;
}

typedef struct {
	const char *spec, *params, *xpath, *ypath, *out, *state_out, *params_out;
	int64_t steps;
	double lr;
	revc_options o;
	ps_options popts;
	cli_model sets;
} grad_args;

/* The checks of the options together. */
static int check(const char *cmd, grad_args *g)
{
	if (!g->spec)
		return cli_usage_error(cmd, "missing SPEC");
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
	if (g->state_out && rt_dir_same(g->out, g->state_out))
		return cli_usage_error(cmd, "%s and --state-out name the same directory", g->steps ? "--params-out" : "--out");
	int ready = cli_engine_check(cmd, g->o.engine, g->o.cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(cmd, &g->popts);
	if (ready != EXIT_OK)
		return ready;
	g->o.graphs = g->steps ? REVC_GRAPH_STEP : REVC_GRAPH_GRAD;
	cli_revc_pass_options(&g->popts, &g->o);
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
			if (!cli_model_add_set(&g->sets, a.cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (k < OPT_PASS0 && cli_revc_option(a.cmd, opts[k].name, val, &g->o) < 0)
				return EXIT_USAGE;
			if (k >= OPT_PASS0 && !cli_pass_option(k - OPT_PASS0, val, &g->popts))
				return EXIT_OK;
		}
	}
	return check(a.cmd, g);
}

int cmd_grad(int argc, char **argv)
{
	grad_args g = {.lr = -1};
	revc_options_init(&g.o);
	int status = parse(argc, argv, &g);
	if (status >= 0)
		return status;
	status = EXIT_USER;
	rt_npy x = {0}, y = {0};
	batch b = {0};
	rt_err e;
	revc_error *err = NULL;
	revc_model *model = revc_model_from_file(g.spec, g.sets.sets, g.sets.nsets, &err);
	if (!model) {
		status = cli_revc_error(err);
		goto done;
	}
	if (!read_batch(model, g.xpath, g.ypath, &x, &y) || !to_batch(&x, &y, g.o.dtype, &b))
		goto done;
	if (!revc_model_set_batch(model, x.dim[0], &err)) {
		status = cli_revc_error(err);
		goto done;
	}
	/* Fail now on an output that cannot be written, not after the work. */
	const char *dirs[3] = {g.out, g.state_out, NULL};
	const rt_dir_kind kinds[2] = {g.steps ? RT_DIR_PARAMS : RT_DIR_GRADIENTS, RT_DIR_STATE};
	for (int i = 0; dirs[i]; i++)
		if (!rt_dir_check(dirs[i], kinds[i], &e)) {
			cli_error("%s", e.msg);
			goto done;
		}
	bool ok = revc_model_compile(model, &g.o, &err);
	cli_print_dumps(model);
	if (ok && revc_model_cut(model)) {
		cli_pipeline_cut("revc grad", &g.popts);
		status = EXIT_OK;
	} else if (ok && revc_load(model, g.params, NULL, &err)) {
		status = run(model, &b.b, g.o.dtype, g.steps, g.lr > 0 ? g.lr : revc_model_lr(model), g.out, g.state_out);
	} else {
		status = cli_revc_error(err);
	}
done:
	rt_npy_free(&x);
	rt_npy_free(&y);
	free(b.x);
	free(b.labels);
	revc_model_free(model);
	return status;
}
