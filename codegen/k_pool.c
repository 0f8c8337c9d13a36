/* k_pool.c: kernels for pooling: avgpool, avgpool_grad, maxpool,
 * maxpool_grad, global_avgpool.
 *
 * Everything works one plane (n, c) of [N,C,H,W] at a time, so the extent
 * is N·C planes and no two threads touch the same output (maxpool_grad's
 * overlapping windows stay inside a plane).  Arithmetic follows
 * runtime/kern_pool.c: averages are summed in double in the reference's
 * order and rounded once; maxpool pads with −∞ and a window's maximum is
 * found with a strict comparison, or is its last NaN (as in PyTorch, NaN
 * propagates), and the gradient goes to that element: the first maximum in
 * row-major order, or the last NaN.  Window extents are clamped to the
 * plane, so padded windows never load outside it. */
#include <math.h>

#include "internal.h"

typedef struct {
	int64_t planes; /* N·C */
	int64_t h, w;   /* input plane */
	int64_t ho, wo; /* output plane */
} pool_geom;

static pool_geom planes_of(const ir_type *x, const ir_type *y)
{
	pool_geom p = {x->dim[0] * x->dim[1], x->dim[2], x->dim[3], y->dim[2], y->dim[3]};
	return p;
}

/* The geometry with x the input side, whichever operand or result it is. */
static pool_geom geom(const ir_node *n)
{
	switch (n->op) {
	case IR_OP_AVGPOOL_GRAD:
		return planes_of(&n->type, &n->in[0]->type);
	case IR_OP_MAXPOOL_GRAD:
		return planes_of(&n->in[1]->type, &n->in[0]->type);
	default:
		return planes_of(&n->in[0]->type, &n->type);
	}
}

static int64_t plane_extent(const ir_node *n)
{
	return n->op == IR_OP_GLOBAL_AVGPOOL ? n->type.dim[0] * n->type.dim[1] : geom(n).planes;
}

/* &base[pl·elems]: plane pl of a tensor of elems-element planes. */
static LLVMValueRef plane(cg_kb *k, LLVMValueRef base, LLVMValueRef pl, int64_t elems)
{
	return cg_gep(k, NULL, base, cg_imul(k, pl, cg_i64(k, elems)));
}

/* ---- avgpool: VALID, stride = window ------------------------------------- */

static void emit_avgpool(cg_kb *k, const ir_node *n)
{
	pool_geom p = geom(n);
	int64_t win = ir_node_int(n, IR_ATTR_WINDOW);
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1);
	cg_loop lp, li, lj, lr, lc;
	LLVMValueRef pl = cg_for(k, &lp, k->lo, k->hi);
	LLVMValueRef xp = plane(k, x, pl, p.h * p.w), yp = plane(k, y, pl, p.ho * p.wo);
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), cg_i64(k, p.ho));
	LLVMValueRef j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, p.wo));
	LLVMValueRef r = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, win));
	LLVMValueRef acc = cg_carry(k, &lr, cg_f64(k, 0));
	LLVMValueRef row = cg_imul(k, cg_iadd(k, cg_imul(k, i, cg_i64(k, win)), r), cg_i64(k, p.w));
	LLVMValueRef at = cg_iadd(k, row, cg_imul(k, j, cg_i64(k, win)));
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, win));
	LLVMValueRef a = cg_carry(k, &lc, acc);
	LLVMValueRef next = cg_fadd(k, a, cg_to_f64(k, cg_ld(k, xp, cg_iadd(k, at, c))));
	cg_end_for(k, &lc, &next);
	cg_end_for(k, &lr, &lc.out[0]);
	LLVMValueRef mean = cg_fdiv(k, lr.out[0], cg_f64(k, (double)(win * win)));
	cg_st(k, yp, cg_iadd(k, cg_imul(k, i, cg_i64(k, p.wo)), j), cg_to_real(k, mean));
	cg_end_for(k, &lj, NULL);
	cg_end_for(k, &li, NULL);
	cg_end_for(k, &lp, NULL);
}

/* Each dy element spread as dy/k² over its tile; rows and columns past the
 * last full tile get 0. */
static void emit_avgpool_grad(cg_kb *k, const ir_node *n)
{
	pool_geom p = geom(n);
	int64_t win = ir_node_int(n, IR_ATTR_WINDOW), rows = p.ho * win, cols = p.wo * win;
	LLVMValueRef dx = cg_arg(k, 0), dy = cg_arg(k, 1);
	cg_loop lp, lr, lc, lz;
	LLVMValueRef pl = cg_for(k, &lp, k->lo, k->hi);
	LLVMValueRef dxp = plane(k, dx, pl, p.h * p.w), dyp = plane(k, dy, pl, p.ho * p.wo);
	LLVMValueRef r = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, rows));
	LLVMValueRef src = cg_imul(k, cg_idiv(k, r, cg_i64(k, win)), cg_i64(k, p.wo));
	LLVMValueRef dst = cg_imul(k, r, cg_i64(k, p.w));
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, cols));
	LLVMValueRef g = cg_to_f64(k, cg_ld(k, dyp, cg_iadd(k, src, cg_idiv(k, c, cg_i64(k, win)))));
	LLVMValueRef v = cg_to_real(k, cg_fdiv(k, g, cg_f64(k, (double)(win * win))));
	cg_st(k, dxp, cg_iadd(k, dst, c), v);
	cg_end_for(k, &lc, NULL);
	if (cols < p.w) {
		c = cg_for(k, &lz, cg_i64(k, cols), cg_i64(k, p.w));
		cg_st(k, dxp, cg_iadd(k, dst, c), cg_real(k, 0));
		cg_end_for(k, &lz, NULL);
	}
	cg_end_for(k, &lr, NULL);
	if (rows < p.h)
		cg_zero(k, cg_gep(k, NULL, dxp, cg_i64(k, rows * p.w)), cg_i64(k, (p.h - rows) * p.w));
	cg_end_for(k, &lp, NULL);
}

const cg_op_impl cg_impl_avgpool = {plane_extent, NULL, emit_avgpool, false, NULL};
const cg_op_impl cg_impl_avgpool_grad = {plane_extent, NULL, emit_avgpool_grad, false, NULL};

/* ---- maxpool --------------------------------------------------------------- */

typedef struct {
	int64_t k, s, top, left;
} window;

static window window_of(const ir_node *n)
{
	const ir_attr *pad = ir_node_attr(n, IR_ATTR_PAD);
	window w = {ir_node_int(n, IR_ATTR_WINDOW), ir_node_int(n, IR_ATTR_STRIDE), pad->u.ints.v[0],
		pad->u.ints.v[2]};
	return w;
}

/* [*lo, *hi): the part inside [0, size) of the window of output o along
 * one axis. */
static void clamp(cg_kb *k, const window *w, int64_t pad, int64_t size, LLVMValueRef o, LLVMValueRef *lo,
	LLVMValueRef *hi)
{
	LLVMValueRef first = cg_isub(k, cg_imul(k, o, cg_i64(k, w->s)), cg_i64(k, pad));
	*lo = cg_imax(k, first, cg_i64(k, 0));
	*hi = cg_imin(k, cg_iadd(k, first, cg_i64(k, w->k)), cg_i64(k, size));
}

/* A window's search: the maximum m and its offset idx in the plane (-1
 * while none).  An element wins over nothing, and over m when it is
 * strictly greater or NaN (cg_fmax), as in the reference's argmax. */
typedef struct {
	cg_loop lr, lc;
	LLVMValueRef m, idx;
} window_scan;

/* Opens the loops over the window of output (i, j); the body is the
 * builder's position, with the element's offset in *at. */
static void scan_begin(cg_kb *k, window_scan *s, const pool_geom *p, const window *w, LLVMValueRef i,
	LLVMValueRef j, bool index, LLVMValueRef *at)
{
	LLVMValueRef r0, r1, c0, c1;
	clamp(k, w, w->top, p->h, i, &r0, &r1);
	clamp(k, w, w->left, p->w, j, &c0, &c1);
	LLVMValueRef r = cg_for(k, &s->lr, r0, r1);
	LLVMValueRef m = cg_carry(k, &s->lr, cg_real(k, -INFINITY));
	LLVMValueRef idx = index ? cg_carry(k, &s->lr, cg_i64(k, -1)) : NULL;
	LLVMValueRef row = cg_imul(k, r, cg_i64(k, p->w));
	LLVMValueRef c = cg_for(k, &s->lc, c0, c1);
	s->m = cg_carry(k, &s->lc, m);
	s->idx = index ? cg_carry(k, &s->lc, idx) : NULL;
	*at = cg_iadd(k, row, c);
}

/* Takes element v at offset at into the search and closes the loops; the
 * results are left in s->m and s->idx. */
static void scan_end(cg_kb *k, window_scan *s, LLVMValueRef v, LLVMValueRef at)
{
	LLVMValueRef next[2];
	if (s->idx) {
		LLVMValueRef none = LLVMBuildICmp(k->b, LLVMIntSLT, s->idx, cg_i64(k, 0), "");
		LLVMValueRef gt = LLVMBuildFCmp(k->b, LLVMRealOGT, v, s->m, "");
		LLVMValueRef nan = LLVMBuildFCmp(k->b, LLVMRealUNO, v, v, "");
		LLVMValueRef take = LLVMBuildOr(k->b, none, LLVMBuildOr(k->b, gt, nan, ""), "");
		next[0] = LLVMBuildSelect(k->b, take, v, s->m, "");
		next[1] = LLVMBuildSelect(k->b, take, at, s->idx, "");
	} else {
		/* The value alone: max(v, m) with −∞ first gives the same. */
		next[0] = cg_fmax(k, v, s->m);
	}
	cg_end_for(k, &s->lc, next);
	cg_end_for(k, &s->lr, s->lc.out);
	s->m = s->lr.out[0];
	s->idx = s->idx ? s->lr.out[1] : NULL;
}

static void emit_maxpool(cg_kb *k, const ir_node *n)
{
	pool_geom p = geom(n);
	window w = window_of(n);
	cg_loop lp, li, lj;
	window_scan s;
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1);
	LLVMValueRef pl = cg_for(k, &lp, k->lo, k->hi);
	LLVMValueRef xp = plane(k, x, pl, p.h * p.w), yp = plane(k, y, pl, p.ho * p.wo);
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), cg_i64(k, p.ho));
	LLVMValueRef j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, p.wo));
	LLVMValueRef at;
	scan_begin(k, &s, &p, &w, i, j, false, &at);
	scan_end(k, &s, cg_ld(k, xp, at), at);
	cg_st(k, yp, cg_iadd(k, cg_imul(k, i, cg_i64(k, p.wo)), j), s.m);
	cg_end_for(k, &lj, NULL);
	cg_end_for(k, &li, NULL);
	cg_end_for(k, &lp, NULL);
}

/* maxpool_grad(dy, x): the plane is zeroed, then each dy element added at
 * its window's first maximum (windows may overlap). */
static void emit_maxpool_grad(cg_kb *k, const ir_node *n)
{
	pool_geom p = geom(n);
	window w = window_of(n);
	cg_loop lp, li, lj;
	window_scan s;
	LLVMValueRef dx = cg_arg(k, 0), dy = cg_arg(k, 1), x = cg_arg(k, 2);
	LLVMValueRef pl = cg_for(k, &lp, k->lo, k->hi);
	LLVMValueRef dxp = plane(k, dx, pl, p.h * p.w), xp = plane(k, x, pl, p.h * p.w);
	LLVMValueRef dyp = plane(k, dy, pl, p.ho * p.wo);
	cg_zero(k, dxp, cg_i64(k, p.h * p.w));
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), cg_i64(k, p.ho));
	LLVMValueRef j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, p.wo));
	LLVMValueRef at;
	scan_begin(k, &s, &p, &w, i, j, true, &at);
	scan_end(k, &s, cg_ld(k, xp, at), at);
	cg_if found;
	cg_if_begin(k, &found, LLVMBuildICmp(k->b, LLVMIntSGE, s.idx, cg_i64(k, 0), ""));
	LLVMValueRef g = cg_ld(k, dyp, cg_iadd(k, cg_imul(k, i, cg_i64(k, p.wo)), j));
	cg_st(k, dxp, s.idx, cg_fadd(k, cg_ld(k, dxp, s.idx), g));
	cg_if_end(k, &found);
	cg_end_for(k, &lj, NULL);
	cg_end_for(k, &li, NULL);
	cg_end_for(k, &lp, NULL);
}

const cg_op_impl cg_impl_maxpool = {plane_extent, NULL, emit_maxpool, false, NULL};
const cg_op_impl cg_impl_maxpool_grad = {plane_extent, NULL, emit_maxpool_grad, false, NULL};

/* ---- global_avgpool: [N,C,H,W] -> [N,C] ------------------------------------ */

static void emit_global_avgpool(cg_kb *k, const ir_node *n)
{
	const ir_type *xt = &n->in[0]->type;
	int64_t hw = xt->dim[2] * xt->dim[3];
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1);
	cg_loop lp, lk;
	LLVMValueRef pl = cg_for(k, &lp, k->lo, k->hi);
	LLVMValueRef xp = plane(k, x, pl, hw);
	LLVMValueRef i = cg_for(k, &lk, cg_i64(k, 0), cg_i64(k, hw));
	LLVMValueRef acc = cg_carry(k, &lk, cg_f64(k, 0));
	/* Reassociable: the vectoriser keeps partial sums, in double. */
	LLVMValueRef next = cg_fadd(k, acc, cg_to_f64(k, cg_ld(k, xp, i)));
	LLVMSetFastMathFlags(next, LLVMFastMathAllowReassoc);
	cg_end_for(k, &lk, &next);
	cg_st(k, y, pl, cg_to_real(k, cg_fdiv(k, lk.out[0], cg_f64(k, (double)hw))));
	cg_end_for(k, &lp, NULL);
}

const cg_op_impl cg_impl_global_avgpool = {plane_extent, NULL, emit_global_avgpool, false, NULL};
