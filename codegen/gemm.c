/* gemm.c: register-blocked matrix-product loops in LLVM IR, for the
 * convolutions' GEMMs.
 *
 * OpenBLAS copies ("packs") both operands of every call into its own
 * layout before multiplying, and a convolution's unfolded columns are the
 * big operand: packing them costs about as much as unfolding them did.
 * These loops read the operands where they are instead.  The block is
 * MR rows by two vectors of columns, MR·2 accumulators held in registers
 * across the whole reduction; each step broadcasts MR elements of A, loads
 * two vectors of B and does MR·2 fused multiply-adds.  Vectors are as wide
 * as those of the CPU the code is for (cg_options.cpu: 64 bytes with
 * AVX-512, 32 with AVX, else 16), and MR is chosen so the accumulators and
 * operands fit its vector registers.  Column tails use
 * masked loads and stores, so any width works without a scalar loop.
 *
 * Results may differ from BLAS's in the last bits (another summation
 * order, fused multiply-adds). */
#include <string.h>

#include "internal.h"

/* Vector width in elements, and rows per block. */
static int lanes(const cg_kb *k)
{
	return k->m->vec_bytes / (int)ir_dtype_size(k->dt);
}

static int block_rows(const cg_kb *k)
{
	return k->m->vec_bytes >= 64 ? 8 : 4;
}

static LLVMTypeRef vec_ty(const cg_kb *k)
{
	return LLVMVectorType(k->real, (unsigned)lanes(k));
}

/* A mask with lanes lo .. hi-1 on. */
static LLVMValueRef lane_range(cg_kb *k, int64_t lo, int64_t hi)
{
	LLVMValueRef bits[64];
	for (int i = 0; i < lanes(k); i++)
		bits[i] = LLVMConstInt(k->m->i1, i >= lo && i < hi, 0);
	return LLVMConstVector(bits, (unsigned)lanes(k));
}

/* Loads the vector at p, lanes lo .. hi-1 of it (the others zero and not
 * read, so they may lie outside the operand). */
static LLVMValueRef vload_lanes(cg_kb *k, LLVMValueRef p, int64_t lo, int64_t hi)
{
	if (lo <= 0 && hi >= lanes(k)) {
		LLVMValueRef v = LLVMBuildLoad2(k->b, vec_ty(k), p, "");
		LLVMSetAlignment(v, (unsigned)ir_dtype_size(k->dt));
		return v;
	}
	if (hi <= lo || hi <= 0 || lo >= lanes(k))
		return LLVMConstNull(vec_ty(k));
	LLVMTypeRef over[2] = {vec_ty(k), k->m->ptr}, fty;
	LLVMValueRef f = cg_intrinsic(k, "llvm.masked.load", over, 2, &fty);
	LLVMValueRef args[4] = {p, LLVMConstInt(k->m->i32, (unsigned long long)ir_dtype_size(k->dt), 0),
		lane_range(k, lo, hi), LLVMConstNull(vec_ty(k))};
	return LLVMBuildCall2(k->b, fty, f, args, 4, "");
}

/* Loads a vector at base[i] (n of its lanes, the rest zero, when n < lanes). */
static LLVMValueRef vload(cg_kb *k, LLVMValueRef base, LLVMValueRef i, int n)
{
	return vload_lanes(k, cg_gep(k, NULL, base, i), 0, n);
}

static LLVMValueRef splat(cg_kb *k, LLVMValueRef x)
{
	LLVMValueRef v = LLVMBuildInsertElement(k->b, LLVMGetPoison(vec_ty(k)), x, LLVMConstInt(k->m->i32, 0, 0), "");
	LLVMTypeRef mask_ty = LLVMVectorType(k->m->i32, (unsigned)lanes(k));
	return LLVMBuildShuffleVector(k->b, v, LLVMGetPoison(vec_ty(k)), LLVMConstNull(mask_ty), "");
}

/* a·b + c on vectors. */
static LLVMValueRef vfma(cg_kb *k, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMTypeRef over = vec_ty(k), fty;
	LLVMValueRef f = cg_intrinsic(k, "llvm.fmuladd", &over, 1, &fty);
	LLVMValueRef args[3] = {a, b, c};
	return LLVMBuildCall2(k->b, fty, f, args, 3, "");
}

/* sums[i] = the sum of v[i]'s lanes (i < n <= CG_MAX_CARRY), all n at
 * once: two vectors of segments w lanes wide fold into one of segments
 * w / 2 wide, each segment's halves added and the two vectors' segments
 * side by side (two shuffles and an add), until segments are one lane.
 * Sixteen vectors of 16 lanes take 15 folds, where summing each alone
 * takes 4 apiece: the filter gradient's products reduce along columns,
 * and at fashion's 7x7 planes (208 columns an index) these sums were a
 * large part of them.  owner[j][s]: whose sum segment s of vector j is
 * (-1: a zero vector's). */
static void vsums(cg_kb *k, const LLVMValueRef *v, int n, LLVMValueRef *sums)
{
	int L = lanes(k), nv = n, nseg = 1;
	LLVMValueRef cur[CG_MAX_CARRY], lo[64], hi[64];
	int owner[CG_MAX_CARRY][64];
	IR_ASSERT(n <= CG_MAX_CARRY && L <= 64);
	for (int i = 0; i < n; i++) {
		cur[i] = v[i];
		owner[i][0] = i;
	}
	for (int w = L; w > 1; w /= 2, nseg *= 2) {
		int half = w / 2, folded = (nv + 1) / 2;
		for (int l = 0; l < L; l++) {
			int seg = l / half, src = seg % 2 ? L : 0, at = src + seg / 2 * w + l % half;
			lo[l] = LLVMConstInt(k->m->i32, (unsigned long long)at, 0);
			hi[l] = LLVMConstInt(k->m->i32, (unsigned long long)(at + half), 0);
		}
		for (int p = 0; p < folded; p++) {
			bool pair = 2 * p + 1 < nv;
			LLVMValueRef x = cur[2 * p], y = pair ? cur[2 * p + 1] : LLVMConstNull(vec_ty(k));
			LLVMValueRef a = LLVMBuildShuffleVector(k->b, x, y, LLVMConstVector(lo, (unsigned)L), "");
			LLVMValueRef b = LLVMBuildShuffleVector(k->b, x, y, LLVMConstVector(hi, (unsigned)L), "");
			int mine[64];
			for (int g = 0; g < nseg; g++) {
				mine[2 * g] = owner[2 * p][g];
				mine[2 * g + 1] = pair ? owner[2 * p + 1][g] : -1;
			}
			cur[p] = LLVMBuildFAdd(k->b, a, b, "");
			memcpy(owner[p], mine, sizeof(int) * (size_t)(2 * nseg));
		}
		nv = folded;
	}
	for (int p = 0; p < nv; p++)
		for (int l = 0; l < L; l++)
			if (owner[p][l] >= 0)
				sums[owner[p][l]] = LLVMBuildExtractElement(k->b, cur[p], LLVMConstInt(k->m->i32,
					(unsigned long long)l, 0), "");
}

/* ---- rows of padded and phase-split planes --------------------------------- */

void cg_gather_row(cg_kb *k, LLVMValueRef dst, LLVMValueRef src, int64_t n, int s, int64_t off, int64_t w,
	LLVMValueRef sc, LLVMValueRef shift)
{
	IR_ASSERT(s == 1 || s == 2);
	int64_t L = lanes(k);
	for (int64_t j0 = 0; j0 < n; j0 += L) {
		int64_t cnt = n - j0 < L ? n - j0 : L;
		/* Source elements e = s·j + off of this vector's j; those outside
		 * [0, w) are zero lanes, not read. */
		int64_t e0 = s * j0 + off, last = e0 + s * (cnt - 1);
		LLVMValueRef v[2];
		for (int h = 0; h < s; h++) {
			int64_t at = e0 + h * L, lo = -at, hi = (last < w - 1 ? last + 1 : w) - at;
			v[h] = vload_lanes(k, cg_gep(k, NULL, src, cg_i64(k, at)), lo, hi);
		}
		LLVMValueRef x = v[0];
		if (s == 2) {
			/* Every other element of the two vectors. */
			LLVMValueRef idx[64];
			for (int i = 0; i < L; i++)
				idx[i] = LLVMConstInt(k->m->i32, (unsigned long long)(2 * i), 0);
			x = LLVMBuildShuffleVector(k->b, v[0], v[1], LLVMConstVector(idx, (unsigned)L), "");
		}
		if (sc) { /* a prologue on the lanes whose source is in [0, w) */
			int64_t a = e0 >= 0 ? 0 : (-e0 + s - 1) / s, b = w - 1 - e0 < 0 ? 0 : (w - 1 - e0) / s + 1;
			x = cg_conv_prologue_vec(k, x, a, b < cnt ? b : cnt, sc, shift);
		}
		cg_vstore(k, dst, cg_i64(k, j0), x, (int)cnt);
	}
}

void cg_interleave_row(cg_kb *k, LLVMValueRef dst, LLVMValueRef even, LLVMValueRef odd, int64_t n)
{
	int64_t L = lanes(k);
	for (int64_t d0 = 0; d0 < n; d0 += 2 * L) {
		/* Elements d0 .. d0+2L-1 of dst: L of each source, those past the
		 * row's end not read. */
		int64_t ne = (n - d0 + 1) / 2, no = (n - d0) / 2;
		LLVMValueRef at = cg_i64(k, d0 / 2);
		LLVMValueRef e = vload(k, even, at, (int)(ne < L ? ne : L)), o = vload(k, odd, at, (int)(no < L ? no : L));
		for (int64_t h = 0; h < 2 && d0 + h * L < n; h++) {
			LLVMValueRef idx[64];
			for (int64_t i = 0; i < L; i++) {
				int64_t j = h * L + i; /* lane j/2 of even (j even) or odd */
				idx[i] = LLVMConstInt(k->m->i32, (unsigned long long)(j / 2 + (j % 2) * L), 0);
			}
			LLVMValueRef x = LLVMBuildShuffleVector(k->b, e, o, LLVMConstVector(idx, (unsigned)L), "");
			int64_t cnt = n - d0 - h * L;
			cg_vstore(k, dst, cg_i64(k, d0 + h * L), x, (int)(cnt < L ? cnt : L));
		}
	}
}

/* Blocks of `size` over [0, total): a loop over the full ones (block
 * start passed to emit), then the short last one, both emitted once. */
typedef void (*block_fn)(cg_kb *k, const void *g, LLVMValueRef start, int size, const void *extra);

static void blocks(cg_kb *k, int64_t total, int size, block_fn emit, const void *g, const void *extra)
{
	int64_t full = total / size, rest = total - full * size;
	if (full > 0) {
		cg_loop l;
		LLVMValueRef b = cg_for(k, &l, cg_i64(k, 0), cg_i64(k, full));
		emit(k, g, cg_imul(k, b, cg_i64(k, size)), size, extra);
		cg_keep_loop(&l);
		cg_end_for(k, &l, NULL);
	}
	if (rest > 0)
		emit(k, g, cg_i64(k, full * size), (int)rest, extra);
}

/* ---- C = A·B, B and C contiguous along columns ----------------------------- */

typedef struct {
	LLVMValueRef p; /* first column */
	int nv, tail;   /* vectors, and lanes of the last one */
} columns;

static int64_t tap(const int64_t *offsets, int t)
{
	return offsets ? offsets[t] : 0;
}

/* One block: rows m0 .. m0+mr of C, the columns of c. */
static void block_ab(cg_kb *k, const void *gp, LLVMValueRef m0, int mr, const void *cp)
{
	const cg_ab *g = gp;
	const columns *c = cp;
	int L = lanes(k), nv = c->nv, taps = g->taps > 0 ? g->taps : 1;
	LLVMValueRef zero = LLVMConstNull(vec_ty(k));
	LLVMValueRef arow[8];
	for (int m = 0; m < mr; m++)
		arow[m] = cg_gep(k, NULL, g->a, cg_imul(k, cg_iadd(k, m0, cg_i64(k, m)), cg_i64(k, g->a_rs)));
	cg_loop lr;
	LLVMValueRef r = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, g->r));
	LLVMValueRef acc[CG_MAX_CARRY], bv[2];
	for (int i = 0; i < mr * nv; i++)
		acc[i] = cg_carry(k, &lr, zero);
	LLVMValueRef brow = cg_iadd(k, cg_imul(k, r, cg_i64(k, g->ldb)), c->p);
	LLVMValueRef acol = cg_imul(k, r, cg_i64(k, g->a_cs));
	for (int t = 0; t < taps; t++) {
		LLVMValueRef bt = cg_iadd(k, brow, cg_i64(k, tap(g->b_tap, t)));
		for (int v = 0; v < nv; v++)
			bv[v] = vload(k, g->b, cg_iadd(k, bt, cg_i64(k, v * L)), v == nv - 1 ? c->tail : L);
		LLVMValueRef at = cg_iadd(k, acol, cg_i64(k, tap(g->a_tap, t)));
		for (int m = 0; m < mr; m++) {
			LLVMValueRef a = splat(k, cg_ld(k, arow[m], at));
			for (int v = 0; v < nv; v++)
				acc[m * nv + v] = vfma(k, a, bv[v], acc[m * nv + v]);
		}
	}
	cg_end_for(k, &lr, acc);
	for (int m = 0; m < mr; m++) {
		LLVMValueRef row = cg_iadd(k, m0, cg_i64(k, m));
		LLVMValueRef crow = cg_iadd(k, cg_imul(k, row, cg_i64(k, g->ldc)), c->p);
		for (int v = 0; v < nv; v++)
			cg_vstore(k, g->c, cg_iadd(k, crow, cg_i64(k, v * L)), lr.out[m * nv + v], v == nv - 1 ? c->tail : L);
	}
}

/* Two vectors of columns from p on. */
static void pair_ab(cg_kb *k, const void *gp, LLVMValueRef p, int size, const void *extra)
{
	(void)extra;
	const cg_ab *g = gp;
	int L = lanes(k);
	columns c = {p, size > L ? 2 : 1, size > L ? size - L : size};
	blocks(k, g->m, block_rows(k), block_ab, g, &c);
}

void cg_gemm_ab(cg_kb *k, const cg_ab *g)
{
	IR_ASSERT(g->taps <= CG_MAX_TAPS);
	blocks(k, g->p, 2 * lanes(k), pair_ab, g, NULL);
}

/* ---- C += A·B^T, reducing along the contiguous columns of both ----------- */

typedef struct {
	LLVMValueRef count; /* segments */
	LLVMValueRef m0;
	int mr;
} rows;

/* The offset of row (j / taps, tap j % taps) of B, j a value. */
static LLVMValueRef tap_row(cg_kb *k, const cg_abt *g, int taps, LLVMValueRef j)
{
	if (taps == 1)
		return cg_imul(k, j, cg_i64(k, g->ldb));
	LLVMValueRef t = cg_irem(k, j, cg_i64(k, taps)), off = cg_i64(k, tap(g->b_tap, 0));
	for (int u = 1; u < taps; u++)
		off = LLVMBuildSelect(k->b, LLVMBuildICmp(k->b, LLVMIntEQ, t, cg_i64(k, u), ""),
			cg_i64(k, tap(g->b_tap, u)), off, "");
	return cg_iadd(k, cg_imul(k, cg_idiv(k, j, cg_i64(k, taps)), cg_i64(k, g->ldb)), off);
}

/* One block of C: rows rw->m0 .. +rw->mr, columns j0 .. j0+nb, column j
 * being B row j / taps at tap j % taps (so a block may hold some taps of
 * one row and some of the next). */
static void block_abt(cg_kb *k, const void *gp, LLVMValueRef j0, int nb, const void *rp)
{
	const cg_abt *g = gp;
	const rows *rw = rp;
	int mr = rw->mr, taps = g->taps > 0 ? g->taps : 1;
	int64_t L = lanes(k), full = g->q / L, tail = g->q - full * L;
	LLVMValueRef zero = LLVMConstNull(vec_ty(k));
	LLVMValueRef aoff[8], boff[CG_MAX_CARRY];
	for (int m = 0; m < mr; m++)
		aoff[m] = cg_imul(k, cg_iadd(k, rw->m0, cg_i64(k, m)), cg_i64(k, g->lda));
	for (int n = 0; n < nb; n++)
		boff[n] = tap_row(k, g, taps, cg_iadd(k, j0, cg_i64(k, n)));
	cg_loop li, lq;
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), rw->count);
	LLVMValueRef acc[CG_MAX_CARRY], in[CG_MAX_CARRY], av[8], bv[CG_MAX_CARRY];
	for (int j = 0; j < mr * nb; j++)
		acc[j] = cg_carry(k, &li, zero);
	LLVMValueRef abase = cg_imul(k, i, cg_i64(k, g->a_is)), bbase = cg_imul(k, i, cg_i64(k, g->b_is));
	/* Full vectors along q, then the masked tail. */
	for (int part = 0; part < 2; part++) {
		if (part == 1 && tail == 0)
			break;
		LLVMValueRef off;
		int width = (int)L;
		if (part == 0) {
			LLVMValueRef q = cg_for(k, &lq, cg_i64(k, 0), cg_i64(k, full));
			for (int j = 0; j < mr * nb; j++)
				in[j] = cg_carry(k, &lq, acc[j]);
			off = cg_imul(k, q, cg_i64(k, L));
		} else {
			for (int j = 0; j < mr * nb; j++)
				in[j] = acc[j];
			off = cg_i64(k, full * L);
			width = (int)tail;
		}
		for (int m = 0; m < mr; m++)
			av[m] = vload(k, g->a, cg_iadd(k, cg_iadd(k, abase, aoff[m]), off), width);
		for (int n = 0; n < nb; n++)
			bv[n] = vload(k, g->b, cg_iadd(k, cg_iadd(k, bbase, boff[n]), off), width);
		for (int m = 0; m < mr; m++)
			for (int n = 0; n < nb; n++)
				in[m * nb + n] = vfma(k, av[m], bv[n], in[m * nb + n]);
		if (part == 0) {
			cg_end_for(k, &lq, in);
			for (int j = 0; j < mr * nb; j++)
				acc[j] = lq.out[j];
		} else {
			for (int j = 0; j < mr * nb; j++)
				acc[j] = in[j];
		}
	}
	cg_keep_loop(&li);
	cg_end_for(k, &li, acc);
	LLVMValueRef sums[CG_MAX_CARRY];
	vsums(k, li.out, mr * nb, sums);
	for (int m = 0; m < mr; m++)
		for (int n = 0; n < nb; n++) {
			LLVMValueRef row = cg_imul(k, cg_iadd(k, rw->m0, cg_i64(k, m)), cg_i64(k, g->ldc));
			LLVMValueRef at = cg_iadd(k, row, cg_iadd(k, j0, cg_i64(k, n)));
			cg_st(k, g->c, at, cg_fadd(k, cg_ld(k, g->c, at), sums[m * nb + n]));
		}
}

/* Blocks of mr rows of A by nb columns of C (B rows or their taps).
 * Each step loads mr + nb vectors for mr·nb fused multiply-adds, so the
 * block is as large as the registers allow: with taps (a convolution's
 * filter gradient, whose B loads are mostly unaligned) 4 x 6 of 32 vector
 * registers; with 16, one row of A by all taps of one B row (2 x 6 spilled
 * and ran 1.2-1.3 times slower with AVX2); without taps, 4 x 4 or 4 x 2
 * (Winograd's products). */
static void abt_shape(const cg_kb *k, int taps, int *mr, int *nb)
{
	bool wide = k->m->vec_bytes >= 64;
	if (taps > 1) {
		*mr = wide ? 4 : 1;
		*nb = wide ? 6 : taps;
	} else {
		*mr = 4;
		*nb = wide ? 4 : 2;
	}
}

static void row_abt(cg_kb *k, const void *gp, LLVMValueRef m0, int mr, const void *cp)
{
	const cg_abt *g = gp;
	int taps = g->taps > 0 ? g->taps : 1, bm, bn;
	abt_shape(k, taps, &bm, &bn);
	rows rw = {*(const LLVMValueRef *)cp, m0, mr};
	blocks(k, g->n * taps, bn, block_abt, g, &rw);
}

void cg_gemm_abt(cg_kb *k, const cg_abt *g, LLVMValueRef count)
{
	int bm, bn;
	IR_ASSERT(g->taps <= CG_MAX_TAPS);
	abt_shape(k, g->taps > 0 ? g->taps : 1, &bm, &bn);
	blocks(k, g->m, bm, row_abt, g, &count);
}
