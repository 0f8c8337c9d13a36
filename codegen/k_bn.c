/* k_bn.c: kernels for the batch-norm reductions (bn_stats, bn_dgamma), the
 * running-statistic updates (bn_running_mean, bn_running_var) and
 * reduce_sum.
 *
 * Arithmetic follows runtime/kern_bn.c and kern_dense.c: sums run in double
 * for both real types and are rounded once.  The long sums over a channel's
 * contiguous H·W run are marked reassociable so the loop vectoriser can
 * split them into partial sums (still in double, so the result moves by a
 * few ulps of double, far inside the f32 and f64 tolerances).
 *
 * Extents: the batch-norm reductions run per channel (extent C); the
 * running updates are tiny and serial; reduce_sum runs per output element.
 * When reduce_sum keeps the innermost dimension (dbias = Σ over the batch of
 * [N,C]), the per-output sums would be strided, so each thread instead adds
 * whole contiguous rows into double accumulators in its workspace, in the
 * reference's order. */
#include "internal.h"

typedef struct {
	int64_t n, c, hw; /* batch, channels, spatial elements per channel */
} bn_shape;

static bn_shape shape_of(const ir_type *x)
{
	bn_shape s = {x->dim[0], x->dim[1], x->rank == 4 ? x->dim[2] * x->dim[3] : 1};
	return s;
}

/* a + b in double, which the vectoriser may reassociate. */
static LLVMValueRef sum_add(cg_kb *k, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef v = cg_fadd(k, a, b);
	if (LLVMIsAInstruction(v))
		LLVMSetFastMathFlags(v, LLVMFastMathAllowReassoc);
	return v;
}

/* The term of a channel sum at element i, in double. */
typedef LLVMValueRef (*term_fn)(cg_kb *k, LLVMValueRef i, const LLVMValueRef *ctx);

/* Σ over n and the H·W run of channel c of term(i), i = (n·C + c)·HW + j. */
static LLVMValueRef channel_sum(cg_kb *k, const bn_shape *s, LLVMValueRef c, term_fn term,
	const LLVMValueRef *ctx)
{
	cg_loop ln, lj;
	LLVMValueRef n = cg_for(k, &ln, cg_i64(k, 0), cg_i64(k, s->n));
	LLVMValueRef acc = cg_carry(k, &ln, cg_f64(k, 0));
	LLVMValueRef base = cg_imul(k, cg_iadd(k, cg_imul(k, n, cg_i64(k, s->c)), c), cg_i64(k, s->hw));
	LLVMValueRef j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, s->hw));
	LLVMValueRef a = cg_carry(k, &lj, acc);
	LLVMValueRef next = sum_add(k, a, term(k, cg_iadd(k, base, j), ctx));
	cg_end_for(k, &lj, &next);
	cg_end_for(k, &ln, &lj.out[0]);
	return ln.out[0];
}

static int64_t per_channel(const ir_node *n)
{
	return shape_of(&n->in[0]->type).c;
}

/* ---- bn_stats: mean, then the mean of squared deviations ---------------- */

/* ctx: x */
static LLVMValueRef term_x(cg_kb *k, LLVMValueRef i, const LLVMValueRef *ctx)
{
	return cg_to_f64(k, cg_ld(k, ctx[0], i));
}

/* ctx: x, mean */
static LLVMValueRef term_dev2(cg_kb *k, LLVMValueRef i, const LLVMValueRef *ctx)
{
	LLVMValueRef d = cg_fsub(k, cg_to_f64(k, cg_ld(k, ctx[0], i)), ctx[1]);
	return cg_fmul(k, d, d);
}

static void emit_bn_stats(cg_kb *k, const ir_node *n)
{
	bn_shape s = shape_of(&n->in[0]->type);
	LLVMValueRef st = cg_arg(k, 0), x = cg_arg(k, 1);
	LLVMValueRef m = cg_f64(k, (double)(s.n * s.hw));
	cg_loop l;
	LLVMValueRef c = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef ctx[2] = {x, NULL};
	ctx[1] = cg_fdiv(k, channel_sum(k, &s, c, term_x, ctx), m);
	LLVMValueRef sq = channel_sum(k, &s, c, term_dev2, ctx);
	cg_st(k, st, c, cg_to_real(k, ctx[1]));
	cg_st(k, st, cg_iadd(k, c, cg_i64(k, s.c)), cg_to_real(k, cg_fdiv(k, sq, m)));
	cg_end_for(k, &l, NULL);
}

/* ---- bn_dgamma: Σ dy·(x − mean), times 1/sqrt(var + eps) ---------------- */

/* ctx: dy, x, mean */
static LLVMValueRef term_dgamma(cg_kb *k, LLVMValueRef i, const LLVMValueRef *ctx)
{
	LLVMValueRef dy = cg_to_f64(k, cg_ld(k, ctx[0], i));
	return cg_fmul(k, dy, cg_fsub(k, cg_to_f64(k, cg_ld(k, ctx[1], i)), ctx[2]));
}

static void emit_bn_dgamma(cg_kb *k, const ir_node *n)
{
	bn_shape s = shape_of(&n->in[0]->type);
	LLVMValueRef dg = cg_arg(k, 0), dy = cg_arg(k, 1), x = cg_arg(k, 2), st = cg_arg(k, 3);
	LLVMValueRef eps = cg_f64(k, ir_node_float(n, IR_ATTR_EPS));
	cg_loop l;
	LLVMValueRef c = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef ctx[3] = {dy, x, cg_to_f64(k, cg_ld(k, st, c))};
	LLVMValueRef sum = channel_sum(k, &s, c, term_dgamma, ctx);
	LLVMValueRef var = cg_to_f64(k, cg_ld(k, st, cg_iadd(k, c, cg_i64(k, s.c))));
	LLVMValueRef inv = cg_fdiv(k, cg_f64(k, 1), cg_math(k, "llvm.sqrt", cg_fadd(k, var, eps)));
	cg_st(k, dg, c, cg_to_real(k, cg_fmul(k, sum, inv)));
	cg_end_for(k, &l, NULL);
}

const cg_op_impl cg_impl_bn_stats = {per_channel, NULL, emit_bn_stats, false, NULL};
const cg_op_impl cg_impl_bn_dgamma = {per_channel, NULL, emit_bn_dgamma, false, NULL};

/* ---- running statistics: in place, serial -------------------------------- */

static int64_t running_extent(const ir_node *n)
{
	return n->type.dim[0];
}

/* out[i] = mom·run[i] + (1 − mom)·stats[row·C + i]·corr; out is run's
 * storage, each element read before it is written. */
static void emit_running(cg_kb *k, const ir_node *n, int64_t row, double corr)
{
	int64_t c = n->type.dim[0];
	double mom = ir_node_float(n, IR_ATTR_MOMENTUM);
	LLVMValueRef out = cg_arg(k, 0), run = cg_arg(k, 1), st = cg_arg(k, 2);
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef old = cg_fmul(k, cg_f64(k, mom), cg_to_f64(k, cg_ld(k, run, i)));
	LLVMValueRef batch = cg_to_f64(k, cg_ld(k, st, cg_iadd(k, i, cg_i64(k, row * c))));
	LLVMValueRef upd = cg_fmul(k, cg_f64(k, 1 - mom), batch);
	if (row)
		upd = cg_fmul(k, upd, cg_f64(k, corr));
	cg_st(k, out, i, cg_to_real(k, cg_fadd(k, old, upd)));
	cg_end_for(k, &l, NULL);
}

static void emit_bn_running_mean(cg_kb *k, const ir_node *n)
{
	emit_running(k, n, 0, 1);
}

/* The unbiased batch variance: stats[1]·count/(count − 1). */
static void emit_bn_running_var(cg_kb *k, const ir_node *n)
{
	double count = (double)ir_node_int(n, IR_ATTR_NCOUNT);
	emit_running(k, n, 1, count / (count - 1));
}

const cg_op_impl cg_impl_bn_running_mean = {running_extent, NULL, emit_bn_running_mean, true, NULL};
const cg_op_impl cg_impl_bn_running_var = {running_extent, NULL, emit_bn_running_var, true, NULL};

/* ---- reduce_sum ------------------------------------------------------------ */

/* A row-major index space: group i has size[i] positions, stride[i]
 * elements apart in the operand (as in runtime/kern_dense.c). */
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

/* Splits x's dimensions into the kept and the reduced space, merging
 * adjacent dimensions of the same kind. */
static void split_axes(const ir_node *n, space *kept, space *red)
{
	const ir_type *x = &n->in[0]->type;
	const ir_attr *axes = ir_node_attr(n, IR_ATTR_AXES);
	bool drop[IR_MAX_RANK] = {false};
	for (int i = 0; i < axes->u.ints.n; i++)
		drop[axes->u.ints.v[i]] = true;
	kept->n = red->n = 0;
	int64_t stride = 1;
	for (int i = x->rank - 1; i >= 0; i--) {
		space *s = drop[i] ? red : kept;
		if (i < x->rank - 1 && drop[i] == drop[i + 1]) {
			s->size[0] *= x->dim[i];
		} else {
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

/* The operand offset of linear index t in s (of the first `groups` groups). */
static LLVMValueRef space_offset(cg_kb *k, const space *s, int groups, LLVMValueRef t)
{
	LLVMValueRef off = cg_i64(k, 0);
	for (int i = groups - 1; i >= 0; i--) {
		if (i > 0 && s->size[i] <= 1)
			continue; /* one position (or none, and then no t reaches here) */
		LLVMValueRef pos = i > 0 ? cg_irem(k, t, cg_i64(k, s->size[i])) : t;
		off = cg_iadd(k, off, cg_imul(k, pos, cg_i64(k, s->stride[i])));
		if (i > 0)
			t = cg_idiv(k, t, cg_i64(k, s->size[i]));
	}
	return off;
}

/* Does the innermost dimension survive?  Then rows are summed into
 * accumulators; else each output is one contiguous-innermost sum. */
static bool keeps_inner(const space *kept)
{
	return kept->n > 0 && kept->stride[kept->n - 1] == 1;
}

static int64_t reduce_extent(const ir_node *n)
{
	return ir_type_elems(&n->type);
}

static int64_t reduce_workspace(const ir_node *n)
{
	space kept, red;
	split_axes(n, &kept, &red);
	return keeps_inner(&kept) ? kept.size[kept.n - 1] * (int64_t)sizeof(double) : 0;
}

/* Innermost axis reduced: y[t] = Σ_u Σ_q x[kept(t) + red(u) + q], the q run
 * contiguous. */
static void reduce_outputs(cg_kb *k, const space *kept, const space *red)
{
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1);
	int64_t inner = red->size[red->n - 1];
	space outer = *red;
	outer.n--;
	cg_loop lt, lu, lq;
	LLVMValueRef t = cg_for(k, &lt, k->lo, k->hi);
	LLVMValueRef base = space_offset(k, kept, kept->n, t);
	LLVMValueRef u = cg_for(k, &lu, cg_i64(k, 0), cg_i64(k, space_count(&outer)));
	LLVMValueRef acc = cg_carry(k, &lu, cg_f64(k, 0));
	LLVMValueRef p = cg_iadd(k, base, space_offset(k, &outer, outer.n, u));
	LLVMValueRef q = cg_for(k, &lq, cg_i64(k, 0), cg_i64(k, inner));
	LLVMValueRef a = cg_carry(k, &lq, acc);
	LLVMValueRef next = sum_add(k, a, cg_to_f64(k, cg_ld(k, x, cg_iadd(k, p, q))));
	cg_end_for(k, &lq, &next);
	cg_end_for(k, &lu, &lq.out[0]);
	cg_st(k, y, t, cg_to_real(k, lu.out[0]));
	cg_end_for(k, &lt, NULL);
}

/* Innermost axis kept (size K): outputs t = j·K + q.  For each block j the
 * thread's part [q0, q1) of it is summed over every reduced position u, in
 * order, into double accumulators. */
static void reduce_rows(cg_kb *k, const ir_node *n, const space *kept, const space *red)
{
	cg_module *M = k->m;
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1), ws = cg_arg(k, n->nin + 1);
	int64_t K = kept->size[kept->n - 1];
	LLVMValueRef kk = cg_i64(k, K);
	LLVMValueRef acc = cg_gep(k, M->f64, ws, cg_imul(k, k->tid, kk));
	LLVMValueRef first = cg_idiv(k, k->lo, kk);
	LLVMValueRef last = cg_idiv(k, cg_iadd(k, k->hi, cg_i64(k, K - 1)), kk);
	cg_loop lj, lz, lu, lq, ls;
	LLVMValueRef j = cg_for(k, &lj, first, last);
	LLVMValueRef start = cg_imul(k, j, kk);
	LLVMValueRef lo = cg_isub(k, k->lo, start), hi = cg_isub(k, k->hi, start);
	LLVMValueRef q0 = cg_imax(k, lo, cg_i64(k, 0)), q1 = cg_imin(k, hi, kk);
	LLVMValueRef base = space_offset(k, kept, kept->n - 1, j);
	LLVMValueRef q = cg_for(k, &lz, q0, q1);
	LLVMBuildStore(k->b, cg_f64(k, 0), cg_gep(k, M->f64, acc, q));
	cg_end_for(k, &lz, NULL);
	LLVMValueRef u = cg_for(k, &lu, cg_i64(k, 0), cg_i64(k, space_count(red)));
	LLVMValueRef row = cg_gep(k, NULL, x, cg_iadd(k, base, space_offset(k, red, red->n, u)));
	q = cg_for(k, &lq, q0, q1);
	LLVMValueRef at = cg_gep(k, M->f64, acc, q);
	LLVMValueRef sum = cg_fadd(k, LLVMBuildLoad2(k->b, M->f64, at, ""), cg_to_f64(k, cg_ld(k, row, q)));
	LLVMBuildStore(k->b, sum, at);
	cg_end_for(k, &lq, NULL);
	cg_end_for(k, &lu, NULL);
	q = cg_for(k, &ls, q0, q1);
	LLVMValueRef v = LLVMBuildLoad2(k->b, M->f64, cg_gep(k, M->f64, acc, q), "");
	cg_st(k, y, cg_iadd(k, start, q), cg_to_real(k, v));
	cg_end_for(k, &ls, NULL);
	cg_end_for(k, &lj, NULL);
}

static void emit_reduce_sum(cg_kb *k, const ir_node *n)
{
	space kept, red;
	split_axes(n, &kept, &red);
	if (ir_type_elems(&n->type) == 0)
		return;
	if (keeps_inner(&kept))
		reduce_rows(k, n, &kept, &red);
	else
		reduce_outputs(k, &kept, &red);
}

const cg_op_impl cg_impl_reduce_sum = {reduce_extent, reduce_workspace, emit_reduce_sum, false, NULL};
