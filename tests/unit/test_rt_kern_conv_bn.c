/* test_rt_kern_conv_bn.c: the convolution and batch-norm kernels against
 * direct references, finite differences (f64) and each other (f32 vs f64).
 * Workspaces are malloc'd at exactly rt_kernel_workspace bytes, so ASan
 * catches a kernel that uses more.  KERN_VERBOSE=1 prints the errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_net.h"
#include "runtime_suites.h"

/* ---- naive references -------------------------------------------------- */

typedef struct {
	int64_t n, c, h, w, o, kh, kw, s, pad[4];
} conv_case;

static const conv_case conv_cases[] = {
	{2, 3, 28, 28, 4, 3, 3, 2, {0, 1, 0, 1}}, /* TF SAME, stride 2, even size */
	{3, 2, 7, 7, 3, 3, 3, 2, {1, 1, 1, 1}},   /* odd size */
	{2, 4, 6, 6, 5, 1, 1, 2, {0, 0, 0, 0}},   /* 1x1 stride 2 */
	{2, 4, 5, 5, 3, 1, 1, 1, {0, 0, 0, 0}},   /* 1x1 stride 1: no im2col */
	{1, 2, 8, 8, 2, 3, 3, 1, {1, 1, 1, 1}},   /* SAME stride 1 */
	{2, 2, 9, 7, 2, 5, 3, 3, {2, 1, 0, 2}},   /* asymmetric everything */
};

/* The 7-loop direct convolution. */
static double *conv_ref(const conv_case *c, const double *x, const double *w, int64_t ho,
	int64_t wo)
{
	double *y = calloc((size_t)(c->n * c->o * ho * wo), sizeof *y);
	for (int64_t n = 0; n < c->n; n++)
		for (int64_t o = 0; o < c->o; o++)
			for (int64_t i = 0; i < ho; i++)
				for (int64_t j = 0; j < wo; j++)
					for (int64_t ch = 0; ch < c->c; ch++)
						for (int64_t p = 0; p < c->kh; p++)
							for (int64_t q = 0; q < c->kw; q++) {
								int64_t r = i * c->s + p - c->pad[0], s = j * c->s + q - c->pad[2];
								if (r >= 0 && r < c->h && s >= 0 && s < c->w)
									y[((n * c->o + o) * ho + i) * wo + j] +=
										x[((n * c->c + ch) * c->h + r) * c->w + s] *
										w[((o * c->c + ch) * c->kh + p) * c->kw + q];
							}
	return y;
}

/* Builds x, w, y = conv2d(x, w), dy, dx, dw in t; returns y. */
static ir_node *conv_net(net *t, const conv_case *c, ir_node **x, ir_node **w, ir_node **dy,
	ir_node **dx, ir_node **dw)
{
	*x = input(t, 4, (int64_t[]){c->n, c->c, c->h, c->w}, -1, 1);
	*w = input(t, 4, (int64_t[]){c->o, c->c, c->kh, c->kw}, -1, 1);
	ir_node *y = op(t, IR_OP_CONV2D, 2, *x, *w);
	set_window(t, y, c->s, c->pad);
	fin(y);
	*dy = input(t, 4, y->type.dim, -1, 1);
	*dx = op(t, IR_OP_CONV2D_DX, 2, *dy, *w);
	set_window(t, *dx, c->s, c->pad);
	declare(*dx, *x);
	*dw = op(t, IR_OP_CONV2D_DW, 2, *dy, *x);
	set_window(t, *dw, c->s, c->pad);
	declare(*dw, *w);
	return y;
}

/* ---- convolution ------------------------------------------------------- */

START_TEST(test_conv_forward)
{
	for (int dt = 0; dt < 2; dt++)
		for (size_t k = 0; k < sizeof conv_cases / sizeof conv_cases[0]; k++) {
			const conv_case *c = &conv_cases[k];
			net t;
			net_init(&t, dt ? IR_F64 : IR_F32);
			ir_node *x, *w, *dy, *dx, *dw, *y = conv_net(&t, c, &x, &w, &dy, &dx, &dw);
			net_eval(&t, y->id);
			double *ref = conv_ref(c, dval(&t, x), dval(&t, w), y->type.dim[2], y->type.dim[3]);
			char what[64];
			snprintf(what, sizeof what, "conv2d %s case %zu", dt ? "f64" : "f32", k);
			check_close(what, dval(&t, y), ref, elems(y), dt ? 1e-13 : 1e-6);
			free(ref);
			net_free(&t);
		}
}
END_TEST

START_TEST(test_conv_grad_fd)
{
	for (size_t k = 1; k < sizeof conv_cases / sizeof conv_cases[0]; k++) {
		conv_case c = conv_cases[k];
		net t;
		net_init(&t, IR_F64);
		ir_node *x, *w, *dy, *dx, *dw, *y = conv_net(&t, &c, &x, &w, &dy, &dx, &dw);
		char what[64];
		snprintf(what, sizeof what, "conv2d_dx fd case %zu", k);
		fd_check(&t, x, y, dy, dx, 1e-7, what);
		snprintf(what, sizeof what, "conv2d_dw fd case %zu", k);
		fd_check(&t, w, y, dy, dw, 1e-7, what);
		net_free(&t);
	}
	/* The SAME stride-2 case, shrunk to keep the differences cheap. */
	conv_case c = {2, 2, 8, 8, 3, 3, 3, 2, {0, 1, 0, 1}};
	net t;
	net_init(&t, IR_F64);
	ir_node *x, *w, *dy, *dx, *dw, *y = conv_net(&t, &c, &x, &w, &dy, &dx, &dw);
	fd_check(&t, x, y, dy, dx, 1e-7, "conv2d_dx fd SAME stride 2");
	fd_check(&t, w, y, dy, dw, 1e-7, "conv2d_dw fd SAME stride 2");
	net_free(&t);
}
END_TEST

/* f32 against f64 on the same (float-representable) data. */
START_TEST(test_conv_f32_vs_f64)
{
	net t[2];
	ir_node *x, *w, *dy, *dx[2], *dw[2], *y[2];
	for (int i = 0; i < 2; i++) {
		rng = 7;
		net_init(&t[i], i ? IR_F64 : IR_F32);
		t[i].round = true;
		y[i] = conv_net(&t[i], &conv_cases[0], &x, &w, &dy, &dx[i], &dw[i]);
		net_eval(&t[i], t[i].g->n - 1);
	}
	check_close("conv2d f32 vs f64", dval(&t[0], y[0]), dval(&t[1], y[1]), elems(y[0]), 1e-6);
	check_close("conv2d_dx f32 vs f64", dval(&t[0], dx[0]), dval(&t[1], dx[1]), elems(dx[0]), 1e-6);
	check_close("conv2d_dw f32 vs f64", dval(&t[0], dw[0]), dval(&t[1], dw[1]), elems(dw[0]), 1e-6);
	net_free(&t[0]);
	net_free(&t[1]);
}
END_TEST

START_TEST(test_conv_workspace)
{
	for (size_t k = 0; k < sizeof conv_cases / sizeof conv_cases[0]; k++) {
		const conv_case *c = &conv_cases[k];
		net t;
		net_init(&t, k % 2 ? IR_F64 : IR_F32);
		ir_node *x, *w, *dy, *dx, *dw, *y = conv_net(&t, c, &x, &w, &dy, &dx, &dw);
		bool direct = c->kh == 1 && c->kw == 1 && c->s == 1;
		int64_t want = direct ? 0 : c->c * c->kh * c->kw * y->type.dim[2] * y->type.dim[3] *
		                                (k % 2 ? 8 : 4);
		ck_assert_int_eq(rt_kernel_workspace(y), want);
		ck_assert_int_eq(rt_kernel_workspace(dx), want);
		ck_assert_int_eq(rt_kernel_workspace(dw), want);
		/* run() hands each kernel exactly that many malloc'd bytes. */
		net_eval(&t, t.g->n - 1);
		net_free(&t);
	}
	net t;
	net_init(&t, IR_F32);
	ir_node *r = fin(op(&t, IR_OP_RELU, 1, input(&t, 1, (int64_t[]){4}, -1, 1)));
	ck_assert_int_eq(rt_kernel_workspace(r), 0);
	net_free(&t);
}
END_TEST

/* ---- batch norm -------------------------------------------------------- */

typedef struct {
	ir_node *x, *gamma, *beta, *stats, *y, *dy, *dbeta, *dgamma, *dx;
} bn_nodes;

/* Training-mode batch norm and its backward pass over x of the given shape,
 * x uniform in offset ± 1. */
static bn_nodes bn_net(net *t, int rank, const int64_t *dims, double offset)
{
	bn_nodes b;
	int64_t c = dims[1];
	b.x = input(t, rank, dims, offset - 1, offset + 1);
	b.gamma = input(t, 1, &c, 0.5, 1.5);
	b.beta = input(t, 1, &c, -0.5, 0.5);
	b.stats = fin(op(t, IR_OP_BN_STATS, 1, b.x));
	b.y = op(t, IR_OP_BN_NORM, 4, b.x, b.stats, b.gamma, b.beta);
	ir_node_set_float(t->g, b.y, IR_ATTR_EPS, 1e-3);
	fin(b.y);
	b.dy = input(t, rank, dims, -1, 1);
	b.dbeta = op(t, IR_OP_REDUCE_SUM, 1, b.dy);
	ir_node_set_ints(t->g, b.dbeta, IR_ATTR_AXES, (int64_t[]){0, 2, 3}, rank == 4 ? 3 : 1);
	fin(b.dbeta);
	b.dgamma = op(t, IR_OP_BN_DGAMMA, 3, b.dy, b.x, b.stats);
	b.dx = op(t, IR_OP_BN_DX, 6, b.dy, b.x, b.stats, b.gamma, b.dgamma, b.dbeta);
	ir_node_set_float(t->g, b.dgamma, IR_ATTR_EPS, 1e-3);
	ir_node_set_float(t->g, b.dx, IR_ATTR_EPS, 1e-3);
	fin(b.dgamma);
	fin(b.dx);
	return b;
}

/* Per-channel mean and biased variance of x [N,C,hw] in double: st [2,C]. */
static void stats_ref(const double *x, int64_t n, int64_t c, int64_t hw, double *st)
{
	for (int64_t ch = 0; ch < c; ch++) {
		double s = 0, q = 0;
		for (int64_t i = 0; i < n * hw; i++)
			s += x[((i / hw) * c + ch) * hw + i % hw];
		for (int64_t i = 0; i < n * hw; i++) {
			double d = x[((i / hw) * c + ch) * hw + i % hw] - s / (double)(n * hw);
			q += d * d;
		}
		st[ch] = s / (double)(n * hw);
		st[c + ch] = q / (double)(n * hw);
	}
}

START_TEST(test_bn_forward)
{
	static const int64_t shapes[2][4] = {{3, 4, 5, 5}, {7, 3}};
	static const double offsets[2] = {0.5, 100};
	for (int dt = 0; dt < 2; dt++)
		for (int r = 0; r < 2; r++)
			for (int o = 0; o < 2; o++) {
				net t;
				net_init(&t, dt ? IR_F64 : IR_F32);
				const int64_t *d = shapes[r];
				int64_t hw = r ? 1 : d[2] * d[3];
				bn_nodes b = bn_net(&t, r ? 2 : 4, d, offsets[o]);
				net_eval(&t, b.y->id);
				double st[8], *y = malloc((size_t)elems(b.x) * sizeof *y);
				double *x = dval(&t, b.x), *g = dval(&t, b.gamma), *be = dval(&t, b.beta);
				stats_ref(x, d[0], d[1], hw, st);
				for (int64_t i = 0; i < elems(b.x); i++) {
					int64_t ch = i / hw % d[1];
					y[i] = g[ch] * (x[i] - st[ch]) / sqrt(st[d[1] + ch] + 1e-3) + be[ch];
				}
				char what[64];
				for (int row = 0; row < 2; row++) {
					snprintf(what, sizeof what, "bn_stats %s %s rank %d +%g", row ? "var" : "mean",
						dt ? "f64" : "f32", r ? 2 : 4, offsets[o]);
					check_close(what, dval(&t, b.stats) + row * d[1], st + row * d[1], d[1],
						dt ? 1e-12 : 1e-6);
				}
				/* An f32 mean of ~100 is off by ~1e-6, which normalising magnifies. */
				snprintf(what, sizeof what, "bn_norm %s rank %d +%g", dt ? "f64" : "f32",
					r ? 2 : 4, offsets[o]);
				check_close(what, dval(&t, b.y), y, elems(b.x), dt ? 1e-11 : o ? 1e-4 : 1e-6);
				free(y);
				net_free(&t);
			}
}
END_TEST

START_TEST(test_bn_infer)
{
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		int64_t c = 3;
		ir_node *x = input(&t, 4, (int64_t[]){2, 3, 4, 4}, -2, 2);
		ir_node *mean = input(&t, 1, &c, -1, 1), *var = input(&t, 1, &c, 0.5, 2);
		ir_node *g = input(&t, 1, &c, 0.5, 1.5), *be = input(&t, 1, &c, -1, 1);
		ir_node *y = op(&t, IR_OP_BN_INFER, 5, x, mean, var, g, be);
		ir_node_set_float(t.g, y, IR_ATTR_EPS, 1e-3);
		net_eval(&t, fin(y)->id);
		double ref[96];
		for (int64_t i = 0; i < 96; i++) {
			int64_t ch = i / 16 % 3;
			ref[i] = dval(&t, g)[ch] * (dval(&t, x)[i] - dval(&t, mean)[ch]) /
				 sqrt(dval(&t, var)[ch] + 1e-3) + dval(&t, be)[ch];
		}
		check_close(dt ? "bn_infer f64" : "bn_infer f32", dval(&t, y), ref, 96, dt ? 1e-14 : 1e-6);
		net_free(&t);
	}
}
END_TEST

/* The full training-mode batch norm, the statistics' dependence on x
 * included. */
START_TEST(test_bn_grad_fd)
{
	static const int64_t shapes[2][4] = {{3, 2, 4, 4}, {6, 3}};
	for (int r = 0; r < 2; r++) {
		net t;
		net_init(&t, IR_F64);
		bn_nodes b = bn_net(&t, r ? 2 : 4, shapes[r], 0.3);
		fd_check(&t, b.x, b.y, b.dy, b.dx, 1e-7, r ? "bn_dx fd rank 2" : "bn_dx fd rank 4");
		fd_check(&t, b.gamma, b.y, b.dy, b.dgamma, 1e-7,
			r ? "bn_dgamma fd rank 2" : "bn_dgamma fd rank 4");
		fd_check(&t, b.beta, b.y, b.dy, b.dbeta, 1e-7,
			r ? "reduce_sum as dbeta fd rank 2" : "reduce_sum as dbeta fd rank 4");
		net_free(&t);
	}
}
END_TEST

START_TEST(test_bn_f32_vs_f64)
{
	net t[2];
	for (int i = 0; i < 2; i++) {
		rng = 11;
		net_init(&t[i], i ? IR_F64 : IR_F32);
		t[i].round = true;
		bn_net(&t[i], 4, (int64_t[]){4, 8, 6, 6}, 3);
		net_eval(&t[i], t[i].g->n - 1);
	}
	/* The nets have the same nodes in the same order. */
	for (int id = 0; id < t[0].g->n; id++) {
		const ir_node *n = t[0].g->nodes[id];
		if (n->op == IR_OP_INPUT)
			continue;
		char what[64];
		snprintf(what, sizeof what, "%s f32 vs f64", ir_op_name(n->op));
		check_close(what, dval(&t[0], n), dval(&t[1], t[1].g->nodes[id]), elems(n), 1e-6);
	}
	net_free(&t[0]);
	net_free(&t[1]);
}
END_TEST

/* Runs n's kernel directly on raw buffers of its dtype; out may alias. */
START_TEST(test_bn_running)
{
	static const double mean[3] = {0.5, -1, 2}, var[3] = {1, 2, 0.5};
	static const double stats[6] = {1, 2, 3, 0.25, 4, 1};
	/* momentum 0.9, count 5: the batch variance is scaled by 5/4. */
	static const double mean_want[3] = {0.55, -0.7, 2.1}, var_want[3] = {0.93125, 2.3, 0.575};
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *m = input(&t, 1, (int64_t[]){3}, 0, 1), *s = input(&t, 2, (int64_t[]){2, 3}, 0, 1);
		ir_node *rm = op(&t, IR_OP_BN_RUNNING_MEAN, 2, m, s);
		ir_node *rv = op(&t, IR_OP_BN_RUNNING_VAR, 2, m, s);
		ir_node_set_float(t.g, rm, IR_ATTR_MOMENTUM, 0.9);
		ir_node_set_float(t.g, rv, IR_ATTR_MOMENTUM, 0.9);
		ir_node_set_int(t.g, rv, IR_ATTR_NCOUNT, 5);
		fin(rm);
		fin(rv);
		double buf[3], sb[6];
		as(t.dt, stats, 6, sb);
		call(rm, as(t.dt, mean, 3, buf), buf, sb, NULL);
		check_buf("bn_running_mean in place", t.dt, buf, mean_want, 3);
		call(rv, as(t.dt, var, 3, buf), buf, sb, NULL);
		check_buf("bn_running_var in place", t.dt, buf, var_want, 3);
		net_free(&t);
	}
}
END_TEST


Suite *rt_kern_conv_bn_suite(void)
{
	Suite *s = suite_create("rt_kern_conv_bn");
	TCase *tc = tcase_create("kernels");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_conv_forward);
	tcase_add_test(tc, test_conv_grad_fd);
	tcase_add_test(tc, test_conv_f32_vs_f64);
	tcase_add_test(tc, test_conv_workspace);
	tcase_add_test(tc, test_bn_forward);
	tcase_add_test(tc, test_bn_infer);
	tcase_add_test(tc, test_bn_grad_fd);
	tcase_add_test(tc, test_bn_f32_vs_f64);
	tcase_add_test(tc, test_bn_running);
	suite_add_tcase(s, tc);
	return s;
}
