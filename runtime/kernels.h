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
 * elementwise kernels (EW|INPL) must also work when out aliases in[0]. */
#ifndef REVC_RT_KERNELS_H
#define REVC_RT_KERNELS_H

#include "rt.h"

#define RT_MAX_OPERANDS 8

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

/* Every kernel exists in both types: rt_k_<op>_f32 and rt_k_<op>_f64, where
 * <op> is the op's name in the text format (rt_k_conv2d_dx_f32). */
#define RT_KERNEL_DECL(op) \
	bool rt_k_##op##_f32(const rt_kargs *a, rt_err *e); \
	bool rt_k_##op##_f64(const rt_kargs *a, rt_err *e);

/* kern_elementwise.c */
RT_KERNEL_DECL(const)
RT_KERNEL_DECL(add)
RT_KERNEL_DECL(sub)
RT_KERNEL_DECL(scale)
RT_KERNEL_DECL(relu)
RT_KERNEL_DECL(relu_grad)
/* kern_layout.c */
RT_KERNEL_DECL(split)
RT_KERNEL_DECL(concat)
RT_KERNEL_DECL(channel_pad)
RT_KERNEL_DECL(channel_slice)
/* kern_conv.c */
RT_KERNEL_DECL(conv2d)
RT_KERNEL_DECL(conv2d_dx)
RT_KERNEL_DECL(conv2d_dw)
/* kern_bn.c */
RT_KERNEL_DECL(bn_stats)
RT_KERNEL_DECL(bn_norm)
RT_KERNEL_DECL(bn_infer)
RT_KERNEL_DECL(bn_dgamma)
RT_KERNEL_DECL(bn_dx)
RT_KERNEL_DECL(bn_running_mean)
RT_KERNEL_DECL(bn_running_var)
/* kern_pool.c */
RT_KERNEL_DECL(avgpool)
RT_KERNEL_DECL(avgpool_grad)
RT_KERNEL_DECL(maxpool)
RT_KERNEL_DECL(maxpool_grad)
RT_KERNEL_DECL(global_avgpool)
RT_KERNEL_DECL(global_avgpool_grad)
/* kern_dense.c */
RT_KERNEL_DECL(matmul)
RT_KERNEL_DECL(bias_add)
RT_KERNEL_DECL(reduce_sum)
/* kern_loss.c */
RT_KERNEL_DECL(softmax_xent)
RT_KERNEL_DECL(softmax_xent_grad)
/* kern_optim.c */
RT_KERNEL_DECL(momentum)
RT_KERNEL_DECL(sgd)

#endif
