/* kern_elementwise.c: the reference kernels of const and the elementwise ops
 * (add, sub, scale, relu, relu_grad).
 *
 * NaN propagates as in IEEE arithmetic and PyTorch: relu(NaN) is NaN, and
 * relu_grad passes dy where y is NaN (PyTorch's threshold_backward, which
 * zeroes the gradient only where y <= 0).  Both are written as "y <= 0 ? 0
 * : ...", never "y > 0 ? ... : 0", which would map NaN to 0 and hide it.
 *
 * Compiled once per real type (kernels.h).  Preconditions: the node
 * verified, so every operand has the result's shape and dtype.  Each kernel
 * reads element i before writing element i and nothing else, so `out` may
 * alias in[0] (or in[1]). */
#include "kernels.h"

static int64_t count(const rt_kargs *a) { return ir_type_elems(&a->n->type); }

bool K(rt_k_const)(const rt_kargs *a, rt_err *e)
{
	real *y = a->out, v = (real)ir_node_float(a->n, IR_ATTR_VALUE);
	for (int64_t i = 0, n = count(a); i < n; i++)
		y[i] = v;
	return true;
}

bool K(rt_k_add)(const rt_kargs *a, rt_err *e)
{
	const real *x = a->in[0], *z = a->in[1];
	real *y = a->out;
	for (int64_t i = 0, n = count(a); i < n; i++)
		y[i] = x[i] + z[i];
	return true;
}

bool K(rt_k_sub)(const rt_kargs *a, rt_err *e)
{
	const real *x = a->in[0], *z = a->in[1];
	real *y = a->out;
	for (int64_t i = 0, n = count(a); i < n; i++)
		y[i] = x[i] - z[i];
	return true;
}

bool K(rt_k_scale)(const rt_kargs *a, rt_err *e)
{
	const real *x = a->in[0];
	real *y = a->out, f = (real)ir_node_float(a->n, IR_ATTR_FACTOR);
	for (int64_t i = 0, n = count(a); i < n; i++)
		y[i] = f * x[i];
	return true;
}

bool K(rt_k_relu)(const rt_kargs *a, rt_err *e)
{
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t i = 0, n = count(a); i < n; i++)
		y[i] = x[i] <= 0 ? 0 : x[i];
	return true;
}

/* relu_grad(dy, y): y is relu's output, so y <= 0 exactly where x <= 0. */
bool K(rt_k_relu_grad)(const rt_kargs *a, rt_err *e)
{
	const real *dy = a->in[0], *y = a->in[1];
	real *dx = a->out;
	for (int64_t i = 0, n = count(a); i < n; i++) {
		real g = dy[i]; /* read unconditionally, so the select vectorises */
		dx[i] = y[i] <= 0 ? 0 : g;
	}
	return true;
}
