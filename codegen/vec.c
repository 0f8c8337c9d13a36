/* vec.c: short vectors of any width for the kernels that write their own
 * vector code (k_bn.c's channel sums, k_pool.c's average pooling, and
 * gemm.c's and the Winograd kernels' row tails): masks, splats, and loads
 * and stores of a vector's first n lanes, so a row's tail needs no scalar
 * loop.  Masked loads give zero in the dead lanes. */
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

/* v's lanes [at, at + n) stored at p[at..]: one vector of n lanes (a
 * scalar when n is 1). */
static void store_piece(cg_kb *k, LLVMValueRef p, LLVMValueRef v, int at, int n, unsigned align)
{
	LLVMValueRef q = cg_gep(k, NULL, p, cg_i64(k, at)), x;
	if (n == 1) {
		x = LLVMBuildExtractElement(k->b, v, LLVMConstInt(k->m->i32, (unsigned long long)at, 0), "");
	} else {
		LLVMValueRef idx[CG_MAX_VLANES];
		for (int j = 0; j < n; j++)
			idx[j] = LLVMConstInt(k->m->i32, (unsigned long long)(at + j), 0);
		x = LLVMBuildShuffleVector(k->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(idx, (unsigned)n), "");
	}
	LLVMSetAlignment(LLVMBuildStore(k->b, x, q), align);
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
	/* Without AVX-512's mask registers a masked store is VMASKMOVPS,
	 * which AMD's cores run slowly: the first n lanes go as pieces of
	 * halving width instead (6 of 8: 4, then 2). */
	if (k->m->vec_bytes < 64) {
		int at = 0;
		for (int w = lanes / 2; w >= 1; w /= 2)
			if (n - at >= w) {
				store_piece(k, p, v, at, w, align);
				at += w;
			}
		return;
	}
	LLVMTypeRef over[2] = {vt, k->m->ptr}, fty;
	LLVMValueRef f = cg_intrinsic(k, "llvm.masked.store", over, 2, &fty);
	LLVMValueRef args[4] = {v, p, LLVMConstInt(k->m->i32, align, 0), cg_vmask(k, lanes, n)};
	LLVMBuildCall2(k->b, fty, f, args, 4, "");
}
