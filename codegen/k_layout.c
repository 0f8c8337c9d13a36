/* k_layout.c: kernels for the layout ops (split, concat, channel_pad,
 * channel_slice): block copies and zero fills, no arithmetic.
 *
 * Each op is described as the same few segments repeated over `outer` rows
 * of the result: the result viewed as [outer, row], each row made of
 * segments that are either copied from an operand row (at an offset, with
 * the operand's own row length) or zero-filled.  Segments longer than CHUNK
 * elements are cut into pieces; the extent divided among threads is
 * outer × pieces per row, so a split of the batch axis (outer = 1) still
 * runs on every thread.  Results never overlap operands (none of these ops
 * is in place). */
#include "internal.h"

#define CHUNK ((int64_t)1 << 16)
#define MAX_SEG 3

typedef struct {
	int src;         /* operand index (1-based, as in args), or 0 for zeros */
	int64_t src_row; /* the operand's row length */
	int64_t src_off; /* where the segment starts in the operand's row */
	int64_t len;     /* elements */
} segment;

typedef struct {
	int64_t outer, row; /* result rows and their length */
	segment seg[MAX_SEG];
	int nseg;
} layout;

/* Views t as [outer, t->dim[axis], inner]. */
static void around(const ir_type *t, int axis, int64_t *outer, int64_t *inner)
{
	*outer = *inner = 1;
	for (int i = 0; i < axis; i++)
		*outer *= t->dim[i];
	for (int i = axis + 1; i < t->rank; i++)
		*inner *= t->dim[i];
}

static void add(layout *l, int src, int64_t src_row, int64_t src_off, int64_t len)
{
	if (len <= 0)
		return;
	IR_ASSERT(l->nseg < MAX_SEG);
	l->seg[l->nseg++] = (segment){src, src_row, src_off, len};
}

static layout layout_of(const ir_node *n)
{
	layout l = {0};
	const ir_type *x = &n->in[0]->type;
	int64_t inner;
	switch (n->op) {
	case IR_OP_SPLIT: {
		int axis = (int)ir_node_int(n, IR_ATTR_AXIS);
		int64_t len = n->type.dim[axis], part = ir_node_int(n, IR_ATTR_PART);
		around(x, axis, &l.outer, &inner);
		add(&l, 1, x->dim[axis] * inner, part * len * inner, len * inner);
		break;
	}
	case IR_OP_CONCAT: {
		int axis = (int)ir_node_int(n, IR_ATTR_AXIS);
		int64_t da = x->dim[axis], db = n->in[1]->type.dim[axis];
		around(&n->type, axis, &l.outer, &inner);
		add(&l, 1, da * inner, 0, da * inner);
		add(&l, 2, db * inner, 0, db * inner);
		break;
	}
	case IR_OP_CHANNEL_PAD: {
		int64_t lo = ir_node_int(n, IR_ATTR_LO), hi = ir_node_int(n, IR_ATTR_HI);
		around(x, 1, &l.outer, &inner);
		add(&l, 0, 0, 0, lo * inner);
		add(&l, 1, x->dim[1] * inner, 0, x->dim[1] * inner);
		add(&l, 0, 0, 0, hi * inner);
		break;
	}
	default: { /* IR_OP_CHANNEL_SLICE */
		int64_t lo = ir_node_int(n, IR_ATTR_LO);
		around(x, 1, &l.outer, &inner);
		add(&l, 1, x->dim[1] * inner, lo * inner, n->type.dim[1] * inner);
		break;
	}
	}
	for (int s = 0; s < l.nseg; s++)
		l.row += l.seg[s].len;
	if (l.row == 0)
		l.outer = 0; /* nothing to do (an empty tensor) */
	return l;
}

static int64_t pieces(int64_t len)
{
	return (len + CHUNK - 1) / CHUNK;
}

static int64_t row_pieces(const layout *l)
{
	int64_t p = 0;
	for (int s = 0; s < l->nseg; s++)
		p += pieces(l->seg[s].len);
	return p;
}

static int64_t layout_extent(const ir_node *n)
{
	layout l = layout_of(n);
	return l.outer * row_pieces(&l);
}

/* Piece q (0-based) of segment s in result row o, given the segment's
 * start dst_off in the result row. */
static void emit_piece(cg_kb *k, const layout *l, const segment *s, int64_t dst_off, const LLVMValueRef *arg,
	LLVMValueRef o, LLVMValueRef q)
{
	int64_t es = ir_dtype_size(k->dt);
	LLVMValueRef start = cg_imul(k, q, cg_i64(k, CHUNK));
	LLVMValueRef len = cg_i64(k, s->len);
	if (pieces(s->len) > 1) { /* the last piece may be short */
		len = cg_imin(k, cg_isub(k, len, start), cg_i64(k, CHUNK));
	}
	LLVMValueRef bytes = cg_imul(k, len, cg_i64(k, es));
	LLVMValueRef at = cg_iadd(k, cg_imul(k, o, cg_i64(k, l->row)), cg_iadd(k, cg_i64(k, dst_off), start));
	LLVMValueRef dst = cg_gep(k, NULL, arg[0], at);
	if (s->src == 0) {
		cg_memset0(k, dst, bytes);
		return;
	}
	LLVMValueRef from = cg_iadd(k, cg_imul(k, o, cg_i64(k, s->src_row)), cg_iadd(k, cg_i64(k, s->src_off), start));
	cg_memcpy(k, dst, cg_gep(k, NULL, arg[s->src], from), bytes);
}

/* Work item t = o·P + p: piece p of result row o, P pieces per row. */
static void emit_layout(cg_kb *k, const ir_node *n)
{
	layout l = layout_of(n);
	int64_t per_row = row_pieces(&l);
	if (per_row == 0)
		return;
	LLVMValueRef arg[3] = {cg_arg(k, 0), cg_arg(k, 1), n->nin > 1 ? cg_arg(k, 2) : NULL};
	cg_loop lt;
	LLVMValueRef t = cg_for(k, &lt, k->lo, k->hi);
	LLVMValueRef o = per_row == 1 ? t : cg_idiv(k, t, cg_i64(k, per_row));
	LLVMValueRef p = per_row == 1 ? cg_i64(k, 0) : cg_irem(k, t, cg_i64(k, per_row));
	int64_t first = 0, dst_off = 0;
	for (int s = 0; s < l.nseg; s++) {
		const segment *sg = &l.seg[s];
		int64_t np = pieces(sg->len);
		if (per_row == 1) {
			emit_piece(k, &l, sg, dst_off, arg, o, cg_i64(k, 0));
		} else {
			/* first <= p < first + np: piece p − first of this segment */
			LLVMValueRef q = cg_isub(k, p, cg_i64(k, first));
			cg_if in;
			cg_if_begin(k, &in, LLVMBuildICmp(k->b, LLVMIntULT, q, cg_i64(k, np), ""));
			emit_piece(k, &l, sg, dst_off, arg, o, q);
			cg_if_end(k, &in);
		}
		first += np;
		dst_off += sg->len;
	}
	cg_end_for(k, &lt, NULL);
}

const cg_op_impl cg_impl_split = {layout_extent, NULL, emit_layout, false, NULL, NULL};
const cg_op_impl cg_impl_concat = {layout_extent, NULL, emit_layout, false, NULL, NULL};
const cg_op_impl cg_impl_channel_pad = {layout_extent, NULL, emit_layout, false, NULL, NULL};
const cg_op_impl cg_impl_channel_slice = {layout_extent, NULL, emit_layout, false, NULL, NULL};
