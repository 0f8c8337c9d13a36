/* input.c: the shape of the batches a model takes, for callers that hand
 * it memory (the Python module checks arrays against it). */
#include <string.h>

#include "internal.h"

int revc_model_input_shape(const revc_model *m, int64_t *dim)
{
	if (m->is_spec) {
		dim[0] = m->batch;
		memcpy(dim + 1, m->spec.spec.input, sizeof m->spec.spec.input);
		return 4;
	}
	const ir_graph *g = m->step ? m->step : m->ir;
	for (int i = 0; g && i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op == IR_OP_INPUT && strcmp(ir_node_str(n, IR_ATTR_NAME), "x") == 0) {
			_Static_assert(IR_MAX_RANK <= REVC_MAX_RANK, "revc_tensor holds every rank");
			memcpy(dim, n->type.dim, (size_t)n->type.rank * sizeof *dim);
			return n->type.rank;
		}
	}
	return 0;
}
