/* k_conv_winograd.c: 3x3 stride-1 convolutions by Winograd's minimal
 * filtering, F(2x2, 3x3) and F(4x4, 3x3) (Lavin and Gray, "Fast
 * Algorithms for Convolutional Neural Networks", 2016), f32 only.
 *
 * The output is cut into m x m tiles (m = 2 or 4); tile (ty, tx) reads the
 * a x a patch (a = m + 2) of the padded input at (m·ty, m·tx).  With the
 * constant matrices B^T (a x a), G (a x 3) and A^T (m x a) below,
 *     U[e] = G g G^T        for every filter slice g (once per call)
 *     V[e] = B^T d B        for every patch d of every input plane
 *     M[e] = U[e] · V[e]    a products, one per element e of the a x a
 *                           tile: (out planes x in planes) by (in planes
 *                           x tiles), the register-blocked loops of gemm.c
 *     Y    = A^T M A        for every tile of every output plane
 * so each output needs a²/m² multiplications per input plane instead of 9:
 * 4 for F(2x2) (2.25x fewer), 2.25 for F(4x4) (4x fewer), plus the
 * transforms, which are additions and multiplications by small constants.
 *
 *   conv2d     the input x, padded as the direct kernel pads it
 *   conv2d_dx  the output gradient padded by the window less the padding,
 *              the filter transposed and turned half a turn (as in
 *              k_conv_implicit.c): a stride-1 3x3 convolution too
 * The padded planes are rounded up to whole tiles with zeros; tiles that
 * stick out of the output store only their inside.  The filter is
 * transformed in f64 and rounded once.  One image per parallel index, as
 * for the direct kernels, or a few when the images are small (so
 * the products are wide enough); the filter transform is redone by each thread
 * per call (C·O·a² values: under 1% of the image loop at RevNet widths).
 *
 * Rounding: the transforms' constants (F(4x4)'s 1/24, 5, 8) amplify f32's
 * rounding of the patch; docs/codegen.md gives the errors measured on the
 * presets' layers, tests/unit/test_cg_winograd.c bounds them.  conv2d_dw
 * keeps the direct kernel (see cg_conv_lowering_of). */
#include "internal.h"

/* ---- the transforms ------------------------------------------------------- */

typedef struct {
	int m, a; /* output tile, input tile */
	double bt[6][6], g[6][3], at[4][6];
} transforms;

static const transforms f2 = {
	2, 4,
	{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
	{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
	{{1, 1, 1, 0}, {0, 1, -1, -1}},
};

static const transforms f4 = {
	4, 6,
	{{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0},
		{0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}},
	{{1.0 / 4, 0, 0}, {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
		{1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}},
	{{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}},
};

static const transforms *transforms_for(int m)
{
	return m == 4 ? &f4 : &f2;
}

/* sum_i c[i]·v[i] over the nonzero c[i], with no multiplication by ±1. */
static LLVMValueRef combine(cg_kb *k, const double *c, int stride, const LLVMValueRef *v, int n)
{
	LLVMValueRef s = NULL;
	for (int i = 0; i < n; i++) {
		double ci = c[i * stride];
		if (ci == 0)
			continue;
		double mag = ci < 0 ? -ci : ci;
		LLVMValueRef t = v[i];
		if (mag != 1)
			t = LLVMBuildFMul(k->b, t, LLVMConstReal(LLVMTypeOf(t), mag), "");
		if (!s)
			s = ci < 0 ? LLVMBuildFNeg(k->b, t, "") : t;
		else
			s = ci < 0 ? LLVMBuildFSub(k->b, s, t, "") : LLVMBuildFAdd(k->b, s, t, "");
	}
	return s ? s : LLVMConstReal(LLVMTypeOf(v[0]), 0);
}

/* out = L · in · R^T for in rows x cols (row-major, as values): L is
 * lr x rows (row stride ls), R is lc x cols (row stride rs). */
static void sandwich(cg_kb *k, const double *l, int ls, int lr, const double *r, int rs, int lc,
	const LLVMValueRef *in, int rows, int cols, LLVMValueRef *out)
{
	LLVMValueRef t[36], col[6];
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < lc; j++)
			t[i * lc + j] = combine(k, r + j * rs, 1, in + i * cols, cols);
	for (int i = 0; i < lr; i++)
		for (int j = 0; j < lc; j++) {
			for (int q = 0; q < rows; q++)
				col[q] = t[q * lc + j];
			out[i * lc + j] = combine(k, l + i * ls, 1, col, rows);
		}
}

/* ---- the lowering -------------------------------------------------------- */

bool cg_conv_winograd_fits(const ir_conv_geom *g, ir_dtype dt)
{
	return dt == IR_F32 && g->op != IR_OP_CONV2D_DW && g->kh == 3 && g->kw == 3 && g->s == 1 && g->pt <= 2 &&
	       g->pb <= 2 && g->pl <= 2 && g->pr <= 2;
}

/* Output tile size, or 0 when the direct kernels do g. */
static int tile_m(const ir_conv_geom *g, ir_dtype dt)
{
	cg_conv_lowering l = cg_conv_lowering_of(g, dt, NULL);
	return l == CG_CONV_WINOGRAD4 ? 4 : l == CG_CONV_WINOGRAD2 ? 2 : 0;
}

bool cg_conv_winograd(const ir_conv_geom *g, ir_dtype dt)
{
	return tile_m(g, dt) > 0;
}

/* ---- geometry and workspace ---------------------------------------------- */

typedef struct {
	const transforms *t;
	int64_t cin, cout;      /* planes read and written */
	int64_t h, w;           /* source planes */
	int64_t top, left;      /* their place in the padded planes */
	int64_t ho, wo;         /* output planes */
	int64_t th, tw, tiles;  /* tiles down, across, per plane */
	int64_t imgs, cols;     /* images per parallel index; their tiles */
	int64_t vs, ms;         /* strides of V's and M's a² matrices */
	int64_t hp, wp;         /* padded planes: whole tiles plus the window */
} wino;

/* The transforms write (and read) a² matrices at once, one element of
 * each: a multiple of 4 KiB apart, they would all map to the same L1 sets.
 * So each matrix is padded to an odd number of cache lines. */
static int64_t skew(int64_t elems)
{
	int64_t lines = (elems + 15) / 16;
	return (lines | 1) * 16;
}

/* Images per parallel index: enough that the products have 64 columns
 * (whole vectors: a plane of small images has few tiles), V and M within
 * 256 KiB (half of L2), at most half the batch so both threads work. */
static int64_t images(const ir_conv_geom *g, const wino *w)
{
	int64_t per = (int64_t)w->t->a * w->t->a * (w->cin + w->cout) * w->tiles * 4;
	int64_t t = (64 + w->tiles - 1) / w->tiles;
	if (t > ((int64_t)256 << 10) / per)
		t = ((int64_t)256 << 10) / per;
	if (t > g->n / 2)
		t = g->n / 2;
	return t < 1 ? 1 : t;
}

static wino wino_of(const ir_conv_geom *g, ir_dtype dt)
{
	wino w = {.t = transforms_for(tile_m(g, dt))};
	bool fwd = g->op == IR_OP_CONV2D;
	w.cin = fwd ? g->c : g->o;
	w.cout = fwd ? g->o : g->c;
	w.h = fwd ? g->h : g->ho;
	w.w = fwd ? g->w : g->wo;
	w.top = fwd ? g->pt : g->kh - 1 - g->pt;
	w.left = fwd ? g->pl : g->kw - 1 - g->pl;
	w.ho = fwd ? g->ho : g->h;
	w.wo = fwd ? g->wo : g->w;
	int m = w.t->m;
	w.th = (w.ho + m - 1) / m;
	w.tw = (w.wo + m - 1) / m;
	w.tiles = w.th * w.tw;
	w.hp = w.th * m + 2;
	w.wp = w.tw * m + 2;
	w.imgs = images(g, &w);
	w.cols = w.imgs * w.tiles;
	w.vs = skew(w.cin * w.cols);
	w.ms = skew(w.cout * w.cols);
	return w;
}

/* Per thread: U, then the padded planes, V and M. */
static int64_t u_elems(const wino *w)
{
	return (int64_t)w->t->a * w->t->a * w->cout * w->cin;
}

static int64_t pad_elems(const wino *w)
{
	return w->cin * w->hp * w->wp;
}

static int64_t v_elems(const wino *w)
{
	return (int64_t)w->t->a * w->t->a * w->vs;
}

int64_t cg_conv_winograd_workspace(const ir_conv_geom *g, ir_dtype dt)
{
	wino w = wino_of(g, dt);
	return u_elems(&w) + pad_elems(&w) + v_elems(&w) + (int64_t)w.t->a * w.t->a * w.ms;
}

/* ---- the kernel ----------------------------------------------------------- */

/* U[e][o][i] = (G g G^T)[e] for filter slice g of output plane o and input
 * plane i: g[a][b] = w[o·rs + i·cs + tap(a, b)], turned half a turn for
 * the data gradient. */
static void transform_filter(cg_kb *k, const ir_conv_geom *g, const wino *w, LLVMValueRef wt, LLVMValueRef u)
{
	const transforms *t = w->t;
	bool fwd = g->op == IR_OP_CONV2D;
	int64_t rs = fwd ? g->c * 9 : 9, cs = fwd ? 9 : g->c * 9, plane = w->cout * w->cin;
	cg_loop lo, li;
	LLVMValueRef o = cg_for(k, &lo, cg_i64(k, 0), cg_i64(k, w->cout));
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), cg_i64(k, w->cin));
	LLVMValueRef base = cg_iadd(k, cg_imul(k, o, cg_i64(k, rs)), cg_imul(k, i, cg_i64(k, cs)));
	LLVMValueRef in[9], out[36];
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 3; b++) {
			int tap = fwd ? a * 3 + b : (2 - a) * 3 + (2 - b);
			in[a * 3 + b] = cg_to_f64(k, cg_ld(k, wt, cg_iadd(k, base, cg_i64(k, tap))));
		}
	sandwich(k, &t->g[0][0], 3, t->a, &t->g[0][0], 3, t->a, in, 3, 3, out);
	LLVMValueRef at = cg_iadd(k, cg_imul(k, o, cg_i64(k, w->cin)), i);
	for (int e = 0; e < t->a * t->a; e++)
		cg_st(k, u, cg_iadd(k, at, cg_i64(k, e * plane)), cg_to_real(k, out[e]));
	cg_end_for(k, &li, NULL);
	cg_keep_loop(&lo);
	cg_end_for(k, &lo, NULL);
}

/* V[e][c][tile] = (B^T d B)[e] for every patch d of every padded plane. */
static void transform_input(cg_kb *k, const wino *w, LLVMValueRef p, LLVMValueRef v, LLVMValueRef col0)
{
	const transforms *t = w->t;
	int a = t->a, m = t->m;
	int64_t plane = w->vs;
	cg_loop lc, ly, lx;
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, w->cin));
	LLVMValueRef ty = cg_for(k, &ly, cg_i64(k, 0), cg_i64(k, w->th));
	LLVMValueRef rows = cg_gep(k, NULL, p, cg_iadd(k, cg_imul(k, c, cg_i64(k, w->hp * w->wp)),
		cg_imul(k, ty, cg_i64(k, m * w->wp))));
	LLVMValueRef vrow = cg_gep(k, NULL, v, cg_iadd(k, cg_iadd(k, cg_imul(k, c, cg_i64(k, w->cols)), col0),
		cg_imul(k, ty, cg_i64(k, w->tw))));
	LLVMValueRef tx = cg_for(k, &lx, cg_i64(k, 0), cg_i64(k, w->tw));
	LLVMValueRef col = cg_imul(k, tx, cg_i64(k, m)), in[36] = {0}, out[36];
	for (int i = 0; i < a; i++)
		for (int j = 0; j < a; j++)
			in[i * a + j] = cg_ld(k, rows, cg_iadd(k, col, cg_i64(k, i * w->wp + j)));
	sandwich(k, &t->bt[0][0], 6, a, &t->bt[0][0], 6, a, in, a, a, out);
	for (int e = 0; e < a * a; e++)
		cg_st(k, vrow, cg_iadd(k, tx, cg_i64(k, e * plane)), out[e]);
	cg_end_for(k, &lx, NULL);
	cg_keep_loop(&ly);
	cg_end_for(k, &ly, NULL);
	cg_keep_loop(&lc);
	cg_end_for(k, &lc, NULL);
}

/* The output tiles [tx0, tx1) of tile row ty of plane o: Y = A^T M A, of
 * which the first `rows` x `cols` are stored. */
static void tiles_out(cg_kb *k, const wino *w, LLVMValueRef mm, LLVMValueRef y, LLVMValueRef o, LLVMValueRef ty,
	LLVMValueRef tx0, LLVMValueRef tx1, int rows, int cols)
{
	const transforms *t = w->t;
	int a = t->a, m = t->m;
	int64_t plane = w->ms;
	cg_loop lx;
	LLVMValueRef mrow = cg_gep(k, NULL, mm, cg_iadd(k, cg_imul(k, o, cg_i64(k, w->cols)),
		cg_imul(k, ty, cg_i64(k, w->tw))));
	LLVMValueRef yrow = cg_gep(k, NULL, y, cg_iadd(k, cg_imul(k, o, cg_i64(k, w->ho * w->wo)),
		cg_imul(k, ty, cg_i64(k, m * w->wo))));
	LLVMValueRef tx = cg_for(k, &lx, tx0, tx1);
	LLVMValueRef in[36] = {0}, out[16];
	for (int e = 0; e < a * a; e++)
		in[e] = cg_ld(k, mrow, cg_iadd(k, tx, cg_i64(k, e * plane)));
	sandwich(k, &t->at[0][0], 6, m, &t->at[0][0], 6, m, in, a, a, out);
	LLVMValueRef col = cg_imul(k, tx, cg_i64(k, m));
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < cols; j++)
			cg_st(k, yrow, cg_iadd(k, col, cg_i64(k, i * w->wo + j)), out[i * m + j]);
	cg_end_for(k, &lx, NULL);
}

/* Y from M (this image's columns): whole tiles, then the right and bottom
 * edges' partial ones. */
static void transform_output(cg_kb *k, const wino *w, LLVMValueRef mm, LLVMValueRef y)
{
	int m = w->t->m;
	int64_t full_y = w->ho / m, full_x = w->wo / m;
	int rest_y = (int)(w->ho - full_y * m), rest_x = (int)(w->wo - full_x * m);
	cg_loop lo, ly;
	LLVMValueRef o = cg_for(k, &lo, cg_i64(k, 0), cg_i64(k, w->cout));
	for (int part = 0; part < 2; part++) {
		int rows = part ? rest_y : m;
		if (rows == 0 || (!part && full_y == 0))
			continue;
		LLVMValueRef ty = part ? cg_i64(k, full_y) : cg_for(k, &ly, cg_i64(k, 0), cg_i64(k, full_y));
		if (full_x > 0)
			tiles_out(k, w, mm, y, o, ty, cg_i64(k, 0), cg_i64(k, full_x), rows, m);
		if (rest_x > 0)
			tiles_out(k, w, mm, y, o, ty, cg_i64(k, full_x), cg_i64(k, full_x + 1), rows, rest_x);
		if (!part) {
			cg_keep_loop(&ly);
			cg_end_for(k, &ly, NULL);
		}
	}
	cg_keep_loop(&lo);
	cg_end_for(k, &lo, NULL);
}

/* M[e] = U[e] · V[e] for the first `imgs` images' columns, one product
 * per tile element. */
static void products(cg_kb *k, const wino *w, LLVMValueRef u, LLVMValueRef v, LLVMValueRef mm, int64_t imgs)
{
	int a = w->t->a;
	cg_loop le;
	LLVMValueRef e = cg_for(k, &le, cg_i64(k, 0), cg_i64(k, a * a));
	cg_ab prod = {.m = w->cout, .r = w->cin, .p = imgs * w->tiles,
		.a = cg_gep(k, NULL, u, cg_imul(k, e, cg_i64(k, w->cout * w->cin))), .a_rs = w->cin, .a_cs = 1,
		.b = cg_gep(k, NULL, v, cg_imul(k, e, cg_i64(k, w->vs))), .ldb = w->cols,
		.c = cg_gep(k, NULL, mm, cg_imul(k, e, cg_i64(k, w->ms))), .ldc = w->cols};
	cg_gemm_ab(k, &prod);
	cg_keep_loop(&le);
	cg_end_for(k, &le, NULL);
}

int64_t cg_conv_winograd_extent(const ir_conv_geom *g, ir_dtype dt)
{
	wino w = wino_of(g, dt);
	return (g->n + w.imgs - 1) / w.imgs;
}

void cg_conv_winograd_emit(cg_kb *k, const ir_node *n, const ir_conv_geom *g, LLVMValueRef ws)
{
	wino w = wino_of(g, n->type.dtype);
	LLVMValueRef out = cg_arg(k, 0), in = cg_arg(k, 1), wt = cg_arg(k, 2);
	LLVMValueRef u = ws, p = cg_gep(k, NULL, u, cg_i64(k, u_elems(&w)));
	LLVMValueRef v = cg_gep(k, NULL, p, cg_i64(k, pad_elems(&w)));
	LLVMValueRef mm = cg_gep(k, NULL, v, cg_i64(k, v_elems(&w)));
	transform_filter(k, g, &w, wt, u);
	cg_loop lt, li, lo;
	LLVMValueRef t = cg_for(k, &lt, k->lo, k->hi);
	LLVMValueRef first = cg_imul(k, t, cg_i64(k, w.imgs));
	LLVMValueRef count = cg_imin(k, cg_isub(k, cg_i64(k, g->n), first), cg_i64(k, w.imgs));
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), count);
	cg_conv_pad_planes(k, w.cin, w.h, w.w, w.top, w.left, w.hp, w.wp,
		cg_gep(k, NULL, in, cg_imul(k, cg_iadd(k, first, i), cg_i64(k, w.cin * w.h * w.w))), p);
	transform_input(k, &w, p, v, cg_imul(k, i, cg_i64(k, w.tiles)));
	cg_keep_loop(&li);
	cg_end_for(k, &li, NULL);
	/* The last index may have fewer images (a constant number). */
	int64_t rest = g->n % w.imgs;
	if (rest == 0) {
		products(k, &w, u, v, mm, w.imgs);
	} else {
		cg_if full, part;
		LLVMValueRef whole = LLVMBuildICmp(k->b, LLVMIntEQ, count, cg_i64(k, w.imgs), "");
		cg_if_begin(k, &full, whole);
		products(k, &w, u, v, mm, w.imgs);
		cg_if_end(k, &full);
		cg_if_begin(k, &part, LLVMBuildNot(k->b, whole, ""));
		products(k, &w, u, v, mm, rest);
		cg_if_end(k, &part);
	}
	i = cg_for(k, &lo, cg_i64(k, 0), count);
	transform_output(k, &w, cg_gep(k, NULL, mm, cg_imul(k, i, cg_i64(k, w.tiles))),
		cg_gep(k, NULL, out, cg_imul(k, cg_iadd(k, first, i), cg_i64(k, w.cout * w.ho * w.wo))));
	cg_keep_loop(&lo);
	cg_end_for(k, &lo, NULL);
	cg_keep_loop(&lt);
	cg_end_for(k, &lt, NULL);
}
