/* k_conv.c: convolutions, matmul and bmatmul.
 *
 * Stride-1 convolutions read the padded image directly, stride-2 ones
 * with windows of 2x2 and more its phases (k_conv_implicit.c,
 * k_conv_dx_phases.c).  The others (1x1 at stride 2, other strides,
 * stride 1 padded by the window or more, more than CG_MAX_TAPS taps; every
 * one under REVC_CONV=blas) are unfolded, a tile
 * of T images at a time: with col the T images' columns (im2col; C·KH·KW
 * rows by T·Ho·Wo columns),
 *   conv2d     Y_i = W · col_i, straight into image i's output
 *   conv2d_dx  col_i = W^T · dY_i, folded back into the image (col2im)
 *   conv2d_dw  dW += dY · col^T over the tile, into the thread's partial sum
 * the products being the register-blocked loops of gemm.c.  Tiles are
 * divided among threads, so both cores work.  conv2d_dw's finish kernel
 * adds the threads' partials in thread order, so the result does not
 * depend on timing (over dW's output planes, divided among the threads
 * when dW is large: codegen/step.c).  Padding is the node's explicit
 * [top, bottom, left, right].
 *
 * 3x3 stride-1 ones and their gradients may be Winograd's instead
 * (k_conv_winograd.c, chosen by k_conv_choice.c).  With REVC_CONV=blas (or REVC_CONV_BLAS=1) every
 * convolution is unfolded and its products are
 * cblas_sgemm (cblas_dgemm for f64) calls instead, on tiles wide enough for
 * BLAS, with the outputs gathered into and scattered from the tile's
 * layout: the lowering revc had first, kept for comparison (revc bench).
 * matmul is always one BLAS call, bmatmul one per batch index. */
#include <string.h>

#include "internal.h"

/* CBLAS enum values (cblas.h): row major 101, no transpose 111, transpose 112. */
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

static bool on_blas(void)
{
	return cg_conv_on_blas();
}

/* Images per product.  BLAS wants wide ones (T·Ho·Wo >= 512 columns);
 * the generated loops one image (conv2d, conv2d_dx) or long reductions
 * (conv2d_dw); the unfolded columns stay within 512 KiB, so in L2; at most
 * half the batch, so both threads get tiles. */
static int64_t tile(const ir_conv_geom *g)
{
	int64_t howo = g->ho * g->wo, k = g->c * g->kh * g->kw;
	if (cg_conv_implicit(g))
		return cg_conv_implicit_tile(g);
	if (!on_blas() && g->op != IR_OP_CONV2D_DW)
		return 1;
	int64_t t = (512 + howo - 1) / howo;
	int64_t cap = ((int64_t)512 << 10) / 4 / (k * howo);
	if (t > cap)
		t = cap;
	if (t > (g->n + 1) / 2)
		t = (g->n + 1) / 2;
	return t < 1 ? 1 : t;
}

/* Workspace elements per thread: col, Y, and conv2d_dw's partial dW. */
static int64_t col_elems(const ir_conv_geom *g)
{
	return g->c * g->kh * g->kw * g->ho * g->wo * tile(g);
}

static int64_t y_elems(const ir_conv_geom *g)
{
	return on_blas() ? g->o * g->ho * g->wo * tile(g) : 0;
}

static int64_t real_size(const ir_node *n)
{
	return ir_dtype_size(n->type.dtype);
}

static int64_t conv_extent(const ir_node *n)
{
	ir_conv_geom g = ir_conv_geom_of(n);
	if (cg_conv_winograd(&g, n->type.dtype))
		return cg_conv_winograd_extent(&g, n->type.dtype);
	return (g.n + tile(&g) - 1) / tile(&g);
}

/* The chosen lowering's workspace elements per thread. */
static int64_t chosen_elems(const ir_conv_geom *g, const ir_node *n)
{
	if (cg_conv_winograd(g, n->type.dtype))
		return cg_conv_winograd_workspace(g, n->type.dtype);
	if (cg_conv_implicit(g))
		return cg_conv_implicit_workspace(g, cg_conv_has_prologue(n));
	int64_t e = col_elems(g) + y_elems(g);
	if (n->op == IR_OP_CONV2D_DW)
		e += g->o * g->c * g->kh * g->kw;
	return e;
}

/* The workspace elements per thread planned (k_conv_tune.c). */
static int64_t lowering_elems(const ir_conv_geom *g, const ir_node *n)
{
	return cg_conv_tune_largest(g, n, chosen_elems);
}

/* Where the batch-norm statistics' partials start in a thread's slice
 * (after the lowering's elements, on a 64-byte boundary), and how many
 * real elements they take: per channel a count, a mean and a sum of
 * squared deviations, in double (stats_tile). */
static int64_t stats_at(const ir_conv_geom *g, const ir_node *n)
{
	int64_t line = 64 / real_size(n);
	return (lowering_elems(g, n) + line - 1) / line * line;
}

static int64_t stats_elems(const ir_node *n)
{
	return cg_conv_opens_epilogue(n) ? 3 * n->type.dim[1] * (8 / real_size(n)) : 0;
}

/* Every epilogue keeps room for the statistics' partials (a few hundred
 * bytes; a data gradient's, for bn_dgamma's two sums), so the workspace
 * depends on the node alone. */
static int64_t per_thread(const ir_conv_geom *g, const ir_node *n)
{
	return cg_conv_opens_epilogue(n) ? stats_at(g, n) + stats_elems(n) : lowering_elems(g, n);
}

static int64_t conv_workspace(const ir_node *n)
{
	ir_conv_geom g = ir_conv_geom_of(n);
	return per_thread(&g, n) * real_size(n);
}

/* Calls cblas_?gemm (row major); m, n and kk are i64 values. */
static void gemm_v(cg_kb *k, int ta, int tb, LLVMValueRef m, LLVMValueRef n, LLVMValueRef kk, LLVMValueRef a,
	int64_t lda, LLVMValueRef b, int64_t ldb, double beta, LLVMValueRef c, int64_t ldc)
{
	cg_module *M = k->m;
	LLVMTypeRef i32 = M->i32, r = k->real;
	LLVMTypeRef pt[14] = {i32, i32, i32, i32, i32, i32, r, M->ptr, i32, M->ptr, i32, r, M->ptr, i32};
	LLVMTypeRef fty = LLVMFunctionType(M->vd, pt, 14, 0);
	LLVMValueRef f = cg_extern(M, k->dt == IR_F64 ? "cblas_dgemm" : "cblas_sgemm", fty);
	LLVMValueRef a14[14] = {
		LLVMConstInt(i32, ROW_MAJOR, 0), LLVMConstInt(i32, (unsigned)ta, 0), LLVMConstInt(i32, (unsigned)tb, 0),
		LLVMBuildTrunc(k->b, m, i32, ""), LLVMBuildTrunc(k->b, n, i32, ""), LLVMBuildTrunc(k->b, kk, i32, ""),
		cg_real(k, 1), a, LLVMConstInt(i32, (unsigned long long)lda, 0), b,
		LLVMConstInt(i32, (unsigned long long)ldb, 0), cg_real(k, beta), c,
		LLVMConstInt(i32, (unsigned long long)ldc, 0)};
	LLVMBuildCall2(k->b, fty, f, a14, 14, "");
	if (M->stats)
		M->stats->gemms++;
}

static void gemm(cg_kb *k, int ta, int tb, int64_t m, int64_t n, int64_t kk, LLVMValueRef a, int64_t lda,
	LLVMValueRef b, int64_t ldb, double beta, LLVMValueRef c, int64_t ldc)
{
	gemm_v(k, ta, tb, cg_i64(k, m), cg_i64(k, n), cg_i64(k, kk), a, lda, b, ldb, beta, c, ldc);
	if (k->m->stats)
		k->m->stats->flops += 2.0 * (double)m * (double)n * (double)kk;
}

/* The thread's workspace slice. */
static LLVMValueRef slice(cg_kb *k, const ir_node *n, int64_t per_thread)
{
	LLVMValueRef ws = cg_arg(k, n->nin + 1);
	return cg_gep(k, NULL, ws, cg_imul(k, k->tid, cg_i64(k, per_thread)));
}

/* The output rows (or columns) o whose input row i = o·s + off lands inside
 * [0, in): [*lo, *hi) of [0, out), off being the window offset minus the
 * padding. */
static void valid_range(cg_kb *k, LLVMValueRef off, int64_t s, int64_t in, int64_t out, LLVMValueRef *lo,
	LLVMValueRef *hi)
{
	/* o >= ceil(-off / s) and o <= floor((in - 1 - off) / s). */
	LLVMValueRef a = cg_isub(k, cg_i64(k, 0), off), b = cg_isub(k, cg_i64(k, in - 1), off);
	LLVMValueRef l = cg_idiv(k, cg_iadd(k, cg_imax(k, a, cg_i64(k, 0)), cg_i64(k, s - 1)), cg_i64(k, s));
	LLVMValueRef h = LLVMBuildSelect(k->b, LLVMBuildICmp(k->b, LLVMIntSLT, b, cg_i64(k, 0), ""), cg_i64(k, 0),
		cg_iadd(k, cg_idiv(k, b, cg_i64(k, s)), cg_i64(k, 1)), "");
	*hi = cg_imin(k, h, cg_i64(k, out));
	*lo = cg_imin(k, l, *hi);
}

/* The im2col and col2im loops over one image, row by row of col (c, kh,
 * kw).  For each window offset the rows and columns where it falls inside
 * the image form a range, computed once per offset: inside it the innermost
 * loop is a plain (for stride 1, contiguous) copy that vectorises; outside
 * it im2col writes zeros and col2im adds nothing.  The outer loops are kept
 * rolled: unrolling them buys nothing and costs compile time. */
static void fold(cg_kb *k, const ir_conv_geom *g, LLVMValueRef img, LLVMValueRef col, int64_t ld, bool unfold)
{
	cg_loop lr, lo, li;
	if (!unfold)
		cg_zero(k, img, cg_i64(k, g->c * g->h * g->w));
	int64_t win = g->kh * g->kw;
	LLVMValueRef row = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, g->c * win));
	LLVMValueRef c = cg_idiv(k, row, cg_i64(k, win)), rem = cg_irem(k, row, cg_i64(k, win));
	LLVMValueRef kh = cg_idiv(k, rem, cg_i64(k, g->kw)), kw = cg_irem(k, rem, cg_i64(k, g->kw));
	LLVMValueRef plane = cg_gep(k, NULL, img, cg_imul(k, c, cg_i64(k, g->h * g->w)));
	LLVMValueRef dst = cg_gep(k, NULL, col, cg_imul(k, row, cg_i64(k, ld)));
	LLVMValueRef offh = cg_isub(k, kh, cg_i64(k, g->pt)), offw = cg_isub(k, kw, cg_i64(k, g->pl));
	LLVMValueRef sc = NULL, shift = NULL;
	if (unfold && k->pro) /* only conv2d's kernels have one */
		cg_conv_prologue_coeffs(k, c, &sc, &shift);
	LLVMValueRef oh0, oh1, ow0, ow1;
	valid_range(k, offh, g->s, g->h, g->ho, &oh0, &oh1);
	valid_range(k, offw, g->s, g->w, g->wo, &ow0, &ow1);
	if (unfold) {
		/* Rows outside the range, and every row when no column is inside. */
		LLVMValueRef none = LLVMBuildICmp(k->b, LLVMIntEQ, ow0, ow1, "");
		LLVMValueRef top = LLVMBuildSelect(k->b, none, cg_i64(k, g->ho), oh0, "");
		cg_zero(k, dst, cg_imul(k, top, cg_i64(k, g->wo)));
		LLVMValueRef from = cg_imax(k, oh1, top);
		cg_zero(k, cg_gep(k, NULL, dst, cg_imul(k, from, cg_i64(k, g->wo))),
			cg_imul(k, cg_isub(k, cg_i64(k, g->ho), from), cg_i64(k, g->wo)));
	}
	LLVMValueRef oh = cg_for(k, &lo, oh0, oh1);
	LLVMValueRef ih = cg_iadd(k, cg_imul(k, oh, cg_i64(k, g->s)), offh);
	LLVMValueRef crow = cg_gep(k, NULL, dst, cg_imul(k, oh, cg_i64(k, g->wo)));
	LLVMValueRef irow = cg_gep(k, NULL, plane, cg_imul(k, ih, cg_i64(k, g->w)));
	if (unfold) {
		cg_zero_loop(k, crow, cg_i64(k, 0), ow0);
		cg_zero_loop(k, crow, ow1, cg_i64(k, g->wo));
	}
	LLVMValueRef ow = cg_for(k, &li, ow0, ow1);
	LLVMValueRef iw = cg_iadd(k, cg_imul(k, ow, cg_i64(k, g->s)), offw);
	if (unfold && k->pro)
		cg_st(k, crow, ow, cg_conv_prologue_apply(k, cg_ld(k, irow, iw), sc, shift));
	else if (unfold)
		cg_st(k, crow, ow, cg_ld(k, irow, iw));
	else
		cg_st(k, irow, iw, cg_fadd(k, cg_ld(k, irow, iw), cg_ld(k, crow, ow)));
	cg_end_for(k, &li, NULL);
	cg_keep_loop(&lo);
	cg_end_for(k, &lo, NULL);
	cg_keep_loop(&lr);
	cg_end_for(k, &lr, NULL);
}

/* Unfolds image x (C x H x W) into columns of col ((C·KH·KW) rows of ld
 * elements; this image's Ho·Wo columns start at col). */
static void im2col(cg_kb *k, const ir_conv_geom *g, LLVMValueRef x, LLVMValueRef col, int64_t ld)
{
	fold(k, g, x, col, ld, true);
}

/* Folds this image's columns of col (rows of ld elements) back, adding into
 * image dx (zeroed first). */
static void col2im(cg_kb *k, const ir_conv_geom *g, LLVMValueRef col, int64_t ld, LLVMValueRef dx)
{
	fold(k, g, dx, col, ld, false);
}

/* Copies rows of `rows` images' planes between the image layout (image i at
 * img + i·rows·howo) and the tile layout (rows of ld, image i's columns at
 * i·howo); to_tile says which way. */
static void shuffle(cg_kb *k, LLVMValueRef img, LLVMValueRef tilebuf, LLVMValueRef count, int64_t rows,
	int64_t howo, int64_t ld, bool to_tile)
{
	cg_loop li, lr;
	int64_t bytes = howo * ir_dtype_size(k->dt);
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), count);
	LLVMValueRef r = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, rows));
	LLVMValueRef at_img = cg_imul(k, cg_iadd(k, cg_imul(k, i, cg_i64(k, rows)), r), cg_i64(k, howo));
	LLVMValueRef at_tile = cg_iadd(k, cg_imul(k, r, cg_i64(k, ld)), cg_imul(k, i, cg_i64(k, howo)));
	LLVMValueRef a = cg_gep(k, NULL, img, at_img), b = cg_gep(k, NULL, tilebuf, at_tile);
	cg_memcpy(k, to_tile ? b : a, to_tile ? a : b, cg_i64(k, bytes));
	cg_end_for(k, &lr, NULL);
	cg_end_for(k, &li, NULL);
}

/* The images of tile `t`: first and count (the last tile may be short). */
static void tile_span(cg_kb *k, const ir_conv_geom *g, LLVMValueRef t, LLVMValueRef *first, LLVMValueRef *count)
{
	int64_t T = tile(g);
	*first = cg_imul(k, t, cg_i64(k, T));
	*count = cg_imin(k, cg_isub(k, cg_i64(k, g->n), *first), cg_i64(k, T));
}

/* Unfolds images first .. first+count-1 of x into col (rows of ld). */
static void unfold(cg_kb *k, const ir_conv_geom *g, LLVMValueRef x, LLVMValueRef first, LLVMValueRef count,
	LLVMValueRef col, int64_t ld)
{
	int64_t howo = g->ho * g->wo;
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, cg_i64(k, 0), count);
	LLVMValueRef xi = cg_gep(k, NULL, x, cg_imul(k, cg_iadd(k, first, i), cg_i64(k, g->c * g->h * g->w)));
	im2col(k, g, xi, cg_gep(k, NULL, col, cg_imul(k, i, cg_i64(k, howo))), ld);
	cg_end_for(k, &l, NULL);
}

/* ---- epilogues ------------------------------------------------------------
 *
 * A conv2d that opens an epilogue group (passes/fuse.c) computes the rest
 * of the group too, after each parallel index has written its images of
 * y, while they are in cache: z = o + y or o - y (the group's add or sub;
 * z may be o's storage, in place), then the bn_stats of z (or of y).  A
 * conv2d_dx's: z = relu_grad(y, o), y where o > 0 and 0 elsewhere (z
 * mostly y's storage, in place), the select the relu_grad kernel makes;
 * then, in the same loop, bn_dgamma's sums of z·(x - mean) and of z (its
 * dbeta) per channel, in double, added to the thread's partials; a serial
 * finish adds the threads' in thread order and writes dgamma (the first
 * sum over sqrt(var + eps)) and dbeta, as k_bn.c's bn_dgamma does but for
 * the order of the sums (a few ulps of double).  The
 * statistics of the tile: its mean, then the sum of squared deviations
 * from it (two passes over the tile, so a large mean cancels nothing; a
 * standalone f32 bn_stats gets the same from one pass shifted by the
 * channel's first element, k_bn.c), in double.  Chan's formula
 * adds the tile to the thread's count, mean and sum in its workspace; the
 * serial finish adds the threads' in thread order.  The dispatcher's
 * chunks are fixed by the thread count, so the result does not depend on
 * timing. */

bool cg_conv_opens_epilogue(const ir_node *n)
{
	return (n->op == IR_OP_CONV2D || n->op == IR_OP_CONV2D_DX) && n->group >= 0;
}

int cg_conv_epilogue_of(const ir_graph *g, int i, cg_conv_epi *epi, const ir_node **args, int *nargs)
{
	const ir_node *n = g->nodes[i];
	*epi = (cg_conv_epi){0};
	*nargs = 0;
	int last = i;
	while (last + 1 < g->n && g->nodes[last + 1]->group == n->group) {
		const ir_node *m = g->nodes[++last];
		if (m->op == IR_OP_BN_STATS) {
			epi->stats = true;
			args[(*nargs)++] = m;
			continue;
		}
		if (m->op == IR_OP_RELU_GRAD) {
			IR_ASSERT(n->op == IR_OP_CONV2D_DX && m->in[0] == n);
			epi->mask = true;
			args[(*nargs)++] = m;
			args[(*nargs)++] = m->in[1];
			continue;
		}
		if (m->op == IR_OP_BN_DGAMMA) { /* then its dbeta */
			IR_ASSERT(epi->mask && last + 1 < g->n && g->nodes[last + 1]->op == IR_OP_REDUCE_SUM);
			epi->dgamma = true;
			epi->eps = ir_node_float(m, IR_ATTR_EPS);
			args[(*nargs)++] = m;
			args[(*nargs)++] = m->in[1];
			args[(*nargs)++] = m->in[2];
			args[(*nargs)++] = g->nodes[++last];
			continue;
		}
		IR_ASSERT(m->op == IR_OP_ADD || m->op == IR_OP_SUB);
		epi->res = true;
		epi->sub = m->op == IR_OP_SUB;
		args[(*nargs)++] = m;
		args[(*nargs)++] = m->in[0] == n ? m->in[1] : m->in[0];
	}
	IR_ASSERT((epi->res || epi->stats || epi->mask) && *nargs <= CG_EPI_ARGS);
	return last;
}

void cg_conv_epilogue_key(const cg_conv_epi *epi, char *key, size_t len)
{
	size_t at = strlen(key);
	snprintf(key + at, len - at, " +%s%s%s%s", epi->res ? (epi->sub ? "sub" : "add") : "",
		epi->mask ? "relu_grad" : "", epi->stats ? "bn_stats" : "", epi->dgamma ? "+bn_dgamma" : "");
	if (epi->dgamma) {
		at = strlen(key);
		snprintf(key + at, len - at, " eps=%.17g", epi->eps);
	}
}

static LLVMValueRef ld_f64(cg_kb *k, LLVMValueRef base, LLVMValueRef i)
{
	return LLVMBuildLoad2(k->b, k->m->f64, cg_gep(k, k->m->f64, base, i), "");
}

static void st_f64(cg_kb *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v)
{
	LLVMBuildStore(k->b, v, cg_gep(k, k->m->f64, base, i));
}

/* The thread's partials: 3 doubles per channel (count, mean, M2). */
static LLVMValueRef stats_partials(cg_kb *k, const ir_node *n)
{
	ir_conv_geom g = ir_conv_geom_of(n);
	return cg_gep(k, NULL, slice(k, n, per_thread(&g, n)), cg_i64(k, stats_at(&g, n)));
}

/* (na, ma, qa) := the statistics of the union of two disjoint sets, a and
 * b (count, mean, sum of squared deviations), in double. */
static void chan_add(cg_kb *k, LLVMValueRef *na, LLVMValueRef *ma, LLVMValueRef *qa, LLVMValueRef nb,
	LLVMValueRef mb, LLVMValueRef qb)
{
	LLVMValueRef nn = cg_fadd(k, *na, nb), d = cg_fsub(k, mb, *ma);
	LLVMValueRef some = LLVMBuildFCmp(k->b, LLVMRealOGT, nn, cg_f64(k, 0), "");
	LLVMValueRef r = LLVMBuildSelect(k->b, some, cg_fdiv(k, nb, nn), cg_f64(k, 0), "");
	*qa = cg_fadd(k, cg_fadd(k, *qa, qb), cg_fmul(k, cg_fmul(k, d, d), cg_fmul(k, *na, r)));
	*ma = cg_fadd(k, *ma, cg_fmul(k, d, r));
	*na = nn;
}

static void stats_begin(cg_kb *k, const ir_node *n)
{
	if (k->epi && (k->epi->stats || k->epi->dgamma))
		cg_zero(k, stats_partials(k, n), cg_i64(k, stats_elems(n)));
}

/* Σ over images first .. first+count-1 and the H·W run of channel c of
 * term(y) (centred on mean when it is not NULL: squared deviations), in
 * double, reassociable so that it vectorises. */
static LLVMValueRef tile_sum(cg_kb *k, LLVMValueRef y, int64_t C, int64_t hw, LLVMValueRef c, LLVMValueRef first,
	LLVMValueRef count, LLVMValueRef mean)
{
	cg_loop li, lj;
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), count);
	LLVMValueRef acc = cg_carry(k, &li, cg_f64(k, 0));
	LLVMValueRef base = cg_imul(k, cg_iadd(k, cg_imul(k, cg_iadd(k, first, i), cg_i64(k, C)), c), cg_i64(k, hw));
	LLVMValueRef j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, hw));
	LLVMValueRef a = cg_carry(k, &lj, acc);
	LLVMValueRef v = cg_to_f64(k, cg_ld(k, y, cg_iadd(k, base, j)));
	if (mean) {
		v = cg_fsub(k, v, mean);
		v = cg_fmul(k, v, v);
	}
	LLVMValueRef next = cg_fadd(k, a, v);
	if (LLVMIsAInstruction(next))
		LLVMSetFastMathFlags(next, LLVMFastMathAllowReassoc);
	cg_end_for(k, &lj, &next);
	cg_end_for(k, &li, &lj.out[0]);
	return li.out[0];
}

/* z = o ± y (the add or sub), or relu_grad(y, o) (the mask), over images
 * first .. first+count-1. */
static void pair_tile(cg_kb *k, const ir_node *n, LLVMValueRef first, LLVMValueRef count)
{
	int64_t img = n->type.dim[1] * n->type.dim[2] * n->type.dim[3];
	LLVMValueRef y = cg_arg(k, 0), z = cg_arg(k, n->nin + 2), o = cg_arg(k, n->nin + 3);
	LLVMValueRef at = cg_imul(k, first, cg_i64(k, img));
	y = cg_gep(k, NULL, y, at);
	z = cg_gep(k, NULL, z, at);
	o = cg_gep(k, NULL, o, at);
	cg_loop l;
	LLVMValueRef j = cg_for(k, &l, cg_i64(k, 0), cg_imul(k, count, cg_i64(k, img)));
	LLVMValueRef a = cg_ld(k, o, j), b = cg_ld(k, y, j);
	LLVMValueRef v = k->epi->mask ? cg_relu_select(k, a, b) : k->epi->sub ? cg_fsub(k, a, b) : cg_fadd(k, a, b);
	cg_st(k, z, j, v);
	cg_parallel_loop(&l); /* z is y's or o's storage, or apart from both */
	cg_end_for(k, &l, NULL);
}

/* z = relu_grad(y, o) over images first .. first+count-1, and per channel
 * the sums of z·(x - mean) and of z (bn_dgamma's, its operands x and
 * stats) added to the thread's partials, in double, reassociable so that
 * they vectorise. */
static void mask_dgamma_tile(cg_kb *k, const ir_node *n, LLVMValueRef first, LLVMValueRef count)
{
	int64_t C = n->type.dim[1], hw = n->type.dim[2] * n->type.dim[3];
	int a = n->nin + 2;
	LLVMValueRef y = cg_arg(k, 0), z = cg_arg(k, a), o = cg_arg(k, a + 1), x = cg_arg(k, a + 3);
	LLVMValueRef st = cg_arg(k, a + 4), part = stats_partials(k, n);
	cg_loop lc, li, lj;
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, C));
	LLVMValueRef mean = cg_to_f64(k, cg_ld(k, st, c));
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), count);
	LLVMValueRef acc[2] = {cg_carry(k, &li, cg_f64(k, 0)), cg_carry(k, &li, cg_f64(k, 0))};
	LLVMValueRef base = cg_imul(k, cg_iadd(k, cg_imul(k, cg_iadd(k, first, i), cg_i64(k, C)), c), cg_i64(k, hw));
	LLVMValueRef j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, hw));
	LLVMValueRef s[2] = {cg_carry(k, &lj, acc[0]), cg_carry(k, &lj, acc[1])};
	LLVMValueRef at = cg_iadd(k, base, j);
	LLVMValueRef zv = cg_relu_select(k, cg_ld(k, o, at), cg_ld(k, y, at));
	cg_st(k, z, at, zv);
	LLVMValueRef zd = cg_to_f64(k, zv);
	LLVMValueRef next[2] = {cg_fadd(k, s[0], cg_fmul(k, zd, cg_fsub(k, cg_to_f64(k, cg_ld(k, x, at)), mean))),
		cg_fadd(k, s[1], zd)};
	for (int e = 0; e < 2; e++)
		if (LLVMIsAInstruction(next[e]))
			LLVMSetFastMathFlags(next[e], LLVMFastMathAllowReassoc);
	cg_parallel_loop(&lj); /* z is y's or o's storage, or apart from them and x */
	cg_end_for(k, &lj, next);
	cg_end_for(k, &li, lj.out);
	for (int e = 0; e < 2; e++) {
		LLVMValueRef p = cg_iadd(k, cg_imul(k, c, cg_i64(k, 2)), cg_i64(k, e));
		st_f64(k, part, p, cg_fadd(k, ld_f64(k, part, p), li.out[e]));
	}
	cg_keep_loop(&lc);
	cg_end_for(k, &lc, NULL);
}

/* The statistics of images first .. first+count-1 of v into the thread's
 * partials. */
static void stats_tile(cg_kb *k, const ir_node *n, LLVMValueRef v, LLVMValueRef first, LLVMValueRef count)
{
	int64_t C = n->type.dim[1], hw = n->type.dim[2] * n->type.dim[3];
	LLVMValueRef part = stats_partials(k, n);
	LLVMValueRef nb = cg_fmul(k, LLVMBuildSIToFP(k->b, count, k->m->f64, ""), cg_f64(k, (double)hw));
	cg_loop lc;
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, C));
	LLVMValueRef mb = cg_fdiv(k, tile_sum(k, v, C, hw, c, first, count, NULL), nb);
	LLVMValueRef qb = tile_sum(k, v, C, hw, c, first, count, mb);
	LLVMValueRef at = cg_imul(k, c, cg_i64(k, 3)), p[3];
	for (int e = 0; e < 3; e++)
		p[e] = ld_f64(k, part, cg_iadd(k, at, cg_i64(k, e)));
	chan_add(k, &p[0], &p[1], &p[2], nb, mb, qb);
	for (int e = 0; e < 3; e++)
		st_f64(k, part, cg_iadd(k, at, cg_i64(k, e)), p[e]);
	cg_keep_loop(&lc);
	cg_end_for(k, &lc, NULL);
}

void cg_conv_epilogue_tile(cg_kb *k, const ir_node *n, LLVMValueRef first, LLVMValueRef count)
{
	if (!k->epi)
		return;
	if (k->epi->dgamma)
		mask_dgamma_tile(k, n, first, count);
	else if (k->epi->res || k->epi->mask)
		pair_tile(k, n, first, count);
	if (k->epi->stats)
		stats_tile(k, n, cg_arg(k, k->epi->res ? n->nin + 2 : 0), first, count);
}

/* stats = [mean; biased variance] of the threads' partials, added in thread
 * order.  A kernel of extent 1 (or on one thread) ran on thread 0 alone. */
void cg_conv_stats_finish(cg_kb *k, const ir_node *n, int threads)
{
	int64_t C = n->type.dim[1];
	ir_conv_geom g = ir_conv_geom_of(n);
	int64_t per = per_thread(&g, n), at = stats_at(&g, n);
	int ran = conv_extent(n) <= 1 ? 1 : threads;
	LLVMValueRef st = cg_arg(k, n->nin + (k->epi->res ? 4 : 2)), ws = cg_arg(k, n->nin + 1);
	cg_loop lc;
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, C)), p[3];
	LLVMValueRef i3 = cg_imul(k, c, cg_i64(k, 3));
	for (int t = 0; t < ran; t++) {
		LLVMValueRef part = cg_gep(k, NULL, ws, cg_i64(k, t * per + at)), q[3];
		for (int e = 0; e < 3; e++)
			q[e] = ld_f64(k, part, cg_iadd(k, i3, cg_i64(k, e)));
		if (t == 0)
			memcpy(p, q, sizeof p);
		else
			chan_add(k, &p[0], &p[1], &p[2], q[0], q[1], q[2]);
	}
	cg_st(k, st, c, cg_to_real(k, p[1]));
	cg_st(k, st, cg_iadd(k, c, cg_i64(k, C)), cg_to_real(k, cg_fdiv(k, p[2], p[0])));
	cg_end_for(k, &lc, NULL);
}

/* bn_dgamma's dgamma and dbeta of the threads' partials, added in thread
 * order (as cg_conv_stats_finish). */
void cg_conv_dgamma_finish(cg_kb *k, const ir_node *n, int threads)
{
	int64_t C = n->type.dim[1];
	ir_conv_geom g = ir_conv_geom_of(n);
	int64_t per = per_thread(&g, n), at = stats_at(&g, n);
	int ran = conv_extent(n) <= 1 ? 1 : threads, a = n->nin + 2;
	LLVMValueRef ws = cg_arg(k, n->nin + 1), st = cg_arg(k, a + 4);
	cg_loop lc;
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, C)), sum[2] = {NULL, NULL};
	for (int t = 0; t < ran; t++)
		for (int e = 0; e < 2; e++) {
			LLVMValueRef p = ld_f64(k, cg_gep(k, NULL, ws, cg_i64(k, t * per + at)),
				cg_iadd(k, cg_imul(k, c, cg_i64(k, 2)), cg_i64(k, e)));
			sum[e] = t == 0 ? p : cg_fadd(k, sum[e], p);
		}
	LLVMValueRef var = cg_to_f64(k, cg_ld(k, st, cg_iadd(k, c, cg_i64(k, C))));
	LLVMValueRef inv = cg_fdiv(k, cg_f64(k, 1), cg_math(k, "llvm.sqrt", cg_fadd(k, var, cg_f64(k, k->epi->eps))));
	cg_st(k, cg_arg(k, a + 2), c, cg_to_real(k, cg_fmul(k, sum[0], inv)));
	cg_st(k, cg_arg(k, a + 5), c, cg_to_real(k, sum[1]));
	cg_end_for(k, &lc, NULL);
}

static void emit_conv2d(cg_kb *k, const ir_node *n)
{
	ir_conv_geom g = ir_conv_geom_of(n);
	stats_begin(k, n);
	if (cg_conv_winograd(&g, n->type.dtype)) {
		cg_conv_winograd_emit(k, n, &g, slice(k, n, per_thread(&g, n)));
		return;
	}
	if (cg_conv_implicit(&g)) {
		cg_conv_implicit_emit(k, n, &g, slice(k, n, per_thread(&g, n)));
		return;
	}
	int64_t K = g.c * g.kh * g.kw, howo = g.ho * g.wo, ld = howo * tile(&g);
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1), w = cg_arg(k, 2);
	LLVMValueRef col = slice(k, n, per_thread(&g, n));
	LLVMValueRef ybuf = cg_gep(k, NULL, col, cg_i64(k, col_elems(&g)));
	cg_loop l, li;
	LLVMValueRef t = cg_for(k, &l, k->lo, k->hi), first, count;
	tile_span(k, &g, t, &first, &count);
	unfold(k, &g, x, first, count, col, ld);
	if (on_blas()) {
		LLVMValueRef cols = cg_imul(k, count, cg_i64(k, howo));
		gemm_v(k, NO_TRANS, NO_TRANS, cg_i64(k, g.o), cols, cg_i64(k, K), w, K, col, ld, 0, ybuf, ld);
		shuffle(k, cg_gep(k, NULL, y, cg_imul(k, first, cg_i64(k, g.o * howo))), ybuf, count, g.o, howo, ld, false);
	} else {
		/* Y_i = W · col_i, straight into image i's output. */
		LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), count);
		cg_ab mm = {.m = g.o, .r = K, .p = howo, .a = w, .a_rs = K, .a_cs = 1,
			.b = cg_gep(k, NULL, col, cg_imul(k, i, cg_i64(k, howo))), .ldb = ld,
			.c = cg_gep(k, NULL, y, cg_imul(k, cg_iadd(k, first, i), cg_i64(k, g.o * howo))), .ldc = howo};
		cg_gemm_ab(k, &mm);
		cg_end_for(k, &li, NULL);
	}
	cg_conv_epilogue_tile(k, n, first, count);
	cg_end_for(k, &l, NULL);
}

static void emit_conv2d_dx(cg_kb *k, const ir_node *n)
{
	ir_conv_geom g = ir_conv_geom_of(n);
	stats_begin(k, n);
	if (cg_conv_winograd(&g, n->type.dtype)) {
		cg_conv_winograd_emit(k, n, &g, slice(k, n, per_thread(&g, n)));
		return;
	}
	if (cg_conv_implicit(&g)) {
		cg_conv_implicit_emit(k, n, &g, slice(k, n, per_thread(&g, n)));
		return;
	}
	int64_t K = g.c * g.kh * g.kw, howo = g.ho * g.wo, ld = howo * tile(&g);
	LLVMValueRef dx = cg_arg(k, 0), dy = cg_arg(k, 1), w = cg_arg(k, 2);
	LLVMValueRef col = slice(k, n, per_thread(&g, n));
	LLVMValueRef ybuf = cg_gep(k, NULL, col, cg_i64(k, col_elems(&g)));
	cg_loop l, li;
	LLVMValueRef t = cg_for(k, &l, k->lo, k->hi), first, count;
	tile_span(k, &g, t, &first, &count);
	if (on_blas()) {
		shuffle(k, cg_gep(k, NULL, dy, cg_imul(k, first, cg_i64(k, g.o * howo))), ybuf, count, g.o, howo, ld, true);
		LLVMValueRef cols = cg_imul(k, count, cg_i64(k, howo));
		gemm_v(k, TRANS, NO_TRANS, cg_i64(k, K), cols, cg_i64(k, g.o), w, K, ybuf, ld, 0, col, ld);
	}
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), count);
	LLVMValueRef img = cg_iadd(k, first, i);
	if (!on_blas()) {
		/* col_i = W^T · dY_i, from image i's output gradient. */
		cg_ab mm = {.m = K, .r = g.o, .p = howo, .a = w, .a_rs = 1, .a_cs = K,
			.b = cg_gep(k, NULL, dy, cg_imul(k, img, cg_i64(k, g.o * howo))), .ldb = howo,
			.c = cg_gep(k, NULL, col, cg_imul(k, i, cg_i64(k, howo))), .ldc = ld};
		cg_gemm_ab(k, &mm);
	}
	LLVMValueRef dxi = cg_gep(k, NULL, dx, cg_imul(k, img, cg_i64(k, g.c * g.h * g.w)));
	col2im(k, &g, cg_gep(k, NULL, col, cg_imul(k, i, cg_i64(k, howo))), ld, dxi);
	cg_end_for(k, &li, NULL);
	cg_conv_epilogue_tile(k, n, first, count);
	cg_end_for(k, &l, NULL);
}

static void emit_conv2d_dw(cg_kb *k, const ir_node *n)
{
	ir_conv_geom g = ir_conv_geom_of(n);
	if (cg_conv_winograd(&g, n->type.dtype)) {
		cg_conv_winograd_emit(k, n, &g, slice(k, n, per_thread(&g, n)));
		return;
	}
	if (cg_conv_implicit(&g)) {
		cg_conv_implicit_emit(k, n, &g, slice(k, n, per_thread(&g, n)));
		return;
	}
	int64_t K = g.c * g.kh * g.kw, howo = g.ho * g.wo, ld = howo * tile(&g);
	LLVMValueRef dy = cg_arg(k, 1), x = cg_arg(k, 2);
	LLVMValueRef col = slice(k, n, per_thread(&g, n));
	LLVMValueRef ybuf = cg_gep(k, NULL, col, cg_i64(k, col_elems(&g)));
	LLVMValueRef part = cg_gep(k, NULL, ybuf, cg_i64(k, y_elems(&g)));
	cg_zero(k, part, cg_i64(k, g.o * K));
	cg_loop l;
	LLVMValueRef t = cg_for(k, &l, k->lo, k->hi), first, count;
	tile_span(k, &g, t, &first, &count);
	unfold(k, &g, x, first, count, col, ld);
	if (on_blas()) {
		shuffle(k, cg_gep(k, NULL, dy, cg_imul(k, first, cg_i64(k, g.o * howo))), ybuf, count, g.o, howo, ld, true);
		/* A short last tile: only its own columns take part. */
		LLVMValueRef cols = cg_imul(k, count, cg_i64(k, howo));
		gemm_v(k, NO_TRANS, TRANS, cg_i64(k, g.o), cg_i64(k, K), cols, ybuf, ld, col, ld, 1, part, K);
	} else {
		/* dW += sum over the tile's images of dY_i · col_i^T. */
		cg_abt mm = {.m = g.o, .n = K, .q = howo,
			.a = cg_gep(k, NULL, dy, cg_imul(k, first, cg_i64(k, g.o * howo))), .lda = howo, .a_is = g.o * howo,
			.b = col, .ldb = ld, .b_is = howo, .c = part, .ldc = K};
		cg_gemm_abt(k, &mm, count);
	}
	cg_end_for(k, &l, NULL);
}

/* dW's output planes [k->lo, k->hi): the sum of the threads' partials,
 * in thread order (threads: those that ran, codegen/step.c). */
static void finish_conv2d_dw(cg_kb *k, const ir_node *n, int threads)
{
	ir_conv_geom g = ir_conv_geom_of(n);
	int64_t K = g.c * g.kh * g.kw, per = per_thread(&g, n);
	if (cg_conv_winograd(&g, n->type.dtype)) {
		cg_conv_winograd_finish(k, n, &g, threads, per);
		return;
	}
	int64_t at = cg_conv_implicit(&g) ? cg_conv_implicit_partial(&g) : col_elems(&g) + y_elems(&g);
	LLVMValueRef dw = cg_arg(k, 0), ws = cg_arg(k, n->nin + 1);
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, cg_imul(k, k->lo, cg_i64(k, K)), cg_imul(k, k->hi, cg_i64(k, K)));
	LLVMValueRef sum = cg_ld(k, ws, cg_iadd(k, i, cg_i64(k, at)));
	for (int t = 1; t < threads; t++)
		sum = cg_fadd(k, sum, cg_ld(k, ws, cg_iadd(k, i, cg_i64(k, t * per + at))));
	cg_st(k, dw, i, sum);
	cg_end_for(k, &l, NULL);
}

/* The finish's extent: dW's output planes. */
static int64_t finish_extent_conv2d_dw(const ir_node *n)
{
	return n->type.dim[0];
}

const cg_op_impl cg_impl_conv2d = {conv_extent, conv_workspace, emit_conv2d, false, NULL, NULL};
const cg_op_impl cg_impl_conv2d_dx = {conv_extent, conv_workspace, emit_conv2d_dx, false, NULL, NULL};
const cg_op_impl cg_impl_conv2d_dw = {conv_extent, conv_workspace, emit_conv2d_dw, false, finish_conv2d_dw,
	finish_extent_conv2d_dw};

/* ---- matmul: one GEMM ---------------------------------------------------- */

static int64_t one(const ir_node *n)
{
	(void)n;
	return 1;
}

/* A rank-3 operand [N,T,K] is the matrix [N*T,K] in place (ir_rule_matmul). */
static int64_t matrix_rows(const ir_type *t)
{
	int64_t r = 1;
	for (int i = 0; i < t->rank - 1; i++)
		r *= t->dim[i];
	return r;
}

static void emit_matmul(cg_kb *k, const ir_node *n)
{
	const ir_attr *a = ir_node_attr(n, IR_ATTR_TRANS_A), *b = ir_node_attr(n, IR_ATTR_TRANS_B);
	int64_t ta = a ? a->u.i : 0, tb = b ? b->u.i : 0;
	const ir_type *A = &n->in[0]->type, *B = &n->in[1]->type;
	int64_t lda = A->dim[A->rank - 1], ldb = B->dim[B->rank - 1];
	int64_t m = matrix_rows(&n->type), nn = n->type.dim[n->type.rank - 1], kk = ta ? matrix_rows(A) : lda;
	gemm(k, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, m, nn, kk, cg_arg(k, 1), lda, cg_arg(k, 2),
		ldb, 0, cg_arg(k, 0), nn);
}

const cg_op_impl cg_impl_matmul = {one, NULL, emit_matmul, true, NULL, NULL};

/* ---- bmatmul: one GEMM per batch index, the indices divided among threads
 * (attention's products are small, BLAS would run each on one) ----------- */

static int64_t bmatmul_batch(const ir_node *n)
{
	int64_t batch = 1;
	for (int i = 0; i < n->type.rank - 2; i++)
		batch *= n->type.dim[i];
	return batch;
}

static void emit_bmatmul(cg_kb *k, const ir_node *n)
{
	const ir_type *at = &n->in[0]->type, *bt = &n->in[1]->type, *ct = &n->type;
	const ir_attr *ta_attr = ir_node_attr(n, IR_ATTR_TRANS_A), *tb_attr = ir_node_attr(n, IR_ATTR_TRANS_B);
	bool ta = ta_attr && ta_attr->u.i, tb = tb_attr && tb_attr->u.i;
	int r = ct->rank;
	int64_t m = ct->dim[r - 2], nn = ct->dim[r - 1], kk = at->dim[ta ? r - 2 : r - 1];
	int64_t lda = at->dim[r - 1], ldb = bt->dim[r - 1];
	int64_t sa = at->dim[r - 2] * lda, sb = bt->dim[r - 2] * ldb, sc = m * nn;
	if (sc == 0)
		return;
	LLVMValueRef c = cg_arg(k, 0), a = cg_arg(k, 1), b = cg_arg(k, 2);
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef ci = cg_gep(k, NULL, c, cg_imul(k, i, cg_i64(k, sc)));
	if (kk == 0)
		cg_zero(k, ci, cg_i64(k, sc));
	else
		gemm(k, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, m, nn, kk, cg_gep(k, NULL, a, cg_imul(k, i, cg_i64(k, sa))),
			lda, cg_gep(k, NULL, b, cg_imul(k, i, cg_i64(k, sb))), ldb, 0, ci, nn);
	cg_keep_loop(&l);
	cg_end_for(k, &l, NULL);
}

const cg_op_impl cg_impl_bmatmul = {bmatmul_batch, NULL, emit_bmatmul, false, NULL, NULL};
