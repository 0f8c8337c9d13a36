/* slots.c: where a graph's persistent tensors and inputs go in the step
 * ABI's persist[] and inputs[] arrays (runtime/revc_abi.h): param and state
 * nodes, and input nodes, each in node list order.  The runtime, the code
 * generator and revc compile's model description all take the order from
 * here. */
#include "ir.h"

static int slots(const ir_graph *g, int *slot, bool (*is)(const ir_node *n))
{
	int k = 0;
	for (int i = 0; i < g->n; i++)
		slot[i] = is(g->nodes[i]) ? k++ : -1;
	return k;
}

static bool persistent(const ir_node *n)
{
	return ir_op_is_persistent(n->op);
}

static bool input(const ir_node *n)
{
	return n->op == IR_OP_INPUT;
}

int ir_persist_slots(const ir_graph *g, int *slot)
{
	return slots(g, slot, persistent);
}

int ir_input_slots(const ir_graph *g, int *slot)
{
	return slots(g, slot, input);
}
