/* exec_numerics.c: --check-numerics for the interpreter and native code
 * (exec.c's opening comment tells how), and the digest of relu kinks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* Records n as the fault and says where it is: "the first non-finite value
 * came from %12 (conv2d_dx in s1.u0.f) at models/x.rev:20:9". */
bool rt_exec_nonfinite(rt_exec *x, const ir_node *n, rt_err *e)
{
	char ref[80], where[300] = "", scope[96] = "";
	x->fault = n;
	if (n->scope)
		snprintf(scope, sizeof scope, " in %s", n->scope);
	if (n->pos.file)
		snprintf(where, sizeof where, " at %s:%d:%d", n->pos.file, n->pos.line, n->pos.col);
	return rt_errorf(e, "the first non-finite value came from %s (%s%s)%s", ir_node_ref(n, ref, sizeof ref),
		ir_op_name(n->op), scope, where);
}

bool rt_exec_numerics_start(rt_exec *x, rt_err *e)
{
	const ir_graph *g = x->g;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if ((n->op == IR_OP_INPUT && !rt_all_finite(x->staging[i], &n->type)) ||
		    (ir_op_is_persistent(n->op) && !rt_all_finite(x->val[i], &n->type)))
			return rt_exec_nonfinite(x, n, e);
	}
	return true;
}

void rt_exec_fold_kinks(rt_exec *x, const void *data, const ir_type *t)
{
	int64_t n = ir_type_elems(t);
	uint64_t h = x->kink_digest, word = 0;
	for (int64_t i = 0; i < n; i++) {
		bool on = t->dtype == IR_F64 ? ((const double *)data)[i] > 0 : ((const float *)data)[i] > 0;
		word = word << 1 | on;
		if ((i & 63) == 63 || i == n - 1) {
			h = (h ^ word) * 0x100000001b3ull;
			h ^= h >> 29;
			word = 0;
		}
	}
	x->kink_digest = h;
}

void rt_exec_kink_digest(rt_exec *x, bool on)
{
	x->kinks = on;
}

uint64_t rt_exec_kinks(const rt_exec *x)
{
	return x->kink_digest;
}

void rt_exec_check_numerics(rt_exec *x, bool on)
{
	x->check_numerics = on;
}

const ir_node *rt_exec_fault(const rt_exec *x)
{
	return x->fault;
}

/* After a run: the name of the first output, param or state (in list
 * order) holding a non-finite value, or NULL when all are finite. */
static const char *first_nonfinite(const rt_exec *x)
{
	const ir_graph *g = x->g;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op == IR_OP_OUTPUT && !rt_all_finite(x->val[n->in[0]->id], &n->type))
			return ir_node_str(n, IR_ATTR_NAME);
		if (ir_op_is_persistent(n->op) && !rt_all_finite(x->val[i], &n->type))
			return n->name;
	}
	return NULL;
}

/* Native mode: copies (restore false) or restores the params and state.
 * The copy is as large as the model's tensors: false, with the size in e,
 * when memory runs out. */
static bool save_persistent(rt_exec *x, bool restore, rt_err *e)
{
	const ir_graph *g = x->g;
	if (!x->saved && !(x->saved = calloc((size_t)g->n + 1, sizeof *x->saved)))
		return rt_error_oom(e, "the copy of the parameters and state", ((int64_t)g->n + 1) * (int64_t)sizeof *x->saved);
	for (int i = 0; i < g->n; i++) {
		if (!ir_op_is_persistent(g->nodes[i]->op))
			continue;
		size_t bytes = (size_t)ir_type_bytes(&g->nodes[i]->type);
		if (!x->saved[i] && !(x->saved[i] = malloc(bytes + 1))) {
			char what[300];
			snprintf(what, sizeof what, "the copy of '%s' (--check-numerics)", g->nodes[i]->name);
			return rt_error_oom(e, what, (int64_t)bytes);
		}
		if (restore)
			memcpy(x->val[i], x->saved[i], bytes);
		else
			memcpy(x->saved[i], x->val[i], bytes);
	}
	return true;
}

/* A native step left the non-finite value `what`: puts the params and state
 * back as they were and replays the step, same inputs, in tracking mode
 * with every kernel checked.  Always false, with the fault in e. */
static bool replay(rt_exec *x, const char *what, rt_err *e)
{
	save_persistent(x, true, e); /* (the copy exists: it was made before the step) */
	rt_exec *r = rt_exec_new(x->g, x->store, RT_EXEC_TRACK, e);
	if (!r)
		return false;
	for (int i = 0; i < x->g->n; i++)
		if (x->g->nodes[i]->op == IR_OP_INPUT)
			memcpy(r->staging[i], x->staging[i], (size_t)ir_type_bytes(&x->g->nodes[i]->type));
	r->check_numerics = true;
	if (rt_exec_run(r, e))
		rt_errorf(e, "native code left a non-finite value in '%s', but the interpreter's replay of the "
			"step found none", what);
	x->fault = r->fault;
	rt_exec_free(r);
	return false;
}

bool rt_exec_numerics_save(rt_exec *x, rt_err *e)
{
	return !x->check_numerics || save_persistent(x, false, e);
}

bool rt_exec_numerics_check(rt_exec *x, rt_err *e)
{
	const char *bad = x->check_numerics ? first_nonfinite(x) : NULL;
	return bad ? replay(x, bad, e) : true;
}
