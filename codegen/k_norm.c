/* k_norm.c: kernels for the row-wise ops of the transformer: layer-norm
 * statistics and gradients (ln_stats, ln_dgamma, ln_dx), softmax and its
 * gradient, and the mean over tokens (token_mean).  ln_norm, gelu,
 * gelu_grad and token_mean_grad are elementwise (k_elementwise.c).
 *
 * Arithmetic follows runtime/kern_norm.c: in double for both real types,
 * rounded once.  In f64 (and f32 under cg_options.libm_math) step for step,
 * every sum in the reference's order (no reassociation), so the results are
 * the reference's to the last bit or nearly; softmax's running maximum is
 * cg_fmax and its exponentials libm's.  In f32 the row sums may be
 * reassociated (sum()), the maximum is llvm.maximum (a NaN wins as in
 * cg_fmax) and exp is vmath.c's, so each pass over a row is vectorised;
 * the f32 results move by rounding only (double sums of at most a row).
 * Softmax's scale (factor) is applied as the row is read, and its
 * exponentials are computed once, kept in the workspace (the reference
 * computes them twice rather than use any).
 *
 * Extents: rows of the last axis (ln_stats, ln_dx, softmax, softmax_grad:
 * rows are independent, so threads take whole rows); features for
 * ln_dgamma, each thread summing its range of features over every row into
 * double accumulators in its workspace, row by row, so it reads contiguous
 * pieces of each row; outputs [N,D] for token_mean. */
#include "internal.h"

/* Rows of the last axis of t, and its length. */
static int64_t row_len(const ir_type *t) { return t->dim[t->rank - 1]; }

static int64_t row_count(const ir_type *t)
{
	int64_t d = row_len(t);
	return d ? ir_type_elems(t) / d : 0;
}

static int64_t rows_in(const ir_node *n) { return row_count(&n->in[0]->type); }

/* acc + v for a row's sum: in the reference's order, or, with vector math
 * (f32), free to reassociate, so the loop vectoriser keeps partial sums. */
static LLVMValueRef sum(cg_kb *k, LLVMValueRef acc, LLVMValueRef v)
{
	LLVMValueRef s = cg_fadd(k, acc, v);
	if (cg_vector_math(k))
		LLVMSetFastMathFlags(s, LLVMFastMathAllowReassoc);
	return s;
}

/* The offset of row r's first element. */
static LLVMValueRef row_at(cg_kb *k, LLVMValueRef r, int64_t d)
{
	return cg_imul(k, r, cg_i64(k, d));
}

/* 1/sqrt(var + eps), var in double. */
LLVMValueRef cg_ln_inv_std(cg_kb *k, LLVMValueRef var, double eps)
{
	return cg_fdiv(k, cg_f64(k, 1), cg_math(k, "llvm.sqrt", cg_fadd(k, var, cg_f64(k, eps))));
}

/* 1/sqrt(stats[2r + 1] + eps), in double. */
static LLVMValueRef inv_std(cg_kb *k, LLVMValueRef st, LLVMValueRef r, double eps)
{
	LLVMValueRef var = cg_to_f64(k, cg_ld(k, st, cg_iadd(k, cg_imul(k, r, cg_i64(k, 2)), cg_i64(k, 1))));
	return cg_ln_inv_std(k, var, eps);
}

static LLVMValueRef mean_of(cg_kb *k, LLVMValueRef st, LLVMValueRef r)
{
	return cg_to_f64(k, cg_ld(k, st, cg_imul(k, r, cg_i64(k, 2))));
}

/* Σ_j row[j] in double, or of (row[j] − mean)² when mean is given. */
static LLVMValueRef row_sum(cg_kb *k, LLVMValueRef row, int64_t d, LLVMValueRef mean)
{
	cg_loop l;
	LLVMValueRef j = cg_for(k, &l, cg_i64(k, 0), cg_i64(k, d));
	LLVMValueRef acc = cg_carry(k, &l, cg_f64(k, 0));
	LLVMValueRef v = cg_to_f64(k, cg_ld(k, row, j));
	if (mean) {
		v = cg_fsub(k, v, mean);
		v = cg_fmul(k, v, v);
	}
	LLVMValueRef next = sum(k, acc, v);
	cg_end_for(k, &l, &next);
	return l.out[0];
}

/* ---- layer norm ---------------------------------------------------------------- */

void cg_ln_row_stats(cg_kb *k, LLVMValueRef row, int64_t d, LLVMValueRef *mean, LLVMValueRef *var)
{
	LLVMValueRef dd = cg_f64(k, (double)d);
	*mean = cg_fdiv(k, row_sum(k, row, d, NULL), dd);
	*var = cg_fdiv(k, row_sum(k, row, d, *mean), dd);
}

static void emit_ln_stats(cg_kb *k, const ir_node *n)
{
	int64_t d = row_len(&n->in[0]->type);
	LLVMValueRef st = cg_arg(k, 0), x = cg_arg(k, 1);
	cg_loop l;
	LLVMValueRef r = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef mean, var;
	cg_ln_row_stats(k, cg_gep(k, NULL, x, row_at(k, r, d)), d, &mean, &var);
	LLVMValueRef at = cg_imul(k, r, cg_i64(k, 2));
	cg_st(k, st, at, cg_to_real(k, mean));
	cg_st(k, st, cg_iadd(k, at, cg_i64(k, 1)), cg_to_real(k, var));
	cg_end_for(k, &l, NULL);
}

static int64_t features(const ir_node *n) { return row_len(&n->in[0]->type); }

static int64_t dgamma_workspace(const ir_node *n)
{
	return features(n) * (int64_t)sizeof(double);
}

/* dgamma[j] = Σ_r dy·(x − mean_r)·inv_r for the thread's j in [lo, hi). */
static void emit_ln_dgamma(cg_kb *k, const ir_node *n)
{
	cg_module *M = k->m;
	int64_t d = features(n), rows = rows_in(n);
	double eps = ir_node_float(n, IR_ATTR_EPS);
	LLVMValueRef dg = cg_arg(k, 0), dy = cg_arg(k, 1), x = cg_arg(k, 2), st = cg_arg(k, 3);
	LLVMValueRef acc = cg_gep(k, M->f64, cg_arg(k, 4), cg_imul(k, k->tid, cg_i64(k, d)));
	cg_loop lz, lr, lj, ls;
	LLVMValueRef j = cg_for(k, &lz, k->lo, k->hi);
	LLVMBuildStore(k->b, cg_f64(k, 0), cg_gep(k, M->f64, acc, j));
	cg_end_for(k, &lz, NULL);
	LLVMValueRef r = cg_for(k, &lr, cg_i64(k, 0), cg_i64(k, rows));
	LLVMValueRef mu = mean_of(k, st, r), inv = inv_std(k, st, r, eps), base = row_at(k, r, d);
	j = cg_for(k, &lj, k->lo, k->hi);
	LLVMValueRef i = cg_iadd(k, base, j), at = cg_gep(k, M->f64, acc, j);
	LLVMValueRef xhat = cg_fmul(k, cg_fsub(k, cg_to_f64(k, cg_ld(k, x, i)), mu), inv);
	LLVMValueRef term = cg_fmul(k, cg_to_f64(k, cg_ld(k, dy, i)), xhat);
	LLVMBuildStore(k->b, cg_fadd(k, LLVMBuildLoad2(k->b, M->f64, at, ""), term), at);
	cg_end_for(k, &lj, NULL);
	cg_end_for(k, &lr, NULL);
	j = cg_for(k, &ls, k->lo, k->hi);
	cg_st(k, dg, j, cg_to_real(k, LLVMBuildLoad2(k->b, M->f64, cg_gep(k, M->f64, acc, j), "")));
	cg_end_for(k, &ls, NULL);
}

/* g = dy·gamma and xhat = (x − mean)·inv at place j of the row. */
static void ln_dx_terms(cg_kb *k, const cg_ln_dx_row *w, LLVMValueRef j, LLVMValueRef *g, LLVMValueRef *xhat)
{
	*g = cg_fmul(k, cg_to_f64(k, cg_ld(k, w->dy, j)), cg_to_f64(k, cg_ld(k, w->gamma, j)));
	*xhat = cg_fmul(k, cg_fsub(k, cg_to_f64(k, cg_ld(k, w->x, j)), w->mu), w->inv);
}

void cg_ln_dx_sums(cg_kb *k, cg_ln_dx_row *w)
{
	LLVMValueRef dd = cg_f64(k, (double)w->d), g, xhat;
	cg_loop ls;
	LLVMValueRef j = cg_for(k, &ls, cg_i64(k, 0), cg_i64(k, w->d));
	LLVMValueRef sg = cg_carry(k, &ls, cg_f64(k, 0)), sgx = cg_carry(k, &ls, cg_f64(k, 0));
	ln_dx_terms(k, w, j, &g, &xhat);
	LLVMValueRef next[2] = {sum(k, sg, g), sum(k, sgx, cg_fmul(k, g, xhat))};
	cg_end_for(k, &ls, next);
	w->mg = cg_fdiv(k, ls.out[0], dd);
	w->mgx = cg_fdiv(k, ls.out[1], dd);
}

LLVMValueRef cg_ln_dx_at(cg_kb *k, const cg_ln_dx_row *w, LLVMValueRef j)
{
	LLVMValueRef g, xhat;
	ln_dx_terms(k, w, j, &g, &xhat);
	return cg_fmul(k, cg_fsub(k, cg_fsub(k, g, w->mg), cg_fmul(k, xhat, w->mgx)), w->inv);
}

/* Per row, with g = dy·gamma: dx = (g − mean(g) − xhat·mean(g·xhat))·inv. */
static void emit_ln_dx(cg_kb *k, const ir_node *n)
{
	int64_t d = features(n);
	double eps = ir_node_float(n, IR_ATTR_EPS);
	LLVMValueRef dx = cg_arg(k, 0), dy = cg_arg(k, 1), x = cg_arg(k, 2), st = cg_arg(k, 3);
	cg_loop l, lw;
	LLVMValueRef r = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef base = row_at(k, r, d);
	cg_ln_dx_row w = {cg_gep(k, NULL, dy, base), cg_gep(k, NULL, x, base), cg_arg(k, 4), mean_of(k, st, r),
		inv_std(k, st, r, eps), NULL, NULL, d};
	cg_ln_dx_sums(k, &w);
	LLVMValueRef j = cg_for(k, &lw, cg_i64(k, 0), cg_i64(k, d));
	cg_st(k, dx, cg_iadd(k, base, j), cg_to_real(k, cg_ln_dx_at(k, &w, j)));
	cg_end_for(k, &lw, NULL);
	cg_end_for(k, &l, NULL);
}

const cg_op_impl cg_impl_ln_stats = {rows_in, NULL, emit_ln_stats, false, NULL, NULL};
const cg_op_impl cg_impl_ln_dgamma = {features, dgamma_workspace, emit_ln_dgamma, false, NULL, NULL};
const cg_op_impl cg_impl_ln_dx = {rows_in, NULL, emit_ln_dx, false, NULL, NULL};

/* ---- softmax ------------------------------------------------------------------- */

static double factor_of(const ir_node *n)
{
	const ir_attr *f = ir_node_attr(n, IR_ATTR_FACTOR);
	return f ? f->u.f : 1;
}

/* f·row[j] in double. */
static LLVMValueRef scaled(cg_kb *k, LLVMValueRef row, LLVMValueRef j, double f)
{
	return cg_fmul(k, cg_f64(k, f), cg_to_f64(k, cg_ld(k, row, j)));
}

/* y = exp(f·x − max)/Σ exp(f·x − max) per row.  The exponentials wait in
 * the thread's workspace (D doubles) between the sum and the division:
 * the same values the reference computes twice. */
static void emit_softmax(cg_kb *k, const ir_node *n)
{
	cg_module *M = k->m;
	int64_t d = row_len(&n->type);
	double f = factor_of(n);
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1);
	LLVMValueRef ws = cg_gep(k, M->f64, cg_arg(k, 2), cg_imul(k, k->tid, cg_i64(k, d)));
	cg_loop l, lm, ls, lw;
	LLVMValueRef r = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef base = row_at(k, r, d);
	LLVMValueRef row = cg_gep(k, NULL, x, base), out = cg_gep(k, NULL, y, base);
	LLVMValueRef first = scaled(k, row, cg_i64(k, 0), f);
	LLVMValueRef j = cg_for(k, &lm, cg_i64(k, 1), cg_i64(k, d));
	LLVMValueRef m = cg_carry(k, &lm, first);
	LLVMValueRef v = scaled(k, row, j, f), next;
	if (cg_vector_math(k)) { /* NaN wins as in cg_fmax; only ±0 may differ, which exp does not see */
		LLVMValueRef args[2] = {v, m};
		LLVMTypeRef ty = M->f64, fty;
		LLVMValueRef fmax = cg_intrinsic(k, "llvm.maximum", &ty, 1, &fty);
		next = LLVMBuildCall2(k->b, fty, fmax, args, 2, "");
	} else
		next = cg_fmax(k, v, m);
	cg_end_for(k, &lm, &next);
	m = lm.out[0];
	j = cg_for(k, &ls, cg_i64(k, 0), cg_i64(k, d));
	LLVMValueRef s = cg_carry(k, &ls, cg_f64(k, 0));
	LLVMValueRef arg = cg_fsub(k, scaled(k, row, j, f), m);
	LLVMValueRef e = cg_vector_math(k) ? cg_vexp(k, arg) : cg_math(k, "llvm.exp", arg);
	LLVMBuildStore(k->b, e, cg_gep(k, M->f64, ws, j));
	next = sum(k, s, e);
	cg_parallel_loop(&ls);
	cg_end_for(k, &ls, &next);
	j = cg_for(k, &lw, cg_i64(k, 0), cg_i64(k, d));
	e = LLVMBuildLoad2(k->b, M->f64, cg_gep(k, M->f64, ws, j), "");
	cg_st(k, out, j, cg_to_real(k, cg_fdiv(k, e, ls.out[0])));
	cg_parallel_loop(&lw);
	cg_end_for(k, &lw, NULL);
	cg_end_for(k, &l, NULL);
}

static int64_t softmax_workspace(const ir_node *n)
{
	return row_len(&n->type) * (int64_t)sizeof(double);
}

/* dx = f·y·(dy − Σ dy·y) per row. */
static void emit_softmax_grad(cg_kb *k, const ir_node *n)
{
	int64_t d = row_len(&n->type);
	double f = factor_of(n);
	LLVMValueRef dx = cg_arg(k, 0), dy = cg_arg(k, 1), y = cg_arg(k, 2);
	cg_loop l, ls, lw;
	LLVMValueRef r = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef base = row_at(k, r, d);
	LLVMValueRef j = cg_for(k, &ls, cg_i64(k, 0), cg_i64(k, d));
	LLVMValueRef s = cg_carry(k, &ls, cg_f64(k, 0));
	LLVMValueRef i = cg_iadd(k, base, j);
	LLVMValueRef next = sum(k, s, cg_fmul(k, cg_to_f64(k, cg_ld(k, dy, i)), cg_to_f64(k, cg_ld(k, y, i))));
	cg_end_for(k, &ls, &next);
	j = cg_for(k, &lw, cg_i64(k, 0), cg_i64(k, d));
	i = cg_iadd(k, base, j);
	LLVMValueRef yv = cg_to_f64(k, cg_ld(k, y, i));
	LLVMValueRef diff = cg_fsub(k, cg_to_f64(k, cg_ld(k, dy, i)), ls.out[0]);
	cg_st(k, dx, i, cg_to_real(k, cg_fmul(k, cg_fmul(k, cg_f64(k, f), yv), diff)));
	cg_parallel_loop(&lw); /* dx is dy's storage (in place) */
	cg_end_for(k, &lw, NULL);
	cg_end_for(k, &l, NULL);
}

static int64_t rows_out(const ir_node *n) { return row_count(&n->type); }

const cg_op_impl cg_impl_softmax = {rows_out, softmax_workspace, emit_softmax, false, NULL, NULL};
const cg_op_impl cg_impl_softmax_grad = {rows_out, NULL, emit_softmax_grad, false, NULL, NULL};

/* ---- mean over tokens ---------------------------------------------------------- */

static int64_t outputs(const ir_node *n) { return ir_type_elems(&n->type); }

/* y[n, j] = Σ_t x[n, t, j] / T for outputs t' = n·D + j in [lo, hi). */
static void emit_token_mean(cg_kb *k, const ir_node *n)
{
	const ir_type *t = &n->in[0]->type;
	int64_t T = t->dim[1], D = t->dim[2];
	LLVMValueRef y = cg_arg(k, 0), x = cg_arg(k, 1);
	cg_loop l, lt;
	LLVMValueRef o = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef img = cg_idiv(k, o, cg_i64(k, D)), j = cg_irem(k, o, cg_i64(k, D));
	LLVMValueRef base = cg_iadd(k, cg_imul(k, img, cg_i64(k, T * D)), j);
	LLVMValueRef tok = cg_for(k, &lt, cg_i64(k, 0), cg_i64(k, T));
	LLVMValueRef s = cg_carry(k, &lt, cg_f64(k, 0));
	LLVMValueRef v = cg_to_f64(k, cg_ld(k, x, cg_iadd(k, base, cg_imul(k, tok, cg_i64(k, D)))));
	LLVMValueRef next = cg_fadd(k, s, v);
	cg_end_for(k, &lt, &next);
	cg_st(k, y, o, cg_to_real(k, cg_fdiv(k, lt.out[0], cg_f64(k, (double)T))));
	cg_end_for(k, &l, NULL);
}

const cg_op_impl cg_impl_token_mean = {outputs, NULL, emit_token_mean, false, NULL, NULL};
