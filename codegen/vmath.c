/* vmath.c: exp and the normal distribution function Φ as straight-line
 * code (arithmetic, integer bit tricks and selects, no calls), so that the
 * loop vectoriser widens the loops that use them.  libm's exp and erf are
 * scalar calls: one per element, about 58 ns each for erf, which made GELU
 * the most expensive op of a ViT step.
 *
 * Both work in double.  cg_vexp is accurate to about 2 ulp of double;
 * cg_vphi to about 4e-14 relative over the whole line, tails included (it
 * computes the smaller of Φ and 1 − Φ from erfc, never as 1 − something
 * close to 1), so a result rounded to f32 is within 1 ulp of the exact
 * value.  cg_vphi_fast, to about 2e-9 relative at half the cost, serves
 * products such as GELU's a·Φ(a), whose relative error is Φ's; not GELU's
 * gradient Φ(a) + a·φ(a), which cancels near a = −0.75 (by a factor of
 * 250: 4 ulp of f32 with the fast Φ).  Special values: NaN gives NaN; cg_vexp(−∞) = 0, cg_vexp(+∞) = +∞;
 * Φ(−∞) = 0, Φ(+∞) = 1. */
#include <math.h>

#include "internal.h"

/* exp(v) = 2^n·exp(r), n = round(v/ln 2), r = v − n·ln 2 in two parts
 * (Cody and Waite: n·LN2_HI is exact for |n| < 2^11), exp(r) by its Taylor
 * series to r^12/12! (|r| <= ln 2 / 2, remainder < 2e-16).  n is found and
 * 2^n built with the 1.5·2^52 trick: v/ln 2 + 1.5·2^52 rounds to an
 * integer held in the low bits of the mantissa, so no float-to-integer
 * conversion is needed (AVX2 has none for 64-bit integers). */
#define LN2_HI 6.93147180369123816490e-01
#define LN2_LO 1.90821492927058770002e-10
#define LOG2_E 1.44269504088896338700
#define ROUNDER 6755399441055744.0 /* 1.5·2^52 */
#define EXP_MIN -708.0             /* below: 0 (2^n would be subnormal) */
#define EXP_MAX 709.0              /* above: +∞ */
#define EXP_TERMS 13
#define FAST_EXP_TERMS 9 /* to r^8/8!: remainder < 2e-10 */

/* Σ c[i]·x^i by Estrin's scheme: pairs c[2i] + c[2i+1]·x, then pairs of
 * those with x², x⁴, ...: a dependency chain of log2(n) steps instead of
 * Horner's n, so a vector lane's polynomial does not wait on itself. */
static LLVMValueRef poly(cg_kb *k, LLVMValueRef x, const double *c, int n)
{
	LLVMValueRef t[32];
	IR_ASSERT(n >= 1 && n <= 32);
	for (int i = 0; i < n; i++)
		t[i] = cg_f64(k, c[i]);
	for (LLVMValueRef p = x; n > 1; p = cg_fmul(k, p, p)) {
		int m = 0;
		for (int i = 0; i < n; i += 2)
			t[m++] = i + 1 < n ? cg_fadd(k, t[i], cg_fmul(k, t[i + 1], p)) : t[i];
		n = m;
	}
	return t[0];
}

static LLVMValueRef select_lt(cg_kb *k, LLVMValueRef a, LLVMValueRef b, LLVMValueRef then, LLVMValueRef other)
{
	return LLVMBuildSelect(k->b, LLVMBuildFCmp(k->b, LLVMRealOLT, a, b, ""), then, other, "");
}

/* exp(v) with the Taylor series of exp(r) to r^(terms − 1). */
static LLVMValueRef vexp_terms(cg_kb *k, LLVMValueRef v, int terms)
{
	cg_module *M = k->m;
	/* Clamped (a NaN becomes EXP_MIN), so the bit arithmetic stays in range. */
	LLVMValueRef c = select_lt(k, v, cg_f64(k, EXP_MAX), v, cg_f64(k, EXP_MAX));
	c = LLVMBuildSelect(k->b, LLVMBuildFCmp(k->b, LLVMRealOGE, c, cg_f64(k, EXP_MIN), ""), c,
		cg_f64(k, EXP_MIN), "");
	LLVMValueRef s = cg_fadd(k, cg_fmul(k, c, cg_f64(k, LOG2_E)), cg_f64(k, ROUNDER));
	LLVMValueRef n = cg_fsub(k, s, cg_f64(k, ROUNDER));
	LLVMValueRef r = cg_fsub(k, cg_fsub(k, c, cg_fmul(k, n, cg_f64(k, LN2_HI))), cg_fmul(k, n, cg_f64(k, LN2_LO)));
	double coef[EXP_TERMS];
	IR_ASSERT(terms <= EXP_TERMS);
	coef[0] = 1;
	for (int i = 1; i < terms; i++)
		coef[i] = coef[i - 1] / i;
	LLVMValueRef p = poly(k, r, coef, terms);
	LLVMValueRef bits = LLVMBuildBitCast(k->b, s, M->i64, "");
	bits = LLVMBuildShl(k->b, LLVMBuildAdd(k->b, bits, LLVMConstInt(M->i64, 1023, 0), ""),
		LLVMConstInt(M->i64, 52, 0), "");
	LLVMValueRef y = cg_fmul(k, p, LLVMBuildBitCast(k->b, bits, M->f64, ""));
	y = select_lt(k, v, cg_f64(k, EXP_MIN), cg_f64(k, 0), y);
	y = LLVMBuildSelect(k->b, LLVMBuildFCmp(k->b, LLVMRealOGT, v, cg_f64(k, EXP_MAX), ""), cg_f64(k, INFINITY),
		y, "");
	return LLVMBuildSelect(k->b, LLVMBuildFCmp(k->b, LLVMRealUNO, v, v, ""), v, y, "");
}

LLVMValueRef cg_vexp(cg_kb *k, LLVMValueRef v)
{
	return vexp_terms(k, v, EXP_TERMS);
}

/* erfc(z) = t·exp(−z²)·F(t) for z >= 0, t = 2/(2 + z) in (0, 1]: F is the
 * degree-20 polynomial nearest erfc(z)·exp(z²)/t in Chebyshev nodes on
 * [0, 1] (scripts/fit_erfc.py), relative error 4e-14 over all z >= 0. */
static const double erfc_F[] = {
	0.28209479177386898, 0.28209479178126934, 0.24683294180988199, 0.17630929683009486,
	0.083745492911786415, -0.0043857913657569404, -0.056960816875376033, -0.052234924248229543,
	-0.0066407987227034369, 0.035459685347625267, 0.22700488473776217, -0.8982074748147193,
	2.8712122222172174, -6.931546656464171, 11.380230720790282, -12.803238185393662,
	10.015522452997482, -5.4093104697686281, 1.9376726559261703, -0.41645859982915662,
	0.040803780358976485,
};

/* The same fit of degree 12 (scripts/fit_erfc.py 12): relative error
 * 1.7e-9, 0.03 ulp of f32, for cg_vphi_fast. */
static const double erfc_F12[] = {
	0.28209479220599687, 0.28209465964824737, 0.24683939185358711, 0.17619299832296262,
	0.08471426046338687, -0.0079540054802134785, -0.057501932182685803, 0.0056337111987710339,
	-0.25048452891381978, 0.55762685164682546, -0.49079934082495386, 0.20639547074438402,
	-0.034852329403571441,
};

#define SQRT1_2 0.70710678118654752440

/* Φ(x) from erfc's fit F of n coefficients and exp's series to `terms`. */
static LLVMValueRef vphi(cg_kb *k, LLVMValueRef x, LLVMValueRef *gauss, const double *F, int n, int terms)
{
	LLVMValueRef a = cg_fmul(k, x, cg_f64(k, SQRT1_2));
	LLVMValueRef z = cg_math(k, "llvm.fabs", a);
	LLVMValueRef t = cg_fdiv(k, cg_f64(k, 2), cg_fadd(k, cg_f64(k, 2), z));
	LLVMValueRef p = poly(k, t, F, n);
	LLVMValueRef e = vexp_terms(k, LLVMBuildFNeg(k->b, cg_fmul(k, z, z), ""), terms);
	if (gauss)
		*gauss = e;
	LLVMValueRef half = cg_fmul(k, cg_f64(k, 0.5), cg_fmul(k, cg_fmul(k, t, e), p)); /* Φ(−|x|) */
	return select_lt(k, a, cg_f64(k, 0), half, cg_fsub(k, cg_f64(k, 1), half));
}

LLVMValueRef cg_vphi(cg_kb *k, LLVMValueRef x, LLVMValueRef *gauss)
{
	return vphi(k, x, gauss, erfc_F, (int)(sizeof erfc_F / sizeof erfc_F[0]), EXP_TERMS);
}

LLVMValueRef cg_vphi_fast(cg_kb *k, LLVMValueRef x)
{
	return vphi(k, x, NULL, erfc_F12, (int)(sizeof erfc_F12 / sizeof erfc_F12[0]), FAST_EXP_TERMS);
}
