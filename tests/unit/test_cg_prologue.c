/* test_cg_prologue.c: the prologues of convolutions (passes/fuse.c's
 * prologue groups, codegen/k_conv_prologue.c): bn_norm, the relu reading
 * it and the conv2d reading that, computed by the convolution's kernel as
 * it copies its input, and then the convolution's epilogue if it has one.
 *
 * The oracle is the interpreter, which runs bn_norm and relu as kernels of
 * their own and stores their results.  The prologue computes each element
 * as bn_norm's kernel does and the padding stays zero, so the outputs
 * differ by the convolution's own rounding only (bounds 1e-5 and 1e-12, as
 * the epilogues'), on every lowering: direct on the padded image, by
 * phases at stride 2, a 1x1 without padding (a copy made for the
 * prologue), unfolded (1x1 at stride 2), Winograd F(2x2) and F(4x4), BLAS;
 * in f32 and f64, with 1 to 3 threads.  An element that skipped batch norm
 * or the ReLU, or padding that went through them (relu(shift) is not
 * zero), is off by O(1). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "codegen_suites.h"
#include "internal.h" /* codegen's: cg_conv_has_prologue */

/* What follows the convolution y = conv(relu(bn_norm(x)), w). */
typedef enum {
	ALONE,     /* y an output */
	STATS,     /* bn_stats(y) */
	ADD_STATS, /* z = o + y, bn_stats(z) */
	SUB,       /* z = o - y */
} form;

typedef struct {
	cgt_conv c;
	const char *mode; /* REVC_CONV */
	bool f32_only;    /* Winograd: f32 only */
	form f;
} pro_case;

static const pro_case cases[] = {
	{{3, 5, 9, 11, 7, 3, 1, {1, 1, 1, 1}}, "direct", false, ALONE},     /* odd sizes, on the padded image */
	{{5, 4, 6, 6, 6, 3, 1, {2, 0, 1, 1}}, "direct", false, ADD_STATS}, /* uneven padding, 5 images */
	{{3, 4, 9, 8, 5, 3, 2, {0, 1, 0, 1}}, "direct", false, STATS},     /* stride 2: phases, odd rows */
	{{2, 6, 5, 5, 3, 1, 1, {0, 0, 0, 0}}, "direct", false, SUB},       /* 1x1, no padding: a copy for it */
	{{2, 6, 5, 5, 3, 1, 2, {0, 0, 0, 0}}, "direct", false, ALONE},     /* 1x1 at stride 2: unfolded */
	{{7, 8, 8, 8, 8, 3, 1, {1, 1, 1, 1}}, "winograd2", true, STATS},   /* several images per index */
	{{7, 8, 8, 8, 8, 3, 1, {1, 1, 1, 1}}, "winograd2", true, ALONE},
	{{3, 5, 9, 11, 6, 3, 1, {1, 1, 1, 1}}, "winograd4", true, SUB},    /* partial tiles */
	{{3, 5, 9, 11, 6, 3, 1, {1, 1, 1, 1}}, "winograd4", true, ADD_STATS},
	{{3, 5, 9, 9, 7, 3, 1, {1, 1, 1, 1}}, "blas", false, STATS},
	{{3, 5, 9, 9, 7, 3, 1, {1, 1, 1, 1}}, "blas", false, ALONE},
	{{1, 3, 7, 7, 4, 3, 1, {1, 1, 1, 1}}, "direct", false, STATS},     /* one image: extent 1 */
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* The graph of case p, planned with its lowering forced; with `seen`, the
 * relu is an output too (so no prologue can be made). */
static ir_graph *prologue_graph(const pro_case *p, ir_dtype dt, int threads, bool seen)
{
	cgt_conv_text t;
	cgt_conv_text_of(&p->c, dt, &t);
	char text[4096];
	size_t at = 0, len = sizeof text;
	cgt_line(text, len, &at, "graph @prologue {\n  %%0 = input {name=\"x\"} : %s\n", t.x);
	cgt_line(text, len, &at, "  %%1 = input {name=\"w\"} : %s\n", t.w);
	cgt_line(text, len, &at, "  $bn.gamma = param : %s\n  $bn.beta = param : %s\n", t.xc, t.xc);
	cgt_line(text, len, &at, "  %%4 = bn_stats(%%0) : %s\n", t.xs);
	cgt_line(text, len, &at, "  %%5 = bn_norm(%%0, %%4, $bn.gamma, $bn.beta) {eps=0.001} : %s\n", t.x);
	cgt_line(text, len, &at, "  %%6 = relu(%%5) : %s\n", t.x);
	cgt_line(text, len, &at, "  %%7 = conv2d(%%6, %%1) %s : %s\n", t.attrs, t.y);
	cgt_line(text, len, &at, "  %%8 = input {name=\"o\"} : %s\n", t.y);
	const char *v = "%7";
	if (p->f == ADD_STATS || p->f == SUB) {
		v = "%9";
		cgt_line(text, len, &at, "  %%9 = %s(%%8, %%7) : %s\n", p->f == SUB ? "sub" : "add", t.y);
	}
	cgt_line(text, len, &at, "  %%10 = output(%s) {name=\"z\"} : %s\n", v, t.y);
	if (p->f == STATS || p->f == ADD_STATS)
		cgt_line(text, len, &at, "  %%11 = bn_stats(%s) : %s\n  %%12 = output(%%11) {name=\"stats\"} : %s\n", v,
			t.ys, t.ys);
	if (seen)
		cgt_line(text, len, &at, "  %%13 = output(%%6) {name=\"a\"} : %s\n", t.x);
	cgt_line(text, len, &at, "}\n");
	setenv("REVC_CONV", p->mode, 1);
	ir_graph *g = cgt_parse("prologue", text);
	cgt_plan(g, threads);
	return g;
}

/* The group of the conv2d: bn_norm, relu, the conv2d and `after` more
 * members; or, when `after` < 0, the conv2d has no prologue. */
static void assert_prologue(const ir_graph *g, int after)
{
	int found = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_CONV2D)
			continue;
		found++;
		if (after < 0) {
			ck_assert(!cg_conv_has_prologue(n));
			continue;
		}
		ck_assert_msg(cg_conv_has_prologue(n), "the convolution has no prologue");
		ck_assert(i >= 2 && g->nodes[i - 2]->op == IR_OP_BN_NORM && g->nodes[i - 2]->group == n->group);
		int k = 1;
		while (i + k < g->n && g->nodes[i + k]->group == n->group)
			k++;
		ck_assert_int_eq(k - 1, after);
	}
	ck_assert_int_eq(found, 1);
}

START_TEST(test_prologue)
{
	static const int after[] = {[ALONE] = 0, [STATS] = 1, [ADD_STATS] = 2, [SUB] = 1};
	const pro_case *p = &cases[_i % NCASES];
	ir_dtype dt = _i / NCASES % 2 ? IR_F64 : IR_F32;
	int threads = 1 + _i / (2 * NCASES);
	if (dt == IR_F64 && p->f32_only)
		return;
	ir_graph *g = prologue_graph(p, dt, threads, false);
	assert_prologue(g, after[p->f]);
	double err = cgt_compare(g, threads, 19 + (uint64_t)_i, 1);
	if (getenv("CG_VERBOSE"))
		fprintf(stderr, "prologue: case %d (%s) %s, %d threads: %.3g\n", _i % NCASES, p->mode,
			dt == IR_F32 ? "f32" : "f64", threads, err);
	ck_assert_msg(err <= (dt == IR_F32 ? 1e-5 : 1e-12), "case %d (%s), %d threads: %g", _i % NCASES, p->mode,
		threads, err);
	ir_graph_free(g);
	unsetenv("REVC_CONV");
}
END_TEST

/* A relu read by another node too is stored, so it makes no prologue; nor
 * does anything with REVC_PROLOGUE=0.  The results are the same. */
START_TEST(test_prologue_not_made)
{
	ir_graph *g = prologue_graph(&cases[1], IR_F32, 2, true);
	assert_prologue(g, -1);
	ck_assert(cgt_compare(g, 2, 19, 1) <= 1e-5);
	ir_graph_free(g);
	setenv("REVC_PROLOGUE", "0", 1);
	g = prologue_graph(&cases[1], IR_F32, 2, false);
	assert_prologue(g, -1);
	ck_assert(cgt_compare(g, 2, 19, 1) <= 1e-5);
	ir_graph_free(g);
	unsetenv("REVC_PROLOGUE");
	unsetenv("REVC_CONV");
}
END_TEST

Suite *cg_prologue_suite(void)
{
	Suite *s = suite_create("codegen prologue");
	TCase *tc = tcase_create("prologue");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_prologue, 0, 3 * 2 * NCASES);
	tcase_add_test(tc, test_prologue_not_made);
	suite_add_tcase(s, tc);
	return s;
}
