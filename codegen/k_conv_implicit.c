/* k_conv_implicit.c: stride-1 and stride-2 convolutions without unfolded
 * columns.
 *
 * At stride 1, the unfolded row of window offset (kh, kw) is the image
 * itself, shifted.  So each image is copied once into a zero-bordered
 * buffer (C planes of Hp x Wp), and the products of gemm.c read their B
 * rows straight out of it: row (c, kh, kw), column q at
 *     xp[c·Hp·Wp + kh·Wp + kw + q],     q = oh·Wp + ow,
 * the window offsets being the product's taps.  Columns are counted in
 * padded rows, Wp wide of which Wo are outputs; the Wp - Wo others are
 * computed and dropped when the result is copied out (at stride 1 they are
 * (KW - 1) per row, so a few percent of the work).  This replaces writing
 * and reading the KH·KW times larger unfolded columns.
 *   conv2d     Y = W · X, X the padded input
 *   conv2d_dx  dX = W' · dY, dY padded by KH-1-pt etc. and W' the filter
 *              transposed and turned half a turn: a stride-1 convolution
 *              too, so no col2im and no zeroing of dX
 *   conv2d_dw  dW += dY · X^T over a tile of images, dY laid out in padded
 *              rows with zeros in the dropped columns
 * Every padding must be less than the window (as SAME padding is), so the
 * transposed one is not negative.  At stride 2 (windows of 2x2 and more)
 * the input is split into its four phases instead of padded (padding,
 * below), which makes each tap a stride-1 offset again, so conv2d and
 * conv2d_dw run the same products; the data gradient at stride 2 is
 * computed by the phases of dX instead (k_conv_dx_phases.c).  The other
 * convolutions are unfolded (k_conv.c). */
#include "internal.h"

bool cg_conv_implicit(const ir_conv_geom *g)
{
	if (cg_conv_on_blas() || g->kh * g->kw > CG_MAX_TAPS)
		return false;
	if (g->s == 2) /* phase-split; every phase holds a tap */
		return g->op == IR_OP_CONV2D_DX ? cg_conv_dx_phases_fits(g) : g->kh >= 2 && g->kw >= 2;
	return g->s == 1 && g->pt < g->kh && g->pb < g->kh && g->pl < g->kw && g->pr < g->kw;
}

/* One image's planes padded (or laid out in padded rows), and at stride
 * s = 2 split into s² phases: phase (p, q) of a source plane is the hp x wp
 * plane of its elements [s·i + p - top][s·j + q - left] (zero outside the
 * source), so tap (kh, kw) of a stride-s window at output (oh, ow) is
 * element [oh + kh/s][ow + kw/s] of phase (kh%s, kw%s): a stride-1 window
 * again. */
typedef struct {
	int64_t planes, h, w;      /* source planes */
	int64_t top, left, hp, wp; /* placement in the padded planes */
	int s;                     /* phases per axis */
} padding;

static bool pads(const padding *p)
{
	return p->s > 1 || p->top || p->left || p->hp != p->h || p->wp != p->w;
}

/* One source plane's phases. */
static int64_t plane_elems(const padding *p)
{
	return p->s * p->s * p->hp * p->wp;
}

static int64_t padded_elems(const padding *p)
{
	return pads(p) ? p->planes * plane_elems(p) : 0;
}

/* The input of the forward product, the output gradient of dX's (padded
 * by the window less the padding), and dY in padded rows for dW's. */
/* Phase planes of (Ho + (KH-1)/s) x (Wo + (KW-1)/s): at stride 1 the
 * padded image. */
static padding x_padding(const ir_conv_geom *g)
{
	int s = (int)g->s;
	return (padding){g->c, g->h, g->w, g->pt, g->pl, g->ho + (g->kh - 1) / s, g->wo + (g->kw - 1) / s, s};
}

static padding dy_padding(const ir_conv_geom *g)
{
	int64_t t = g->kh - 1 - g->pt, b = g->kh - 1 - g->pb, l = g->kw - 1 - g->pl, r = g->kw - 1 - g->pr;
	return (padding){g->o, g->ho, g->wo, t, l, g->ho + t + b, g->wo + l + r, 1};
}

static padding dy_rows(const ir_conv_geom *g)
{
	return (padding){g->o, g->ho, g->wo, 0, 0, g->ho, x_padding(g).wp, 1};
}

/* The rows i of a phase whose source row s·i + first lies in [0, h):
 * [*i0, *i1) of [0, hp). */
static void source_rows(const padding *p, int64_t first, int64_t *i0, int64_t *i1)
{
	*i0 = first >= 0 ? 0 : (-first + p->s - 1) / p->s;
	*i1 = p->h - 1 - first < 0 ? 0 : (p->h - 1 - first) / p->s + 1;
	*i0 = *i0 < p->hp ? *i0 : p->hp;
	*i1 = *i1 < *i0 ? *i0 : *i1 > p->hp ? p->hp : *i1;
}

/* Copies src's planes into dst with zero borders (split into phases);
 * with `pro`, the kernel's prologue applied to the copied elements (plane
 * c being channel c). */
static void pad_planes(cg_kb *k, const padding *p, LLVMValueRef src, LLVMValueRef dst, bool pro)
{
	cg_loop lc, lr;
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, p->planes));
	LLVMValueRef in = cg_gep(k, NULL, src, cg_imul(k, c, cg_i64(k, p->h * p->w)));
	LLVMValueRef plane = cg_gep(k, NULL, dst, cg_imul(k, c, cg_i64(k, plane_elems(p))));
	LLVMValueRef sc = NULL, shift = NULL;
	if (pro)
		cg_conv_prologue_coeffs(k, c, &sc, &shift);
	for (int ph = 0; ph < p->s * p->s; ph++) {
		int64_t first = ph / p->s - p->top, i0, i1;
		LLVMValueRef out = cg_gep(k, NULL, plane, cg_i64(k, ph * p->hp * p->wp));
		source_rows(p, first, &i0, &i1);
		if (i0 > 0)
			cg_zero(k, out, cg_i64(k, i0 * p->wp));
		if (i1 < p->hp)
			cg_zero(k, cg_gep(k, NULL, out, cg_i64(k, i1 * p->wp)), cg_i64(k, (p->hp - i1) * p->wp));
		if (i1 <= i0)
			continue;
		LLVMValueRef i = cg_for(k, &lr, cg_i64(k, i0), cg_i64(k, i1));
		LLVMValueRef from = cg_imul(k, cg_iadd(k, cg_imul(k, i, cg_i64(k, p->s)), cg_i64(k, first)), cg_i64(k, p->w));
		cg_gather_row(k, cg_gep(k, NULL, out, cg_imul(k, i, cg_i64(k, p->wp))), cg_gep(k, NULL, in, from), p->wp,
			p->s, ph % p->s - p->left, p->w, sc, shift);
		cg_keep_loop(&lr);
		cg_end_for(k, &lr, NULL);
	}
	cg_keep_loop(&lc);
	cg_end_for(k, &lc, NULL);
}

void cg_conv_pad_planes(cg_kb *k, int64_t planes, int64_t h, int64_t w, int64_t top, int64_t left, int64_t hp,
	int64_t wp, LLVMValueRef src, LLVMValueRef dst, bool pro)
{
	padding p = {planes, h, w, top, left, hp, wp, 1};
	pad_planes(k, &p, src, dst, pro);
}

/* dst (planes of h x w) = the first w columns of each row of src (rows of
 * wp). */
static void drop_columns(cg_kb *k, int64_t planes, int64_t h, int64_t w, int64_t wp, LLVMValueRef src,
	LLVMValueRef dst)
{
	cg_loop lr;
	LLVMValueRef r = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, planes * h));
	LLVMValueRef in = cg_gep(k, NULL, src, cg_imul(k, r, cg_i64(k, wp)));
	cg_gather_row(k, cg_gep(k, NULL, dst, cg_imul(k, r, cg_i64(k, w))), in, w, 1, 0, w, NULL, NULL);
	cg_keep_loop(&lr);
	cg_end_for(k, &lr, NULL);
}

/* Window offsets: in p's (phase) planes, and in the filter (turned half a
 * turn when flip). */
static int taps(const ir_conv_geom *g, const padding *p, bool flip, int64_t *a_tap, int64_t *b_tap)
{
	int t = 0, s = p->s;
	for (int64_t i = 0; i < g->kh; i++)
		for (int64_t j = 0; j < g->kw; j++, t++) {
			b_tap[t] = ((i % s) * s + j % s) * p->hp * p->wp + i / s * p->wp + j / s;
			a_tap[t] = flip ? (g->kh - 1 - i) * g->kw + (g->kw - 1 - j) : i * g->kw + j;
		}
	return t;
}

/* ---- tiles and workspace -------------------------------------------------- */

static int64_t dw_image_elems(const ir_conv_geom *g)
{
	padding x = x_padding(g), dy = dy_rows(g);
	return padded_elems(&x) + padded_elems(&dy);
}

/* conv2d_dw's images per product: 1024 columns or more, the padded copies
 * within 512 KiB (L2), at most half the batch; then the nearest count, up
 * to copies of 1 MiB, that gives the threads the same images (split.c):
 * fashion's 50 images of 28x28 go 5 to a product, not 2 (25 indices, 24
 * images against 26), and of its stride-2 7x7 25, not 19 (19 against 31).
 * One image for the others. */
int64_t cg_conv_implicit_tile(const ir_conv_geom *g)
{
	if (g->op != IR_OP_CONV2D_DW)
		return 1;
	int64_t cols = g->ho * x_padding(g).wp, t = (1024 + cols - 1) / cols;
	int64_t per = dw_image_elems(g) * 4, most = (g->n + 1) / 2;
	if (per > 0 && t > ((int64_t)512 << 10) / per)
		t = ((int64_t)512 << 10) / per;
	if (t > (g->n + 1) / 2)
		t = (g->n + 1) / 2;
	t = t < 1 ? 1 : t;
	if (per > 0 && most > ((int64_t)1 << 20) / per)
		most = ((int64_t)1 << 20) / per;
	return cg_split_images(g->n, t, t, most);
}

int64_t cg_conv_implicit_partial(const ir_conv_geom *g)
{
	return cg_conv_implicit_tile(g) * dw_image_elems(g);
}

static int64_t out_rows_elems(int64_t planes, int64_t h, int64_t w, int64_t wp)
{
	return wp != w ? planes * h * wp : 0;
}

/* The forward product's copy of x: padded, or with a prologue (which
 * needs a copy to apply itself to) whole. */
static int64_t x_copy_elems(const padding *x, bool pro)
{
	return pro && !pads(x) ? x->planes * plane_elems(x) : padded_elems(x);
}

int64_t cg_conv_implicit_workspace(const ir_conv_geom *g, bool pro)
{
	padding x = x_padding(g), dy = dy_padding(g);
	switch (g->op) {
	case IR_OP_CONV2D:
		return x_copy_elems(&x, pro) + out_rows_elems(g->o, g->ho, g->wo, x.wp);
	case IR_OP_CONV2D_DX:
		if (g->s == 2)
			return cg_conv_dx_phases_workspace(g);
		return padded_elems(&dy) + out_rows_elems(g->c, g->h, g->w, dy.wp);
	default:
		return cg_conv_implicit_partial(g) + g->o * g->c * g->kh * g->kw;
	}
}


/* ---- the three products ------------------------------------------------------ */

/* out = W · in for one image: `in` is p's source, out has `oplanes` planes
 * of ho x wo; ws the thread's workspace (padded copy, then output rows). */
static void product(cg_kb *k, const ir_conv_geom *g, const padding *p, bool flip, int64_t oplanes, int64_t ho,
	int64_t wo, LLVMValueRef w, LLVMValueRef in, LLVMValueRef out, LLVMValueRef ws)
{
	LLVMValueRef b = in;
	bool pro = k->pro != NULL; /* only conv2d's kernels have one */
	if (pads(p) || pro) {
		pad_planes(k, p, in, ws, pro);
		b = ws;
	}
	LLVMValueRef rows = cg_gep(k, NULL, ws, cg_i64(k, x_copy_elems(p, pro)));
	bool direct = p->wp == wo;
	int64_t a_tap[CG_MAX_TAPS], b_tap[CG_MAX_TAPS], K = g->kh * g->kw;
	int nt = taps(g, p, flip, a_tap, b_tap);
	cg_ab mm = {
		.m = oplanes, .r = p->planes, .p = ho * p->wp - (g->kw - 1) / p->s,
		.a = w, .a_rs = flip ? K : g->c * K, .a_cs = flip ? g->c * K : K,
		.b = b, .ldb = plane_elems(p),
		.c = direct ? out : rows, .ldc = ho * p->wp,
		.taps = nt, .a_tap = a_tap, .b_tap = b_tap,
	};
	cg_gemm_ab(k, &mm);
	if (!direct)
		drop_columns(k, oplanes, ho, wo, p->wp, rows, out);
}

void cg_conv_implicit_emit(cg_kb *k, const ir_node *n, const ir_conv_geom *g, LLVMValueRef ws)
{
	LLVMValueRef out = cg_arg(k, 0), a = cg_arg(k, 1), b = cg_arg(k, 2);
	cg_loop l;
	if (g->op == IR_OP_CONV2D) { /* out = y, a = x, b = w; one image per index */
		padding p = x_padding(g);
		LLVMValueRef img = cg_for(k, &l, k->lo, k->hi);
		product(k, g, &p, false, g->o, g->ho, g->wo, b,
			cg_gep(k, NULL, a, cg_imul(k, img, cg_i64(k, g->c * g->h * g->w))),
			cg_gep(k, NULL, out, cg_imul(k, img, cg_i64(k, g->o * g->ho * g->wo))), ws);
		cg_conv_epilogue_tile(k, n, img, cg_i64(k, 1));
		cg_end_for(k, &l, NULL);
		return;
	}
	if (g->op == IR_OP_CONV2D_DX && g->s == 2) {
		cg_conv_dx_phases_emit(k, n, g, ws);
		return;
	}
	if (g->op == IR_OP_CONV2D_DX) { /* out = dx, a = dy, b = w */
		padding p = dy_padding(g);
		LLVMValueRef img = cg_for(k, &l, k->lo, k->hi);
		product(k, g, &p, true, g->c, g->h, g->w, b,
			cg_gep(k, NULL, a, cg_imul(k, img, cg_i64(k, g->o * g->ho * g->wo))),
			cg_gep(k, NULL, out, cg_imul(k, img, cg_i64(k, g->c * g->h * g->w))), ws);
		cg_conv_epilogue_tile(k, n, img, cg_i64(k, 1));
		cg_end_for(k, &l, NULL);
		return;
	}
	/* conv2d_dw: a = dy, b = x; a tile of images per index, into the
	 * thread's partial sum after the tile's padded copies. */
	padding px = x_padding(g), pd = dy_rows(g);
	int64_t T = cg_conv_implicit_tile(g), per = dw_image_elems(g);
	LLVMValueRef part = cg_gep(k, NULL, ws, cg_i64(k, cg_conv_implicit_partial(g)));
	cg_zero(k, part, cg_i64(k, g->o * g->c * g->kh * g->kw));
	LLVMValueRef t = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef first = cg_imul(k, t, cg_i64(k, T));
	LLVMValueRef count = cg_imin(k, cg_isub(k, cg_i64(k, g->n), first), cg_i64(k, T));
	LLVMValueRef xs = cg_gep(k, NULL, b, cg_imul(k, first, cg_i64(k, g->c * g->h * g->w)));
	LLVMValueRef dys = cg_gep(k, NULL, a, cg_imul(k, first, cg_i64(k, g->o * g->ho * g->wo)));
	int64_t x_is = g->c * g->h * g->w, dy_is = g->o * g->ho * g->wo;
	if (pads(&px) || pads(&pd)) {
		cg_loop li;
		LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), count);
		LLVMValueRef mine = cg_gep(k, NULL, ws, cg_imul(k, i, cg_i64(k, per)));
		if (pads(&px))
			pad_planes(k, &px, cg_gep(k, NULL, xs, cg_imul(k, i, cg_i64(k, x_is))), mine, false);
		if (pads(&pd))
			pad_planes(k, &pd, cg_gep(k, NULL, dys, cg_imul(k, i, cg_i64(k, dy_is))),
				cg_gep(k, NULL, mine, cg_i64(k, padded_elems(&px))), false);
		cg_keep_loop(&li);
		cg_end_for(k, &li, NULL);
	}
	if (pads(&px)) {
		xs = ws;
		x_is = per;
	}
	if (pads(&pd)) {
		dys = cg_gep(k, NULL, ws, cg_i64(k, padded_elems(&px)));
		dy_is = per;
	}
	int64_t a_tap[CG_MAX_TAPS], b_tap[CG_MAX_TAPS];
	int nt = taps(g, &px, false, a_tap, b_tap);
	cg_abt mm = {
		.m = g->o, .n = g->c, .q = g->ho * px.wp - (g->kw - 1) / px.s,
		.a = dys, .lda = g->ho * px.wp, .a_is = dy_is,
		.b = xs, .ldb = plane_elems(&px), .b_is = x_is,
		.c = part, .ldc = g->c * g->kh * g->kw,
		.taps = nt, .b_tap = b_tap,
	};
	cg_gemm_abt(k, &mm, count);
	cg_end_for(k, &l, NULL);
}
