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

/* Copies an .npy array into a graph input, converting the element type. */
static bool fill_input(rt_exec *x, const char *name, const rt_npy *a, const char *path)
{
	const ir_type *t;
	void *buf = rt_exec_input(x, name, &t);
	if (ir_type_elems(t) != a->count) {
		cli_error("%s: %lld elements, the model needs %lld", path, (long long)a->count,
			(long long)ir_type_elems(t));
		return false;
	}
	if (t->dtype == IR_F32) {
		rt_npy_to_f32(a, buf);
	} else if (t->dtype == IR_F64) {
		rt_npy_to_f64(a, buf);
	} else {
		double *tmp = malloc((size_t)a->count * sizeof *tmp + 1);
		if (!tmp) {
			rt_err e;
			rt_error_oom(&e, path, (int64_t)((size_t)a->count * sizeof *tmp));
			return cli_error("%s", e.msg);
		}
		rt_npy_to_f64(a, tmp);
		for (int64_t i = 0; i < a->count; i++)
			((int32_t *)buf)[i] = (int32_t)tmp[i];
		free(tmp);
	}
	return true;
}

/* Reads X and Y and checks them against the spec; sets the batch size. */
static bool read_batch(cli_model *m, const char *xpath, const char *ypath, rt_npy *x, rt_npy *y)
{
	rt_err e;
	if (!rt_npy_read(xpath, x, &e) || !rt_npy_read(ypath, y, &e)) {
		cli_error("%s", e.msg);
		return false;
	}
	const int64_t *in = m->spec.input;
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
	m->spec.batch = x->dim[0];
	return true;
}

/* Writes loss.npy and one NAME.npy per "grad:NAME" output into d. */
static bool write_grads(const ir_graph *g, const rt_exec *x, rt_dir *d, rt_err *e)
{
	const ir_type *t;
	const void *loss = rt_exec_output(x, "loss", &t);
	if (!rt_dir_write_npy(d, "loss", t->dtype == IR_F32 ? RT_NPY_F32 : RT_NPY_F64, 0, NULL, loss, e))
		return false;
	size_t plen = strlen(PS_GRAD_PREFIX);
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_OUTPUT)
			continue;
		const char *name = ir_node_str(n, IR_ATTR_NAME);
		if (strncmp(name, PS_GRAD_PREFIX, plen) != 0)
			continue;
		const void *data = rt_exec_output(x, name, &t);
		if (!rt_dir_write_npy(d, name + plen, t->dtype == IR_F32 ? RT_NPY_F32 : RT_NPY_F64, t->rank, t->dim,
			data, e))
			return false;
	}
	return true;
}

/* Writes the store's state tensors but momentum buffers (the running
 * statistics) into dir, replacing it whole. */
static bool write_state(const rt_store *s, const char *dir, const char *model, rt_err *e)
{
	rt_store st;
	rt_store_init(&st);
	bool ok = true;
	for (int i = 0; ok && i < s->n; i++)
		if (!s->t[i].trainable) {
			size_t len = strlen(s->t[i].name);
			if (len > 4 && strcmp(s->t[i].name + len - 4, ".mom") == 0)
				continue;
			ok = rt_store_add_copy(&st, &s->t[i], e);
		}
	ok = ok && rt_store_save_dir(&st, dir, RT_DIR_STATE, model, e);
	rt_store_free(&st);
	return ok;
}

/* --train-steps: K optimiser steps on the batch, then the whole store. */
static int train_steps(rt_exec *ex, rt_store *store, int64_t steps, double lr, const char *dir,
	const char *model)
{
	rt_err e;
	const ir_type *t;
	void *rate = rt_exec_input(ex, "lr", &t);
	if (t->dtype == IR_F32)
		*(float *)rate = (float)lr;
	else
		*(double *)rate = lr;
	for (int64_t s = 0; s < steps; s++) {
		if (!rt_exec_run(ex, &e))
			return rt_exec_fault(ex) ? cli_error("%s, step %lld", e.msg, (long long)s + 1)
				: cli_error("%s", e.msg);
		const void *loss = rt_exec_output(ex, "loss", &t);
		printf("step %lld loss %.9g\n", (long long)s + 1,
			t->dtype == IR_F32 ? (double)*(const float *)loss : *(const double *)loss);
	}
	if (!rt_store_save_dir(store, dir, RT_DIR_PARAMS, model, &e))
		return cli_error("%s", e.msg);
	return EXIT_OK;
}

int cmd_grad(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc grad", argc, argv);
	const char *spec = NULL, *params = NULL, *xpath = NULL, *ypath = NULL, *out = NULL, *state_out = NULL;
	const char *val, *params_out = NULL;
	ir_dtype dt = IR_F32;
	int64_t steps = 0, max_memory = -1, threads = 2;
	double lr = -1;
	bool check_numerics = false;
	cli_engine_kind engine_kind = CLI_ENGINE_JIT;
	const char *cpu = NULL;
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.optimizer = false;
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
		case OPT_INPUT: xpath = val; break;
		case OPT_LABELS: ypath = val; break;
		case OPT_OUT: out = val; break;
		case OPT_STATE_OUT: state_out = val; break;
		case OPT_STEPS:
			if (!cli_parse_int(a.cmd, "--train-steps", val, 1, 1000000, &steps))
				return EXIT_USAGE;
			break;
		case OPT_LR: {
			char *end;
			lr = strtod(val, &end);
			if (!*val || *end || !(lr > 0 && lr < 1e6))
				return cli_usage_error(a.cmd, "--lr must be a positive number, not '%s'", val);
			break;
		}
		case OPT_PARAMS_OUT: params_out = val; break;
		case OPT_CHECK_NUMERICS: check_numerics = true; break;
		case OPT_MAX_MEMORY:
			if (!cli_parse_max_memory(a.cmd, val, &max_memory))
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
		case OPT_THREADS:
			if (!cli_parse_int(a.cmd, "--threads", val, 1, 256, &threads))
				return EXIT_USAGE;
			break;
		case OPT_DTYPE:
			if (!cli_parse_dtype(a.cmd, val, &dt))
				return EXIT_USAGE;
			break;
		case OPT_STRATEGY:
			if (!cli_parse_strategy(a.cmd, val, &ctx.strategy))
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
	const char *missing = !params ? "--params DIR" : !xpath ? "--input X.npy" : !ypath ? "--labels Y.npy"
		: steps ? (!params_out ? "--params-out DIR" : NULL) : !out ? "--out DIR" : NULL;
	if (missing)
		return cli_usage_error(a.cmd, "missing %s", missing);
	if (steps && out)
		return cli_usage_error(a.cmd, "--train-steps writes --params-out, not gradients: drop --out");
	if (!steps && (params_out || lr > 0))
		return cli_usage_error(a.cmd, "--params-out and --lr go with --train-steps");
	if (state_out && rt_dir_same(steps ? params_out : out, state_out))
		return cli_usage_error(a.cmd, "%s and --state-out name the same directory", steps ? "--params-out" : "--out");
	int ready = cli_engine_check(a.cmd, engine_kind, cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(a.cmd, &popts);
	if (ready != EXIT_OK)
		return ready;
	ctx.optimizer = steps > 0;
	cli_engine engine;
	cli_engine_init(&engine, engine_kind, (int)threads, cpu);
	cli_engine_plan(&engine, &ctx);

	int status = EXIT_USER;
	rt_npy x = {0}, y = {0};
	rt_store store;
	rt_store_init(&store);
	rt_exec *ex = NULL;
	ir_graph *g = NULL;
	rt_dir d;
	rt_err e;
	if (!cli_model_load(&m, spec) || !read_batch(&m, xpath, ypath, &x, &y))
		goto done;
	/* Fail now on an output that cannot be written, not after the work. */
	const char *dirs[3] = {steps ? params_out : out, state_out, NULL};
	const rt_dir_kind kinds[2] = {steps ? RT_DIR_PARAMS : RT_DIR_GRADIENTS, RT_DIR_STATE};
	for (int i = 0; dirs[i]; i++) {
		if (!rt_dir_check(dirs[i], kinds[i], &e)) {
			cli_error("%s", e.msg);
			goto done;
		}
	}
	g = cli_model_graph(&m, dt, FE_LOWER_TRAIN, &ctx, &popts);
	if (g && cli_pipeline_cut(a.cmd, &popts)) {
		status = EXIT_OK;
		goto done;
	}
	if (!g || !cli_check_max_memory(max_memory, &g, 1))
		goto done;
	if (!rt_store_load(&store, g, params, true, &e)) {
		cli_error("%s", e.msg);
		goto done;
	}
	if (!(ex = cli_engine_exec(&engine, g, &store)))
		goto done;
	if (!fill_input(ex, "x", &x, xpath) || !fill_input(ex, "labels", &y, ypath))
		goto done;
	rt_exec_check_numerics(ex, check_numerics);
	if (steps) {
		status = train_steps(ex, &store, steps, lr > 0 ? lr : m.spec.lr_list[0], params_out, m.spec.name);
		goto done;
	}
	if (!rt_exec_run(ex, &e) || !rt_dir_begin(&d, out, RT_DIR_GRADIENTS, m.spec.name, &e)) {
		cli_error("%s", e.msg);
		goto done;
	}
	if (!write_grads(g, ex, &d, &e)) {
		rt_dir_abort(&d);
		cli_error("%s", e.msg);
		goto done;
	}
	if (!rt_dir_commit(&d, &e)) {
		cli_error("%s", e.msg);
		goto done;
	}
	if (state_out && !write_state(&store, state_out, m.spec.name, &e)) {
		cli_error("%s", e.msg);
		goto done;
	}
	status = EXIT_OK;
done:
	rt_exec_free(ex);
	rt_store_free(&store);
	rt_npy_free(&x);
	rt_npy_free(&y);
	ir_graph_free(g);
	ps_ctx_free(&ctx);
	cli_model_free(&m);
	cli_engine_free(&engine);
	return status;
}
