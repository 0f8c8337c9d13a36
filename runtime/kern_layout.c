/* kern_layout.c: the reference kernels of the layout ops (split, concat,
 * channel_pad, channel_slice): block copies, no arithmetic.
 *
 * Compiled once per real type (kernels.h).  Preconditions: the node
 * verified (axes in range, parts dividing the axis, lo+hi below C for a
 * slice).  Result and operands never overlap: none of these ops is INPL. */
#include <string.h>

#include "kernels.h"

/* Views t as [outer, t->dim[axis], inner]. */
static void around(const ir_type *t, int axis, int64_t *outer, int64_t *inner)
{
	*outer = *inner = 1;
	for (int i = 0; i < axis; i++)
		*outer *= t->dim[i];
	for (int i = axis + 1; i < t->rank; i++)
		*inner *= t->dim[i];
}

static void copy(real *dst, const real *src, int64_t n)
{
	if (n > 0)
		memcpy(dst, src, (size_t)n * sizeof(real));
}

static void zero(real *dst, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		dst[i] = 0;
}

bool K(rt_k_split)(const rt_kargs *a, rt_err *e)
{
	const ir_type *xt = &a->n->in[0]->type;
	int axis = (int)ir_node_int(a->n, IR_ATTR_AXIS);
	int64_t part = ir_node_int(a->n, IR_ATTR_PART), outer, inner;
	int64_t d = xt->dim[axis], len = a->n->type.dim[axis];
	around(xt, axis, &outer, &inner);
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t o = 0; o < outer; o++)
		copy(y + o * len * inner, x + (o * d + part * len) * inner, len * inner);
	return true;
}

bool K(rt_k_concat)(const rt_kargs *a, rt_err *e)
{
	int axis = (int)ir_node_int(a->n, IR_ATTR_AXIS);
	int64_t da = a->n->in[0]->type.dim[axis], db = a->n->in[1]->type.dim[axis], outer, inner;
	around(&a->n->type, axis, &outer, &inner);
	const real *x = a->in[0], *z = a->in[1];
	real *y = a->out;
	for (int64_t o = 0; o < outer; o++) {
		copy(y + o * (da + db) * inner, x + o * da * inner, da * inner);
		copy(y + (o * (da + db) + da) * inner, z + o * db * inner, db * inner);
	}
	return true;
}

bool K(rt_k_channel_pad)(const rt_kargs *a, rt_err *e)
{
	const ir_type *xt = &a->n->in[0]->type;
	int64_t lo = ir_node_int(a->n, IR_ATTR_LO), hi = ir_node_int(a->n, IR_ATTR_HI);
	int64_t c = xt->dim[1], hw = xt->dim[2] * xt->dim[3], co = lo + c + hi;
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t n = 0; n < xt->dim[0]; n++) {
		real *yn = y + n * co * hw;
		zero(yn, lo * hw);
		copy(yn + lo * hw, x + n * c * hw, c * hw);
		zero(yn + (lo + c) * hw, hi * hw);
	}
	return true;
}

bool K(rt_k_channel_slice)(const rt_kargs *a, rt_err *e)
{
	const ir_type *xt = &a->n->in[0]->type;
	int64_t lo = ir_node_int(a->n, IR_ATTR_LO);
	int64_t c = xt->dim[1], hw = xt->dim[2] * xt->dim[3], co = a->n->type.dim[1];
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t n = 0; n < xt->dim[0]; n++)
		copy(y + n * co * hw, x + (n * c + lo) * hw, co * hw);
	return true;
}
