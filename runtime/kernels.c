/* kernels.c: picks the reference kernel for a node (by op and dtype) and
 * says how much workspace it needs.
 *
 * The table is indexed by op; sources (input, param, state) and output have
 * no kernel, since the executor binds their values to outside storage.
 * Preconditions: the node verified. */
#include <inttypes.h>

#include "conv_geom.h"
#include "kernels.h"

typedef struct {
	rt_kernel_fn f32, f64;
} kernel_pair;

#define PAIR(op) {rt_k_##op##_f32, rt_k_##op##_f64}

static const kernel_pair kernels[] = {
	[IR_OP_INPUT] = {NULL, NULL},
	[IR_OP_PARAM] = {NULL, NULL},
	[IR_OP_STATE] = {NULL, NULL},
	[IR_OP_CONST] = PAIR(const),
	[IR_OP_OUTPUT] = {NULL, NULL},
	[IR_OP_ADD] = PAIR(add),
	[IR_OP_SUB] = PAIR(sub),
	[IR_OP_SCALE] = PAIR(scale),
	[IR_OP_RELU] = PAIR(relu),
	[IR_OP_RELU_GRAD] = PAIR(relu_grad),
	[IR_OP_SPLIT] = PAIR(split),
	[IR_OP_CONCAT] = PAIR(concat),
	[IR_OP_CHANNEL_PAD] = PAIR(channel_pad),
	[IR_OP_CHANNEL_SLICE] = PAIR(channel_slice),
	[IR_OP_CONV2D] = PAIR(conv2d),
	[IR_OP_CONV2D_DX] = PAIR(conv2d_dx),
	[IR_OP_CONV2D_DW] = PAIR(conv2d_dw),
	[IR_OP_BN_STATS] = PAIR(bn_stats),
	[IR_OP_BN_NORM] = PAIR(bn_norm),
	[IR_OP_BN_INFER] = PAIR(bn_infer),
	[IR_OP_BN_DGAMMA] = PAIR(bn_dgamma),
	[IR_OP_BN_DX] = PAIR(bn_dx),
	[IR_OP_BN_RUNNING_MEAN] = PAIR(bn_running_mean),
	[IR_OP_BN_RUNNING_VAR] = PAIR(bn_running_var),
	[IR_OP_AVGPOOL] = PAIR(avgpool),
	[IR_OP_AVGPOOL_GRAD] = PAIR(avgpool_grad),
	[IR_OP_MAXPOOL] = PAIR(maxpool),
	[IR_OP_MAXPOOL_GRAD] = PAIR(maxpool_grad),
	[IR_OP_GLOBAL_AVGPOOL] = PAIR(global_avgpool),
	[IR_OP_GLOBAL_AVGPOOL_GRAD] = PAIR(global_avgpool_grad),
	[IR_OP_MATMUL] = PAIR(matmul),
	[IR_OP_BIAS_ADD] = PAIR(bias_add),
	[IR_OP_REDUCE_SUM] = PAIR(reduce_sum),
	[IR_OP_SOFTMAX_XENT] = PAIR(softmax_xent),
	[IR_OP_SOFTMAX_XENT_GRAD] = PAIR(softmax_xent_grad),
	[IR_OP_MOMENTUM] = PAIR(momentum),
	[IR_OP_SGD] = PAIR(sgd),
};

_Static_assert(sizeof kernels / sizeof kernels[0] == IR_OP_COUNT,
	"every op in ops.def needs an entry in the kernel table");

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
