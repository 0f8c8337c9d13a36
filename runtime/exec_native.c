/* exec_native.c: running a compiled step (codegen) over the planned arena,
 * with the params and state where the store keeps them and the inputs in
 * their staging buffers, in list order, as the step ABI (rt.h) takes them. */
#include "exec.h"

/* Every label input read by a softmax op is within its classes. */
static bool check_labels(const rt_exec *x, rt_err *e)
{
	const ir_graph *g = x->g;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_SOFTMAX_XENT && n->op != IR_OP_SOFTMAX_XENT_GRAD)
			continue;
		const ir_node *lab = n->in[1];
		if (lab->op != IR_OP_INPUT)
			continue;
		if (!rt_check_labels(x->staging[lab->id], lab->type.dim[0], n->in[0]->type.dim[1], e))
			return false;
	}
	return true;
}

rt_exec *rt_exec_new_native(const ir_graph *g, rt_store *store, rt_step_abi step, rt_pool *pool,
	rt_err *e)
{
	rt_exec *x = rt_exec_new(g, store, RT_EXEC_NATIVE, e);
	if (!x)
		return NULL;
	x->step = step;
	x->pool = pool;
	x->persist = rt_exec_calloc((size_t)g->n + 1, sizeof *x->persist);
	x->inputs = rt_exec_calloc((size_t)g->n + 1, sizeof *x->inputs);
	int np = 0, ni = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (ir_op_is_persistent(n->op))
			x->persist[np++] = x->val[i];
		else if (n->op == IR_OP_INPUT)
			x->inputs[ni++] = x->staging[i];
	}
	return x;
}

bool rt_exec_run_native(rt_exec *x, rt_err *e)
{
	/* Compiled kernels cannot report a bad label: check them first. */
	if (!check_labels(x, e))
		return false;
	x->fault = NULL;
	if (!rt_exec_numerics_save(x, e))
		return false;
	x->step(x->arena, x->persist, x->inputs, rt_parallel, x->pool);
	return rt_exec_numerics_check(x, e);
}
