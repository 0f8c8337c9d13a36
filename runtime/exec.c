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
 * one loop, keeps everything its members read or write until its last
 * member has run, so a member takes over a buffer that another member reads
 * only when the model says it may.  Its high-water mark must equal the
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
 * checking every kernel, to name the node the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "rt.h"

/* A buffer in tracking mode. */
typedef struct {
	void *data;
	int64_t bytes;
	int remaining; /* reader nodes of its values still to run */
	bool pinned;   /* an output shows it: kept to the end */
} buffer;

struct rt_exec {
	const ir_graph *g;
	rt_store *store;
	rt_exec_mode mode;
	void **val;          /* by node id: where the value is */
	rt_kernel_fn *kern;  /* by node id */
	void **staging;      /* by node id, for input nodes */
	int *readers;        /* by node id: distinct nodes reading the value */
	/* arena mode */
	unsigned char *arena;
	int64_t arena_bytes;
	/* native mode */
	revc_abi_step *step;
	rt_pool *pool;
	void **persist;      /* param and state data, in list order */
	void **inputs;       /* staging buffers, in list order */
	/* tracking mode */
	buffer *bufs;        /* by node id of the value that created it */
	int *buf_of;         /* by node id: its buffer (a node id), or -1 */
	int64_t live, peak;
	/* rt_exec_check_numerics */
	bool check_numerics;
	const ir_node *fault; /* the node whose value was not finite, or NULL */
	/* rt_exec_kink_digest */
	bool kinks;
	uint64_t kink_digest;
	void **saved;         /* native mode: by node id, param and state data before the run */
};

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		IR_DIE("out of memory");
	return p;
}

static bool has_buffer(const ir_node *n)
{
	return n->op != IR_OP_PARAM && n->op != IR_OP_STATE && n->op != IR_OP_OUTPUT &&
		!ir_op_has(n->op, IR_OPF_UPD);
}

/* Does n read v as an operand before operand k?  (Count readers once.) */
static bool read_before(const ir_node *n, int k)
{
	for (int j = 0; j < k; j++)
		if (n->in[j] == n->in[k])
			return true;
	return false;
}

static void release_buffers(rt_exec *x)
{
	if (x->mode != RT_EXEC_TRACK || !x->bufs)
		return;
	for (int i = 0; i < x->g->n; i++) {
		free(x->bufs[i].data);
		x->bufs[i].data = NULL;
	}
	x->live = 0;
}

void rt_exec_free(rt_exec *x)
{
	if (!x)
		return;
	release_buffers(x);
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
		if (has_buffer(n)) {
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
	x->arena = aligned_alloc(64, (size_t)((x->arena_bytes + 63) / 64 * 64 + 64));
	if (!x->arena)
		return rt_error_oom(e, "the arena", x->arena_bytes);
	for (int i = 0; i < g->n; i++)
		if (has_buffer(g->nodes[i]))
			x->val[i] = x->arena + g->nodes[i]->offset;
	return true;
}

rt_exec *rt_exec_new(const ir_graph *g, rt_store *store, rt_exec_mode mode, rt_err *e)
{
	int n = g->n;
	rt_exec *x = xcalloc(1, sizeof *x);
	x->g = g;
	x->store = store;
	x->val = xcalloc((size_t)n + 1, sizeof *x->val);
	x->kern = xcalloc((size_t)n + 1, sizeof *x->kern);
	x->staging = xcalloc((size_t)n + 1, sizeof *x->staging);
	x->readers = xcalloc((size_t)n + 1, sizeof *x->readers);
	ir_graph_renumber((ir_graph *)g);
	if (mode == RT_EXEC_AUTO) {
		mode = RT_EXEC_ARENA;
		for (int i = 0; i < n; i++)
			if (has_buffer(g->nodes[i]) && g->nodes[i]->offset < 0)
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
			if (!read_before(nd, k))
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
		x->bufs = xcalloc((size_t)n + 1, sizeof *x->bufs);
		x->buf_of = xcalloc((size_t)n + 1, sizeof *x->buf_of);
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

/* ---- tracking mode ------------------------------------------------------- */

static bool track_alloc(rt_exec *x, int id, int64_t bytes, rt_err *e)
{
	buffer *b = &x->bufs[id];
	b->data = malloc((size_t)bytes + 1);
	if (!b->data) {
		char what[128];
		snprintf(what, sizeof what, "the value of %%%d (%s)", id, ir_op_name(x->g->nodes[id]->op));
		return rt_error_oom(e, what, bytes);
	}
	b->bytes = bytes;
	b->remaining = x->readers[id];
	b->pinned = false;
	x->buf_of[id] = id;
	x->val[id] = b->data;
	x->live += bytes;
	return true;
}

static void track_release(rt_exec *x, int b)
{
	if (x->bufs[b].remaining == 0 && !x->bufs[b].pinned && x->bufs[b].data) {
		free(x->bufs[b].data);
		x->bufs[b].data = NULL;
		x->live -= x->bufs[b].bytes;
	}
}

/* Where node n's value goes, in tracking mode; reuses operand 0's buffer
 * for an in-place op that is its last reader. */
static bool track_output(rt_exec *x, const ir_node *n, int i, rt_err *e)
{
	int64_t bytes = ir_type_bytes(&n->type);
	if (ir_op_has(n->op, IR_OPF_INPL) && n->nin > 0 && x->buf_of[n->in[0]->id] >= 0) {
		buffer *b = &x->bufs[x->buf_of[n->in[0]->id]];
		if (b->data && b->remaining == 1 && !b->pinned && b->bytes == bytes) {
			x->buf_of[i] = x->buf_of[n->in[0]->id];
			x->val[i] = b->data;
			b->remaining += x->readers[i];
			return true;
		}
	}
	return track_alloc(x, i, bytes, e);
}

/* After the last member of the group run first..last (one node when it is
 * in no group): releases what its members read and what nothing reads. */
static void track_run_done(rt_exec *x, int first, int last)
{
	for (int j = first; j <= last; j++) {
		const ir_node *n = x->g->nodes[j];
		if (n->op == IR_OP_INPUT || n->op == IR_OP_PARAM || n->op == IR_OP_STATE || n->op == IR_OP_OUTPUT)
			continue;
		for (int k = 0; k < n->nin; k++) {
			int b = x->buf_of[n->in[k]->id];
			if (b >= 0 && !read_before(n, k)) {
				x->bufs[b].remaining--;
				track_release(x, b);
			}
		}
		if (x->buf_of[j] == j)
			track_release(x, j); /* read by nothing */
	}
}

/* ---- numerics -------------------------------------------------------------- */

static bool persistent(const ir_node *n)
{
	return n->op == IR_OP_PARAM || n->op == IR_OP_STATE;
}

/* Records n as the fault and says where it is: "the first non-finite value
 * came from %12 (conv2d_dx in s1.u0.f) at models/x.rev:20:9". */
static bool nonfinite(rt_exec *x, const ir_node *n, rt_err *e)
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

/* Folds which of a relu's outputs are positive into the digest. */
static void fold_kinks(rt_exec *x, const void *data, const ir_type *t)
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
		if (persistent(n) && !rt_all_finite(x->val[i], &n->type))
			return n->name;
	}
	return NULL;
}

const ir_graph *rt_exec_graph(const rt_exec *x)
{
	return x->g;
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
		if (!persistent(g->nodes[i]))
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

/* ---- running --------------------------------------------------------------- */

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
	x->persist = xcalloc((size_t)g->n + 1, sizeof *x->persist);
	x->inputs = xcalloc((size_t)g->n + 1, sizeof *x->inputs);
	int *ps = xcalloc((size_t)g->n + 1, sizeof *ps), *is = xcalloc((size_t)g->n + 1, sizeof *is);
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

bool rt_exec_run(rt_exec *x, rt_err *e)
{
	if (x->mode == RT_EXEC_NATIVE) {
		/* Compiled kernels cannot report a bad label: check them first. */
		if (!check_labels(x, e))
			return false;
		x->fault = NULL;
		if (x->check_numerics && !save_persistent(x, false, e))
			return false;
		x->step(x->arena, x->persist, x->inputs, rt_parallel, x->pool);
		const char *bad = x->check_numerics ? first_nonfinite(x) : NULL;
		return bad ? replay(x, bad, e) : true;
	}
	const ir_graph *g = x->g;
	bool track = x->mode == RT_EXEC_TRACK;
	release_buffers(x);
	x->peak = 0;
	x->fault = NULL;
	x->kink_digest = 0xcbf29ce484222325ull;
	if (x->check_numerics) /* what the step starts from: inputs, params and state */
		for (int i = 0; i < g->n; i++) {
			const ir_node *n = g->nodes[i];
			if ((n->op == IR_OP_INPUT && !rt_all_finite(x->staging[i], &n->type)) ||
			    (persistent(n) && !rt_all_finite(x->val[i], &n->type)))
				return nonfinite(x, n, e);
		}
	if (track) {
		for (int i = 0; i < g->n; i++)
			x->buf_of[i] = -1;
		/* Inputs are live from the start: copy them in. */
		for (int i = 0; i < g->n; i++)
			if (g->nodes[i]->op == IR_OP_INPUT) {
				if (!track_alloc(x, i, ir_type_bytes(&g->nodes[i]->type), e))
					return false;
				memcpy(x->val[i], x->staging[i], (size_t)ir_type_bytes(&g->nodes[i]->type));
			}
		x->peak = x->live;
	}
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
			if (track && x->buf_of[n->in[0]->id] >= 0) {
				buffer *b = &x->bufs[x->buf_of[n->in[0]->id]];
				b->pinned = true;
				b->remaining--;
			}
			continue;
		default:
			break;
		}
		rt_kargs a = {.n = n};
		for (int k = 0; k < n->nin; k++)
			a.in[k] = x->val[n->in[k]->id];
		int64_t ws = rt_kernel_workspace(n);
		if (ir_op_has(n->op, IR_OPF_UPD))
			x->val[i] = x->val[n->in[0]->id];
		else if (track && !track_output(x, n, i, e))
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
			ok = nonfinite(x, n, e);
		if (ok && x->kinks && n->op == IR_OP_RELU)
			fold_kinks(x, a.out, &n->type);
		if (track) {
			free(a.ws);
			if (!(i + 1 < g->n && n->group >= 0 && g->nodes[i + 1]->group == n->group))
				track_run_done(x, run, i);
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

rt_exec_mode rt_exec_mode_of(const rt_exec *x)
{
	return x->mode;
}
