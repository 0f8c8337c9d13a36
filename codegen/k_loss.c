/* k_loss.c: kernels for softmax_xent (the mean softmax cross-entropy) and
 * softmax_xent_grad (its gradient with respect to the logits).
 *
 * Logits [N,K] in the real type, labels i32[N].  As in runtime/kern_loss.c,
 * each row is shifted by its maximum before exponentiating, and everything
 * is computed in double and rounded once.  The runtime checks the labels
 * before the step runs (rt_exec_run), so the kernels trust them.
 *
 * softmax_xent sums over the whole batch into one scalar, so it is serial
 * (extent N, run once over all rows) and the sum's order is the
 * reference's; softmax_xent_grad is row by row, extent N divided among
 * threads. */
#include "internal.h"

/* The maximum of row[0..K) and log Σ exp(row − max), in double. */
static void row_lse(cg_kb *k, LLVMValueRef row, int64_t K, LLVMValueRef *max, LLVMValueRef *lse)
{
	cg_loop lm, ls;
	LLVMValueRef first = cg_to_f64(k, cg_ld(k, row, cg_i64(k, 0)));
	LLVMValueRef j = cg_for(k, &lm, cg_i64(k, 1), cg_i64(k, K));
	LLVMValueRef m = cg_carry(k, &lm, first);
	LLVMValueRef next = cg_fmax(k, cg_to_f64(k, cg_ld(k, row, j)), m);
	cg_end_for(k, &lm, &next);
	*max = lm.out[0];
	j = cg_for(k, &ls, cg_i64(k, 0), cg_i64(k, K));
	LLVMValueRef s = cg_carry(k, &ls, cg_f64(k, 0));
	next = cg_fadd(k, s, cg_math(k, "llvm.exp", cg_fsub(k, cg_to_f64(k, cg_ld(k, row, j)), *max)));
	cg_end_for(k, &ls, &next);
	*lse = cg_math(k, "llvm.log", ls.out[0]);
}

static int64_t rows(const ir_node *n)
{
	return n->in[0]->type.dim[0];
}

/* loss = (Σ_n (max − row[label]) + lse) / N */
static void emit_softmax_xent(cg_kb *k, const ir_node *n)
{
	int64_t N = n->in[0]->type.dim[0], K = n->in[0]->type.dim[1];
	LLVMValueRef out = cg_arg(k, 0), x = cg_arg(k, 1), labels = cg_arg(k, 2);
	if (N == 0 || K == 0) {
		cg_st(k, out, cg_i64(k, 0), cg_real(k, 0));
		return;
	}
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef total = cg_carry(k, &l, cg_f64(k, 0));
	LLVMValueRef base = cg_imul(k, i, cg_i64(k, K)), m, lse;
	row_lse(k, cg_gep(k, NULL, x, base), K, &m, &lse);
	LLVMValueRef picked = cg_to_f64(k, cg_ld(k, x, cg_iadd(k, base, cg_ld_i32(k, labels, i))));
	/* The max minus the label's logit is exact or nearly; lse goes last. */
	LLVMValueRef next = cg_fadd(k, total, cg_fadd(k, cg_fsub(k, m, picked), lse));
	cg_end_for(k, &l, &next);
	cg_st(k, out, cg_i64(k, 0), cg_to_real(k, cg_fdiv(k, l.out[0], cg_f64(k, (double)N))));
}

/* dx[n, j] = (exp(row[j] − max − lse) − [j == label]) / N */
static void emit_softmax_xent_grad(cg_kb *k, const ir_node *n)
{
	int64_t N = n->in[0]->type.dim[0], K = n->in[0]->type.dim[1];
	if (K == 0)
		return;
	LLVMValueRef dx = cg_arg(k, 0), x = cg_arg(k, 1), labels = cg_arg(k, 2);
	cg_loop li, lj;
	LLVMValueRef i = cg_for(k, &li, k->lo, k->hi);
	LLVMValueRef base = cg_imul(k, i, cg_i64(k, K)), m, lse;
	LLVMValueRef row = cg_gep(k, NULL, x, base), drow = cg_gep(k, NULL, dx, base);
	row_lse(k, row, K, &m, &lse);
	LLVMValueRef label = cg_ld_i32(k, labels, i);
	LLVMValueRef j = cg_for(k, &lj, cg_i64(k, 0), cg_i64(k, K));
	LLVMValueRef e = cg_math(k, "llvm.exp", cg_fsub(k, cg_fsub(k, cg_to_f64(k, cg_ld(k, row, j)), m), lse));
	LLVMValueRef hit = LLVMBuildICmp(k->b, LLVMIntEQ, j, label, "");
	LLVMValueRef p = cg_fsub(k, e, LLVMBuildSelect(k->b, hit, cg_f64(k, 1), cg_f64(k, 0), ""));
	cg_st(k, drow, j, cg_to_real(k, cg_fdiv(k, p, cg_f64(k, (double)N))));
	cg_end_for(k, &lj, NULL);
	cg_end_for(k, &li, NULL);
}

const cg_op_impl cg_impl_softmax_xent = {rows, NULL, emit_softmax_xent, true, NULL, NULL};
const cg_op_impl cg_impl_softmax_xent_grad = {rows, NULL, emit_softmax_xent_grad, false, NULL, NULL};
