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

/* Both average pools are written as vector code, `lanes` outputs (avgpool)
 * or dy elements (avgpool_grad) at a time, when a window's worth of those
 * vectors fits (win·lanes <= CG_MAX_VLANES): the vectoriser left them scalar
 * (rows of 7 and 14 outputs, windows of 2), at 1-10 GB/s.  avgpool loads
 * win·lanes contiguous elements of each of a window's rows and takes
 * column c of every window with a shuffle; avgpool_grad spreads each dy
 * vector over win·lanes columns with one.  The arithmetic is the scalar
 * code's (and the reference's): each window summed in double in row-major
 * order, divided by win² and rounded once. */
static int pool_lanes(const cg_kb *k, int64_t win)
{
	int l = k->m->vec_bytes / 8;
	l = l < 2 ? 2 : l;
	return win * l <= CG_MAX_VLANES ? l : 0;
}

/* Lanes first, first + step, ... (lanes of them). */
static LLVMValueRef pool_pick(cg_kb *k, LLVMValueRef v, int lanes, int first, int step)
{
	LLVMValueRef idx[CG_MAX_VLANES];
	for (int i = 0; i < lanes; i++)
		idx[i] = LLVMConstInt(k->m->i32, (unsigned long long)(first + i * step), 0);
	return LLVMBuildShuffleVector(k->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(idx, (unsigned)lanes), "");
}

/* Outputs j0 .. j0+n of row i of a plane (n <= lanes). */
static void avg_block(cg_kb *k, const pool_geom *p, int64_t win, int lanes, LLVMValueRef xp, LLVMValueRef yp,
	LLVMValueRef i, LLVMValueRef j0, int n)
{
	LLVMTypeRef vd = LLVMVectorType(k->m->f64, (unsigned)lanes);
	LLVMValueRef acc = LLVMConstNull(vd);
	for (int64_t r = 0; r < win; r++) {
		LLVMValueRef row = cg_imul(k, cg_iadd(k, cg_imul(k, i, cg_i64(k, win)), cg_i64(k, r)), cg_i64(k, p->w));
		LLVMValueRef v = cg_vload(k, (int)win * lanes, xp, cg_iadd(k, row, cg_imul(k, j0, cg_i64(k, win))),
			(int)win * n);
		for (int c = 0; c < win; c++) {
			LLVMValueRef col = pool_pick(k, v, lanes, c, (int)win);
			if (k->dt == IR_F32)
				col = LLVMBuildFPExt(k->b, col, vd, "");
			acc = LLVMBuildFAdd(k->b, acc, col, "");
		}
	}
	LLVMValueRef mean = LLVMBuildFDiv(k->b, acc, cg_vsplat(k, cg_f64(k, (double)(win * win)), lanes), "");
	if (k->dt == IR_F32)
		mean = LLVMBuildFPTrunc(k->b, mean, LLVMVectorType(k->real, (unsigned)lanes), "");
	cg_vstore(k, yp, cg_iadd(k, cg_imul(k, i, cg_i64(k, p->wo)), j0), mean, n);
}

/* The row's full blocks of `lanes` in a loop, then its short last one;
 * block(j0, n) emits one. */
typedef void (*pool_block_fn)(cg_kb *k, const pool_geom *p, int64_t win, int lanes, LLVMValueRef a, LLVMValueRef b,
	LLVMValueRef i, LLVMValueRef j0, int n);

static void pool_row(cg_kb *k, const pool_geom *p, int64_t win, int lanes, LLVMValueRef a, LLVMValueRef b,
	LLVMValueRef i, pool_block_fn block)
{
	int64_t full = p->wo / lanes;
	int rest = (int)(p->wo % lanes);
	if (full > 0) {
		cg_loop lj;
		LLVMValueRef jb = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, full));
		block(k, p, win, lanes, a, b, i, cg_imul(k, jb, cg_i64(k, lanes)), lanes);
		cg_end_for(k, &lj, NULL);
	}
	if (rest)
		block(k, p, win, lanes, a, b, i, cg_i64(k, full * lanes), rest);
}

static void emit_avgpool(cg_kb *k, const ir_node *n)
{
	pool_geom p = geom(n);
	int64_t win = ir_node_int(n, IR_ATTR_WINDOW);
	int lanes = pool_lanes(k, win);
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1);
	cg_loop lp, li, lj, lr, lc;
	LLVMValueRef pl = cg_for(k, &lp, k->lo, k->hi);
	LLVMValueRef xp = plane(k, x, pl, p.h * p.w), yp = plane(k, y, pl, p.ho * p.wo);
	LLVMValueRef i = cg_for(k, &li, cg_i64(k, 0), cg_i64(k, p.ho));
	if (lanes) {
		pool_row(k, &p, win, lanes, xp, yp, i, avg_block);
		cg_end_for(k, &li, NULL);
		cg_end_for(k, &lp, NULL);
		return;
	}
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

/* dy elements j0 .. j0+n of row i, spread over the window's rows. */
static void avg_grad_block(cg_kb *k, const pool_geom *p, int64_t win, int lanes, LLVMValueRef dyp, LLVMValueRef dxp,
	LLVMValueRef i, LLVMValueRef j0, int n)
{
	LLVMTypeRef vd = LLVMVectorType(k->m->f64, (unsigned)lanes);
	LLVMValueRef g = cg_vload(k, lanes, dyp, cg_iadd(k, cg_imul(k, i, cg_i64(k, p->wo)), j0), n);
	if (k->dt == IR_F32)
		g = LLVMBuildFPExt(k->b, g, vd, "");
	g = LLVMBuildFDiv(k->b, g, cg_vsplat(k, cg_f64(k, (double)(win * win)), lanes), "");
	if (k->dt == IR_F32)
		g = LLVMBuildFPTrunc(k->b, g, LLVMVectorType(k->real, (unsigned)lanes), "");
	LLVMValueRef idx[CG_MAX_VLANES];
	for (int e = 0; e < win * lanes; e++)
		idx[e] = LLVMConstInt(k->m->i32, (unsigned long long)(e / win), 0);
	LLVMValueRef spread = LLVMBuildShuffleVector(k->b, g, LLVMGetPoison(LLVMTypeOf(g)),
		LLVMConstVector(idx, (unsigned)(win * lanes)), "");
	for (int64_t r = 0; r < win; r++) {
		LLVMValueRef row = cg_imul(k, cg_iadd(k, cg_imul(k, i, cg_i64(k, win)), cg_i64(k, r)), cg_i64(k, p->w));
		cg_vstore(k, dxp, cg_iadd(k, row, cg_imul(k, j0, cg_i64(k, win))), spread, (int)win * n);
	}
}

/* Each dy element spread as dy/k² over its tile; rows and columns past the
 * last full tile get 0. */
static void emit_avgpool_grad(cg_kb *k, const ir_node *n)
{
	pool_geom p = geom(n);
	int64_t win = ir_node_int(n, IR_ATTR_WINDOW), rows = p.ho * win, cols = p.wo * win;
	int lanes = pool_lanes(k, win);
	LLVMValueRef dx = cg_arg(k, 0), dy = cg_arg(k, 1);
	cg_loop lp, lr, lc, lz;
	LLVMValueRef pl = cg_for(k, &lp, k->lo, k->hi);
	LLVMValueRef dxp = plane(k, dx, pl, p.h * p.w), dyp = plane(k, dy, pl, p.ho * p.wo);
	if (lanes) {
		LLVMValueRef i = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, p.ho));
		pool_row(k, &p, win, lanes, dyp, dxp, i, avg_grad_block);
		if (cols < p.w)
			for (int64_t r = 0; r < win; r++) {
				LLVMValueRef row = cg_iadd(k, cg_imul(k, i, cg_i64(k, win)), cg_i64(k, r));
				LLVMValueRef at = cg_iadd(k, cg_imul(k, row, cg_i64(k, p.w)), cg_i64(k, cols));
				cg_zero_loop(k, cg_gep(k, NULL, dxp, at), cg_i64(k, 0), cg_i64(k, p.w - cols));
			}
		cg_end_for(k, &lr, NULL);
	} else {
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
	}
	if (rows < p.h)
		cg_zero(k, cg_gep(k, NULL, dxp, cg_i64(k, rows * p.w)), cg_i64(k, (p.h - rows) * p.w));
	cg_end_for(k, &lp, NULL);
}

const cg_op_impl cg_impl_avgpool = {plane_extent, NULL, emit_avgpool, false, NULL, NULL};
const cg_op_impl cg_impl_avgpool_grad = {plane_extent, NULL, emit_avgpool_grad, false, NULL, NULL};

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

const cg_op_impl cg_impl_maxpool = {plane_extent, NULL, emit_maxpool, false, NULL, NULL};
const cg_op_impl cg_impl_maxpool_grad = {plane_extent, NULL, emit_maxpool_grad, false, NULL, NULL};

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

const cg_op_impl cg_impl_global_avgpool = {plane_extent, NULL, emit_global_avgpool, false, NULL, NULL};
