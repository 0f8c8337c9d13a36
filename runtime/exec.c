/* exec.c: the reference interpreter.  Runs a verified graph's nodes in list
 * order (the schedule) with the reference kernels, in one of two memory
 * modes.
 *
 * Arena (the plan pass has run): one allocation of the planned size; every
 * value and workspace sits at its planned offset.
 *
 * Tracking: every buffer is its own allocation, made when its first value is
 * computed and freed as soon as nothing more reads it, and the high-water
 * mark of live bytes is recorded.  It decides everything at run time, with
 * reference counts, independently of the memory model (passes/memory.c),
 * following the same rules: param and state tensors live in the store, an
 * in-place update writes there, an output aliases its operand and keeps it
 * to the end of the step, inputs are copied in at the start, an op flagged
 * in-place takes over operand 0's buffer when it is its last reader, and a
 * kernel's workspace lives during its call.  A fusion group (a run of
 * consecutive nodes sharing a group number), which native code computes in
 * one loop, makes every member's buffer when its first member runs and
 * keeps everything its members read or write until its last member has
 * run, so a convolution's workspace counts with the buffers of the
 * epilogue after it, and a member takes over a buffer that another member
 * reads only when the model says it may.  Its high-water mark must equal the
 * model's fragmentation-free peak to the byte.
 *
 * In both modes the caller fills inputs through rt_exec_input (staging
 * buffers outside the step's memory) before each run.
 *
 * With rt_exec_check_numerics, every float value is scanned for NaN and Inf
 * as it is made (inputs, params and state as the step starts, every
 * kernel's result right after the kernel), and the first non-finite one
 * stops the run naming its node.  Native code cannot stop mid-step: the run
 * keeps a copy of the params and state from before it, looks at what the
 * step left behind (first_nonfinite) and, on a non-finite value, restores
 * the copy and replays the step in the interpreter's tracking mode,
 * checking every kernel, to name the node the same way.
 *
 * This file sets up and runs the interpreter; tracking mode's buffers are
 * exec_track.c's, native runs exec_native.c's, the numerics checks and
 * the replay exec_numerics.c's (exec.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

void *rt_exec_calloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		IR_DIE("out of memory");
	return p;
}

bool rt_exec_read_before(const ir_node *n, int k)
{
	for (int j = 0; j < k; j++)
		if (n->in[j] == n->in[k])
			return true;
	return false;
}

void rt_exec_free(rt_exec *x)
{
	if (!x)
		return;
	rt_track_release_all(x);
	for (int i = 0; i < x->g->n; i++)
		free(x->staging[i]);
	free(x->val);
	free(x->kern);
	free(x->staging);
	free(x->readers);
	free(x->bufs);
	free(x->buf_of);
	free(x->arena);
	free(x->persist);
	free(x->inputs);
	for (int i = 0; x->saved && i < x->g->n; i++)
		free(x->saved[i]);
	free(x->saved);
	free(x);
}

/* Frees x; the message is already in e. */
static rt_exec *fail(rt_exec *x)
{
	rt_exec_free(x);
	return NULL;
}

/* Arena mode: checks the plan covers every buffer and workspace. */
static bool setup_arena(rt_exec *x, rt_err *e)
{
	const ir_graph *g = x->g;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (ir_node_has_own_buffer(n)) {
			if (n->offset < 0)
				return rt_errorf(e, "%s node %d has no arena offset: run the plan pass", ir_op_name(n->op), i);
			int64_t top = n->offset + ir_type_bytes(&n->type);
			if (top > x->arena_bytes)
				x->arena_bytes = top;
		}
		int64_t ws = x->mode == RT_EXEC_NATIVE ? n->ws_bytes : rt_kernel_workspace(n);
		if (ws > 0 && (n->ws_offset < 0 || n->ws_bytes < ws))
			return rt_errorf(e, "%s node %d needs %lld bytes of workspace, the plan gives %lld",
				ir_op_name(n->op), i, (long long)ws, (long long)(n->ws_offset < 0 ? 0 : n->ws_bytes));
		if (ws > 0 && n->ws_offset + ws > x->arena_bytes)
			x->arena_bytes = n->ws_offset + ws;
	}
	x->arena = rt_step_arena_alloc(x->arena_bytes);
	if (!x->arena)
		return rt_error_oom(e, "the arena", x->arena_bytes);
	for (int i = 0; i < g->n; i++)
		if (ir_node_has_own_buffer(g->nodes[i]))
			x->val[i] = x->arena + g->nodes[i]->offset;
	return true;
}

rt_exec *rt_exec_new(const ir_graph *g, rt_store *store, rt_exec_mode mode, rt_err *e)
{
	int n = g->n;
	rt_exec *x = rt_exec_calloc(1, sizeof *x);
	x->g = g;
	x->store = store;
	x->val = rt_exec_calloc((size_t)n + 1, sizeof *x->val);
	x->kern = rt_exec_calloc((size_t)n + 1, sizeof *x->kern);
	x->staging = rt_exec_calloc((size_t)n + 1, sizeof *x->staging);
	x->readers = rt_exec_calloc((size_t)n + 1, sizeof *x->readers);
	IR_ASSERT(ir_graph_ids_current(g));
	if (mode == RT_EXEC_AUTO) {
		mode = RT_EXEC_ARENA;
		for (int i = 0; i < n; i++)
			if (ir_node_has_own_buffer(g->nodes[i]) && g->nodes[i]->offset < 0)
				mode = RT_EXEC_TRACK;
	}
	x->mode = mode;
	for (int i = 0; i < n; i++) {
		const ir_node *nd = g->nodes[i];
		if (nd->nin > RT_MAX_OPERANDS) {
			rt_errorf(e, "a %s node has more operands than the interpreter takes", ir_op_name(nd->op));
			return fail(x);
		}
		for (int k = 0; k < nd->nin; k++)
			if (!rt_exec_read_before(nd, k))
				x->readers[nd->in[k]->id]++;
		switch (nd->op) {
		case IR_OP_INPUT: /* sized by the batch: the user's */
			x->staging[i] = calloc(1, (size_t)ir_type_bytes(&nd->type) + 1);
			if (!x->staging[i]) {
				char what[256];
				snprintf(what, sizeof what, "the input '%s'", ir_node_str(nd, IR_ATTR_NAME));
				rt_error_oom(e, what, ir_type_bytes(&nd->type));
				return fail(x);
			}
			break;
		case IR_OP_PARAM:
		case IR_OP_STATE: {
			rt_tensor *t = rt_store_find(store, nd->name);
			if (!t || !ir_type_eq(&t->type, &nd->type)) {
				rt_errorf(e, "the parameter store has no %s '%s' of the model's type",
					nd->op == IR_OP_PARAM ? "param" : "state", nd->name);
				return fail(x);
			}
			x->val[i] = t->data;
			break;
		}
		case IR_OP_OUTPUT:
			break;
		default:
			x->kern[i] = rt_kernel_get(nd);
			if (!x->kern[i]) {
				rt_errorf(e, "no %s kernel for %s", ir_dtype_name(nd->type.dtype), ir_op_name(nd->op));
				return fail(x);
			}
		}
	}
	if (mode == RT_EXEC_ARENA || mode == RT_EXEC_NATIVE) {
		if (!setup_arena(x, e))
			return fail(x);
		/* Aliases are fixed: an output or in-place update is its operand's. */
		for (int i = 0; i < n; i++) {
			const ir_node *nd = g->nodes[i];
			if (nd->op == IR_OP_OUTPUT || ir_op_has(nd->op, IR_OPF_UPD))
				x->val[i] = x->val[nd->in[0]->id];
		}
	} else {
		x->bufs = rt_exec_calloc((size_t)n + 1, sizeof *x->bufs);
		x->buf_of = rt_exec_calloc((size_t)n + 1, sizeof *x->buf_of);
	}
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
	return x->staging[n->id];
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

/* Tracking: the buffers of the members of the fusion group run that starts
 * at node first, made before its first member runs (in member order, so
 * in-place choices are those made one member at a time: no reader's count
 * changes before the run ends). */
static bool track_run_outputs(rt_exec *x, int first, rt_err *e)
{
	const ir_graph *g = x->g;
	int group = g->nodes[first]->group;
	for (int j = first; group >= 0 && j < g->n && g->nodes[j]->group == group; j++) {
		const ir_node *m = g->nodes[j];
		if (ir_node_has_own_buffer(m) && m->op != IR_OP_INPUT && !rt_track_output(x, m, j, e))
			return false;
	}
	return true;
}

bool rt_exec_run(rt_exec *x, rt_err *e)
{
	if (x->mode == RT_EXEC_NATIVE)
		return rt_exec_run_native(x, e);
	const ir_graph *g = x->g;
	bool track = x->mode == RT_EXEC_TRACK;
	rt_track_release_all(x);
	x->peak = 0;
	x->fault = NULL;
	x->kink_digest = 0xcbf29ce484222325ull;
	if (x->check_numerics && !rt_exec_numerics_start(x, e))
		return false;
	if (track && !rt_track_start(x, e))
		return false;
	for (int i = 0, run = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->group < 0 || i == 0 || g->nodes[i - 1]->group != n->group)
			run = i; /* the first member of i's group run */
		switch (n->op) {
		case IR_OP_INPUT:
			if (!track)
				memcpy(x->val[i], x->staging[i], (size_t)ir_type_bytes(&n->type));
			continue;
		case IR_OP_PARAM:
		case IR_OP_STATE:
			continue;
		case IR_OP_OUTPUT:
			x->val[i] = x->val[n->in[0]->id];
			if (track)
				rt_track_pin(x, n);
			continue;
		default:
			break;
		}
		rt_kargs a = {.n = n};
		for (int k = 0; k < n->nin; k++)
			a.in[k] = x->val[n->in[k]->id];
		int64_t ws = rt_kernel_workspace(n);
		if (track && i == run && !track_run_outputs(x, i, e))
			return false;
		if (ir_op_has(n->op, IR_OPF_UPD))
			x->val[i] = x->val[n->in[0]->id];
		else if (track && x->buf_of[i] < 0 && !rt_track_output(x, n, i, e))
			return false;
		a.out = x->val[i];
		if (track) {
			a.ws = ws > 0 ? malloc((size_t)ws) : NULL;
			if (ws > 0 && !a.ws)
				return rt_error_oom(e, "a kernel's workspace", ws);
			if (x->live + ws > x->peak)
				x->peak = x->live + ws;
		} else {
			a.ws = ws > 0 ? x->arena + n->ws_offset : NULL;
		}
		bool ok = x->kern[i](&a, e);
		if (ok && x->check_numerics && !rt_all_finite(a.out, &n->type))
			ok = rt_exec_nonfinite(x, n, e);
		if (ok && x->kinks && n->op == IR_OP_RELU)
			rt_exec_fold_kinks(x, a.out, &n->type);
		if (track) {
			free(a.ws);
			if (!(i + 1 < g->n && n->group >= 0 && g->nodes[i + 1]->group == n->group))
				rt_track_run_done(x, run, i);
		}
		if (!ok)
			return false;
	}
	return true;
}

int64_t rt_exec_peak_bytes(const rt_exec *x)
{
	return x->mode == RT_EXEC_TRACK ? x->peak : x->arena_bytes;
}
