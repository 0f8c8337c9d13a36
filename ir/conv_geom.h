/* conv_geom.h: the geometry of a convolution node, written once for the
 * interpreter's kernels and workspace (runtime/kern_conv.c, kernels.c), the
 * code generator (codegen/k_conv*.c) and revc bench's GEMM shapes.
 *
 * conv2d(x, w) -> y, conv2d_dx(dy, w) -> dx and conv2d_dw(dy, x) -> dw all
 * describe one forward convolution x [N,C,H,W] * w [O,C,KH,KW] -> y
 * [N,O,Ho,Wo]; ir_conv_geom_of finds x, w and y among each op's operands
 * and result. */
#ifndef REVC_IR_CONV_GEOM_H
#define REVC_IR_CONV_GEOM_H

#include "ir.h"

typedef struct {
	int64_t n, c, h, w;          /* input x */
	int64_t o, kh, kw;           /* filter */
	int64_t ho, wo;              /* output */
	int64_t s, pt, pb, pl, pr;   /* stride; padding top, bottom, left, right */
	ir_op op;
} ir_conv_geom;

/* Of a conv2d, conv2d_dx or conv2d_dw node. */
static inline ir_conv_geom ir_conv_geom_of(const ir_node *n)
{
	const ir_type *x, *w, *y;
	switch (n->op) {
	case IR_OP_CONV2D:
		x = &n->in[0]->type, w = &n->in[1]->type, y = &n->type;
		break;
	case IR_OP_CONV2D_DX:
		x = &n->type, w = &n->in[1]->type, y = &n->in[0]->type;
		break;
	default: /* conv2d_dw(dy, x) */
		IR_ASSERT(n->op == IR_OP_CONV2D_DW);
		x = &n->in[1]->type, w = &n->type, y = &n->in[0]->type;
		break;
	}
	const int64_t *pv = ir_node_attr(n, IR_ATTR_PAD)->u.ints.v;
	ir_conv_geom g = {x->dim[0], x->dim[1], x->dim[2], x->dim[3], w->dim[0], w->dim[2], w->dim[3],
		y->dim[2], y->dim[3], ir_node_int(n, IR_ATTR_STRIDE), pv[0], pv[1], pv[2], pv[3], n->op};
	return g;
}

/* A 1x1, stride-1, unpadded convolution: a product over the image itself,
 * with no unfolded column matrix. */
static inline bool ir_conv_direct(const ir_conv_geom *g)
{
	return g->kh == 1 && g->kw == 1 && g->s == 1 && g->pt == 0 && g->pb == 0 && g->pl == 0 && g->pr == 0;
}

#endif
