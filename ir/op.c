/* op.c: the tables generated from ops.def and attrs.def, roles, and lookups
 * by name. */
#include <string.h>

#include "ir.h"
#include "shape.h"

#define A(x) (1u << IR_ATTR_##x)
#define SRC IR_OPF_SRC
#define FX IR_OPF_FX
#define UPD IR_OPF_UPD
#define INPL IR_OPF_INPL
#define FUSE IR_OPF_FUSE
#define ROW IR_OPF_ROW

static const ir_op_info ops[] = {
#define IR_OP(nm, ENUM, mn, mx, req, opt, rl, fl, interp, native) \
	[IR_OP_##ENUM] = {#nm, mn, mx, (req), (opt), ir_rule_##rl, (fl)},
#include "ops.def"
#undef IR_OP
};
_Static_assert(sizeof ops / sizeof ops[0] == IR_OP_COUNT, "op table");
/* The interp and native columns, checked here where the flags are known;
 * runtime/kernels.c and codegen/ops.c build their tables from them. */
#define KERN 1
#define IMPL 2
#define FUSED 3
#define BOUND 4
#define IR_OP(nm, ENUM, mn, mx, req, opt, rl, fl, interp, native) \
	_Static_assert(!((fl) & IR_OPF_FUSE) || (mx) <= IR_MAX_FUSE_ARITY, #nm ": more operands than IR_MAX_FUSE_ARITY"); \
	_Static_assert((native) != FUSED || ((fl) & IR_OPF_FUSE), #nm ": native FUSED needs the FUSE flag"); \
	_Static_assert(((native) == BOUND) == ((interp) == BOUND), #nm ": bound in one engine only"); \
	_Static_assert((interp) != BOUND || ((fl) & (IR_OPF_SRC | IR_OPF_FX)), #nm ": bound but neither source nor sink");
#include "ops.def"
#undef IR_OP
#undef KERN
#undef IMPL
#undef FUSED
#undef BOUND

static const struct {
	const char *name;
	ir_attr_vtype vt;
} attrs[] = {
#define IR_ATTR(nm, ENUM, vt) [IR_ATTR_##ENUM] = {#nm, vt},
#include "attrs.def"
#undef IR_ATTR
};
_Static_assert(sizeof attrs / sizeof attrs[0] == IR_ATTR_COUNT, "attr table");
_Static_assert(IR_ATTR_COUNT <= 32, "attribute masks are 32 bits");

static const char *const roles[] = {
	[IR_ROLE_FWD] = "fwd",
	[IR_ROLE_BWD] = "bwd",
	[IR_ROLE_RECOMPUTE] = "recompute",
	[IR_ROLE_OPT] = "opt",
};
_Static_assert(sizeof roles / sizeof roles[0] == IR_ROLE_COUNT, "role table");

const ir_op_info *ir_op_get(ir_op op)
{
	IR_ASSERT((unsigned)op < IR_OP_COUNT);
	return &ops[op];
}

const char *ir_op_name(ir_op op) { return ir_op_get(op)->name; }
const char *ir_attr_name(ir_attr_kind k) { return attrs[k].name; }
ir_attr_vtype ir_attr_vtype_of(ir_attr_kind k) { return attrs[k].vt; }
const char *ir_role_name(ir_role r) { return roles[r]; }

static bool eq(const char *name, const char *s, size_t n)
{
	return strlen(name) == n && memcmp(name, s, n) == 0;
}

bool ir_op_lookup(const char *s, size_t n, ir_op *out)
{
	for (int i = 0; i < IR_OP_COUNT; i++)
		if (eq(ops[i].name, s, n)) {
			*out = (ir_op)i;
			return true;
		}
	return false;
}

bool ir_attr_lookup(const char *s, size_t n, ir_attr_kind *out)
{
	for (int i = 0; i < IR_ATTR_COUNT; i++)
		if (eq(attrs[i].name, s, n)) {
			*out = (ir_attr_kind)i;
			return true;
		}
	return false;
}

bool ir_role_lookup(const char *s, size_t n, ir_role *out)
{
	for (int i = 0; i < IR_ROLE_COUNT; i++)
		if (eq(roles[i], s, n)) {
			*out = (ir_role)i;
			return true;
		}
	return false;
}

ir_bcast ir_node_bcast(const ir_node *n)
{
	if (n->op == IR_OP_LN_NORM || n->op == IR_OP_TOKEN_MEAN_GRAD || ir_op_has(n->op, IR_OPF_ROW))
		return IR_BCAST_LAST_AXIS;
	if (n->op == IR_OP_BROADCAST_ADD)
		return IR_BCAST_NONE; /* b is read at the element index modulo its size, in any loop */
	for (int k = 0; k < n->nin; k++)
		if (n->in[k]->type.rank > 0 && !ir_type_same_shape(&n->in[k]->type, &n->type))
			return IR_BCAST_CHANNEL;
	return IR_BCAST_NONE;
}

const ir_type *ir_group_type(const ir_node *n)
{
	return ir_op_has(n->op, IR_OPF_ROW) ? &n->in[0]->type : &n->type;
}
