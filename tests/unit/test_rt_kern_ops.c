/* test_rt_kern_ops.c: the other reference kernels (pooling, dense and
 * reductions, loss, elementwise, layout, optimiser, dispatch) against direct
 * references, finite differences (f64) and hand computation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_net.h"
#include "runtime_suites.h"

/* ---- pooling ----------------------------------------------------------- */

typedef struct {
	int64_t n, c, h, w, k, s, pad[4]; /* s == 0: avgpool */
} pool_case;

static const pool_case pool_cases[] = {
	{2, 3, 9, 9, 2, 0, {0}},          /* avgpool, 9 not a multiple of 2 */
	{2, 2, 8, 8, 4, 0, {0}},
	{1, 2, 7, 7, 3, 0, {0}},          /* 7 = 2·3 + 1 */
	{2, 3, 8, 8, 3, 2, {0, 1, 0, 1}}, /* maxpool, TF SAME */
	{1, 2, 5, 5, 3, 1, {1, 1, 1, 1}}, /* overlapping windows */
	{2, 2, 6, 7, 2, 2, {0, 0, 0, 0}},
};

/* Builds x (distinct values, 0.01 apart, shuffled), the pool y, dy and the
 * gradient; returns y. */
static ir_node *pool_net(net *t, const pool_case *c, ir_node **x, ir_node **dy, ir_node **dx)
{
	*x = input(t, 4, (int64_t[]){c->n, c->c, c->h, c->w}, 0, 1);
	double *v = dval(t, *x);
	for (int64_t i = 0; i < elems(*x); i++)
		v[i] = 0.01 * (double)i - 1;
	for (int64_t i = elems(*x) - 1; i > 0; i--) {
		int64_t j = (int64_t)uniform(0, (double)i + 1);
		double tmp = v[i];
		v[i] = v[j];
		v[j] = tmp;
	}
	ir_node *y = op(t, c->s ? IR_OP_MAXPOOL : IR_OP_AVGPOOL, 1, *x);
	ir_node_set_int(t->g, y, IR_ATTR_WINDOW, c->k);
	if (c->s)
		set_window(t, y, c->s, c->pad);
	fin(y);
	*dy = input(t, 4, y->type.dim, -1, 1);
	*dx = c->s ? op(t, IR_OP_MAXPOOL_GRAD, 2, *dy, *x) : op(t, IR_OP_AVGPOOL_GRAD, 1, *dy);
	ir_node_set_int(t->g, *dx, IR_ATTR_WINDOW, c->k);
	if (c->s)
		set_window(t, *dx, c->s, c->pad);
	declare(*dx, *x);
	return y;
}

/* Direct pooling: the mean (s == 0) or the maximum of each window. */
static double *pool_ref(const pool_case *c, const double *x, int64_t ho, int64_t wo)
{
	int64_t s = c->s ? c->s : c->k, top = c->s ? c->pad[0] : 0, left = c->s ? c->pad[2] : 0;
	double *y = malloc((size_t)(c->n * c->c * ho * wo) * sizeof *y);
	for (int64_t pl = 0; pl < c->n * c->c; pl++)
		for (int64_t i = 0; i < ho; i++)
			for (int64_t j = 0; j < wo; j++) {
				double acc = c->s ? -HUGE_VAL : 0;
				for (int64_t p = 0; p < c->k; p++)
					for (int64_t q = 0; q < c->k; q++) {
						int64_t r = i * s + p - top, cc = j * s + q - left;
						if (r < 0 || r >= c->h || cc < 0 || cc >= c->w)
							continue;
						double v = x[(pl * c->h + r) * c->w + cc];
						acc = c->s ? fmax(acc, v) : acc + v / (double)(c->k * c->k);
					}
				y[(pl * ho + i) * wo + j] = acc;
			}
	return y;
}

START_TEST(test_pool)
{
	for (size_t k = 0; k < sizeof pool_cases / sizeof pool_cases[0]; k++)
		for (int dt = 0; dt < 2; dt++) {
			const pool_case *c = &pool_cases[k];
			net t;
			net_init(&t, dt ? IR_F64 : IR_F32);
			ir_node *x, *dy, *dx, *y = pool_net(&t, c, &x, &dy, &dx);
			net_eval(&t, y->id);
			double *ref = pool_ref(c, dval(&t, x), y->type.dim[2], y->type.dim[3]);
			char what[64];
			snprintf(what, sizeof what, "%s %s case %zu", c->s ? "maxpool" : "avgpool",
				dt ? "f64" : "f32", k);
			check_close(what, dval(&t, y), ref, elems(y), dt ? 1e-15 : 1e-7);
			free(ref);
			if (dt) {
				snprintf(what, sizeof what, "%s fd case %zu",
					c->s ? "maxpool_grad" : "avgpool_grad", k);
				fd_check(&t, x, y, dy, dx, 1e-8, what);
			}
			net_free(&t);
		}
}
END_TEST

/* maxpool(x) {window k, stride s, pad} and, in *dx, maxpool_grad(dy, x) of a
 * new input dy; returns the maxpool. */
static ir_node *maxpool_and_grad(net *t, ir_node *x, int64_t k, int64_t s, const int64_t pad[4], ir_node **dx)
{
	ir_node *y = op(t, IR_OP_MAXPOOL, 1, x);
	ir_node_set_int(t->g, y, IR_ATTR_WINDOW, k);
	set_window(t, y, s, pad);
	fin(y);
	*dx = op(t, IR_OP_MAXPOOL_GRAD, 2, input(t, 4, y->type.dim, 0, 1), x);
	ir_node_set_int(t->g, *dx, IR_ATTR_WINDOW, k);
	set_window(t, *dx, s, pad);
	fin(*dx);
	return y;
}

/* Ties go to the first maximum in row-major order; padding never wins, and a
 * window entirely in padding gives −∞ and routes nothing back. */
START_TEST(test_maxpool_ties_and_padding)
{
	net t;
	net_init(&t, IR_F64);
	ir_node *x = input(&t, 4, (int64_t[]){1, 1, 2, 2}, 0, 1), *dx;
	ir_node *y = maxpool_and_grad(&t, x, 2, 1, (int64_t[]){1, 1, 1, 1}, &dx), *dy = dx->in[0];
	memcpy(dval(&t, x), (double[]){-3, -2, -4, -5}, 4 * sizeof(double));
	for (int i = 0; i < 9; i++)
		dval(&t, dy)[i] = 1 << i;
	net_eval(&t, t.g->n - 1);
	static const double y_want[9] = {-3, -2, -2, -3, -2, -2, -4, -4, -5};
	/* -3 wins windows 0 and 3; -2 windows 1, 2, 4, 5; -4 windows 6, 7. */
	static const double dx_want[4] = {1 + 8, 2 + 4 + 16 + 32, 64 + 128, 256};
	check_close("maxpool padding", dval(&t, y), y_want, 9, 0);
	check_close("maxpool_grad padding", dval(&t, dx), dx_want, 4, 0);
	memcpy(dval(&t, x), (double[]){1, 2, 2, 0}, 4 * sizeof(double));
	net_eval(&t, t.g->n - 1);
	/* Window (1,1) holds a tie between elements 1 and 2: the first wins. */
	static const double dx_tie[4] = {1, 2 + 4 + 16 + 32, 8 + 64 + 128, 256};
	check_close("maxpool_grad ties", dval(&t, dx), dx_tie, 4, 0);
	/* pad 2 before, window 2: output (0,0) sees only padding. */
	ir_node *z = op(&t, IR_OP_MAXPOOL, 1, x);
	ir_node_set_int(t.g, z, IR_ATTR_WINDOW, 2);
	set_window(&t, z, 2, (int64_t[]){2, 0, 2, 0});
	net_eval(&t, fin(z)->id);
	static const double z_want[4] = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL, 2};
	for (int i = 0; i < 4; i++)
		ck_assert(dval(&t, z)[i] == z_want[i]);
	net_free(&t);
}
END_TEST

START_TEST(test_global_avgpool)
{
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *x = input(&t, 4, (int64_t[]){2, 3, 4, 5}, -1, 1);
		ir_node *y = fin(op(&t, IR_OP_GLOBAL_AVGPOOL, 1, x));
		ir_node *dy = input(&t, 2, y->type.dim, -1, 1);
		ir_node *dx = declare(op(&t, IR_OP_GLOBAL_AVGPOOL_GRAD, 1, dy), x);
		net_eval(&t, t.g->n - 1);
		double ref[6] = {0}, dref[120];
		for (int i = 0; i < 120; i++) {
			ref[i / 20] += dval(&t, x)[i] / 20;
			dref[i] = dval(&t, dy)[i / 20] / 20;
		}
		check_close(dt ? "global_avgpool f64" : "global_avgpool f32", dval(&t, y), ref, 6,
			dt ? 1e-15 : 1e-7);
		check_close(dt ? "global_avgpool_grad f64" : "global_avgpool_grad f32", dval(&t, dx),
			dref, 120, dt ? 1e-16 : 1e-7);
		if (dt)
			fd_check(&t, x, y, dy, dx, 1e-8, "global_avgpool_grad fd");
		net_free(&t);
	}
}
END_TEST

/* got[i] is want[i] exactly, or NaN where want[i] is. */
static void check_special(const char *what, const double *got, const double *want, int n)
{
	for (int i = 0; i < n; i++)
		ck_assert_msg(isnan(want[i]) ? isnan(got[i]) : got[i] == want[i], "%s[%d]: %g, want %g",
			what, i, got[i], want[i]);
}

/* NaN propagates as in PyTorch 1.13's max_pool2d: one plane per case of
 * 2x2, one window; values and gradients as torch gives them. */
START_TEST(test_maxpool_nan)
{
	static const double x[5][4] = {
		{1, NAN, 3, 2},                                   /* NaN wins */
		{NAN, 1, NAN, 2},                                 /* the last NaN takes the gradient */
		{1, INFINITY, NAN, 2},                            /* over +∞ too */
		{NAN, INFINITY, 1, 2},                            /* NaN first */
		{-INFINITY, -INFINITY, -INFINITY, -INFINITY},     /* −∞ is a value: the first wins */
	};
	static const double y_want[5] = {NAN, NAN, NAN, NAN, -INFINITY};
	static const double dx_want[20] = {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0};
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *xn = input(&t, 4, (int64_t[]){1, 5, 2, 2}, 0, 1), *dx;
		memcpy(dval(&t, xn), x, sizeof x);
		ir_node *y = maxpool_and_grad(&t, xn, 2, 2, (int64_t[]){0, 0, 0, 0}, &dx);
		for (int i = 0; i < 5; i++)
			dval(&t, dx->in[0])[i] = 1;
		net_eval(&t, dx->id);
		check_special(dt ? "maxpool f64" : "maxpool f32", dval(&t, y), y_want, 5);
		check_special(dt ? "maxpool_grad f64" : "maxpool_grad f32", dval(&t, dx), dx_want, 20);
		net_free(&t);
	}
}
END_TEST

/* ---- dense and reductions ---------------------------------------------- */

static ir_node *matmul(net *t, ir_node *a, ir_node *b, int ta, int tb)
{
	ir_node *n = op(t, IR_OP_MATMUL, 2, a, b);
	ir_node_set_int(t->g, n, IR_ATTR_TRANS_A, ta);
	ir_node_set_int(t->g, n, IR_ATTR_TRANS_B, tb);
	return fin(n);
}

/* C = op(A)·op(B) for each transpose, against the direct product, and the
 * gradients autodiff would build (themselves matmuls) against differences. */
START_TEST(test_matmul)
{
	const int64_t m = 3, k = 4, n = 5;
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			for (int dt = 0; dt < 2; dt++) {
				net t;
				net_init(&t, dt ? IR_F64 : IR_F32);
				ir_node *a = input(&t, 2, ta ? (int64_t[]){k, m} : (int64_t[]){m, k}, -1, 1);
				ir_node *b = input(&t, 2, tb ? (int64_t[]){n, k} : (int64_t[]){k, n}, -1, 1);
				ir_node *c = matmul(&t, a, b, ta, tb);
				ir_node *dc = input(&t, 2, c->type.dim, -1, 1);
				ir_node *da = ta ? matmul(&t, b, dc, tb, 1) : matmul(&t, dc, b, 0, !tb);
				ir_node *db = tb ? matmul(&t, dc, a, 1, ta) : matmul(&t, a, dc, !ta, 0);
				net_eval(&t, t.g->n - 1);
				double ref[15] = {0}, *av = dval(&t, a), *bv = dval(&t, b);
				for (int64_t i = 0; i < m; i++)
					for (int64_t j = 0; j < n; j++)
						for (int64_t p = 0; p < k; p++)
							ref[i * n + j] += av[ta ? p * m + i : i * k + p] *
									  bv[tb ? j * k + p : p * n + j];
				char what[64];
				snprintf(what, sizeof what, "matmul %s ta=%d tb=%d", dt ? "f64" : "f32", ta, tb);
				check_close(what, dval(&t, c), ref, 15, dt ? 1e-15 : 1e-6);
				if (dt) {
					snprintf(what, sizeof what, "matmul da fd ta=%d tb=%d", ta, tb);
					fd_check(&t, a, c, dc, da, 1e-8, what);
					snprintf(what, sizeof what, "matmul db fd ta=%d tb=%d", ta, tb);
					fd_check(&t, b, c, dc, db, 1e-8, what);
				}
				net_free(&t);
			}
}
END_TEST

/* bias_add against the direct sum; its bias gradient, reduce_sum over all
 * but the channel axis, against differences. */
START_TEST(test_bias_add)
{
	static const int64_t shapes[2][4] = {{2, 3, 4, 4}, {5, 3}};
	for (int r = 0; r < 2; r++)
		for (int dt = 0; dt < 2; dt++) {
			net t;
			net_init(&t, dt ? IR_F64 : IR_F32);
			ir_node *x = input(&t, r ? 2 : 4, shapes[r], -1, 1);
			ir_node *b = input(&t, 1, (int64_t[]){3}, -1, 1);
			ir_node *y = fin(op(&t, IR_OP_BIAS_ADD, 2, x, b));
			ir_node *dy = input(&t, r ? 2 : 4, shapes[r], -1, 1);
			ir_node *db = op(&t, IR_OP_REDUCE_SUM, 1, dy);
			ir_node_set_ints(t.g, db, IR_ATTR_AXES, (int64_t[]){0, 2, 3}, r ? 1 : 3);
			fin(db);
			net_eval(&t, t.g->n - 1);
			int64_t hw = r ? 1 : 16;
			double ref[96];
			for (int64_t i = 0; i < elems(x); i++)
				ref[i] = dval(&t, x)[i] + dval(&t, b)[i / hw % 3];
			check_close("bias_add", dval(&t, y), ref, elems(x), dt ? 1e-16 : 1e-7);
			if (dt)
				fd_check(&t, b, y, dy, db, 1e-8, r ? "bias_add db fd rank 2" : "bias_add db fd rank 4");
			net_free(&t);
		}
}
END_TEST

START_TEST(test_reduce_sum)
{
	static const struct {
		int n;
		int64_t axes[4];
	} cases[] = {
		{0, {0}}, {1, {0}}, {1, {1}}, {1, {3}}, {2, {1, 3}}, {2, {0, 1}}, {2, {2, 3}},
		{3, {0, 2, 3}}, {3, {0, 1, 3}}, {4, {0, 1, 2, 3}},
	};
	const int64_t dims[4] = {2, 3, 4, 5};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
		for (int dt = 0; dt < 2; dt++) {
			net t;
			net_init(&t, dt ? IR_F64 : IR_F32);
			ir_node *x = input(&t, 4, dims, -1, 1);
			ir_node *y = op(&t, IR_OP_REDUCE_SUM, 1, x);
			ir_node_set_ints(t.g, y, IR_ATTR_AXES, cases[k].axes, cases[k].n);
			net_eval(&t, fin(y)->id);
			bool drop[4] = {false};
			for (int i = 0; i < cases[k].n; i++)
				drop[cases[k].axes[i]] = true;
			double ref[120] = {0};
			for (int64_t i = 0; i < 120; i++) {
				int64_t idx[4] = {i / 60, i / 20 % 3, i / 5 % 4, i % 5}, o = 0;
				for (int d = 0; d < 4; d++)
					if (!drop[d])
						o = o * dims[d] + idx[d];
				ref[o] += dval(&t, x)[i];
			}
			char what[64];
			snprintf(what, sizeof what, "reduce_sum %s case %zu", dt ? "f64" : "f32", k);
			check_close(what, dval(&t, y), ref, elems(y), dt ? 1e-15 : 1e-7);
			net_free(&t);
		}
}
END_TEST

/* ---- loss -------------------------------------------------------------- */

static ir_node *labels(net *t, int n, const int32_t *v)
{
	ir_node *l = leaf(t, IR_I32, 1, (int64_t[]){n});
	memcpy(t->val[l->id], v, (size_t)n * sizeof *v);
	return l;
}

START_TEST(test_softmax_xent)
{
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *x = input(&t, 2, (int64_t[]){4, 5}, -2, 2);
		ir_node *lab = labels(&t, 4, (int32_t[]){0, 3, 4, 1});
		ir_node *loss = fin(op(&t, IR_OP_SOFTMAX_XENT, 2, x, lab));
		ir_node *grad = fin(op(&t, IR_OP_SOFTMAX_XENT_GRAD, 2, x, lab));
		ir_node *one = input(&t, 0, NULL, 1, 1);
		net_eval(&t, t.g->n - 1);
		double ref = 0, *xv = dval(&t, x), gref[20];
		for (int i = 0; i < 4; i++) {
			double s = 0;
			for (int j = 0; j < 5; j++)
				s += exp(xv[i * 5 + j]);
			ref += (log(s) - xv[i * 5 + ((int32_t *)t.val[lab->id])[i]]) / 4;
			for (int j = 0; j < 5; j++)
				gref[i * 5 + j] = (exp(xv[i * 5 + j]) / s - (j == ((int32_t *)t.val[lab->id])[i])) / 4;
		}
		check_close("softmax_xent", dval(&t, loss), &ref, 1, dt ? 1e-15 : 1e-7);
		check_close("softmax_xent_grad", dval(&t, grad), gref, 20, dt ? 1e-15 : 1e-7);
		if (dt)
			fd_check(&t, x, loss, one, grad, 1e-7, "softmax_xent_grad fd");
		/* Logits near ±1000 would overflow exp without the max shift. */
		memcpy(xv, (double[]){1000, 1001, 999, 0, 0, -1000, -1000, -1000, 0, 0}, 10 * sizeof *xv);
		memcpy(xv + 10, (double[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 10 * sizeof *xv);
		net_eval(&t, t.g->n - 1);
		/* Row 0, label 0: 1001 + log(1 + e^-1 + e^-2) − 1000; row 1, label 3:
		 * log(2 + 3e^-1000) − 0; rows 2 and 3: log 5. */
		ref = (1 + log(1 + exp(-1.0) + exp(-2.0)) + log(2.0) + 2 * log(5.0)) / 4;
		check_close("softmax_xent large logits", dval(&t, loss), &ref, 1, dt ? 1e-15 : 1e-7);
		for (int i = 0; i < 20; i++)
			ck_assert(isfinite(dval(&t, grad)[i]));
		net_free(&t);
	}
}
END_TEST

/* PyTorch 1.13's cross_entropy: a NaN logit (also first in its row, where
 * the max starts) or a +∞ one makes the loss and that row's gradient NaN;
 * a −∞ one that is not the label is harmless: [1, −∞, 2] with label 0 has
 * loss log(1 + e) and gradient (−e/(1+e), 0, e/(1+e)) / N. */
START_TEST(test_softmax_xent_nan)
{
	static const double x[4][3] = {{1, NAN, 2}, {NAN, 1, 2}, {1, INFINITY, 2}, {1, -INFINITY, 2}};
	const double e1 = exp(1.0);
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *xn = input(&t, 2, (int64_t[]){4, 3}, 0, 1);
		memcpy(dval(&t, xn), x, sizeof x);
		ir_node *lab = labels(&t, 4, (int32_t[]){0, 0, 0, 0});
		ir_node *loss = fin(op(&t, IR_OP_SOFTMAX_XENT, 2, xn, lab));
		ir_node *grad = fin(op(&t, IR_OP_SOFTMAX_XENT_GRAD, 2, xn, lab));
		net_eval(&t, grad->id);
		ck_assert(isnan(dval(&t, loss)[0]));
		for (int i = 0; i < 9; i++)
			ck_assert_msg(isnan(dval(&t, grad)[i]), "dlogits[%d] = %g", i, dval(&t, grad)[i]);
		double want[3] = {-e1 / (1 + e1) / 4, 0, e1 / (1 + e1) / 4};
		check_close("softmax_xent_grad −∞", dval(&t, grad) + 9, want, 3, dt ? 1e-15 : 1e-7);
		/* The −∞ row alone: a finite loss. */
		ir_node *one = input(&t, 2, (int64_t[]){1, 3}, 0, 1);
		memcpy(dval(&t, one), x[3], sizeof x[3]);
		ir_node *l1 = fin(op(&t, IR_OP_SOFTMAX_XENT, 2, one, labels(&t, 1, (int32_t[]){0})));
		net_eval(&t, l1->id);
		double lw = log(1 + e1);
		check_close("softmax_xent −∞", dval(&t, l1), &lw, 1, dt ? 1e-15 : 1e-7);
		net_free(&t);
	}
}
END_TEST

START_TEST(test_softmax_xent_bad_label)
{
	net t;
	net_init(&t, IR_F32);
	ir_node *x = input(&t, 2, (int64_t[]){4, 10}, -1, 1);
	ir_node *lab = labels(&t, 4, (int32_t[]){0, 3, 9, 12});
	ir_node *n[2] = {fin(op(&t, IR_OP_SOFTMAX_XENT, 2, x, lab)),
		fin(op(&t, IR_OP_SOFTMAX_XENT_GRAD, 2, x, lab))};
	float xv[40] = {0}, out[40];
	for (int i = 0; i < 2; i++) {
		rt_kargs a = {.n = n[i], .out = out, .in = {xv, t.val[lab->id]}};
		rt_err e;
		ck_assert(!rt_kernel_get(n[i])(&a, &e));
		ck_assert_str_eq(e.msg, "label 12 out of range 0..9 at example 3");
		((int32_t *)t.val[lab->id])[1] = -1;
		ck_assert(!rt_kernel_get(n[i])(&a, &e));
		ck_assert_str_eq(e.msg, "label -1 out of range 0..9 at example 1");
		((int32_t *)t.val[lab->id])[1] = 3;
	}
	net_free(&t);
}
END_TEST

/* ---- elementwise and layout -------------------------------------------- */

START_TEST(test_elementwise)
{
	static const ir_op ops[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_SCALE, IR_OP_RELU, IR_OP_RELU_GRAD,
		IR_OP_CONST};
	for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
		for (int dt = 0; dt < 2; dt++) {
			net t;
			net_init(&t, dt ? IR_F64 : IR_F32);
			int64_t dims[3] = {2, 3, 5};
			ir_node *a = input(&t, 3, dims, -1, 1), *b = input(&t, 3, dims, -1, 1), *n;
			ir_op o = ops[k];
			if (o == IR_OP_CONST) {
				n = op(&t, o, 0);
				ir_node_set_float(t.g, n, IR_ATTR_VALUE, 0.25);
				declare(n, a);
			} else {
				n = o == IR_OP_SCALE || o == IR_OP_RELU ? op(&t, o, 1, a) : op(&t, o, 2, a, b);
				if (o == IR_OP_SCALE)
					ir_node_set_float(t.g, n, IR_ATTR_FACTOR, -1.5);
				fin(n);
			}
			double ref[30], *av = dval(&t, a), *bv = dval(&t, b);
			for (int i = 0; i < 30; i++)
				ref[i] = o == IR_OP_ADD ? av[i] + bv[i] : o == IR_OP_SUB ? av[i] - bv[i] :
					 o == IR_OP_SCALE ? -1.5 * av[i] : o == IR_OP_RELU ? fmax(av[i], 0) :
					 o == IR_OP_RELU_GRAD ? (bv[i] > 0 ? av[i] : 0) : 0.25;
			net_eval(&t, n->id);
			check_close(ir_op_name(o), dval(&t, n), ref, 30, dt ? 1e-16 : 1e-7);
			/* In place: out aliases operand 0. */
			if (o != IR_OP_CONST) {
				double buf[30], other[30];
				as(t.dt, av, 30, buf);
				call(n, buf, buf, as(t.dt, bv, 30, other), NULL);
				for (int i = 0; i < 30; i++)
					av[i] = t.dt == IR_F32 ? (double)((float *)buf)[i] : buf[i];
				check_close("in place", av, ref, 30, dt ? 1e-16 : 1e-7);
			}
			net_free(&t);
		}
}
END_TEST

/* As in PyTorch 1.13: relu(NaN) = NaN, relu(±∞) = ∞, 0; relu_grad (its
 * threshold_backward: 0 where y <= 0, else dy) passes dy where y is NaN and
 * gives 0 where y <= 0 even for a NaN dy.  40 elements, so the vectorised
 * loop sees them, in place too. */
START_TEST(test_relu_nan)
{
	static const double x[8] = {NAN, -1, 0, 2, INFINITY, -INFINITY, -1, NAN};
	static const double dy[8] = {1, 2, 3, 4, 5, 6, NAN, NAN};
	static const double y_want[8] = {NAN, 0, 0, 2, INFINITY, 0, 0, NAN};
	static const double dx_want[8] = {1, 0, 0, 4, 5, 0, 0, NAN};
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *xn = input(&t, 1, (int64_t[]){40}, 0, 1), *dyn = input(&t, 1, (int64_t[]){40}, 0, 1);
		double yw[40], dxw[40];
		for (int i = 0; i < 40; i++) {
			dval(&t, xn)[i] = x[i % 8];
			dval(&t, dyn)[i] = dy[i % 8];
			yw[i] = y_want[i % 8];
			dxw[i] = dx_want[i % 8];
		}
		ir_node *y = fin(op(&t, IR_OP_RELU, 1, xn));
		ir_node *dx = fin(op(&t, IR_OP_RELU_GRAD, 2, dyn, y));
		net_eval(&t, dx->id);
		check_special("relu", dval(&t, y), yw, 40);
		check_special("relu_grad", dval(&t, dx), dxw, 40);
		/* In place: out aliases operand 0. */
		union { float f[40]; double d[40]; } a, b;
		double got[40];
		for (int i = 0; i < 40; i++)
			if (dt)
				a.d[i] = dval(&t, xn)[i];
			else
				a.f[i] = (float)dval(&t, xn)[i];
		call(y, &a, &a, NULL, NULL);
		for (int i = 0; i < 40; i++) {
			if (dt)
				b.d[i] = dval(&t, dyn)[i];
			else
				b.f[i] = (float)dval(&t, dyn)[i];
		}
		call(dx, &b, &b, &a, NULL);
		for (int i = 0; i < 40; i++)
			got[i] = dt ? a.d[i] : (double)a.f[i];
		check_special("relu in place", got, yw, 40);
		for (int i = 0; i < 40; i++)
			got[i] = dt ? b.d[i] : (double)b.f[i];
		check_special("relu_grad in place", got, dxw, 40);
		net_free(&t);
	}
}
END_TEST

/* relu_grad(dy, relu(x)) against differences, x kept away from the kink. */
START_TEST(test_relu_grad_fd)
{
	net t;
	net_init(&t, IR_F64);
	ir_node *x = input(&t, 2, (int64_t[]){4, 6}, -1, 1);
	for (int i = 0; i < 24; i++)
		dval(&t, x)[i] += dval(&t, x)[i] < 0 ? -0.01 : 0.01;
	ir_node *y = fin(op(&t, IR_OP_RELU, 1, x));
	ir_node *dy = input(&t, 2, (int64_t[]){4, 6}, -1, 1);
	ir_node *dx = fin(op(&t, IR_OP_RELU_GRAD, 2, dy, y));
	fd_check(&t, x, y, dy, dx, 1e-8, "relu_grad fd");
	net_free(&t);
}
END_TEST

static ir_node *channels(net *t, ir_op o, ir_node *x, int64_t lo, int64_t hi)
{
	ir_node *n = op(t, o, 1, x);
	ir_node_set_int(t->g, n, IR_ATTR_LO, lo);
	ir_node_set_int(t->g, n, IR_ATTR_HI, hi);
	return fin(n);
}

static ir_node *split(net *t, ir_node *x, int64_t axis, int64_t part, int64_t parts)
{
	ir_node *n = op(t, IR_OP_SPLIT, 1, x);
	ir_node_set_int(t->g, n, IR_ATTR_AXIS, axis);
	ir_node_set_int(t->g, n, IR_ATTR_PART, part);
	ir_node_set_int(t->g, n, IR_ATTR_PARTS, parts);
	return fin(n);
}

static ir_node *concat(net *t, ir_node *a, ir_node *b, int64_t axis)
{
	ir_node *n = op(t, IR_OP_CONCAT, 2, a, b);
	ir_node_set_int(t->g, n, IR_ATTR_AXIS, axis);
	return fin(n);
}

static ir_node *zeros(net *t, int rank, const int64_t *dims)
{
	ir_node *n = op(t, IR_OP_CONST, 0);
	ir_node_set_float(t->g, n, IR_ATTR_VALUE, 0);
	n->type = ir_type_make(t->dt, rank, dims);
	return fin(n);
}

/* Each layout op is the adjoint of another: pad/slice, split/concat. */
START_TEST(test_layout_fd)
{
	net t;
	net_init(&t, IR_F64);
	ir_node *x = input(&t, 4, (int64_t[]){2, 3, 2, 3}, -1, 1);
	ir_node *y = channels(&t, IR_OP_CHANNEL_PAD, x, 1, 2);
	ir_node *dy = input(&t, 4, y->type.dim, -1, 1);
	fd_check(&t, x, y, dy, channels(&t, IR_OP_CHANNEL_SLICE, dy, 1, 2), 1e-8, "channel_slice fd");
	y = channels(&t, IR_OP_CHANNEL_SLICE, x, 2, 0);
	dy = input(&t, 4, y->type.dim, -1, 1);
	fd_check(&t, x, y, dy, channels(&t, IR_OP_CHANNEL_PAD, dy, 2, 0), 1e-8, "channel_pad fd");
	net_free(&t);

	/* split part 1 of 3 along axis 1; its adjoint pads dy with zeros. */
	net_init(&t, IR_F64);
	x = input(&t, 3, (int64_t[]){2, 6, 3}, -1, 1);
	y = split(&t, x, 1, 1, 3);
	dy = input(&t, 3, y->type.dim, -1, 1);
	ir_node *z = zeros(&t, 3, y->type.dim);
	ir_node *dx = concat(&t, concat(&t, z, dy, 1), z, 1);
	fd_check(&t, x, y, dy, dx, 1e-8, "concat as split's gradient fd");
	net_free(&t);

	/* concat along the last axis of [2,3,2] and [2,3,4]. */
	net_init(&t, IR_F64);
	ir_node *a = input(&t, 3, (int64_t[]){2, 3, 2}, -1, 1);
	ir_node *b = input(&t, 3, (int64_t[]){2, 3, 4}, -1, 1);
	y = concat(&t, a, b, 2);
	dy = input(&t, 3, y->type.dim, -1, 1);
	ir_node *da = split(&t, dy, 2, 0, 3);
	ir_node *db = concat(&t, split(&t, dy, 2, 1, 3), split(&t, dy, 2, 2, 3), 2);
	fd_check(&t, a, y, dy, da, 1e-8, "split as concat's gradient fd (a)");
	fd_check(&t, b, y, dy, db, 1e-8, "split as concat's gradient fd (b)");
	/* And the forward values, element by element. */
	double *yv = dval(&t, y), *av = dval(&t, a), *bv = dval(&t, b);
	for (int i = 0; i < 36; i++)
		ck_assert(yv[i] == (i % 6 < 2 ? av[i / 6 * 2 + i % 6] : bv[i / 6 * 4 + i % 6 - 2]));
	net_free(&t);
}
END_TEST

START_TEST(test_layout_forward)
{
	net t;
	net_init(&t, IR_F32);
	ir_node *x = input(&t, 4, (int64_t[]){2, 4, 2, 2}, -1, 1);
	ir_node *p = channels(&t, IR_OP_CHANNEL_PAD, x, 1, 2);
	ir_node *s = channels(&t, IR_OP_CHANNEL_SLICE, x, 1, 2);
	ir_node *h = split(&t, x, 0, 1, 2);
	net_eval(&t, t.g->n - 1);
	double *xv = dval(&t, x);
	for (int n = 0; n < 2; n++)
		for (int c = 0; c < 7; c++)
			for (int k = 0; k < 4; k++) {
				double want = c >= 1 && c < 5 ? xv[(n * 4 + c - 1) * 4 + k] : 0;
				ck_assert(dval(&t, p)[(n * 7 + c) * 4 + k] == want);
				if (c < 1)
					ck_assert(dval(&t, s)[(n + c) * 4 + k] == xv[(n * 4 + 1) * 4 + k]);
			}
	for (int i = 0; i < 16; i++)
		ck_assert(dval(&t, h)[i] == xv[16 + i]);
	net_free(&t);
}
END_TEST

/* ---- optimiser --------------------------------------------------------- */

START_TEST(test_optimiser)
{
	static const double v[4] = {1, 2, -1, 0.5}, g[4] = {0.1, -0.2, 0.3, 0};
	static const double w[4] = {2, -1, 0, 10}, lr = 0.1;
	static const double v_want[4] = {1.0, 1.6, -0.6, 0.45}, vwd_want[4] = {1.02, 1.59, -0.6, 0.55};
	static const double w_want[4] = {1.9, -1.2, 0.1, 9.95};
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *vn = input(&t, 1, (int64_t[]){4}, 0, 1), *gn = input(&t, 1, (int64_t[]){4}, 0, 1);
		ir_node *wn = input(&t, 1, (int64_t[]){4}, 0, 1), *lrn = input(&t, 0, NULL, 0, 1);
		ir_node *mom = op(&t, IR_OP_MOMENTUM, 2, vn, gn), *momwd = op(&t, IR_OP_MOMENTUM, 3, vn, gn, wn);
		ir_node_set_float(t.g, mom, IR_ATTR_MOMENTUM, 0.9);
		ir_node_set_float(t.g, momwd, IR_ATTR_MOMENTUM, 0.9);
		ir_node_set_float(t.g, momwd, IR_ATTR_WD, 0.01);
		ir_node *sgd = fin(op(&t, IR_OP_SGD, 3, wn, vn, lrn));
		fin(mom);
		fin(momwd);
		double vb[4], gb[4], wb[4], lb[1];
		as(t.dt, g, 4, gb);
		call(mom, as(t.dt, v, 4, vb), vb, gb, NULL);
		check_buf("momentum in place", t.dt, vb, v_want, 4);
		call(momwd, as(t.dt, v, 4, vb), vb, gb, as(t.dt, w, 4, wb));
		check_buf("momentum with wd in place", t.dt, vb, vwd_want, 4);
		call(sgd, as(t.dt, w, 4, wb), wb, as(t.dt, v, 4, vb), as(t.dt, &lr, 1, lb));
		check_buf("sgd in place", t.dt, wb, w_want, 4);
		net_free(&t);
	}
}
END_TEST

/* AdamW over three steps from m = v = t = 0, with and without weight decay
 * (lr 1e-2, betas 0.9 and 0.999, eps 1e-8), against torch.optim.AdamW run
 * in float64 (PyTorch 1.13; its order of evaluation differs, to rounding):
 * the moments m and v after each step, and the weights with wd 0 and 0.1.
 * Element 2 has a zero gradient at t = 1 (m = v = 0: no move) and 1e-9 at
 * t = 2, where eps matters. */
START_TEST(test_adamw)
{
	static const double w0[4] = {0.5, -1.25, 2.0, 0.0}, lr = 1e-2;
	static const double g[3][4] = {{0.1, -0.02, 0.0, 3.0}, {-0.3, 0.01, 1e-9, 2.5}, {0.2, -0.05, -0.4, -1.0}};
	static const double m_want[3][4] = {
		{0.009999999999999998, -0.0019999999999999996, 0.0, 0.29999999999999993},
		{-0.020999999999999994, -0.0007999999999999999, 9.999999999999998e-11, 0.5199999999999999},
		{0.0011, -0.005719999999999999, -0.03999999990999999, 0.36799999999999994}};
	static const double v_want[3][4] = {
		{1.0000000000000011e-05, 4.000000000000004e-07, 0.0, 0.009000000000000008},
		{9.999000000000008e-05, 4.996000000000005e-07, 1.000000000000001e-21, 0.015241000000000013},
		{0.0001398900100000001, 2.999100400000003e-06, 0.00016000000000000018, 0.016225759000000013}};
	static const double w_want[2][3][4] = {
		{{0.4900000009999999, -1.2400000049999975, 2.0, -0.009999999966666666},
		 {0.49494189911200653, -1.2373366362881086, 1.9995084506883856, -0.01991172867663841},
		 {0.4947540221765934, -1.23066435199942, 2.0058965863915215, -0.025747784794408906}},
		{{0.4895000009999999, -1.2387500049999975, 1.998, -0.009999999966666666},
		 {0.4939523991110065, -1.2348478862831087, 1.9955104506883856, -0.01990172867667174},
		 {0.4932705697764824, -1.226940754108137, 1.999903075940833, -0.025717883065765567}}};
	for (int dt = 0; dt < 2; dt++)
		for (int wd = 0; wd < 2; wd++) {
			net t;
			net_init(&t, dt ? IR_F64 : IR_F32);
			ir_node *tn = input(&t, 0, NULL, 0, 1), *lrn = input(&t, 0, NULL, 0, 1);
			ir_node *wn = input(&t, 1, (int64_t[]){4}, 0, 1), *gn = input(&t, 1, (int64_t[]){4}, 0, 1);
			ir_node *mn = input(&t, 1, (int64_t[]){4}, 0, 1), *vn = input(&t, 1, (int64_t[]){4}, 0, 1);
			ir_node *count = fin(op(&t, IR_OP_ADAM_COUNT, 1, tn));
			ir_node *c1 = op(&t, IR_OP_ADAM_BIAS, 1, count), *c2 = op(&t, IR_OP_ADAM_BIAS, 1, count);
			ir_node_set_float(t.g, c1, IR_ATTR_BETA, 0.9);
			ir_node_set_float(t.g, c2, IR_ATTR_BETA, 0.999);
			ir_node *am = op(&t, IR_OP_ADAM_M, 2, mn, gn), *av = op(&t, IR_OP_ADAM_V, 2, vn, gn);
			ir_node_set_float(t.g, am, IR_ATTR_BETA, 0.9);
			ir_node_set_float(t.g, av, IR_ATTR_BETA, 0.999);
			ir_node *aw = op(&t, IR_OP_ADAMW, 6, wn, am, av, lrn, c1, c2);
			ir_node_set_float(t.g, aw, IR_ATTR_EPS, 1e-8);
			if (wd)
				ir_node_set_float(t.g, aw, IR_ATTR_WD, 0.1);
			fin(c1);
			fin(c2);
			fin(am);
			fin(av);
			fin(aw);
			double tb[1] = {0}, c1b[1], c2b[1], lrb[1], wb[4], gb[4], mb[4] = {0}, vb[4] = {0};
			as(t.dt, tb, 1, tb); /* 0 in either type */
			as(t.dt, &lr, 1, lrb);
			as(t.dt, w0, 4, wb);
			as(t.dt, mb, 4, mb);
			as(t.dt, vb, 4, vb);
			for (int s = 0; s < 3; s++) {
				double step = s + 1, bias[2] = {1 - pow(0.9, step), 1 - pow(0.999, step)};
				call_n(count, tb, (const void *[]){tb});
				check_buf("adam_count in place", t.dt, tb, &step, 1);
				call_n(c1, c1b, (const void *[]){tb});
				call_n(c2, c2b, (const void *[]){tb});
				check_buf("adam_bias beta 0.9", t.dt, c1b, &bias[0], 1);
				check_buf("adam_bias beta 0.999", t.dt, c2b, &bias[1], 1);
				as(t.dt, g[s], 4, gb);
				call_n(am, mb, (const void *[]){mb, gb});
				call_n(av, vb, (const void *[]){vb, gb});
				call_n(aw, wb, (const void *[]){wb, mb, vb, lrb, c1b, c2b});
				double got[3][4];
				for (int i = 0; i < 4; i++) {
					const void *b[3] = {mb, vb, wb};
					for (int k = 0; k < 3; k++)
						got[k][i] = t.dt == IR_F32 ? (double)((const float *)b[k])[i] : ((const double *)b[k])[i];
				}
				double tol = t.dt == IR_F32 ? 1e-6 : 1e-14;
				check_close("adam_m in place", got[0], m_want[s], 4, tol);
				check_close("adam_v in place", got[1], v_want[s], 4, tol);
				check_close(wd ? "adamw with wd in place" : "adamw in place", got[2], w_want[wd][s], 4, tol);
				/* The element with no gradient yet does not move at t = 1. */
				ck_assert(s > 0 || wd || got[2][2] == w0[2]);
			}
			net_free(&t);
		}
}
END_TEST

/* ---- dispatch ---------------------------------------------------------- */

START_TEST(test_every_op_has_kernels)
{
	ir_graph *g = ir_graph_new("k");
	for (int o = 0; o < IR_OP_COUNT; o++) {
		ir_node *n = ir_node_new(g, (ir_op)o, NULL, 0);
		n->type = ir_type_scalar(IR_F32);
		rt_kernel_fn f32 = rt_kernel_get(n);
		n->type = ir_type_scalar(IR_F64);
		rt_kernel_fn f64 = rt_kernel_get(n);
		bool none = o == IR_OP_INPUT || o == IR_OP_PARAM || o == IR_OP_STATE || o == IR_OP_OUTPUT;
		ck_assert_msg(none ? !f32 && !f64 : f32 && f64 && f32 != f64, "%s", ir_op_name((ir_op)o));
	}
	/* softmax_xent's result is float; an integral result takes operand 0's
	 * dtype. */
	ir_node *x = ir_node_new(g, IR_OP_INPUT, NULL, 0);
	x->type = ir_type_scalar(IR_F64);
	ir_node *n = ir_node_new(g, IR_OP_SOFTMAX_XENT, &x, 1);
	n->type = ir_type_scalar(IR_I32);
	ck_assert(rt_kernel_get(n) == rt_k_softmax_xent_f64);
	ir_graph_free(g);
}
END_TEST


Suite *rt_kern_ops_suite(void)
{
	Suite *s = suite_create("rt_kern_ops");
	TCase *tc = tcase_create("kernels");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_pool);
	tcase_add_test(tc, test_maxpool_ties_and_padding);
	tcase_add_test(tc, test_maxpool_nan);
	tcase_add_test(tc, test_global_avgpool);
	tcase_add_test(tc, test_matmul);
	tcase_add_test(tc, test_bias_add);
	tcase_add_test(tc, test_reduce_sum);
	tcase_add_test(tc, test_softmax_xent);
	tcase_add_test(tc, test_softmax_xent_bad_label);
	tcase_add_test(tc, test_softmax_xent_nan);
	tcase_add_test(tc, test_elementwise);
	tcase_add_test(tc, test_relu_nan);
	tcase_add_test(tc, test_relu_grad_fd);
	tcase_add_test(tc, test_layout_fd);
	tcase_add_test(tc, test_layout_forward);
	tcase_add_test(tc, test_optimiser);
	tcase_add_test(tc, test_adamw);
	tcase_add_test(tc, test_every_op_has_kernels);
	suite_add_tcase(s, tc);
	return s;
}
