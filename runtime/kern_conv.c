/* kern_conv.c: the reference kernels of conv2d, conv2d_dx and conv2d_dw,
 * lowered to BLAS matrix products through im2col/col2im, one image at a time.
 *
 * Layouts: x [N,C,H,W], w [O,C,KH,KW], y [N,O,Ho,Wo].  For one image the
 * column matrix col [C·KH·KW, Ho·Wo] holds in row (c,p,q), column (i,j) the
 * input element x[c, i·s+p−top, j·s+q−left] (0 outside x), so that
 *     y_n  = w · col                   (conv2d)
 *     col  = wᵀ · dy_n, then col2im    (conv2d_dx: scatter-add back into x)
 *     dw  += dy_n · colᵀ               (conv2d_dw, summed over the batch)
 * The column matrix lives in the workspace: C·KH·KW·Ho·Wo reals, exactly
 * what rt_kernel_workspace (kernels.c) declares.  A 1x1, stride-1, unpadded
 * convolution is a plain product with x itself and needs no workspace.
 *
 * Compiled once per real type (kernels.h).  Preconditions: the node
 * verified, `ws` at least rt_kernel_workspace(n) bytes.  The result never
 * overlaps an operand or the workspace. */
#include <limits.h>

#include <cblas.h>

#include "conv_geom.h"
#include "kernels.h"

#if defined(RT_REAL_F32)
#define GEMM cblas_sgemm
#else
#define GEMM cblas_dgemm
#endif

static blasint bi(int64_t v)
{
	IR_ASSERT(v >= 0 && v <= INT_MAX);
	return (blasint)v;
}

/* Row-major C = op(A)·op(B) + beta·C, C [m,n].  Zero extents are legal. */
static void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const real *A, int64_t lda,
	const real *B, int64_t ldb, real beta, real *C, int64_t ldc)
{
	if (m == 0 || n == 0)
		return;
	if (k == 0) {
		for (int64_t i = 0; i < m * n && beta == 0; i++)
			C[i] = 0;
		return;
	}
	GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
		bi(m), bi(n), bi(k), 1, A, bi(lda), B, bi(ldb), beta, C, bi(ldc));
}

/* Fills col [C·KH·KW, Ho·Wo] from one image x [C,H,W]. */
static void im2col(const ir_conv_geom *g, const real *x, real *col)
{
	for (int64_t c = 0; c < g->c; c++)
		for (int64_t p = 0; p < g->kh; p++)
			for (int64_t q = 0; q < g->kw; q++) {
				real *row = col + ((c * g->kh + p) * g->kw + q) * g->ho * g->wo;
				for (int64_t i = 0; i < g->ho; i++) {
					int64_t r = i * g->s + p - g->pt;
					real *dst = row + i * g->wo;
					if (r < 0 || r >= g->h) {
						for (int64_t j = 0; j < g->wo; j++)
							dst[j] = 0;
						continue;
					}
					const real *src = x + (c * g->h + r) * g->w;
					for (int64_t j = 0; j < g->wo; j++) {
						int64_t k = j * g->s + q - g->pl;
						dst[j] = k >= 0 && k < g->w ? src[k] : 0;
					}
				}
			}
}

/* The adjoint of im2col: x [C,H,W] = Σ of the col entries that read each
 * element.  Overwrites x. */
static void col2im(const ir_conv_geom *g, const real *col, real *x)
{
	for (int64_t i = 0; i < g->c * g->h * g->w; i++)
		x[i] = 0;
	for (int64_t c = 0; c < g->c; c++)
		for (int64_t p = 0; p < g->kh; p++)
			for (int64_t q = 0; q < g->kw; q++) {
				const real *row = col + ((c * g->kh + p) * g->kw + q) * g->ho * g->wo;
				for (int64_t i = 0; i < g->ho; i++) {
					int64_t r = i * g->s + p - g->pt;
					if (r < 0 || r >= g->h)
						continue;
					real *dst = x + (c * g->h + r) * g->w;
					for (int64_t j = 0; j < g->wo; j++) {
						int64_t k = j * g->s + q - g->pl;
						if (k >= 0 && k < g->w)
							dst[k] += row[i * g->wo + j];
					}
				}
			}
}

/* conv2d(x, w) */
bool K(rt_k_conv2d)(const rt_kargs *a, rt_err *e)
{
	const ir_node *nd = a->n;
	ir_conv_geom g = ir_conv_geom_of(nd);
	int64_t ckk = g.c * g.kh * g.kw, hw = g.ho * g.wo;
	const real *x = a->in[0], *w = a->in[1];
	real *y = a->out, *col = a->ws;
	bool dir = ir_conv_direct(&g);
	for (int64_t n = 0; n < g.n; n++) {
		const real *xn = x + n * g.c * g.h * g.w;
		if (!dir)
			im2col(&g, xn, col);
		gemm(false, false, g.o, hw, ckk, w, ckk, dir ? xn : col, hw, 0, y + n * g.o * hw, hw);
	}
	return true;
}

/* conv2d_dx(dy, w): the result is x's gradient. */
bool K(rt_k_conv2d_dx)(const rt_kargs *a, rt_err *e)
{
	const ir_node *nd = a->n;
	ir_conv_geom g = ir_conv_geom_of(nd);
	int64_t ckk = g.c * g.kh * g.kw, hw = g.ho * g.wo;
	const real *dy = a->in[0], *w = a->in[1];
	real *dx = a->out, *col = a->ws;
	bool dir = ir_conv_direct(&g);
	for (int64_t n = 0; n < g.n; n++) {
		real *dxn = dx + n * g.c * g.h * g.w;
		gemm(true, false, ckk, hw, g.o, w, ckk, dy + n * g.o * hw, hw, 0, dir ? dxn : col, hw);
		if (!dir)
			col2im(&g, col, dxn);
	}
	return true;
}

/* conv2d_dw(dy, x): the result is w's gradient, summed over the batch. */
bool K(rt_k_conv2d_dw)(const rt_kargs *a, rt_err *e)
{
	const ir_node *nd = a->n;
	ir_conv_geom g = ir_conv_geom_of(nd);
	int64_t ckk = g.c * g.kh * g.kw, hw = g.ho * g.wo;
	const real *dy = a->in[0], *x = a->in[1];
	real *dw = a->out, *col = a->ws;
	bool dir = ir_conv_direct(&g);
	for (int64_t i = 0; i < g.o * ckk; i++)
		dw[i] = 0;
	for (int64_t n = 0; n < g.n; n++) {
		const real *xn = x + n * g.c * g.h * g.w;
		if (!dir)
			im2col(&g, xn, col);
		gemm(false, true, g.o, ckk, hw, dy + n * g.o * hw, hw, dir ? xn : col, hw, 1, dw, ckk);
	}
	return true;
}
