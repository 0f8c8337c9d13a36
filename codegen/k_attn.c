/* k_attn.c: kernels for the token-layout ops of attention (bmatmul is with
 * matmul in k_conv.c; broadcast_add is fused, k_elementwise.c): copies by
 * rows, divided among threads:
 *   heads_split    rows (n, head, token) of the result, d elements each
 *   heads_merge    rows (n, token) of the result, every operand's heads
 *   to_tokens      rows (n, pixel) of the result, gathered over channels
 *   from_tokens    rows (n, channel) of the result, gathered over tokens
 * Layouts are ir/shape.c's; results never overlap operands. */
#include "internal.h"

/* ---- copies by rows ---------------------------------------------------- */

/* dst[0 .. len) = src[0 .. len), element by element (contiguous). */
static void copy_row(cg_kb *k, LLVMValueRef dst, LLVMValueRef src, int64_t len)
{
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, cg_i64(k, 0), cg_i64(k, len));
	cg_st(k, dst, i, cg_ld(k, src, i));
	cg_end_for(k, &l, NULL);
}

/* heads_split: result row r = (n·h + j)·T + s, from x[n, s, part·D + j·d ..]. */
static int64_t split_extent(const ir_node *n)
{
	return n->type.dim[0] * n->type.dim[1] * n->type.dim[2];
}

static void emit_heads_split(cg_kb *k, const ir_node *n)
{
	int64_t h = n->type.dim[1], t = n->type.dim[2], d = n->type.dim[3];
	int64_t c = n->in[0]->type.dim[2], off = ir_node_int(n, IR_ATTR_PART) * h * d;
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1);
	cg_loop l;
	LLVMValueRef r = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef s = cg_irem(k, r, cg_i64(k, t)), nj = cg_idiv(k, r, cg_i64(k, t));
	LLVMValueRef j = cg_irem(k, nj, cg_i64(k, h)), img = cg_idiv(k, nj, cg_i64(k, h));
	LLVMValueRef from = cg_iadd(k, cg_imul(k, cg_iadd(k, cg_imul(k, img, cg_i64(k, t)), s), cg_i64(k, c)),
		cg_iadd(k, cg_i64(k, off), cg_imul(k, j, cg_i64(k, d))));
	copy_row(k, cg_gep(k, NULL, y, cg_imul(k, r, cg_i64(k, d))), cg_gep(k, NULL, x, from), d);
	cg_end_for(k, &l, NULL);
}

const cg_op_impl cg_impl_heads_split = {split_extent, NULL, emit_heads_split, false, NULL, NULL};

/* heads_merge: result row r = n·T + s, its columns (p·h + j)·d .. from
 * operand p's row (n·h + j)·T + s. */
static int64_t merge_extent(const ir_node *n)
{
	return n->type.dim[0] * n->type.dim[1];
}

static void emit_heads_merge(cg_kb *k, const ir_node *n)
{
	const ir_type *xt = &n->in[0]->type;
	int64_t h = xt->dim[1], t = xt->dim[2], d = xt->dim[3], c = n->type.dim[2];
	LLVMValueRef y = cg_arg(k, 0);
	cg_loop l, lj;
	LLVMValueRef r = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef s = cg_irem(k, r, cg_i64(k, t)), img = cg_idiv(k, r, cg_i64(k, t));
	LLVMValueRef j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, h));
	LLVMValueRef from = cg_imul(k, cg_iadd(k, cg_imul(k, cg_iadd(k, cg_imul(k, img, cg_i64(k, h)), j), cg_i64(k, t)), s),
		cg_i64(k, d));
	for (int p = 0; p < n->nin; p++) {
		LLVMValueRef to = cg_iadd(k, cg_imul(k, r, cg_i64(k, c)), cg_imul(k, cg_iadd(k, cg_i64(k, p * h), j), cg_i64(k, d)));
		copy_row(k, cg_gep(k, NULL, y, to), cg_gep(k, NULL, cg_arg(k, 1 + p), from), d);
	}
	cg_end_for(k, &lj, NULL);
	cg_end_for(k, &l, NULL);
}

const cg_op_impl cg_impl_heads_merge = {merge_extent, NULL, emit_heads_merge, false, NULL, NULL};

/* to_tokens and from_tokens: [N,A,B] → [N,B,A] per image, result row
 * r = n·B + j gathering x[n, i, j] over i. */
static void transpose_dims(const ir_node *n, int64_t *ra, int64_t *rb)
{
	const ir_type *x = &n->in[0]->type;
	if (n->op == IR_OP_TO_TOKENS) {
		*ra = x->dim[1];
		*rb = x->dim[2] * x->dim[3];
	} else {
		*ra = x->dim[1];
		*rb = x->dim[2];
	}
}

static int64_t transpose_extent(const ir_node *n)
{
	int64_t ra, rb;
	transpose_dims(n, &ra, &rb);
	return n->type.dim[0] * rb;
}

static void emit_transpose(cg_kb *k, const ir_node *n)
{
	int64_t ra, rb;
	transpose_dims(n, &ra, &rb);
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1);
	cg_loop l, li;
	LLVMValueRef r = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef j = cg_irem(k, r, cg_i64(k, rb)), img = cg_idiv(k, r, cg_i64(k, rb));
	LLVMValueRef xbase = cg_iadd(k, cg_imul(k, img, cg_i64(k, ra * rb)), j);
	LLVMValueRef ybase = cg_imul(k, r, cg_i64(k, ra));
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), cg_i64(k, ra));
	cg_st(k, y, cg_iadd(k, ybase, i), cg_ld(k, x, cg_iadd(k, xbase, cg_imul(k, i, cg_i64(k, rb)))));
	cg_end_for(k, &li, NULL);
	cg_end_for(k, &l, NULL);
}

const cg_op_impl cg_impl_to_tokens = {transpose_extent, NULL, emit_transpose, false, NULL, NULL};
const cg_op_impl cg_impl_from_tokens = {transpose_extent, NULL, emit_transpose, false, NULL, NULL};
