/* test_cg_conv_dx.c: the stride-2 data gradient by the phases of dX
 * (codegen/k_conv_dx_phases.c) against the interpreter (cgt_compare), the
 * oracle, in f32 and f64 on 1, 2 and 3 threads; the result must not
 * depend on the thread count, bit for bit.  The cases reach every part
 * of the index algebra: fashion's two stage boundaries, odd sizes (phases
 * of unequal rows and columns), rows and columns no window reads (their
 * gradient zero, from the padding), paddings as large as the window (dY
 * elements no phase reads), an unpadded 2x2 window (dY read in place),
 * windows of 2x3 and 3x2, a single row or column (empty phases), rows longer
 * than two vectors.  Convolutions it must refuse (a phase without a tap,
 * another stride, more taps than the products take) stay unfolded, and
 * still agree.
 *
 * Bounds as test_codegen.c's: 1e-5 relative in f32, 1e-12 in f64.  The
 * measured worst (CG_VERBOSE=1; 2-core AMD EPYC Zen 4, the same natively
 * with AVX-512 and with REVC_CPU=x86-64-v3): 5.0e-7 and 9.1e-16, on
 * fashion's 14x14 layer, so margins of 20 and 1100; a wrong tap or phase
 * is off by O(1). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_suites.h"
#include "internal.h" /* codegen's: cg_conv_implicit, cg_conv_dx_phases_fits */

typedef struct {
	int64_t n, c, h, w, o, kh, kw, s, pad[4];
} dx_case;

static const dx_case phased[] = {
	{50, 16, 14, 14, 32, 3, 3, 2, {0, 1, 0, 1}}, /* fashion: 14x14 -> 7x7 */
	{50, 8, 28, 28, 16, 3, 3, 2, {0, 1, 0, 1}},  /* fashion: 28x28 -> 14x14 */
	{3, 5, 7, 9, 4, 3, 3, 2, {0, 1, 0, 1}},      /* phases of 4 and 3 rows, 5 and 4 columns */
	{3, 4, 8, 8, 6, 3, 3, 2, {0, 0, 0, 0}},      /* the last row and column in no window */
	{2, 3, 6, 5, 4, 3, 3, 2, {3, 2, 2, 3}},      /* padding as large as the window */
	{2, 3, 8, 10, 4, 2, 2, 2, {0, 0, 0, 0}},     /* dY read in place */
	{2, 4, 9, 7, 3, 2, 3, 2, {1, 0, 0, 2}},      /* a 2x3 window */
	{2, 3, 11, 6, 5, 3, 2, 2, {2, 1, 0, 1}},     /* a 3x2 window */
	{2, 3, 5, 1, 3, 3, 2, 2, {1, 1, 1, 0}},      /* one column: no odd columns */
	{2, 3, 1, 6, 4, 2, 3, 2, {1, 0, 1, 1}},      /* one row: no odd rows */
	{2, 2, 9, 75, 3, 3, 3, 2, {1, 1, 1, 1}},     /* phase rows of 38: more than two vectors */
};
#define NPHASED ((int)(sizeof phased / sizeof phased[0]))

static const dx_case refused[] = {
	{2, 3, 8, 8, 4, 1, 1, 2, {0, 0, 0, 0}}, /* 1x1: three phases have no tap */
	{2, 3, 9, 9, 4, 3, 3, 3, {0, 0, 0, 0}}, /* stride 3 */
	{2, 3, 12, 12, 4, 5, 5, 2, {2, 2, 2, 2}}, /* 25 taps */
};
#define NREFUSED ((int)(sizeof refused / sizeof refused[0]))

static int64_t out_size(int64_t n, int64_t k, int64_t s, int64_t lo, int64_t hi)
{
	return (n + lo + hi - k) / s + 1;
}

static ir_conv_geom geom_of(const dx_case *c)
{
	return (ir_conv_geom){c->n, c->c, c->h, c->w, c->o, c->kh, c->kw,
		out_size(c->h, c->kh, c->s, c->pad[0], c->pad[1]), out_size(c->w, c->kw, c->s, c->pad[2], c->pad[3]),
		c->s, c->pad[0], c->pad[1], c->pad[2], c->pad[3], IR_OP_CONV2D_DX};
}

/* dx = conv2d_dx(dy, w) alone, planned for `threads` threads. */
static ir_graph *dx_graph(const dx_case *c, ir_dtype dt, int threads)
{
	ir_conv_geom g = geom_of(c);
	const char *t = ir_dtype_name(dt);
	char text[1024];
	snprintf(text, sizeof text,
		"graph @dx {\n"
		"  %%0 = input {name=\"dy\"} : %s[%lld,%lld,%lld,%lld]\n"
		"  %%1 = input {name=\"w\"} : %s[%lld,%lld,%lld,%lld]\n"
		"  %%2 = conv2d_dx(%%0, %%1) {stride=%lld, pad=[%lld,%lld,%lld,%lld]} : %s[%lld,%lld,%lld,%lld]\n"
		"  %%3 = output(%%2) {name=\"dx\"} : %s[%lld,%lld,%lld,%lld]\n"
		"}\n",
		t, (long long)g.n, (long long)g.o, (long long)g.ho, (long long)g.wo,
		t, (long long)g.o, (long long)g.c, (long long)g.kh, (long long)g.kw,
		(long long)g.s, (long long)g.pt, (long long)g.pb, (long long)g.pl, (long long)g.pr,
		t, (long long)g.n, (long long)g.c, (long long)g.h, (long long)g.w,
		t, (long long)g.n, (long long)g.c, (long long)g.h, (long long)g.w);
	ir_graph *ir = cgt_parse("dx.ir", text);
	cgt_plan(ir, threads);
	return ir;
}

/* Case c in dt on 1, 2 and 3 threads: each within the bound of the
 * interpreter, and all three the same bit for bit. */
static void check_threads(const dx_case *c, ir_dtype dt, int i)
{
	int64_t elems = c->n * c->c * c->h * c->w;
	double *ref = malloc((size_t)elems * sizeof *ref), *jit[3];
	double bound = dt == IR_F32 ? 1e-5 : 1e-12;
	for (int t = 0; t < 3; t++) {
		jit[t] = malloc((size_t)elems * sizeof *jit[t]);
		ir_graph *g = dx_graph(c, dt, t + 1);
		double err = cgt_compare_poked(g, t + 1, 5 + (uint64_t)i, 1, NULL, 0, "dx", jit[t], ref);
		ck_assert_msg(err <= bound, "case %d (%s), %d threads: %g", i, ir_dtype_name(dt), t + 1, err);
		ck_assert_msg(!t || !memcmp(jit[t], jit[0], (size_t)elems * sizeof *ref),
			"case %d (%s): %d threads differ from 1", i, ir_dtype_name(dt), t + 1);
		ir_graph_free(g);
	}
	for (int t = 0; t < 3; t++)
		free(jit[t]);
	free(ref);
}

START_TEST(test_dx_phases)
{
	const dx_case *c = &phased[_i % NPHASED];
	ir_conv_geom g = geom_of(c);
	ck_assert(cg_conv_dx_phases_fits(&g));
	ck_assert(cg_conv_implicit(&g));
	check_threads(c, _i / NPHASED ? IR_F64 : IR_F32, _i);
}
END_TEST

START_TEST(test_dx_refused)
{
	const dx_case *c = &refused[_i % NREFUSED];
	ir_conv_geom g = geom_of(c);
	ck_assert(!cg_conv_dx_phases_fits(&g));
	ck_assert(!cg_conv_implicit(&g));
	check_threads(c, _i / NREFUSED ? IR_F64 : IR_F32, _i);
}
END_TEST

/* REVC_CONV=blas unfolds every convolution, this one too. */
START_TEST(test_dx_blas)
{
	setenv("REVC_CONV", "blas", 1);
	ir_conv_geom g = geom_of(&phased[0]);
	ck_assert(!cg_conv_implicit(&g));
	unsetenv("REVC_CONV");
	ck_assert(cg_conv_implicit(&g));
}
END_TEST

Suite *cg_conv_dx_suite(void)
{
	Suite *s = suite_create("codegen conv dx");
	TCase *tc = tcase_create("dx phases");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_dx_phases, 0, 2 * NPHASED);
	tcase_add_loop_test(tc, test_dx_refused, 0, 2 * NREFUSED);
	tcase_add_test(tc, test_dx_blas);
	suite_add_tcase(s, tc);
	return s;
}
