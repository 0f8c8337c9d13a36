/* k_conv_winograd_tiles.c: the transforms of Winograd's tiles
 * (winograd.h), in whole vectors.
 *
 * The padded input's patches become V = B^T d B (and, for the filter
 * gradient, dY's tiles Z = A dY A^T), and M becomes the output tiles
 * Y = A^T M A, interleaved back into rows.  A vector holds the same
 * element of vw tiles (16 with AVX-512, 8 with AVX2): those of one tile
 * row, or of several when a row has fewer than half a vector's tiles
 * (packed_rows).  A patch's elements are picked from loads of the
 * target's own width by two-input shuffles, so AVX2 code has no vector
 * wider than 256 bits, and the transforms are done in registers; F(4x4)
 * with AVX2 moves whole tiles' columns by 128-bit halves and transposes
 * them within the halves instead (by_quads).  V, Z
 * and M keep one column per tile, an image's tile rows one after another;
 * how the columns are grouped into vectors changes no value: each is the
 * same sum of the same elements, rounded the same, in every path.
 * Rounding: the constants (F(4x4)'s 1/24, 5, 8) amplify f32's rounding of
 * the patch; docs/codegen.md gives the errors measured. */
#include "winograd.h"

/* ---- the transforms ------------------------------------------------------- */

static const cg_wino_tf f2 = {
	2, 4,
	{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
	{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
	{{1, 1, 1, 0}, {0, 1, -1, -1}},
};

static const cg_wino_tf f4 = {
	4, 6,
	{{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0},
		{0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}},
	{{1.0 / 4, 0, 0}, {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
		{1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}},
	{{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}},
};

const cg_wino_tf *cg_wino_tf_for(int m)
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

/* a·c + s, fused where the target has FMA (as gemm.c's products). */
static LLVMValueRef fmuladd(cg_kb *k, LLVMValueRef a, double c, LLVMValueRef s)
{
	LLVMTypeRef over = LLVMTypeOf(a), fty;
	LLVMValueRef f = cg_intrinsic(k, "llvm.fmuladd", &over, 1, &fty);
	LLVMValueRef args[3] = {a, konst(over, c), s};
	return LLVMBuildCall2(k->b, fty, f, args, 3, "");
}

/* sum_i c[i]·v[i] over the nonzero c[i] (on reals or on vectors of them),
 * in order, with no multiplication by ±1: the first term a product (or
 * v[i] or -v[i]), then additions, subtractions or multiply-adds. */
static LLVMValueRef combine(cg_kb *k, const double *c, int stride, const LLVMValueRef *v, int n)
{
	LLVMValueRef s = NULL;
	for (int i = 0; i < n; i++) {
		double ci = c[i * stride];
		if (ci == 0)
			continue;
		if (!s)
			s = ci == 1 ? v[i] : ci == -1 ? LLVMBuildFNeg(k->b, v[i], "") :
				LLVMBuildFMul(k->b, v[i], konst(LLVMTypeOf(v[i]), ci), "");
		else if (ci == 1 || ci == -1)
			s = ci < 0 ? LLVMBuildFSub(k->b, s, v[i], "") : LLVMBuildFAdd(k->b, s, v[i], "");
		else
			s = fmuladd(k, v[i], ci, s);
	}
	return s ? s : konst(LLVMTypeOf(v[0]), 0);
}

/* out[i] = M[i] · v for the m.rows rows of M (n columns).  With `paired`,
 * two rows that differ only in the signs of some terms (F(4x4)'s B^T has
 * two such pairs, A^T two) are one sum E of the terms of equal sign and
 * one O of the others: E + O and E - O, about half the operations.  The
 * tiles' transforms pair; the filter's (in f64, once a call) does not, so
 * that U is what it was. */
static void apply(cg_kb *k, cg_cmat m, const LLVMValueRef *v, int n, bool paired, LLVMValueRef *out)
{
	bool done[6] = {false};
	for (int i = 0; i < m.rows; i++) {
		if (done[i])
			continue;
		const double *ri = m.c + i * m.rs;
		for (int i2 = i + 1; paired && i2 < m.rows; i2++) {
			const double *r2 = m.c + i2 * m.rs;
			double e[6], o[6];
			bool same = true, any_e = false, any_o = false;
			for (int j = 0; j < n; j++) {
				double x = ri[j * m.cs], y = r2[j * m.cs];
				same &= x == y || x == -y;
				e[j] = x == y ? x : 0;
				o[j] = x == y ? 0 : x;
				any_e |= e[j] != 0;
				any_o |= o[j] != 0;
			}
			if (done[i2] || !same || !any_e || !any_o)
				continue;
			LLVMValueRef ev = combine(k, e, 1, v, n), ov = combine(k, o, 1, v, n);
			out[i] = LLVMBuildFAdd(k->b, ev, ov, "");
			out[i2] = LLVMBuildFSub(k->b, ev, ov, "");
			done[i] = done[i2] = true;
			break;
		}
		if (!done[i])
			out[i] = combine(k, ri, m.cs, v, n);
	}
}

static void sandwich(cg_kb *k, cg_cmat l, cg_cmat r, const LLVMValueRef *in, int rows, int cols, bool paired,
	LLVMValueRef *out)
{
	LLVMValueRef t[36], col[6], res[6];
	int lc = r.rows;
	for (int i = 0; i < rows; i++)
		apply(k, r, in + i * cols, cols, paired, t + i * lc);
	for (int j = 0; j < lc; j++) {
		for (int q = 0; q < rows; q++)
			col[q] = t[q * lc + j];
		apply(k, l, col, rows, paired, res);
		for (int i = 0; i < l.rows; i++)
			out[i * lc + j] = res[i];
	}
}

void cg_wino_sandwich(cg_kb *k, cg_cmat l, cg_cmat r, const LLVMValueRef *in, int rows, int cols, LLVMValueRef *out)
{
	sandwich(k, l, r, in, rows, cols, false, out);
}

/* ---- whole vectors: lanes picked and interleaved -------------------------- */

static int lanes_of(const cg_kb *k)
{
	return k->m->vec_bytes / 4;
}

/* The vw lanes lane l = src[idx[l] / vw][idx[l] % vw] of the vectors src
 * (vw lanes each, the native width), or 0 where idx[l] < 0, by two-input
 * shuffles only: each pair of vectors gives the lanes it holds, and the
 * pairs' results are blended, so no vector is wider than the target's. */
static LLVMValueRef pick(cg_kb *k, const LLVMValueRef *src, int nsrc, const int *idx, int vw)
{
	LLVMValueRef acc = NULL, mask[CG_WIDEST], keep[CG_WIDEST];
	bool zeros = false;
	for (int p = 0; 2 * p < nsrc; p++) {
		bool any = false, second = false;
		for (int l = 0; l < vw; l++) {
			bool mine = idx[l] >= 0 && idx[l] / (2 * vw) == p;
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
	for (int l = 0; l < vw; l++) {
		zeros |= idx[l] < 0;
		keep[l] = LLVMConstInt(k->m->i32, (unsigned long long)(idx[l] < 0 ? vw + l : l), 0);
	}
	if (!acc)
		return LLVMConstNull(LLVMTypeOf(src[0]));
	return zeros ? LLVMBuildShuffleVector(k->b, acc, LLVMConstNull(LLVMTypeOf(acc)), LLVMConstVector(keep,
		(unsigned)vw), "") : acc;
}

/* ---- F(4x4) with AVX2: quads moved by 128-bit halves -------------------- */

/* F(4x4)'s tiles are 4 columns apart, so with 8 lanes a tile's 4 columns
 * (its quad) fill one 128-bit half of a vector, and element j of 8 tiles
 * is a 4 x 4 transpose within halves away: no shuffle has to cross the
 * halves but the loads' (VINSERTF128).  pick() instead gathers lanes
 * 4l + j from four vectors, which LLVM lowered for AVX2 to cross-half
 * permutes and blends (VPERMPS, VPERMPD, VBLENDPS: the code of fashion's
 * step, F(4x4) on 6 of its 11 shapes, had 1263, 719 and 2045 of them;
 * 131, 127 and 171 since).  The values are
 * the same, in the same lanes, so the results are bit for bit those of
 * pick().  On a Zen 3 (one thread, the kernel alone) that took the 28x28
 * F(4x4) conv2d from 0.86-1.08 to 0.76-0.87 of the direct kernel's time.
 * AVX-512 keeps pick(): its 16-lane permutes take two vectors at once. */
static bool by_quads(const cg_kb *k, const cg_wino *w)
{
	return w->t->m == 4 && lanes_of(k) == 8;
}

static LLVMValueRef shuffle8(cg_kb *k, LLVMValueRef a, LLVMValueRef b, const int *idx)
{
	LLVMValueRef mask[8];
	for (int l = 0; l < 8; l++)
		mask[l] = LLVMConstInt(k->m->i32, (unsigned long long)idx[l], 0);
	return LLVMBuildShuffleVector(k->b, a, b, LLVMConstVector(mask, 8), "");
}

/* out[j] lane 4g + v = in[v] lane 4g + j (g < 2, j, v < 4): the 4 x 4
 * transpose of each half, by unpacking floats and then pairs of floats. */
static void transpose_halves(cg_kb *k, const LLVMValueRef *in, LLVMValueRef *out)
{
	static const int lo_ps[8] = {0, 8, 1, 9, 4, 12, 5, 13}, hi_ps[8] = {2, 10, 3, 11, 6, 14, 7, 15};
	static const int lo_pd[8] = {0, 1, 8, 9, 4, 5, 12, 13}, hi_pd[8] = {2, 3, 10, 11, 6, 7, 14, 15};
	LLVMValueRef t0 = shuffle8(k, in[0], in[1], lo_ps), t1 = shuffle8(k, in[0], in[1], hi_ps);
	LLVMValueRef t2 = shuffle8(k, in[2], in[3], lo_ps), t3 = shuffle8(k, in[2], in[3], hi_ps);
	out[0] = shuffle8(k, t0, t2, lo_pd);
	out[1] = shuffle8(k, t0, t2, hi_pd);
	out[2] = shuffle8(k, t1, t3, lo_pd);
	out[3] = shuffle8(k, t1, t3, hi_pd);
}

/* d[j] (j < nj <= 4) = element j of 8 tiles' quads, lane L's at pl[at[L]]
 * (NULL: zeros): vector v is made of the quads of lanes v and v + 4 (two
 * 4-lane loads), so that the transpose leaves the lanes in order. */
static void quad_columns(cg_kb *k, LLVMValueRef pl, const LLVMValueRef *at, int nj, LLVMValueRef *d)
{
	static const int concat[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	LLVMTypeRef q = LLVMVectorType(k->real, 4);
	LLVMValueRef x[4], t[4], h[2];
	for (int v = 0; v < 4; v++) {
		for (int g = 0; g < 2; g++) {
			if (!at[4 * g + v]) {
				h[g] = LLVMConstNull(q);
				continue;
			}
			h[g] = LLVMBuildLoad2(k->b, q, cg_gep(k, NULL, pl, at[4 * g + v]), "");
			LLVMSetAlignment(h[g], (unsigned)ir_dtype_size(k->dt));
		}
		x[v] = shuffle8(k, h[0], h[1], concat);
	}
	transpose_halves(k, x, t);
	for (int j = 0; j < nj; j++)
		d[j] = t[j];
}

/* quad_columns of 8 consecutive tiles, tile l's quad at pl[at + 4l]: the
 * 32 elements pick()'s four loads read. */
static void quad_run(cg_kb *k, LLVMValueRef pl, LLVMValueRef at, int nj, LLVMValueRef *d)
{
	LLVMValueRef off[8];
	for (int l = 0; l < 8; l++)
		off[l] = cg_iadd(k, at, cg_i64(k, 4 * l));
	quad_columns(k, pl, off, nj, d);
}

/* The inverse, for an output row: the quads of lanes L and L + 1 of the
 * tiles' 4 columns v[0..4) side by side (lanes from `end` on are outside
 * the row: the one of L instead, as those output lanes are not stored).
 * The transposes of one row's calls are the same instructions, which LLVM
 * merges. */
static LLVMValueRef quad_pair(cg_kb *k, const LLVMValueRef *v, int L, int end)
{
	LLVMValueRef y[4];
	int idx[8], L1 = L + 1 < end ? L + 1 : L;
	transpose_halves(k, v, y); /* y[u]: the quads of lanes u and u + 4 */
	for (int j = 0; j < 4; j++) {
		idx[j] = 4 * (L / 4) + j;
		idx[4 + j] = 8 + 4 * (L1 / 4) + j;
	}
	return shuffle8(k, y[L % 4], y[L1 % 4], idx);
}

/* Elements (i, j) of the n x n patches of tile row ty (at row0 of the
 * padded plane pl, rows of wq) for tiles [q0, q0 + vw), as vectors over the
 * tiles: element j of tile l is at m·l + j, picked from native-width loads
 * at m·(j / m) (one shift serves m columns).  The loads run past the row,
 * and past the plane into the pad's slack. */
static void patch_row(cg_kb *k, const cg_wino *w, int n, LLVMValueRef pl, LLVMValueRef row, int64_t q0, LLVMValueRef *d)
{
	int m = w->t->m, vw = lanes_of(k);
	for (int s = 0; s < n; s += m) {
		LLVMValueRef at = cg_iadd(k, row, cg_i64(k, m * q0 + s)), ld[4];
		if (by_quads(k, w)) {
			quad_run(k, pl, at, n - s < m ? n - s : m, d + s);
			continue;
		}
		for (int c = 0; c < m; c++)
			ld[c] = cg_vload(k, vw, pl, cg_iadd(k, at, cg_i64(k, c * vw)), vw);
		for (int j = s; j < n && j < s + m; j++) {
			int idx[CG_WIDEST];
			for (int l = 0; l < vw; l++)
				idx[l] = m * l + j - s;
			d[j] = pick(k, ld, m, idx, vw);
		}
	}
}

static void patches(cg_kb *k, const cg_wino *w, int n, LLVMValueRef pl, LLVMValueRef row0, int64_t q0, LLVMValueRef *d)
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
static void transform_row(cg_kb *k, const cg_wino *w, int n, cg_cmat l, LLVMValueRef pl, LLVMValueRef row0,
	LLVMValueRef dst, int64_t ds, LLVMValueRef dst0)
{
	int a = w->t->a, vw = lanes_of(k);
	for (int64_t q0 = 0; q0 < w->tw; q0 += vw) {
		LLVMValueRef d[36], out[36];
		patches(k, w, n, pl, row0, q0, d);
		sandwich(k, l, l, d, n, n, true, out);
		for (int e = 0; e < a * a; e++)
			cg_vstore(k, dst, cg_iadd(k, dst0, cg_i64(k, e * ds + q0)), out[e], vw);
	}
}

/* ---- row sums carried from one tile row to the next --------------------- */

/* Tile row ty's patches share their first two rows with the last two of
 * tile row ty - 1's (a = m + 2): so when the row sums (d·B, per patch
 * row, of every vector of the tile row) of those two rows fit in the
 * loop's carried values, they are kept from one tile row to the next, and
 * each tile row loads, picks and sums m patch rows, not a.  The same sums
 * of the same elements as sandwich(), so the same V. */
static bool rows_carried(const cg_kb *k, const cg_wino *w)
{
	int64_t vw = lanes_of(k), nq = (w->tw + vw - 1) / vw;
	return nq * 2 * w->t->a <= CG_MAX_CARRY;
}

/* The row sums of patch row `row` (an offset in pl) of the tiles [q0, q0 + vw). */
static void row_sums(cg_kb *k, const cg_wino *w, LLVMValueRef pl, LLVMValueRef row, int64_t q0, LLVMValueRef *h)
{
	const cg_wino_tf *t = w->t;
	LLVMValueRef d[6];
	patch_row(k, w, t->a, pl, row, q0, d);
	apply(k, cg_cmat_plain(&t->bt[0][0], t->a, 6), d, t->a, true, h);
}

/* V for tile rows [ty0, ty0 + n) of padded plane pl, into dst (row r at
 * col0 + r·tw, the matrices ds apart), the row sums of two patch rows
 * carried from each tile row to the next. */
static void transform_rows_carried(cg_kb *k, const cg_wino *w, LLVMValueRef pl, LLVMValueRef ty0, int64_t n,
	LLVMValueRef dst, int64_t ds, LLVMValueRef col0)
{
	const cg_wino_tf *t = w->t;
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
	LLVMValueRef dst0 = cg_iadd(k, col0, cg_imul(k, r, cg_i64(k, w->tw)));
	for (int q = 0; q < nq; q++) {
		LLVMValueRef rs[36], col[6], out[36];
		for (int x = 0; x < 2 * a; x++)
			rs[x] = h[q * 2 * a + x];
		for (int i = 2; i < a; i++)
			row_sums(k, w, pl, cg_iadd(k, row0, cg_i64(k, i * w->wq)), (int64_t)q * vw, rs + i * a);
		for (int j = 0; j < a; j++) {
			LLVMValueRef res[6];
			for (int p = 0; p < a; p++)
				col[p] = rs[p * a + j];
			apply(k, cg_cmat_plain(&t->bt[0][0], a, 6), col, a, true, res);
			for (int i = 0; i < a; i++)
				out[i * a + j] = res[i];
		}
		for (int e = 0; e < a * a; e++)
			cg_vstore(k, dst, cg_iadd(k, dst0, cg_i64(k, e * ds + (int64_t)q * vw)), out[e], vw);
		for (int x = 0; x < 2 * a; x++)
			next[q * 2 * a + x] = rs[(a - 2) * a + x];
	}
	cg_keep_loop(&lr);
	cg_end_for(k, &lr, next);
}

/* ---- narrow planes: several tile rows a vector ----------------------------- */

/* Tile rows a vector holds: a tile row narrower than half a vector (7x7
 * and 8x8 planes have 4 tiles a row of F(2x2), 14x14 7) leaves most of
 * its lanes idle, so the transforms take vw / tw tile rows at once, tile
 * row q of the group in lanes [q·tw, q·tw + tw).  V and M are unchanged
 * (one column per tile, rows one after another): only the grouping of
 * their columns into vectors differs, and each value is the same sum of
 * the same elements, so the results are the same bit for bit. */
static int packed_rows(const cg_kb *k, const cg_wino *w)
{
	int64_t vw = lanes_of(k);
	return 2 * w->tw <= vw ? (int)(vw / w->tw) : 1;
}

/* dst[e·ds + dst0 + q·tw + x] = (L d L^T)[e] for the n x n patches d of
 * the tiles x of tile rows ty + q, q < nq (nq <= packed_rows), of padded
 * plane pl: transform_row's results for nq tile rows, as one vector.  A
 * patch row of one tile row is loaded from its start, nl vectors (past the
 * row, as transform_row's loads); lanes past the nq rows are zero. */
static void transform_group(cg_kb *k, const cg_wino *w, int n, cg_cmat l, LLVMValueRef pl, LLVMValueRef ty, int nq,
	LLVMValueRef dst, int64_t ds, LLVMValueRef dst0)
{
	int m = w->t->m, a = w->t->a, vw = lanes_of(k), nl = (int)((m * (w->tw - 1) + n + vw - 1) / vw);
	LLVMValueRef d[36], out[36], ld[3 * CG_WIDEST];
	IR_ASSERT(nq * nl <= 3 * CG_WIDEST);
	LLVMValueRef row0 = cg_imul(k, ty, cg_i64(k, m * w->wq));
	for (int i = 0; i < n; i++) {
		if (by_quads(k, w)) {
			/* lane x: tile x % tw of tile row x / tw, within the loads below */
			IR_ASSERT(m * (w->tw - 1) + (n > m ? m : 0) + 4 <= nl * vw);
			for (int s = 0; s < n; s += m) {
				LLVMValueRef at[8];
				for (int x = 0; x < 8; x++) {
					int q = (int)(x / w->tw), t = (int)(x % w->tw);
					at[x] = q < nq ? cg_iadd(k, row0, cg_i64(k, (m * q + i) * w->wq + m * t + s)) : NULL;
				}
				quad_columns(k, pl, at, n - s < m ? n - s : m, d + i * n + s);
			}
			continue;
		}
		for (int q = 0; q < nq; q++)
			for (int c = 0; c < nl; c++)
				ld[q * nl + c] = cg_vload(k, vw, pl, cg_iadd(k, row0, cg_i64(k, (m * q + i) * w->wq + c * vw)), vw);
		for (int j = 0; j < n; j++) {
			int idx[CG_WIDEST];
			for (int x = 0; x < vw; x++) {
				int q = (int)(x / w->tw), t = (int)(x % w->tw);
				idx[x] = q < nq ? q * nl * vw + m * t + j : -1;
			}
			d[i * n + j] = pick(k, ld, nq * nl, idx, vw);
		}
	}
	sandwich(k, l, l, d, n, n, true, out);
	for (int e = 0; e < a * a; e++)
		cg_vstore(k, dst, cg_iadd(k, dst0, cg_i64(k, e * ds)), out[e], vw);
}

/* transform_row for tile rows [ty0, ty0 + rows), into dst's columns from
 * col0 (tile row r at col0 + r·tw), packed_rows of them a vector. */
static void transform_packed(cg_kb *k, const cg_wino *w, int n, cg_cmat l, LLVMValueRef pl, LLVMValueRef ty0,
	int64_t rows, LLVMValueRef dst, int64_t ds, LLVMValueRef col0)
{
	int pk = packed_rows(k, w);
	int64_t full = rows / pk, rest = rows % pk;
	if (full > 0) {
		cg_loop lg;
		LLVMValueRef gr = cg_imul(k, cg_for(k, &lg, cg_i64(k, 0), cg_i64(k, full)), cg_i64(k, pk));
		transform_group(k, w, n, l, pl, cg_iadd(k, ty0, gr), pk, dst, ds,
			cg_iadd(k, col0, cg_imul(k, gr, cg_i64(k, w->tw))));
		cg_keep_loop(&lg);
		cg_end_for(k, &lg, NULL);
	}
	if (rest > 0)
		transform_group(k, w, n, l, pl, cg_iadd(k, ty0, cg_i64(k, full * pk)), (int)rest, dst, ds,
			cg_iadd(k, col0, cg_i64(k, full * pk * w->tw)));
}


/* Vector c (< m) of v[0..m) interleaved: lane m·l + j of the
 * interleaving is lane l of v[j]. */
static LLVMValueRef interleave(cg_kb *k, const LLVMValueRef *v, int m, int vw, int c)
{
	int idx[CG_WIDEST];
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
static void rows_out(cg_kb *k, const cg_wino *w, LLVMValueRef mrow, LLVMValueRef y, LLVMValueRef sy, LLVMValueRef ty,
	int rows)
{
	const cg_wino_tf *t = w->t;
	int a = t->a, m = t->m, vw = lanes_of(k);
	LLVMValueRef src0 = cg_imul(k, sy, cg_i64(k, w->tw));
	LLVMValueRef dst0 = cg_imul(k, ty, cg_i64(k, m * w->wo));
	for (int64_t q0 = 0; q0 < w->tw; q0 += vw) {
		LLVMValueRef in[36], out[16];
		for (int e = 0; e < a * a; e++)
			in[e] = cg_vload(k, vw, mrow, cg_iadd(k, src0, cg_i64(k, e * w->ms + q0)), vw);
		sandwich(k, cg_cmat_plain(&t->at[0][0], m, 6), cg_cmat_plain(&t->at[0][0], m, 6), in, a, a, true, out);
		for (int i = 0; i < rows; i++)
			for (int c = 0; c < m && w->wo - m * q0 - c * vw > 0; c++)
				cg_vstore(k, y, cg_iadd(k, dst0, cg_i64(k, i * w->wo + m * q0 + c * vw)),
					by_quads(k, w) ? quad_pair(k, out + i * m, 2 * c, vw) :
							 interleave(k, out + i * m, m, vw, c),
					(int)(w->wo - m * q0 - c * vw));
	}
}

/* rows_out for the nq tile rows ty + q (q < nq <= packed_rows) whose M
 * columns start at sy·tw, as one vector of tiles: output row m·(ty + q) + i
 * (i < m, or `last` in the group's last tile row) interleaved from lanes
 * [q·tw, q·tw + tw) of the results, stored masked at wo. */
static void rows_out_group(cg_kb *k, const cg_wino *w, LLVMValueRef mrow, LLVMValueRef y, LLVMValueRef sy,
	LLVMValueRef ty, int nq, int last)
{
	const cg_wino_tf *t = w->t;
	int a = t->a, m = t->m, vw = lanes_of(k);
	LLVMValueRef src0 = cg_imul(k, sy, cg_i64(k, w->tw)), dst0 = cg_imul(k, ty, cg_i64(k, m * w->wo));
	LLVMValueRef in[36], out[16];
	for (int e = 0; e < a * a; e++)
		in[e] = cg_vload(k, vw, mrow, cg_iadd(k, src0, cg_i64(k, e * w->ms)), vw);
	sandwich(k, cg_cmat_plain(&t->at[0][0], m, 6), cg_cmat_plain(&t->at[0][0], m, 6), in, a, a, true, out);
	for (int q = 0; q < nq; q++)
		for (int i = 0; i < (q == nq - 1 ? last : m); i++)
			for (int64_t c0 = 0; c0 < w->wo; c0 += vw) {
				if (by_quads(k, w)) {
					cg_vstore(k, y, cg_iadd(k, dst0, cg_i64(k, (m * q + i) * w->wo + c0)),
						quad_pair(k, out + i * m, q * (int)w->tw + (int)(c0 / m), (int)(q * w->tw + w->tw)),
						(int)(w->wo - c0));
					continue;
				}
				int idx[CG_WIDEST];
				for (int r = 0; r < vw; r++) {
					int64_t x = c0 + r;
					idx[r] = x < m * w->tw ? (int)((x % m) * vw + q * w->tw + x / m) : -1;
				}
				cg_vstore(k, y, cg_iadd(k, dst0, cg_i64(k, (m * q + i) * w->wo + c0)), pick(k, out + i * m, m, idx, vw),
					(int)(w->wo - c0));
			}
}

/* rows_out a tile row at a time, or rows_out_group packed_rows at a time. */
void cg_wino_chunk_out(cg_kb *k, const cg_wino *w, LLVMValueRef mrow, LLVMValueRef y, LLVMValueRef ty0, int64_t n,
	int last)
{
	int m = w->t->m, pk = packed_rows(k, w);
	int64_t groups = n / pk, rest = n % pk;
	/* groups of pk rows with m output rows each, then the group holding the last row */
	int64_t plain_groups = rest == 0 && last != m ? groups - 1 : groups;
	cg_loop lg;
	if (plain_groups > 0) {
		LLVMValueRef gr = cg_imul(k, cg_for(k, &lg, cg_i64(k, 0), cg_i64(k, plain_groups)), cg_i64(k, pk));
		if (pk == 1)
			rows_out(k, w, mrow, y, gr, cg_iadd(k, ty0, gr), m);
		else
			rows_out_group(k, w, mrow, y, gr, cg_iadd(k, ty0, gr), pk, m);
		cg_keep_loop(&lg);
		cg_end_for(k, &lg, NULL);
	}
	int64_t r0 = plain_groups * pk;
	if (r0 == n)
		return;
	LLVMValueRef sy = cg_i64(k, r0);
	if (pk == 1)
		rows_out(k, w, mrow, y, sy, cg_iadd(k, ty0, sy), last);
	else
		rows_out_group(k, w, mrow, y, sy, cg_iadd(k, ty0, sy), (int)(n - r0), last);
}

/* ---- the entry points ------------------------------------------------------ */

void cg_wino_transform_rows(cg_kb *k, const cg_wino *w, bool z, LLVMValueRef pl, LLVMValueRef ty0, int64_t rows,
	LLVMValueRef dst, int64_t ds, LLVMValueRef col0)
{
	const cg_wino_tf *t = w->t;
	int n = z ? t->m : t->a;
	cg_cmat l = z ? cg_cmat_transposed(&t->at[0][0], t->a, 6) : cg_cmat_plain(&t->bt[0][0], t->a, 6);
	if (packed_rows(k, w) > 1) {
		transform_packed(k, w, n, l, pl, ty0, rows, dst, ds, col0);
		return;
	}
	if (!z && rows_carried(k, w)) {
		transform_rows_carried(k, w, pl, ty0, rows, dst, ds, col0);
		return;
	}
	cg_loop lr;
	LLVMValueRef r = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, rows));
	transform_row(k, w, n, l, pl, cg_imul(k, cg_iadd(k, ty0, r), cg_i64(k, t->m * w->wq)), dst, ds,
		cg_iadd(k, col0, cg_imul(k, r, cg_i64(k, w->tw))));
	cg_keep_loop(&lr);
	cg_end_for(k, &lr, NULL);
}
