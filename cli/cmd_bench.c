/* cmd_bench.c: `revc bench` times training steps: median and min step time,
 * images/s, achieved GFLOP/s, peak memory and compile time; and, for
 * comparison, how fast cblas_sgemm alone runs the step's GEMMs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "cli.h"
#include "conv_geom.h"
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

/* One GEMM shape of the step and how many times a step runs it. */
typedef struct {
	int64_t m, n, k, count;
} gemm_shape;

/* The GEMMs of convolutions (one per image) and dense layers of g. */
static int gemm_shapes(const ir_graph *g, gemm_shape *out, int max)
{
	int n = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *v = g->nodes[i];
		gemm_shape s;
		if (v->op == IR_OP_CONV2D || v->op == IR_OP_CONV2D_DX || v->op == IR_OP_CONV2D_DW) {
			ir_conv_geom c = ir_conv_geom_of(v);
			int64_t kk = c.c * c.kh * c.kw, hw = c.ho * c.wo;
			if (v->op == IR_OP_CONV2D)
				s = (gemm_shape){c.o, hw, kk, c.n};
			else if (v->op == IR_OP_CONV2D_DX)
				s = (gemm_shape){kk, hw, c.o, c.n};
			else
				s = (gemm_shape){c.o, kk, hw, c.n};
		} else if (v->op == IR_OP_MATMUL) {
			const ir_attr *ta = ir_node_attr(v, IR_ATTR_TRANS_A);
			s = (gemm_shape){v->type.dim[0], v->type.dim[1],
				ta && ta->u.i ? v->in[0]->type.dim[0] : v->in[0]->type.dim[1], 1};
		} else {
			continue;
		}
		int j = 0;
		while (j < n && (out[j].m != s.m || out[j].n != s.n || out[j].k != s.k))
			j++;
		if (j == n && n < max)
			out[n++] = (gemm_shape){s.m, s.n, s.k, 0};
		if (j < max)
			out[j].count += s.count;
	}
	return n;
}

static double flops_of(const gemm_shape *s, int n)
{
	double f = 0;
	for (int i = 0; i < n; i++)
		f += 2.0 * (double)s[i].m * (double)s[i].n * (double)s[i].k * (double)s[i].count;
	return f;
}

/* Seconds cblas_sgemm (threads BLAS threads) takes for all of the step's
 * GEMMs: each shape timed on its own, best of a few runs. */
static double gemm_seconds(const gemm_shape *s, int n, int threads)
{
	rt_set_threads(threads);
	double total = 0;
	for (int i = 0; i < n; i++) {
		size_t a = (size_t)(s[i].m * s[i].k), b = (size_t)(s[i].k * s[i].n), c = (size_t)(s[i].m * s[i].n);
		float *A = calloc(a + 1, sizeof *A), *B = calloc(b + 1, sizeof *B), *C = calloc(c + 1, sizeof *C);
		if (!A || !B || !C)
			IR_DIE("out of memory");
		for (size_t j = 0; j < a; j++)
			A[j] = (float)(j % 7) * 0.1f;
		for (size_t j = 0; j < b; j++)
			B[j] = (float)(j % 5) * 0.1f;
		int reps = (int)fmin(200, fmax(3, 2e8 / (2.0 * (double)a * (double)s[i].n + 1)));
		double best = INFINITY;
		for (int trial = 0; trial < 3; trial++) {
			double t0 = cli_now();
			for (int r = 0; r < reps; r++)
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)s[i].m, (blasint)s[i].n,
					(blasint)s[i].k, 1, A, (blasint)s[i].k, B, (blasint)s[i].n, 0, C, (blasint)s[i].n);
			best = fmin(best, (cli_now() - t0) / reps);
		}
		total += best * (double)s[i].count;
		free(A);
		free(B);
		free(C);
	}
	return total;
}

int cmd_bench(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc bench", argc, argv);
	const char *spec = NULL, *val, *dump = NULL;
	int64_t steps = 5, threads = 2, max_memory = -1;
	bool json = false, gemm = false;
	cli_engine_kind kind = CLI_ENGINE_JIT;
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
		case OPT_STEPS:
			if (!cli_parse_int(a.cmd, "--steps", val, 1, 100000, &steps))
				return EXIT_USAGE;
			break;
		case OPT_ENGINE:
			if (!cli_engine_parse(a.cmd, val, &kind))
				return EXIT_USAGE;
			break;
		case OPT_CPU:
			if (!cli_cpu_parse(a.cmd, val, &cpu))
				return EXIT_USAGE;
			break;
		case OPT_STRATEGY:
			if (!cli_parse_strategy(a.cmd, val, &ctx.strategy))
				return EXIT_USAGE;
			break;
		case OPT_THREADS:
			if (!cli_parse_int(a.cmd, "--threads", val, 1, 256, &threads))
				return EXIT_USAGE;
			break;
		case OPT_GEMM: gemm = true; break;
		case OPT_JSON: json = true; break;
		case OPT_DUMP: dump = val; break;
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
	int ready = cli_engine_check(a.cmd, kind, cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(a.cmd, &popts);
	if (ready != EXIT_OK)
		return ready;
	if (dump && !cli_make_dir(dump))
		return EXIT_USER;

	double rss_base = cli_rss_mib();
	cli_engine e;
	cli_engine_init(&e, kind, (int)threads, cpu);
	e.cg.dump_llvm = dump;
	cli_engine_plan(&e, &ctx);
	int status = EXIT_USER;
	rt_store store;
	rt_store_init(&store);
	ir_graph *g = NULL;
	rt_exec *x = NULL;
	rt_err err;
	double *times = NULL;
	if (!cli_model_load(&m, spec) || !(g = cli_model_graph(&m, IR_F32, FE_LOWER_TRAIN, &ctx, &popts)))
		goto done;
	if (cli_pipeline_cut(a.cmd, &popts)) {
		status = EXIT_OK;
		goto done;
	}
	if (!cli_check_max_memory(max_memory, &g, 1))
		goto done;
	if (!rt_store_init_from_graph(&store, g, (uint64_t)m.spec.seed, &err)) {
		cli_error("%s", err.msg);
		goto done;
	}
	double t0 = cli_now();
	if (!(x = cli_engine_exec(&e, g, &store)))
		goto done;
	double compile = cli_now() - t0;
	/* Random data; a tiny learning rate keeps the parameters sane. */
	drv_check_batch(x, (uint64_t)m.spec.seed, m.spec.classes);
	*(float *)rt_exec_input(x, "lr", NULL) = 1e-4f;
	times = calloc((size_t)steps + 1, sizeof *times);
	if (!times)
		IR_DIE("out of memory");
	bool tty = !json && isatty(STDERR_FILENO);
	for (int64_t s = -1; s < steps; s++) {
		if (tty)
			fprintf(stderr, "\rrevc bench: step %lld/%lld", (long long)s + 1, (long long)steps);
		double s0 = cli_now();
		if (!rt_exec_run(x, &err)) {
			cli_error("%s", err.msg);
			goto done;
		}
		if (s >= 0)
			times[s] = cli_now() - s0;
	}
	if (tty)
		fprintf(stderr, "\r\033[K");
	qsort(times, (size_t)steps, sizeof *times, by_value);
	double median = times[steps / 2], best = times[0];
	gemm_shape shapes[512];
	int ns = gemm_shapes(g, shapes, 512);
	double flops = flops_of(shapes, ns);
	double gemm_s = gemm ? gemm_seconds(shapes, ns, (int)threads) : 0;
	int64_t arena = ps_arena_bytes(g);
	double rss = cli_rss_mib();
	char cpu_name[64];
	bool native;
	cli_engine_cpu(&e, cpu_name, sizeof cpu_name, &native);
	if (json) {
		printf("{\"model\":\"");
		cli_json_string(stdout, m.spec.name);
		printf("\",\"engine\":\"%s\",\"strategy\":\"%s\",\"threads\":%lld,\"batch\":%lld,\"steps\":%lld,"
		       "\"median_step_seconds\":%.6f,\"min_step_seconds\":%.6f,\"images_per_sec\":%.2f,"
		       "\"gflop_per_step\":%.3f,\"gflops\":%.2f,\"arena_bytes\":%lld,\"rss_mib\":%.1f,"
		       "\"rss_increase_mib\":%.1f,"
		       "\"compile_seconds\":%.4f,\"kernels\":%d,\"kernel_calls\":%d",
			cli_engine_name(&e), ps_strategy_name(ctx.strategy), (long long)threads, (long long)m.spec.batch,
			(long long)steps, median, best, (double)m.spec.batch / median, flops / 1e9, flops / median / 1e9,
			(long long)arena, rss, rss - rss_base, compile, e.stats.kernels, e.stats.calls);
		if (gemm)
			printf(",\"gemm_only_seconds\":%.6f,\"gemm_only_gflops\":%.2f,\"share_of_gemm\":%.4f",
				gemm_s, flops / gemm_s / 1e9, gemm_s / median);
		if (kind == CLI_ENGINE_JIT)
			printf(",\"cpu\":\"%s\",\"cpu_native\":%s", cpu_name, native ? "true" : "false");
		else
			printf(",\"cpu\":null,\"cpu_native\":null");
		printf(",\"blas_core\":\"%s\"}\n", rt_blas_core());
	} else {
		printf("revc bench: %s, batch %lld, strategy %s, engine %s, %lld threads\n", m.spec.name,
			(long long)m.spec.batch, ps_strategy_name(ctx.strategy), cli_engine_name(&e), (long long)threads);
		if (kind == CLI_ENGINE_JIT)
			printf("  machine       code for %s%s, OpenBLAS %s kernels\n", cpu_name, native ? " (native)" : "",
				rt_blas_core());
		else
			printf("  machine       OpenBLAS %s kernels\n", rt_blas_core());
		printf("  step time     median %.4f s, min %.4f s over %lld steps\n", median, best, (long long)steps);
		printf("  throughput    %.1f images/s\n", (double)m.spec.batch / median);
		printf("  compute       %.2f GFLOP per step (convolutions and dense), %.1f GFLOP/s\n", flops / 1e9,
			flops / median / 1e9);
		if (gemm)
			printf("  sgemm alone   %.4f s for the same GEMMs, %.1f GFLOP/s: the step reaches %.0f%% of it\n",
				gemm_s, flops / gemm_s / 1e9, 100 * gemm_s / median);
		printf("  memory        planned arena %.2f MiB, process RSS %.1f MiB (+%.1f MiB over the start)\n",
			(double)arena / (1 << 20), rss, rss - rss_base);
		if (kind == CLI_ENGINE_JIT)
			printf("  compile       %.3f s (emit %.3f, optimise %.3f, JIT %.3f), %d kernels for %d calls\n",
				compile, e.stats.seconds_emit, e.stats.seconds_optimize, e.stats.seconds_jit, e.stats.kernels,
				e.stats.calls);
	}
	status = EXIT_OK;
done:
	free(times);
	rt_exec_free(x);
	rt_store_free(&store);
	ir_graph_free(g);
	ps_ctx_free(&ctx);
	cli_model_free(&m);
	cli_engine_free(&e);
	return status;
}
