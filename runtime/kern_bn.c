/* kern_bn.c: the reference kernels of batch norm: bn_stats, bn_norm,
 * bn_infer, bn_dgamma, bn_dx, bn_running_mean, bn_running_var.
 *
 * Activations are [N,C,H,W] or [N,C] (then H·W counts as 1); everything is
 * per channel over m = N·H·W elements.  The batch statistics are [2,C]: row 0
 * the mean, row 1 the biased variance.  Sums run in double for both real
 * types, and per-element arithmetic is done in double and rounded once, so
 * that f32 results stay within a few ulps of the f64 ones.
 *
 * Compiled once per real type (kernels.h).  Preconditions: the node
 * verified.  The running-statistic updates write into operand 0's storage
 * (out == in[0]); they read each element before writing it. */
#include <math.h>

#include "kernels.h"

typedef struct {
	int64_t n, c, hw; /* batch, channels, spatial elements per channel */
} bn_shape;

static bn_shape shape_of(const ir_type *x)
{
	bn_shape s = {x->dim[0], x->dim[1], x->rank == 4 ? x->dim[2] * x->dim[3] : 1};
	return s;
}

/* Offset of element (n, c, 0). */
static int64_t at(const bn_shape *s, int64_t n, int64_t c) { return (n * s->c + c) * s->hw; }

/* 1/sqrt(var + eps) of channel c from stats [2,C]. */
static double inv_std(const real *stats, const bn_shape *s, int64_t c, double eps)
{
	return 1 / sqrt((double)stats[s->c + c] + eps);
}

/* Mean, then the mean of squared deviations: two passes, so that a large
 * mean does not cancel the variance away. */
bool K(rt_k_bn_stats)(const rt_kargs *a, rt_err *e)
{
	bn_shape s = shape_of(&a->n->in[0]->type);
	const real *x = a->in[0];
	real *st = a->out;
	double m = (double)(s.n * s.hw);
	for (int64_t c = 0; c < s.c; c++) {
		double sum = 0, sq = 0;
		for (int64_t n = 0; n < s.n; n++)
			for (int64_t k = 0; k < s.hw; k++)
				sum += (double)x[at(&s, n, c) + k];
		double mean = sum / m;
		for (int64_t n = 0; n < s.n; n++)
			for (int64_t k = 0; k < s.hw; k++) {
				double d = (double)x[at(&s, n, c) + k] - mean;
				sq += d * d;
			}
		st[c] = (real)mean;
		st[s.c + c] = (real)(sq / m);
	}
	return true;
}

/* y = g·(x − mean)/sqrt(var + eps) + b with per-channel mean, var, g, b,
 * as x·sc + (b − mean·sc), sc = g/sqrt(var + eps): one fused multiply-add
 * in double per element.  The shift's rounding is an ulp of double, so y
 * rounds to the f32 of the exact value but within an ulp of double of a
 * rounding boundary (and has the exact value's sign, for a ReLU after it,
 * but within an ulp of double of the shift from zero). */
static void normalize(const bn_shape *s, const real *x, const real *mean, const real *var,
	const real *g, const real *b, double eps, real *y)
{
	for (int64_t c = 0; c < s->c; c++) {
		double sc = (double)g[c] / sqrt((double)var[c] + eps);
		double shift = (double)b[c] - (double)mean[c] * sc;
		for (int64_t n = 0; n < s->n; n++)
			for (int64_t k = 0, i = at(s, n, c); k < s->hw; k++, i++)
				y[i] = (real)fma((double)x[i], sc, shift);
	}
}

/* bn_norm(x, stats, gamma, beta) */
bool K(rt_k_bn_norm)(const rt_kargs *a, rt_err *e)
{
	bn_shape s = shape_of(&a->n->in[0]->type);
	const real *st = a->in[1];
	normalize(&s, a->in[0], st, st + s.c, a->in[2], a->in[3], ir_node_float(a->n, IR_ATTR_EPS),
		a->out);
	return true;
}

/* bn_infer(x, mean, var, gamma, beta) */
bool K(rt_k_bn_infer)(const rt_kargs *a, rt_err *e)
{
	bn_shape s = shape_of(&a->n->in[0]->type);
	normalize(&s, a->in[0], a->in[1], a->in[2], a->in[3], a->in[4],
		ir_node_float(a->n, IR_ATTR_EPS), a->out);
	return true;
}

/* bn_dgamma(dy, x, stats) = Σ_{N,H,W} dy · xhat */
bool K(rt_k_bn_dgamma)(const rt_kargs *a, rt_err *e)
{
	bn_shape s = shape_of(&a->n->in[0]->type);
	const real *dy = a->in[0], *x = a->in[1], *st = a->in[2];
	real *dg = a->out;
	double eps = ir_node_float(a->n, IR_ATTR_EPS);
	for (int64_t c = 0; c < s.c; c++) {
		double mu = (double)st[c], sum = 0;
		for (int64_t n = 0; n < s.n; n++)
			for (int64_t k = 0, i = at(&s, n, c); k < s.hw; k++, i++)
				sum += (double)dy[i] * ((double)x[i] - mu);
		dg[c] = (real)(sum * inv_std(st, &s, c, eps));
	}
	return true;
}

/* bn_dx(dy, x, stats, gamma, dgamma, dbeta)
 *   = gamma/sqrt(var+eps) · (dy − dbeta/m − xhat · dgamma/m)
 *   = dy·sc + (x·q + r), sc = gamma/sqrt(var+eps), q = −sc·dgamma/m/sqrt(var+eps)
 *     and r = sc·(mean·dgamma/m/sqrt(var+eps) − dbeta/m) per channel:
 * two fused multiply-adds in double per element (as normalize()). */
bool K(rt_k_bn_dx)(const rt_kargs *a, rt_err *e)
{
	bn_shape s = shape_of(&a->n->in[0]->type);
	const real *dy = a->in[0], *x = a->in[1], *st = a->in[2], *g = a->in[3], *dg = a->in[4],
		   *db = a->in[5];
	real *dx = a->out;
	double eps = ir_node_float(a->n, IR_ATTR_EPS), m = (double)(s.n * s.hw);
	for (int64_t c = 0; c < s.c; c++) {
		double inv = inv_std(st, &s, c, eps), sc = (double)g[c] * inv, k = (double)dg[c] / m * inv;
		double q = -sc * k, r = sc * ((double)st[c] * k - (double)db[c] / m);
		for (int64_t n = 0; n < s.n; n++)
			for (int64_t j = 0, i = at(&s, n, c); j < s.hw; j++, i++)
				dx[i] = (real)fma((double)dy[i], sc, fma((double)x[i], q, r));
	}
	return true;
}

/* bn_running_mean(mean, stats): in place. */
bool K(rt_k_bn_running_mean)(const rt_kargs *a, rt_err *e)
{
	int64_t c = a->n->type.dim[0];
	const real *run = a->in[0], *st = a->in[1];
	real *out = a->out;
	double mom = ir_node_float(a->n, IR_ATTR_MOMENTUM);
	for (int64_t i = 0; i < c; i++)
		out[i] = (real)(mom * (double)run[i] + (1 - mom) * (double)st[i]);
	return true;
}

/* bn_running_var(var, stats): in place, with the unbiased batch variance
 * stats[1]·count/(count − 1). */
bool K(rt_k_bn_running_var)(const rt_kargs *a, rt_err *e)
{
	int64_t c = a->n->type.dim[0];
	const real *run = a->in[0], *st = a->in[1];
	real *out = a->out;
	double mom = ir_node_float(a->n, IR_ATTR_MOMENTUM);
	double count = (double)ir_node_int(a->n, IR_ATTR_NCOUNT), corr = count / (count - 1);
	for (int64_t i = 0; i < c; i++)
		out[i] = (real)(mom * (double)run[i] + (1 - mom) * (double)st[c + i] * corr);
	return true;
}
