/* cmd_train.c: `revc train` trains a model on real or synthetic data, with
 * progress, evaluation and crash-safe checkpoints, and ends with a summary. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"revc train SPEC|FILE.ir [--data fashion-mnist[:DIR] | cifar10:DIR | synthetic] [--epochs E | --steps N]\n"
	"                  [--set KEY=VALUE ...] [--threads N] [--save DIR] [--save-every N]\n"
	"                  [--resume DIR] [--eval-every N] [--json] [--strategy NAME] [--dtype f32|f64]\n"
	"                  [--engine interp|jit] [--cpu NAME] [--check-numerics] [--max-memory SIZE]\n"
	"                  [pass options]";
static const char about[] =
	"Trains SPEC with its optimiser (momentum SGD or AdamW, docs/model.md) on the\n"
	"spec's dataset or --data, then evaluates on the test split with the running\n"
	"statistics.  Progress goes to stderr (a bar on a terminal, plain lines\n"
	"otherwise; JSON lines on stdout with --json); the summary gives the final\n"
	"train loss, test accuracy, images/s and seconds a step (of the wall time less\n"
	"the evaluations), the arena planned (and what store would need), the process\n"
	"RSS and wall time.  Checkpoints (--save) are directories\n"
	"of .npy files replaced atomically; --resume continues one exactly, bit for\n"
	"bit.\n"
	"\n"
	"A checkpoint holds NAME.npy for every parameter, running statistic and\n"
	"optimiser buffer, step.npy, data_seed.npy and revc-manifest.txt, which marks\n"
	"it as revc's and lists them.  --save DIR replaces only such a directory or an\n"
	"empty one, and refuses anything else (a directory with other files in it,\n"
	"'.', a mount point) before training.  --resume loads every tensor the model\n"
	"needs, with its shape, and ignores the others (a checkpoint of a deeper\n"
	"model resumes a shallower one).  SIGINT or SIGTERM stops at the end of the\n"
	"step (a checkpoint being written is finished first), keeps the last\n"
	"checkpoint, and exits with status 130 or 143.  The pass options apply to the\n"
	"step's pipeline and to the evaluation graph's (its dumps: eval-NN-PASS.ir);\n"
	"with --stop-after or --passes revc train builds and dumps the graphs and exits\n"
	"without training.\n"
	"\n"
	"FILE.ir is a forward graph in revc's IR with its couplings marked and its\n"
	"training settings (a train { ... } block: docs/ir.md), such as `revc dump\n"
	"SPEC` prints: it trains exactly as the spec, in the graph's dtype.";

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
	CLI_BUDGET_OPT,
	{"dtype", 0, "f32|f64", "precision (default f32)"},
	CLI_ENGINE_OPT,
	CLI_CPU_OPT,
	CLI_CHECK_NUMERICS_OPT,
	CLI_MAX_MEMORY_OPT,
	CLI_SET_OPT,
	CLI_DP_OPTS, /* (bucket) */
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_DATA, OPT_EPOCHS, OPT_STEPS, OPT_THREADS, OPT_SAVE, OPT_SAVE_EVERY, OPT_RESUME,
	OPT_EVAL_EVERY, OPT_JSON, OPT_STRATEGY, OPT_BUDGET, OPT_DTYPE, OPT_ENGINE, OPT_CPU, OPT_CHECK_NUMERICS, OPT_MAX_MEMORY,
	OPT_SET, OPT_BUCKET, OPT_OVERLAP, OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

typedef struct {
	cli_progress progress;
	const revc_model *model;
	const revc_dataset *train, *test;
	bool json;
} train_user;

static void on_start(void *u, int64_t start, int64_t total)
{
	const train_user *t = u;
	if (!t->json && revc_world_size() > 1) /* (mpi) */
		fprintf(stderr, "revc train: %s on %s (%lld train / %lld test images), %lld steps of %d processes x %lld\n",
			revc_model_name(t->model), revc_dataset_name(t->train), (long long)revc_dataset_count(t->train),
			(long long)revc_dataset_count(t->test), (long long)(total - start), revc_world_size(),
			(long long)revc_model_batch(t->model));
	else if (!t->json)
		fprintf(stderr, "revc train: %s on %s (%lld train / %lld test images), %lld steps of %lld\n",
			revc_model_name(t->model), revc_dataset_name(t->train), (long long)revc_dataset_count(t->train),
			(long long)revc_dataset_count(t->test), (long long)(total - start), (long long)revc_model_batch(t->model));
}

static void on_step(void *u, const revc_progress *p) { cli_progress_step(&((train_user *)u)->progress, p); }
static void on_eval(void *u, int64_t s, double l, double a) { cli_progress_eval(&((train_user *)u)->progress, s, l, a); }
static void on_save(void *u, int64_t s, const char *d) { cli_progress_save(&((train_user *)u)->progress, s, d); }
static bool stop(void *u) { (void)u; return cli_signal_caught() != 0; }

/* The one line for a run stopped by a signal; returns 128 + the signal. */
static int interrupted(const revc_train_result *r, cli_progress *p, bool json)
{
	int sig = cli_signal_caught();
	long long done = (long long)(r->start_step + r->steps);
	if (json) {
		printf("{\"event\":\"interrupted\",\"signal\":\"%s\",\"step\":%lld,\"checkpoint_step\":%lld}\n",
			cli_signal_name(sig), done, (long long)r->saved_step);
		fflush(stdout);
	}
	cli_progress_break(p);
	fprintf(stderr, "revc train: interrupted by %s after step %lld of %lld; %s\n", cli_signal_name(sig), done,
		(long long)r->total_steps, r->kept[0] ? r->kept : "nothing was saved (no --save)");
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
static int64_t store_arena(revc_model *m, const revc_options *o)
{
	revc_options so = *o;
	so.dump_after = so.dump_dir = so.stop_after = so.passes = NULL;
	so.verify_each = false;
	revc_memory r;
	revc_error *err = NULL;
	if (revc_memory_plan(m, REVC_STORE, &so, &r, &err))
		return r.arena_bytes;
	revc_error_free(err);
	return -1;
}

static void summary(revc_model *m, const revc_options *o, const revc_train_result *r, const revc_dataset *test,
	bool json)
{
	int64_t batch = r->ranks * revc_model_batch(m); /* (the global batch) */
	/* The speed is the training's: the wall time less the evaluations. */
	double train_s = r->seconds - r->eval_seconds;
	double ips = train_s > 0 ? (double)(r->steps * batch) / train_s : 0;
	double step_s = r->steps ? train_s / (double)r->steps : 0;
	const char *strategy = revc_strategy_name(o->strategy);
	revc_memory mem;
	int64_t arena = revc_model_memory(m, &mem, NULL) ? mem.arena_bytes : 0;
	int64_t store_bytes = o->strategy == REVC_STORE ? arena : store_arena(m, o);
	if (json) {
		printf("{\"event\":\"summary\",\"model\":\"");
		cli_json_string(stdout, revc_model_name(m));
		printf("\",");
		cli_model_engine_json(m);
		printf("\"steps\":%lld,\"total_steps\":%lld,\"batch\":%lld,\"strategy\":\"%s\","
		       "\"train_loss\":%.6g,\"train_accuracy\":%.6g,\"test_loss\":%.6g,\"test_accuracy\":%.6g,"
		       "\"images_per_sec\":%.1f,\"step_seconds\":%.6f,\"arena_bytes\":%lld,",
			(long long)r->steps, (long long)r->total_steps, (long long)batch, strategy, r->train_loss,
			r->train_accuracy, r->test_loss, r->test_accuracy, ips, step_s, (long long)arena);
		if (store_bytes >= 0)
			printf("\"store_arena_bytes\":%lld,", (long long)store_bytes);
		else
			printf("\"store_arena_bytes\":null,");
		if (r->ranks > 1) /* (mpi) */
			printf("\"ranks\":%d,\"comm_seconds\":%.6f,", r->ranks, r->comm_seconds);
		printf("\"eval_seconds\":%.3f,\"compile_seconds\":%.3f,\"rss_mib\":%.1f,\"wall_seconds\":%.3f}\n",
			r->eval_seconds, r->compile_seconds, cli_rss_mib(), r->seconds);
		return;
	}
	printf("revc train: %s, steps %lld..%lld of %lld, batch %lld, strategy %s, engine %s\n", revc_model_name(m),
		(long long)r->start_step + 1, (long long)r->total_steps, (long long)r->total_steps,
		(long long)batch, strategy, revc_model_engine_label(m));
	printf("  train loss      %.4f (mean of the last window), train accuracy %.2f%%\n", r->train_loss,
		100 * r->train_accuracy);
	if (r->evaluated)
		printf("  test            loss %.4f, accuracy %.2f%% (%lld images)\n", r->test_loss,
			100 * r->test_accuracy, (long long)revc_dataset_count(test));
	printf("  speed           %.1f images/s, %.4f s/step\n", ips, step_s);
	char b1[32], b2[32], store[96] = "";
	revc_format_bytes(b1, sizeof b1, arena);
	revc_format_bytes(b2, sizeof b2, store_bytes);
	if (strcmp(strategy, "store") != 0 && store_bytes >= 0 && arena > 0)
		snprintf(store, sizeof store, " (store would need %s, %.2fx)", b2, (double)store_bytes / (double)arena);
	printf("  memory          %s arena planned under %s%s; process RSS %.1f MiB\n", b1, strategy, store,
		cli_rss_mib());
	if (r->ranks > 1) /* (mpi) */
		printf("  processes       %d x batch %lld; blocked in communication %.2f s (%.1f%% of the time)\n",
			r->ranks, (long long)revc_model_batch(m), r->comm_seconds,
			r->seconds > 0 ? 100 * r->comm_seconds / r->seconds : 0.0);
	printf("  wall time       %.1f s (evaluation %.1f s)", r->seconds, r->eval_seconds);
	if (r->compile_seconds > 0) /* (the JIT) */
		printf("; compiling before it %.1f s", r->compile_seconds);
	printf("\n");
}

/* After the options: the model, its data and the run. */
static int train(const char *spec, const cli_sets *sets, const revc_options *o, const char *data,
	revc_train_config *c, bool json)
{
	int status = EXIT_USER;
	revc_error *err = NULL;
	train_user u = {.json = json};
	revc_train_result r;
	revc_model *m = cli_model_open("revc train", spec, sets, &status);
	if (!m)
		return status;
	if (!revc_model_has_settings(m, &err))
		goto done;
	/* Fail now, not after an hour of training. */
	if (c->save_dir && !revc_dir_check(c->save_dir, REVC_DIR_CHECKPOINT, "--save", &err))
		goto done;
	/* The model first: its errors (and --max-memory) before loading data. */
	bool ok = revc_model_compile(m, o, &err);
	cli_print_dumps(m);
	if (ok && revc_model_cut(m)) {
		cli_pipeline_cut("revc train", o);
		status = EXIT_OK;
		goto done;
	}
	if (!ok || interrupted_early(json, &status) || !(u.train = revc_dataset_load(m, data, true, &err)) ||
	    !(u.test = revc_dataset_load(m, data, false, &err)) || interrupted_early(json, &status) ||
	    !revc_model_prepare(m, &err) || interrupted_early(json, &status))
		goto done;
	u.model = m;
	cli_progress_init(&u.progress, json, revc_world_size() * revc_model_batch(m));
	c->train = u.train;
	c->test = u.test;
	c->user = &u;
	if (!revc_train_run(m, c, &r, &err))
		goto done;
	if (r.stopped) { /* (a signal in the last step's work: the run is complete) */
		status = interrupted(&r, &u.progress, json);
	} else {
		summary(m, o, &r, u.test, json);
		status = EXIT_OK;
	}
done:
	if (err)
		status = cli_revc_error(err);
	revc_dataset_free((revc_dataset *)u.train);
	revc_dataset_free((revc_dataset *)u.test);
	revc_model_free(m);
	return status;
}

/* The options into c, o and the rest; -1 when the command goes on, else
 * its exit status. */
static int parse(int argc, char **argv, const char **spec, const char **data, bool *json, cli_sets *sets,
	revc_options *o, revc_train_config *c)
{
	cli_args a;
	cli_args_init(&a, "revc train", argc, argv);
	const char *val;
	for (int k; (k = cli_next(&a, opts, &val)) != CLI_END;) {
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (*spec)
				return cli_usage_error(a.cmd, "unexpected argument '%s'", val);
			*spec = val;
			break;
		case OPT_DATA: *data = val; break;
		case OPT_EPOCHS:
			if (!cli_parse_int(a.cmd, "--epochs", val, 1, REVC_INT_MAX, &c->epochs))
				return EXIT_USAGE;
			break;
		case OPT_STEPS:
			if (!cli_parse_int(a.cmd, "--steps", val, 1, REVC_INT_MAX, &c->steps))
				return EXIT_USAGE;
			break;
		case OPT_SAVE: c->save_dir = val; break;
		case OPT_SAVE_EVERY:
			if (!cli_parse_int(a.cmd, "--save-every", val, 1, REVC_INT_MAX, &c->save_every))
				return EXIT_USAGE;
			break;
		case OPT_RESUME: c->resume = val; break;
		case OPT_EVAL_EVERY:
			if (!cli_parse_int(a.cmd, "--eval-every", val, 1, REVC_INT_MAX, &c->eval_every))
				return EXIT_USAGE;
			break;
		case OPT_JSON: *json = true; break;
		case OPT_SET:
			if (!cli_sets_add(sets, a.cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (k < OPT_PASS0 && cli_revc_option(a.cmd, opts[k].name, val, o) < 0)
				return EXIT_USAGE;
			if (k >= OPT_PASS0 && !cli_pass_option(k - OPT_PASS0, val, o))
				return EXIT_OK;
		}
	}
	if (!*spec)
		return cli_usage_error(a.cmd, "missing SPEC or FILE.ir");
	if (c->epochs > 0 && c->steps > 0)
		return cli_usage_error(a.cmd, "give --epochs or --steps, not both");
	if (c->save_every && !c->save_dir)
		return cli_usage_error(a.cmd, "--save-every needs --save DIR");
	int ready = cli_engine_check(a.cmd, o->engine, o->cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(a.cmd, o);
	if (ready != EXIT_OK)
		return ready;
	o->no_run = true; /* (prepared once the data is in) */
	return -1;
}

int cmd_train(int argc, char **argv)
{
	const char *spec = NULL, *data = NULL;
	bool json = false;
	cli_sets sets = {0};
	revc_options o;
	revc_options_init(&o);
	revc_train_config c = {.on_start = on_start, .on_step = on_step, .on_eval = on_eval, .on_save = on_save,
		.stop = stop};
	int status = parse(argc, argv, &spec, &data, &json, &sets, &o, &c);
	if (status >= 0)
		return status;
	cli_signal_catch();
	return train(spec, &sets, &o, data, &c, json);
}
