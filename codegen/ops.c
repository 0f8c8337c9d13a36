/* ops.c: which emitter compiles each op, and the signatures that key the
 * kernel cache: two nodes with the same signature get the same kernel. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static const cg_op_impl *const impls[IR_OP_COUNT] = {
	[IR_OP_CONV2D] = &cg_impl_conv2d,
	[IR_OP_CONV2D_DX] = &cg_impl_conv2d_dx,
	[IR_OP_CONV2D_DW] = &cg_impl_conv2d_dw,
	[IR_OP_MATMUL] = &cg_impl_matmul,
	[IR_OP_BN_STATS] = &cg_impl_bn_stats,
	[IR_OP_BN_DGAMMA] = &cg_impl_bn_dgamma,
	[IR_OP_REDUCE_SUM] = &cg_impl_reduce_sum,
	[IR_OP_BN_RUNNING_MEAN] = &cg_impl_bn_running_mean,
	[IR_OP_BN_RUNNING_VAR] = &cg_impl_bn_running_var,
	[IR_OP_AVGPOOL] = &cg_impl_avgpool,
	[IR_OP_AVGPOOL_GRAD] = &cg_impl_avgpool_grad,
	[IR_OP_MAXPOOL] = &cg_impl_maxpool,
	[IR_OP_MAXPOOL_GRAD] = &cg_impl_maxpool_grad,
	[IR_OP_GLOBAL_AVGPOOL] = &cg_impl_global_avgpool,
	[IR_OP_SPLIT] = &cg_impl_split,
	[IR_OP_CONCAT] = &cg_impl_concat,
	[IR_OP_CHANNEL_PAD] = &cg_impl_channel_pad,
	[IR_OP_CHANNEL_SLICE] = &cg_impl_channel_slice,
	[IR_OP_SOFTMAX_XENT] = &cg_impl_softmax_xent,
	[IR_OP_SOFTMAX_XENT_GRAD] = &cg_impl_softmax_xent_grad,
};

const cg_op_impl *cg_op_impl_get(const ir_node *n)
{
	return impls[n->op];
}

void cg_node_signature(const ir_node *n, char *buf, size_t len)
{
	size_t at = (size_t)snprintf(buf, len, "%s", ir_op_name(n->op));
	for (int k = 0; k < n->nin && at < len; k++) {
		at += (size_t)snprintf(buf + at, len - at, " ");
		at += (size_t)ir_type_str(&n->in[k]->type, buf + at, at < len ? len - at : 0);
	}
	if (at < len)
		at += (size_t)snprintf(buf + at, len - at, " -> ");
	if (at < len)
		at += (size_t)ir_type_str(&n->type, buf + at, len - at);
	for (int i = 0; i < n->nattrs && at < len; i++) {
		const ir_attr *a = &n->attrs[i];
		if (a->kind == IR_ATTR_NAME)
			continue;
		at += (size_t)snprintf(buf + at, len - at, " %s=", ir_attr_name(a->kind));
		switch (ir_attr_vtype_of(a->kind)) {
		case IR_AV_INT:
			at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%lld", (long long)a->u.i);
			break;
		case IR_AV_FLOAT:
			at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%a", a->u.f);
			break;
		case IR_AV_STR:
			at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "\"%s\"", a->u.s);
			break;
		case IR_AV_INTS:
			for (int j = 0; j < a->u.ints.n && at < len; j++)
				at += (size_t)snprintf(buf + at, len - at, "%s%lld", j ? "," : "[", (long long)a->u.ints.v[j]);
			if (at < len)
				at += (size_t)snprintf(buf + at, len - at, "]");
			break;
		}
	}
	IR_ASSERT(at < len);
}

int64_t cg_workspace(const ir_node *n, void *user)
{
	const cg_options *o = user;
	const cg_op_impl *impl = cg_op_impl_get(n);
	if (!impl || !impl->workspace || n->group >= 0)
		return 0;
	return impl->workspace(n) * (o && o->threads > 0 ? o->threads : 1);
}
