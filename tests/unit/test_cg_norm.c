/* test_cg_norm.c: the native code of the transformer's ops (layer norm,
 * exact GELU, softmax, mean over tokens: codegen/k_norm.c and the members of
 * k_elementwise.c's groups along the last axis) against the interpreter,
 * through the harness of test_codegen.c, in f32 and f64 on 1, 2 and 3
 * threads; NaN propagation in both engines; groups never mixing channel
 * broadcasts with broadcasts along the last axis; and autodiff's rules for
 * these ops against finite differences of the loss.
 *
 * The graphs are IR text (so the parser and verifier take the new ops too).
 * Shapes are odd: rows of 1, 7, 33, 64 and 130 features, a 64-feature row
 * split over threads, one token, one feature. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "codegen_suites.h"
#include "passes.h"
#include "rt.h"

static ir_graph *parse(const char *text)
{
	return cgt_parse("norm.ir", text);
}

/* tmpl with every "DT[" made dt's name and "[" ("f32[2,3]"), parsed. */
static ir_graph *parse_as(const char *tmpl, ir_dtype dt)
{
	static char text[8192];
	size_t at = 0;
	for (const char *p = tmpl; *p; p++) {
		ck_assert_uint_lt(at + 8, sizeof text);
		if (strncmp(p, "DT[", 3) == 0) {
			at += (size_t)snprintf(text + at, sizeof text - at, "%s", ir_dtype_name(dt));
			p++;
		} else
			text[at++] = *p;
	}
	text[at] = 0;
	return parse(text);
}

/* ---- a layer-norm block, its backward pass, softmax and the token mean ----- */

typedef struct {
	int64_t n, t, d;
} tok_case;

static const tok_case tok_cases[] = {
	{3, 5, 7}, {2, 4, 33}, {1, 1, 1}, {4, 7, 64}, {2, 3, 130},
};

/* LN → GELU → residual add, softmax(0.35·), their hand-written backward
 * (fusing ln_dx's result with the accumulations and token_mean_grad), the
 * mean over tokens. */
static ir_graph *block_graph(const tok_case *c, const char *t)
{
	static char text[8192];
	long long n = c->n, tk = c->t, d = c->d;
	char act[64], row[32], st[64];
	snprintf(act, sizeof act, "%s[%lld,%lld,%lld]", t, n, tk, d);
	snprintf(row, sizeof row, "%s[%lld]", t, d);
	snprintf(st, sizeof st, "%s[%lld,%lld,2]", t, n, tk);
	snprintf(text, sizeof text,
		"graph @block {\n"
		"  %%0 = input {name=\"x\"} : %s\n"
		"  %%1 = input {name=\"dy\"} : %s\n"
		"  %%2 = input {name=\"dm\"} : %s[%lld,%lld]\n"
		"  $ln.gamma = param : %s\n"
		"  $ln.beta = param : %s\n"
		"  %%5 = ln_stats(%%0) : %s\n"
		"  %%6 = ln_norm(%%0, %%5, $ln.gamma, $ln.beta) {eps=1e-05} : %s\n"
		"  %%7 = gelu(%%6) : %s\n"
		"  %%8 = add(%%7, %%0) : %s\n"
		"  %%9 = output(%%8) {name=\"y\"} : %s\n"
		"  %%10 = softmax(%%8) {factor=0.35} : %s\n"
		"  %%11 = output(%%10) {name=\"p\"} : %s\n"
		"  %%12 = softmax_grad(%%1, %%10) {factor=0.35} : %s\n"
		"  %%13 = gelu_grad(%%12, %%6) : %s\n"
		"  %%14 = reduce_sum(%%13) {axes=[0,1]} : %s\n"
		"  %%15 = ln_dgamma(%%13, %%0, %%5) {eps=1e-05} : %s\n"
		"  %%16 = ln_dx(%%13, %%0, %%5, $ln.gamma) {eps=1e-05} : %s\n"
		"  %%17 = add(%%16, %%12) : %s\n"
		"  %%18 = token_mean_grad(%%2) : %s\n"
		"  %%19 = add(%%17, %%18) : %s\n"
		"  %%20 = output(%%19) {name=\"dx\"} : %s\n"
		"  %%21 = output(%%14) {name=\"dbeta\"} : %s\n"
		"  %%22 = output(%%15) {name=\"dgamma\"} : %s\n"
		"  %%23 = token_mean(%%8) : %s[%lld,%lld]\n"
		"  %%24 = output(%%23) {name=\"m\"} : %s[%lld,%lld]\n"
		"  %%25 = output(%%5) {name=\"stats\"} : %s\n"
		"  %%26 = token_mean_grad(%%23) : %s\n"
		"  %%27 = add(%%26, %%8) : %s\n"
		"  %%28 = gelu(%%27) : %s\n"
		"  %%29 = output(%%28) {name=\"tm\"} : %s\n"
		"}\n",
		act, act, t, n, d, row, row, st, act, act, act, act, act, act, act, act, row, row, act, act,
		act, act, act, row, row, t, n, d, t, n, d, st, act, act, act, act);
	return parse(text);
}

/* Loop index i: bit 0 the dtype, bits 1-2 the thread count (1, 2, 3), the
 * rest the case. */
#define NTHREADS 3
#define CASE_OF(i, table) (&(table)[(i) / (2 * NTHREADS)])
#define LOOPS_OF(table) ((int)(sizeof(table) / sizeof((table)[0])) * 2 * NTHREADS)
#define DTYPE_OF(i) ((i) % 2 ? IR_F64 : IR_F32)
#define THREADS_OF(i) (1 + (i) / 2 % NTHREADS)

static void check_err(double err, ir_dtype dt, const char *what, int i, int threads)
{
	double tol = dt == IR_F32 ? 1e-5 : 1e-12;
	ck_assert_msg(err <= tol, "%s (case %d, %s, %d threads): error %g > %g", what, i, ir_dtype_name(dt),
		threads, err, tol);
}

/* Node %k of the text, before planning moves it: an `op`. */
static const ir_node *text_node(const ir_graph *g, int k, ir_op op)
{
	ck_assert_int_lt(k, g->n);
	ck_assert_msg(g->nodes[k]->op == op, "%%%d is %s", k, ir_op_name(g->nodes[k]->op));
	return g->nodes[k];
}

START_TEST(test_block)
{
	const tok_case *c = CASE_OF(_i, tok_cases);
	ir_dtype dt = DTYPE_OF(_i);
	int threads = THREADS_OF(_i);
	ir_graph *g = block_graph(c, ir_dtype_name(dt));
	const ir_node *ln = text_node(g, 6, IR_OP_LN_NORM), *gelu = text_node(g, 7, IR_OP_GELU);
	const ir_node *res = text_node(g, 8, IR_OP_ADD), *acc = text_node(g, 17, IR_OP_ADD);
	const ir_node *acc2 = text_node(g, 19, IR_OP_ADD), *tmg = text_node(g, 26, IR_OP_TOKEN_MEAN_GRAD);
	const ir_node *tadd = text_node(g, 27, IR_OP_ADD), *tgelu = text_node(g, 28, IR_OP_GELU);
	const ir_node *stats = text_node(g, 5, IR_OP_LN_STATS), *dx = text_node(g, 16, IR_OP_LN_DX);
	cgt_plan(g, threads);
	/* ln_stats (the row pass opening the loop, its result an output),
	 * ln_norm, gelu and the residual add are one kernel; ln_dx opens one
	 * with the gradient accumulation; the last accumulation joins the first
	 * or token_mean_grad (as scheduled), and token_mean_grad with what reads
	 * it. */
	ck_assert(stats->group >= 0 && ln->group == stats->group);
	ck_assert(ln->group >= 0 && gelu->group == ln->group && res->group == ln->group);
	ck_assert(dx->group >= 0 && acc->group == dx->group);
	ck_assert(acc2->group >= 0 && (acc2->group == acc->group || acc2->group == acc2->in[1]->group));
	ck_assert(tmg->group >= 0 && tadd->group == tmg->group && tgelu->group == tmg->group);
	check_err(cgt_compare(g, threads, 41, 2), dt, "layer-norm block", _i, threads);
	ir_graph_free(g);
}
END_TEST

/* ---- rows of the last axis next to channel broadcasts ------------------------- */

/* On [R,D] the channels are the features too, but a group runs over one
 * kind of row: bias_add (per channel) never joins ln_norm's group. */
static const char mixed_text[] =
	"graph @mixed {\n"
	"  %0 = input {name=\"x\"} : DT[9,6]\n"
	"  $fc.b = param : DT[6]\n"
	"  $ln.gamma = param : DT[6]\n"
	"  $ln.beta = param : DT[6]\n"
	"  %4 = bias_add(%0, $fc.b) : DT[9,6]\n"
	"  %5 = ln_stats(%4) : DT[9,2]\n"
	"  %6 = ln_norm(%4, %5, $ln.gamma, $ln.beta) {eps=0.001} : DT[9,6]\n"
	"  %7 = relu(%6) : DT[9,6]\n"
	"  %8 = bias_add(%7, $fc.b) : DT[9,6]\n"
	"  %9 = gelu(%8) : DT[9,6]\n"
	"  %10 = output(%9) {name=\"y\"} : DT[9,6]\n"
	"}\n";

START_TEST(test_mixed_broadcasts)
{
	ir_dtype dt = DTYPE_OF(_i);
	int threads = THREADS_OF(_i);
	ir_graph *g = parse_as(mixed_text, dt);
	const ir_node *ln = text_node(g, 6, IR_OP_LN_NORM), *relu = text_node(g, 7, IR_OP_RELU);
	const ir_node *bias = text_node(g, 8, IR_OP_BIAS_ADD), *gelu = text_node(g, 9, IR_OP_GELU);
	cgt_plan(g, threads);
	ck_assert(ln->group >= 0 && relu->group == ln->group);
	ck_assert(bias->group != ln->group && bias->group >= 0 && gelu->group == bias->group);
	check_err(cgt_compare(g, threads, 43, 1), dt, "mixed broadcasts", _i, threads);
	ir_graph_free(g);
}
END_TEST

/* ---- NaN ------------------------------------------------------------------------ */

/* A NaN in x spoils its row of the layer norm, of softmax (a NaN first in
 * its row, where the maximum starts, or later) and GELU's element, in both
 * engines alike; +∞ in softmax's input gives inf − inf, NaN. */
static const char nan_text[] =
	"graph @nan {\n"
	"  %0 = input {name=\"x\"} : DT[4,70]\n"
	"  $ln.gamma = param : DT[70]\n"
	"  $ln.beta = param : DT[70]\n"
	"  %3 = ln_stats(%0) : DT[4,2]\n"
	"  %4 = ln_norm(%0, %3, $ln.gamma, $ln.beta) {eps=1e-05} : DT[4,70]\n"
	"  %5 = output(%4) {name=\"ln\"} : DT[4,70]\n"
	"  %6 = softmax(%0) : DT[4,70]\n"
	"  %7 = output(%6) {name=\"p\"} : DT[4,70]\n"
	"  %8 = gelu(%0) : DT[4,70]\n"
	"  %9 = output(%8) {name=\"g\"} : DT[4,70]\n"
	"}\n";

START_TEST(test_nan)
{
	ir_dtype dt = DTYPE_OF(_i);
	int threads = THREADS_OF(_i);
	/* row 0: NaN first; row 1: NaN late; row 2: +∞; row 3 clean */
	static const cgt_poke pokes[] = {{"x", 0, NAN}, {"x", 70 + 66, NAN}, {"x", 140 + 3, INFINITY}};
	static const char *const outs[3] = {"ln", "p", "g"};
	for (int o = 0; o < 3; o++) {
		ir_graph *g = parse_as(nan_text, dt);
		cgt_plan(g, threads);
		static double jit[280], ref[280];
		double err = cgt_compare_poked(g, threads, 47, 1, pokes, 3, outs[o], jit, ref);
		check_err(err, dt, outs[o], _i, threads);
		for (int r = 0; r < 4; r++)
			for (int j = 0; j < 70; j++) {
				int at = r * 70 + j;
				bool want_nan = o == 2 ? at == 0 || at == 136 : r == 0 || r == 1 || (r == 2 && o == 1);
				if (o == 0 && r == 2)
					want_nan = true; /* the variance of a row with +∞ is NaN */
				ck_assert_msg(isnan(jit[at]) == want_nan && isnan(ref[at]) == want_nan,
					"%s[%d] (%s, %d threads): JIT %g, interpreter %g", outs[o], at, ir_dtype_name(dt), threads,
					jit[at], ref[at]);
			}
		ir_graph_free(g);
	}
}
END_TEST

/* ---- ahead of time -------------------------------------------------------------- */

/* GELU in f64 calls libm's erf, which LLVM has no intrinsic for: a
 * compiled object leaves it undefined, and links with -lm (as revc compile
 * links its libraries, and as its help tells users to link an object).  (In
 * f32 it calls nothing: test_cg_gelu.c.) */
START_TEST(test_object_links_erf)
{
	ir_graph *g = block_graph(&tok_cases[0], "f64");
	cgt_plan(g, 1);
	char dir[128];
	rt_temp_template(dir, sizeof dir, "/tmp/revc-erf", strlen("/tmp/revc-erf"), "-");
	ck_assert(mkdtemp(dir));
	char obj[200], cmd[1024];
	snprintf(obj, sizeof obj, "%s/block.o", dir);
	cg_options o = {.threads = 1, .optimize = true, .name = "block"};
	ir_diags d;
	ir_diags_init(&d);
	ck_assert_msg(cg_emit_object(g, NULL, &o, obj, &d), "%s", d.n ? d.items[0].msg : "");
	ir_diags_free(&d);
	snprintf(cmd, sizeof cmd, "nm -u '%s' | grep -qw erf", obj);
	ck_assert_msg(system(cmd) == 0, "the object does not call erf");
	snprintf(cmd, sizeof cmd, "cc -shared -o '%s/block.so' '%s' -Wl,--no-undefined -lopenblas -lm", dir, obj);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	ir_graph_free(g);
}
END_TEST

/* ---- autodiff against finite differences -------------------------------------- */

/* tokens → LN → GELU → softmax(1.7·) → + tokens → mean over tokens →
 * dense → mean cross-entropy; the tokens are a param, so their gradient
 * (through ln_dx, softmax_grad and token_mean_grad) is an output too. */
static const char fwd_text[] =
	"graph @fwd {\n"
	"  %0 = input {name=\"labels\"} : i32[2]\n"
	"  $tokens.b = param : f64[2,3,5]\n"
	"  $ln.gamma = param : f64[5]\n"
	"  $ln.beta = param : f64[5]\n"
	"  $head.w = param : f64[5,4]\n"
	"  %5 = ln_stats($tokens.b) : f64[2,3,2]\n"
	"  %6 = ln_norm($tokens.b, %5, $ln.gamma, $ln.beta) {eps=1e-05} : f64[2,3,5]\n"
	"  %7 = gelu(%6) : f64[2,3,5]\n"
	"  %8 = softmax(%7) {factor=1.7} : f64[2,3,5]\n"
	"  %9 = add(%8, $tokens.b) : f64[2,3,5]\n"
	"  %10 = token_mean(%9) : f64[2,5]\n"
	"  %11 = matmul(%10, $head.w) : f64[2,4]\n"
	"  %12 = softmax_xent(%11, %0) : f64[]\n"
	"  %13 = output(%12) {name=\"loss\"} : f64[]\n"
	"}\n";

static double loss_of(rt_exec *x)
{
	rt_err e;
	ck_assert_msg(rt_exec_run(x, &e), "%s", e.msg);
	return *(const double *)rt_exec_output(x, "loss", NULL);
}

/* fwd_text differentiated and planned for `threads` threads. */
static ir_graph *differentiated(int threads)
{
	ir_graph *g = parse(fwd_text);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ps_options opts = {.only = "shape,autodiff", .verify_each = true};
	ck_assert_msg(ps_run(g, &ctx, &opts) == 0, "%s", ctx.diags.n ? ctx.diags.items[0].msg : "");
	ps_ctx_free(&ctx);
	cgt_plan(g, threads);
	return g;
}

START_TEST(test_autodiff_fd)
{
	ir_graph *g = differentiated(1);
	rt_err e;
	rt_store s;
	rt_store_init(&s);
	ck_assert_msg(rt_store_init_from_graph(&s, g, 5, &e), "%s", e.msg);
	rt_rng r;
	rt_rng_seed(&r, 53);
	for (int i = 0; i < s.n; i++)
		for (int64_t k = 0; k < ir_type_elems(&s.t[i].type); k++)
			((double *)s.t[i].data)[k] = 2 * rt_rng_uniform(&r) - 1 + (strstr(s.t[i].name, "gamma") ? 1 : 0);
	rt_exec *x = rt_exec_new(g, &s, RT_EXEC_TRACK, &e);
	ck_assert_msg(x, "%s", e.msg);
	int32_t *labels = rt_exec_input(x, "labels", NULL);
	labels[0] = 1;
	labels[1] = 3;
	double worst = 0;
	for (int i = 0; i < s.n; i++) {
		rt_tensor *p = &s.t[i];
		char name[256];
		snprintf(name, sizeof name, "grad:%s", p->name);
		const ir_type *gt;
		loss_of(x); /* at the unperturbed point */
		const double *grad = rt_exec_output(x, name, &gt);
		ck_assert_msg(grad && ir_type_same_shape(gt, &p->type), "no gradient of %s", p->name);
		int64_t count = ir_type_elems(&p->type);
		double *got = malloc((size_t)count * sizeof *got);
		memcpy(got, grad, (size_t)count * sizeof *got);
		double *v = p->data;
		for (int64_t k = 0; k < count; k++) {
			const double h = 1e-5;
			double v0 = v[k];
			v[k] = v0 + h;
			double up = loss_of(x);
			v[k] = v0 - h;
			double down = loss_of(x);
			v[k] = v0;
			double fd = (up - down) / (2 * h);
			double err = fabs(fd - got[k]) / fmax(fmax(fabs(fd), fabs(got[k])), 1e-3);
			ck_assert_msg(err < 1e-6, "grad:%s[%lld] = %.12g, finite differences %.12g", p->name,
				(long long)k, got[k], fd);
			worst = fmax(worst, err);
		}
		free(got);
	}
	if (getenv("CG_VERBOSE"))
		fprintf(stderr, "autodiff fd: worst %g\n", worst);
	rt_exec_free(x);
	rt_store_free(&s);
	ir_graph_free(g);
	/* The same differentiated step, native against the interpreter. */
	for (int threads = 1; threads <= 2; threads++) {
		g = differentiated(threads);
		check_err(cgt_compare(g, threads, 59, 1), IR_F64, "autodiff step", 0, threads);
		ir_graph_free(g);
	}
}
END_TEST

Suite *cg_norm_suite(void)
{
	Suite *s = suite_create("codegen norm");
	TCase *tc = tcase_create("norm");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_block, 0, LOOPS_OF(tok_cases));
	tcase_add_loop_test(tc, test_mixed_broadcasts, 0, 2 * NTHREADS);
	tcase_add_loop_test(tc, test_nan, 0, 2 * NTHREADS);
	tcase_add_test(tc, test_autodiff_fd);
	tcase_add_test(tc, test_object_links_erf);
	suite_add_tcase(s, tc);
	return s;
}
