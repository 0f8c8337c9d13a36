/* k_comm.c: kernels for data parallelism: allreduce, bn_share, bn_merge
 * (ops.def's block for issue 15; arithmetic as runtime/kern_comm.c).
 *
 * allreduce calls revc_comm_allreduce_sum (runtime/comm.h), which the JIT
 * defines at its address in this process (jit.c); a model library has no
 * world to call, so `revc compile` refuses a step with an allreduce.  It
 * is one serial call: the world sums the whole buffer at once. */
#include "internal.h"

static int64_t one(const ir_node *n)
{
	(void)n;
	return 1;
}

static void emit_allreduce(cg_kb *k, const ir_node *n)
{
	cg_module *M = k->m;
	int64_t count = ir_type_elems(&n->type);
	LLVMValueRef out = cg_arg(k, 0), x = cg_arg(k, 1);
	cg_if c;
	cg_if_begin(k, &c, LLVMBuildICmp(k->b, LLVMIntNE, out, x, ""));
	cg_memcpy(k, out, x, cg_i64(k, ir_type_bytes(&n->type)));
	cg_if_end(k, &c);
	LLVMTypeRef pt[3] = {M->ptr, M->i64, M->i32};
	LLVMTypeRef fty = LLVMFunctionType(M->vd, pt, 3, 0);
	LLVMValueRef f = cg_extern(M, "revc_comm_allreduce_sum", fty);
	LLVMValueRef args[3] = {out, cg_i64(k, count), LLVMConstInt(M->i32, (unsigned)n->type.dtype, 0)};
	LLVMBuildCall2(k->b, fty, f, args, 3, "");
	const ir_attr *fa = ir_node_attr(n, IR_ATTR_FACTOR);
	if (!fa || fa->u.f == 1)
		return;
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, cg_i64(k, 0), cg_i64(k, count));
	cg_st(k, out, i, cg_fmul(k, cg_ld(k, out, i), cg_real(k, fa->u.f)));
	cg_end_for(k, &l, NULL);
}

static int64_t channels(const ir_node *n)
{
	return n->type.dim[1];
}

/* [mean; var] -> [mean; var; mean²] */
static void emit_bn_share(cg_kb *k, const ir_node *n)
{
	LLVMValueRef out = cg_arg(k, 0), st = cg_arg(k, 1), c = cg_i64(k, n->type.dim[1]);
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef m = cg_ld(k, st, i), m64 = cg_to_f64(k, m);
	cg_st(k, out, i, m);
	cg_st(k, out, cg_iadd(k, i, c), cg_ld(k, st, cg_iadd(k, i, c)));
	cg_st(k, out, cg_iadd(k, i, cg_iadd(k, c, c)), cg_to_real(k, cg_fmul(k, m64, m64)));
	cg_end_for(k, &l, NULL);
}

/* [m; v; q] -> [m; max(0, v + (q − m²))], m² rounded as bn_share's */
static void emit_bn_merge(cg_kb *k, const ir_node *n)
{
	LLVMValueRef out = cg_arg(k, 0), sh = cg_arg(k, 1), c = cg_i64(k, n->type.dim[1]);
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef m = cg_ld(k, sh, i), m64 = cg_to_f64(k, m);
	LLVMValueRef v = cg_to_f64(k, cg_ld(k, sh, cg_iadd(k, i, c)));
	LLVMValueRef q = cg_to_f64(k, cg_ld(k, sh, cg_iadd(k, i, cg_iadd(k, c, c))));
	LLVMValueRef m2 = cg_to_f64(k, cg_to_real(k, cg_fmul(k, m64, m64)));
	LLVMValueRef var = cg_fadd(k, v, cg_fsub(k, q, m2));
	LLVMValueRef pos = LLVMBuildFCmp(k->b, LLVMRealOGT, var, cg_f64(k, 0), "");
	cg_st(k, out, i, m);
	cg_st(k, out, cg_iadd(k, i, c), cg_to_real(k, LLVMBuildSelect(k->b, pos, var, cg_f64(k, 0), "")));
	cg_end_for(k, &l, NULL);
}

const cg_op_impl cg_impl_allreduce = {one, NULL, emit_allreduce, true, NULL};
const cg_op_impl cg_impl_bn_share = {channels, NULL, emit_bn_share, true, NULL};
const cg_op_impl cg_impl_bn_merge = {channels, NULL, emit_bn_merge, true, NULL};
