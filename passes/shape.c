/* shape.c: shape inference.
 *
 * requires: nothing.
 * guarantees: every node has a result type, derived from its operands by its
 *   op's shape rule; a type that was declared already must equal the derived
 *   one.  Every violation is reported. */
#include "passes.h"

int ps_shape(ir_graph *g, ps_ctx *ctx)
{
	int errors = 0;
	for (int i = 0; i < g->n; i++) {
		ir_node *n = g->nodes[i];
		ir_type declared = n->type;
		bool operands_ok = true;
		for (int k = 0; k < n->nin; k++)
			operands_ok = operands_ok && n->in[k]->type.rank >= 0;
		if (!operands_ok) /* an operand failed: already reported */
			continue;
		if (!ir_node_infer(n, &ctx->diags)) {
			errors++;
			continue;
		}
		if (declared.rank >= 0 && !ir_type_eq(&declared, &n->type)) {
			char a[128], b[128], ref[80];
			ir_type_str(&declared, a, sizeof a);
			ir_type_str(&n->type, b, sizeof b);
			ir_diag_add(&ctx->diags, n->pos, "%s (%s): declared type %s, but its operands give %s",
				ir_node_ref(n, ref, sizeof ref), ir_op_name(n->op), a, b);
			errors++;
		}
	}
	return errors != 0;
}
