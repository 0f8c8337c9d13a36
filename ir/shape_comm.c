/* shape_comm.c: the shape rules of the data-parallel ops (all-reduce,
 * batch-norm statistics shared across processes, gradient buckets). */
#include "shape.h"
#include "shape_check.h"

/* allreduce(x), times factor */
bool ir_rule_allreduce(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, -1, d) || !finite_factor(n, d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* Batch statistics [rows,C] of operand 0 to [to,C] (bn_share: 2 to 3, bn_merge:
 * 3 to 2). */
static bool stats_rows(const ir_node *n, int64_t rows, int64_t to, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, 2, d))
		return false;
	if (in(n, 0)->dim[0] != rows)
		return fail(n, d, "operand 0 must be %s batch statistics [%lld,C]", rows == 2 ? "the" : "shared",
			(long long)rows);
	int64_t dims[2] = {to, in(n, 0)->dim[1]};
	*out = ir_type_make(in(n, 0)->dtype, 2, dims);
	return true;
}

bool ir_rule_bn_share(const ir_node *n, ir_type *out, ir_diags *d)
{
	return stats_rows(n, 2, 3, out, d);
}

bool ir_rule_bn_merge(const ir_node *n, ir_type *out, ir_diags *d)
{
	return stats_rows(n, 3, 2, out, d);
}

/* allreduce_wait(s), s an allreduce_start */
bool ir_rule_allreduce_wait(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (n->in[0]->op != IR_OP_ALLREDUCE_START)
		return fail(n, d, "operand 0 must be an allreduce_start");
	return ir_rule_allreduce(n, out, d);
}

/* bucket_pack(x1, ..., xn): [Σ elements], operands' dtype */
bool ir_rule_bucket_pack(const ir_node *n, ir_type *out, ir_diags *d)
{
	int64_t total = 0;
	for (int i = 0; i < n->nin; i++) {
		if (!need_float(n, i, -1, d))
			return false;
		total += ir_type_elems(in(n, i));
	}
	*out = ir_type_make(in(n, 0)->dtype, 1, &total);
	return true;
}

/* bucket_unpack(v) {lo, hi}: elements [lo, hi) of v as the declared type */
bool ir_rule_bucket_unpack(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, 1, d))
		return false;
	int64_t lo = ir_node_int(n, IR_ATTR_LO), hi = ir_node_int(n, IR_ATTR_HI);
	if (lo < 0 || hi <= lo || hi > in(n, 0)->dim[0])
		return fail(n, d, "lo and hi must give elements within operand 0's %lld", (long long)in(n, 0)->dim[0]);
	if (!declared(out))
		return fail(n, d, "needs a declared result type");
	if (out->dtype != in(n, 0)->dtype || ir_type_elems(out) != hi - lo)
		return fail(n, d, "the declared type must have hi - lo = %lld elements of operand 0's dtype",
			(long long)(hi - lo));
	return true;
}
