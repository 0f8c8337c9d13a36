/* kern_optim.c: the reference kernels of the optimiser step.  TensorFlow's
 * MomentumOptimizer: momentum (v = m·v + g, plus wd·w when the weight is
 * given) and sgd (w = w − lr·v).  PyTorch's AdamW (docs/model.md): the
 * step count (adam_count, t + 1), its bias corrections (adam_bias,
 * 1 − beta^t), the moments (adam_m, adam_v) and the weight (adamw).
 *
 * Compiled once per real type (kernels.h), computing in that type as TF and
 * PyTorch do, with constants like 1 − beta rounded once from double.
 * Preconditions: the node verified.  All but adam_bias update operand 0 in
 * place (out == in[0]); each element is read before it is written.  The
 * native code (codegen/k_elementwise.c) evaluates the same expressions in
 * the same order. */
#include <math.h>

#include "kernels.h"

/* momentum(v, g [, w]) {momentum [, wd]} */
bool K(rt_k_momentum)(const rt_kargs *a, rt_err *e)
{
	int64_t n = ir_type_elems(&a->n->type);
	real m = (real)ir_node_float(a->n, IR_ATTR_MOMENTUM);
	const real *v = a->in[0], *g = a->in[1], *w = a->n->nin == 3 ? a->in[2] : NULL;
	real *out = a->out;
	if (w) {
		real wd = (real)ir_node_float(a->n, IR_ATTR_WD);
		for (int64_t i = 0; i < n; i++)
			out[i] = m * v[i] + (g[i] + wd * w[i]);
	} else {
		for (int64_t i = 0; i < n; i++)
			out[i] = m * v[i] + g[i];
	}
	return true;
}

/* sgd(w, v, lr): lr is a scalar operand, read each step. */
bool K(rt_k_sgd)(const rt_kargs *a, rt_err *e)
{
	int64_t n = ir_type_elems(&a->n->type);
	const real *w = a->in[0], *v = a->in[1];
	real lr = *(const real *)a->in[2], *out = a->out;
	for (int64_t i = 0; i < n; i++)
		out[i] = w[i] - lr * v[i];
	return true;
}

/* adam_count(t): the steps taken, plus this one. */
bool K(rt_k_adam_count)(const rt_kargs *a, rt_err *e)
{
	*(real *)a->out = *(const real *)a->in[0] + (real)1;
	return true;
}

/* adam_bias(t) {beta}: 1 − beta^t, in double and rounded once. */
bool K(rt_k_adam_bias)(const rt_kargs *a, rt_err *e)
{
	double beta = ir_node_float(a->n, IR_ATTR_BETA);
	*(real *)a->out = (real)(1.0 - pow(beta, (double)*(const real *)a->in[0]));
	return true;
}

/* adam_m(m, g) {beta}: beta·m + (1 − beta)·g. */
bool K(rt_k_adam_m)(const rt_kargs *a, rt_err *e)
{
	int64_t n = ir_type_elems(&a->n->type);
	double beta = ir_node_float(a->n, IR_ATTR_BETA);
	real b = (real)beta, c = (real)(1.0 - beta);
	const real *m = a->in[0], *g = a->in[1];
	real *out = a->out;
	for (int64_t i = 0; i < n; i++)
		out[i] = b * m[i] + c * g[i];
	return true;
}

/* adam_v(v, g) {beta}: beta·v + (1 − beta)·g·g. */
bool K(rt_k_adam_v)(const rt_kargs *a, rt_err *e)
{
	int64_t n = ir_type_elems(&a->n->type);
	double beta = ir_node_float(a->n, IR_ATTR_BETA);
	real b = (real)beta, c = (real)(1.0 - beta);
	const real *v = a->in[0], *g = a->in[1];
	real *out = a->out;
	for (int64_t i = 0; i < n; i++)
		out[i] = b * v[i] + c * (g[i] * g[i]);
	return true;
}

/* adamw(w, m, v, lr, c1, c2) {eps [, wd]}:
 *     w − lr·((m/c1) / (sqrt(v/c2) + eps) + wd·w)
 * with m and v this step's moments, c1 and c2 their bias corrections and
 * the decay on the weight from before the step. */
bool K(rt_k_adamw)(const rt_kargs *a, rt_err *e)
{
	int64_t n = ir_type_elems(&a->n->type);
	const real *w = a->in[0], *m = a->in[1], *v = a->in[2];
	real lr = *(const real *)a->in[3], c1 = *(const real *)a->in[4], c2 = *(const real *)a->in[5];
	real eps = (real)ir_node_float(a->n, IR_ATTR_EPS), *out = a->out;
	if (ir_node_attr(a->n, IR_ATTR_WD)) {
		real wd = (real)ir_node_float(a->n, IR_ATTR_WD);
		for (int64_t i = 0; i < n; i++)
			out[i] = w[i] - lr * ((m[i] / c1) / ((real)sqrt(v[i] / c2) + eps) + wd * w[i]);
	} else {
		for (int64_t i = 0; i < n; i++)
			out[i] = w[i] - lr * ((m[i] / c1) / ((real)sqrt(v[i] / c2) + eps));
	}
	return true;
}
