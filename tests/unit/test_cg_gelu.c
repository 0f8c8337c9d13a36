/* test_cg_gelu.c: the accuracy of the native GELU and its gradient in f32,
 * computed with codegen/vmath.c's Φ instead of libm's erf, over a dense
 * range of inputs: every 1/256 of [−10, 10], the far negative tail down to
 * where GELU underflows, tiny and subnormal inputs, ±0, huge values and
 * ±∞.  Run for the host's CPU and, by meson's codegen-x86-64-v3, for AVX2.
 *
 * The bounds:
 * - against the exact value (long double erfcl, rounded to f32): at most
 *   1 ulp of f32 everywhere, tails included;
 * - against the interpreter (libm's erf in double, rounded to f32): at most
 *   1 ulp of f32 plus the interpreter's own error from rounding 1 + erf in
 *   double, |x|·2^−53 for gelu and 2^−53·|dy| for gelu_grad (it matters only
 *   in the negative tail, where 1 + erf cancels: the interpreter's
 *   gelu(−10) is 0, the exact value −7.6e−23).
 * And the f32 kernels call no erf at all (the f64 ones still do: their
 * object test is in test_cg_norm.c).  Then the MLP half of a RevViT block,
 * its bias + GELU and bias + residual groups against the interpreter. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "codegen_suites.h"
#include "rt.h"
#include "test_cpu.h"

/* The inputs: the dense grid first, then the special values. */
#define GRID_STEP (1.0 / 256)
#define GRID_N 5121 /* −10 .. 10 */
static const double specials[] = {
	-0.0, 0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1e-30, -1e-30, 1e-8, -1e-8, 3e-4, -3e-4, -10.5, -11, -11.75,
	-12, -12.5, -13, -13.25, -13.5, -13.75, -14, -14.5, -20, -1e30, 10.5, 12, 20, 1e30, 3.4e38, -3.4e38,
	INFINITY, -INFINITY, -0.7517916, -0.7517917, 0.4, 0.84375, 1.25, 2.857, 6, -6,
};
#define NSPECIAL ((int)(sizeof specials / sizeof specials[0]))
#define M (GRID_N + NSPECIAL)

static double input_at(int i)
{
	return i < GRID_N ? -10 + i * GRID_STEP : specials[i - GRID_N];
}

/* dy: 1 on the grid (so gelu_grad is the derivative itself), −3 on the
 * special values. */
static double dy_at(int i)
{
	return i < GRID_N ? 1 : -3;
}

static ir_graph *gelu_graph(void)
{
	static char text[1024];
	snprintf(text, sizeof text,
		"graph @gelu {\n"
		"  %%0 = input {name=\"x\"} : f32[%d]\n"
		"  %%1 = input {name=\"dy\"} : f32[%d]\n"
		"  %%2 = gelu(%%0) : f32[%d]\n"
		"  %%3 = output(%%2) {name=\"y\"} : f32[%d]\n"
		"  %%4 = gelu_grad(%%1, %%0) : f32[%d]\n"
		"  %%5 = output(%%4) {name=\"dx\"} : f32[%d]\n"
		"}\n",
		M, M, M, M, M, M);
	return cgt_parse("gelu.ir", text);
}

/* y and dx of planned g from x and dy, by the JIT (native) or the
 * interpreter. */
static void run(ir_graph *g, bool native, float *y, float *dx)
{
	rt_err e;
	rt_store s;
	rt_store_init(&s);
	ck_assert_msg(rt_store_init_from_graph(&s, g, 1, &e), "%s", e.msg);
	cg_jit *j = NULL;
	rt_pool *pool = NULL;
	rt_exec *x;
	if (native) {
		cg_options o = {.threads = 2, .optimize = true, .cpu = test_cpu()};
		cg_stats stats = {0};
		ir_diags d;
		ir_diags_init(&d);
		j = cg_jit_compile(g, &o, &stats, &d);
		ck_assert_msg(j, "compile: %s", d.n ? d.items[0].msg : "");
		ir_diags_free(&d);
		pool = rt_pool_new(2);
		x = rt_exec_new_native(g, &s, cg_jit_step(j), pool, &e);
	} else
		x = rt_exec_new(g, &s, RT_EXEC_TRACK, &e);
	ck_assert_msg(x, "%s", e.msg);
	float *in = rt_exec_input(x, "x", NULL), *din = rt_exec_input(x, "dy", NULL);
	for (int i = 0; i < M; i++) {
		in[i] = (float)input_at(i);
		din[i] = (float)dy_at(i);
	}
	ck_assert_msg(rt_exec_run(x, &e), "%s", e.msg);
	memcpy(y, rt_exec_output(x, "y", NULL), M * sizeof *y);
	memcpy(dx, rt_exec_output(x, "dx", NULL), M * sizeof *dx);
	rt_exec_free(x);
	if (pool)
		rt_pool_free(pool);
	if (j)
		cg_jit_free(j);
	rt_store_free(&s);
}

/* The distance in f32 ulps from a to b (both finite or equal). */
static double ulps(float a, float b)
{
	if (a == b || (isnan(a) && isnan(b)))
		return 0;
	if (!isfinite(a) || !isfinite(b) || isnan(a) || isnan(b))
		return INFINITY;
	int32_t ia, ib;
	memcpy(&ia, &a, 4);
	memcpy(&ib, &b, 4);
	/* ordered as integers: negative floats map below zero */
	int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia, ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
	return (double)llabs(oa - ob);
}

/* The spacing of f32 at v. */
static double ulp_of(float v)
{
	float a = fabsf(v);
	return isfinite(a) ? (double)(nextafterf(a, (float)INFINITY) - a) : 0;
}

/* The exact values, in long double, rounded to f32 (the input is an f32). */
static void exact(double xv, double dyv, float *y, float *dx)
{
	long double x = xv, phi = 0.5L * erfcl(-x / sqrtl(2.0L));
	long double pdf = expl(-x * x / 2) / sqrtl(2 * 3.14159265358979323846264338327950288L);
	*y = (float)(x * phi);
	*dx = (float)(dyv * (phi + x * pdf));
	if (isinf(xv)) { /* as the reference: inf·0 is NaN */
		*y = xv > 0 ? (float)xv : NAN;
		*dx = NAN;
	}
}

START_TEST(test_gelu_ulps)
{
	static float jy[M], jdx[M], ry[M], rdx[M];
	ir_graph *g = gelu_graph();
	cgt_plan(g, 2);
	run(g, true, jy, jdx);
	run(g, false, ry, rdx);
	double worst_exact = 0, worst_ref = 0, tail = -INFINITY;
	int differ = 0;
	for (int i = 0; i < M; i++) {
		double x = (float)input_at(i), dy = dy_at(i);
		float ey, edx;
		exact(x, dy, &ey, &edx);
		double uy = ulps(jy[i], ey), udx = ulps(jdx[i], edx);
		double jyv = jy[i], jdxv = jdx[i], ryv = ry[i], rdxv = rdx[i], eyv = ey, edxv = edx;
		ck_assert_msg(uy <= 1, "gelu(%.9g): JIT %.9g, exact %.9g: %g ulps", x, jyv, eyv, uy);
		ck_assert_msg(udx <= 1, "gelu_grad(%g, %.9g): JIT %.9g, exact %.9g: %g ulps", dy, x, jdxv, edxv, udx);
		worst_exact = fmax(worst_exact, fmax(uy, udx));
		/* against the interpreter */
		double ay = ulp_of(ry[i]) + fabs(x) * 0x1p-53, adx = ulp_of(rdx[i]) + fabs(dy) * 0x1p-53;
		bool nan_y = isnan(jyv) && isnan(ryv), nan_dx = isnan(jdxv) && isnan(rdxv);
		ck_assert_msg(nan_y || jyv == ryv || fabs(jyv - ryv) <= ay, "gelu(%.9g): JIT %.9g, interpreter %.9g", x,
			jyv, ryv);
		ck_assert_msg(nan_dx || jdxv == rdxv || fabs(jdxv - rdxv) <= adx,
			"gelu_grad(%g, %.9g): JIT %.9g, interpreter %.9g", dy, x, jdxv, rdxv);
		if (!nan_y && !nan_dx && (ulps(jy[i], ry[i]) > 1 || ulps(jdx[i], rdx[i]) > 1))
			tail = fmax(tail, x); /* where the interpreter's 1 + erf cancels */
		else if (!nan_y && !nan_dx)
			worst_ref = fmax(worst_ref, fmax(ulps(jy[i], ry[i]), ulps(jdx[i], rdx[i])));
		differ += (jy[i] != ry[i] && !nan_y) + (jdx[i] != rdx[i] && !nan_dx);
	}
	/* -0 stays -0, as in the reference */
	ck_assert(jy[GRID_N] == 0 && signbit(jy[GRID_N]) && signbit(ry[GRID_N]));
	if (getenv("CG_VERBOSE"))
		fprintf(stderr, "gelu f32 (%s): worst %g ulps from exact; from the interpreter %g ulps for x > %g, "
			"%d of %d values differ\n", test_cpu() ? test_cpu() : "native", worst_exact, worst_ref, tail, differ,
			2 * M);
	ir_graph_free(g);
}
END_TEST

/* The f32 kernels call no erf: the object's undefined symbols. */
START_TEST(test_gelu_no_erf)
{
	ir_graph *g = gelu_graph();
	cgt_plan(g, 1);
	char dir[128];
	rt_temp_template(dir, sizeof dir, "/tmp/revc-gelu", strlen("/tmp/revc-gelu"), "-");
	ck_assert(mkdtemp(dir));
	char obj[200], cmd[1024];
	snprintf(obj, sizeof obj, "%s/gelu.o", dir);
	cg_options o = {.threads = 1, .optimize = true, .name = "gelu", .cpu = test_cpu()};
	ir_diags d;
	ir_diags_init(&d);
	ck_assert_msg(cg_emit_object(g, NULL, &o, obj, &d), "%s", d.n ? d.items[0].msg : "");
	ir_diags_free(&d);
	snprintf(cmd, sizeof cmd, "nm -u '%s' | grep -qwE 'erf|exp'", obj);
	ck_assert_msg(system(cmd) != 0, "the f32 object calls erf or exp");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	ir_graph_free(g);
}
END_TEST

/* ---- the MLP half of a RevViT block, fused ------------------------------------ */

/* y2 = x2 + fc2(GELU(fc1(LN(x1)))) + pos: fc1's bias + GELU is one loop, fc2's
 * bias + the residual add + a positional-embedding-shaped add ([T,D]) another.
 * With D = 48 fc1's bias (192) is long enough for a loop over rows of it
 * (k_elementwise.c's trail_rows); fc2's bias and the [T,D] operand differ
 * in length, so that group, like every one with D = 4, reads them at a
 * remainder per element. */
static ir_graph *mlp_graph(int64_t d, ir_dtype dt)
{
	static char text[4096];
	const char *t = ir_dtype_name(dt);
	long long n = 3, tk = 5, h = 4 * d;
	char act[64], hid[64];
	snprintf(act, sizeof act, "%s[%lld,%lld,%lld]", t, n, tk, (long long)d);
	snprintf(hid, sizeof hid, "%s[%lld,%lld,%lld]", t, n, tk, h);
	snprintf(text, sizeof text,
		"graph @mlp {\n"
		"  %%0 = input {name=\"x1\"} : %s\n"
		"  %%1 = input {name=\"x2\"} : %s\n"
		"  $ln.gamma = param : %s[%lld]\n"
		"  $ln.beta = param : %s[%lld]\n"
		"  %%4 = ln_stats(%%0) : %s[%lld,%lld,2]\n"
		"  %%5 = ln_norm(%%0, %%4, $ln.gamma, $ln.beta) {eps=1e-06} : %s\n"
		"  $fc1.w = param : %s[%lld,%lld]\n"
		"  $fc1.b = param : %s[%lld]\n"
		"  %%8 = matmul(%%5, $fc1.w) {trans_b=1} : %s\n"
		"  %%9 = broadcast_add(%%8, $fc1.b) : %s\n"
		"  %%10 = gelu(%%9) : %s\n"
		"  $fc2.w = param : %s[%lld,%lld]\n"
		"  $fc2.b = param : %s[%lld]\n"
		"  %%13 = matmul(%%10, $fc2.w) {trans_b=1} : %s\n"
		"  %%14 = broadcast_add(%%13, $fc2.b) : %s\n"
		"  %%15 = add(%%1, %%14) : %s\n"
		"  $pos.b = param : %s[%lld,%lld]\n"
		"  %%17 = broadcast_add(%%15, $pos.b) : %s\n"
		"  %%18 = output(%%17) {name=\"y2\"} : %s\n"
		"}\n",
		act, act, t, (long long)d, t, (long long)d, t, n, tk, act, t, h, (long long)d, t, h, hid, hid, hid, t,
		(long long)d, h, t, (long long)d, act, act, act, t, tk, (long long)d, act, act);
	return cgt_parse("mlp.ir", text);
}

/* Loop index: bit 0 the dtype, bit 1 the feature count (48, 4), the rest
 * the thread count (1, 2, 3). */
START_TEST(test_mlp_fused)
{
	ir_dtype dt = _i % 2 ? IR_F64 : IR_F32;
	int64_t d = _i / 2 % 2 ? 4 : 48;
	int threads = 1 + _i / 4;
	ir_graph *g = mlp_graph(d, dt);
	const ir_node *b1 = g->nodes[9], *gelu = g->nodes[10], *b2 = g->nodes[14], *res = g->nodes[15];
	const ir_node *pos = g->nodes[17];
	cgt_plan(g, threads);
	ck_assert(b1->group >= 0 && gelu->group == b1->group);
	ck_assert(b2->group >= 0 && res->group == b2->group && pos->group == b2->group && b2->group != b1->group);
	double err = cgt_compare(g, threads, 61, 1), tol = dt == IR_F32 ? 1e-5 : 1e-12;
	ck_assert_msg(err <= tol, "mlp (D=%lld, %s, %d threads): error %g > %g", (long long)d, ir_dtype_name(dt),
		threads, err, tol);
	ir_graph_free(g);
}
END_TEST

Suite *cg_gelu_suite(void)
{
	Suite *s = suite_create("codegen gelu");
	TCase *tc = tcase_create("gelu");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_gelu_ulps);
	tcase_add_test(tc, test_gelu_no_erf);
	tcase_add_loop_test(tc, test_mlp_fused, 0, 12);
	suite_add_tcase(s, tc);
	return s;
}
