/* kern_attn.c: the reference kernels of the token-layout ops of attention:
 * broadcast_add, heads_split, heads_merge, to_tokens and from_tokens (index
 * permutations).  bmatmul is in kern_dense.c.
 *
 * Layouts (ir/shape.c): tokens [N,T,D]; heads [N,h,T,d] with D = h·d, head
 * j being columns j·d .. j·d+d-1 of its D-wide block; images [N,C,H,W] with
 * pixel (i,j) token i·W + j.
 *
 * Compiled once per real type (kernels.h).  Preconditions: the node
 * verified.  Results never overlap operands. */
#include "kernels.h"

/* broadcast_add(x, b): y = x + b, b repeated along x's leading dimensions. */
bool K(rt_k_broadcast_add)(const rt_kargs *a, rt_err *e)
{
	int64_t inner = ir_type_elems(&a->n->in[1]->type), total = ir_type_elems(&a->n->type);
	const real *x = a->in[0], *b = a->in[1];
	real *y = a->out;
	for (int64_t o = 0; inner > 0 && o < total; o += inner)
		for (int64_t i = 0; i < inner; i++)
			y[o + i] = x[o + i] + b[i];
	return true;
}

/* heads_split(x [N,T,C]) {heads h, part p, parts P} → [N,h,T,d]:
 * y[n,j,t,:] = x[n,t, p·D + j·d ..] with D = C/P, d = D/h. */
bool K(rt_k_heads_split)(const rt_kargs *a, rt_err *e)
{
	const ir_type *yt = &a->n->type;
	int64_t nb = yt->dim[0], h = yt->dim[1], t = yt->dim[2], d = yt->dim[3];
	int64_t c = a->n->in[0]->type.dim[2], off = ir_node_int(a->n, IR_ATTR_PART) * h * d;
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t n = 0; n < nb; n++)
		for (int64_t j = 0; j < h; j++)
			for (int64_t s = 0; s < t; s++) {
				const real *src = x + (n * t + s) * c + off + j * d;
				real *dst = y + ((n * h + j) * t + s) * d;
				for (int64_t i = 0; i < d; i++)
					dst[i] = src[i];
			}
	return true;
}

/* heads_merge(x0, .. [N,h,T,d]) → [N,T,nin·h·d]: heads_split's adjoint,
 * operand p going to part p. */
bool K(rt_k_heads_merge)(const rt_kargs *a, rt_err *e)
{
	const ir_type *xt = &a->n->in[0]->type;
	int64_t nb = xt->dim[0], h = xt->dim[1], t = xt->dim[2], d = xt->dim[3];
	int64_t c = a->n->type.dim[2];
	real *y = a->out;
	for (int p = 0; p < a->n->nin; p++) {
		const real *x = a->in[p];
		for (int64_t n = 0; n < nb; n++)
			for (int64_t j = 0; j < h; j++)
				for (int64_t s = 0; s < t; s++) {
					const real *src = x + ((n * h + j) * t + s) * d;
					real *dst = y + (n * t + s) * c + (p * h + j) * d;
					for (int64_t i = 0; i < d; i++)
						dst[i] = src[i];
				}
	}
	return true;
}

/* [N,A,B] → [N,B,A] per image: to_tokens is A = C, B = H·W; from_tokens
 * A = T, B = C. */
static void transpose_images(const real *x, real *y, int64_t nb, int64_t ra, int64_t rb)
{
	for (int64_t n = 0; n < nb; n++)
		for (int64_t i = 0; i < ra; i++)
			for (int64_t j = 0; j < rb; j++)
				y[(n * rb + j) * ra + i] = x[(n * ra + i) * rb + j];
}

bool K(rt_k_to_tokens)(const rt_kargs *a, rt_err *e)
{
	const ir_type *yt = &a->n->type;
	transpose_images(a->in[0], a->out, yt->dim[0], yt->dim[2], yt->dim[1]);
	return true;
}

bool K(rt_k_from_tokens)(const rt_kargs *a, rt_err *e)
{
	const ir_type *xt = &a->n->in[0]->type;
	transpose_images(a->in[0], a->out, xt->dim[0], xt->dim[1], xt->dim[2]);
	return true;
}
