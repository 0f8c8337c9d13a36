/* builder.c: the kernel builder, a thin layer over the LLVM C API for the
 * loops, loads, stores and arithmetic kernels are made of. */
#include <string.h>

#include <llvm-c/DebugInfo.h>

#include "distinct.h"
#include "internal.h"

void cg_kb_begin(cg_kb *k, cg_module *m, LLVMValueRef fn, ir_dtype dt)
{
	k->m = m;
	k->b = m->b;
	k->fn = fn;
	k->dt = dt;
	k->real = dt == IR_F64 ? m->f64 : m->f32;
	k->args = LLVMGetParam(fn, 0);
	k->lo = LLVMGetParam(fn, 1);
	k->hi = LLVMGetParam(fn, 2);
	k->tid = LLVMGetParam(fn, 3);
	k->epi = NULL;
	k->pro = NULL;
	LLVMPositionBuilderAtEnd(k->b, LLVMAppendBasicBlockInContext(m->ctx, fn, "entry"));
}

void cg_kb_end(cg_kb *k)
{
	LLVMBuildRetVoid(k->b);
}

LLVMValueRef cg_i64(cg_kb *k, int64_t v)
{
	return LLVMConstInt(k->m->i64, (unsigned long long)v, 1);
}

LLVMValueRef cg_real(cg_kb *k, double v)
{
	return LLVMConstReal(k->real, v);
}

LLVMValueRef cg_f64(cg_kb *k, double v)
{
	return LLVMConstReal(k->m->f64, v);
}

LLVMValueRef cg_gep(cg_kb *k, LLVMTypeRef ty, LLVMValueRef base, LLVMValueRef i)
{
	return LLVMBuildGEP2(k->b, ty ? ty : k->real, base, &i, 1, "");
}

LLVMValueRef cg_arg(cg_kb *k, int i)
{
	LLVMValueRef p = cg_gep(k, k->m->ptr, k->args, LLVMConstInt(k->m->i64, (unsigned)i, 0));
	return LLVMBuildLoad2(k->b, k->m->ptr, p, "arg");
}

LLVMValueRef cg_ld(cg_kb *k, LLVMValueRef base, LLVMValueRef i)
{
	return LLVMBuildLoad2(k->b, k->real, cg_gep(k, NULL, base, i), "");
}

void cg_st(cg_kb *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v)
{
	LLVMBuildStore(k->b, v, cg_gep(k, NULL, base, i));
}

LLVMValueRef cg_ld_i32(cg_kb *k, LLVMValueRef base, LLVMValueRef i)
{
	LLVMValueRef v = LLVMBuildLoad2(k->b, k->m->i32, cg_gep(k, k->m->i32, base, i), "");
	return LLVMBuildSExt(k->b, v, k->m->i64, "");
}

LLVMValueRef cg_iadd(cg_kb *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(k->b, a, b, ""); }
LLVMValueRef cg_isub(cg_kb *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWSub(k->b, a, b, ""); }
LLVMValueRef cg_imul(cg_kb *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWMul(k->b, a, b, ""); }
LLVMValueRef cg_idiv(cg_kb *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSDiv(k->b, a, b, ""); }
LLVMValueRef cg_irem(cg_kb *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSRem(k->b, a, b, ""); }

LLVMValueRef cg_imin(cg_kb *k, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(k->b, LLVMBuildICmp(k->b, LLVMIntSLT, a, b, ""), a, b, "");
}

LLVMValueRef cg_imax(cg_kb *k, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(k->b, LLVMBuildICmp(k->b, LLVMIntSGT, a, b, ""), a, b, "");
}
LLVMValueRef cg_fadd(cg_kb *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(k->b, a, b, ""); }
LLVMValueRef cg_fsub(cg_kb *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(k->b, a, b, ""); }
LLVMValueRef cg_fmul(cg_kb *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(k->b, a, b, ""); }
LLVMValueRef cg_fdiv(cg_kb *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(k->b, a, b, ""); }

LLVMValueRef cg_fmax(cg_kb *k, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef gt = LLVMBuildFCmp(k->b, LLVMRealOGT, a, b, "");
	LLVMValueRef nan = LLVMBuildFCmp(k->b, LLVMRealUNO, a, a, "");
	return LLVMBuildSelect(k->b, LLVMBuildOr(k->b, gt, nan, ""), a, b, "");
}

LLVMValueRef cg_relu_select(cg_kb *k, LLVMValueRef a, LLVMValueRef b)
{
	/* ugt is "not ole": true for NaN, so NaN passes b (fcmp ogt would
	 * give 0).  Scalars or vectors alike (+0.0 in every lane). */
	LLVMValueRef on = LLVMBuildFCmp(k->b, LLVMRealUGT, a, LLVMConstNull(LLVMTypeOf(a)), "");
	return LLVMBuildSelect(k->b, on, b, LLVMConstNull(LLVMTypeOf(b)), "");
}

LLVMValueRef cg_to_f64(cg_kb *k, LLVMValueRef v)
{
	return LLVMTypeOf(v) == k->m->f64 ? v : LLVMBuildFPExt(k->b, v, k->m->f64, "");
}

LLVMValueRef cg_to_real(cg_kb *k, LLVMValueRef v)
{
	return LLVMTypeOf(v) == k->real ? v : LLVMBuildFPTrunc(k->b, v, k->real, "");
}

LLVMValueRef cg_intrinsic(cg_kb *k, const char *name, LLVMTypeRef *over, int nover, LLVMTypeRef *fty)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	IR_ASSERT(id != 0);
	LLVMValueRef f = LLVMGetIntrinsicDeclaration(k->m->mod, id, over, (size_t)nover);
	*fty = LLVMGlobalGetValueType(f);
	return f;
}

LLVMValueRef cg_fma(cg_kb *k, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMTypeRef ty = LLVMTypeOf(a), fty;
	LLVMValueRef f = cg_intrinsic(k, "llvm.fma", &ty, 1, &fty), args[3] = {a, b, c};
	return LLVMBuildCall2(k->b, fty, f, args, 3, "");
}

LLVMValueRef cg_math(cg_kb *k, const char *name, LLVMValueRef v)
{
	LLVMTypeRef ty = LLVMTypeOf(v), fty;
	LLVMValueRef f = cg_intrinsic(k, name, &ty, 1, &fty);
	return LLVMBuildCall2(k->b, fty, f, &v, 1, "");
}

LLVMValueRef cg_libm(cg_kb *k, const char *name, LLVMValueRef v)
{
	LLVMTypeRef f64 = k->m->f64, fty = LLVMFunctionType(f64, &f64, 1, false);
	return LLVMBuildCall2(k->b, fty, cg_extern(k->m, name, fty), &v, 1, "");
}

void cg_zero(cg_kb *k, LLVMValueRef p, LLVMValueRef elems)
{
	cg_memset0(k, p, cg_imul(k, elems, cg_i64(k, ir_dtype_size(k->dt))));
}

void cg_zero_loop(cg_kb *k, LLVMValueRef p, LLVMValueRef lo, LLVMValueRef hi)
{
	cg_loop l;
	LLVMValueRef i = cg_for(k, &l, lo, hi);
	cg_st(k, p, i, cg_real(k, 0));
	cg_end_for(k, &l, NULL);
}

void cg_memset0(cg_kb *k, LLVMValueRef ptr, LLVMValueRef bytes)
{
	LLVMBuildMemSet(k->b, ptr, LLVMConstInt(LLVMInt8TypeInContext(k->m->ctx), 0, 0), bytes, 4);
}

void cg_memcpy(cg_kb *k, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef bytes)
{
	LLVMBuildMemCpy(k->b, dst, 4, src, 4, bytes);
}

LLVMValueRef cg_for(cg_kb *k, cg_loop *l, LLVMValueRef lo, LLVMValueRef hi)
{
	memset(l, 0, sizeof *l);
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(k->b);
	l->head = LLVMAppendBasicBlockInContext(k->m->ctx, k->fn, "loop");
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(k->m->ctx, k->fn, "body");
	l->exit = LLVMAppendBasicBlockInContext(k->m->ctx, k->fn, "done");
	LLVMBuildBr(k->b, l->head);
	LLVMPositionBuilderAtEnd(k->b, l->head);
	l->i = LLVMBuildPhi(k->b, k->m->i64, "i");
	LLVMAddIncoming(l->i, &lo, &pre, 1);
	LLVMValueRef more = LLVMBuildICmp(k->b, LLVMIntSLT, l->i, hi, "");
	LLVMBuildCondBr(k->b, more, body, l->exit);
	LLVMPositionBuilderAtEnd(k->b, body);
	return l->i;
}

LLVMValueRef cg_carry(cg_kb *k, cg_loop *l, LLVMValueRef init)
{
	IR_ASSERT(l->ncarry < CG_MAX_CARRY);
	LLVMBasicBlockRef body = LLVMGetInsertBlock(k->b);
	LLVMBasicBlockRef pre = LLVMGetIncomingBlock(l->i, 0);
	/* The phi goes at the top of the loop header, beside i. */
	LLVMValueRef first = LLVMGetFirstInstruction(l->head);
	LLVMPositionBuilderBefore(k->b, LLVMGetNextInstruction(first));
	LLVMValueRef phi = LLVMBuildPhi(k->b, LLVMTypeOf(init), "acc");
	LLVMAddIncoming(phi, &init, &pre, 1);
	LLVMPositionBuilderAtEnd(k->b, body);
	l->phi[l->ncarry++] = phi;
	return phi;
}

void cg_keep_loop(cg_loop *l)
{
	l->keep = true;
}

void cg_parallel_loop(cg_loop *l)
{
	l->parallel = true;
}

/* Tags every load and store of the blocks reachable from b without passing
 * through stop[0] or stop[1] (a loop's body) with access group `group`. */
static void tag_accesses(cg_kb *k, LLVMBasicBlockRef b, LLVMBasicBlockRef *stop, LLVMMetadataRef group,
	LLVMBasicBlockRef *seen, int *nseen)
{
	if (b == stop[0] || b == stop[1])
		return;
	for (int i = 0; i < *nseen; i++)
		if (seen[i] == b)
			return;
	IR_ASSERT(*nseen < 256);
	seen[(*nseen)++] = b;
	unsigned kind = LLVMGetMDKindIDInContext(k->m->ctx, "llvm.access.group", 17);
	for (LLVMValueRef in = LLVMGetFirstInstruction(b); in; in = LLVMGetNextInstruction(in))
		if (LLVMIsALoadInst(in) || LLVMIsAStoreInst(in))
			LLVMSetMetadata(in, kind, LLVMMetadataAsValue(k->m->ctx, group));
	LLVMValueRef term = LLVMGetBasicBlockTerminator(b);
	for (unsigned s = 0; term && s < LLVMGetNumSuccessors(term); s++)
		tag_accesses(k, LLVMGetSuccessor(term, s), stop, group, seen, nseen);
}

/* !llvm.loop !{self, properties...} on loop l's back edge br: no unrolling
 * (keep), parallel accesses (parallel). */
static void loop_properties(cg_kb *k, cg_loop *l, LLVMValueRef br)
{
	LLVMContextRef ctx = k->m->ctx;
	LLVMMetadataRef self = LLVMTemporaryMDNode(ctx, NULL, 0);
	LLVMMetadataRef ops[3] = {self};
	size_t n = 1;
	if (l->keep) {
		LLVMMetadataRef name = LLVMMDStringInContext2(ctx, "llvm.loop.unroll.disable", 24);
		ops[n++] = LLVMMDNodeInContext2(ctx, &name, 1);
	}
	if (l->parallel) {
		LLVMMetadataRef group = cg_distinct_node(ctx);
		LLVMBasicBlockRef stop[2] = {l->head, l->exit}, seen[256];
		int nseen = 0;
		tag_accesses(k, LLVMGetSuccessor(LLVMGetBasicBlockTerminator(l->head), 0), stop, group, seen, &nseen);
		LLVMMetadataRef prop[2] = {LLVMMDStringInContext2(ctx, "llvm.loop.parallel_accesses", 27), group};
		ops[n++] = LLVMMDNodeInContext2(ctx, prop, 2);
	}
	LLVMMetadataRef loop = LLVMMDNodeInContext2(ctx, ops, n);
	LLVMMetadataReplaceAllUsesWith(self, loop); /* also disposes of the temporary */
	LLVMSetMetadata(br, LLVMGetMDKindIDInContext(ctx, "llvm.loop", 9), LLVMMetadataAsValue(ctx, loop));
}

void cg_end_for(cg_kb *k, cg_loop *l, const LLVMValueRef *next)
{
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(k->b);
	LLVMValueRef inc = LLVMBuildNSWAdd(k->b, l->i, LLVMConstInt(k->m->i64, 1, 0), "");
	LLVMValueRef br = LLVMBuildBr(k->b, l->head);
	if (l->keep || l->parallel)
		loop_properties(k, l, br);
	LLVMAddIncoming(l->i, &inc, &latch, 1);
	for (int c = 0; c < l->ncarry; c++) {
		LLVMAddIncoming(l->phi[c], (LLVMValueRef *)&next[c], &latch, 1);
		l->out[c] = l->phi[c];
	}
	LLVMPositionBuilderAtEnd(k->b, l->exit);
}

void cg_if_begin(cg_kb *k, cg_if *c, LLVMValueRef cond)
{
	LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(k->m->ctx, k->fn, "then");
	c->join = LLVMAppendBasicBlockInContext(k->m->ctx, k->fn, "join");
	LLVMBuildCondBr(k->b, cond, then, c->join);
	LLVMPositionBuilderAtEnd(k->b, then);
}

void cg_if_end(cg_kb *k, cg_if *c)
{
	LLVMBuildBr(k->b, c->join);
	LLVMPositionBuilderAtEnd(k->b, c->join);
}
