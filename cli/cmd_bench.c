/* cmd_bench.c: `revc bench` times training steps: median and min step time,
 * images/s, achieved GFLOP/s, peak memory and compile time; and, for
 * comparison, how fast cblas_sgemm alone runs the step's GEMMs. */
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "rt.h"
#include "tools.h"

static const char usage[] =
	"revc bench SPEC [--set KEY=VALUE ...] [--steps K] [--engine interp|jit] [--cpu NAME] [--strategy NAME]\n"
	"                  [--threads N] [--gemm] [--json] [--dump-llvm DIR] [--max-memory SIZE] [pass options]";
static const char about[] =
	"Builds SPEC's training step, runs one warm-up step and then K timed steps on\n"
	"random data, and reports the median and minimum step time, images/s, the\n"
	"achieved GFLOP/s (convolution and dense FLOPs over the median step), the\n"
	"planned arena and the process RSS, and the compile time.  --gemm also times\n"
	"cblas_sgemm alone on the step's GEMM shapes (the machine's ceiling for them)\n"
	"and gives the step's share of it.  The pass options apply to the step's\n"
	"pipeline; with --stop-after or --passes revc bench builds and dumps the step\n"
	"and exits without timing it.";

static const cli_opt opts[] = {
	{"steps", 0, "K", "timed steps (default 5)"},
	CLI_ENGINE_OPT,
	CLI_CPU_OPT,
	CLI_STRATEGY_OPT,
	{"threads", 0, "N", "threads (default 2)"},
	{"gemm", 0, NULL, "also measure cblas_sgemm alone on the step's GEMM shapes"},
	{"json", 0, NULL, "print one JSON object"},
	{"dump-llvm", 0, "DIR", "write each module's .ll before and after optimisation"},
	CLI_MAX_MEMORY_OPT,
	CLI_SET_OPT,
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_STEPS, OPT_ENGINE, OPT_CPU, OPT_STRATEGY, OPT_THREADS, OPT_GEMM, OPT_JSON, OPT_DUMP, OPT_MAX_MEMORY, OPT_SET,
	OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* What the command line asked for. */
typedef struct {
	const char *spec, *cpu, *dump;
	int64_t steps, threads, max_memory;
	bool json, gemm;
	cli_engine_kind kind;
	ps_strategy strategy;
	ps_options popts;
	cli_model m;
} bench_args;

/* The options; -1 when the command goes on, else its exit status. */
static int parse(cli_args *a, bench_args *o)
{
	const char *val;
	for (int k; (k = cli_next(a, opts, &val)) != CLI_END;) {
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (o->spec)
				return cli_usage_error(a->cmd, "unexpected argument '%s'", val);
			o->spec = val;
			break;
		case OPT_STEPS:
			if (!cli_parse_int(a->cmd, "--steps", val, 1, 100000, &o->steps))
				return EXIT_USAGE;
			break;
		case OPT_ENGINE:
			if (!cli_engine_parse(a->cmd, val, &o->kind))
				return EXIT_USAGE;
			break;
		case OPT_CPU:
			if (!cli_cpu_parse(a->cmd, val, &o->cpu))
				return EXIT_USAGE;
			break;
		case OPT_STRATEGY:
			if (!cli_parse_strategy(a->cmd, val, &o->strategy))
				return EXIT_USAGE;
			break;
		case OPT_THREADS:
			if (!cli_parse_int(a->cmd, "--threads", val, 1, 256, &o->threads))
				return EXIT_USAGE;
			break;
		case OPT_GEMM: o->gemm = true; break;
		case OPT_JSON: o->json = true; break;
		case OPT_DUMP: o->dump = val; break;
		case OPT_MAX_MEMORY:
			if (!cli_parse_max_memory(a->cmd, val, &o->max_memory))
				return EXIT_USAGE;
			break;
		case OPT_SET:
			if (!cli_model_add_set(&o->m, a->cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (!cli_pass_option(k - OPT_PASS0, val, &o->popts))
				return EXIT_OK;
		}
	}
	if (!o->spec)
		return cli_usage_error(a->cmd, "missing SPEC");
	int ready = cli_engine_check(a->cmd, o->kind, o->cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(a->cmd, &o->popts);
	if (ready != EXIT_OK)
		return ready;
	if (o->dump && !cli_make_dir(o->dump))
		return EXIT_USER;
	return -1;
}

/* What was measured. */
typedef struct {
	double compile, median, best, flops, gemm_s, rss, rss_base;
	int64_t arena;
	char cpu[64];
	bool native;
	bool cut;          /* the pipeline stopped early: nothing ran */
} bench_result;

/* Times steps runs of x after a warm-up (sorted into times[]). */
static bool time_steps(rt_exec *x, const bench_args *o, double *times)
{
	rt_err err;
	bool tty = !o->json && isatty(STDERR_FILENO);
	for (int64_t s = -1; s < o->steps; s++) {
		if (tty)
			fprintf(stderr, "\rrevc bench: step %lld/%lld", (long long)s + 1, (long long)o->steps);
		double s0 = cli_now();
		if (!rt_exec_run(x, &err)) {
			cli_error("%s", err.msg);
			return false;
		}
		if (s >= 0)
			times[s] = cli_now() - s0;
	}
	if (tty)
		fprintf(stderr, "\r\033[K");
	qsort(times, (size_t)o->steps, sizeof *times, by_value);
	return true;
}

/* Builds and compiles the step, then times it; EXIT_OK with *r filled (or
 * r->cut), else the exit status. */
static int measure(bench_args *o, cli_engine *e, bench_result *r)
{
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.strategy = o->strategy;
	cli_engine_plan(e, &ctx);
	int status = EXIT_USER;
	rt_store store;
	rt_store_init(&store);
	ir_graph *g = NULL;
	rt_exec *x = NULL;
	rt_err err;
	double *times = calloc((size_t)o->steps + 1, sizeof *times);
	if (!times)
		IR_DIE("out of memory");
	if (!(g = cli_model_graph(&o->m, IR_F32, FE_LOWER_TRAIN, &ctx, &o->popts)))
		goto done;
	if (cli_pipeline_cut("revc bench", &o->popts)) {
		r->cut = true;
		status = EXIT_OK;
		goto done;
	}
	if (!cli_check_max_memory(o->max_memory, &g, 1))
		goto done;
	if (!rt_store_init_from_graph(&store, g, (uint64_t)o->m.spec.seed, &err)) {
		cli_error("%s", err.msg);
		goto done;
	}
	double t0 = cli_now();
	if (!(x = cli_engine_exec(e, g, &store)))
		goto done;
	r->compile = cli_now() - t0;
	/* Random data; a tiny learning rate keeps the parameters sane. */
	drv_check_batch(x, (uint64_t)o->m.spec.seed, o->m.spec.classes);
	*(float *)rt_exec_input(x, "lr", NULL) = 1e-4f;
	if (!time_steps(x, o, times))
		goto done;
	r->median = times[o->steps / 2];
	r->best = times[0];
	drv_gemm_shape shapes[512];
	int ns = drv_gemm_shapes(g, shapes, 512);
	r->flops = drv_gemm_flops(shapes, ns);
	r->gemm_s = o->gemm ? drv_gemm_seconds(shapes, ns, (int)o->threads) : 0;
	r->arena = ps_arena_bytes(g);
	r->rss = cli_rss_mib();
	cli_engine_cpu(e, r->cpu, sizeof r->cpu, &r->native);
	status = EXIT_OK;
done:
	free(times);
	rt_exec_free(x);
	rt_store_free(&store);
	ir_graph_free(g);
	ps_ctx_free(&ctx);
	return status;
}

static void print_json(const bench_args *o, const cli_engine *e, const bench_result *r)
{
	printf("{\"model\":\"");
	cli_json_string(stdout, o->m.spec.name);
	printf("\",\"engine\":\"%s\",\"strategy\":\"%s\",\"threads\":%lld,\"batch\":%lld,\"steps\":%lld,"
	       "\"median_step_seconds\":%.6f,\"min_step_seconds\":%.6f,\"images_per_sec\":%.2f,"
	       "\"gflop_per_step\":%.3f,\"gflops\":%.2f,\"arena_bytes\":%lld,\"rss_mib\":%.1f,"
	       "\"rss_increase_mib\":%.1f,"
	       "\"compile_seconds\":%.4f,\"kernels\":%d,\"kernel_calls\":%d",
		cli_engine_name(e), ps_strategy_name(o->strategy), (long long)o->threads, (long long)o->m.spec.batch,
		(long long)o->steps, r->median, r->best, (double)o->m.spec.batch / r->median, r->flops / 1e9,
		r->flops / r->median / 1e9, (long long)r->arena, r->rss, r->rss - r->rss_base, r->compile,
		e->stats.kernels, e->stats.calls);
	if (o->gemm)
		printf(",\"gemm_only_seconds\":%.6f,\"gemm_only_gflops\":%.2f,\"share_of_gemm\":%.4f",
			r->gemm_s, r->flops / r->gemm_s / 1e9, r->gemm_s / r->median);
	if (o->kind == CLI_ENGINE_JIT)
		printf(",\"cpu\":\"%s\",\"cpu_native\":%s", r->cpu, r->native ? "true" : "false");
	else
		printf(",\"cpu\":null,\"cpu_native\":null");
	printf(",\"blas_core\":\"%s\"}\n", rt_blas_core());
}

static void print_text(const bench_args *o, const cli_engine *e, const bench_result *r)
{
	printf("revc bench: %s, batch %lld, strategy %s, engine %s, %lld threads\n", o->m.spec.name,
		(long long)o->m.spec.batch, ps_strategy_name(o->strategy), cli_engine_name(e), (long long)o->threads);
	if (o->kind == CLI_ENGINE_JIT)
		printf("  machine       code for %s%s, OpenBLAS %s kernels\n", r->cpu, r->native ? " (native)" : "",
			rt_blas_core());
	else
		printf("  machine       OpenBLAS %s kernels\n", rt_blas_core());
	printf("  step time     median %.4f s, min %.4f s over %lld steps\n", r->median, r->best, (long long)o->steps);
	printf("  throughput    %.1f images/s\n", (double)o->m.spec.batch / r->median);
	printf("  compute       %.2f GFLOP per step (convolutions and dense), %.1f GFLOP/s\n", r->flops / 1e9,
		r->flops / r->median / 1e9);
	if (o->gemm)
		printf("  sgemm alone   %.4f s for the same GEMMs, %.1f GFLOP/s: the step reaches %.0f%% of it\n",
			r->gemm_s, r->flops / r->gemm_s / 1e9, 100 * r->gemm_s / r->median);
	printf("  memory        planned arena %.2f MiB, process RSS %.1f MiB (+%.1f MiB over the start)\n",
		(double)r->arena / (1 << 20), r->rss, r->rss - r->rss_base);
	if (o->kind == CLI_ENGINE_JIT)
		printf("  compile       %.3f s (emit %.3f, optimise %.3f, JIT %.3f), %d kernels for %d calls\n",
			r->compile, e->stats.seconds_emit, e->stats.seconds_optimize, e->stats.seconds_jit, e->stats.kernels,
			e->stats.calls);
}

int cmd_bench(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc bench", argc, argv);
	bench_args o = {.steps = 5, .threads = 2, .max_memory = -1, .kind = CLI_ENGINE_JIT,
		.strategy = PS_STRATEGY_DEFAULT};
	int status = parse(&a, &o);
	if (status >= 0)
		return status;
	bench_result r = {.rss_base = cli_rss_mib()};
	cli_engine e;
	cli_engine_init(&e, o.kind, (int)o.threads, o.cpu);
	e.cg.dump_llvm = o.dump;
	status = EXIT_USER;
	if (cli_model_load(&o.m, o.spec)) {
		status = measure(&o, &e, &r);
		if (status == EXIT_OK && !r.cut)
			(o.json ? print_json : print_text)(&o, &e, &r);
		cli_model_free(&o.m);
	}
	cli_engine_free(&e);
	return status;
}
