/* k_conv_prologue.c: a conv2d's prologue, the batch norm and ReLU before
 * it, computed as the convolution's kernel copies its input.
 *
 * In a pre-activation block the convolution reads relu(bn_norm(x)), and
 * in the `revnet` step's forward pass nothing else reads it: the backward
 * pass recomputes it.  A prologue group (passes/fuse.c) is those three
 * nodes (and then the convolution's epilogue).  Its kernel reads x, the
 * bn_norm's input, and every lowering applies relu(x·sc + shift) to each
 * element where it copies x anyway: the padded planes of the direct and
 * Winograd kernels (cg_gather_row, from k_conv_implicit.c and
 * k_conv_winograd.c; a copy is made for it when there is no padding) and
 * the unfolded columns (k_conv.c).  The padding stays zero, as it is in
 * the unfused relu's result.  So the pre-activation is never written to
 * memory and read back, and one kernel call a block goes away.
 *
 * Arithmetic: sc = gamma / sqrt(var + eps) and shift = beta - mean·sc are
 * the channel's as bn_norm's kernel computes them, in double
 * (cg_bn_coeffs), rounded once to the tensor's type; each element is one
 * fused multiply-add in that type, then the ReLU's select.  In f64 that
 * is bn_norm's arithmetic exactly.  In f32, bn_norm's kernel computes the
 * element in double and rounds once; doing the same here, in the padded
 * copy, made the convolution slower by what the separate pass cost (the
 * conversions to and from double: on a 2-core AMD EPYC Zen 3,
 * `revc bench models/fashion.rev --steps 200 --versus REVC_PROLOGUE=0`
 * gave B/A 0.991-0.999, against 1.015-1.017 for f32).  The f32 result
 * differs from the double one by the rounding of sc and shift and of the
 * sum: about 2^-24 of |x·sc| + |shift|, an ulp or two. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

bool cg_conv_opens_prologue(const ir_graph *g, int i, cg_conv_pro *pro)
{
	if (i + 2 >= g->n)
		return false;
	const ir_node *n = g->nodes[i], *r = g->nodes[i + 1], *c = g->nodes[i + 2];
	if (n->op != IR_OP_BN_NORM || n->group < 0 || r->group != n->group || c->group != n->group ||
		c->op != IR_OP_CONV2D)
		return false;
	IR_ASSERT(r->op == IR_OP_RELU && r->in[0] == n && c->in[0] == r);
	pro->eps = ir_node_float(n, IR_ATTR_EPS);
	pro->channels = n->type.dim[1];
	return true;
}

bool cg_conv_has_prologue(const ir_node *n)
{
	return n->op == IR_OP_CONV2D && n->group >= 0 && n->in[0]->op == IR_OP_RELU && n->in[0]->group == n->group;
}

void cg_conv_prologue_key(const cg_conv_pro *pro, char *key, size_t len)
{
	size_t at = strlen(key);
	snprintf(key + at, len - at, " <bn_norm+relu eps=%.17g", pro->eps);
}

void cg_conv_prologue_coeffs(cg_kb *k, LLVMValueRef c, LLVMValueRef *sc, LLVMValueRef *shift)
{
	IR_ASSERT(k->pro);
	LLVMValueRef st = cg_arg(k, CG_PRO_ARG), gamma = cg_arg(k, CG_PRO_ARG + 1), beta = cg_arg(k, CG_PRO_ARG + 2);
	/* stats is [2, C]: the mean at c, the variance at C + c */
	LLVMValueRef var = cg_ld(k, st, cg_iadd(k, c, cg_i64(k, k->pro->channels)));
	cg_bn_coeffs(k, cg_to_f64(k, cg_ld(k, st, c)), cg_to_f64(k, var), cg_to_f64(k, cg_ld(k, gamma, c)),
		cg_to_f64(k, cg_ld(k, beta, c)), k->pro->eps, sc, shift);
	*sc = cg_to_real(k, *sc);
	*shift = cg_to_real(k, *shift);
}

LLVMValueRef cg_conv_prologue_apply(cg_kb *k, LLVMValueRef x, LLVMValueRef sc, LLVMValueRef shift)
{
	LLVMValueRef v = cg_fma(k, x, sc, shift);
	return cg_relu_select(k, v, v);
}

LLVMValueRef cg_conv_prologue_vec(cg_kb *k, LLVMValueRef v, int64_t lo, int64_t hi, LLVMValueRef sc,
	LLVMValueRef shift)
{
	LLVMTypeRef vt = LLVMTypeOf(v);
	int lanes = (int)LLVMGetVectorSize(vt);
	LLVMValueRef r = cg_conv_prologue_apply(k, v, cg_vsplat(k, sc, lanes), cg_vsplat(k, shift, lanes));
	/* zero in the lanes with no source (the padding) */
	LLVMValueRef zero = LLVMConstNull(vt);
	if (lo > 0 || hi < lanes) {
		LLVMValueRef bits[CG_MAX_VLANES];
		IR_ASSERT(lanes <= CG_MAX_VLANES);
		for (int i = 0; i < lanes; i++)
			bits[i] = LLVMConstInt(k->m->i1, i >= lo && i < hi, 0);
		r = LLVMBuildSelect(k->b, LLVMConstVector(bits, (unsigned)lanes), r, zero, "");
	}
	return r;
}
