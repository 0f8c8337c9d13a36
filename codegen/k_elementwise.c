/* k_elementwise.c: kernels for fusion groups: chains of ops computed element
 * by element in one loop, values passed between members in registers and
 * written out only when something after the group reads them.
 *
 * Members: const, add, sub, scale, relu, relu_grad, bias_add, bn_norm,
 * bn_infer, bn_dx, global_avgpool_grad, momentum, sgd, adam_count,
 * adam_bias, adam_m, adam_v, adamw, broadcast_add, ln_norm, gelu, gelu_grad,
 * token_mean_grad.  All have the same number of elements.  An operand is
 * either an element of a tensor of that size (a member's value or a buffer),
 * or broadcast: one per channel ([C]), batch statistics ([2,C]: mean at c,
 * variance at C + c), one per (n, c) row ([N,C], global_avgpool_grad's
 * incoming gradient), a scalar, or repeated along the leading dimensions
 * (broadcast_add's b, read at the element index modulo its size, in any kind
 * of loop); or, along the last axis D: layer-norm statistics (mean and
 * variance of row r at 2r, 2r + 1), one per feature ([D], at the element's
 * place p in its row), or one per image and feature ([N,D],
 * token_mean_grad's incoming gradient).
 *
 * Loops: a group with layer-norm or token_mean_grad members runs over the
 * rows of its last axis, with an inner loop over the D elements of a row
 * (no channel broadcast in such a group: ir_bcast).  Else a group
 * with broadcast operands runs over rows r = n·C + c of its [N,C,H,W] (or
 * [N,C]) space, loading per-channel values once per row, with an inner loop
 * over the H·W elements of the row; a group whose repeated operands
 * (broadcast_add's b) are all of one length L >= 32 runs over rows of L,
 * reading b at the element's place in its row (a remainder per element
 * would keep the loop from being vectorised); others run over chunks of
 * the flat element range.  The extent divided among threads is rows or
 * chunks.  The inner loop is marked parallel (cg_parallel_loop): an
 * in-place member's result is the storage of an operand it reads at the
 * same index, which the vectoriser's overlap checks would otherwise take
 * for a dependence.
 * Arithmetic follows the reference kernels: batch norm, layer norm and GELU
 * in double, rounded once; the rest in the tensor's type.  GELU in f64
 * calls libm's erf, as the reference does; in f32 it is a·Φ(a) with
 * vmath.c's Φ (its fast one for GELU, the full one for the gradient),
 * straight-line code the loop vectoriser widens (erf is a call per
 * element), within 1 ulp of the exact value. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define CHUNK 4096

bool cg_elementwise(const ir_node *n)
{
	return ir_op_has(n->op, IR_OPF_FUSE) && ir_dtype_is_float(n->type.dtype);
}

/* How an operand is read. */
typedef enum {
	RD_ELEM, RD_CHANNEL, RD_STATS_MEAN, RD_STATS_VAR, RD_ROW, RD_SCALAR,
	RD_TRAIL,     /* repeated along the leading dimensions: at the index modulo its size */
	RD_LN_STATS,  /* per row of the last axis: mean, and variance (pre_var) */
	RD_FEATURE,   /* [D], at the element's place in its row */
	RD_TOKENS,    /* [N,D] at (image, place): the image's row offset preloaded */
} rd_kind;

/* The kind of operand k of member n: bn ops know their operands. */
static rd_kind operand_kind(const ir_node *n, int k)
{
	switch (n->op) {
	case IR_OP_BIAS_ADD:
		return k == 0 ? RD_ELEM : RD_CHANNEL;
	case IR_OP_BN_NORM:    /* x, stats, gamma, beta */
	case IR_OP_BN_DX:      /* dy, x, stats, gamma, dgamma, dbeta */
		if (n->in[k]->type.rank == 2 && n->in[k]->type.dim[0] == 2 && k == (n->op == IR_OP_BN_NORM ? 1 : 2))
			return RD_STATS_MEAN; /* and RD_STATS_VAR, both read */
		return n->in[k]->type.rank == 1 ? RD_CHANNEL : RD_ELEM;
	case IR_OP_BN_INFER:   /* x, mean, var, gamma, beta */
		return k == 0 ? RD_ELEM : RD_CHANNEL;
	case IR_OP_GLOBAL_AVGPOOL_GRAD:
		return RD_ROW;
	case IR_OP_SGD:
		return k == 2 ? RD_SCALAR : RD_ELEM;
	case IR_OP_BROADCAST_ADD:
		return k == 0 ? RD_ELEM : RD_TRAIL;
	case IR_OP_ADAMW: /* w, m, v, then the scalars lr, c1, c2 */
		return k >= 3 ? RD_SCALAR : RD_ELEM;
	case IR_OP_LN_NORM:    /* x, stats, gamma, beta */
		return k == 0 ? RD_ELEM : k == 1 ? RD_LN_STATS : RD_FEATURE;
	case IR_OP_TOKEN_MEAN_GRAD:
		return RD_TOKENS;
	case IR_OP_LN_DX:      /* dy, x, stats, gamma: a row reduction opening the group */
		return k == 2 ? RD_LN_STATS : k == 3 ? RD_FEATURE : RD_ELEM;
	default:
		return RD_ELEM;
	}
}

/* Does the group run over the rows of its last axis? */
static bool along_last_axis(const cg_group *g)
{
	for (int i = 0; i < g->n; i++)
		if (ir_node_bcast(g->member[i]) == IR_BCAST_LAST_AXIS)
			return true;
	return false;
}

static bool broadcasts(const cg_group *g)
{
	for (int i = 0; i < g->n; i++)
		for (int k = 0; k < g->member[i]->nin; k++)
			if (operand_kind(g->member[i], k) != RD_ELEM && operand_kind(g->member[i], k) != RD_SCALAR &&
			    operand_kind(g->member[i], k) != RD_TRAIL)
				return true;
	return false;
}

/* Rows at least this long make a loop of rows over a repeated operand
 * (below, chunks with a remainder per element). */
#define MIN_TRAIL_ROW 32

/* The length of the repeated (RD_TRAIL) operands when the group runs over
 * rows of it, each row reading it whole from its start (so an element's
 * place in its row is its index into the operand, and no integer remainder
 * is taken per element, which the vectoriser cannot widen); else 0. */
static int64_t trail_rows(const cg_group *g)
{
	int64_t len = 0;
	for (int i = 0; i < g->n; i++)
		for (int k = 0; k < g->member[i]->nin; k++)
			if (operand_kind(g->member[i], k) == RD_TRAIL) {
				int64_t n = ir_type_elems(&g->member[i]->in[k]->type);
				if (len && n != len)
					return 0;
				len = n;
			}
	return len >= MIN_TRAIL_ROW ? len : 0;
}

/* The iteration space: rows x inner for groups along the last axis and
 * channel groups (channels > 0) and rows of a repeated operand, else
 * flat. */
static void space(const cg_group *g, int64_t *rows, int64_t *inner, int64_t *channels)
{
	const ir_type *t = &g->member[g->n - 1]->type;
	if (!along_last_axis(g) && !broadcasts(g) && trail_rows(g)) {
		*inner = trail_rows(g);
		*rows = ir_type_elems(t) / *inner;
		*channels = 0;
	} else if (along_last_axis(g)) {
		*inner = t->dim[t->rank - 1];
		*rows = *inner ? ir_type_elems(t) / *inner : 0;
		*channels = 0;
	} else if (broadcasts(g)) {
		*rows = t->dim[0] * t->dim[1];
		*inner = t->rank == 4 ? t->dim[2] * t->dim[3] : 1;
		*channels = t->dim[1];
	} else {
		*rows = (ir_type_elems(t) + CHUNK - 1) / CHUNK;
		*inner = CHUNK;
		*channels = 0;
	}
}

int64_t cg_group_extent(const cg_group *g)
{
	int64_t rows, inner, c;
	space(g, &rows, &inner, &c);
	return rows;
}

_Static_assert(IR_MAX_GROUP <= CG_MAX_GROUP, "a group the IR allows must fit a cg_group");

static int member_index(const cg_group *g, const ir_node *n)
{
	for (int i = 0; i < g->n; i++)
		if (g->member[i] == n)
			return i;
	return -1;
}

static int buf_index(const cg_group *g, const ir_node *n)
{
	for (int i = 0; i < g->nbuf; i++)
		if (g->buf[i] == n)
			return i;
	return -1;
}

static void add_buf(cg_group *g, const ir_node *n)
{
	if (buf_index(g, n) < 0) {
		IR_ASSERT(g->nbuf < CG_MAX_GROUP_ARGS);
		g->buf[g->nbuf++] = n;
	}
}

void cg_group_bind(cg_group *g, bool (*needed_outside)(const ir_node *, void *), void *user)
{
	g->nbuf = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->member[i];
		for (int k = 0; k < n->nin; k++)
			if (member_index(g, n->in[k]) < 0)
				add_buf(g, n->in[k]);
	}
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->member[i];
		g->stored[i] = ir_op_has(n->op, IR_OPF_UPD) || needed_outside(n, user);
		if (g->stored[i])
			add_buf(g, n);
	}
}

/* ---- emission ------------------------------------------------------------ */

typedef struct {
	cg_kb *k;
	const cg_group *g;
	LLVMValueRef base[CG_MAX_GROUP_ARGS]; /* each buffer's pointer */
	LLVMValueRef val[CG_MAX_GROUP];       /* members' values at this element */
	LLVMValueRef pre[CG_MAX_GROUP][IR_MAX_FUSE_ARITY]; /* broadcast operands, per row */
	LLVMValueRef pre_var[CG_MAX_GROUP];   /* batch-statistics variance, per row */
	LLVMValueRef place;                   /* the element's place in its row */
	int64_t row_len;                      /* its row's length (0: flat chunks) */
	LLVMValueRef row_mean, row_var;       /* an opening ln_stats': this row's, rounded */
	cg_ln_dx_row dx;                      /* an opening ln_dx's row */
} emitter;

/* Does the group open with a row reduction (IR_OPF_ROW), whose pass over
 * each row runs ahead of the loop over the row's elements? */
static bool opens_with_row(const cg_group *g)
{
	return ir_op_has(g->member[0]->op, IR_OPF_ROW);
}

/* The broadcast operands' values for this row (c: channel, r: row) of
 * members [from, to). */
static void preload(emitter *e, int from, int to, LLVMValueRef r, LLVMValueRef c)
{
	cg_kb *k = e->k;
	const cg_group *g = e->g;
	for (int i = from; i < to; i++) {
		const ir_node *n = g->member[i];
		for (int j = 0; j < n->nin; j++) {
			rd_kind kind = operand_kind(n, j);
			if (kind == RD_ELEM || kind == RD_TRAIL)
				continue; /* read per element, perhaps from a member */
			if (kind == RD_LN_STATS && member_index(g, n->in[j]) >= 0) {
				e->pre[i][j] = e->row_mean; /* the opening ln_stats' (row_pass) */
				e->pre_var[i] = e->row_var;
				continue;
			}
			LLVMValueRef base = e->base[buf_index(g, n->in[j])];
			IR_ASSERT(c || (kind != RD_CHANNEL && kind != RD_STATS_MEAN));
			if (kind == RD_CHANNEL)
				e->pre[i][j] = cg_ld(k, base, c);
			else if (kind == RD_STATS_MEAN) {
				e->pre[i][j] = cg_ld(k, base, c);
				e->pre_var[i] = cg_ld(k, base, cg_iadd(k, c, cg_i64(k, n->in[j]->type.dim[1])));
			} else if (kind == RD_ROW) {
				e->pre[i][j] = cg_ld(k, base, r);
			} else if (kind == RD_SCALAR) {
				e->pre[i][j] = cg_ld(k, base, cg_i64(k, 0));
			} else if (kind == RD_LN_STATS) {
				LLVMValueRef at = cg_imul(k, r, cg_i64(k, 2));
				e->pre[i][j] = cg_ld(k, base, at);
				e->pre_var[i] = cg_ld(k, base, cg_iadd(k, at, cg_i64(k, 1)));
			} else if (kind == RD_TOKENS) {
				/* row r = image·T + token: the image's row of dy */
				int64_t T = n->type.dim[1], D = n->type.dim[2];
				e->pre[i][j] = cg_gep(k, NULL, base, cg_imul(k, cg_idiv(k, r, cg_i64(k, T)), cg_i64(k, D)));
			}
		}
	}
}

/* The opening row reduction's pass over row r (opens_with_row), after its
 * own broadcast operands are loaded: ln_stats' mean and variance (stored
 * when read after the group, and passed to the members that apply them in
 * the type they are stored in), or ln_dx's row sums.  The arithmetic is
 * k_norm.c's, so the values are the unfused kernels'. */
static void row_pass(emitter *e, LLVMValueRef r)
{
	cg_kb *k = e->k;
	const cg_group *g = e->g;
	const ir_node *n = g->member[0];
	int64_t d = e->row_len;
	LLVMValueRef base = cg_imul(k, r, cg_i64(k, d));
	LLVMValueRef x = cg_gep(k, NULL, e->base[buf_index(g, n->in[n->op == IR_OP_LN_DX ? 1 : 0])], base);
	if (n->op == IR_OP_LN_STATS) {
		LLVMValueRef mean, var;
		cg_ln_row_stats(k, x, d, &mean, &var);
		e->row_mean = cg_to_real(k, mean);
		e->row_var = cg_to_real(k, var);
		if (g->stored[0]) {
			LLVMValueRef st = e->base[buf_index(g, n)], at = cg_imul(k, r, cg_i64(k, 2));
			cg_st(k, st, at, e->row_mean);
			cg_st(k, st, cg_iadd(k, at, cg_i64(k, 1)), e->row_var);
		}
		return;
	}
	IR_ASSERT(n->op == IR_OP_LN_DX);
	e->dx = (cg_ln_dx_row){
		.dy = cg_gep(k, NULL, e->base[buf_index(g, n->in[0])], base),
		.x = x,
		.gamma = e->base[buf_index(g, n->in[3])],
		.mu = cg_to_f64(k, e->pre[0][2]),
		.inv = cg_ln_inv_std(k, cg_to_f64(k, e->pre_var[0]), ir_node_float(n, IR_ATTR_EPS)),
		.d = d,
	};
	cg_ln_dx_sums(k, &e->dx);
}

/* Operand j of member i at element idx. */
static LLVMValueRef operand(emitter *e, int i, int j, LLVMValueRef idx)
{
	const ir_node *n = e->g->member[i];
	rd_kind kind = operand_kind(n, j);
	if (kind == RD_TRAIL && e->row_len == ir_type_elems(&n->in[j]->type))
		return cg_ld(e->k, e->base[buf_index(e->g, n->in[j])], e->place); /* idx mod row_len */
	if (kind == RD_TRAIL)
		return cg_ld(e->k, e->base[buf_index(e->g, n->in[j])],
			cg_irem(e->k, idx, cg_i64(e->k, ir_type_elems(&n->in[j]->type))));
	if (kind == RD_FEATURE)
		return cg_ld(e->k, e->base[buf_index(e->g, n->in[j])], e->place);
	if (kind == RD_TOKENS)
		return cg_ld(e->k, e->pre[i][j], e->place);
	if (kind != RD_ELEM)
		return e->pre[i][j];
	int m = member_index(e->g, n->in[j]);
	if (m >= 0)
		return e->val[m];
	return cg_ld(e->k, e->base[buf_index(e->g, n->in[j])], idx);
}

static LLVMValueRef f64v(emitter *e, int i, int j, LLVMValueRef idx)
{
	return cg_to_f64(e->k, operand(e, i, j, idx));
}

/* 1/√2 and 1/√(2π), as in runtime/kern_norm.c. */
#define GELU_SQRT1_2 0.70710678118654752440
#define GELU_INV_SQRT_2PI 0.39894228040143267794

/* Member i's value at element idx, for the transformer's members: in
 * double, in the reference's order of operations. */
static LLVMValueRef transformer_member(emitter *e, int i, LLVMValueRef idx)
{
	cg_kb *k = e->k;
	const ir_node *n = e->g->member[i];
	switch (n->op) {
	case IR_OP_LN_NORM: {
		/* (x − mean)·inv·gamma + beta */
		LLVMValueRef mean = cg_to_f64(k, e->pre[i][1]), var = cg_to_f64(k, e->pre_var[i]);
		LLVMValueRef inv = cg_fdiv(k, cg_f64(k, 1), cg_math(k, "llvm.sqrt",
			cg_fadd(k, var, cg_f64(k, ir_node_float(n, IR_ATTR_EPS)))));
		LLVMValueRef xhat = cg_fmul(k, cg_fsub(k, f64v(e, i, 0, idx), mean), inv);
		return cg_to_real(k, cg_fadd(k, cg_fmul(k, xhat, f64v(e, i, 2, idx)), f64v(e, i, 3, idx)));
	}
	case IR_OP_GELU: {
		/* 0.5·a·(1 + erf(a/√2)); in f32 a·Φ(a), vectorised */
		LLVMValueRef a = f64v(e, i, 0, idx);
		if (cg_vector_math(k))
			return cg_to_real(k, cg_fmul(k, a, cg_vphi_fast(k, a)));
		LLVMValueRef erf = cg_libm(k, "erf", cg_fmul(k, a, cg_f64(k, GELU_SQRT1_2)));
		return cg_to_real(k, cg_fmul(k, cg_fmul(k, cg_f64(k, 0.5), a), cg_fadd(k, cg_f64(k, 1), erf)));
	}
	case IR_OP_GELU_GRAD: {
		/* dy·(Φ(a) + a·φ(a)) */
		LLVMValueRef g = f64v(e, i, 0, idx), a = f64v(e, i, 1, idx);
		if (cg_vector_math(k)) {
			LLVMValueRef gauss, cdf = cg_vphi(k, a, &gauss);
			LLVMValueRef pdf = cg_fmul(k, gauss, cg_f64(k, GELU_INV_SQRT_2PI));
			return cg_to_real(k, cg_fmul(k, g, cg_fadd(k, cdf, cg_fmul(k, a, pdf))));
		}
		LLVMValueRef erf = cg_libm(k, "erf", cg_fmul(k, a, cg_f64(k, GELU_SQRT1_2)));
		LLVMValueRef cdf = cg_fmul(k, cg_f64(k, 0.5), cg_fadd(k, cg_f64(k, 1), erf));
		LLVMValueRef sq = cg_fmul(k, cg_fmul(k, cg_f64(k, -0.5), a), a);
		LLVMValueRef pdf = cg_fmul(k, cg_math(k, "llvm.exp", sq), cg_f64(k, GELU_INV_SQRT_2PI));
		return cg_to_real(k, cg_fmul(k, g, cg_fadd(k, cdf, cg_fmul(k, a, pdf))));
	}
	case IR_OP_TOKEN_MEAN_GRAD:
		return cg_to_real(k, cg_fdiv(k, f64v(e, i, 0, idx), cg_f64(k, (double)n->type.dim[1])));
	case IR_OP_LN_DX: /* opening the group: its row sums are row_pass's */
		return cg_to_real(k, cg_ln_dx_at(k, &e->dx, e->place));
	default:
		IR_DIE("%s is not a transformer member", ir_op_name(n->op));
	}
}

/* Member i's value at element idx. */
static LLVMValueRef compute(emitter *e, int i, LLVMValueRef idx)
{
	cg_kb *k = e->k;
	const ir_node *n = e->g->member[i];
	switch (n->op) {
	case IR_OP_CONST:
		return cg_real(k, ir_node_float(n, IR_ATTR_VALUE));
	case IR_OP_ADD:
		return cg_fadd(k, operand(e, i, 0, idx), operand(e, i, 1, idx));
	case IR_OP_SUB:
		return cg_fsub(k, operand(e, i, 0, idx), operand(e, i, 1, idx));
	case IR_OP_SCALE:
		/* the factor in the tensor's type, as the reference rounds it */
		return cg_fmul(k, cg_real(k, ir_node_float(n, IR_ATTR_FACTOR)), operand(e, i, 0, idx));
	case IR_OP_RELU: {
		LLVMValueRef x = operand(e, i, 0, idx);
		return cg_relu_select(k, x, x);
	}
	case IR_OP_RELU_GRAD:
		return cg_relu_select(k, operand(e, i, 1, idx), operand(e, i, 0, idx));
	case IR_OP_BIAS_ADD:
	case IR_OP_BROADCAST_ADD:
		return cg_fadd(k, operand(e, i, 0, idx), operand(e, i, 1, idx));
	case IR_OP_BN_NORM:
	case IR_OP_BN_INFER: {
		/* x·sc + (beta - mean·sc), sc = gamma/sqrt(var + eps): one fused
		 * multiply-add in double, as runtime/kern_bn.c, bit for bit */
		bool norm = n->op == IR_OP_BN_NORM;
		LLVMValueRef mean = cg_to_f64(k, e->pre[i][1]);
		LLVMValueRef var = cg_to_f64(k, norm ? e->pre_var[i] : e->pre[i][2]);
		LLVMValueRef gamma = cg_to_f64(k, e->pre[i][norm ? 2 : 3]);
		LLVMValueRef beta = cg_to_f64(k, e->pre[i][norm ? 3 : 4]);
		LLVMValueRef sc, shift;
		cg_bn_coeffs(k, mean, var, gamma, beta, ir_node_float(n, IR_ATTR_EPS), &sc, &shift);
		return cg_to_real(k, cg_fma(k, f64v(e, i, 0, idx), sc, shift));
	}
	case IR_OP_BN_DX: {
		/* gamma/sqrt(var+eps) * (dy - dbeta/m - xhat * dgamma/m)
		 * = dy·sc + (x·q + r), two fused multiply-adds in double with
		 * the channel's sc, q and r as runtime/kern_bn.c's, bit for bit */
		const ir_type *t = &n->type;
		double m = (double)(t->dim[0] * (t->rank == 4 ? t->dim[2] * t->dim[3] : 1));
		LLVMValueRef mean = cg_to_f64(k, e->pre[i][2]), var = cg_to_f64(k, e->pre_var[i]);
		LLVMValueRef inv = cg_fdiv(k, cg_f64(k, 1), cg_math(k, "llvm.sqrt",
			cg_fadd(k, var, cg_f64(k, ir_node_float(n, IR_ATTR_EPS)))));
		LLVMValueRef sc = cg_fmul(k, cg_to_f64(k, e->pre[i][3]), inv);
		LLVMValueRef kk = cg_fmul(k, cg_fdiv(k, cg_to_f64(k, e->pre[i][4]), cg_f64(k, m)), inv);
		LLVMValueRef dbm = cg_fdiv(k, cg_to_f64(k, e->pre[i][5]), cg_f64(k, m));
		LLVMValueRef q = cg_fmul(k, LLVMBuildFNeg(k->b, sc, ""), kk);
		LLVMValueRef r = cg_fmul(k, sc, cg_fsub(k, cg_fmul(k, mean, kk), dbm));
		LLVMValueRef xq = cg_fma(k, f64v(e, i, 1, idx), q, r);
		return cg_to_real(k, cg_fma(k, f64v(e, i, 0, idx), sc, xq));
	}
	case IR_OP_GLOBAL_AVGPOOL_GRAD: {
		const ir_type *t = &n->type;
		double hw = (double)(t->dim[2] * t->dim[3]);
		return cg_to_real(k, cg_fdiv(k, cg_to_f64(k, e->pre[i][0]), cg_f64(k, hw)));
	}
	case IR_OP_MOMENTUM: {
		/* m*v + (g + wd*w) */
		LLVMValueRef mv = cg_fmul(k, cg_real(k, ir_node_float(n, IR_ATTR_MOMENTUM)), operand(e, i, 0, idx));
		LLVMValueRef g = operand(e, i, 1, idx);
		if (n->nin == 3)
			g = cg_fadd(k, g, cg_fmul(k, cg_real(k, ir_node_float(n, IR_ATTR_WD)), operand(e, i, 2, idx)));
		return cg_fadd(k, mv, g);
	}
	case IR_OP_SGD:
		return cg_fsub(k, operand(e, i, 0, idx), cg_fmul(k, e->pre[i][2], operand(e, i, 1, idx)));
	/* AdamW: as runtime/kern_optim.c, the same expressions in the same order. */
	case IR_OP_ADAM_COUNT:
		return cg_fadd(k, operand(e, i, 0, idx), cg_real(k, 1));
	case IR_OP_ADAM_BIAS: {
		/* 1 - beta^t in double, rounded once */
		LLVMValueRef args[2] = {cg_f64(k, ir_node_float(n, IR_ATTR_BETA)), f64v(e, i, 0, idx)};
		LLVMTypeRef ty = k->m->f64, fty;
		LLVMValueRef pow = cg_intrinsic(k, "llvm.pow", &ty, 1, &fty);
		return cg_to_real(k, cg_fsub(k, cg_f64(k, 1), LLVMBuildCall2(k->b, fty, pow, args, 2, "")));
	}
	case IR_OP_ADAM_M:
	case IR_OP_ADAM_V: {
		/* beta*m + (1 - beta)*g, beta*v + (1 - beta)*(g*g) */
		double beta = ir_node_float(n, IR_ATTR_BETA);
		LLVMValueRef g = operand(e, i, 1, idx);
		if (n->op == IR_OP_ADAM_V)
			g = cg_fmul(k, g, g);
		return cg_fadd(k, cg_fmul(k, cg_real(k, beta), operand(e, i, 0, idx)), cg_fmul(k, cg_real(k, 1.0 - beta), g));
	}
	case IR_OP_ADAMW: {
		/* w - lr*((m/c1)/(sqrt(v/c2) + eps) [+ wd*w]) */
		LLVMValueRef w = operand(e, i, 0, idx);
		LLVMValueRef den = cg_fadd(k, cg_math(k, "llvm.sqrt", cg_fdiv(k, operand(e, i, 2, idx), e->pre[i][5])),
			cg_real(k, ir_node_float(n, IR_ATTR_EPS)));
		LLVMValueRef step = cg_fdiv(k, cg_fdiv(k, operand(e, i, 1, idx), e->pre[i][4]), den);
		if (ir_node_attr(n, IR_ATTR_WD))
			step = cg_fadd(k, step, cg_fmul(k, cg_real(k, ir_node_float(n, IR_ATTR_WD)), w));
		return cg_fsub(k, w, cg_fmul(k, e->pre[i][3], step));
	}
	case IR_OP_LN_NORM:
	case IR_OP_GELU:
	case IR_OP_GELU_GRAD:
	case IR_OP_TOKEN_MEAN_GRAD:
	case IR_OP_LN_DX:
		return transformer_member(e, i, idx);
	default:
		IR_DIE("%s is not elementwise", ir_op_name(n->op));
	}
}

/* Computes every member at element idx, storing those needed outside. */
static void element(emitter *e, LLVMValueRef idx)
{
	for (int i = 0; i < e->g->n; i++) {
		if (e->g->member[i]->op == IR_OP_LN_STATS)
			continue; /* one value per row: row_pass */
		e->val[i] = compute(e, i, idx);
		/* (An in-place update's buffer is its operand 0's storage: the step
		 * passes that for it.) */
		if (e->g->stored[i])
			cg_st(e->k, e->base[buf_index(e->g, e->g->member[i])], idx, e->val[i]);
	}
}

/* The kernel signature: members, how operands connect, what is stored. */
static void group_key(const cg_group *g, char *key, size_t len)
{
	size_t at = (size_t)snprintf(key, len, "group");
	for (int i = 0; i < g->n && at < len; i++) {
		char sig[512];
		cg_node_signature(g->member[i], sig, sizeof sig);
		at += (size_t)snprintf(key + at, len - at, "|%s%s:", sig, g->stored[i] ? " st" : "");
		for (int j = 0; j < g->member[i]->nin && at < len; j++) {
			int m = member_index(g, g->member[i]->in[j]);
			at += (size_t)snprintf(key + at, len - at, m >= 0 ? " m%d" : " b%d",
				m >= 0 ? m : buf_index(g, g->member[i]->in[j]));
		}
		if (g->stored[i] && at < len)
			at += (size_t)snprintf(key + at, len - at, " ->b%d", buf_index(g, g->member[i]));
	}
	IR_ASSERT(at < len);
}

LLVMValueRef cg_group_kernel(cg_module *m, const cg_group *g)
{
	char key[16384];
	group_key(g, key, sizeof key);
	bool fresh;
	cg_home home;
	LLVMValueRef fn = cg_kernel(m, key, &fresh, &home);
	if (!fresh)
		return fn;
	cg_kb k;
	cg_kb_begin(&k, home.m, home.fn, g->member[g->n - 1]->type.dtype);
	emitter e = {.k = &k, .g = g};
	for (int b = 0; b < g->nbuf; b++)
		e.base[b] = cg_arg(&k, b);
	int64_t rows, inner, channels;
	space(g, &rows, &inner, &channels);
	cg_loop outer, in;
	LLVMValueRef r = cg_for(&k, &outer, k.lo, k.hi);
	if (channels > 0 || along_last_axis(g) || inner == trail_rows(g)) {
		e.row_len = inner;
		int from = 0;
		if (opens_with_row(g)) { /* its broadcast operands, its row pass, then the rest */
			preload(&e, 0, 1, r, NULL);
			row_pass(&e, r);
			from = 1;
		}
		preload(&e, from, g->n, r, channels > 0 ? cg_irem(&k, r, cg_i64(&k, channels)) : NULL);
		LLVMValueRef p = cg_for(&k, &in, cg_i64(&k, 0), cg_i64(&k, inner));
		e.place = p;
		e.row_len = inner;
		element(&e, cg_iadd(&k, cg_imul(&k, r, cg_i64(&k, inner)), p));
	} else {
		preload(&e, 0, g->n, r, NULL);
		int64_t total = ir_type_elems(&g->member[g->n - 1]->type);
		LLVMValueRef start = cg_imul(&k, r, cg_i64(&k, CHUNK));
		LLVMValueRef end = cg_imin(&k, cg_iadd(&k, start, cg_i64(&k, CHUNK)), cg_i64(&k, total));
		LLVMValueRef i = cg_for(&k, &in, start, end);
		element(&e, i);
	}
	cg_parallel_loop(&in); /* an in-place member writes what it read at the same index */
	cg_end_for(&k, &in, NULL);
	cg_end_for(&k, &outer, NULL);
	cg_kb_end(&k);
	return fn;
}
