/* kernels.c: a small benchmark of the JIT's transformer kernels at
 * revvit-cifar's shapes (N=64 images, T=64 tokens, D=192, 3 heads of 64,
 * MLP 4·D), each compiled twice side by side in one run: "libm" as the code
 * was before vector math (libm's erf and exp, row sums in the reference's
 * order: cg_options.libm_math) and "vector" (codegen/vmath.c, reassociated
 * row sums).  Each case is a graph of the op(s) alone between inputs and
 * outputs, planned and fused as revc does, run on one thread; the runs of
 * the two builds alternate, and the best of the repetitions counts.
 *
 * Not a test: timings depend on the machine and its load.  Usage:
 *   build/bench/bench_kernels [repetitions [cpu]]   (default 5, native)
 * with BENCH_ONLY=text to run the cases whose names contain it, and
 * BENCH_DUMP_LLVM=dir to keep the last build's LLVM IR there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cg.h"
#include "passes.h"
#include "rt.h"

typedef struct {
	const char *name;
	const char *text; /* IR; the inputs are filled with values in [-3, 3) */
} bench_case;

#define ACT "f32[64,64,192]"
#define HID "f32[64,64,768]"
#define ATT "f32[64,3,64,64]"

static const bench_case cases[] = {
	{"fc1 bias + GELU (fused)",
		"graph @gelu {\n"
		"  %0 = input {name=\"h\"} : " HID "\n"
		"  $fc1.b = param : f32[768]\n"
		"  %2 = broadcast_add(%0, $fc1.b) : " HID "\n"
		"  %3 = gelu(%2) : " HID "\n"
		"  %4 = output(%3) {name=\"y\"} : " HID "\n"
		"}\n"},
	{"GELU backward",
		"graph @gelu_grad {\n"
		"  %0 = input {name=\"dy\"} : " HID "\n"
		"  %1 = input {name=\"a\"} : " HID "\n"
		"  %2 = gelu_grad(%0, %1) : " HID "\n"
		"  %3 = output(%2) {name=\"dx\"} : " HID "\n"
		"}\n"},
	{"softmax(0.125*scores)",
		"graph @softmax {\n"
		"  %0 = input {name=\"s\"} : " ATT "\n"
		"  %1 = softmax(%0) {factor=0.125} : " ATT "\n"
		"  %2 = output(%1) {name=\"p\"} : " ATT "\n"
		"}\n"},
	{"softmax backward",
		"graph @softmax_grad {\n"
		"  %0 = input {name=\"dp\"} : " ATT "\n"
		"  %1 = input {name=\"p\"} : " ATT "\n"
		"  %2 = softmax_grad(%0, %1) {factor=0.125} : " ATT "\n"
		"  %3 = output(%2) {name=\"ds\"} : " ATT "\n"
		"}\n"},
	{"LN stats + norm",
		"graph @ln {\n"
		"  %0 = input {name=\"x\"} : " ACT "\n"
		"  $ln.gamma = param : f32[192]\n"
		"  $ln.beta = param : f32[192]\n"
		"  %3 = ln_stats(%0) : f32[64,64,2]\n"
		"  %4 = ln_norm(%0, %3, $ln.gamma, $ln.beta) {eps=1e-06} : " ACT "\n"
		"  %5 = output(%4) {name=\"y\"} : " ACT "\n"
		"}\n"},
	{"LN stats + norm, stats kept",
		"graph @ln_kept {\n"
		"  %0 = input {name=\"x\"} : " ACT "\n"
		"  $ln.gamma = param : f32[192]\n"
		"  $ln.beta = param : f32[192]\n"
		"  %3 = ln_stats(%0) : f32[64,64,2]\n"
		"  %4 = ln_norm(%0, %3, $ln.gamma, $ln.beta) {eps=1e-06} : " ACT "\n"
		"  %5 = output(%4) {name=\"y\"} : " ACT "\n"
		"  %6 = output(%3) {name=\"st\"} : f32[64,64,2]\n"
		"}\n"},
	{"LN dx + accumulation",
		"graph @ln_dx_acc {\n"
		"  %0 = input {name=\"dy\"} : " ACT "\n"
		"  %1 = input {name=\"x\"} : " ACT "\n"
		"  %2 = input {name=\"st\"} : f32[64,64,2]\n"
		"  %3 = input {name=\"g\"} : " ACT "\n"
		"  $ln.gamma = param : f32[192]\n"
		"  %5 = ln_dx(%0, %1, %2, $ln.gamma) {eps=1e-06} : " ACT "\n"
		"  %6 = add(%3, %5) : " ACT "\n"
		"  %7 = output(%6) {name=\"dx\"} : " ACT "\n"
		"}\n"},
	{"LN backward (dx, dgamma)",
		"graph @ln_grad {\n"
		"  %0 = input {name=\"dy\"} : " ACT "\n"
		"  %1 = input {name=\"x\"} : " ACT "\n"
		"  %2 = input {name=\"st\"} : f32[64,64,2]\n"
		"  $ln.gamma = param : f32[192]\n"
		"  %4 = ln_dx(%0, %1, %2, $ln.gamma) {eps=1e-06} : " ACT "\n"
		"  %5 = output(%4) {name=\"dx\"} : " ACT "\n"
		"  %6 = ln_dgamma(%0, %1, %2) {eps=1e-06} : f32[192]\n"
		"  %7 = output(%6) {name=\"dgamma\"} : f32[192]\n"
		"}\n"},
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "bench_kernels: %s: %s\n", what, msg);
	exit(1);
}

/* One build of a case: its graph, store, compiled step and executor. */
typedef struct {
	ir_graph *g;
	rt_store s;
	cg_jit *j;
	rt_pool *pool;
	rt_exec *x;
} build;

static const char *target_cpu; /* cg_options.cpu */

static void build_init(build *b, const bench_case *c, bool libm)
{
	ir_diags d;
	ir_diags_init(&d);
	b->g = ir_parse(c->name, c->text, strlen(c->text), &d);
	if (!b->g || !ir_verify(b->g, &d))
		die(c->name, d.n ? d.items[0].msg : "bad IR");
	cg_options o = {.threads = 1, .optimize = true, .cpu = target_cpu, .libm_math = libm, .dump_llvm = getenv("BENCH_DUMP_LLVM")};
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.workspace = cg_workspace;
	ctx.workspace_user = &o;
	ps_options opts = {.only = "dce,schedule,fuse,liveness,plan"};
	if (ps_run(b->g, &ctx, &opts) != 0)
		die(c->name, ctx.diags.n ? ctx.diags.items[0].msg : "planning failed");
	ps_ctx_free(&ctx);
	cg_stats stats = {0};
	b->j = cg_jit_compile(b->g, &o, &stats, &d);
	if (!b->j)
		die(c->name, d.n ? d.items[0].msg : "compile failed");
	ir_diags_free(&d);
	rt_err e;
	rt_store_init(&b->s);
	if (!rt_store_init_from_graph(&b->s, b->g, 1, &e))
		die(c->name, e.msg);
	b->pool = rt_pool_new(1);
	b->x = rt_exec_new_native(b->g, &b->s, cg_jit_step(b->j), b->pool, &e);
	if (!b->x)
		die(c->name, e.msg);
	rt_rng r;
	rt_rng_seed(&r, 5);
	for (int i = 0; i < b->g->n; i++) {
		const ir_node *n = b->g->nodes[i];
		if (n->op != IR_OP_INPUT)
			continue;
		float *v = rt_exec_input(b->x, ir_node_str(n, IR_ATTR_NAME), NULL);
		for (int64_t k = 0; k < ir_type_elems(&n->type); k++)
			v[k] = (float)(6 * rt_rng_uniform(&r) - 3);
	}
	float *st = rt_exec_input(b->x, "st", NULL); /* layer-norm statistics: a positive variance */
	for (int64_t k = 1; st && k < 64 * 64 * 2; k += 2)
		st[k] = fabsf(st[k]) + 0.5f;
}

static double run_once(build *b)
{
	rt_err e;
	double t0 = now();
	if (!rt_exec_run(b->x, &e))
		die(b->g->name, e.msg);
	return now() - t0;
}

static void build_free(build *b)
{
	rt_exec_free(b->x);
	rt_pool_free(b->pool);
	cg_jit_free(b->j);
	rt_store_free(&b->s);
	ir_graph_free(b->g);
}

int main(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		printf("usage: bench_kernels [repetitions [cpu]]\n"
		       "Times the JIT's GELU, softmax and layer-norm kernels at revvit-cifar's shapes,\n"
		       "with libm's erf/exp and ordered sums (before) and with vector math (after).\n");
		return 0;
	}
	int reps = argc > 1 ? atoi(argv[1]) : 5;
	if (reps < 1) {
		fprintf(stderr, "bench_kernels: error: repetitions must be a positive integer\n");
		return 2;
	}
	target_cpu = argc > 2 ? argv[2] : NULL;
	char cpu[64], missing[64];
	cg_host_cpu(cpu, sizeof cpu);
	if (!cg_cpu_known(target_cpu) || !cg_cpu_runs_here(target_cpu, missing, sizeof missing)) {
		fprintf(stderr, "bench_kernels: error: cannot run code for CPU %s here\n", target_cpu);
		return 1;
	}
	printf("host %s, code for %s, 1 thread, best of %d runs\n", cpu, target_cpu ? target_cpu : "native", reps);
	printf("%-28s %10s %10s %8s\n", "kernel", "libm ms", "vector ms", "speedup");
	const char *only = getenv("BENCH_ONLY"); /* a substring of the cases' names */
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		if (only && !strstr(cases[c].name, only))
			continue;
		build before, after;
		build_init(&before, &cases[c], true);
		build_init(&after, &cases[c], false);
		run_once(&before); /* warm caches and pages */
		run_once(&after);
		double tb = 1e30, ta = 1e30;
		for (int r = 0; r < reps; r++) {
			double t = run_once(&before);
			tb = t < tb ? t : tb;
			t = run_once(&after);
			ta = t < ta ? t : ta;
		}
		printf("%-28s %10.2f %10.2f %7.1fx\n", cases[c].name, 1e3 * tb, 1e3 * ta, tb / ta);
		build_free(&before);
		build_free(&after);
	}
	return 0;
}
