/* k_conv.c: convolutions and matmul, on BLAS.
 *
 * Convolutions go one image at a time through im2col and one GEMM
 * (cblas_sgemm, or cblas_dgemm for f64), images divided among threads, BLAS
 * itself single-threaded, so both cores work and neither is oversubscribed.
 * The unfolded image (C·KH·KW rows by Ho·Wo columns) is each thread's
 * workspace; a 1x1 unpadded stride-1 convolution needs none, its input
 * already being that matrix.
 *   conv2d     y_n  = W · col(x_n)                      (O x K)(K x HoWo)
 *   conv2d_dx  dx_n = col2im(W^T · dy_n)                 (K x O)(O x HoWo)
 *   conv2d_dw  dW   = sum_n dy_n · col(x_n)^T            (O x HoWo)(HoWo x K)
 * conv2d_dw accumulates each thread's images into a partial sum in its
 * workspace; a serial finish kernel adds the partials in thread order, so
 * the result does not depend on timing.  The im2col and col2im loops are
 * generated here; the padding is the node's explicit [top, bottom, left,
 * right]. */
#include "internal.h"

/* CBLAS enum values (cblas.h): row major 101, no transpose 111, transpose 112. */
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

typedef struct {
	int64_t n, c, h, w;   /* input */
	int64_t o, kh, kw;    /* filter */
	int64_t ho, wo;       /* output */
	int64_t s, pt, pl;    /* stride, top and left padding */
} conv_geom;

/* The geometry of a conv node; x is the data input's type, w the filter's,
 * y the output's, whichever operand or result they are for this op. */
static conv_geom geom(const ir_node *n)
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
		x = &n->in[1]->type, w = &n->type, y = &n->in[0]->type;
		break;
	}
	const ir_attr *pad = ir_node_attr(n, IR_ATTR_PAD);
	conv_geom g = {x->dim[0], x->dim[1], x->dim[2], x->dim[3], w->dim[0], w->dim[2], w->dim[3],
		y->dim[2], y->dim[3], ir_node_int(n, IR_ATTR_STRIDE), pad->u.ints.v[0], pad->u.ints.v[2]};
	return g;
}

static bool direct(const conv_geom *g)
{
	return g->kh == 1 && g->kw == 1 && g->s == 1 && g->pt == 0 && g->pl == 0 && g->ho == g->h &&
		g->wo == g->w;
}

static int64_t col_elems(const conv_geom *g)
{
	return g->c * g->kh * g->kw * g->ho * g->wo;
}

static int64_t real_size(const ir_node *n)
{
	return ir_dtype_size(n->type.dtype);
}

static int64_t conv_extent(const ir_node *n)
{
	return geom(n).n;
}

static int64_t conv_workspace(const ir_node *n)
{
	conv_geom g = geom(n);
	int64_t col = direct(&g) ? 0 : col_elems(&g);
	if (n->op == IR_OP_CONV2D_DW)
		col += g.o * g.c * g.kh * g.kw; /* the thread's partial dW */
	return col * real_size(n);
}

/* Calls cblas_?gemm (row major). */
static void gemm(cg_kb *k, int ta, int tb, int64_t m, int64_t n, int64_t kk, LLVMValueRef a, int64_t lda,
	LLVMValueRef b, int64_t ldb, double beta, LLVMValueRef c, int64_t ldc)
{
	cg_module *M = k->m;
	LLVMTypeRef i32 = M->i32, r = k->real;
	LLVMTypeRef pt[14] = {i32, i32, i32, i32, i32, i32, r, M->ptr, i32, M->ptr, i32, r, M->ptr, i32};
	LLVMTypeRef fty = LLVMFunctionType(M->vd, pt, 14, 0);
	LLVMValueRef f = cg_extern(M, k->dt == IR_F64 ? "cblas_dgemm" : "cblas_sgemm", fty);
	LLVMValueRef a14[14] = {
		LLVMConstInt(i32, ROW_MAJOR, 0), LLVMConstInt(i32, (unsigned)ta, 0), LLVMConstInt(i32, (unsigned)tb, 0),
		LLVMConstInt(i32, (unsigned long long)m, 0), LLVMConstInt(i32, (unsigned long long)n, 0),
		LLVMConstInt(i32, (unsigned long long)kk, 0), cg_real(k, 1), a, LLVMConstInt(i32, (unsigned long long)lda, 0),
		b, LLVMConstInt(i32, (unsigned long long)ldb, 0), cg_real(k, beta), c,
		LLVMConstInt(i32, (unsigned long long)ldc, 0)};
	LLVMBuildCall2(k->b, fty, f, a14, 14, "");
	if (M->stats) {
		M->stats->gemms++;
		M->stats->flops += 2.0 * (double)m * (double)n * (double)kk;
	}
}

/* The thread's workspace slice. */
static LLVMValueRef slice(cg_kb *k, const ir_node *n, int64_t per_thread)
{
	LLVMValueRef ws = cg_arg(k, n->nin + 1);
	return cg_gep(k, NULL, ws, cg_imul(k, k->tid, cg_i64(k, per_thread)));
}

/* Unfolds image x (C x H x W) into col ((C·KH·KW) x (Ho·Wo)), zero where
 * the window falls in the padding. */
static void im2col(cg_kb *k, const conv_geom *g, LLVMValueRef x, LLVMValueRef col)
{
	cg_loop lr, lo, li;
	int64_t win = g->kh * g->kw, howo = g->ho * g->wo;
	LLVMValueRef row = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, g->c * win));
	LLVMValueRef c = cg_idiv(k, row, cg_i64(k, win)), rem = cg_irem(k, row, cg_i64(k, win));
	LLVMValueRef kh = cg_idiv(k, rem, cg_i64(k, g->kw)), kw = cg_irem(k, rem, cg_i64(k, g->kw));
	LLVMValueRef plane = cg_imul(k, c, cg_i64(k, g->h * g->w));
	LLVMValueRef oh = cg_for(k, &lo, cg_i64(k, 0), cg_i64(k, g->ho));
	LLVMValueRef ih = cg_isub(k, cg_iadd(k, cg_imul(k, oh, cg_i64(k, g->s)), kh), cg_i64(k, g->pt));
	LLVMValueRef ih_ok = LLVMBuildICmp(k->b, LLVMIntULT, ih, cg_i64(k, g->h), "");
	LLVMValueRef dst = cg_iadd(k, cg_imul(k, row, cg_i64(k, howo)), cg_imul(k, oh, cg_i64(k, g->wo)));
	LLVMValueRef src = cg_iadd(k, plane, cg_imul(k, ih, cg_i64(k, g->w)));
	LLVMValueRef ow = cg_for(k, &li, cg_i64(k, 0), cg_i64(k, g->wo));
	LLVMValueRef iw = cg_isub(k, cg_iadd(k, cg_imul(k, ow, cg_i64(k, g->s)), kw), cg_i64(k, g->pl));
	LLVMValueRef ok = LLVMBuildAnd(k->b, ih_ok, LLVMBuildICmp(k->b, LLVMIntULT, iw, cg_i64(k, g->w), ""), "");
	/* Load from a clamped index so the load is always in bounds, then select. */
	LLVMValueRef at = LLVMBuildSelect(k->b, ok, cg_iadd(k, src, iw), cg_i64(k, 0), "");
	LLVMValueRef v = LLVMBuildSelect(k->b, ok, cg_ld(k, x, at), cg_real(k, 0), "");
	cg_st(k, col, cg_iadd(k, dst, ow), v);
	cg_end_for(k, &li, NULL);
	cg_end_for(k, &lo, NULL);
	cg_end_for(k, &lr, NULL);
}

/* Folds col back, adding into image dx (zeroed first). */
static void col2im(cg_kb *k, const conv_geom *g, LLVMValueRef col, LLVMValueRef dx)
{
	cg_memset0(k, dx, cg_i64(k, g->c * g->h * g->w * ir_dtype_size(k->dt)));
	cg_loop lr, lo, li;
	int64_t win = g->kh * g->kw, howo = g->ho * g->wo;
	LLVMValueRef row = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, g->c * win));
	LLVMValueRef c = cg_idiv(k, row, cg_i64(k, win)), rem = cg_irem(k, row, cg_i64(k, win));
	LLVMValueRef kh = cg_idiv(k, rem, cg_i64(k, g->kw)), kw = cg_irem(k, rem, cg_i64(k, g->kw));
	LLVMValueRef plane = cg_imul(k, c, cg_i64(k, g->h * g->w));
	LLVMValueRef oh = cg_for(k, &lo, cg_i64(k, 0), cg_i64(k, g->ho));
	LLVMValueRef ih = cg_isub(k, cg_iadd(k, cg_imul(k, oh, cg_i64(k, g->s)), kh), cg_i64(k, g->pt));
	cg_if in_rows;
	cg_if_begin(k, &in_rows, LLVMBuildICmp(k->b, LLVMIntULT, ih, cg_i64(k, g->h), ""));
	LLVMValueRef src = cg_iadd(k, cg_imul(k, row, cg_i64(k, howo)), cg_imul(k, oh, cg_i64(k, g->wo)));
	LLVMValueRef dst = cg_iadd(k, plane, cg_imul(k, ih, cg_i64(k, g->w)));
	LLVMValueRef ow = cg_for(k, &li, cg_i64(k, 0), cg_i64(k, g->wo));
	LLVMValueRef iw = cg_isub(k, cg_iadd(k, cg_imul(k, ow, cg_i64(k, g->s)), kw), cg_i64(k, g->pl));
	cg_if in_cols;
	cg_if_begin(k, &in_cols, LLVMBuildICmp(k->b, LLVMIntULT, iw, cg_i64(k, g->w), ""));
	LLVMValueRef at = cg_iadd(k, dst, iw);
	cg_st(k, dx, at, cg_fadd(k, cg_ld(k, dx, at), cg_ld(k, col, cg_iadd(k, src, ow))));
	cg_if_end(k, &in_cols);
	cg_end_for(k, &li, NULL);
	cg_if_end(k, &in_rows);
	cg_end_for(k, &lo, NULL);
	cg_end_for(k, &lr, NULL);
}

static void emit_conv2d(cg_kb *k, const ir_node *n)
{
	conv_geom g = geom(n);
	int64_t K = g.c * g.kh * g.kw, howo = g.ho * g.wo;
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1), w = cg_arg(k, 2);
	LLVMValueRef col = direct(&g) ? NULL : slice(k, n, col_elems(&g));
	cg_loop l;
	LLVMValueRef img = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef xn = cg_gep(k, NULL, x, cg_imul(k, img, cg_i64(k, g.c * g.h * g.w)));
	LLVMValueRef yn = cg_gep(k, NULL, y, cg_imul(k, img, cg_i64(k, g.o * howo)));
	if (col)
		im2col(k, &g, xn, col);
	gemm(k, NO_TRANS, NO_TRANS, g.o, howo, K, w, K, col ? col : xn, howo, 0, yn, howo);
	cg_end_for(k, &l, NULL);
}

static void emit_conv2d_dx(cg_kb *k, const ir_node *n)
{
	conv_geom g = geom(n);
	int64_t K = g.c * g.kh * g.kw, howo = g.ho * g.wo;
	LLVMValueRef dx = cg_arg(k, 0), dy = cg_arg(k, 1), w = cg_arg(k, 2);
	LLVMValueRef col = direct(&g) ? NULL : slice(k, n, col_elems(&g));
	cg_loop l;
	LLVMValueRef img = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef dyn = cg_gep(k, NULL, dy, cg_imul(k, img, cg_i64(k, g.o * howo)));
	LLVMValueRef dxn = cg_gep(k, NULL, dx, cg_imul(k, img, cg_i64(k, g.c * g.h * g.w)));
	gemm(k, TRANS, NO_TRANS, K, howo, g.o, w, K, dyn, howo, 0, col ? col : dxn, howo);
	if (col)
		col2im(k, &g, col, dxn);
	cg_end_for(k, &l, NULL);
}

static void emit_conv2d_dw(cg_kb *k, const ir_node *n)
{
	conv_geom g = geom(n);
	int64_t K = g.c * g.kh * g.kw, howo = g.ho * g.wo, cols = direct(&g) ? 0 : col_elems(&g);
	LLVMValueRef dy = cg_arg(k, 1), x = cg_arg(k, 2);
	LLVMValueRef mine = slice(k, n, cols + g.o * K);
	LLVMValueRef col = cols ? mine : NULL, part = cg_gep(k, NULL, mine, cg_i64(k, cols));
	cg_memset0(k, part, cg_i64(k, g.o * K * ir_dtype_size(k->dt)));
	cg_loop l;
	LLVMValueRef img = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef xn = cg_gep(k, NULL, x, cg_imul(k, img, cg_i64(k, g.c * g.h * g.w)));
	LLVMValueRef dyn = cg_gep(k, NULL, dy, cg_imul(k, img, cg_i64(k, g.o * howo)));
	if (col)
		im2col(k, &g, xn, col);
	gemm(k, NO_TRANS, TRANS, g.o, K, howo, dyn, howo, col ? col : xn, howo, 1, part, K);
	cg_end_for(k, &l, NULL);
}

/* dW = the sum of the threads' partials, in thread order. */
static void finish_conv2d_dw(cg_kb *k, const ir_node *n, int threads)
{
	conv_geom g = geom(n);
	int64_t K = g.c * g.kh * g.kw, cols = direct(&g) ? 0 : col_elems(&g), per = cols + g.o * K;
	LLVMValueRef dw = cg_arg(k, 0), ws = cg_arg(k, n->nin + 1);
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, cg_i64(k, 0), cg_i64(k, g.o * K));
	LLVMValueRef sum = cg_ld(k, ws, cg_iadd(k, i, cg_i64(k, cols)));
	for (int t = 1; t < threads; t++)
		sum = cg_fadd(k, sum, cg_ld(k, ws, cg_iadd(k, i, cg_i64(k, t * per + cols))));
	cg_st(k, dw, i, sum);
	cg_end_for(k, &l, NULL);
}

const cg_op_impl cg_impl_conv2d = {conv_extent, conv_workspace, emit_conv2d, false, NULL};
const cg_op_impl cg_impl_conv2d_dx = {conv_extent, conv_workspace, emit_conv2d_dx, false, NULL};
const cg_op_impl cg_impl_conv2d_dw = {conv_extent, conv_workspace, emit_conv2d_dw, false, finish_conv2d_dw};

/* ---- matmul: one GEMM ---------------------------------------------------- */

static int64_t one(const ir_node *n)
{
	(void)n;
	return 1;
}

static void emit_matmul(cg_kb *k, const ir_node *n)
{
	const ir_attr *a = ir_node_attr(n, IR_ATTR_TRANS_A), *b = ir_node_attr(n, IR_ATTR_TRANS_B);
	int64_t ta = a ? a->u.i : 0, tb = b ? b->u.i : 0;
	const ir_type *A = &n->in[0]->type, *B = &n->in[1]->type;
	int64_t m = n->type.dim[0], nn = n->type.dim[1], kk = ta ? A->dim[0] : A->dim[1];
	gemm(k, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, m, nn, kk, cg_arg(k, 1), A->dim[1], cg_arg(k, 2),
		B->dim[1], 0, cg_arg(k, 0), nn);
}

const cg_op_impl cg_impl_matmul = {one, NULL, emit_matmul, true, NULL};
