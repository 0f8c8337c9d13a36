/* test_cg_winograd.c: Winograd convolutions (codegen/k_conv_winograd.c)
 * forced with REVC_CONV, and the cost model's choice.
 *
 * Two oracles.  The error of each lowering against the exact (f64 direct)
 * convolution of the same f32 operands, on the 3x3 stride-1 layers of the
 * presets fashion and revnet-38 (batch 4, operands uniform in [-1, 1)),
 * as max|a-b| / max|b| over each of conv2d's, conv2d_dx's and conv2d_dw's
 * results; and the JIT
 * against the interpreter (cgt_compare), on those layers and on small
 * cases that reach every path (several images per index with a short last
 * one, partial tiles at the right and bottom edges, uneven and no padding,
 * tile rows longer than a vector, so that the strips take several; chunks
 * of some tile rows of an image, the last with the partial tile row; tile
 * rows too wide for the input transform to carry row sums; narrow planes
 * whose vectors hold several tile rows, in whole groups, a last group of
 * fewer rows, with a partial last row, and groups cut short by chunks).
 *
 * Measured worst against f64 (CG_VERBOSE=1 prints them; 2-core AMD EPYC
 * Zen 4, the same natively with AVX-512 and with REVC_CPU=x86-64-v3):
 * direct 8.2e-7, F(2x2) 3.5e-7 (its products are 9/4 times shorter and its
 * constants 1 and 1/2), F(4x4) 7.3e-6, all at 56 channels, the widest
 * layer; the JIT against the interpreter at most 5.9e-7 (F(2x2)) and
 * 4.9e-6 (F(4x4)).  The bounds, 2e-6 for direct and F(2x2) and 2e-5 for
 * F(4x4), leave margins of 2.4 or more; a wrong
 * transform is off by O(1).  The filter gradient, whose sums run over the
 * batch's tiles: direct 1.7e-7, F(2x2) 2.1e-7, F(4x4) 2.0e-6 at worst,
 * bounded by 1e-6 and 1e-5 (margins of 4.7 and 5). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "codegen_suites.h"
#include "internal.h" /* codegen's: cg_conv_lowering_of */
#include "rt.h"
#include "test_cpu.h"

/* The presets' 3x3 stride-1 layers: fashion's three stages, revnet-38's. */
static const cgt_conv layers[] = {
	{4, 8, 28, 28, 8, 3, 1, {1, 1, 1, 1}},
	{4, 16, 14, 14, 16, 3, 1, {1, 1, 1, 1}},
	{4, 32, 7, 7, 32, 3, 1, {1, 1, 1, 1}},
	{4, 16, 32, 32, 16, 3, 1, {1, 1, 1, 1}},
	{4, 32, 16, 16, 32, 3, 1, {1, 1, 1, 1}},
	{4, 56, 8, 8, 56, 3, 1, {1, 1, 1, 1}},
};
#define NLAYERS ((int)(sizeof layers / sizeof layers[0]))

/* Every path of the kernel. */
static const cgt_conv paths[] = {
	{7, 8, 8, 8, 8, 3, 1, {1, 1, 1, 1}},   /* 3 images per index, the last index 1 */
	{3, 5, 9, 11, 6, 3, 1, {2, 0, 1, 1}},  /* odd sizes, uneven padding */
	{2, 3, 6, 6, 4, 3, 1, {0, 0, 0, 0}},   /* no padding: dx padded by 2 */
	{2, 4, 5, 5, 3, 3, 1, {1, 1, 1, 1}},   /* one partial tile of F(4x4) */
	{2, 3, 9, 37, 5, 3, 1, {1, 1, 1, 1}},  /* tile rows of 19 (F(2x2)) and 10 tiles: more than a vector */
	{2, 16, 33, 33, 16, 3, 1, {1, 1, 1, 1}}, /* chunks of tile rows ending mid-image, the last partial */
	{2, 3, 5, 101, 4, 3, 1, {1, 0, 1, 1}},  /* tile rows of 51 tiles: too many vectors to carry row sums */
	/* narrow planes, several tile rows a vector (packed_rows): */
	{3, 4, 13, 13, 5, 3, 1, {1, 1, 1, 1}},  /* groups, then one lone row, partial (F(2x2): 7 tiles a row) */
	{2, 3, 3, 3, 2, 3, 1, {1, 1, 1, 1}},    /* one group of a partial row or two (1 or 2 tiles a row) */
	{1, 200, 10, 10, 200, 3, 1, {1, 1, 1, 1}}, /* chunks of 2 tile rows of 5 tiles: groups cut by chunks */
};
#define NPATHS ((int)(sizeof paths / sizeof paths[0]))

static const char *const modes[] = {"direct", "winograd2", "winograd4"};
static const cg_conv_lowering lowerings[] = {CG_CONV_DIRECT, CG_CONV_WINOGRAD2, CG_CONV_WINOGRAD4};
static const double bounds[] = {2e-6, 2e-6, 2e-5};
static const double dw_bounds[] = {1e-6, 1e-6, 1e-5};

/* The conv graph of c with REVC_CONV=mode, its convolutions checked to be
 * lowered so. */
static ir_graph *forced(const cgt_conv *c, int mode, int threads)
{
	setenv("REVC_CONV", modes[mode], 1);
	ir_graph *g = cgt_conv_graph(c, IR_F32, threads);
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_CONV2D && n->op != IR_OP_CONV2D_DX && n->op != IR_OP_CONV2D_DW)
			continue;
		ir_conv_geom geom = ir_conv_geom_of(n);
		ck_assert_int_eq(cg_conv_lowering_of(&geom, IR_F32, NULL), lowerings[mode]);
	}
	return g;
}

static void fill(rt_exec *x, const char *name, rt_rng *r, double *copy)
{
	const ir_type *t;
	float *p = rt_exec_input(x, name, &t);
	ck_assert(p);
	for (int64_t i = 0; i < ir_type_elems(t); i++)
		copy[i] = p[i] = (float)(2 * rt_rng_uniform(r) - 1);
}

/* y, dx and dw of c in f64, directly. */
static void exact(const cgt_conv *c, const double *x, const double *w, const double *dy, double *y, double *dx,
	double *dw)
{
	int64_t ho = c->h + c->pad[0] + c->pad[1] - 2, wo = c->w + c->pad[2] + c->pad[3] - 2;
	for (int64_t i = 0; i < c->n * c->o * ho * wo; i++)
		y[i] = 0;
	for (int64_t i = 0; i < c->n * c->c * c->h * c->w; i++)
		dx[i] = 0;
	for (int64_t i = 0; i < c->o * c->c * 9; i++)
		dw[i] = 0;
	for (int64_t n = 0; n < c->n; n++)
		for (int64_t o = 0; o < c->o; o++)
			for (int64_t ch = 0; ch < c->c; ch++)
				for (int64_t a = 0; a < 3; a++)
					for (int64_t b = 0; b < 3; b++) {
						int64_t tap = ((o * c->c + ch) * 3 + a) * 3 + b;
						double f = w[tap];
						for (int64_t i = 0; i < ho; i++)
							for (int64_t j = 0; j < wo; j++) {
								int64_t h = i + a - c->pad[0], v = j + b - c->pad[2];
								if (h < 0 || h >= c->h || v < 0 || v >= c->w)
									continue;
								int64_t at = ((n * c->c + ch) * c->h + h) * c->w + v;
								int64_t out = ((n * c->o + o) * ho + i) * wo + j;
								y[out] += f * x[at];
								dx[at] += f * dy[out];
								dw[tap] += x[at] * dy[out];
							}
					}
}

static double worst_of(const rt_exec *x, const char *name, const double *want)
{
	const ir_type *t;
	const float *got = rt_exec_output(x, name, &t);
	ck_assert(got);
	double diff = 0, scale = 1e-300;
	for (int64_t i = 0; i < ir_type_elems(t); i++) {
		diff = fmax(diff, fabs((double)got[i] - want[i]));
		scale = fmax(scale, fabs(want[i]));
	}
	return diff / scale;
}

/* Frees what a native run of a forced graph made. */
static void teardown(rt_exec *x, rt_pool *pool, cg_jit *j, rt_store *s, ir_graph *g)
{
	rt_exec_free(x);
	rt_pool_free(pool);
	cg_jit_free(j);
	rt_store_free(s);
	ir_graph_free(g);
	unsetenv("REVC_CONV");
}

/* Each lowering against the exact convolution, on the presets' layers. */
START_TEST(test_winograd_exact)
{
	const cgt_conv *c = &layers[_i % NLAYERS];
	int mode = _i / NLAYERS;
	ir_graph *g = forced(c, mode, 2);
	rt_err e;
	rt_store s;
	rt_store_init(&s);
	ck_assert_msg(rt_store_init_from_graph(&s, g, 1, &e), "%s", e.msg);
	cg_options o = {.threads = 2, .optimize = true, .cpu = test_cpu()};
	cg_stats stats = {0};
	ir_diags d;
	ir_diags_init(&d);
	cg_jit *j = cg_jit_compile(g, &o, &stats, &d);
	ck_assert_msg(j, "compile: %s", d.n ? d.items[0].msg : "");
	ir_diags_free(&d);
	rt_pool *pool = rt_pool_new(2);
	rt_exec *x = rt_exec_new_native(g, &s, cg_jit_step(j), pool, &e);
	ck_assert_msg(x, "%s", e.msg);
	int64_t nx = c->n * c->c * c->h * c->w, nw = c->o * c->c * 9, ny = c->n * c->o * c->h * c->w;
	double *xs = malloc((size_t)nx * sizeof *xs), *ws = malloc((size_t)nw * sizeof *ws);
	double *dys = malloc((size_t)ny * sizeof *dys), *ys = malloc((size_t)ny * sizeof *ys);
	double *dxs = malloc((size_t)nx * sizeof *dxs), *dws = malloc((size_t)nw * sizeof *dws);
	ck_assert(xs && ws && dys && ys && dxs && dws);
	rt_rng r;
	rt_rng_seed(&r, 11 + (uint64_t)_i);
	fill(x, "x", &r, xs);
	fill(x, "w", &r, ws);
	fill(x, "dy", &r, dys);
	ck_assert_msg(rt_exec_run(x, &e), "%s", e.msg);
	exact(c, xs, ws, dys, ys, dxs, dws);
	double ey = worst_of(x, "y", ys), edx = worst_of(x, "dx", dxs), edw = worst_of(x, "dw", dws);
	if (getenv("CG_VERBOSE"))
		fprintf(stderr, "winograd exact: %s c=%lld %lldx%lld: y %.3g dx %.3g dw %.3g\n", modes[mode],
			(long long)c->c, (long long)c->h, (long long)c->w, ey, edx, edw);
	ck_assert_msg(ey <= bounds[mode] && edx <= bounds[mode], "%s on layer %d: y %g, dx %g (bound %g)",
		modes[mode], _i % NLAYERS, ey, edx, bounds[mode]);
	ck_assert_msg(edw <= dw_bounds[mode], "%s on layer %d: dw %g (bound %g)", modes[mode], _i % NLAYERS, edw,
		dw_bounds[mode]);
	free(xs);
	free(ws);
	free(dys);
	free(ys);
	free(dxs);
	free(dws);
	teardown(x, pool, j, &s, g);
}
END_TEST

/* The JIT against the interpreter: every path, one and two threads. */
START_TEST(test_winograd_interp)
{
	int ncase = NPATHS + NLAYERS;
	int which = _i % ncase, mode = 1 + _i / ncase % 2, threads = _i / (2 * ncase) ? 2 : 1;
	const cgt_conv *c = which < NPATHS ? &paths[which] : &layers[which - NPATHS];
	ir_graph *g = forced(c, mode, threads);
	double err = cgt_compare(g, threads, 5, 1);
	if (getenv("CG_VERBOSE"))
		fprintf(stderr, "winograd interp: %s case %d, %d threads: %.3g\n", modes[mode], which, threads, err);
	ck_assert_msg(err <= bounds[mode], "%s case %d, %d threads: %g", modes[mode], which, threads, err);
	ir_graph_free(g);
	unsetenv("REVC_CONV");
}
END_TEST

/* dW of c computed natively with `threads` threads, from inputs of seed 5,
 * into dw (o·c·9 floats). */
static void dw_with(const cgt_conv *c, int mode, int threads, float *dw)
{
	ir_graph *g = forced(c, mode, threads);
	rt_err e;
	rt_store s;
	rt_store_init(&s);
	ck_assert_msg(rt_store_init_from_graph(&s, g, 1, &e), "%s", e.msg);
	cg_options o = {.threads = threads, .optimize = true, .cpu = test_cpu()};
	ir_diags d;
	ir_diags_init(&d);
	cg_jit *j = cg_jit_compile(g, &o, NULL, &d);
	ck_assert_msg(j, "compile: %s", d.n ? d.items[0].msg : "");
	ir_diags_free(&d);
	rt_pool *pool = rt_pool_new(threads);
	rt_exec *x = rt_exec_new_native(g, &s, cg_jit_step(j), pool, &e);
	ck_assert_msg(x, "%s", e.msg);
	int64_t nx = c->n * c->c * c->h * c->w, ny = c->n * c->o * c->h * c->w, nw = c->o * c->c * 9;
	double *copy = malloc((size_t)(nx + ny + nw) * sizeof *copy);
	ck_assert(copy);
	rt_rng r;
	rt_rng_seed(&r, 5);
	fill(x, "x", &r, copy);
	fill(x, "w", &r, copy);
	fill(x, "dy", &r, copy);
	ck_assert_msg(rt_exec_run(x, &e), "%s", e.msg);
	const ir_type *t;
	const float *got = rt_exec_output(x, "dw", &t);
	ck_assert(got && ir_type_elems(t) == nw);
	memcpy(dw, got, (size_t)nw * sizeof *dw);
	free(copy);
	teardown(x, pool, j, &s, g);
}

/* The filter gradient does not depend on the thread count (an AOT library
 * runs one thread, the JIT two, and training amplifies any difference):
 * one and two threads give the same bits, on several parallel indices. */
START_TEST(test_winograd_dw_threads)
{
	const cgt_conv *c = _i == 0 ? &paths[0] : &layers[_i - 1];
	int64_t nw = c->o * c->c * 9;
	float *one = malloc((size_t)nw * sizeof *one), *two = malloc((size_t)nw * sizeof *two);
	ck_assert(one && two);
	dw_with(c, 1, 1, one);
	dw_with(c, 1, 2, two);
	for (int64_t i = 0; i < nw; i++)
		ck_assert_msg(one[i] == two[i], "case %d: dw[%lld] %.9g with one thread, %.9g with two", _i, (long long)i,
			(double)one[i], (double)two[i]);
	free(one);
	free(two);
}
END_TEST

/* The cost model (k_conv_choice.c) on the presets' layers: Winograd
 * F(2x2) where it measured faster (revnet-38's three stages, fashion's
 * three), for the forward convolution and both gradients alike; direct
 * elsewhere; never in f64, never for other windows and strides. */
START_TEST(test_winograd_choice)
{
	unsetenv("REVC_CONV");
	unsetenv("REVC_CONV_BLAS");
	static const cg_conv_lowering want[NLAYERS] = {CG_CONV_WINOGRAD2, CG_CONV_WINOGRAD2, CG_CONV_WINOGRAD2,
		CG_CONV_WINOGRAD2, CG_CONV_WINOGRAD2, CG_CONV_WINOGRAD2};
	for (int i = 0; i < NLAYERS; i++) {
		const cgt_conv *c = &layers[i];
		ir_conv_geom g = {100, c->c, c->h, c->w, c->o, 3, 3, c->h, c->w, 1, 1, 1, 1, 1, IR_OP_CONV2D};
		const char *why = NULL;
		ck_assert_int_eq(cg_conv_lowering_of(&g, IR_F32, &why), want[i]);
		ck_assert(why && *why);
		g.op = IR_OP_CONV2D_DX;
		ck_assert_int_eq(cg_conv_lowering_of(&g, IR_F32, NULL), want[i]);
		ck_assert_int_eq(cg_conv_lowering_of(&g, IR_F64, NULL), CG_CONV_DIRECT);
		g.op = IR_OP_CONV2D_DW;
		ck_assert_int_eq(cg_conv_lowering_of(&g, IR_F32, NULL), want[i]);
		ck_assert_int_eq(cg_conv_lowering_of(&g, IR_F64, NULL), CG_CONV_DIRECT);
	}
	/* revnet-38's init conv (3 -> 32 channels) and a stride-2 one. */
	ir_conv_geom init = {100, 3, 32, 32, 32, 3, 3, 32, 32, 1, 1, 1, 1, 1, IR_OP_CONV2D};
	ck_assert_int_eq(cg_conv_lowering_of(&init, IR_F32, NULL), CG_CONV_DIRECT);
	ir_conv_geom s2 = {100, 16, 32, 32, 32, 3, 3, 16, 16, 2, 0, 1, 0, 1, IR_OP_CONV2D};
	ck_assert_int_eq(cg_conv_lowering_of(&s2, IR_F32, NULL), CG_CONV_DIRECT);
	/* Planes under 7x7, smaller than any measured, stay direct. */
	ir_conv_geom tiny = {100, 64, 4, 4, 64, 3, 3, 4, 4, 1, 1, 1, 1, 1, IR_OP_CONV2D};
	ck_assert_int_eq(cg_conv_lowering_of(&tiny, IR_F32, NULL), CG_CONV_DIRECT);
	setenv("REVC_CONV", "winograd4", 1);
	ck_assert_int_eq(cg_conv_lowering_of(&s2, IR_F32, NULL), CG_CONV_DIRECT);
	ck_assert_int_eq(cg_conv_lowering_of(&init, IR_F32, NULL), CG_CONV_WINOGRAD4);
	setenv("REVC_CONV", "blas", 1);
	ck_assert_int_eq(cg_conv_lowering_of(&init, IR_F32, NULL), CG_CONV_BLAS);
	unsetenv("REVC_CONV");
}
END_TEST

Suite *cg_winograd_suite(void)
{
	Suite *s = suite_create("codegen winograd");
	TCase *tc = tcase_create("winograd");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_winograd_exact, 0, 3 * NLAYERS);
	tcase_add_loop_test(tc, test_winograd_interp, 0, 4 * (NPATHS + NLAYERS));
	tcase_add_test(tc, test_winograd_choice);
	tcase_add_loop_test(tc, test_winograd_dw_threads, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}
