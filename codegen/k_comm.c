/* k_comm.c: kernels for data parallelism: allreduce (whole, or in its
 * halves allreduce_start and allreduce_wait), bn_share, bn_merge
 * (ops.def's block for issue 15; arithmetic as runtime/kern_comm.c).
 *
 * allreduce calls revc_comm_allreduce_sum (runtime/comm.h; the halves
 * revc_comm_allreduce_begin and _end), which the JIT defines at their
 * addresses in this process (jit.c); a model library has no
 * world to call, so `revc compile` refuses a step with an allreduce.  It
 * is one serial call: the world sums the whole buffer at once.
 * bucket_pack and bucket_unpack are copies, serial too. */
#include "internal.h"

static int64_t one(const ir_node *n)
{
	(void)n;
	return 1;
}

/* dst = src unless they are one buffer (the result in place). */
static void copy_apart(cg_kb *k, const ir_node *n, LLVMValueRef dst, LLVMValueRef src)
{
	cg_if c;
	cg_if_begin(k, &c, LLVMBuildICmp(k->b, LLVMIntNE, dst, src, ""));
	cg_memcpy(k, dst, src, cg_i64(k, ir_type_bytes(&n->type)));
	cg_if_end(k, &c);
}

/* A call of the world's entry point `name` (runtime/comm.h) on buf, with
 * the count and dtype of n's result when counted. */
static void call_world(cg_kb *k, const ir_node *n, const char *name, LLVMValueRef buf, bool counted)
{
	cg_module *M = k->m;
	LLVMTypeRef pt[3] = {M->ptr, M->i64, M->i32};
	LLVMTypeRef fty = LLVMFunctionType(M->vd, pt, counted ? 3 : 1, 0);
	LLVMValueRef f = cg_extern(M, name, fty);
	LLVMValueRef args[3] = {buf, cg_i64(k, ir_type_elems(&n->type)),
		LLVMConstInt(M->i32, (unsigned)n->type.dtype, 0)};
	LLVMBuildCall2(k->b, fty, f, args, counted ? 3 : 1, "");
}

/* x *= n's factor, when it has one other than 1. */
static void scale(cg_kb *k, const ir_node *n, LLVMValueRef x)
{
	const ir_attr *fa = ir_node_attr(n, IR_ATTR_FACTOR);
	if (!fa || fa->u.f == 1)
		return;
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, cg_i64(k, 0), cg_i64(k, ir_type_elems(&n->type)));
	cg_st(k, x, i, cg_fmul(k, cg_ld(k, x, i), cg_real(k, fa->u.f)));
	cg_end_for(k, &l, NULL);
}

static void emit_allreduce(cg_kb *k, const ir_node *n)
{
	LLVMValueRef out = cg_arg(k, 0), x = cg_arg(k, 1);
	copy_apart(k, n, out, x);
	call_world(k, n, "revc_comm_allreduce_sum", out, true);
	scale(k, n, out);
}

static void emit_allreduce_start(cg_kb *k, const ir_node *n)
{
	LLVMValueRef out = cg_arg(k, 0), x = cg_arg(k, 1);
	copy_apart(k, n, out, x);
	call_world(k, n, "revc_comm_allreduce_begin", out, true);
}

static void emit_allreduce_wait(cg_kb *k, const ir_node *n)
{
	LLVMValueRef out = cg_arg(k, 0), x = cg_arg(k, 1);
	call_world(k, n, "revc_comm_allreduce_end", x, false);
	copy_apart(k, n, out, x);
	scale(k, n, out);
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

/* the operands end to end */
static void emit_bucket_pack(cg_kb *k, const ir_node *n)
{
	LLVMValueRef out = cg_arg(k, 0);
	int64_t at = 0;
	for (int i = 0; i < n->nin; i++) {
		int64_t bytes = ir_type_bytes(&n->in[i]->type);
		LLVMValueRef off = cg_i64(k, at);
		LLVMValueRef dst = LLVMBuildGEP2(k->b, LLVMInt8TypeInContext(k->m->ctx), out, &off, 1, "");
		cg_memcpy(k, dst, cg_arg(k, i + 1), cg_i64(k, bytes));
		at += bytes;
	}
}

/* elements [lo, hi) */
static void emit_bucket_unpack(cg_kb *k, const ir_node *n)
{
	LLVMValueRef off = cg_i64(k, ir_node_int(n, IR_ATTR_LO) * ir_dtype_size(n->type.dtype));
	LLVMValueRef src = LLVMBuildGEP2(k->b, LLVMInt8TypeInContext(k->m->ctx), cg_arg(k, 1), &off, 1, "");
	cg_memcpy(k, cg_arg(k, 0), src, cg_i64(k, ir_type_bytes(&n->type)));
}

const cg_op_impl cg_impl_allreduce = {one, NULL, emit_allreduce, true, NULL, NULL};
const cg_op_impl cg_impl_allreduce_start = {one, NULL, emit_allreduce_start, true, NULL, NULL};
const cg_op_impl cg_impl_allreduce_wait = {one, NULL, emit_allreduce_wait, true, NULL, NULL};
const cg_op_impl cg_impl_bn_share = {channels, NULL, emit_bn_share, true, NULL, NULL};
const cg_op_impl cg_impl_bn_merge = {channels, NULL, emit_bn_merge, true, NULL, NULL};
const cg_op_impl cg_impl_bucket_pack = {one, NULL, emit_bucket_pack, true, NULL, NULL};
const cg_op_impl cg_impl_bucket_unpack = {one, NULL, emit_bucket_unpack, true, NULL, NULL};
