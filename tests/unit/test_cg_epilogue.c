/* test_cg_epilogue.c: the batch-norm statistics epilogue of convolutions
 * (passes/fuse.c's epilogue groups, codegen/k_conv.c): a conv2d and the
 * bn_stats of its result, computed by one kernel.
 *
 * The oracle is the interpreter, which runs bn_stats' own two passes over
 * the whole tensor: the JIT's statistics (per tile a mean and the sum of
 * squared deviations from it, the tiles and then the threads' partials
 * added by Chan's formula) must match them per channel, the mean within
 * `bound` of the channel's standard deviation and the variance within
 * `bound` relative, on every lowering (direct on the image, unfolded at
 * stride 2, Winograd F(2x2) and F(4x4), BLAS), in f32 and f64, on odd
 * shapes, with 1 to 3 threads; and two runs on the same data must give
 * the same bits (the threads' partials are added in thread order).
 *
 * Measured worst (CG_VERBOSE=1; 2-core AMD EPYC Zen 4): f32 1.1e-7, with
 * F(4x4), whose output differs from the interpreter's by 1.5e-6 (the
 * statistics are computed in double from each backend's own f32 result:
 * with the direct lowering they differ by 1e-8 at most); f64 1.8e-15.
 * Bounds 1e-6 and 1e-12; a statistic missing a tile, a thread or a
 * channel is off by O(1/tiles). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "codegen_suites.h"
#include "internal.h" /* codegen's: cg_conv_has_stats */

typedef struct {
	cgt_conv c;
	const char *mode; /* REVC_CONV */
	bool f32_only;    /* Winograd: f32 only */
} epi_case;

static const epi_case cases[] = {
	{{3, 5, 9, 11, 7, 3, 1, {1, 1, 1, 1}}, "direct", false},  /* odd sizes, on the padded image */
	{{5, 4, 6, 6, 6, 3, 1, {2, 0, 1, 1}}, "direct", false},   /* uneven padding, 5 images on 3 threads */
	{{3, 4, 8, 8, 5, 3, 2, {0, 1, 0, 1}}, "direct", false},   /* stride 2: unfolded */
	{{2, 6, 5, 5, 3, 1, 1, {0, 0, 0, 0}}, "direct", false},   /* 1x1 */
	{{7, 8, 8, 8, 8, 3, 1, {1, 1, 1, 1}}, "winograd2", true}, /* several images per index, a short last one */
	{{3, 5, 9, 11, 6, 3, 1, {1, 1, 1, 1}}, "winograd4", true}, /* partial tiles */
	{{3, 5, 9, 9, 7, 3, 1, {1, 1, 1, 1}}, "blas", false},
	{{1, 3, 7, 7, 4, 3, 1, {1, 1, 1, 1}}, "direct", false},   /* one image: extent 1, thread 0 alone */
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* conv -> bn_stats -> bn_norm, with y, the statistics and the normalised
 * result as outputs. */
static ir_graph *epilogue_graph(const epi_case *e, ir_dtype dt, int threads)
{
	const cgt_conv *c = &e->c;
	const char *t = dt == IR_F32 ? "f32" : "f64";
	int64_t ho = (c->h + c->pad[0] + c->pad[1] - c->k) / c->s + 1;
	int64_t wo = (c->w + c->pad[2] + c->pad[3] - c->k) / c->s + 1;
	char y[96], text[2048];
	snprintf(y, sizeof y, "%s[%lld,%lld,%lld,%lld]", t, (long long)c->n, (long long)c->o, (long long)ho,
		(long long)wo);
	snprintf(text, sizeof text,
		"graph @epilogue {\n"
		"  %%0 = input {name=\"x\"} : %s[%lld,%lld,%lld,%lld]\n"
		"  %%1 = input {name=\"w\"} : %s[%lld,%lld,%lld,%lld]\n"
		"  $bn.gamma = param : %s[%lld]\n"
		"  $bn.beta = param : %s[%lld]\n"
		"  %%4 = conv2d(%%0, %%1) {stride=%lld, pad=[%lld,%lld,%lld,%lld]} : %s\n"
		"  %%5 = input {name=\"other\"} : %s\n"
		"  %%6 = relu(%%5) : %s\n"
		"  %%7 = bn_stats(%%4) : %s[2,%lld]\n"
		"  %%8 = bn_norm(%%4, %%7, $bn.gamma, $bn.beta) {eps=0.001} : %s\n"
		"  %%9 = output(%%4) {name=\"y\"} : %s\n"
		"  %%10 = output(%%7) {name=\"stats\"} : %s[2,%lld]\n"
		"  %%11 = output(%%8) {name=\"z\"} : %s\n"
		"  %%12 = output(%%6) {name=\"other\"} : %s\n"
		"}\n",
		t, (long long)c->n, (long long)c->c, (long long)c->h, (long long)c->w, t, (long long)c->o,
		(long long)c->c, (long long)c->k, (long long)c->k, t, (long long)c->o, t, (long long)c->o,
		(long long)c->s, (long long)c->pad[0], (long long)c->pad[1], (long long)c->pad[2],
		(long long)c->pad[3], y, y, y, t, (long long)c->o, y, y, t, (long long)c->o, y, y);
	setenv("REVC_CONV", e->mode, 1);
	ir_graph *g = cgt_parse("epilogue", text);
	cgt_plan(g, threads);
	return g;
}

/* The conv2d opens an epilogue group with its bn_stats right after it. */
static void assert_epilogue(const ir_graph *g)
{
	int found = 0;
	for (int i = 0; i + 1 < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_CONV2D)
			continue;
		ck_assert_msg(cg_conv_has_stats(n), "the conv2d is in no epilogue group");
		ck_assert(g->nodes[i + 1]->op == IR_OP_BN_STATS && g->nodes[i + 1]->group == n->group);
		found++;
	}
	ck_assert_int_eq(found, 1);
}

START_TEST(test_epilogue)
{
	const epi_case *e = &cases[_i % NCASES];
	ir_dtype dt = _i / NCASES % 2 ? IR_F64 : IR_F32;
	int threads = 1 + _i / (2 * NCASES);
	if (dt == IR_F64 && e->f32_only)
		return;
	ir_graph *g = epilogue_graph(e, dt, threads);
	assert_epilogue(g);
	int64_t C = e->c.o;
	double *jit = malloc(2 * (size_t)C * sizeof *jit), *ref = malloc(2 * (size_t)C * sizeof *ref);
	double *again = malloc(2 * (size_t)C * sizeof *again), *ref2 = malloc(2 * (size_t)C * sizeof *ref2);
	ck_assert(jit && ref && again && ref2);
	double bound = dt == IR_F32 ? 1e-6 : 1e-12;
	double err = cgt_compare_poked(g, threads, 9 + (uint64_t)_i, 1, NULL, 0, "stats", jit, ref);
	ck_assert_msg(err <= (dt == IR_F32 ? 1e-5 : 1e-12), "case %d (%s), %d threads: outputs %g", _i % NCASES,
		e->mode, threads, err);
	double worst = 0;
	for (int64_t c = 0; c < C; c++) {
		double sd = sqrt(ref[C + c]);
		ck_assert(sd > 0);
		worst = fmax(worst, fabs(jit[c] - ref[c]) / sd);
		worst = fmax(worst, fabs(jit[C + c] - ref[C + c]) / ref[C + c]);
	}
	if (getenv("CG_VERBOSE"))
		fprintf(stderr, "epilogue: case %d (%s) %s, %d threads: stats %.3g, outputs %.3g\n", _i % NCASES, e->mode,
			dt == IR_F32 ? "f32" : "f64", threads, worst, err);
	ck_assert_msg(worst <= bound, "case %d (%s), %d threads: statistics off by %g", _i % NCASES, e->mode,
		threads, worst);
	/* The same data again: the same bits. */
	cgt_compare_poked(g, threads, 9 + (uint64_t)_i, 1, NULL, 0, "stats", again, ref2);
	ck_assert(memcmp(jit, again, 2 * (size_t)C * sizeof *jit) == 0);
	free(jit);
	free(ref);
	free(again);
	free(ref2);
	ir_graph_free(g);
	unsetenv("REVC_CONV");
}
END_TEST

/* REVC_EPILOGUE=0: no epilogue group, the conv and bn_stats kernels of
 * their own (the comparison revc bench makes), and the same results. */
START_TEST(test_epilogue_off)
{
	setenv("REVC_EPILOGUE", "0", 1);
	ir_graph *g = epilogue_graph(&cases[0], IR_F32, 2);
	for (int i = 0; i < g->n; i++)
		ck_assert_int_lt(g->nodes[i]->group, 0);
	ck_assert(cgt_compare(g, 2, 9, 1) <= 1e-5);
	ir_graph_free(g);
	unsetenv("REVC_EPILOGUE");
	unsetenv("REVC_CONV");
}
END_TEST

Suite *cg_epilogue_suite(void)
{
	Suite *s = suite_create("codegen epilogue");
	TCase *tc = tcase_create("epilogue");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_epilogue, 0, 3 * 2 * NCASES);
	tcase_add_test(tc, test_epilogue_off);
	suite_add_tcase(s, tc);
	return s;
}
