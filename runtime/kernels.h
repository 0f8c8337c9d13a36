/* kernels.h: internal to runtime/.  The reference kernels: one per op, in
 * plain C, for f32 and f64.
 *
 * Each kernel family (kern_*.c) is written once over the type `real` and
 * compiled twice by meson, with -DRT_REAL_F32 and -DRT_REAL_F64; K(name)
 * gives the name its _f32 or _f64 suffix.  rt_kernel_get (kernels.c) picks
 * the kernel for an op and dtype.
 *
 * A kernel reads its operands and writes its result; it never allocates.
 * Scratch memory it needs (an im2col buffer, say) is declared by the op's
 * workspace function and handed in as `ws`, so that the memory planner can
 * count it.  For in-place updates (UPD ops) `out` is operand 0's storage;
 * kernels of INPL ops must also work when out aliases in[0]. */
#ifndef REVC_RT_KERNELS_H
#define REVC_RT_KERNELS_H

#include "rt.h"

#define RT_MAX_OPERANDS 64 /* bucket_pack's most (ops.def) */

typedef struct {
	const ir_node *n;                 /* attributes and operand types */
	void *out;                        /* result, ir_type_bytes(&n->type) bytes */
	const void *in[RT_MAX_OPERANDS];  /* operand i, ir_type_bytes(&n->in[i]->type) */
	void *ws;                         /* workspace, rt_kernel_workspace(n) bytes */
} rt_kargs;

/* Runs one node.  Returns false only for errors the data causes (a label
 * out of range), with a message in e. */
typedef bool (*rt_kernel_fn)(const rt_kargs *a, rt_err *e);

/* The kernel for n's op in n's dtype (the dtype of the result, or of operand
 * 0 for ops whose result is integral).  Sources (input, param, state) have
 * no kernel: NULL.  `const` has one. */
rt_kernel_fn rt_kernel_get(const ir_node *n);


#if defined(RT_REAL_F32)
typedef float real;
#define K(name) name##_f32
#elif defined(RT_REAL_F64)
typedef double real;
#define K(name) name##_f64
#endif

/* Every op whose interp column in ops.def is KERN has a kernel in both
 * types, rt_k_<op>_f32 and rt_k_<op>_f64, where <op> is the op's name in
 * the text format (rt_k_conv2d_dx_f32), defined in the kern_*.c of its
 * family. */
#define RT_KERNEL_DECL_KERN(op) \
	bool rt_k_##op##_f32(const rt_kargs *a, rt_err *e); \
	bool rt_k_##op##_f64(const rt_kargs *a, rt_err *e);
#define RT_KERNEL_DECL_BOUND(op)
#define IR_OP(name, ENUM, mn, mx, req, opt, rule, flags, interp, native) RT_KERNEL_DECL_##interp(name)
#include "ops.def"
#undef IR_OP
#undef RT_KERNEL_DECL_KERN
#undef RT_KERNEL_DECL_BOUND

#endif
