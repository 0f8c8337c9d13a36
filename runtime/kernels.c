/* kernels.c: picks the reference kernel for a node (by op and dtype) and
 * says how much workspace it needs.
 *
 * The table is indexed by op and generated from ops.def; sources (input,
 * param, state) and output have no kernel (interp BOUND), since the
 * executor binds their values to outside storage.
 * Preconditions: the node verified. */
#include <inttypes.h>

#include "conv_geom.h"
#include "kernels.h"

typedef struct {
	rt_kernel_fn f32, f64;
} kernel_pair;

/* Generated from ops.def's interp column. */
#define PAIR_KERN(op) {rt_k_##op##_f32, rt_k_##op##_f64}
#define PAIR_BOUND(op) {NULL, NULL}

static const kernel_pair kernels[] = {
#define IR_OP(name, ENUM, mn, mx, req, opt, rule, flags, interp, native) \
	[IR_OP_##ENUM] = PAIR_##interp(name),
#include "ops.def"
#undef IR_OP
};
_Static_assert(sizeof kernels / sizeof kernels[0] == IR_OP_COUNT, "kernel table");

rt_kernel_fn rt_kernel_get(const ir_node *n)
{
	IR_ASSERT(n->op >= 0 && n->op < IR_OP_COUNT);
	ir_dtype dt = n->type.dtype;
	if (!ir_dtype_is_float(dt) && n->nin > 0)
		dt = n->in[0]->type.dtype;
	switch (dt) {
	case IR_F32:
		return kernels[n->op].f32;
	case IR_F64:
		return kernels[n->op].f64;
	default:
		return NULL;
	}
}

/* The im2col column matrix of one image, C·KH·KW·Ho·Wo reals, except for a
 * direct convolution, which kern_conv.c runs on the image itself. */
static int64_t conv_workspace(const ir_node *n)
{
	ir_conv_geom g = ir_conv_geom_of(n);
	if (ir_conv_direct(&g))
		return 0;
	/* Checked: a verified graph can still ask for an absurd workspace, which
	 * the planner refuses; saturate past IR_MAX_BYTES instead of wrapping. */
	int64_t f[5] = {g.kh, g.kw, g.ho, g.wo, ir_dtype_size(n->type.dtype)};
	int64_t bytes = g.c;
	for (int i = 0; i < 5; i++)
		if (!ir_size_mul(bytes, f[i], &bytes) || bytes > IR_MAX_BYTES)
			return IR_MAX_BYTES + 1;
	return bytes;
}

int64_t rt_kernel_workspace(const ir_node *n)
{
	switch (n->op) {
	case IR_OP_CONV2D:
	case IR_OP_CONV2D_DX:
	case IR_OP_CONV2D_DW:
		return conv_workspace(n);
	default:
		return 0;
	}
}

bool rt_check_labels(const int32_t *labels, int64_t n, int64_t k, rt_err *e)
{
	for (int64_t i = 0; i < n; i++)
		if (labels[i] < 0 || labels[i] >= k)
			return rt_errorf(e, "label %" PRId32 " out of range 0..%" PRId64 " at example %" PRId64,
				labels[i], k - 1, i);
	return true;
}

int64_t rt_workspace_fn(const ir_node *n, void *user)
{
	(void)user;
	return rt_kernel_workspace(n);
}
