/* test_rt_kern_norm.c: the reference kernels of the transformer's ops
 * (runtime/kern_norm.c: layer norm, exact GELU, softmax, mean over tokens)
 * against hand-computed values, direct references in double and f64 finite
 * differences; NaN propagation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_net.h"
#include "runtime_suites.h"

static ir_node *with_eps(net *t, ir_node *n, double eps)
{
	ir_node_set_float(t->g, n, IR_ATTR_EPS, eps);
	return fin(n);
}

static ir_node *with_factor(net *t, ir_node *n, double f)
{
	if (f != 1)
		ir_node_set_float(t->g, n, IR_ATTR_FACTOR, f);
	return fin(n);
}

/* ---- layer norm ---------------------------------------------------------- */

typedef struct {
	ir_node *x, *gamma, *beta, *stats, *y, *dy, *dgamma, *dbeta, *dx;
} ln_nodes;

/* Layer norm over the last axis of x (uniform in offset ± 1) and its
 * backward pass. */
static ln_nodes ln_net(net *t, int rank, const int64_t *dims, double offset, double eps)
{
	ln_nodes b;
	int64_t d = dims[rank - 1];
	b.x = input(t, rank, dims, offset - 1, offset + 1);
	b.gamma = input(t, 1, &d, 0.5, 1.5);
	b.beta = input(t, 1, &d, -0.5, 0.5);
	b.stats = fin(op(t, IR_OP_LN_STATS, 1, b.x));
	b.y = with_eps(t, op(t, IR_OP_LN_NORM, 4, b.x, b.stats, b.gamma, b.beta), eps);
	b.dy = input(t, rank, dims, -1, 1);
	b.dbeta = op(t, IR_OP_REDUCE_SUM, 1, b.dy);
	ir_node_set_ints(t->g, b.dbeta, IR_ATTR_AXES, (int64_t[]){0, 1, 2}, rank - 1);
	fin(b.dbeta);
	b.dgamma = with_eps(t, op(t, IR_OP_LN_DGAMMA, 3, b.dy, b.x, b.stats), eps);
	b.dx = with_eps(t, op(t, IR_OP_LN_DX, 4, b.dy, b.x, b.stats, b.gamma), eps);
	return b;
}

/* One row [1, 2, 3, 4]: mean 2.5, biased variance 1.25. */
START_TEST(test_ln_by_hand)
{
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ln_nodes b = ln_net(&t, 2, (int64_t[]){1, 4}, 0, 0.25);
		memcpy(dval(&t, b.x), (double[]){1, 2, 3, 4}, 4 * sizeof(double));
		memcpy(dval(&t, b.gamma), (double[]){1, 2, 1, 1}, 4 * sizeof(double));
		memcpy(dval(&t, b.beta), (double[]){0, 0, 0, 10}, 4 * sizeof(double));
		net_eval(&t, b.y->id);
		/* sqrt(1.25 + 0.25) = sqrt(1.5) */
		double s = sqrt(1.5);
		double y[4] = {-1.5 / s, 2 * -0.5 / s, 0.5 / s, 1.5 / s + 10};
		check_close("ln_stats by hand", dval(&t, b.stats), (double[]){2.5, 1.25}, 2, 0);
		check_close("ln_norm by hand", dval(&t, b.y), y, 4, dt ? 1e-15 : 1e-7);
		net_free(&t);
	}
}
END_TEST

START_TEST(test_ln_forward)
{
	static const int64_t shapes[2][3] = {{2, 5, 7}, {6, 9}};
	static const double offsets[2] = {0.5, 100};
	for (int dt = 0; dt < 2; dt++)
		for (int r = 0; r < 2; r++)
			for (int o = 0; o < 2; o++) {
				net t;
				net_init(&t, dt ? IR_F64 : IR_F32);
				int rank = r ? 2 : 3;
				const int64_t *dims = shapes[r];
				int64_t d = dims[rank - 1], rows = r ? dims[0] : dims[0] * dims[1];
				ln_nodes b = ln_net(&t, rank, dims, offsets[o], 1e-5);
				net_eval(&t, b.y->id);
				double *x = dval(&t, b.x), *g = dval(&t, b.gamma), *be = dval(&t, b.beta);
				double *st = malloc((size_t)(2 * rows) * sizeof *st);
				double *y = malloc((size_t)elems(b.x) * sizeof *y);
				for (int64_t row = 0; row < rows; row++) {
					double s = 0, q = 0;
					for (int64_t j = 0; j < d; j++)
						s += x[row * d + j];
					for (int64_t j = 0; j < d; j++)
						q += (x[row * d + j] - s / (double)d) * (x[row * d + j] - s / (double)d);
					st[2 * row] = s / (double)d;
					st[2 * row + 1] = q / (double)d;
					for (int64_t j = 0; j < d; j++)
						y[row * d + j] = g[j] * (x[row * d + j] - st[2 * row]) /
							sqrt(st[2 * row + 1] + 1e-5) + be[j];
				}
				char what[64];
				snprintf(what, sizeof what, "ln_stats %s rank %d +%g", dt ? "f64" : "f32", rank,
					offsets[o]);
				check_close(what, dval(&t, b.stats), st, 2 * rows, dt ? 1e-12 : 1e-6);
				/* An f32 mean of ~100 is off by ~1e-6, which normalising magnifies. */
				snprintf(what, sizeof what, "ln_norm %s rank %d +%g", dt ? "f64" : "f32", rank,
					offsets[o]);
				check_close(what, dval(&t, b.y), y, elems(b.x), dt ? 1e-11 : o ? 1e-4 : 1e-6);
				free(st);
				free(y);
				net_free(&t);
			}
}
END_TEST

START_TEST(test_ln_fd)
{
	static const int64_t shapes[2][3] = {{2, 3, 6}, {4, 5}};
	for (int r = 0; r < 2; r++) {
		net t;
		net_init(&t, IR_F64);
		ln_nodes b = ln_net(&t, r ? 2 : 3, shapes[r], 0.5, 1e-3);
		char what[64];
		snprintf(what, sizeof what, "ln_dx fd rank %d", r ? 2 : 3);
		fd_check(&t, b.x, b.y, b.dy, b.dx, 1e-7, what);
		snprintf(what, sizeof what, "ln_dgamma fd rank %d", r ? 2 : 3);
		fd_check(&t, b.gamma, b.y, b.dy, b.dgamma, 1e-7, what);
		snprintf(what, sizeof what, "ln dbeta fd rank %d", r ? 2 : 3);
		fd_check(&t, b.beta, b.y, b.dy, b.dbeta, 1e-7, what);
		net_free(&t);
	}
}
END_TEST

/* A NaN in one row makes that row NaN and leaves the others alone. */
START_TEST(test_ln_nan)
{
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ln_nodes b = ln_net(&t, 2, (int64_t[]){2, 3}, 0, 1e-5);
		dval(&t, b.x)[1] = NAN;
		net_eval(&t, t.g->n - 1);
		for (int j = 0; j < 3; j++) {
			ck_assert(isnan(dval(&t, b.y)[j]) && isfinite(dval(&t, b.y)[3 + j]));
			ck_assert(isnan(dval(&t, b.dx)[j]) && isfinite(dval(&t, b.dx)[3 + j]));
			ck_assert(isnan(dval(&t, b.dgamma)[j]));
		}
		net_free(&t);
	}
}
END_TEST

/* ---- GELU ---------------------------------------------------------------- */

START_TEST(test_gelu)
{
	/* a·Φ(a): Φ(1) = 0.841344746068543, Φ(2) = 0.977249868051821 */
	static const double a[6] = {0, 1, -1, 2, -3, 0.5};
	static const double want[6] = {0, 0.8413447460685429, -0.15865525393145707, 1.9544997361036416,
		-0.00404969409489031, 0.34573123063700656};
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *x = input(&t, 1, (int64_t[]){6}, 0, 1);
		memcpy(dval(&t, x), a, sizeof a);
		ir_node *y = fin(op(&t, IR_OP_GELU, 1, x));
		net_eval(&t, y->id);
		check_close(dt ? "gelu f64" : "gelu f32", dval(&t, y), want, 6, dt ? 1e-12 : 1e-7);
		net_free(&t);
	}
	/* The tanh approximation differs by ~1e-4 at a = 1: this is the exact form. */
	ck_assert(fabs(want[1] - 0.5 * (1 + tanh(sqrt(2 / M_PI) * (1 + 0.044715)))) > 1e-4);
}
END_TEST

START_TEST(test_gelu_grad)
{
	net t;
	net_init(&t, IR_F64);
	ir_node *x = input(&t, 2, (int64_t[]){4, 9}, -3, 3);
	ir_node *y = fin(op(&t, IR_OP_GELU, 1, x));
	ir_node *dy = input(&t, 2, (int64_t[]){4, 9}, -1, 1);
	ir_node *dx = fin(op(&t, IR_OP_GELU_GRAD, 2, dy, x));
	fd_check(&t, x, y, dy, dx, 1e-7, "gelu_grad fd");
	/* d/da at 0 is Φ(0) = 1/2; NaN passes through both. */
	dval(&t, x)[0] = 0;
	dval(&t, dy)[0] = 1;
	dval(&t, x)[1] = NAN;
	net_eval(&t, t.g->n - 1);
	ck_assert(dval(&t, dx)[0] == 0.5);
	ck_assert(isnan(dval(&t, y)[1]) && isnan(dval(&t, dx)[1]));
	net_free(&t);
}
END_TEST

/* ---- softmax -------------------------------------------------------------- */

START_TEST(test_softmax_by_hand)
{
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		/* rows: log 1, log 2, log 3 → 1/6, 2/6, 3/6; 1000, 1000, 1001 (exp
		 * overflows without the shift) → 1, 1, e over 2 + e; with factor
		 * 0.5, exp(0.5·log k) = √k and 1, 1, √e over 2 + √e.  (f32 rounds
		 * log 2 and log 3 to float.) */
		ir_node *x = input(&t, 2, (int64_t[]){2, 3}, 0, 1);
		memcpy(dval(&t, x), (double[]){0, log(2), log(3), 1000, 1000, 1001}, 6 * sizeof(double));
		ir_node *y = with_factor(&t, op(&t, IR_OP_SOFTMAX, 1, x), 1);
		ir_node *y2 = with_factor(&t, op(&t, IR_OP_SOFTMAX, 1, x), 0.5);
		net_eval(&t, y2->id);
		double tol = dt ? 1e-15 : 1e-6, e = exp(1), se = sqrt(e);
		check_close("softmax by hand", dval(&t, y),
			(double[]){1. / 6, 2. / 6, 3. / 6, 1 / (2 + e), 1 / (2 + e), e / (2 + e)}, 6, tol);
		double s = 1 + sqrt(2) + sqrt(3);
		check_close("softmax factor 0.5", dval(&t, y2),
			(double[]){1 / s, sqrt(2) / s, sqrt(3) / s, 1 / (2 + se), 1 / (2 + se), se / (2 + se)}, 6, tol);
		net_free(&t);
	}
}
END_TEST

START_TEST(test_softmax_fd)
{
	static const double factors[3] = {1, 0.35, -1.3};
	for (int f = 0; f < 3; f++) {
		net t;
		net_init(&t, IR_F64);
		ir_node *x = input(&t, 3, (int64_t[]){2, 3, 5}, -2, 2);
		ir_node *y = with_factor(&t, op(&t, IR_OP_SOFTMAX, 1, x), factors[f]);
		ir_node *dy = input(&t, 3, (int64_t[]){2, 3, 5}, -1, 1);
		ir_node *dx = with_factor(&t, op(&t, IR_OP_SOFTMAX_GRAD, 2, dy, y), factors[f]);
		char what[64];
		snprintf(what, sizeof what, "softmax_grad fd factor %g", factors[f]);
		fd_check(&t, x, y, dy, dx, 1e-7, what);
		net_free(&t);
	}
}
END_TEST

/* A NaN (or +inf, whose shift gives inf − inf) spoils its row only; the
 * running maximum keeps a NaN wherever it is in the row. */
START_TEST(test_softmax_nan)
{
	for (int dt = 0; dt < 2; dt++)
		for (int at = 0; at < 3; at++) {
			net t;
			net_init(&t, dt ? IR_F64 : IR_F32);
			ir_node *x = input(&t, 2, (int64_t[]){3, 3}, -1, 1);
			dval(&t, x)[at] = NAN;
			dval(&t, x)[6 + at] = INFINITY;
			ir_node *y = with_factor(&t, op(&t, IR_OP_SOFTMAX, 1, x), 1);
			ir_node *dx = with_factor(&t, op(&t, IR_OP_SOFTMAX_GRAD, 2, input(&t, 2, (int64_t[]){3, 3}, -1, 1), y), 1);
			net_eval(&t, dx->id);
			for (int j = 0; j < 3; j++) {
				ck_assert_msg(isnan(dval(&t, y)[j]), "NaN at %d, y[%d] = %g", at, j, dval(&t, y)[j]);
				ck_assert(isfinite(dval(&t, y)[3 + j]) && isnan(dval(&t, y)[6 + j]));
				ck_assert(isnan(dval(&t, dx)[j]) && isfinite(dval(&t, dx)[3 + j]));
			}
			net_free(&t);
		}
}
END_TEST

/* ---- mean over tokens ------------------------------------------------------ */

START_TEST(test_token_mean)
{
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *x = input(&t, 3, (int64_t[]){2, 3, 2}, 0, 1);
		/* image 0: tokens (1,2) (3,4) (5,9); image 1: all 7 */
		memcpy(dval(&t, x), (double[]){1, 2, 3, 4, 5, 9, 7, 7, 7, 7, 7, 7}, 12 * sizeof(double));
		ir_node *y = fin(op(&t, IR_OP_TOKEN_MEAN, 1, x));
		ir_node *dy = input(&t, 2, (int64_t[]){2, 2}, 0, 1);
		memcpy(dval(&t, dy), (double[]){3, 6, -3, 0}, 4 * sizeof(double));
		ir_node *dx = declare(op(&t, IR_OP_TOKEN_MEAN_GRAD, 1, dy), x);
		net_eval(&t, dx->id);
		check_close("token_mean by hand", dval(&t, y), (double[]){3, 5, 7, 7}, 4, 0);
		check_close("token_mean_grad by hand", dval(&t, dx),
			(double[]){1, 2, 1, 2, 1, 2, -1, 0, -1, 0, -1, 0}, 12, 0);
		net_free(&t);
	}
	net t;
	net_init(&t, IR_F64);
	ir_node *x = input(&t, 3, (int64_t[]){3, 5, 4}, -1, 1);
	ir_node *y = fin(op(&t, IR_OP_TOKEN_MEAN, 1, x));
	ir_node *dy = input(&t, 2, (int64_t[]){3, 4}, -1, 1);
	ir_node *dx = declare(op(&t, IR_OP_TOKEN_MEAN_GRAD, 1, dy), x);
	fd_check(&t, x, y, dy, dx, 1e-8, "token_mean_grad fd");
	net_free(&t);
}
END_TEST

Suite *rt_kern_norm_suite(void)
{
	Suite *s = suite_create("rt_kern_norm");
	TCase *tc = tcase_create("kernels");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_ln_by_hand);
	tcase_add_test(tc, test_ln_forward);
	tcase_add_test(tc, test_ln_fd);
	tcase_add_test(tc, test_ln_nan);
	tcase_add_test(tc, test_gelu);
	tcase_add_test(tc, test_gelu_grad);
	tcase_add_test(tc, test_softmax_by_hand);
	tcase_add_test(tc, test_softmax_fd);
	tcase_add_test(tc, test_softmax_nan);
	tcase_add_test(tc, test_token_mean);
	suite_add_tcase(s, tc);
	return s;
}
