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
 *   conv2d_dw  the transpose of conv2d's algorithm (emit_dw): the tiles of
 *              x and of dY transformed, products reducing over the tiles
 *              into per-thread partial sums, and G^T P G in the finish
 * The padded planes are rounded up to whole tiles with zeros; tiles that
 * stick out of the output store only their inside.  The filter (and the
 * filter gradient) is transformed in f64 and rounded once.  One image per parallel index, as
 * for the direct kernels, or a few when the images are small (so
 * the products are wide enough); the filter transform is redone by each thread
 * per call (C·O·a² values: under 1% of the image loop at RevNet widths).
 *
 * conv2d and conv2d_dx run the three stages per chunk of tiles (chunk()):
 * some tile rows of one image, or a few whole images, with V and M within
 * 256 KiB; V for the chunk, its a² products, Y, then the next chunk.  Each
 * column's sums run over the input planes in order whatever the chunks, so
 * the results are those of the unchunked stages, bit for bit.  conv2d_dw
 * runs its stages over the whole index (emit_dw).
 *
 * Rounding: the transforms' constants (F(4x4)'s 1/24, 5, 8) amplify f32's
 * rounding of the patch; docs/codegen.md gives the errors measured on the
 * presets' layers, tests/unit/test_cg_winograd.c bounds them. */
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

/* The constant x of type ty, a real or a vector of them. */
static LLVMValueRef konst(LLVMTypeRef ty, double x)
{
	if (LLVMGetTypeKind(ty) != LLVMVectorTypeKind)
		return LLVMConstReal(ty, x);
	LLVMValueRef lanes[64];
	unsigned n = LLVMGetVectorSize(ty);
	for (unsigned i = 0; i < n; i++)
		lanes[i] = LLVMConstReal(LLVMGetElementType(ty), x);
	return LLVMConstVector(lanes, n);
}

/* sum_i c[i]·v[i] over the nonzero c[i], with no multiplication by ±1
 * (on reals or on vectors of them). */
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
			t = LLVMBuildFMul(k->b, t, konst(LLVMTypeOf(t), mag), "");
		if (!s)
			s = ci < 0 ? LLVMBuildFNeg(k->b, t, "") : t;
		else
			s = ci < 0 ? LLVMBuildFSub(k->b, s, t, "") : LLVMBuildFAdd(k->b, s, t, "");
	}
	return s ? s : konst(LLVMTypeOf(v[0]), 0);
}

/* A constant matrix: element (i, j) at c[i·rs + j·cs], so a table read
 * transposed is the same table with the strides swapped. */
typedef struct {
	const double *c;
	int rows, rs, cs;
} cmat;

static cmat plain(const double *c, int rows, int rs)
{
	return (cmat){c, rows, rs, 1};
}

static cmat transposed(const double *c, int cols, int rs)
{
	return (cmat){c, cols, 1, rs};
}

/* out = L · in · R^T for in rows x cols (row-major, as values): L has
 * `rows` columns, R `cols`. */
static void sandwich(cg_kb *k, cmat l, cmat r, const LLVMValueRef *in, int rows, int cols, LLVMValueRef *out)
{
	LLVMValueRef t[36], col[6];
	int lc = r.rows;
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < lc; j++)
			t[i * lc + j] = combine(k, r.c + j * r.rs, r.cs, in + i * cols, cols);
	for (int i = 0; i < l.rows; i++)
		for (int j = 0; j < lc; j++) {
			for (int q = 0; q < rows; q++)
				col[q] = t[q * lc + j];
			out[i * lc + j] = combine(k, l.c + i * l.rs, l.cs, col, rows);
		}
}

/* ---- the lowering -------------------------------------------------------- */

bool cg_conv_winograd_fits(const ir_conv_geom *g, ir_dtype dt)
{
	return dt == IR_F32 && g->kh == 3 && g->kw == 3 && g->s == 1 && g->pt <= 2 &&
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

/* The transforms work on whole vectors of a tile row's tiles, their
 * patches' elements picked from wide loads of the padded plane (patches()),
 * their results stored as whole vectors: a tile row narrower than a vector
 * (a 7x7 plane has 4 tiles a row, a vector 8 or 16) costs one vector, not
 * a scalar loop, and V and M keep one column per tile. */
typedef struct {
	const transforms *t;
	int64_t cin, cout;      /* planes read and written */
	int64_t h, w;           /* source planes */
	int64_t top, left;      /* their place in the padded planes */
	int64_t ho, wo;         /* output planes */
	int64_t th, tw, tiles;  /* tiles down, across, per plane */
	int64_t imgs, cols;     /* images per parallel index; their tiles */
	int64_t vs, ms;         /* strides of V's and M's a² matrices */
	int64_t hp, wq;         /* a padded plane: whole tiles plus the window */
	bool fused;             /* conv2d, conv2d_dx: the stages done per chunk */
	int64_t rows, group;    /* fused: a chunk's tile rows of each image, and images */
	int64_t cc, ldv;        /* fused: M's columns per plane, and V's (with slack) */
} wino;

/* Vectors are at most 16 floats (AVX-512): the slack that whole-vector
 * loads and stores may run past a plane into, so that the workspace does
 * not depend on the CPU. */
#define WIDEST 16

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
 * 256 KiB (half of L2), at most half the batch so both threads work; then
 * the nearest count, up to V and M in 512 KiB, that gives the threads the
 * same images (split.c): 50 images of 7x7 go 5 to an index, not 4
 * (13 indices, 24 images against 26).  At 14x14 (16 planes) 5 an index
 * ran 3% faster than 2 on one thread of a Zen 4 (1 MiB L2). */
static int64_t images(const ir_conv_geom *g, const wino *w)
{
	int64_t per = (int64_t)w->t->a * w->t->a * (w->cin + w->cout) * w->tiles * 4;
	int64_t t = (64 + w->tiles - 1) / w->tiles;
	if (t > ((int64_t)256 << 10) / per)
		t = ((int64_t)256 << 10) / per;
	if (t > g->n / 2)
		t = g->n / 2;
	t = t < 1 ? 1 : t;
	int64_t most = ((int64_t)512 << 10) / per;
	return cg_split_images(g->n, t, t, most < g->n / 2 ? most : g->n / 2);
}

/* conv2d_dw's images per parallel index.  Its products reduce over the
 * columns, each block of results ending in horizontal sums: so 256
 * columns or more, with one matrix element's Z and V (the operands of one
 * product) within 256 KiB; then the count from 3/4 of that to all of it
 * whose slowest chunk has the fewest images (split.c).  Not more: at 7x7
 * 50 images stay 13 to an index (13, 13, 13 and 11: 26 against 24), as 25
 * to an index, which splits them evenly, grew V and Z and fashion's
 * planned arena by 0.31 MiB (16.51 to 16.82) for 0.3% of the step. */
static int64_t dw_images(const ir_conv_geom *g, const wino *w)
{
	int64_t per = (w->cin + w->cout) * w->tiles * 4;
	int64_t t = (256 + w->tiles - 1) / w->tiles;
	if (t > ((int64_t)256 << 10) / per)
		t = ((int64_t)256 << 10) / per;
	if (t < 1)
		t = 1;
	int64_t half = (g->n + 1) / 2;
	return cg_split_images(g->n, t, (3 * t + 3) / 4, t < half ? t : half);
}

/* conv2d's and conv2d_dx's chunks (see chunk()): V and M of a chunk (a²
 * matrices each of cin and cout planes of its tiles) within CHUNK bytes,
 * half of L2, as the whole index's were before the stages were fused.
 * Smaller chunks, within L1, measured slower: the products, at the FMA
 * peak, lose more to narrow column blocks than the loads gain (a 28x28
 * plane at 8 channels: 32 KiB chunks took 1.27 times the time, 64 KiB 1.07).
 * A chunk holds some tile rows of one image, as many as fit (the plane's
 * rows split evenly), or whole images when one fits.  In bytes, not
 * vectors, so that the workspace does not depend on the CPU. */
#define CHUNK ((int64_t)256 << 10)

static int64_t chunk_rows(const wino *w)
{
	int64_t row = (int64_t)w->t->a * w->t->a * (w->cin + w->cout) * w->tw * 4;
	int64_t r = CHUNK / row;
	r = r < 1 ? 1 : r > w->th ? w->th : r;
	int64_t n = (w->th + r - 1) / r;
	return (w->th + n - 1) / n;
}

static int64_t chunk_images(const wino *w)
{
	int64_t j = CHUNK / ((int64_t)w->t->a * w->t->a * (w->cin + w->cout) * w->tiles * 4);
	return j < 1 ? 1 : j > w->imgs ? w->imgs : j;
}

static wino wino_of(const ir_conv_geom *g, ir_dtype dt)
{
	wino w = {.t = transforms_for(tile_m(g, dt))};
	bool fwd = g->op != IR_OP_CONV2D_DX; /* conv2d_dw: the forward tiles */
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
	w.wq = w.tw * m + 2;
	w.imgs = g->op == IR_OP_CONV2D_DW ? dw_images(g, &w) : images(g, &w);
	w.cols = w.imgs * w.tiles;
	w.fused = g->op != IR_OP_CONV2D_DW;
	if (w.fused) {
		w.rows = chunk_rows(&w);
		w.group = w.rows < w.th ? 1 : chunk_images(&w);
		w.cc = w.group * w.rows * w.tw;
		w.ldv = w.cc + WIDEST;
		w.vs = skew(w.cin * w.ldv);
		w.ms = skew(w.cout * w.cc + WIDEST);
		return w;
	}
	w.vs = skew(w.cin * w.cols + WIDEST);
	w.ms = skew(w.cout * w.cols + WIDEST);
	return w;
}

/* Per thread: for conv2d_dw the thread's sum S of the indices' P in f64
 * (acc_elems reals, 0 otherwise); U (conv2d_dw: one index's P); the
 * padded planes of one image (conv2d_dw: one plane, of x or of dY in whole
 * tiles); V, and M (conv2d_dw: Z), a chunk's (conv2d_dw: an index's). */
static int64_t u_elems(const wino *w)
{
	return (int64_t)w->t->a * w->t->a * w->cout * w->cin;
}

static int64_t acc_elems(const ir_conv_geom *g, const wino *w)
{
	return g->op == IR_OP_CONV2D_DW ? 2 * u_elems(w) : 0;
}

static int64_t pad_elems(const wino *w)
{
	return (w->fused ? w->cin : 1) * w->hp * w->wq + 2 * (int64_t)w->t->m * WIDEST;
}

static int64_t v_elems(const wino *w)
{
	return (int64_t)w->t->a * w->t->a * w->vs;
}

int64_t cg_conv_winograd_workspace(const ir_conv_geom *g, ir_dtype dt)
{
	wino w = wino_of(g, dt);
	int64_t e = acc_elems(g, &w) + u_elems(&w) + pad_elems(&w) + v_elems(&w) + (int64_t)w.t->a * w.t->a * w.ms;
	return g->op == IR_OP_CONV2D_DW ? (e + 15) / 16 * 16 : e; /* the threads' S 64-byte aligned */
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
	sandwich(k, plain(&t->g[0][0], t->a, 3), plain(&t->g[0][0], t->a, 3), in, 3, 3, out);
	LLVMValueRef at = cg_iadd(k, cg_imul(k, o, cg_i64(k, w->cin)), i);
	for (int e = 0; e < t->a * t->a; e++)
		cg_st(k, u, cg_iadd(k, at, cg_i64(k, e * plane)), cg_to_real(k, out[e]));
	cg_end_for(k, &li, NULL);
	cg_keep_loop(&lo);
	cg_end_for(k, &lo, NULL);
}

/* ---- whole vectors: lanes picked and interleaved -------------------------- */

static int lanes_of(const cg_kb *k)
{
	return k->m->vec_bytes / 4;
}

/* The vw lanes lane l = src[idx[l] / vw][idx[l] % vw] of the vectors src
 * (vw lanes each, the native width), by two-input shuffles only: each pair
 * of vectors gives the lanes it holds, and the pairs' results are blended,
 * so no vector is wider than the target's. */
static LLVMValueRef pick(cg_kb *k, const LLVMValueRef *src, int nsrc, const int *idx, int vw)
{
	LLVMValueRef acc = NULL, mask[WIDEST], keep[WIDEST];
	for (int p = 0; 2 * p < nsrc; p++) {
		bool any = false, second = false;
		for (int l = 0; l < vw; l++) {
			bool mine = idx[l] / (2 * vw) == p;
			int at = idx[l] - 2 * p * vw;
			mask[l] = mine ? LLVMConstInt(k->m->i32, (unsigned long long)at, 0) : LLVMGetUndef(k->m->i32);
			keep[l] = LLVMConstInt(k->m->i32, (unsigned long long)(mine ? vw + l : l), 0);
			any |= mine;
			second |= mine && at >= vw;
		}
		if (!any)
			continue;
		LLVMValueRef a = src[2 * p], b = second ? src[2 * p + 1] : LLVMGetPoison(LLVMTypeOf(a));
		LLVMValueRef part = LLVMBuildShuffleVector(k->b, a, b, LLVMConstVector(mask, (unsigned)vw), "");
		acc = acc ? LLVMBuildShuffleVector(k->b, acc, part, LLVMConstVector(keep, (unsigned)vw), "") : part;
	}
	return acc;
}

/* Elements (i, j) of the n x n patches of tile row ty (at row0 of the
 * padded plane pl, rows of wq) for tiles [q0, q0 + vw), as vectors over the
 * tiles: element j of tile l is at m·l + j, picked from native-width loads
 * at m·(j / m) (one shift serves m columns).  The loads run past the row,
 * and past the plane into the pad's slack. */
static void patch_row(cg_kb *k, const wino *w, int n, LLVMValueRef pl, LLVMValueRef row, int64_t q0, LLVMValueRef *d)
{
	int m = w->t->m, vw = lanes_of(k);
	for (int s = 0; s < n; s += m) {
		LLVMValueRef at = cg_iadd(k, row, cg_i64(k, m * q0 + s)), ld[4];
		for (int c = 0; c < m; c++)
			ld[c] = cg_vload(k, vw, pl, cg_iadd(k, at, cg_i64(k, c * vw)), vw);
		for (int j = s; j < n && j < s + m; j++) {
			int idx[WIDEST];
			for (int l = 0; l < vw; l++)
				idx[l] = m * l + j - s;
			d[j] = pick(k, ld, m, idx, vw);
		}
	}
}

static void patches(cg_kb *k, const wino *w, int n, LLVMValueRef pl, LLVMValueRef row0, int64_t q0, LLVMValueRef *d)
{
	for (int i = 0; i < n; i++)
		patch_row(k, w, n, pl, cg_iadd(k, row0, cg_i64(k, i * w->wq)), q0, d + i * n);
}

/* dst[e·ds + col0 + ty·tw + q] = (L d L^T)[e] for the n x n patch d of
 * every tile (ty, q) of padded plane pl: V = B^T d B from x's (n = a),
 * and for conv2d_dw Z = A dY A^T from dY's m x m tiles (n = m).  The
 * stores are whole vectors: each tile row's run past its tw tiles into the
 * next row's, which are stored after (so planes and images must be done
 * in order), and the last past the plane into the next plane's or the
 * slack of ds. */
static void transform_row(cg_kb *k, const wino *w, int n, cmat l, LLVMValueRef pl, LLVMValueRef row0,
	LLVMValueRef dst, int64_t ds, LLVMValueRef dst0)
{
	int a = w->t->a, vw = lanes_of(k);
	for (int64_t q0 = 0; q0 < w->tw; q0 += vw) {
		LLVMValueRef d[36], out[36];
		patches(k, w, n, pl, row0, q0, d);
		sandwich(k, l, l, d, n, n, out);
		for (int e = 0; e < a * a; e++)
			cg_vstore(k, dst, cg_iadd(k, dst0, cg_i64(k, e * ds + q0)), out[e], vw);
	}
}

static void transform_plane(cg_kb *k, const wino *w, int n, cmat l, LLVMValueRef pl, LLVMValueRef dst, int64_t ds,
	LLVMValueRef col0)
{
	int m = w->t->m;
	cg_loop ly;
	LLVMValueRef ty = cg_for(k, &ly, cg_i64(k, 0), cg_i64(k, w->th));
	transform_row(k, w, n, l, pl, cg_imul(k, ty, cg_i64(k, m * w->wq)), dst, ds,
		cg_iadd(k, col0, cg_imul(k, ty, cg_i64(k, w->tw))));
	cg_keep_loop(&ly);
	cg_end_for(k, &ly, NULL);
}

/* Every image's plane c (of x or dY: `planes` planes of h x w each,
 * placed at top, left in hp rows of the pad pl) transformed into dst's
 * plane c. */
static void plane_cols(cg_kb *k, const wino *w, LLVMValueRef src, int64_t planes, int64_t h, int64_t wd,
	int64_t top, int64_t left, int64_t hp, int n, cmat l, LLVMValueRef pl, LLVMValueRef dst, int64_t ds,
	LLVMValueRef count)
{
	cg_loop lc, li;
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, planes));
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), count);
	LLVMValueRef plane = cg_iadd(k, cg_imul(k, i, cg_i64(k, planes)), c);
	cg_conv_pad_planes(k, 1, h, wd, top, left, hp, w->wq, cg_gep(k, NULL, src, cg_imul(k, plane, cg_i64(k, h * wd))),
		pl);
	transform_plane(k, w, n, l, pl, cg_gep(k, NULL, dst, cg_imul(k, c, cg_i64(k, w->cols))), ds,
		cg_imul(k, i, cg_i64(k, w->tiles)));
	cg_keep_loop(&li);
	cg_end_for(k, &li, NULL);
	cg_keep_loop(&lc);
	cg_end_for(k, &lc, NULL);
}

/* V[e][c][t] = (B^T d B)[e] for every patch d of every plane of the
 * index's `count` images, from `in` at its first image. */
static void transform_input(cg_kb *k, const wino *w, LLVMValueRef in, LLVMValueRef pl, LLVMValueRef v,
	LLVMValueRef count)
{
	const transforms *t = w->t;
	plane_cols(k, w, in, w->cin, w->h, w->w, w->top, w->left, w->hp, t->a, plain(&t->bt[0][0], t->a, 6), pl, v,
		w->vs, count);
}

/* Vector c (< m) of v[0..m) interleaved: lane m·l + j of the
 * interleaving is lane l of v[j]. */
static LLVMValueRef interleave(cg_kb *k, const LLVMValueRef *v, int m, int vw, int c)
{
	int idx[WIDEST];
	for (int r = 0; r < vw; r++) {
		int g = c * vw + r;
		idx[r] = (g % m) * vw + g / m;
	}
	return pick(k, v, m, idx, vw);
}

/* Rows m·ty + i (i < rows) of output plane y, Y = A^T M A from mrow (M's
 * plane o at the image's first column): whole vectors of tiles, the
 * results' m phases interleaved back and stored masked at wo.  The loads
 * run past the row's tiles into the next row's, the next plane's or the
 * slack of ms. */
static void rows_out(cg_kb *k, const wino *w, LLVMValueRef mrow, LLVMValueRef y, LLVMValueRef sy, LLVMValueRef ty,
	int rows)
{
	const transforms *t = w->t;
	int a = t->a, m = t->m, vw = lanes_of(k);
	LLVMValueRef src0 = cg_imul(k, sy, cg_i64(k, w->tw));
	LLVMValueRef dst0 = cg_imul(k, ty, cg_i64(k, m * w->wo));
	for (int64_t q0 = 0; q0 < w->tw; q0 += vw) {
		LLVMValueRef in[36], out[16];
		for (int e = 0; e < a * a; e++)
			in[e] = cg_vload(k, vw, mrow, cg_iadd(k, src0, cg_i64(k, e * w->ms + q0)), vw);
		sandwich(k, plain(&t->at[0][0], m, 6), plain(&t->at[0][0], m, 6), in, a, a, out);
		for (int i = 0; i < rows; i++)
			for (int c = 0; c < m && w->wo - m * q0 - c * vw > 0; c++)
				cg_vstore(k, y, cg_iadd(k, dst0, cg_i64(k, i * w->wo + m * q0 + c * vw)),
					interleave(k, out + i * m, m, vw, c), (int)(w->wo - m * q0 - c * vw));
	}
}

/* The thread's buffers (cg_conv_winograd_workspace's order). */
typedef struct {
	LLVMValueRef s, u, p, v, mm; /* conv2d_dw: S, P, a padded plane, V, Z */
} bufs;

static bufs bufs_of(cg_kb *k, const ir_conv_geom *g, const wino *w, LLVMValueRef ws)
{
	bufs b = {.s = ws};
	b.u = cg_gep(k, NULL, b.s, cg_i64(k, acc_elems(g, w)));
	b.p = cg_gep(k, NULL, b.u, cg_i64(k, u_elems(w)));
	b.v = cg_gep(k, NULL, b.p, cg_i64(k, pad_elems(w)));
	b.mm = cg_gep(k, NULL, b.v, cg_i64(k, v_elems(w)));
	return b;
}

/* The pad's slack, which the patches' loads read into lanes that are
 * overwritten or stored nowhere, is zeroed once per call, so that no lane
 * ever holds memory no kernel wrote. */
static void zero_slack(cg_kb *k, const wino *w, const bufs *b)
{
	cg_zero(k, b->p, cg_i64(k, pad_elems(w)));
}

/* conv2d_dw's products for the first `imgs` images' columns, one per tile
 * element: P[e] += Z[e] · V[e]^T. */
static void products(cg_kb *k, const wino *w, const bufs *b, int64_t imgs)
{
	int a = w->t->a;
	cg_loop le;
	LLVMValueRef e = cg_for(k, &le, cg_i64(k, 0), cg_i64(k, a * a));
	LLVMValueRef u = cg_gep(k, NULL, b->u, cg_imul(k, e, cg_i64(k, w->cout * w->cin)));
	LLVMValueRef v = cg_gep(k, NULL, b->v, cg_imul(k, e, cg_i64(k, w->vs)));
	LLVMValueRef mm = cg_gep(k, NULL, b->mm, cg_imul(k, e, cg_i64(k, w->ms)));
	cg_abt prod = {.m = w->cout, .n = w->cin, .q = imgs * w->tiles, .a = mm, .lda = w->cols, .b = v,
		.ldb = w->cols, .c = u, .ldc = w->cin};
	cg_gemm_abt(k, &prod, cg_i64(k, 1));
	cg_keep_loop(&le);
	cg_end_for(k, &le, NULL);
}

/* The products of `count` images; the last index may have fewer (a
 * constant number). */
static void all_products(cg_kb *k, const ir_conv_geom *g, const wino *w, const bufs *b, LLVMValueRef count)
{
	int64_t rest = g->n % w->imgs;
	if (rest == 0) {
		products(k, w, b, w->imgs);
		return;
	}
	cg_if full, part;
	LLVMValueRef whole = LLVMBuildICmp(k->b, LLVMIntEQ, count, cg_i64(k, w->imgs), "");
	cg_if_begin(k, &full, whole);
	products(k, w, b, w->imgs);
	cg_if_end(k, &full);
	cg_if_begin(k, &part, LLVMBuildNot(k->b, whole, ""));
	products(k, w, b, rest);
	cg_if_end(k, &part);
}

/* ---- conv2d and conv2d_dx: the stages fused, a chunk at a time ------------ */

/* Tile row ty's patches share their first two rows with the last two of
 * tile row ty - 1's (a = m + 2): so when the row sums (d·B, per patch
 * row, of every vector of the tile row) of those two rows fit in the
 * loop's carried values, they are kept from one tile row to the next, and
 * each tile row loads, picks and sums m patch rows, not a.  The same sums
 * of the same elements as sandwich(), so the same V. */
static bool rows_carried(const cg_kb *k, const wino *w)
{
	int64_t vw = lanes_of(k), nq = (w->tw + vw - 1) / vw;
	return nq * 2 * w->t->a <= CG_MAX_CARRY;
}

/* The row sums of patch row `row` (an offset in pl) of the tiles [q0, q0 + vw). */
static void row_sums(cg_kb *k, const wino *w, LLVMValueRef pl, LLVMValueRef row, int64_t q0, LLVMValueRef *h)
{
	const transforms *t = w->t;
	LLVMValueRef d[6];
	patch_row(k, w, t->a, pl, row, q0, d);
	for (int j = 0; j < t->a; j++)
		h[j] = combine(k, &t->bt[j][0], 1, d, t->a);
}

/* V for tile rows [ty0, ty0 + n) of padded plane pl, into dst (row r at
 * r·tw), the row sums of two patch rows carried from each tile row to the
 * next. */
static void transform_rows_carried(cg_kb *k, const wino *w, LLVMValueRef pl, LLVMValueRef ty0, int64_t n,
	LLVMValueRef dst)
{
	const transforms *t = w->t;
	int a = t->a, m = t->m, vw = lanes_of(k), nq = (int)((w->tw + vw - 1) / vw);
	LLVMValueRef init[CG_MAX_CARRY], h[CG_MAX_CARRY], next[CG_MAX_CARRY];
	LLVMValueRef base = cg_imul(k, ty0, cg_i64(k, m * w->wq));
	for (int q = 0; q < nq; q++)
		for (int i = 0; i < 2; i++)
			row_sums(k, w, pl, cg_iadd(k, base, cg_i64(k, i * w->wq)), (int64_t)q * vw, init + (q * 2 + i) * a);
	cg_loop lr;
	LLVMValueRef r = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, n));
	for (int x = 0; x < nq * 2 * a; x++)
		h[x] = cg_carry(k, &lr, init[x]);
	LLVMValueRef row0 = cg_imul(k, cg_iadd(k, ty0, r), cg_i64(k, m * w->wq));
	LLVMValueRef dst0 = cg_imul(k, r, cg_i64(k, w->tw));
	for (int q = 0; q < nq; q++) {
		LLVMValueRef rs[36], col[6], out[36];
		for (int x = 0; x < 2 * a; x++)
			rs[x] = h[q * 2 * a + x];
		for (int i = 2; i < a; i++)
			row_sums(k, w, pl, cg_iadd(k, row0, cg_i64(k, i * w->wq)), (int64_t)q * vw, rs + i * a);
		for (int i = 0; i < a; i++)
			for (int j = 0; j < a; j++) {
				for (int p = 0; p < a; p++)
					col[p] = rs[p * a + j];
				out[i * a + j] = combine(k, &t->bt[i][0], 1, col, a);
			}
		for (int e = 0; e < a * a; e++)
			cg_vstore(k, dst, cg_iadd(k, dst0, cg_i64(k, e * w->vs + (int64_t)q * vw)), out[e], vw);
		for (int x = 0; x < 2 * a; x++)
			next[q * 2 * a + x] = rs[(a - 2) * a + x];
	}
	cg_keep_loop(&lr);
	cg_end_for(k, &lr, next);
}


/* A chunk: tile rows [ty0, ty0 + n) of `imgs` images (several only when
 * n is the whole plane), from in and into y at the first image.  V for the
 * chunk's tiles of every input plane, the a² products, and Y, before the
 * next chunk, so that V and M are re-read soon after they are written.
 * V[e][c] (ldv apart) and M[e][o] (cc apart) hold the images' tiles one
 * after another, each image's rows one after another; ldv has a vector's
 * slack past the cc columns, for the transforms' whole-vector stores that
 * run past the last image's last tile row (the next plane's columns were
 * written before, with the images outermost).  With pad, each image's
 * planes are padded here; else the caller padded the one image.
 * The last tile row is the image's partial one when `partial`. */
static void chunk(cg_kb *k, const wino *w, const bufs *b, LLVMValueRef in, LLVMValueRef y, int64_t imgs,
	LLVMValueRef ty0, int64_t n, bool partial, bool pad)
{
	const transforms *t = w->t;
	int a = t->a, m = t->m;
	int64_t span = n * w->tw; /* an image's columns */
	cg_loop lj, lc, lr, le, lo, ly;
	LLVMValueRef j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, imgs));
	if (pad)
		cg_conv_pad_planes(k, w->cin, w->h, w->w, w->top, w->left, w->hp, w->wq,
			cg_gep(k, NULL, in, cg_imul(k, j, cg_i64(k, w->cin * w->h * w->w))), b->p);
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, w->cin));
	LLVMValueRef pl = cg_gep(k, NULL, b->p, cg_imul(k, c, cg_i64(k, w->hp * w->wq)));
	LLVMValueRef dst = cg_gep(k, NULL, b->v,
		cg_iadd(k, cg_imul(k, c, cg_i64(k, w->ldv)), cg_imul(k, j, cg_i64(k, span))));
	if (rows_carried(k, w))
		transform_rows_carried(k, w, pl, ty0, n, dst);
	else {
		LLVMValueRef r = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, n));
		transform_row(k, w, a, plain(&t->bt[0][0], a, 6), pl, cg_imul(k, cg_iadd(k, ty0, r), cg_i64(k, m * w->wq)),
			dst, w->vs, cg_imul(k, r, cg_i64(k, w->tw)));
		cg_keep_loop(&lr);
		cg_end_for(k, &lr, NULL);
	}
	cg_keep_loop(&lc);
	cg_end_for(k, &lc, NULL);
	cg_keep_loop(&lj);
	cg_end_for(k, &lj, NULL);

	LLVMValueRef e = cg_for(k, &le, cg_i64(k, 0), cg_i64(k, a * a));
	cg_ab prod = {.m = w->cout, .r = w->cin, .p = imgs * span,
		.a = cg_gep(k, NULL, b->u, cg_imul(k, e, cg_i64(k, w->cout * w->cin))), .a_rs = w->cin, .a_cs = 1,
		.b = cg_gep(k, NULL, b->v, cg_imul(k, e, cg_i64(k, w->vs))), .ldb = w->ldv,
		.c = cg_gep(k, NULL, b->mm, cg_imul(k, e, cg_i64(k, w->ms))), .ldc = w->cc};
	cg_gemm_ab(k, &prod);
	cg_keep_loop(&le);
	cg_end_for(k, &le, NULL);

	j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, imgs));
	LLVMValueRef o = cg_for(k, &lo, cg_i64(k, 0), cg_i64(k, w->cout));
	LLVMValueRef mrow = cg_gep(k, NULL, b->mm,
		cg_iadd(k, cg_imul(k, o, cg_i64(k, w->cc)), cg_imul(k, j, cg_i64(k, span))));
	LLVMValueRef yo = cg_gep(k, NULL, y,
		cg_iadd(k, cg_imul(k, j, cg_i64(k, w->cout * w->ho * w->wo)), cg_imul(k, o, cg_i64(k, w->ho * w->wo))));
	int64_t full = partial ? n - 1 : n;
	if (full > 0) {
		LLVMValueRef q = cg_for(k, &ly, cg_i64(k, 0), cg_i64(k, full));
		rows_out(k, w, mrow, yo, q, cg_iadd(k, ty0, q), m);
		cg_keep_loop(&ly);
		cg_end_for(k, &ly, NULL);
	}
	if (partial)
		rows_out(k, w, mrow, yo, cg_i64(k, n - 1), cg_iadd(k, ty0, cg_i64(k, n - 1)),
			(int)(w->ho - w->ho / m * m));
	cg_keep_loop(&lo);
	cg_end_for(k, &lo, NULL);
	cg_keep_loop(&lj);
	cg_end_for(k, &lj, NULL);
}

/* `count` images (a constant) from in, into y.  Images larger than a
 * chunk: one at a time, its planes padded once, then its whole chunks of
 * w->rows tile rows, then the rest (with the partial tile row, if any).
 * Smaller ones: chunks of w->group images, then the rest. */
static void images_fused(cg_kb *k, const wino *w, const bufs *b, LLVMValueRef in, LLVMValueRef y, int64_t count)
{
	int m = w->t->m;
	bool partial = w->ho % m != 0;
	int64_t isz = w->cin * w->h * w->w, osz = w->cout * w->ho * w->wo;
	cg_loop li, lq;
	if (w->rows < w->th) {
		int64_t full = (w->th - (partial ? 1 : 0)) / w->rows, rest = w->th - full * w->rows;
		LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), cg_i64(k, count));
		LLVMValueRef x = cg_gep(k, NULL, in, cg_imul(k, i, cg_i64(k, isz)));
		LLVMValueRef yi = cg_gep(k, NULL, y, cg_imul(k, i, cg_i64(k, osz)));
		cg_conv_pad_planes(k, w->cin, w->h, w->w, w->top, w->left, w->hp, w->wq, x, b->p);
		if (full > 0) {
			LLVMValueRef q = cg_for(k, &lq, cg_i64(k, 0), cg_i64(k, full));
			chunk(k, w, b, x, yi, 1, cg_imul(k, q, cg_i64(k, w->rows)), w->rows, false, false);
			cg_keep_loop(&lq);
			cg_end_for(k, &lq, NULL);
		}
		if (rest > 0)
			chunk(k, w, b, x, yi, 1, cg_i64(k, full * w->rows), rest, partial, false);
		cg_keep_loop(&li);
		cg_end_for(k, &li, NULL);
		return;
	}
	int64_t full = count / w->group, rest = count - full * w->group;
	if (full > 0) {
		LLVMValueRef q = cg_for(k, &lq, cg_i64(k, 0), cg_i64(k, full));
		LLVMValueRef first = cg_imul(k, q, cg_i64(k, w->group));
		chunk(k, w, b, cg_gep(k, NULL, in, cg_imul(k, first, cg_i64(k, isz))),
			cg_gep(k, NULL, y, cg_imul(k, first, cg_i64(k, osz))), w->group, cg_i64(k, 0), w->th, partial, true);
		cg_keep_loop(&lq);
		cg_end_for(k, &lq, NULL);
	}
	if (rest > 0)
		chunk(k, w, b, cg_gep(k, NULL, in, cg_i64(k, full * w->group * isz)),
			cg_gep(k, NULL, y, cg_i64(k, full * w->group * osz)), rest, cg_i64(k, 0), w->th, partial, true);
}

/* The index's `count` images; the last index may have fewer (a constant
 * number). */
static void index_fused(cg_kb *k, const ir_conv_geom *g, const wino *w, const bufs *b, LLVMValueRef in,
	LLVMValueRef y, LLVMValueRef count)
{
	int64_t rest = g->n % w->imgs;
	if (rest == 0) {
		images_fused(k, w, b, in, y, w->imgs);
		return;
	}
	cg_if full, part;
	LLVMValueRef whole = LLVMBuildICmp(k->b, LLVMIntEQ, count, cg_i64(k, w->imgs), "");
	cg_if_begin(k, &full, whole);
	images_fused(k, w, b, in, y, w->imgs);
	cg_if_end(k, &full);
	cg_if_begin(k, &part, LLVMBuildNot(k->b, whole, ""));
	images_fused(k, w, b, in, y, rest);
	cg_if_end(k, &part);
}

int64_t cg_conv_winograd_extent(const ir_conv_geom *g, ir_dtype dt)
{
	wino w = wino_of(g, dt);
	return (g->n + w.imgs - 1) / w.imgs;
}

/* conv2d_dw (out = dW, in = dY, wt = x): the transpose of the forward
 * algorithm.  With Y = A^T [U ⊙ V] A per tile, dL/dU = (A dY A^T) ⊙ V, so
 *     Z[e] = A dY A^T      for every m x m tile of every plane of dY
 *     P[e] += Z[e] · V[e]^T over the index's images' tiles
 * and each index's P is added to the thread's S in f64; then
 * cg_conv_winograd_finish turns the threads' sum into dW = G^T S G.  The
 * indices' P are the same whatever the threads, and their sum in f64
 * rounded once to f32 is the same but for a sum within an ulp of f64 of a
 * rounding boundary: so dW does not depend on the thread count (an AOT
 * library's one thread gives the JIT's two threads' training), as the
 * direct kernel's does not.  dY is padded with zeros to whole tiles. */
static void emit_dw(cg_kb *k, const ir_conv_geom *g, const wino *w, const bufs *b)
{
	const transforms *t = w->t;
	int m = t->m;
	LLVMValueRef dy = cg_arg(k, 1), x = cg_arg(k, 2);
	cg_zero(k, b->s, cg_i64(k, acc_elems(g, w)));
	zero_slack(k, w, b);
	cg_loop lt;
	LLVMValueRef it = cg_for(k, &lt, k->lo, k->hi);
	cg_zero(k, b->u, cg_i64(k, u_elems(w)));
	LLVMValueRef first = cg_imul(k, it, cg_i64(k, w->imgs));
	LLVMValueRef count = cg_imin(k, cg_isub(k, cg_i64(k, g->n), first), cg_i64(k, w->imgs));
	transform_input(k, w, cg_gep(k, NULL, x, cg_imul(k, first, cg_i64(k, w->cin * w->h * w->w))), b->p, b->v,
		count);
	plane_cols(k, w, cg_gep(k, NULL, dy, cg_imul(k, first, cg_i64(k, w->cout * w->ho * w->wo))), w->cout, w->ho,
		w->wo, 0, 0, w->th * m, m, transposed(&t->at[0][0], t->a, 6), b->p, b->mm, w->ms, count);
	all_products(k, g, w, b, count);
	cg_loop ls;
	LLVMValueRef i = cg_for(k, &ls, cg_i64(k, 0), cg_i64(k, u_elems(w)));
	LLVMValueRef at = cg_gep(k, k->m->f64, b->s, i);
	LLVMValueRef sum = LLVMBuildLoad2(k->b, k->m->f64, at, "");
	LLVMBuildStore(k->b, LLVMBuildFAdd(k->b, sum, cg_to_f64(k, cg_ld(k, b->u, i)), ""), at);
	cg_end_for(k, &ls, NULL);
	cg_keep_loop(&lt);
	cg_end_for(k, &lt, NULL);
}

void cg_conv_winograd_emit(cg_kb *k, const ir_node *n, const ir_conv_geom *g, LLVMValueRef ws)
{
	wino w = wino_of(g, n->type.dtype);
	bufs b = bufs_of(k, g, &w, ws);
	if (g->op == IR_OP_CONV2D_DW) {
		emit_dw(k, g, &w, &b);
		return;
	}
	LLVMValueRef out = cg_arg(k, 0), in = cg_arg(k, 1), wt = cg_arg(k, 2);
	transform_filter(k, g, &w, wt, b.u);
	zero_slack(k, &w, &b);
	cg_loop lt;
	LLVMValueRef t = cg_for(k, &lt, k->lo, k->hi);
	LLVMValueRef first = cg_imul(k, t, cg_i64(k, w.imgs));
	LLVMValueRef count = cg_imin(k, cg_isub(k, cg_i64(k, g->n), first), cg_i64(k, w.imgs));
	index_fused(k, g, &w, &b, cg_gep(k, NULL, in, cg_imul(k, first, cg_i64(k, w.cin * w.h * w.w))),
		cg_gep(k, NULL, out, cg_imul(k, first, cg_i64(k, w.cout * w.ho * w.wo))), count);
	cg_conv_epilogue_tile(k, n, first, count);
	cg_keep_loop(&lt);
	cg_end_for(k, &lt, NULL);
}

/* conv2d_dw's serial finish: dW[o][c] = G^T S G, S the sum of the threads'
 * partials in thread order (so the result does not depend on timing),
 * added and transformed in f64 and rounded once.  per: each thread's
 * workspace, in elements. */
void cg_conv_winograd_finish(cg_kb *k, const ir_node *n, const ir_conv_geom *g, int threads, int64_t per)
{
	wino w = wino_of(g, n->type.dtype);
	const transforms *t = w.t;
	int a = t->a;
	int64_t plane = w.cout * w.cin;
	LLVMValueRef dw = cg_arg(k, 0), ws = cg_arg(k, n->nin + 1);
	cg_loop lo, lc;
	LLVMValueRef o = cg_for(k, &lo, cg_i64(k, 0), cg_i64(k, w.cout));
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, w.cin));
	LLVMValueRef oc = cg_iadd(k, cg_imul(k, o, cg_i64(k, w.cin)), c), in[36], out[9];
	for (int e = 0; e < a * a; e++) {
		LLVMValueRef sum = NULL;
		for (int th = 0; th < threads; th++) {
			LLVMValueRef p = LLVMBuildLoad2(k->b, k->m->f64,
				cg_gep(k, k->m->f64, cg_gep(k, NULL, ws, cg_i64(k, th * per)), cg_iadd(k, oc, cg_i64(k, e * plane))),
				"");
			sum = sum ? LLVMBuildFAdd(k->b, sum, p, "") : p;
		}
		in[e] = sum;
	}
	cmat gt = transposed(&t->g[0][0], 3, 3);
	sandwich(k, gt, gt, in, a, a, out);
	LLVMValueRef at = cg_imul(k, oc, cg_i64(k, 9));
	for (int e = 0; e < 9; e++)
		cg_st(k, dw, cg_iadd(k, at, cg_i64(k, e)), cg_to_real(k, out[e]));
	cg_end_for(k, &lc, NULL);
	cg_keep_loop(&lo);
	cg_end_for(k, &lo, NULL);
}
