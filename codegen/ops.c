/* ops.c: which emitter compiles each op, and the signatures that key the
 * kernel cache: two nodes with the same signature get the same kernel. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Generated from ops.def's native column: FUSED ops are compiled by the
 * group emitter (k_elementwise.c), BOUND ones not at all. */
#define IMPL_IMPL(op) &cg_impl_##op
#define IMPL_FUSED(op) NULL
#define IMPL_BOUND(op) NULL
static const cg_op_impl *const impls[] = {
#define IR_OP(name, ENUM, mn, mx, req, opt, rule, flags, interp, native) \
	[IR_OP_##ENUM] = IMPL_##native(name),
#include "ops.def"
#undef IR_OP
};
_Static_assert(sizeof impls / sizeof impls[0] == IR_OP_COUNT, "emitter table");

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
	if (!impl || !impl->workspace || (n->group >= 0 && !cg_conv_opens_epilogue(n) && !cg_bn_opens_dbeta(n)))
		return 0;
	return impl->workspace(n) * (o && o->threads > 0 ? o->threads : 1);
}
