/* cmd_train.c: `revc train` trains a model on real or synthetic data, with
 * progress, evaluation and crash-safe checkpoints, and ends with a summary. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rt.h"

static const char usage[] =
	"revc train SPEC [--data fashion-mnist[:DIR] | cifar10:DIR | synthetic] [--epochs E | --steps N]\n"
	"                  [--set KEY=VALUE ...] [--threads N] [--save DIR] [--save-every N]\n"
	"                  [--resume DIR] [--eval-every N] [--json] [--strategy NAME] [--dtype f32|f64]\n"
	"                  [--engine interp|jit] [--cpu NAME] [--check-numerics] [--max-memory SIZE]\n"
	"                  [pass options]";
static const char about[] =
	"Trains SPEC with momentum SGD (docs/model.md) on the spec's dataset or --data, then\n"
	"evaluates on the test split with the running statistics.  Progress goes to\n"
	"stderr (a bar on a terminal, plain lines otherwise; JSON lines on stdout with\n"
	"--json); the summary gives the final train loss, test accuracy, images/s, the\n"
	"arena planned (and what store would need), the process RSS and wall time.  Checkpoints (--save) are\n"
	"directories of .npy files replaced atomically; --resume continues one exactly,\n"
	"bit for bit.\n"
	"\n"
	"A checkpoint holds NAME.npy for every parameter, running statistic and\n"
	"momentum buffer, step.npy, data_seed.npy and revc-manifest.txt, which marks\n"
	"it as revc's and lists them.  --save DIR replaces only such a directory or an\n"
	"empty one, and refuses anything else (a directory with other files in it,\n"
	"'.', a mount point) before training.  --resume loads every tensor the model\n"
	"needs, with its shape, and ignores the others (a checkpoint of a deeper\n"
	"model resumes a shallower one).  SIGINT or SIGTERM stops at the end of the\n"
	"step (a checkpoint being written is finished first), keeps the last\n"
	"checkpoint, and exits with status 130 or 143.  The pass options apply to the\n"
	"step's pipeline and to the evaluation graph's (its dumps: eval-NN-PASS.ir);\n"
	"with --stop-after or --passes revc train builds and dumps the graphs and exits\n"
	"without training.";

static const cli_opt opts[] = {
	{"data", 0, "DATA", "fashion-mnist[:DIR], cifar10:DIR or synthetic (default: the spec's)"},
	{"epochs", 0, "E", "train E epochs (overrides the spec)"},
	{"steps", 0, "N", "train N steps in all (overrides the spec)"},
	{"threads", 0, "N", "threads to use (default 2)"},
	{"save", 0, "DIR", "write a checkpoint to DIR (at the end, and every --save-every steps)"},
	{"save-every", 0, "N", "checkpoint every N steps"},
	{"resume", 0, "DIR", "continue from the checkpoint in DIR"},
	{"eval-every", 0, "N", "evaluate on the test split every N steps (and at the end)"},
	{"json", 0, NULL, "print JSON lines on stdout instead of text"},
	CLI_STRATEGY_OPT,
	{"dtype", 0, "f32|f64", "precision (default f32)"},
	CLI_ENGINE_OPT,
	CLI_CPU_OPT,
	CLI_CHECK_NUMERICS_OPT,
	CLI_MAX_MEMORY_OPT,
	CLI_SET_OPT,
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_DATA, OPT_EPOCHS, OPT_STEPS, OPT_THREADS, OPT_SAVE, OPT_SAVE_EVERY, OPT_RESUME,
	OPT_EVAL_EVERY, OPT_JSON, OPT_STRATEGY, OPT_DTYPE, OPT_ENGINE, OPT_CPU, OPT_CHECK_NUMERICS, OPT_MAX_MEMORY,
	OPT_SET, OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

static double lr_at(void *user, int64_t step)
{
	const cli_model *m = user;
	return fe_spec_lr_at(&m->spec, step);
}

typedef struct {
	cli_progress progress;
	const cli_model *model;
} train_user;

static double lr_of(void *user, int64_t step)
{
	return lr_at((void *)((train_user *)user)->model, step);
}

static void on_step(void *u, const rt_train_progress *p) { cli_progress_step(&((train_user *)u)->progress, p); }
static void on_eval(void *u, int64_t s, double l, double a) { cli_progress_eval(&((train_user *)u)->progress, s, l, a); }
static void on_save(void *u, int64_t s, const char *d) { cli_progress_save(&((train_user *)u)->progress, s, d); }
static bool stop(void *u) { (void)u; return cli_signal_caught() != 0; }

/* The one line for a run stopped by a signal; returns 128 + the signal. */
static int interrupted(const rt_train_cfg *c, const rt_train_result *r, cli_progress *p, bool json)
{
	int sig = cli_signal_caught();
	long long done = (long long)(c->start_step + r->steps);
	char where[RT_PATH_MAX + 64];
	if (!rt_train_kept(c, r, where, sizeof where))
		snprintf(where, sizeof where, "nothing was saved (no --save)");
	if (json) {
		printf("{\"event\":\"interrupted\",\"signal\":\"%s\",\"step\":%lld,\"checkpoint_step\":%lld}\n",
			cli_signal_name(sig), done, (long long)r->saved_step);
		fflush(stdout);
	}
	cli_progress_break(p);
	fprintf(stderr, "revc train: interrupted by %s after step %lld of %lld; %s\n", cli_signal_name(sig), done,
		(long long)c->total_steps, where);
	return 128 + sig;
}

/* A signal caught while loading, compiling or reading data: true, with the
 * one line said and *status 128 + the signal; nothing has been written. */
static bool interrupted_early(bool json, int *status)
{
	int sig = cli_signal_caught();
	if (!sig)
		return false;
	if (json) {
		printf("{\"event\":\"interrupted\",\"signal\":\"%s\",\"step\":null,\"checkpoint_step\":0}\n",
			cli_signal_name(sig));
		fflush(stdout);
	}
	fprintf(stderr, "revc train: interrupted by %s before training started; nothing was written\n",
		cli_signal_name(sig));
	*status = 128 + sig;
	return true;
}

/* The arena the step would plan under store (what revnet saves), or -1
 * when it cannot be planned: the summary then leaves the comparison out.
 * The whole pipeline, whatever the pass options (docs/ir.md). */
static int64_t store_arena(const cli_model *m, ir_dtype dt, cli_engine *e)
{
	ps_ctx sctx;
	ps_ctx_init(&sctx);
	sctx.strategy = PS_STORE;
	cli_engine_plan(e, &sctx);
	ir_graph *g = cli_model_plan(m, dt, FE_LOWER_TRAIN, &sctx, &(ps_options){0});
	int64_t bytes = g ? ps_arena_bytes(g) : -1;
	ir_graph_free(g);
	ps_ctx_free(&sctx);
	return bytes;
}

static void summary(const cli_model *m, const rt_train_cfg *c, const rt_train_result *r,
	int64_t batch, int64_t arena, int64_t store_bytes, bool json, const char *strategy, const cli_engine *e)
{
	double ips = r->seconds > 0 ? (double)(r->steps * batch) / r->seconds : 0;
	double step_s = r->steps ? r->seconds / (double)r->steps : 0;
	char engine[96];
	cli_engine_label(e, engine, sizeof engine);
	if (json) {
		printf("{\"event\":\"summary\",\"model\":\"");
		cli_json_string(stdout, m->spec.name);
		printf("\",");
		cli_engine_json(e);
		printf("\"steps\":%lld,\"total_steps\":%lld,\"batch\":%lld,\"strategy\":\"%s\","
		       "\"train_loss\":%.6g,\"train_accuracy\":%.6g,\"test_loss\":%.6g,\"test_accuracy\":%.6g,"
		       "\"images_per_sec\":%.1f,\"step_seconds\":%.6f,\"arena_bytes\":%lld,",
			(long long)r->steps, (long long)c->total_steps, (long long)batch, strategy, r->train_loss,
			r->train_accuracy, r->test_loss, r->test_accuracy, ips, step_s, (long long)arena);
		if (store_bytes >= 0)
			printf("\"store_arena_bytes\":%lld,", (long long)store_bytes);
		else
			printf("\"store_arena_bytes\":null,");
		printf("\"rss_mib\":%.1f,\"wall_seconds\":%.3f}\n", cli_rss_mib(), r->seconds);
		return;
	}
	printf("revc train: %s, steps %lld..%lld of %lld, batch %lld, strategy %s, engine %s\n", m->spec.name,
		(long long)c->start_step + 1, (long long)c->total_steps, (long long)c->total_steps,
		(long long)batch, strategy, engine);
	printf("  train loss      %.4f (mean of the last window), train accuracy %.2f%%\n", r->train_loss,
		100 * r->train_accuracy);
	if (r->evaluated)
		printf("  test            loss %.4f, accuracy %.2f%% (%lld images)\n", r->test_loss,
			100 * r->test_accuracy, (long long)c->test->n);
	printf("  speed           %.1f images/s, %.4f s/step\n", ips, step_s);
	char b1[32], b2[32], store[96] = "";
	cli_human_bytes(b1, sizeof b1, arena);
	cli_human_bytes(b2, sizeof b2, store_bytes);
	if (strcmp(strategy, "store") != 0 && store_bytes >= 0 && arena > 0)
		snprintf(store, sizeof store, " (store would need %s, %.2fx)", b2, (double)store_bytes / (double)arena);
	printf("  memory          %s arena planned under %s%s; process RSS %.1f MiB\n", b1, strategy, store,
		cli_rss_mib());
	printf("  wall time       %.1f s\n", r->seconds);
}

int cmd_train(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc train", argc, argv);
	const char *spec = NULL, *data = NULL, *save = NULL, *resume = NULL, *val;
	int64_t epochs = -1, steps = -1, threads = 2, save_every = 0, eval_every = 0, max_memory = -1;
	bool json = false, check_numerics = false;
	ir_dtype dt = IR_F32;
	cli_engine_kind engine_kind = CLI_ENGINE_JIT;
	const char *cpu = NULL;
	ps_ctx ctx;
	ps_ctx_init(&ctx);
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
		case OPT_DATA: data = val; break;
		case OPT_EPOCHS:
			if (!cli_parse_int(a.cmd, "--epochs", val, 1, FE_INT_MAX, &epochs))
				return EXIT_USAGE;
			break;
		case OPT_STEPS:
			if (!cli_parse_int(a.cmd, "--steps", val, 1, FE_INT_MAX, &steps))
				return EXIT_USAGE;
			break;
		case OPT_THREADS:
			if (!cli_parse_int(a.cmd, "--threads", val, 1, 256, &threads))
				return EXIT_USAGE;
			break;
		case OPT_SAVE: save = val; break;
		case OPT_SAVE_EVERY:
			if (!cli_parse_int(a.cmd, "--save-every", val, 1, FE_INT_MAX, &save_every))
				return EXIT_USAGE;
			break;
		case OPT_RESUME: resume = val; break;
		case OPT_EVAL_EVERY:
			if (!cli_parse_int(a.cmd, "--eval-every", val, 1, FE_INT_MAX, &eval_every))
				return EXIT_USAGE;
			break;
		case OPT_JSON: json = true; break;
		case OPT_STRATEGY:
			if (!cli_parse_strategy(a.cmd, val, &ctx.strategy))
				return EXIT_USAGE;
			break;
		case OPT_DTYPE:
			if (!cli_parse_dtype(a.cmd, val, &dt))
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
		case OPT_SET:
			if (!cli_model_add_set(&m, a.cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		case OPT_CHECK_NUMERICS: check_numerics = true; break;
		case OPT_MAX_MEMORY:
			if (!cli_parse_max_memory(a.cmd, val, &max_memory))
				return EXIT_USAGE;
			break;
		default:
			if (!cli_pass_option(k - OPT_PASS0, val, &popts))
				return EXIT_OK;
		}
	}
	if (!spec)
		return cli_usage_error(a.cmd, "missing SPEC");
	if (epochs > 0 && steps > 0)
		return cli_usage_error(a.cmd, "give --epochs or --steps, not both");
	if (save_every && !save)
		return cli_usage_error(a.cmd, "--save-every needs --save DIR");
	int ready = cli_engine_check(a.cmd, engine_kind, cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(a.cmd, &popts);
	if (ready != EXIT_OK)
		return ready;
	cli_engine engine;
	cli_engine_init(&engine, engine_kind, (int)threads, cpu);
	cli_signal_catch();

	int status = EXIT_USER;
	rt_dataset train = {0}, test = {0};
	rt_store store;
	rt_store_init(&store);
	ir_graph *step_g = NULL, *eval_g = NULL;
	rt_exec *step_x = NULL, *eval_x = NULL;
	ps_ctx ectx;
	ps_ctx_init(&ectx);
	ectx.optimizer = false;
	cli_engine_plan(&engine, &ctx);
	cli_engine_plan(&engine, &ectx);
	rt_err e;
	ps_options eopts;
	char eval_only[128];
	if (!cli_model_load(&m, spec))
		goto done;
	/* Fail now, not after an hour of training. */
	if (save && !rt_dir_check(save, RT_DIR_CHECKPOINT, &e)) {
		cli_error("--save: %s", e.msg);
		goto done;
	}
	/* The model first: its errors (and --max-memory) before loading data. */
	step_g = cli_model_graph(&m, dt, FE_LOWER_TRAIN, &ctx, &popts);
	eval_g = step_g ? cli_model_graph(&m, dt, FE_LOWER_EVAL, &ectx,
		cli_eval_options(&popts, &eopts, eval_only, sizeof eval_only)) : NULL;
	if (eval_g && cli_pipeline_cut(a.cmd, &popts)) {
		status = EXIT_OK;
		goto done;
	}
	if (!eval_g || !cli_check_max_memory(max_memory, (ir_graph *[]){step_g, eval_g}, 2))
		goto done;
	if (interrupted_early(json, &status))
		goto done;
	if (!data)
		data = m.spec.dataset;
	cli_budget budget = cli_data_budget(max_memory, (ir_graph *[]){step_g, eval_g}, 2);
	if (!cli_data_load(data, &m.spec, true, &budget, &train)
	    || !cli_data_load(data, &m.spec, false, &budget, &test))
		goto done;
	if (interrupted_early(json, &status))
		goto done;

	int64_t spe = train.n / m.spec.batch;
	if (spe < 1) {
		cli_error("%s has %lld training examples, fewer than one batch of %lld", data,
			(long long)train.n, (long long)m.spec.batch);
		goto done;
	}
	rt_train_cfg c = {.store = &store, .train = &train, .test = &test, .seed = (uint64_t)m.spec.seed,
		.lr_at = lr_of, .save_dir = save, .save_every = save_every, .eval_every = eval_every,
		.check_numerics = check_numerics, .model = m.spec.name, .stop = stop};
	c.total_steps = steps > 0 ? steps : epochs > 0 ? epochs * spe
		: m.spec.steps > 0 ? m.spec.steps : m.spec.epochs * spe;
	if (resume) {
		if (!rt_checkpoint_load(&store, step_g, resume, &c.start_step, &c.seed, &e)) {
			cli_error("cannot resume: %s", e.msg);
			goto done;
		}
		if (c.start_step >= c.total_steps) {
			cli_error("the checkpoint in %s is at step %lld, not before the last step %lld", resume,
				(long long)c.start_step, (long long)c.total_steps);
			goto done;
		}
	} else if (!rt_store_init_from_graph(&store, step_g, (uint64_t)m.spec.seed, &e)) {
		cli_error("%s", e.msg);
		goto done;
	}
	if (!(step_x = cli_engine_exec(&engine, step_g, &store)) || !(eval_x = cli_engine_exec(&engine, eval_g, &store)))
		goto done;
	if (interrupted_early(json, &status))
		goto done;
	c.step = step_x;
	c.eval = eval_x;
	int64_t window = c.total_steps / 20;
	c.report_every = window < 1 ? 1 : window > 100 ? 100 : window;
	train_user u = {.model = &m};
	cli_progress_init(&u.progress, json, m.spec.batch);
	c.user = &u;
	c.on_step = on_step;
	c.on_eval = on_eval;
	c.on_save = on_save;
	if (!json)
		fprintf(stderr, "revc train: %s on %s (%lld train / %lld test images), %lld steps of %lld\n",
			m.spec.name, data, (long long)train.n, (long long)test.n,
			(long long)(c.total_steps - c.start_step), (long long)m.spec.batch);
	rt_train_result r;
	if (!rt_train_run(&c, &r, &e)) {
		cli_error("%s", e.msg);
		goto done;
	}
	if (r.stopped) { /* (a signal in the last step's work: the run is complete) */
		status = interrupted(&c, &r, &u.progress, json);
		goto done;
	}
	int64_t arena = ps_arena_bytes(step_g);
	summary(&m, &c, &r, m.spec.batch, arena, ctx.strategy == PS_STORE ? arena : store_arena(&m, dt, &engine), json,
		ps_strategy_name(ctx.strategy), &engine);
	status = EXIT_OK;
done:
	rt_exec_free(step_x);
	rt_exec_free(eval_x);
	rt_store_free(&store);
	ir_graph_free(step_g);
	ir_graph_free(eval_g);
	rt_dataset_free(&train);
	rt_dataset_free(&test);
	ps_ctx_free(&ctx);
	ps_ctx_free(&ectx);
	cli_model_free(&m);
	cli_engine_free(&engine);
	return status;
}
