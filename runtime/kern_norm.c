/* kern_norm.c: the reference kernels of the transformer's normalisation and
 * nonlinearities: layer norm (ln_stats, ln_norm, ln_dgamma, ln_dx), exact
 * GELU (gelu, gelu_grad), softmax (softmax, softmax_grad) and the mean over
 * tokens (token_mean, token_mean_grad).
 *
 * Layer norm and softmax work on rows: a tensor [..., D] is rows × D, the
 * last axis contiguous.  Layer-norm statistics hold each row's mean and
 * biased variance side by side (stats[2r], stats[2r + 1]).  As in
 * kern_bn.c, sums run in double for both real types and per-element
 * arithmetic is done in double and rounded once.  GELU calls libm's erf in
 * double for both types, so the native code (which calls the same erf)
 * agrees with these kernels.
 *
 * NaN propagates: a NaN anywhere in a row makes the row's statistics, and
 * so the row's results, NaN; softmax's running maximum keeps a NaN (never
 * fmax, which drops it).
 *
 * Compiled once per real type (kernels.h).  Preconditions: the node
 * verified.  gelu, gelu_grad, softmax and softmax_grad are INPL: each reads
 * what it needs of element i (or of the row, before the row's last pass)
 * before writing element i, so out may alias in[0]. */
#include <math.h>

#include "kernels.h"

/* 1/√2 and 1/√(2π) (codegen/k_elementwise.c uses the same). */
#define GELU_SQRT1_2 0.70710678118654752440
#define GELU_INV_SQRT_2PI 0.39894228040143267794

typedef struct {
	int64_t rows, d; /* rows of the last axis, and its length */
} rows_shape;

static rows_shape rows_of(const ir_type *x)
{
	int64_t d = x->dim[x->rank - 1];
	rows_shape s = {d ? ir_type_elems(x) / d : 0, d};
	return s;
}

/* 1/sqrt(var + eps) of row r. */
static double ln_inv_std(const real *stats, int64_t r, double eps)
{
	return 1 / sqrt((double)stats[2 * r + 1] + eps);
}

/* Mean, then the mean of squared deviations, per row. */
bool K(rt_k_ln_stats)(const rt_kargs *a, rt_err *e)
{
	rows_shape s = rows_of(&a->n->in[0]->type);
	const real *x = a->in[0];
	real *st = a->out;
	for (int64_t r = 0; r < s.rows; r++) {
		const real *row = x + r * s.d;
		double sum = 0, sq = 0;
		for (int64_t j = 0; j < s.d; j++)
			sum += (double)row[j];
		double mean = sum / (double)s.d;
		for (int64_t j = 0; j < s.d; j++) {
			double dev = (double)row[j] - mean;
			sq += dev * dev;
		}
		st[2 * r] = (real)mean;
		st[2 * r + 1] = (real)(sq / (double)s.d);
	}
	return true;
}

/* ln_norm(x, stats, gamma, beta): y = (x − mean)/sqrt(var + eps)·gamma + beta */
bool K(rt_k_ln_norm)(const rt_kargs *a, rt_err *e)
{
	rows_shape s = rows_of(&a->n->type);
	const real *x = a->in[0], *st = a->in[1], *g = a->in[2], *b = a->in[3];
	real *y = a->out;
	double eps = ir_node_float(a->n, IR_ATTR_EPS);
	for (int64_t r = 0; r < s.rows; r++) {
		double mu = (double)st[2 * r], inv = ln_inv_std(st, r, eps);
		for (int64_t j = 0, i = r * s.d; j < s.d; j++, i++)
			y[i] = (real)(((double)x[i] - mu) * inv * (double)g[j] + (double)b[j]);
	}
	return true;
}

/* ln_dgamma(dy, x, stats) = Σ over the rows of dy · xhat, per feature. */
bool K(rt_k_ln_dgamma)(const rt_kargs *a, rt_err *e)
{
	rows_shape s = rows_of(&a->n->in[0]->type);
	const real *dy = a->in[0], *x = a->in[1], *st = a->in[2];
	real *dg = a->out;
	double eps = ir_node_float(a->n, IR_ATTR_EPS);
	for (int64_t j = 0; j < s.d; j++) {
		double sum = 0;
		for (int64_t r = 0; r < s.rows; r++) {
			int64_t i = r * s.d + j;
			sum += (double)dy[i] * (((double)x[i] - (double)st[2 * r]) * ln_inv_std(st, r, eps));
		}
		dg[j] = (real)sum;
	}
	return true;
}

/* ln_dx(dy, x, stats, gamma): with g = dy·gamma, per row
 *   dx = (g − mean(g) − xhat · mean(g · xhat)) / sqrt(var + eps) */
bool K(rt_k_ln_dx)(const rt_kargs *a, rt_err *e)
{
	rows_shape s = rows_of(&a->n->type);
	const real *dy = a->in[0], *x = a->in[1], *st = a->in[2], *gamma = a->in[3];
	real *dx = a->out;
	double eps = ir_node_float(a->n, IR_ATTR_EPS);
	for (int64_t r = 0; r < s.rows; r++) {
		double mu = (double)st[2 * r], inv = ln_inv_std(st, r, eps), sg = 0, sgx = 0;
		for (int64_t j = 0, i = r * s.d; j < s.d; j++, i++) {
			double g = (double)dy[i] * (double)gamma[j];
			sg += g;
			sgx += g * (((double)x[i] - mu) * inv);
		}
		double mg = sg / (double)s.d, mgx = sgx / (double)s.d;
		for (int64_t j = 0, i = r * s.d; j < s.d; j++, i++) {
			double g = (double)dy[i] * (double)gamma[j];
			double xhat = ((double)x[i] - mu) * inv;
			dx[i] = (real)((g - mg - xhat * mgx) * inv);
		}
	}
	return true;
}

/* gelu(a) = a·Φ(a) = 0.5·a·(1 + erf(a/√2)), the exact form. */
bool K(rt_k_gelu)(const rt_kargs *a, rt_err *e)
{
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t i = 0, n = ir_type_elems(&a->n->type); i < n; i++) {
		double v = (double)x[i];
		y[i] = (real)(0.5 * v * (1 + erf(v * GELU_SQRT1_2)));
	}
	return true;
}

/* gelu_grad(dy, a) = dy·(Φ(a) + a·φ(a)), φ(a) = exp(−a²/2)/√(2π). */
bool K(rt_k_gelu_grad)(const rt_kargs *a, rt_err *e)
{
	const real *dy = a->in[0], *x = a->in[1];
	real *dx = a->out;
	for (int64_t i = 0, n = ir_type_elems(&a->n->type); i < n; i++) {
		double v = (double)x[i], g = (double)dy[i];
		double cdf = 0.5 * (1 + erf(v * GELU_SQRT1_2));
		double pdf = exp(-0.5 * v * v) * GELU_INV_SQRT_2PI;
		dx[i] = (real)(g * (cdf + v * pdf));
	}
	return true;
}

static double factor_of(const ir_node *n)
{
	const ir_attr *f = ir_node_attr(n, IR_ATTR_FACTOR);
	return f ? f->u.f : 1;
}

/* softmax over each row of f·x, f = factor: shifted by the row's maximum
 * of f·x, so exp never overflows; exp is taken again in the last pass, so
 * nothing but the result is written. */
bool K(rt_k_softmax)(const rt_kargs *a, rt_err *e)
{
	rows_shape s = rows_of(&a->n->type);
	const real *x = a->in[0];
	real *y = a->out;
	double f = factor_of(a->n);
	for (int64_t r = 0; r < s.rows; r++) {
		const real *row = x + r * s.d;
		double m = f * (double)row[0], sum = 0;
		for (int64_t j = 1; j < s.d; j++) {
			double v = f * (double)row[j];
			m = v > m || isnan(v) ? v : m;
		}
		for (int64_t j = 0; j < s.d; j++)
			sum += exp(f * (double)row[j] - m);
		for (int64_t j = 0; j < s.d; j++)
			y[r * s.d + j] = (real)(exp(f * (double)row[j] - m) / sum);
	}
	return true;
}

/* softmax_grad(dy, y) = f·y·(dy − Σ_row dy·y) */
bool K(rt_k_softmax_grad)(const rt_kargs *a, rt_err *e)
{
	rows_shape s = rows_of(&a->n->type);
	const real *dy = a->in[0], *y = a->in[1];
	real *dx = a->out;
	double f = factor_of(a->n);
	for (int64_t r = 0; r < s.rows; r++) {
		int64_t at = r * s.d;
		double dot = 0;
		for (int64_t j = 0; j < s.d; j++)
			dot += (double)dy[at + j] * (double)y[at + j];
		for (int64_t j = 0; j < s.d; j++)
			dx[at + j] = (real)(f * (double)y[at + j] * ((double)dy[at + j] - dot));
	}
	return true;
}

/* token_mean(x [N,T,D]) = Σ_t x[n,t,:] / T */
bool K(rt_k_token_mean)(const rt_kargs *a, rt_err *e)
{
	const ir_type *t = &a->n->in[0]->type;
	int64_t N = t->dim[0], T = t->dim[1], D = t->dim[2];
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t n = 0; n < N; n++)
		for (int64_t j = 0; j < D; j++) {
			double sum = 0;
			for (int64_t k = 0; k < T; k++)
				sum += (double)x[(n * T + k) * D + j];
			y[n * D + j] = (real)(sum / (double)T);
		}
	return true;
}

/* token_mean_grad(dy [N,D]): dx[n,t,:] = dy[n,:] / T */
bool K(rt_k_token_mean_grad)(const rt_kargs *a, rt_err *e)
{
	const ir_type *t = &a->n->type;
	int64_t N = t->dim[0], T = t->dim[1], D = t->dim[2];
	const real *dy = a->in[0];
	real *dx = a->out;
	for (int64_t n = 0; n < N; n++)
		for (int64_t k = 0; k < T; k++)
			for (int64_t j = 0; j < D; j++)
				dx[(n * T + k) * D + j] = (real)((double)dy[n * D + j] / (double)T);
	return true;
}
