/* shape_check.h: internal to ir/.  What the shape rules (shape.c,
 * shape_comm.c) share: the failure message and the common operand checks. */
#ifndef REVC_IR_SHAPE_CHECK_H
#define REVC_IR_SHAPE_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "ir.h"

static inline bool fail(const ir_node *n, ir_diags *d, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline bool fail(const ir_node *n, ir_diags *d, const char *fmt, ...)
{
	char msg[512], ref[80];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ir_diag_add(d, n->pos, "%s (%s): %s", ir_node_ref(n, ref, sizeof ref), ir_op_name(n->op), msg);
	return false;
}

static inline const ir_type *in(const ir_node *n, int i) { return &n->in[i]->type; }

static inline const char *tstr(const ir_type *t, char *buf, size_t len)
{
	ir_type_str(t, buf, len);
	return buf;
}

/* Operand i must have the given rank (or any rank when rank < 0) and a float
 * dtype equal to operand 0's. */
static inline bool need_float(const ir_node *n, int i, int rank, ir_diags *d)
{
	const ir_type *t = in(n, i);
	char b[128];
	if (!ir_dtype_is_float(t->dtype))
		return fail(n, d, "operand %d must be f32 or f64, got %s", i, tstr(t, b, sizeof b));
	if (i > 0 && t->dtype != in(n, 0)->dtype)
		return fail(n, d, "operand %d has dtype %s, operand 0 has %s", i,
			ir_dtype_name(t->dtype), ir_dtype_name(in(n, 0)->dtype));
	if (rank >= 0 && t->rank != rank)
		return fail(n, d, "operand %d must have rank %d, got %s", i, rank, tstr(t, b, sizeof b));
	return true;
}

static inline bool declared(const ir_type *out) { return out->rank >= 0; }

static inline bool finite_factor(const ir_node *n, ir_diags *d)
{
	const ir_attr *f = ir_node_attr(n, IR_ATTR_FACTOR);
	if (f && !isfinite(f->u.f))
		return fail(n, d, "factor must be finite, got %g", f->u.f);
	return true;
}

#endif
