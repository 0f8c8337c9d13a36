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
 * Extents: the batch-norm reductions run per image (extent N), each thread
 * summing its images into per-thread partials that a serial finish adds in
 * thread order (bn_stats in f64, two passes, runs per channel, extent C);
 * the running updates are tiny and serial; reduce_sum runs per output
 * element.  A bn_dgamma that opens a dbeta group (passes/fuse.c) also sums
 * dy, writing the group's reduce_sum (batch norm's dbeta) in its finish:
 * one read of dy for both.
 * When reduce_sum keeps the innermost dimension (dbias = Σ over the batch of
 * [N,C]), the per-output sums would be strided, so each thread instead adds
 * whole contiguous rows into double accumulators in its workspace, in the
 * reference's order. */
#include <math.h>

#include "internal.h"

typedef struct {
	int64_t n, c, hw; /* batch, channels, spatial elements per channel */
} bn_shape;

static bn_shape shape_of(const ir_type *x)
{
	bn_shape s = {x->dim[0], x->dim[1], x->rank == 4 ? x->dim[2] * x->dim[3] : 1};
	return s;
}

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

/* ---- sums over contiguous runs, in double vectors ------------------------- */

/* The channel sums (and reduce_sum's per-output sums) add up one or two
 * terms over runs of `len` contiguous elements, the runs far apart (a
 * channel's H·W plane in each image).  Left to the loop vectoriser, each
 * channel was summed run by run in its own column of the tensor: vector
 * partial sums reduced at every run's end, a scalar loop for its last
 * elements (most of a 49-element run), and short runs 12 KB apart that the
 * prefetcher could not follow.  Here the partial sums are explicit: RUN_ACC
 * vectors of doubles per sum and output, each run's tail a masked load
 * whose dead lanes add zero; and the runs are visited in memory order, a
 * block of RUN_BLOCK outputs at a time (for each image, the block's
 * channels one after the other), their partial sums kept on the stack
 * between runs and reduced once at the end.  Each output's order is fixed
 * by the code, not by the threads' split, so results are deterministic;
 * it differs from the reference's serial order by a few ulps of double. */
#define RUN_ACC 4
#define RUN_SUMS 2
#define RUN_INS 2
#define RUN_BLOCK 16

typedef struct run_sums run_sums;

/* The sums' terms at one vector of positions: v the operands' elements
 * and ctx the splatted constants of the output, in double. */
typedef void (*run_term_fn)(cg_kb *k, const LLVMValueRef *v, const LLVMValueRef *ctx, LLVMValueRef *term);
/* Output t's constants (splatted doubles) into ctx. */
typedef void (*run_ctx_fn)(cg_kb *k, const run_sums *r, LLVMValueRef t, LLVMValueRef *ctx);
/* Output t's sums are sum[0 .. nsum): what to store. */
typedef void (*run_done_fn)(cg_kb *k, const run_sums *r, LLVMValueRef t, const LLVMValueRef *sum);

struct run_sums {
	LLVMValueRef in[RUN_INS]; /* operands */
	int nin, nsum;
	run_term_fn term;
	run_ctx_fn ctx;           /* or NULL */
	run_done_fn done;
	const ir_node *n;
	const space *outs;        /* output t's first run, from 0 */
	const space *rows;        /* its runs, from the first */
	int64_t len;              /* elements per run */
	/* by_row: the runs [k->lo, k->hi) of every output (all of them),
	 * instead of every run of the outputs [k->lo, k->hi) */
	bool by_row;
};

/* Doubles per vector on the target. */
static int run_lanes(const cg_kb *k)
{
	int l = k->m->vec_bytes / 8;
	return l < 2 ? 2 : l;
}

static LLVMTypeRef run_vec(const cg_kb *k, LLVMTypeRef elem)
{
	return LLVMVectorType(elem, (unsigned)run_lanes(k));
}

static LLVMValueRef run_splat(cg_kb *k, LLVMValueRef x)
{
	return cg_vsplat(k, x, run_lanes(k));
}

/* A vector of base[i ..] in double: n lanes (the rest zero) when n < lanes. */
static LLVMValueRef run_load(cg_kb *k, LLVMValueRef base, LLVMValueRef i, int n)
{
	LLVMValueRef v = cg_vload(k, run_lanes(k), base, i, n);
	return k->dt == IR_F64 ? v : LLVMBuildFPExt(k->b, v, run_vec(k, k->m->f64), "");
}

/* acc[s·RUN_ACC + a] += the terms of the n elements at off (n < lanes: the
 * rest of the lanes add zero). */
static void run_add(cg_kb *k, const run_sums *r, const LLVMValueRef *ctx, LLVMValueRef off, int n, int a,
	LLVMValueRef *acc)
{
	LLVMValueRef v[RUN_INS], t[RUN_SUMS];
	for (int i = 0; i < r->nin; i++)
		v[i] = run_load(k, r->in[i], off, n);
	r->term(k, v, ctx, t);
	for (int s = 0; s < r->nsum; s++) {
		if (n < run_lanes(k))
			t[s] = LLVMBuildSelect(k->b, cg_vmask(k, run_lanes(k), n), t[s], LLVMConstNull(LLVMTypeOf(t[s])), "");
		acc[s * RUN_ACC + a] = LLVMBuildFAdd(k->b, acc[s * RUN_ACC + a], t[s], "");
	}
}

/* acc += the terms of the run at row, for output t. */
static void run_one(cg_kb *k, const run_sums *r, LLVMValueRef t, LLVMValueRef row, LLVMValueRef *acc)
{
	int lanes = run_lanes(k), na = r->nsum * RUN_ACC;
	int64_t full = r->len / lanes, groups = full / RUN_ACC;
	int rest = (int)(full % RUN_ACC), tail = (int)(r->len % lanes);
	LLVMValueRef ctx[2] = {NULL, NULL};
	if (r->ctx)
		r->ctx(k, r, t, ctx);
	if (groups > 0) {
		cg_loop lg;
		LLVMValueRef g = cg_for(k, &lg, cg_i64(k, 0), cg_i64(k, groups));
		for (int a = 0; a < na; a++)
			acc[a] = cg_carry(k, &lg, acc[a]);
		LLVMValueRef at = cg_iadd(k, row, cg_imul(k, g, cg_i64(k, RUN_ACC * lanes)));
		for (int a = 0; a < RUN_ACC; a++)
			run_add(k, r, ctx, cg_iadd(k, at, cg_i64(k, a * lanes)), lanes, a, acc);
		cg_end_for(k, &lg, acc);
		for (int a = 0; a < na; a++)
			acc[a] = lg.out[a];
	}
	int64_t done = groups * RUN_ACC * lanes;
	for (int a = 0; a < rest; a++)
		run_add(k, r, ctx, cg_iadd(k, row, cg_i64(k, done + a * lanes)), lanes, a, acc);
	if (tail)
		run_add(k, r, ctx, cg_iadd(k, row, cg_i64(k, full * lanes)), tail, rest, acc);
}

/* Space for one block's partial sums, in the kernel's entry block. */
static LLVMValueRef run_stack(cg_kb *k)
{
	LLVMBuilderRef b = LLVMCreateBuilderInContext(k->m->ctx);
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(k->fn);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);
	if (first)
		LLVMPositionBuilderBefore(b, first);
	else
		LLVMPositionBuilderAtEnd(b, entry);
	LLVMTypeRef ty = LLVMArrayType(run_vec(k, k->m->f64), RUN_BLOCK * RUN_SUMS * RUN_ACC);
	LLVMValueRef p = LLVMBuildAlloca(b, ty, "");
	LLVMSetAlignment(p, 64);
	LLVMDisposeBuilder(b);
	return p;
}

/* For every output t of [lo, hi): its sums over its runs, handed to done. */
static void run_sum(cg_kb *k, const run_sums *r)
{
	int na = r->nsum * RUN_ACC;
	LLVMTypeRef vt = run_vec(k, k->m->f64), fty;
	LLVMValueRef zero = LLVMConstNull(vt), stack = run_stack(k), acc[RUN_SUMS * RUN_ACC];
	cg_loop lb, lz, lu, lt, lf;
	LLVMValueRef olo = r->by_row ? cg_i64(k, 0) : k->lo;
	LLVMValueRef ohi = r->by_row ? cg_i64(k, space_count(r->outs)) : k->hi;
	LLVMValueRef ulo = r->by_row ? k->lo : cg_i64(k, 0);
	LLVMValueRef uhi = r->by_row ? k->hi : cg_i64(k, space_count(r->rows));
	LLVMValueRef nb = cg_idiv(k, cg_iadd(k, cg_isub(k, ohi, olo), cg_i64(k, RUN_BLOCK - 1)),
		cg_i64(k, RUN_BLOCK));
	LLVMValueRef bi = cg_for(k, &lb, cg_i64(k, 0), nb);
	LLVMValueRef t0 = cg_iadd(k, olo, cg_imul(k, bi, cg_i64(k, RUN_BLOCK)));
	LLVMValueRef t1 = cg_imin(k, cg_iadd(k, t0, cg_i64(k, RUN_BLOCK)), ohi);
	LLVMValueRef t = cg_for(k, &lz, t0, t1);
	LLVMValueRef slot = cg_imul(k, cg_isub(k, t, t0), cg_i64(k, na));
	for (int a = 0; a < na; a++)
		LLVMBuildStore(k->b, zero, cg_gep(k, vt, stack, cg_iadd(k, slot, cg_i64(k, a))));
	cg_end_for(k, &lz, NULL);
	LLVMValueRef u = cg_for(k, &lu, ulo, uhi);
	LLVMValueRef rowu = space_offset(k, r->rows, r->rows->n, u);
	t = cg_for(k, &lt, t0, t1);
	slot = cg_imul(k, cg_isub(k, t, t0), cg_i64(k, na));
	for (int a = 0; a < na; a++)
		acc[a] = LLVMBuildLoad2(k->b, vt, cg_gep(k, vt, stack, cg_iadd(k, slot, cg_i64(k, a))), "");
	run_one(k, r, t, cg_iadd(k, rowu, space_offset(k, r->outs, r->outs->n, t)), acc);
	for (int a = 0; a < na; a++)
		LLVMBuildStore(k->b, acc[a], cg_gep(k, vt, stack, cg_iadd(k, slot, cg_i64(k, a))));
	cg_end_for(k, &lt, NULL);
	cg_end_for(k, &lu, NULL);
	t = cg_for(k, &lf, t0, t1);
	slot = cg_imul(k, cg_isub(k, t, t0), cg_i64(k, na));
	LLVMValueRef f = cg_intrinsic(k, "llvm.vector.reduce.fadd", &vt, 1, &fty), sum[RUN_SUMS];
	for (int s = 0; s < r->nsum; s++) {
		LLVMValueRef p[RUN_ACC];
		for (int a = 0; a < RUN_ACC; a++)
			p[a] = LLVMBuildLoad2(k->b, vt, cg_gep(k, vt, stack, cg_iadd(k, slot, cg_i64(k, s * RUN_ACC + a))), "");
		LLVMValueRef v = LLVMBuildFAdd(k->b, LLVMBuildFAdd(k->b, p[0], p[1], ""),
			LLVMBuildFAdd(k->b, p[2], p[3], ""), "");
		LLVMValueRef args[2] = {cg_f64(k, 0), v};
		sum[s] = LLVMBuildCall2(k->b, fty, f, args, 2, "");
		LLVMSetFastMathFlags(sum[s], LLVMFastMathAllowReassoc);
	}
	r->done(k, r, t, sum);
	cg_end_for(k, &lf, NULL);
	cg_end_for(k, &lb, NULL);
}

/* Channel c's runs: image n's H·W plane, for every n. */
static void channel_runs(const bn_shape *s, run_sums *r, space *outs, space *rows)
{
	*outs = (space){1, {s->c}, {s->hw}};
	*rows = (space){1, {s->n}, {s->c * s->hw}};
	r->outs = outs;
	r->rows = rows;
	r->len = s->hw;
}

/* ---- by images: per-thread partial sums, added by a serial finish -------- */

/* bn_stats (in f32: its f64 form takes two passes) and bn_dgamma read
 * tensors the kernels around them (convolutions, elementwise groups) divide
 * among threads by images.  Divided by channels, each thread read half of
 * its operands from the other core's cache, and the kernel after it half
 * of its own (on fashion at 2 threads they took 1.7-3.1x the processor time
 * of one thread).  So each thread sums its images [lo, hi) for every
 * channel, RUN_BLOCK channels at a time as before, into its workspace
 * (nsum doubles per channel), and the finish adds the threads' partials in
 * thread order and computes the result.  On one thread the sums are the
 * same as by channels, so are the bits. */
static bool by_images(const ir_node *n)
{
	return n->op == IR_OP_BN_DGAMMA || n->type.dtype == IR_F32;
}

void cg_bn_coeffs(cg_kb *k, LLVMValueRef mean, LLVMValueRef var, LLVMValueRef gamma, LLVMValueRef beta, double eps,
	LLVMValueRef *sc, LLVMValueRef *shift)
{
	*sc = cg_fdiv(k, gamma, cg_math(k, "llvm.sqrt", cg_fadd(k, var, cg_f64(k, eps))));
	*shift = cg_fsub(k, beta, cg_fmul(k, mean, *sc));
}

bool cg_bn_opens_dbeta(const ir_node *n)
{
	return n->op == IR_OP_BN_DGAMMA && n->group >= 0;
}

/* bn_dgamma: Σ dy·(x − mean), and Σ dy when it opens a dbeta group;
 * bn_stats: Σd and Σd². */
static int by_images_sums(const ir_node *n)
{
	return n->op == IR_OP_BN_DGAMMA ? 1 + cg_bn_opens_dbeta(n) : 2;
}

static int64_t bn_extent(const ir_node *n)
{
	bn_shape s = shape_of(&n->in[0]->type);
	return by_images(n) ? s.n : s.c;
}

static int64_t bn_workspace(const ir_node *n)
{
	if (!by_images(n))
		return 0;
	return by_images_sums(n) * shape_of(&n->in[0]->type).c * (int64_t)sizeof(double);
}

/* Channel c's partial sums, into this thread's workspace slice. */
static void done_partial(cg_kb *k, const run_sums *r, LLVMValueRef c, const LLVMValueRef *sum)
{
	int64_t C = r->outs->size[0];
	LLVMValueRef ws = cg_gep(k, k->m->f64, cg_arg(k, r->n->nin + 1),
		cg_imul(k, k->tid, cg_i64(k, r->nsum * C)));
	for (int i = 0; i < r->nsum; i++)
		LLVMBuildStore(k->b, sum[i], cg_gep(k, k->m->f64, ws, cg_iadd(k, c, cg_i64(k, i * C))));
}

/* The finish: every channel's partials added in thread order, handed to
 * done (r as the kernel's, its done being what the channel split ran). */
static void partials_finish(cg_kb *k, const run_sums *r, int threads)
{
	int64_t C = r->outs->size[0], per = r->nsum * C;
	int ran = space_count(r->rows) <= 1 ? 1 : threads; /* the step runs an extent of 1 serially */
	LLVMValueRef ws = cg_arg(k, r->n->nin + 1), sum[RUN_SUMS];
	cg_loop lc;
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, C));
	for (int t = 0; t < ran; t++) {
		for (int i = 0; i < r->nsum; i++) {
			LLVMValueRef at = cg_iadd(k, c, cg_i64(k, t * per + i * C));
			LLVMValueRef v = LLVMBuildLoad2(k->b, k->m->f64, cg_gep(k, k->m->f64, ws, at), "");
			sum[i] = t == 0 ? v : LLVMBuildFAdd(k->b, sum[i], v, "");
		}
	}
	r->done(k, r, c, sum);
	cg_end_for(k, &lc, NULL);
}

/* ---- bn_stats: mean and biased variance ------------------------------------- */

/* In f32, one pass: the sums of d = x − K and d², K the channel's first
 * element (0 if it is not finite), give the mean K + Σd/m and the variance
 * Σd²/m − (Σd/m)².  x and K are floats, so d and d² are exact in double,
 * and with the shift no large mean cancels the variance away: as precise
 * as two passes.  In f64 (where d² is not exact) two passes, the mean and
 * then the squared deviations, as the reference does. */

static LLVMValueRef stats_shift(cg_kb *k, const run_sums *r, LLVMValueRef c)
{
	LLVMValueRef first = cg_to_f64(k, cg_ld(k, r->in[0], cg_imul(k, c, cg_i64(k, r->len))));
	LLVMValueRef fin = LLVMBuildFCmp(k->b, LLVMRealOLT, cg_math(k, "llvm.fabs", first), cg_f64(k, INFINITY), "");
	return LLVMBuildSelect(k->b, fin, first, cg_f64(k, 0), "");
}

static void ctx_shift(cg_kb *k, const run_sums *r, LLVMValueRef c, LLVMValueRef *ctx)
{
	ctx[0] = run_splat(k, stats_shift(k, r, c));
}

/* ctx: K */
static void term_shifted(cg_kb *k, const LLVMValueRef *v, const LLVMValueRef *ctx, LLVMValueRef *t)
{
	t[0] = LLVMBuildFSub(k->b, v[0], ctx[0], "");
	t[1] = LLVMBuildFMul(k->b, t[0], t[0], "");
}

static void term_x(cg_kb *k, const LLVMValueRef *v, const LLVMValueRef *ctx, LLVMValueRef *t)
{
	(void)k, (void)ctx;
	t[0] = v[0];
}

/* The elements of a channel. */
static LLVMValueRef stats_count(cg_kb *k, const run_sums *r)
{
	return cg_f64(k, (double)(space_count(r->rows) * r->len));
}

static void stats_store(cg_kb *k, const run_sums *r, LLVMValueRef c, int row, LLVMValueRef v)
{
	cg_st(k, cg_arg(k, 0), cg_iadd(k, c, cg_i64(k, row * r->outs->size[0])), cg_to_real(k, v));
}

static void done_shifted(cg_kb *k, const run_sums *r, LLVMValueRef c, const LLVMValueRef *sum)
{
	LLVMValueRef m = stats_count(k, r), d = cg_fdiv(k, sum[0], m);
	LLVMValueRef var = cg_fsub(k, cg_fdiv(k, sum[1], m), cg_fmul(k, d, d));
	LLVMValueRef neg = LLVMBuildFCmp(k->b, LLVMRealOLT, var, cg_f64(k, 0), "");
	stats_store(k, r, c, 0, cg_fadd(k, stats_shift(k, r, c), d));
	stats_store(k, r, c, 1, LLVMBuildSelect(k->b, neg, cg_f64(k, 0), var, ""));
}

/* The f64 passes: the mean into row 0, then (ctx: that mean) the mean
 * squared deviation into row 1. */
static void done_mean(cg_kb *k, const run_sums *r, LLVMValueRef c, const LLVMValueRef *sum)
{
	stats_store(k, r, c, 0, cg_fdiv(k, sum[0], stats_count(k, r)));
}

static void ctx_mean(cg_kb *k, const run_sums *r, LLVMValueRef c, LLVMValueRef *ctx)
{
	ctx[0] = run_splat(k, cg_to_f64(k, cg_ld(k, cg_arg(k, 0), c)));
}

static void term_dev2(cg_kb *k, const LLVMValueRef *v, const LLVMValueRef *ctx, LLVMValueRef *t)
{
	LLVMValueRef d = LLVMBuildFSub(k->b, v[0], ctx[0], "");
	t[0] = LLVMBuildFMul(k->b, d, d, "");
}

static void done_var(cg_kb *k, const run_sums *r, LLVMValueRef c, const LLVMValueRef *sum)
{
	stats_store(k, r, c, 1, cg_fdiv(k, sum[0], stats_count(k, r)));
}

static void emit_bn_stats(cg_kb *k, const ir_node *n)
{
	bn_shape s = shape_of(&n->in[0]->type);
	if (s.n * s.hw == 0)
		return;
	space outs, rows;
	run_sums r = {{cg_arg(k, 1)}, 1, 2, term_shifted, ctx_shift, done_shifted, n, NULL, NULL, 0, false};
	channel_runs(&s, &r, &outs, &rows);
	if (k->dt == IR_F32) {
		r.done = done_partial, r.by_row = true;
		run_sum(k, &r);
		return;
	}
	r.nsum = 1, r.term = term_x, r.ctx = NULL, r.done = done_mean;
	run_sum(k, &r);
	r.term = term_dev2, r.ctx = ctx_mean, r.done = done_var;
	run_sum(k, &r);
}

/* ---- bn_dgamma: Σ dy·(x − mean), times 1/sqrt(var + eps) ---------------- */

/* ctx: the channel's mean (stats is args[3]) */
static void ctx_dgamma(cg_kb *k, const run_sums *r, LLVMValueRef c, LLVMValueRef *ctx)
{
	(void)r;
	ctx[0] = run_splat(k, cg_to_f64(k, cg_ld(k, cg_arg(k, 3), c)));
}

/* v: dy, x; t[1] = dy when the kernel also sums dbeta */
static void term_dgamma(cg_kb *k, const LLVMValueRef *v, const LLVMValueRef *ctx, LLVMValueRef *t)
{
	t[0] = LLVMBuildFMul(k->b, v[0], LLVMBuildFSub(k->b, v[1], ctx[0], ""), "");
	t[1] = v[0];
}

/* dgamma into args[0]; with a dbeta group, Σ dy into the reduce_sum's
 * buffer, args[nin + 2] (codegen/step.c). */
static void done_dgamma(cg_kb *k, const run_sums *r, LLVMValueRef c, const LLVMValueRef *sum)
{
	LLVMValueRef eps = cg_f64(k, ir_node_float(r->n, IR_ATTR_EPS));
	LLVMValueRef var = cg_to_f64(k, cg_ld(k, cg_arg(k, 3), cg_iadd(k, c, cg_i64(k, r->outs->size[0]))));
	LLVMValueRef inv = cg_fdiv(k, cg_f64(k, 1), cg_math(k, "llvm.sqrt", cg_fadd(k, var, eps)));
	cg_st(k, cg_arg(k, 0), c, cg_to_real(k, cg_fmul(k, sum[0], inv)));
	if (r->nsum > 1)
		cg_st(k, cg_arg(k, r->n->nin + 2), c, cg_to_real(k, sum[1]));
}

/* Both passes' sums: of dy·(x − mean), and of dy with a dbeta group. */
static run_sums dgamma_sums(cg_kb *k, const ir_node *n)
{
	run_sums r = {{cg_arg(k, 1), cg_arg(k, 2)}, 2, by_images_sums(n), term_dgamma, ctx_dgamma, done_partial, n,
		NULL, NULL, 0, true};
	return r;
}

static void emit_bn_dgamma(cg_kb *k, const ir_node *n)
{
	bn_shape s = shape_of(&n->in[0]->type);
	space outs, rows;
	run_sums r = dgamma_sums(k, n);
	channel_runs(&s, &r, &outs, &rows);
	run_sum(k, &r);
}

static void finish_bn_dgamma(cg_kb *k, const ir_node *n, int threads)
{
	bn_shape s = shape_of(&n->in[0]->type);
	space outs, rows;
	run_sums r = dgamma_sums(k, n);
	r.done = done_dgamma, r.by_row = false;
	channel_runs(&s, &r, &outs, &rows);
	partials_finish(k, &r, threads);
}

/* In f64 (by channels) there is nothing to finish. */
static void finish_bn_stats(cg_kb *k, const ir_node *n, int threads)
{
	bn_shape s = shape_of(&n->in[0]->type);
	if (!by_images(n) || s.n * s.hw == 0)
		return;
	space outs, rows;
	run_sums r = {{cg_arg(k, 1)}, 1, 2, term_shifted, ctx_shift, done_shifted, n, NULL, NULL, 0, false};
	channel_runs(&s, &r, &outs, &rows);
	partials_finish(k, &r, threads);
}

const cg_op_impl cg_impl_bn_stats = {bn_extent, bn_workspace, emit_bn_stats, false, finish_bn_stats, NULL};
const cg_op_impl cg_impl_bn_dgamma = {bn_extent, bn_workspace, emit_bn_dgamma, false, finish_bn_dgamma, NULL};

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

const cg_op_impl cg_impl_bn_running_mean = {running_extent, NULL, emit_bn_running_mean, true, NULL, NULL};
const cg_op_impl cg_impl_bn_running_var = {running_extent, NULL, emit_bn_running_var, true, NULL, NULL};

/* ---- reduce_sum ------------------------------------------------------------ */

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
 * contiguous (summed as the channel sums are). */
static void done_reduce(cg_kb *k, const run_sums *r, LLVMValueRef t, const LLVMValueRef *sum)
{
	(void)r;
	cg_st(k, cg_arg(k, 0), t, cg_to_real(k, sum[0]));
}

static void reduce_outputs(cg_kb *k, const space *kept, const space *red)
{
	space outer = *red;
	outer.n--;
	run_sums r = {{cg_arg(k, 1)}, 1, 1, term_x, NULL, done_reduce, NULL, kept, &outer, red->size[red->n - 1], false};
	run_sum(k, &r);
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

const cg_op_impl cg_impl_reduce_sum = {reduce_extent, reduce_workspace, emit_reduce_sum, false, NULL, NULL};
