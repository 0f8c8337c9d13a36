/* cmd_bench.c: `revc bench` times training steps: median and min step time,
 * images/s, achieved GFLOP/s, peak memory and compile time; and, for
 * comparison, how fast cblas_sgemm alone runs the step's GEMMs.  revc_bench
 * measures; this file parses the options and prints. */
#include <unistd.h>

#include "cli.h"

static const char usage[] =
	"revc bench SPEC [--set KEY=VALUE ...] [--steps K] [--engine interp|jit] [--cpu NAME] [--strategy NAME]\n"
	"                  [--threads N] [--gemm] [--kernels] [--profile] [--json] [--dump-llvm DIR] [--max-memory SIZE]\n"
	"                  [--versus NAME=VALUE] [pass options]";
static const char about[] =
	"Builds SPEC's training step, runs one warm-up step and then K timed steps on\n"
	"random data, and reports the median and minimum step time, images/s, the\n"
	"achieved GFLOP/s (convolution and dense FLOPs over the median step), the\n"
	"planned arena and the process RSS, and the compile time (with how many of\n"
	"its objects came from $XDG_CACHE_HOME/revc/objects, where compiled objects\n"
	"are kept; REVC_OBJECT_CACHE=0 turns that off).  --gemm also times\n"
	"cblas_sgemm alone on the step's GEMM shapes (the machine's ceiling for them)\n"
	"and gives the step's share of it.  --kernels lists the step's convolutions\n"
	"with the lowering each got (direct, winograd2, winograd4 or blas: REVC_CONV\n"
	"forces one; by default direct, winograd2 and winograd4 are timed on this\n"
	"host once per shape and the choice cached in $XDG_CACHE_HOME/revc/conv-tune,\n"
	"and used once written there; REVC_CONV_TUNE=0 leaves it to the cost model)\n"
	"and why (\"measured:\" or \"cached:\" with the three times, or \"cost model:\n"
	"...\").  The host line gives a cache line's round trip between two threads\n"
	"before and after the timed steps: on a shared machine whose two CPUs are\n"
	"sometimes on different caches, a high one marks a run whose two-thread\n"
	"steps are slower for it.  --profile (JIT) runs the timed steps again\n"
	"timing every kernel call, and prints per kind of kernel its calls, time,\n"
	"share of the step, how busy it kept the threads, and GFLOP/s or GB/s; the\n"
	"share of the threads' time spent idle in the dispatcher (beside serial\n"
	"kernels, and in parallel calls: before a thread's first chunk started,\n"
	"waiting for the slowest chunk, handing out and collecting); each chunk's\n"
	"time over all parallel calls, and how much of the waiting repeats every\n"
	"step (the same chunk of a call the slower one); and the profiled step's\n"
	"time against the unprofiled one (what the timing costs).  --profile-calls\n"
	"K also lists the K longest calls, each with its node as revc dump --after\n"
	"plan names it, the share of the threads' time it spent waiting for its\n"
	"slowest chunk, and how uneven its chunks were summed over the steps (1 -\n"
	"the fastest's time over the slowest's) and which was the slowest.\n"
	"--versus NAME=VALUE builds the step a second time (B) with the environment\n"
	"variable NAME set to VALUE while it is built (REVC_EPILOGUE=0, REVC_CONV=direct,\n"
	"or a switch of a change under test), runs K pairs of steps alternately (A B,\n"
	"B A, ...) and reports each build's median and minimum step time and the\n"
	"median of the pairs' B/A ratios with its quartiles: on a shared machine,\n"
	"where separate runs scatter by tens of percent, it resolves about a\n"
	"percent (--steps K: 200 pairs of a 40 ms step take 16 s).  The pass\n"
	"options apply to the step's pipeline; with --stop-after or --passes revc\n"
	"bench builds and dumps the step and exits without timing it.";

static const cli_opt opts[] = {
	{"steps", 0, "K", "timed steps (default 5)"},
	CLI_ENGINE_OPT,
	CLI_CPU_OPT,
	CLI_STRATEGY_OPT,
	CLI_BUDGET_OPT,
	{"threads", 0, "N", "threads (default 2)"},
	{"gemm", 0, NULL, "also measure cblas_sgemm alone on the step's GEMM shapes"},
	{"json", 0, NULL, "print one JSON object"},
	{"dump-llvm", 0, "DIR", "write each module's .ll before and after optimisation"},
	CLI_MAX_MEMORY_OPT,
	CLI_SET_OPT,
	{"kernels", 0, NULL, "also list the convolutions and the lowering each got, and why"},
	CLI_DP_OPTS, /* (bucket) */
	{"profile", 0, NULL, "also time every kernel call: a table per kind of kernel, and the dispatcher's share"},
	{"profile-calls", 0, "K", "--profile, and also the K longest calls (at most 64), each with its node"},
	{"versus", 0, "NAME=VALUE", "time K pairs of steps against a second build with NAME=VALUE in the environment"},
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_STEPS, OPT_ENGINE, OPT_CPU, OPT_STRATEGY, OPT_BUDGET, OPT_THREADS, OPT_GEMM, OPT_JSON, OPT_DUMP,
	OPT_MAX_MEMORY, OPT_SET, OPT_KERNELS, OPT_BUCKET, OPT_OVERLAP, OPT_PROFILE, OPT_PROFILE_CALLS, OPT_VERSUS,
	OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

/* What the command line asked for. */
typedef struct {
	const char *spec;
	bool json;
	bool kernels; /* --kernels */
	const char *versus; /* --versus NAME=VALUE, or NULL */
	revc_options o;
	revc_bench_options b;
	cli_sets sets;
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
			if (!cli_parse_int(a->cmd, "--steps", val, 1, 100000, &o->b.steps))
				return EXIT_USAGE;
			break;
		case OPT_GEMM: o->b.gemm = true; break;
		case OPT_JSON: o->json = true; break;
		case OPT_KERNELS: o->kernels = true; break;
		case OPT_PROFILE: o->b.profile = true; break;
		case OPT_PROFILE_CALLS: {
			int64_t calls;
			if (!cli_parse_int(a->cmd, "--profile-calls", val, 1, 64, &calls))
				return EXIT_USAGE;
			o->b.profile_calls = (int)calls;
			o->b.profile = true;
			break;
		}
		case OPT_DUMP: o->o.dump_llvm = val; break;
		case OPT_VERSUS: o->versus = val; break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (k >= OPT_PASS0 && !cli_pass_option(k - OPT_PASS0, val, &o->o))
				return EXIT_OK;
			if (k < OPT_PASS0 && cli_model_option(a->cmd, opts[k].name, val, &o->o, &o->sets) < 0)
				return EXIT_USAGE;
		}
	}
	if (!o->spec)
		return cli_usage_error(a->cmd, "missing SPEC");
	if (o->b.profile && o->o.engine != REVC_JIT)
		return cli_usage_error(a->cmd, "--profile times native kernels: it needs --engine jit");
	if (o->versus && (o->b.profile || o->b.gemm || o->kernels || o->o.dump_llvm))
		return cli_usage_error(a->cmd, "--versus times the two steps alone: not with --profile, --gemm, --kernels or "
			"--dump-llvm");
	int ready = cli_engine_check(a->cmd, o->o.engine, o->o.cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(a->cmd, &o->o);
	if (ready != EXIT_OK)
		return ready;
	if (o->o.dump_llvm && !cli_make_dir(o->o.dump_llvm))
		return EXIT_USER;
	return -1;
}

/* The step counter on a terminal. */
static void show_step(void *user, int64_t done, int64_t steps)
{
	(void)user;
	fprintf(stderr, "\rrevc bench: step %lld/%lld", (long long)done, (long long)steps);
}

/* What the command prints besides revc_bench's figures. */
typedef struct {
	const revc_model *m;
	const bench_args *o;
	double rss, rss_base; /* MiB */
} bench_info;

/* The idle share of the threads' time over the profiled calls. */
typedef struct {
	double all;    /* all of it */
	double serial; /* beside serial calls */
	double late;   /* in parallel calls, before a thread's first chunk */
	double wait;   /* in parallel calls, waiting for the slowest chunk */
} idle_shares;

static idle_shares idle_share(const revc_bench_result *r)
{
	double wall = 0, busy = 0, ser = 0, late = 0, wait = 0;
	for (int k = 0; k < r->nkinds; k++) {
		wall += r->kinds[k].seconds;
		busy += r->kinds[k].busy_seconds;
		ser += r->kinds[k].serial_seconds;
		late += r->kinds[k].late_seconds;
		wait += r->kinds[k].wait_seconds;
	}
	double cores = wall * r->profile_threads;
	if (cores <= 0)
		return (idle_shares){0};
	return (idle_shares){1 - busy / cores, ser * (r->profile_threads - 1) / cores, late / cores, wait / cores};
}

static void print_profile_json(const revc_bench_result *r)
{
	idle_shares i = idle_share(r);
	printf(",\"profile\":{\"median_step_seconds\":%.9g,\"mean_step_seconds\":%.9g,\"calls_seconds\":%.9g,"
	       "\"idle_share\":%.6f,\"serial_idle_share\":%.6f,\"late_idle_share\":%.6f,\"wait_idle_share\":%.6f,"
	       "\"repeat_wait_seconds\":%.9g,\"chunk_seconds\":[",
		r->profile_median_seconds, r->profile_mean_seconds, r->profile_step_seconds, i.all, i.serial, i.late,
		i.wait, r->repeat_wait_seconds);
	for (int t = 0; t < r->profile_threads; t++)
		printf("%s%.9g", t ? "," : "", r->chunk_seconds[t]);
	printf("],\"kinds\":[");
	for (int k = 0; k < r->nkinds; k++) {
		printf("%s{\"kind\":\"", k ? "," : "");
		cli_json_string(stdout, r->kinds[k].kind);
		printf("\",\"calls\":%.6g,\"seconds\":%.9g,\"busy_seconds\":%.9g,\"serial_seconds\":%.9g,"
		       "\"late_seconds\":%.9g,\"wait_seconds\":%.9g,\"bytes\":%.0f,\"flops\":%.0f}",
			r->kinds[k].calls, r->kinds[k].seconds, r->kinds[k].busy_seconds, r->kinds[k].serial_seconds,
			r->kinds[k].late_seconds, r->kinds[k].wait_seconds, r->kinds[k].bytes, r->kinds[k].flops);
	}
	printf("]");
	if (r->ntop) {
		printf(",\"calls\":[");
		for (int k = 0; k < r->ntop; k++) {
			printf("%s{\"index\":%d,\"node\":\"", k ? "," : "", r->top[k].index);
			cli_json_string(stdout, r->top[k].node);
			printf("\",\"kind\":\"");
			cli_json_string(stdout, r->top[k].kind);
			printf("\",\"seconds\":%.9g,\"busy_seconds\":%.9g,\"late_seconds\":%.9g,\"wait_seconds\":%.9g,"
			       "\"uneven\":%.6f,\"slowest_chunk\":%d,\"parallel\":%s}",
				r->top[k].seconds, r->top[k].busy_seconds, r->top[k].late_seconds, r->top[k].wait_seconds,
				r->top[k].uneven, r->top[k].slowest, r->top[k].parallel ? "true" : "false");
		}
		printf("]");
	}
	printf("}");
}

static void print_profile_text(const revc_bench_result *r, double median)
{
	idle_shares i = idle_share(r);
	double step = r->profile_step_seconds;
	printf("  profile       %.4f s a step while timing calls (%+.1f%% over the median above); the calls' mean %.4f s\n",
		r->profile_median_seconds, 100 * (r->profile_median_seconds / median - 1), step);
	printf("  dispatcher    %.1f%% of the %d threads' time idle: %.1f%% beside serial kernels, %.1f%% in parallel "
	       "calls (%.1f%% before a thread's first chunk, %.1f%% waiting for the slowest chunk, %.1f%% handing out "
	       "and collecting)\n",
		100 * i.all, r->profile_threads, 100 * i.serial, 100 * (i.all - i.serial), 100 * i.late, 100 * i.wait,
		100 * (i.all - i.serial - i.late - i.wait));
	if (r->profile_threads > 1) {
		printf("  chunks       ");
		for (int t = 0; t < r->profile_threads; t++)
			printf("%s chunk %d %.2f ms", t ? "," : "", t, 1e3 * r->chunk_seconds[t]);
		printf(" a step (every parallel call's); of the waiting for the slowest, %.1f%% of the threads' time "
		       "repeats: the same chunk of a call slower in every step\n",
			100 * r->repeat_wait_seconds / (step * r->profile_threads));
	}
	printf("  %-46s %7s %9s %6s %5s %9s\n", "kind", "calls", "ms/step", "share", "busy", "rate");
	for (int k = 0; k < r->nkinds; k++) {
		double s = r->kinds[k].seconds;
		char rate[32];
		if (r->kinds[k].flops > 0)
			snprintf(rate, sizeof rate, "%.1f GF/s", r->kinds[k].flops / s / 1e9);
		else
			snprintf(rate, sizeof rate, "%.1f GB/s", r->kinds[k].bytes / s / 1e9);
		printf("  %-46.46s %7.0f %9.3f %5.1f%% %4.0f%% %9s\n", r->kinds[k].kind, r->kinds[k].calls, 1e3 * s,
			100 * s / step, 100 * r->kinds[k].busy_seconds / (s * r->profile_threads), rate);
	}
	if (r->ntop)
		printf("  %-5s %-24s %-33s %9s %6s %5s %5s %6s %s\n", "call", "node", "kind", "ms/step", "share", "busy",
			"wait", "uneven", "slowest");
	for (int k = 0; k < r->ntop; k++) {
		double s = r->top[k].seconds, threads_s = s * r->profile_threads;
		printf("  %-5d %-24.24s %-33.33s %9.3f %5.1f%% %4.0f%%", r->top[k].index, r->top[k].node, r->top[k].kind,
			1e3 * s, 100 * s / step, 100 * r->top[k].busy_seconds / threads_s);
		if (r->top[k].parallel)
			printf(" %4.0f%% %5.0f%%  chunk %d\n", 100 * r->top[k].wait_seconds / threads_s, 100 * r->top[k].uneven,
				r->top[k].slowest);
		else
			printf(" serial\n");
	}
}

static void print_json(const bench_info *i, const revc_bench_result *r)
{
	const revc_model *m = i->m;
	const bench_args *o = i->o;
	int64_t batch = revc_model_batch(m);
	printf("{\"model\":\"");
	cli_json_string(stdout, revc_model_name(m));
	printf("\",\"engine\":\"%s\",\"strategy\":\"%s\",\"threads\":%lld,\"batch\":%lld,\"steps\":%lld,"
	       "\"median_step_seconds\":%.6f,\"min_step_seconds\":%.6f,\"min_step_cpu_seconds\":%.6f,\"images_per_sec\":%.2f,"
	       "\"gflop_per_step\":%.3f,\"gflops\":%.2f,\"arena_bytes\":%lld,\"rss_mib\":%.1f,"
	       "\"rss_increase_mib\":%.1f,"
	       "\"compile_seconds\":%.4f,\"objects\":%d,\"objects_cached\":%d,\"kernels\":%d,\"kernel_calls\":%d",
		revc_model_engine(m), revc_strategy_name(o->o.strategy), (long long)o->o.threads, (long long)batch,
		(long long)o->b.steps, r->median_seconds, r->min_seconds, r->min_cpu_seconds,
		(double)batch / r->median_seconds, r->flops / 1e9, r->flops / r->median_seconds / 1e9, (long long)r->arena_bytes, i->rss,
		i->rss - i->rss_base, r->compile_seconds, r->objects, r->objects_cached, r->kernels, r->calls);
	if (o->b.gemm)
		printf(",\"gemm_only_seconds\":%.6f,\"gemm_only_gflops\":%.2f,\"share_of_gemm\":%.4f",
			r->gemm_seconds, r->flops / r->gemm_seconds / 1e9, r->gemm_seconds / r->median_seconds);
	if (revc_model_cpu(m))
		printf(",\"cpu\":\"%s\",\"cpu_native\":%s", revc_model_cpu(m), r->cpu_native ? "true" : "false");
	else
		printf(",\"cpu\":null,\"cpu_native\":null");
	printf(",\"blas_core\":\"%s\"", r->blas_core);
	if (r->round_trip_ns[0] >= 0 && r->round_trip_ns[1] >= 0)
		printf(",\"round_trip_ns\":[%.0f,%.0f]", r->round_trip_ns[0], r->round_trip_ns[1]);
	else
		printf(",\"round_trip_ns\":null");
	printf(",\"performed_gflop_per_step\":%.3f", r->performed_flops / 1e9);
	if (o->kernels) {
		printf(",\"convolutions\":[");
		for (int k = 0; k < r->nconvs; k++) {
			printf("%s{\"node\":\"", k ? "," : "");
			cli_json_string(stdout, r->convs[k].what);
			printf("\",\"count\":%d,\"lowering\":\"%s\",\"why\":\"", r->convs[k].count, r->convs[k].lowering);
			cli_json_string(stdout, r->convs[k].why);
			printf("\"}");
		}
		printf("]");
	}
	if (r->profiled)
		print_profile_json(r);
	printf("}\n");
}

/* The first line of the text form. */
static void print_title(const bench_args *o, const revc_model *m)
{
	printf("revc bench: %s, batch %lld, strategy %s, engine %s, %lld threads\n", revc_model_name(m),
		(long long)revc_model_batch(m), revc_strategy_name(o->o.strategy), revc_model_engine(m),
		(long long)o->o.threads);
}

/* The host line, when the probe measured both round trips. */
static void print_host(const double round_trip_ns[2])
{
	if (round_trip_ns[0] >= 0 && round_trip_ns[1] >= 0)
		printf("  host          a cache line's round trip between two threads: %.0f ns before, %.0f ns after\n",
			round_trip_ns[0], round_trip_ns[1]);
}

static void print_text(const bench_info *i, const revc_bench_result *r)
{
	const revc_model *m = i->m;
	const bench_args *o = i->o;
	int64_t batch = revc_model_batch(m);
	print_title(o, m);
	if (revc_model_cpu(m))
		printf("  machine       code for %s%s, OpenBLAS %s kernels\n", revc_model_cpu(m),
			r->cpu_native ? " (native)" : "", r->blas_core);
	else
		printf("  machine       OpenBLAS %s kernels\n", r->blas_core);
	printf("  step time     median %.4f s, min %.4f s over %lld steps\n", r->median_seconds, r->min_seconds,
		(long long)o->b.steps);
	printf("  processor     min %.4f s a step, every thread's time (spinning included)\n", r->min_cpu_seconds);
	print_host(r->round_trip_ns);
	printf("  throughput    %.1f images/s\n", (double)batch / r->median_seconds);
	printf("  compute       %.2f GFLOP per step (convolutions and matrix products), %.1f GFLOP/s\n", r->flops / 1e9,
		r->flops / r->median_seconds / 1e9);
	if (r->performed_flops != r->flops)
		printf("  performed     %.2f GFLOP per step in the products (Winograd's), %.1f GFLOP/s\n",
			r->performed_flops / 1e9, r->performed_flops / r->median_seconds / 1e9);
	if (o->b.gemm)
		printf("  sgemm alone   %.4f s for the same GEMMs, %.1f GFLOP/s: the step reaches %.0f%% of it\n",
			r->gemm_seconds, r->flops / r->gemm_seconds / 1e9, 100 * r->gemm_seconds / r->median_seconds);
	printf("  memory        planned arena %.2f MiB, process RSS %.1f MiB (+%.1f MiB over the start)\n",
		(double)r->arena_bytes / (1 << 20), i->rss, i->rss - i->rss_base);
	if (o->kernels)
		for (int k = 0; k < r->nconvs; k++)
			printf("  conv          %-9s x%-3d %s (%s)\n", r->convs[k].lowering, r->convs[k].count, r->convs[k].what,
				r->convs[k].why);
	if (revc_model_cpu(m))
		printf("  compile       %.3f s (emit %.3f, optimise %.3f, JIT %.3f; %d of %d objects cached), %d kernels "
		       "for %d calls\n",
			r->compile_seconds, r->seconds_emit, r->seconds_optimize, r->seconds_jit, r->objects_cached,
			r->objects, r->kernels, r->calls);
	if (r->profiled)
		print_profile_text(r, r->median_seconds);
}

/* --versus: the two builds' figures. */
static void print_versus(const bench_args *o, const revc_model *m, const revc_versus_result *r)
{
	if (o->json) {
		printf("{\"model\":\"");
		cli_json_string(stdout, revc_model_name(m));
		printf("\",\"engine\":\"%s\",\"strategy\":\"%s\",\"threads\":%lld,\"batch\":%lld,\"versus\":\"",
			revc_model_engine(m), revc_strategy_name(o->o.strategy), (long long)o->o.threads,
			(long long)revc_model_batch(m));
		cli_json_string(stdout, o->versus);
		printf("\",\"pairs\":%lld", (long long)r->pairs);
		for (int k = 0; k < 2; k++)
			printf(",\"%s\":{\"median_step_seconds\":%.6f,\"min_step_seconds\":%.6f,\"kernels\":%d,"
			       "\"kernel_calls\":%d}",
				k ? "b" : "a", r->median_seconds[k], r->min_seconds[k], r->kernels[k], r->calls[k]);
		printf(",\"ratio_median\":%.5f,\"ratio_quartiles\":[%.5f,%.5f]", r->ratio_median, r->ratio_low,
			r->ratio_high);
		if (r->round_trip_ns[0] >= 0 && r->round_trip_ns[1] >= 0)
			printf(",\"round_trip_ns\":[%.0f,%.0f]}\n", r->round_trip_ns[0], r->round_trip_ns[1]);
		else
			printf(",\"round_trip_ns\":null}\n");
		return;
	}
	print_title(o, m);
	printf("  versus        A as given, B built with %s; %lld pairs of steps, alternated\n", o->versus,
		(long long)r->pairs);
	for (int k = 0; k < 2; k++)
		printf("  %s             median %.4f s, min %.4f s; %d kernels for %d calls\n", k ? "B" : "A",
			r->median_seconds[k], r->min_seconds[k], r->kernels[k], r->calls[k]);
	printf("  B / A         %.4f, the median of the pairs' ratios (quartiles %.4f and %.4f)\n", r->ratio_median,
		r->ratio_low, r->ratio_high);
	print_host(r->round_trip_ns);
}

/* --versus: opens the spec a second time and times the two builds. */
static int versus(revc_model *m, bench_args *o)
{
	int status;
	revc_model *b = cli_model_open("revc bench", o->spec, &o->sets, &status);
	if (!b)
		return status;
	bool tty = !o->json && isatty(STDERR_FILENO);
	if (tty)
		o->b.on_step = show_step;
	revc_versus_result r;
	revc_error *err = NULL;
	bool ok = revc_bench_versus(m, b, o->versus, &o->o, &o->b, &r, &err);
	if (tty && ok)
		fprintf(stderr, "\r\033[K");
	if (ok)
		print_versus(o, m, &r);
	revc_model_free(b);
	return ok ? EXIT_OK : cli_revc_error(err);
}

/* Times the model and prints the figures. */
static int bench(revc_model *m, bench_args *o, double rss_base)
{
	bool tty = !o->json && isatty(STDERR_FILENO);
	if (tty)
		o->b.on_step = show_step;
	revc_bench_result r;
	revc_error *err = NULL;
	bool ok = revc_bench(m, &o->o, &o->b, &r, &err);
	cli_print_dumps(m);
	if (tty && ok && !r.cut)
		fprintf(stderr, "\r\033[K");
	if (!ok)
		return cli_revc_error(err);
	if (r.cut) {
		cli_pipeline_cut("revc bench", &o->o);
		return EXIT_OK;
	}
	bench_info i = {m, o, cli_rss_mib(), rss_base};
	(o->json ? print_json : print_text)(&i, &r);
	return EXIT_OK;
}

int cmd_bench(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc bench", argc, argv);
	bench_args o = {0};
	revc_options_init(&o.o);
	revc_bench_options_init(&o.b);
	int status = parse(&a, &o);
	if (status >= 0)
		return status;
	double rss_base = cli_rss_mib();
	revc_model *m = cli_model_open("revc bench", o.spec, &o.sets, &status);
	if (!m)
		return status;
	status = o.versus ? versus(m, &o) : bench(m, &o, rss_base);
	revc_model_free(m);
	return status;
}
