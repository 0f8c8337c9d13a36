/* winograd.h: internal to the Winograd convolutions (Lavin and Gray,
 * 2016): k_conv_winograd.c makes the kernels (geometry, workspace, the
 * products, chunks, threads), k_conv_winograd_tiles.c the transforms of
 * the tiles, in whole vectors.  Their opening comments say how. */
#ifndef REVC_CG_WINOGRAD_H
#define REVC_CG_WINOGRAD_H

#include "internal.h"

/* F(m x m, 3x3)'s constant matrices B^T (a x a), G (a x 3) and A^T
 * (m x a), a = m + 2: F(2x2) or F(4x4). */
typedef struct {
	int m, a; /* output tile, input tile */
	double bt[6][6], g[6][3], at[4][6];
} cg_wino_tf;

const cg_wino_tf *cg_wino_tf_for(int m);

/* A constant matrix: element (i, j) at c[i·rs + j·cs], so a table read
 * transposed is the same table with the strides swapped. */
typedef struct {
	const double *c;
	int rows, rs, cs;
} cg_cmat;

static inline cg_cmat cg_cmat_plain(const double *c, int rows, int rs)
{
	return (cg_cmat){c, rows, rs, 1};
}

static inline cg_cmat cg_cmat_transposed(const double *c, int cols, int rs)
{
	return (cg_cmat){c, cols, 1, rs};
}

/* out = L · in · R^T for in rows x cols (row-major, as values, reals or
 * vectors of them): L has `rows` columns, R `cols`; no multiplication by
 * ±1 or 0. */
void cg_wino_sandwich(cg_kb *k, cg_cmat l, cg_cmat r, const LLVMValueRef *in, int rows, int cols,
	LLVMValueRef *out);

/* Vectors are at most 16 floats (AVX-512): the slack that whole-vector
 * loads and stores may run past a plane into, so that the workspace does
 * not depend on the CPU. */
#define CG_WIDEST 16

/* A Winograd convolution's geometry (wino_of in k_conv_winograd.c).  V and
 * M keep one column per tile, an image's tile rows one after another. */
typedef struct {
	const cg_wino_tf *t;
	int64_t cin, cout;      /* planes read and written */
	int64_t h, w;           /* source planes */
	int64_t top, left;      /* their place in the padded planes */
	int64_t ho, wo;         /* output planes */
	int64_t th, tw, tiles;  /* tiles down, across, per plane */
	int64_t extent;         /* parallel indices: index i images [i·n/E, (i+1)·n/E) */
	int64_t imgs, few;      /* the most and the fewest images of an index */
	int64_t cols;           /* the tiles of imgs images */
	int64_t vs, ms;         /* strides of V's and M's a² matrices */
	int64_t hp, wq;         /* a padded plane: whole tiles plus the window */
	bool fused;             /* conv2d, conv2d_dx: the stages done per chunk */
	int64_t rows, group;    /* fused: a chunk's tile rows of each image, and images */
	int64_t cc, ldv;        /* fused: M's columns per plane, and V's (with slack) */
} cg_wino;

/* dst[e·ds + col0 + r·tw + x] = (L d L^T)[e] for the n x n patches d of
 * the tiles x of tile rows ty0 + r (r < rows) of the padded plane pl
 * (rows of wq): V = B^T d B from x's a x a patches, or (z) for conv2d_dw
 * Z = A dY A^T from dY's m x m tiles.  The stores are whole vectors that
 * run past the rows' tiles into the next ones' columns (so rows, planes
 * and images must be done in order) and, for the last, into ds's slack;
 * the loads run past pl's rows into the pad's slack. */
void cg_wino_transform_rows(cg_kb *k, const cg_wino *w, bool z, LLVMValueRef pl, LLVMValueRef ty0, int64_t rows,
	LLVMValueRef dst, int64_t ds, LLVMValueRef col0);

/* Y = A^T M A for output tile rows ty0 + r (r < n) of one image: M's
 * plane o at mrow (the image's first column, tile row r at r·tw, the a²
 * matrices ms apart), into output plane y (rows of wo, stored masked at
 * wo).  The last tile row has `last` output rows (m but for a plane's
 * partial last row). */
void cg_wino_chunk_out(cg_kb *k, const cg_wino *w, LLVMValueRef mrow, LLVMValueRef y, LLVMValueRef ty0, int64_t n,
	int last);

#endif
