/* vec.c: short vectors of any width for the kernels that write their own
 * vector code (k_bn.c's channel sums, k_pool.c's average pooling): masks,
 * splats, and loads and stores of a vector's first n lanes, so a row's
 * tail needs no scalar loop.  Masked loads give zero in the dead lanes. */
#include "internal.h"

LLVMValueRef cg_vmask(cg_kb *k, int lanes, int n)
{
	LLVMValueRef bits[CG_MAX_VLANES];
	IR_ASSERT(lanes <= CG_MAX_VLANES);
	for (int i = 0; i < lanes; i++)
		bits[i] = LLVMConstInt(k->m->i1, i < n, 0);
	return LLVMConstVector(bits, (unsigned)lanes);
}

LLVMValueRef cg_vsplat(cg_kb *k, LLVMValueRef x, int lanes)
{
	LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), (unsigned)lanes);
	LLVMValueRef v = LLVMBuildInsertElement(k->b, LLVMGetPoison(vt), x, LLVMConstInt(k->m->i32, 0, 0), "");
	LLVMTypeRef mask_ty = LLVMVectorType(k->m->i32, (unsigned)lanes);
	return LLVMBuildShuffleVector(k->b, v, LLVMGetPoison(vt), LLVMConstNull(mask_ty), "");
}

LLVMValueRef cg_vload(cg_kb *k, int lanes, LLVMValueRef base, LLVMValueRef i, int n)
{
	LLVMTypeRef vt = LLVMVectorType(k->real, (unsigned)lanes);
	LLVMValueRef p = cg_gep(k, NULL, base, i);
	unsigned align = (unsigned)ir_dtype_size(k->dt);
	if (n >= lanes) {
		LLVMValueRef v = LLVMBuildLoad2(k->b, vt, p, "");
		LLVMSetAlignment(v, align);
		return v;
	}
	LLVMTypeRef over[2] = {vt, k->m->ptr}, fty;
	LLVMValueRef f = cg_intrinsic(k, "llvm.masked.load", over, 2, &fty);
	LLVMValueRef args[4] = {p, LLVMConstInt(k->m->i32, align, 0), cg_vmask(k, lanes, n), LLVMConstNull(vt)};
	return LLVMBuildCall2(k->b, fty, f, args, 4, "");
}

void cg_vstore(cg_kb *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v, int n)
{
	LLVMTypeRef vt = LLVMTypeOf(v);
	int lanes = (int)LLVMGetVectorSize(vt);
	LLVMValueRef p = cg_gep(k, NULL, base, i);
	unsigned align = (unsigned)ir_dtype_size(k->dt);
	if (n >= lanes) {
		LLVMSetAlignment(LLVMBuildStore(k->b, v, p), align);
		return;
	}
	LLVMTypeRef over[2] = {vt, k->m->ptr}, fty;
	LLVMValueRef f = cg_intrinsic(k, "llvm.masked.store", over, 2, &fty);
	LLVMValueRef args[4] = {v, p, LLVMConstInt(k->m->i32, align, 0), cg_vmask(k, lanes, n)};
	LLVMBuildCall2(k->b, fty, f, args, 4, "");
}
