/* kern_optim.c: the reference kernels of the optimiser step, TensorFlow's
 * MomentumOptimizer: momentum (v = m·v + g, plus wd·w when the weight is
 * given) and sgd (w = w − lr·v).
 *
 * Compiled once per real type (kernels.h), computing in that type as TF
 * does.  Preconditions: the node verified.  Both update operand 0 in place
 * (out == in[0]); each element is read before it is written. */
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
