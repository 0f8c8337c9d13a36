/* kern_dense.c: the reference kernels of matmul (BLAS; a rank-3 operand
 * [N,T,K] is the matrix [N*T,K] in place), bmatmul (one BLAS product per
 * batch index), bias_add and reduce_sum.
 *
 * reduce_sum handles any rank and any increasing set of axes: runs of
 * adjacent kept (or reduced) dimensions are merged first, so the common
 * cases (dbeta = Σ over N,H,W; a sum over the batch) become two or three
 * strided loops.  Sums run in double for both real types.
 *
 * Compiled once per real type (kernels.h).  Preconditions: the node
 * verified.  bias_add may run in place (it reads each element before writing
 * it); matmul and reduce_sum results never overlap their operands. */
#include <limits.h>

#include <cblas.h>

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

/* The rows (all dimensions but the last, merged) of a tensor viewed as a
 * matrix: [N,T,K] is [N*T,K] (ir_rule_matmul). */
static int64_t rows_of(const ir_type *t)
{
	int64_t r = 1;
	for (int i = 0; i < t->rank - 1; i++)
		r *= t->dim[i];
	return r;
}

/* matmul(a, b) {trans_a, trans_b}: [M,K]·[K,N] → [M,N], a rank-3 operand
 * read as its matrix in place. */
bool K(rt_k_matmul)(const rt_kargs *a, rt_err *e)
{
	const ir_attr *ta_attr = ir_node_attr(a->n, IR_ATTR_TRANS_A);
	const ir_attr *tb_attr = ir_node_attr(a->n, IR_ATTR_TRANS_B);
	bool ta = ta_attr && ta_attr->u.i, tb = tb_attr && tb_attr->u.i;
	const ir_type *at = &a->n->in[0]->type, *bt = &a->n->in[1]->type;
	int64_t m = rows_of(&a->n->type), n = a->n->type.dim[a->n->type.rank - 1];
	int64_t lda = at->dim[at->rank - 1], ldb = bt->dim[bt->rank - 1], k = ta ? rows_of(at) : lda;
	real *c = a->out;
	if (m == 0 || n == 0)
		return true;
	if (k == 0) {
		for (int64_t i = 0; i < m * n; i++)
			c[i] = 0;
		return true;
	}
	GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, bi(m),
		bi(n), bi(k), 1, a->in[0], bi(lda), a->in[1], bi(ldb), 0, c, bi(n));
	return true;
}

static bool flag(const ir_node *n, ir_attr_kind k)
{
	const ir_attr *a = ir_node_attr(n, k);
	return a && a->u.i;
}

/* bmatmul(a [B..,M,K], b [B..,K,N]) {trans_a, trans_b} → [B..,M,N]. */
bool K(rt_k_bmatmul)(const rt_kargs *a, rt_err *e)
{
	const ir_type *at = &a->n->in[0]->type, *bt = &a->n->in[1]->type, *ct = &a->n->type;
	bool ta = flag(a->n, IR_ATTR_TRANS_A), tb = flag(a->n, IR_ATTR_TRANS_B);
	int r = ct->rank;
	int64_t batch = 1;
	for (int i = 0; i < r - 2; i++)
		batch *= ct->dim[i];
	int64_t m = ct->dim[r - 2], n = ct->dim[r - 1], k = at->dim[ta ? r - 2 : r - 1];
	int64_t lda = at->dim[r - 1], ldb = bt->dim[r - 1];
	int64_t sa = at->dim[r - 2] * lda, sb = bt->dim[r - 2] * ldb, sc = m * n;
	const real *A = a->in[0], *B = a->in[1];
	real *C = a->out;
	if (m == 0 || n == 0)
		return true;
	for (int64_t i = 0; i < batch; i++) {
		if (k == 0) {
			for (int64_t j = 0; j < sc; j++)
				C[i * sc + j] = 0;
			continue;
		}
		GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, bi(m),
			bi(n), bi(k), 1, A + i * sa, bi(lda), B + i * sb, bi(ldb), 0, C + i * sc, bi(n));
	}
	return true;
}

/* bias_add(x [N,C,...], b [C]) */
bool K(rt_k_bias_add)(const rt_kargs *a, rt_err *e)
{
	const ir_type *xt = &a->n->in[0]->type;
	int64_t inner = 1;
	for (int i = 2; i < xt->rank; i++)
		inner *= xt->dim[i];
	const real *x = a->in[0], *b = a->in[1];
	real *y = a->out;
	for (int64_t n = 0; n < xt->dim[0]; n++)
		for (int64_t c = 0; c < xt->dim[1]; c++) {
			int64_t base = (n * xt->dim[1] + c) * inner;
			for (int64_t k = 0; k < inner; k++)
				y[base + k] = x[base + k] + b[c];
		}
	return true;
}

/* A row-major index space: group i has size[i] positions, stride[i]
 * elements apart in the operand. */
typedef struct {
	int n;
	int64_t size[IR_MAX_RANK], stride[IR_MAX_RANK];
} space;

static int64_t space_count(const space *s)
{
	int64_t c = 1;
	for (int i = 0; i < s->n; i++)
		c *= s->size[i];
	return c;
}

/* The operand offset of linear index t in s. */
static int64_t space_offset(const space *s, int64_t t)
{
	int64_t off = 0;
	for (int i = s->n - 1; i >= 0; i--) {
		off += (t % s->size[i]) * s->stride[i];
		t /= s->size[i];
	}
	return off;
}

/* Splits x's dimensions into the kept space and the reduced space, merging
 * adjacent dimensions of the same kind. */
static void split_axes(const ir_type *x, const ir_attr *axes, space *kept, space *red)
{
	bool drop[IR_MAX_RANK] = {false};
	for (int i = 0; i < axes->u.ints.n; i++)
		drop[axes->u.ints.v[i]] = true;
	kept->n = red->n = 0;
	int64_t stride = 1;
	for (int i = x->rank - 1; i >= 0; i--) {
		space *s = drop[i] ? red : kept;
		bool merge = i < x->rank - 1 && drop[i] == drop[i + 1];
		if (merge) {
			s->size[0] *= x->dim[i];
		} else {
			/* Prepend: walking from the innermost dimension outwards. */
			for (int j = s->n; j > 0; j--) {
				s->size[j] = s->size[j - 1];
				s->stride[j] = s->stride[j - 1];
			}
			s->size[0] = x->dim[i];
			s->stride[0] = stride;
			s->n++;
		}
		stride *= x->dim[i];
	}
}

bool K(rt_k_reduce_sum)(const rt_kargs *a, rt_err *e)
{
	space kept, red;
	split_axes(&a->n->in[0]->type, ir_node_attr(a->n, IR_ATTR_AXES), &kept, &red);
	/* The innermost reduced group becomes the tight loop. */
	int64_t isize = 1, istride = 0;
	if (red.n > 0) {
		red.n--;
		isize = red.size[red.n];
		istride = red.stride[red.n];
	}
	int64_t nout = space_count(&kept), nouter = space_count(&red);
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t t = 0; t < nout; t++) {
		int64_t base = space_offset(&kept, t);
		double sum = 0;
		for (int64_t u = 0; u < nouter; u++) {
			const real *p = x + base + space_offset(&red, u);
			for (int64_t k = 0; k < isize; k++)
				sum += (double)p[k * istride];
		}
		y[t] = (real)sum;
	}
	return true;
}
