/* shape.h: internal to ir/.  The shape rules named in ops.def. */
#ifndef REVC_IR_SHAPE_H
#define REVC_IR_SHAPE_H

#include "ir.h"

#define IR_OP(name, ENUM, mn, mx, req, opt, rule, flags, interp, native) \
	bool ir_rule_##rule(const ir_node *n, ir_type *out, ir_diags *d);
#include "ops.def"
#undef IR_OP

#endif
