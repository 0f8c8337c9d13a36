/* exec.c: the reference interpreter.  Runs a verified graph's nodes in list
 * order (the schedule) with the reference kernels.
 *
 * Memory, in tracking mode: every value gets its own allocation when its
 * node runs and is freed right after its last reader, so the recorded
 * high-water mark is the real peak of live bytes.  Sources are not
 * allocated per step: inputs are buffers the caller fills, params and state
 * live in the store, and an op that updates a tensor in place writes into
 * the store.  An output aliases its operand, which is then kept to the end
 * of the step.  Workspace is allocated around the kernel that needs it. */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "rt.h"

struct rt_exec {
	const ir_graph *g;
	rt_store *store;
	void **val;          /* by node id: where the value is */
	bool *owned;         /* by node id: val was allocated for this step */
	int *last_use;       /* by node id: the last node reading the value */
	rt_kernel_fn *kern;  /* by node id */
	void **inputs;       /* by node id, for input nodes */
	int64_t live, peak;  /* bytes of values and workspace */
};

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		IR_DIE("out of memory (%zu bytes)", n);
	return p;
}

void rt_exec_free(rt_exec *x)
{
	if (!x)
		return;
	for (int i = 0; i < x->g->n; i++) {
		if (x->owned[i])
			free(x->val[i]);
		free(x->inputs[i]);
	}
	free(x->val);
	free(x->owned);
	free(x->last_use);
	free(x->kern);
	free(x->inputs);
	free(x);
}

rt_exec *rt_exec_new(const ir_graph *g, rt_store *store, rt_err *e)
{
	int n = g->n;
	rt_exec *x = calloc(1, sizeof *x);
	if (!x)
		IR_DIE("out of memory");
	x->g = g;
	x->store = store;
	x->val = calloc((size_t)n + 1, sizeof *x->val);
	x->owned = calloc((size_t)n + 1, sizeof *x->owned);
	x->last_use = calloc((size_t)n + 1, sizeof *x->last_use);
	x->kern = calloc((size_t)n + 1, sizeof *x->kern);
	x->inputs = calloc((size_t)n + 1, sizeof *x->inputs);
	if (!x->val || !x->owned || !x->last_use || !x->kern || !x->inputs)
		IR_DIE("out of memory");
	ir_graph_renumber((ir_graph *)g);
	for (int i = 0; i < n; i++) {
		const ir_node *nd = g->nodes[i];
		x->last_use[i] = i;
		if (nd->nin > RT_MAX_OPERANDS) {
			rt_errorf(e, "node %d has more operands than the interpreter takes", i);
			rt_exec_free(x);
			return NULL;
		}
		for (int k = 0; k < nd->nin; k++)
			if (x->last_use[nd->in[k]->id] < i)
				x->last_use[nd->in[k]->id] = i;
		switch (nd->op) {
		case IR_OP_INPUT:
			x->inputs[i] = calloc(1, (size_t)ir_type_bytes(&nd->type) + 1);
			if (!x->inputs[i])
				IR_DIE("out of memory");
			break;
		case IR_OP_PARAM:
		case IR_OP_STATE: {
			rt_tensor *t = rt_store_find(store, nd->name);
			if (!t || !ir_type_eq(&t->type, &nd->type)) {
				rt_errorf(e, "the parameter store has no %s '%s' of the model's type",
					nd->op == IR_OP_PARAM ? "param" : "state", nd->name);
				rt_exec_free(x);
				return NULL;
			}
			break;
		}
		case IR_OP_OUTPUT:
			break;
		default:
			x->kern[i] = rt_kernel_get(nd);
			if (!x->kern[i]) {
				rt_errorf(e, "no %s kernel for %s", ir_dtype_name(nd->type.dtype), ir_op_name(nd->op));
				rt_exec_free(x);
				return NULL;
			}
		}
	}
	/* Values an output shows live to the end of the step. */
	for (int i = 0; i < n; i++)
		if (g->nodes[i]->op == IR_OP_OUTPUT)
			x->last_use[g->nodes[i]->in[0]->id] = n;
	return x;
}

static const ir_node *find_named(const ir_graph *g, ir_op op, const char *name)
{
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op == op && strcmp(ir_node_str(n, IR_ATTR_NAME), name) == 0)
			return n;
	}
	return NULL;
}

void *rt_exec_input(rt_exec *x, const char *name, const ir_type **type)
{
	const ir_node *n = find_named(x->g, IR_OP_INPUT, name);
	if (!n)
		return NULL;
	if (type)
		*type = &n->type;
	return x->inputs[n->id];
}

const void *rt_exec_output(const rt_exec *x, const char *name, const ir_type **type)
{
	const ir_node *n = find_named(x->g, IR_OP_OUTPUT, name);
	if (!n)
		return NULL;
	if (type)
		*type = &n->type;
	return x->val[n->id];
}

/* Frees what the previous step left (outputs' values). */
static void release_all(rt_exec *x)
{
	for (int i = 0; i < x->g->n; i++) {
		if (x->owned[i])
			free(x->val[i]);
		x->owned[i] = false;
		x->val[i] = NULL;
	}
	x->live = 0;
}

bool rt_exec_run(rt_exec *x, rt_err *e)
{
	const ir_graph *g = x->g;
	release_all(x);
	x->peak = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		switch (n->op) {
		case IR_OP_INPUT:
			x->val[i] = x->inputs[i];
			continue;
		case IR_OP_PARAM:
		case IR_OP_STATE:
			x->val[i] = rt_store_find(x->store, n->name)->data;
			continue;
		case IR_OP_OUTPUT:
			x->val[i] = x->val[n->in[0]->id];
			continue;
		default:
			break;
		}
		rt_kargs a = {.n = n};
		for (int k = 0; k < n->nin; k++)
			a.in[k] = x->val[n->in[k]->id];
		int64_t bytes = ir_type_bytes(&n->type);
		if (ir_op_has(n->op, IR_OPF_UPD)) {
			a.out = x->val[n->in[0]->id];
		} else {
			a.out = xmalloc((size_t)bytes);
			x->owned[i] = true;
			x->live += bytes;
		}
		int64_t ws = rt_kernel_workspace(n);
		if (ws > 0)
			a.ws = xmalloc((size_t)ws);
		x->live += ws;
		if (x->live > x->peak)
			x->peak = x->live;
		bool ok = x->kern[i](&a, e);
		free(a.ws);
		x->live -= ws;
		x->val[i] = a.out;
		if (!ok)
			return false;
		/* Free operands (and this value, if nothing reads it) after their
		 * last reader. */
		for (int k = -1; k < n->nin; k++) {
			int v = k < 0 ? i : n->in[k]->id;
			if (x->last_use[v] == i && x->owned[v]) {
				free(x->val[v]);
				x->owned[v] = false;
				x->val[v] = NULL;
				x->live -= ir_type_bytes(&g->nodes[v]->type);
			}
		}
	}
	return true;
}

int64_t rt_exec_peak_bytes(const rt_exec *x)
{
	return x->peak;
}
