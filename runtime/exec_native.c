/* exec_native.c: running a compiled step (codegen) over the planned arena,
 * with the params and state where the store keeps them and the inputs in
 * their staging buffers, in list order, as the step ABI (revc_abi.h) takes them. */
#include <stdlib.h>

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

rt_exec *rt_exec_new_native(const ir_graph *g, rt_store *store, revc_abi_step *step, rt_pool *pool,
	rt_err *e)
{
	rt_exec *x = rt_exec_new(g, store, RT_EXEC_NATIVE, e);
	if (!x)
		return NULL;
	x->step = step;
	x->pool = pool;
	x->persist = rt_exec_calloc((size_t)g->n + 1, sizeof *x->persist);
	x->inputs = rt_exec_calloc((size_t)g->n + 1, sizeof *x->inputs);
	int *ps = rt_exec_calloc((size_t)g->n + 1, sizeof *ps), *is = rt_exec_calloc((size_t)g->n + 1, sizeof *is);
	ir_persist_slots(g, ps);
	ir_input_slots(g, is);
	for (int i = 0; i < g->n; i++) {
		if (ps[i] >= 0)
			x->persist[ps[i]] = x->val[i];
		if (is[i] >= 0)
			x->inputs[is[i]] = x->staging[i];
	}
	free(ps);
	free(is);
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
