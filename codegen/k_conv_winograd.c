/* k_conv_winograd.c: 3x3 stride-1 convolutions by Winograd's minimal
 * filtering, F(2x2, 3x3) and F(4x4, 3x3) (Lavin and Gray, "Fast
 * Algorithms for Convolutional Neural Networks", 2016), f32 only.
 *
 * The output is cut into m x m tiles (m = 2 or 4); tile (ty, tx) reads the
 * a x a patch (a = m + 2) of the padded input at (m·ty, m·tx).  With the
 * constant matrices B^T (a x a), G (a x 3) and A^T (m x a),
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
 * runs its stages over the whole index (emit_dw).  The transforms of the
 * tiles (V, Z and Y, in whole vectors) are k_conv_winograd_tiles.c's.
 *
 * Rounding: the transforms' constants (F(4x4)'s 1/24, 5, 8) amplify f32's
 * rounding of the patch; docs/codegen.md gives the errors measured on the
 * presets' layers, tests/unit/test_cg_winograd.c bounds them. */
#include "winograd.h"

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
 * same images in indices of equal images (split.c): 50 images of 7x7 go
 * 5 to an index, not 4 (13 indices, 24 images against 26).  At 14x14 (16
 * planes) 5 an index ran 3% faster than 2 on one thread of a Zen 4 (1 MiB
 * L2).  Where no count does (28x28 at 8 planes: 2 an index, 25 indices),
 * cg_split_extent adds an index: 26 of 1 or 2 images, 25 a thread. */
static int64_t images(const ir_conv_geom *g, const cg_wino *w)
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
 * columns or more (F(4x4): 256·16/36, so that its 36 matrices of Z and V
 * take the room F(2x2)'s 16 take at 256: with 256, the step's peak at
 * fashion's batch 32 grew 4.6%, the 14x14 filter gradient's workspace
 * 2.4 MiB), with one matrix element's Z and V (the operands of one
 * product) within 256 KiB; then the count from 3/4 of that to all of it
 * whose slowest chunk has the fewest images (split.c), and the extent
 * cg_split_extent makes of it: at 7x7 by F(2x2) 50 images stay at most
 * 13 to an index, 4 indices of 12 or 13, 25 a thread (25 to an index
 * grew V and Z and fashion's planned arena by 0.31 MiB, 16.51 to 16.82);
 * at 28x28 (8 planes) 3, 18 indices (17 were 24 images against 27). */
static int64_t dw_images(const ir_conv_geom *g, const cg_wino *w)
{
	int64_t per = (w->cin + w->cout) * w->tiles * 4;
	int64_t cols = 256 * 16 / ((int64_t)w->t->a * w->t->a);
	int64_t t = (cols + w->tiles - 1) / w->tiles;
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

static int64_t chunk_rows(const cg_wino *w)
{
	int64_t row = (int64_t)w->t->a * w->t->a * (w->cin + w->cout) * w->tw * 4;
	int64_t r = CHUNK / row;
	r = r < 1 ? 1 : r > w->th ? w->th : r;
	int64_t n = (w->th + r - 1) / r;
	return (w->th + n - 1) / n;
}

static int64_t chunk_images(const cg_wino *w)
{
	int64_t j = CHUNK / ((int64_t)w->t->a * w->t->a * (w->cin + w->cout) * w->tiles * 4);
	return j < 1 ? 1 : j > w->imgs ? w->imgs : j;
}

static cg_wino wino_of(const ir_conv_geom *g, ir_dtype dt)
{
	cg_wino w = {.t = cg_wino_tf_for(tile_m(g, dt))};
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
	w.extent = cg_split_extent(g->n, g->op == IR_OP_CONV2D_DW ? dw_images(g, &w) : images(g, &w));
	w.imgs = (g->n + w.extent - 1) / w.extent;
	w.few = g->n / w.extent;
	w.cols = w.imgs * w.tiles;
	w.fused = g->op != IR_OP_CONV2D_DW;
	if (w.fused) {
		w.rows = chunk_rows(&w);
		w.group = w.rows < w.th ? 1 : chunk_images(&w);
		w.cc = w.group * w.rows * w.tw;
		w.ldv = w.cc + CG_WIDEST;
		w.vs = skew(w.cin * w.ldv);
		w.ms = skew(w.cout * w.cc + CG_WIDEST);
		return w;
	}
	w.vs = skew(w.cin * w.cols + CG_WIDEST);
	w.ms = skew(w.cout * w.cols + CG_WIDEST);
	return w;
}

/* Per thread: for conv2d_dw the thread's sum S of the indices' P in f64
 * (acc_elems reals, 0 otherwise); U (conv2d_dw: one index's P); the
 * padded planes of one image (conv2d_dw: one plane, of x or of dY in whole
 * tiles); V, and M (conv2d_dw: Z), a chunk's (conv2d_dw: an index's). */
static int64_t u_elems(const cg_wino *w)
{
	return (int64_t)w->t->a * w->t->a * w->cout * w->cin;
}

static int64_t acc_elems(const ir_conv_geom *g, const cg_wino *w)
{
	return g->op == IR_OP_CONV2D_DW ? 2 * u_elems(w) : 0;
}

static int64_t pad_elems(const cg_wino *w)
{
	return (w->fused ? w->cin : 1) * w->hp * w->wq + 2 * (int64_t)w->t->m * CG_WIDEST;
}

static int64_t v_elems(const cg_wino *w)
{
	return (int64_t)w->t->a * w->t->a * w->vs;
}

int64_t cg_conv_winograd_workspace(const ir_conv_geom *g, ir_dtype dt)
{
	cg_wino w = wino_of(g, dt);
	int64_t e = acc_elems(g, &w) + u_elems(&w) + pad_elems(&w) + v_elems(&w) + (int64_t)w.t->a * w.t->a * w.ms;
	return g->op == IR_OP_CONV2D_DW ? (e + 15) / 16 * 16 : e; /* the threads' S 64-byte aligned */
}

/* ---- the kernel ----------------------------------------------------------- */

/* U[e][o][i] = (G g G^T)[e] for filter slice g of output plane o and input
 * plane i: g[a][b] = w[o·rs + i·cs + tap(a, b)], turned half a turn for
 * the data gradient. */
static void transform_filter(cg_kb *k, const ir_conv_geom *g, const cg_wino *w, LLVMValueRef wt, LLVMValueRef u)
{
	const cg_wino_tf *t = w->t;
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
	cg_wino_sandwich(k, cg_cmat_plain(&t->g[0][0], t->a, 3), cg_cmat_plain(&t->g[0][0], t->a, 3), in, 3, 3, out);
	LLVMValueRef at = cg_iadd(k, cg_imul(k, o, cg_i64(k, w->cin)), i);
	for (int e = 0; e < t->a * t->a; e++)
		cg_st(k, u, cg_iadd(k, at, cg_i64(k, e * plane)), cg_to_real(k, out[e]));
	cg_end_for(k, &li, NULL);
	cg_keep_loop(&lo);
	cg_end_for(k, &lo, NULL);
}

/* Every image's plane c (of x or dY: `planes` planes of h x w each,
 * placed at top, left in hp rows of the pad pl) transformed into dst's
 * plane c. */
static void plane_cols(cg_kb *k, const cg_wino *w, LLVMValueRef src, int64_t planes, int64_t h, int64_t wd,
	int64_t top, int64_t left, int64_t hp, bool z, LLVMValueRef pl, LLVMValueRef dst, int64_t ds, LLVMValueRef count)
{
	cg_loop lc, li;
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, planes));
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), count);
	LLVMValueRef plane = cg_iadd(k, cg_imul(k, i, cg_i64(k, planes)), c);
	cg_conv_pad_planes(k, 1, h, wd, top, left, hp, w->wq, cg_gep(k, NULL, src, cg_imul(k, plane, cg_i64(k, h * wd))),
		pl, false);
	cg_wino_transform_rows(k, w, z, pl, cg_i64(k, 0), w->th, cg_gep(k, NULL, dst, cg_imul(k, c, cg_i64(k, w->cols))),
		ds, cg_imul(k, i, cg_i64(k, w->tiles)));
	cg_keep_loop(&li);
	cg_end_for(k, &li, NULL);
	cg_keep_loop(&lc);
	cg_end_for(k, &lc, NULL);
}

/* V[e][c][t] = (B^T d B)[e] for every patch d of every plane of the
 * index's `count` images, from `in` at its first image. */
static void transform_input(cg_kb *k, const cg_wino *w, LLVMValueRef in, LLVMValueRef pl, LLVMValueRef v,
	LLVMValueRef count)
{
	plane_cols(k, w, in, w->cin, w->h, w->w, w->top, w->left, w->hp, false, pl, v, w->vs, count);
}

/* The thread's buffers (cg_conv_winograd_workspace's order). */
typedef struct {
	LLVMValueRef s, u, p, v, mm; /* conv2d_dw: S, P, a padded plane, V, Z */
} bufs;

static bufs bufs_of(cg_kb *k, const ir_conv_geom *g, const cg_wino *w, LLVMValueRef ws)
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
static void zero_slack(cg_kb *k, const cg_wino *w, const bufs *b)
{
	cg_zero(k, b->p, cg_i64(k, pad_elems(w)));
}

/* conv2d_dw's products for the first `imgs` images' columns, one per tile
 * element: P[e] += Z[e] · V[e]^T. */
static void products(cg_kb *k, const cg_wino *w, const bufs *b, int64_t imgs)
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

/* The products of `count` images: w->imgs or w->few. */
static void all_products(cg_kb *k, const cg_wino *w, const bufs *b, LLVMValueRef count)
{
	if (w->few == w->imgs) {
		products(k, w, b, w->imgs);
		return;
	}
	cg_if full, part;
	LLVMValueRef whole = LLVMBuildICmp(k->b, LLVMIntEQ, count, cg_i64(k, w->imgs), "");
	cg_if_begin(k, &full, whole);
	products(k, w, b, w->imgs);
	cg_if_end(k, &full);
	cg_if_begin(k, &part, LLVMBuildNot(k->b, whole, ""));
	products(k, w, b, w->few);
	cg_if_end(k, &part);
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
static void chunk(cg_kb *k, const cg_wino *w, const bufs *b, LLVMValueRef in, LLVMValueRef y, int64_t imgs,
	LLVMValueRef ty0, int64_t n, bool partial, bool pad)
{
	const cg_wino_tf *t = w->t;
	int a = t->a, m = t->m;
	int64_t span = n * w->tw; /* an image's columns */
	cg_loop lj, lc, le, lo;
	LLVMValueRef j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, imgs));
	if (pad)
		cg_conv_pad_planes(k, w->cin, w->h, w->w, w->top, w->left, w->hp, w->wq,
			cg_gep(k, NULL, in, cg_imul(k, j, cg_i64(k, w->cin * w->h * w->w))), b->p, k->pro != NULL);
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, w->cin));
	LLVMValueRef pl = cg_gep(k, NULL, b->p, cg_imul(k, c, cg_i64(k, w->hp * w->wq)));
	LLVMValueRef dst = cg_gep(k, NULL, b->v,
		cg_iadd(k, cg_imul(k, c, cg_i64(k, w->ldv)), cg_imul(k, j, cg_i64(k, span))));
	cg_wino_transform_rows(k, w, false, pl, ty0, n, dst, w->vs, cg_i64(k, 0));
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
	cg_wino_chunk_out(k, w, mrow, yo, ty0, n, partial ? (int)(w->ho - w->ho / m * m) : m);
	cg_keep_loop(&lo);
	cg_end_for(k, &lo, NULL);
	cg_keep_loop(&lj);
	cg_end_for(k, &lj, NULL);
}

/* `count` images (a constant) from in, into y.  Images larger than a
 * chunk: one at a time, its planes padded once, then its whole chunks of
 * w->rows tile rows, then the rest (with the partial tile row, if any).
 * Smaller ones: chunks of w->group images, then the rest. */
static void images_fused(cg_kb *k, const cg_wino *w, const bufs *b, LLVMValueRef in, LLVMValueRef y, int64_t count)
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
		cg_conv_pad_planes(k, w->cin, w->h, w->w, w->top, w->left, w->hp, w->wq, x, b->p, k->pro != NULL);
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

/* The index's `count` images: w->imgs or w->few. */
static void index_fused(cg_kb *k, const cg_wino *w, const bufs *b, LLVMValueRef in, LLVMValueRef y,
	LLVMValueRef count)
{
	if (w->few == w->imgs) {
		images_fused(k, w, b, in, y, w->imgs);
		return;
	}
	cg_if full, part;
	LLVMValueRef whole = LLVMBuildICmp(k->b, LLVMIntEQ, count, cg_i64(k, w->imgs), "");
	cg_if_begin(k, &full, whole);
	images_fused(k, w, b, in, y, w->imgs);
	cg_if_end(k, &full);
	cg_if_begin(k, &part, LLVMBuildNot(k->b, whole, ""));
	images_fused(k, w, b, in, y, w->few);
	cg_if_end(k, &part);
}

int64_t cg_conv_winograd_extent(const ir_conv_geom *g, ir_dtype dt)
{
	cg_wino w = wino_of(g, dt);
	return w.extent;
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
static void emit_dw(cg_kb *k, const ir_conv_geom *g, const cg_wino *w, const bufs *b)
{
	const cg_wino_tf *t = w->t;
	int m = t->m;
	LLVMValueRef dy = cg_arg(k, 1), x = cg_arg(k, 2);
	cg_zero(k, b->s, cg_i64(k, acc_elems(g, w)));
	zero_slack(k, w, b);
	cg_loop lt;
	LLVMValueRef it = cg_for(k, &lt, k->lo, k->hi);
	cg_zero(k, b->u, cg_i64(k, u_elems(w)));
	LLVMValueRef count, first = cg_split_first(k, it, g->n, w->extent, &count);
	transform_input(k, w, cg_gep(k, NULL, x, cg_imul(k, first, cg_i64(k, w->cin * w->h * w->w))), b->p, b->v,
		count);
	plane_cols(k, w, cg_gep(k, NULL, dy, cg_imul(k, first, cg_i64(k, w->cout * w->ho * w->wo))), w->cout, w->ho,
		w->wo, 0, 0, w->th * m, true, b->p, b->mm, w->ms, count);
	all_products(k, w, b, count);
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
	cg_wino w = wino_of(g, n->type.dtype);
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
	LLVMValueRef count, first = cg_split_first(k, t, g->n, w.extent, &count);
	index_fused(k, &w, &b, cg_gep(k, NULL, in, cg_imul(k, first, cg_i64(k, w.cin * w.h * w.w))),
		cg_gep(k, NULL, out, cg_imul(k, first, cg_i64(k, w.cout * w.ho * w.wo))), count);
	cg_conv_epilogue_tile(k, n, first, count);
	cg_keep_loop(&lt);
	cg_end_for(k, &lt, NULL);
}

/* conv2d_dw's finish: dW[o][c] = G^T S G for the output planes o of
 * [k->lo, k->hi), S the sum of the threads' partials in thread order (so
 * the result does not depend on timing), added and transformed in f64 and
 * rounded once.  per: each thread's workspace, in elements. */
void cg_conv_winograd_finish(cg_kb *k, const ir_node *n, const ir_conv_geom *g, int threads, int64_t per)
{
	cg_wino w = wino_of(g, n->type.dtype);
	const cg_wino_tf *t = w.t;
	int a = t->a;
	int64_t plane = w.cout * w.cin;
	LLVMValueRef dw = cg_arg(k, 0), ws = cg_arg(k, n->nin + 1);
	cg_loop lo, lc;
	LLVMValueRef o = cg_for(k, &lo, k->lo, k->hi);
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
	cg_cmat gt = cg_cmat_transposed(&t->g[0][0], 3, 3);
	cg_wino_sandwich(k, gt, gt, in, a, a, out);
	LLVMValueRef at = cg_imul(k, oc, cg_i64(k, 9));
	for (int e = 0; e < 9; e++)
		cg_st(k, dw, cg_iadd(k, at, cg_i64(k, e)), cg_to_real(k, out[e]));
	cg_end_for(k, &lc, NULL);
	cg_keep_loop(&lo);
	cg_end_for(k, &lo, NULL);
}
