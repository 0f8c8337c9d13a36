/* test_cg_epilogue.c: the epilogues of convolutions (passes/fuse.c's
 * epilogue groups, codegen/k_conv.c): a conv2d and the bn_stats of its
 * result (or the add or sub reading it), computed by one kernel; a
 * conv2d_dx and the relu_grad masking it, and maybe the bn_dgamma of
 * that one's result and its dbeta, likewise.
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
 * channel is off by O(1/tiles).
 *
 * The masked data gradient's oracle is the interpreter too, its relu_grad
 * a pass of its own: the select is exact, so the outputs differ by the
 * data gradient's own rounding (bounds 1e-5 and 1e-12, as the sub's); an
 * element or an image left unmasked is off by O(1).  So are bn_dgamma's
 * sums, in double (in another order than the interpreter's), when a tile,
 * a thread or a channel is missed. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "codegen_suites.h"
#include "internal.h" /* codegen's: cg_conv_opens_epilogue */

/* What follows the convolution y = conv(x, w). */
typedef enum {
	STATS,     /* bn_stats(y), bn_norm(y) */
	ADD_STATS, /* z = o + y, bn_stats(z), bn_norm(z) */
	SUB,       /* z = o - y (the reconstruction) */
	YADD_STATS, /* z = y + o, bn_stats(z), with y an output too */
	MASK,      /* y = conv2d_dx(dy, w), z = relu_grad(y, o) */
	DGAMMA,    /* MASK, then bn_dgamma(z, b, bn_stats(b)) and reduce_sum(z) */
} form;

typedef struct {
	cgt_conv c;
	const char *mode; /* REVC_CONV */
	bool f32_only;    /* Winograd: f32 only */
	form f;
} epi_case;

static const epi_case cases[] = {
	{{3, 5, 9, 11, 7, 3, 1, {1, 1, 1, 1}}, "direct", false, STATS},  /* odd sizes, on the padded image */
	{{5, 4, 6, 6, 6, 3, 1, {2, 0, 1, 1}}, "direct", false, ADD_STATS}, /* uneven padding, 5 images, 3 threads */
	{{3, 4, 8, 8, 5, 3, 2, {0, 1, 0, 1}}, "direct", false, STATS},   /* stride 2: unfolded */
	{{3, 4, 8, 8, 5, 3, 2, {0, 1, 0, 1}}, "direct", false, SUB},
	{{2, 6, 5, 5, 3, 1, 1, {0, 0, 0, 0}}, "direct", false, YADD_STATS}, /* 1x1 */
	{{7, 8, 8, 8, 8, 3, 1, {1, 1, 1, 1}}, "winograd2", true, STATS}, /* several images per index, a short last one */
	{{7, 8, 8, 8, 8, 3, 1, {1, 1, 1, 1}}, "winograd2", true, ADD_STATS},
	{{3, 5, 9, 11, 6, 3, 1, {1, 1, 1, 1}}, "winograd4", true, SUB}, /* partial tiles */
	{{3, 5, 9, 11, 6, 3, 1, {1, 1, 1, 1}}, "winograd4", true, STATS},
	{{3, 5, 9, 9, 7, 3, 1, {1, 1, 1, 1}}, "blas", false, STATS},
	{{3, 5, 9, 9, 7, 3, 1, {1, 1, 1, 1}}, "blas", false, ADD_STATS},
	{{1, 3, 7, 7, 4, 3, 1, {1, 1, 1, 1}}, "direct", false, STATS},   /* one image: extent 1, thread 0 alone */
	{{4, 5, 7, 9, 5, 3, 1, {1, 1, 1, 1}}, "direct", false, SUB},
	{{3, 5, 9, 11, 7, 3, 1, {1, 1, 1, 1}}, "direct", false, MASK},   /* on the padded image */
	{{3, 4, 9, 8, 5, 3, 2, {0, 1, 0, 1}}, "direct", false, MASK},   /* stride 2: phases, odd rows */
	{{2, 6, 5, 5, 3, 1, 2, {0, 0, 0, 0}}, "direct", false, MASK},   /* 1x1 at stride 2: unfolded */
	{{7, 8, 8, 8, 8, 3, 1, {1, 1, 1, 1}}, "winograd2", true, MASK}, /* several images per index */
	{{3, 5, 9, 11, 6, 3, 1, {1, 1, 1, 1}}, "winograd4", true, MASK}, /* partial tiles */
	{{3, 5, 9, 9, 7, 3, 1, {1, 1, 1, 1}}, "blas", false, MASK},
	{{1, 3, 7, 7, 4, 3, 1, {1, 1, 1, 1}}, "direct", false, MASK},   /* one image */
	{{3, 5, 9, 11, 7, 3, 1, {1, 1, 1, 1}}, "direct", false, DGAMMA},
	{{3, 4, 9, 8, 5, 3, 2, {0, 1, 0, 1}}, "direct", false, DGAMMA},
	{{7, 8, 8, 8, 8, 3, 1, {1, 1, 1, 1}}, "winograd2", true, DGAMMA},
	{{3, 5, 9, 11, 6, 3, 1, {1, 1, 1, 1}}, "winograd4", true, DGAMMA},
	{{3, 5, 9, 9, 7, 3, 1, {1, 1, 1, 1}}, "blas", false, DGAMMA},
	{{1, 3, 7, 7, 4, 3, 1, {1, 1, 1, 1}}, "direct", false, DGAMMA},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* The graph of IR text, planned with e's lowering forced. */
static ir_graph *planned(const epi_case *e, const char *text, int threads)
{
	setenv("REVC_CONV", e->mode, 1);
	ir_graph *g = cgt_parse("epilogue", text);
	cgt_plan(g, threads);
	return g;
}

/* The graph of case e: the statistics (if any) are output "stats". */
static ir_graph *epilogue_graph(const epi_case *e, ir_dtype dt, int threads)
{
	cgt_conv_text t;
	cgt_conv_text_of(&e->c, dt, &t);
	char text[4096];
	size_t at = 0, len = sizeof text;
	if (e->f == MASK || e->f == DGAMMA) { /* dy of y's type in, the data gradient of x's type out, masked by o */
		/* b's statistics first (an edge), as batch norm's forward computed them */
		cgt_line(text, len, &at, "graph @epilogue {\n  %%0 = input {name=\"b\"} : %s\n", t.x);
		cgt_line(text, len, &at, "  %%1 = bn_stats(%%0) : %s\n", t.xs);
		cgt_line(text, len, &at, "  %%2 = input {name=\"dy\"} : %s\n", t.y);
		cgt_line(text, len, &at, "  %%3 = input {name=\"w\"} : %s\n", t.w);
		cgt_line(text, len, &at, "  %%4 = conv2d_dx(%%2, %%3) %s : %s after(%%1)\n", t.attrs, t.x);
		cgt_line(text, len, &at, "  %%5 = input {name=\"o\"} : %s\n", t.x);
		cgt_line(text, len, &at, "  %%6 = relu_grad(%%4, %%5) : %s\n  %%7 = output(%%6) {name=\"z\"} : %s\n", t.x,
			t.x);
		if (e->f == DGAMMA) {
			cgt_line(text, len, &at, "  %%8 = bn_dgamma(%%6, %%0, %%1) {eps=0.001} : %s\n", t.xc);
			cgt_line(text, len, &at, "  %%9 = reduce_sum(%%6) {axes=[0,2,3]} : %s\n", t.xc);
			cgt_line(text, len, &at, "  %%10 = output(%%8) {name=\"dgamma\"} : %s\n", t.xc);
			cgt_line(text, len, &at, "  %%11 = output(%%9) {name=\"dbeta\"} : %s\n", t.xc);
		}
		cgt_line(text, len, &at, "}\n");
		return planned(e, text, threads);
	}
	cgt_line(text, len, &at, "graph @epilogue {\n  %%0 = input {name=\"x\"} : %s\n", t.x);
	cgt_line(text, len, &at, "  %%1 = input {name=\"w\"} : %s\n", t.w);
	cgt_line(text, len, &at, "  $bn.gamma = param : %s\n  $bn.beta = param : %s\n", t.yc, t.yc);
	cgt_line(text, len, &at, "  %%4 = conv2d(%%0, %%1) %s : %s\n", t.attrs, t.y);
	cgt_line(text, len, &at, "  %%5 = input {name=\"o\"} : %s\n", t.y);
	const char *v = "%4";
	if (e->f == SUB) {
		cgt_line(text, len, &at, "  %%6 = sub(%%5, %%4) : %s\n  %%7 = output(%%6) {name=\"z\"} : %s\n", t.y, t.y);
	} else {
		if (e->f != STATS) {
			v = "%6";
			if (e->f == ADD_STATS)
				cgt_line(text, len, &at, "  %%6 = add(%%5, %%4) : %s\n", t.y);
			else
				cgt_line(text, len, &at, "  %%6 = add(%%4, %%5) : %s\n", t.y);
		}
		cgt_line(text, len, &at, "  %%7 = bn_stats(%s) : %s\n", v, t.ys);
		cgt_line(text, len, &at, "  %%8 = bn_norm(%s, %%7, $bn.gamma, $bn.beta) {eps=0.001} : %s\n", v, t.y);
		cgt_line(text, len, &at, "  %%9 = output(%s) {name=\"v\"} : %s\n", v, t.y);
		cgt_line(text, len, &at,
			"  %%10 = output(%%7) {name=\"stats\"} : %s\n  %%11 = output(%%8) {name=\"norm\"} : %s\n", t.ys, t.y);
		if (e->f == YADD_STATS)
			cgt_line(text, len, &at, "  %%12 = output(%%4) {name=\"y\"} : %s\n", t.y);
	}
	cgt_line(text, len, &at, "}\n");
	return planned(e, text, threads);
}

/* The convolution opens an epilogue group with the rest of the case's
 * form right after it. */
static void assert_epilogue(const ir_graph *g, form f)
{
	static const int members[] = {[STATS] = 2, [ADD_STATS] = 3, [SUB] = 2, [YADD_STATS] = 3, [MASK] = 2,
		[DGAMMA] = 4};
	int found = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != (f == MASK || f == DGAMMA ? IR_OP_CONV2D_DX : IR_OP_CONV2D))
			continue;
		ck_assert_msg(cg_conv_opens_epilogue(n), "the convolution is in no epilogue group");
		int k = 1;
		while (i + k < g->n && g->nodes[i + k]->group == n->group)
			k++;
		ck_assert_int_eq(k, members[f]);
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
	assert_epilogue(g, e->f);
	if (e->f == SUB || e->f == MASK || e->f == DGAMMA) {
		double err = cgt_compare(g, threads, 9 + (uint64_t)_i, 1);
		ck_assert_msg(err <= (dt == IR_F32 ? 1e-5 : 1e-12), "case %d (%s), %d threads: %g", _i % NCASES,
			e->mode, threads, err);
		ir_graph_free(g);
		unsetenv("REVC_CONV");
		return;
	}
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
