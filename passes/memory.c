/* memory.c: the memory model that scheduling, liveness, planning and the
 * reports share.  Given a graph and an execution order it says which
 * buffers exist, how large they are, when each is live, and what it holds.
 *
 * The rules (the interpreter's tracking mode implements the same ones on
 * its own, and the two must agree to the byte):
 * - param and state tensors live outside the step's memory; an op that
 *   updates one in place and an output (an alias of its operand) have no
 *   buffer of their own;
 * - every other value gets a buffer when its node runs, live until its last
 *   reader has run; inputs are live from step 0, values an output shows
 *   until the end of the step;
 * - an op flagged in-place reuses operand 0's buffer when it is the last
 *   reader of that buffer and the sizes match;
 * - a node's workspace is live during its own step only;
 * - a fusion group (a run of consecutive nodes sharing a group number) is
 *   one loop that computes all its members element by element: every
 *   buffer a member reads or writes is live over the whole run, and a
 *   member reuses operand 0's buffer in place only when no other member
 *   reads that buffer (codegen/k_elementwise.c reads some operands once a
 *   row, ahead of the members that precede them element by element).
 * A step's live bytes are those of the buffers live at it plus the step's
 * workspace; the peak is the largest, the fragmentation-free peak. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static const char *const cat_names[] = {
	[PS_MEM_PARAMS] = "parameters",
	[PS_MEM_GRADS] = "parameter gradients",
	[PS_MEM_OPTSTATE] = "optimiser state",
	[PS_MEM_SAVED] = "saved activations",
	[PS_MEM_TRANSIENT] = "transient activations and gradients",
	[PS_MEM_WORKSPACE] = "workspace",
};
_Static_assert(sizeof cat_names / sizeof cat_names[0] == PS_MEM_CAT_COUNT, "category names");

static const char *const cat_keys[] = {
	[PS_MEM_PARAMS] = "parameters",
	[PS_MEM_GRADS] = "gradients",
	[PS_MEM_OPTSTATE] = "optimizer_state",
	[PS_MEM_SAVED] = "saved",
	[PS_MEM_TRANSIENT] = "transient",
	[PS_MEM_WORKSPACE] = "workspace",
};
_Static_assert(sizeof cat_keys / sizeof cat_keys[0] == PS_MEM_CAT_COUNT, "category keys");

const char *ps_mem_cat_name(ps_mem_cat c) { return cat_names[c]; }
const char *ps_mem_cat_key(ps_mem_cat c) { return cat_keys[c]; }

void ps_memory_free(ps_memory *m)
{
	free(m->buf_of);
	free(m->bytes);
	free(m->begin);
	free(m->end);
	free(m->cat);
	free(m->first);
	free(m->ws);
	free(m->live);
	memset(m, 0, sizeof *m);
}

bool ps_optimizer_update(ir_op op)
{
	return op == IR_OP_MOMENTUM || op == IR_OP_ADAM_M || op == IR_OP_ADAM_V || op == IR_OP_ADAM_COUNT;
}

void ps_memory_persistent(const ir_graph *g, int64_t persistent[PS_MEM_CAT_COUNT])
{
	/* What an optimiser update writes in place (momentum buffers, AdamW's
	 * moments and step count) is optimiser state, the rest (parameters,
	 * running statistics) parameters. */
	bool *opt = calloc((size_t)g->n + 1, sizeof *opt);
	if (!opt)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++)
		if (ps_optimizer_update(g->nodes[i]->op))
			opt[g->nodes[i]->in[0]->id] = true;
	persistent[PS_MEM_PARAMS] = persistent[PS_MEM_OPTSTATE] = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *v = g->nodes[i];
		if (ir_op_is_persistent(v->op))
			persistent[opt[v->id] ? PS_MEM_OPTSTATE : PS_MEM_PARAMS] += ir_type_bytes(&v->type);
	}
	free(opt);
}

/* Does a member of the group run before step t (from step first) read
 * buffer b? */
static bool read_in_run(const ps_memory *m, ir_node *const *order, int first, int t, int b)
{
	for (int s = first; s < t; s++)
		for (int k = 0; k < order[s]->nin; k++)
			if (m->buf_of[order[s]->in[k]->id] == b)
				return true;
	return false;
}

bool ps_memory_compute(const ir_graph *g, ir_node *const *order, ps_workspace_fn ws_fn, void *ws_user,
	ps_memory *m)
{
	int n = g->n;
	memset(m, 0, sizeof *m);
	m->steps = n;
	/* step[id]: where each node runs; readers by node. */
	int *step = malloc(((size_t)n + 1) * sizeof *step);
	int *last = malloc(((size_t)n + 1) * sizeof *last);
	m->buf_of = malloc(((size_t)n + 1) * sizeof *m->buf_of);
	m->bytes = malloc(((size_t)n + 1) * sizeof *m->bytes);
	m->begin = malloc(((size_t)n + 1) * sizeof *m->begin);
	m->end = malloc(((size_t)n + 1) * sizeof *m->end);
	m->cat = malloc(((size_t)n + 1) * sizeof *m->cat);
	m->first = malloc(((size_t)n + 1) * sizeof *m->first);
	m->ws = calloc((size_t)n + 1, sizeof *m->ws);
	m->live = calloc(((size_t)n + 1) * PS_MEM_CAT_COUNT, sizeof *m->live);
	if (!step || !last || !m->buf_of || !m->bytes || !m->begin || !m->end || !m->cat ||
	    !m->first || !m->ws || !m->live)
		IR_DIE("out of memory");
	IR_ASSERT(ir_graph_ids_current(g));
	for (int t = 0; t < n; t++)
		step[order[t]->id] = t;
	/* Last reader of each value (outputs pin theirs to the end). */
	for (int i = 0; i < n; i++)
		last[i] = -1;
	for (int t = 0; t < n; t++) {
		const ir_node *r = order[t];
		for (int k = 0; k < r->nin; k++) {
			int v = r->in[k]->id;
			int until = r->op == IR_OP_OUTPUT ? n - 1 : t;
			if (until > last[v])
				last[v] = until;
		}
	}
	/* Fusion groups: first_of[t] is the first step of t's run. */
	int *first_of = malloc(((size_t)n + 1) * sizeof *first_of);
	if (!first_of)
		IR_DIE("out of memory");
	for (int t = 0; t < n; t++)
		first_of[t] = t > 0 && order[t]->group >= 0 && order[t]->group == order[t - 1]->group ? first_of[t - 1] : t;
	/* Buffers, in order of creation. */
	int nb = 0;
	for (int t = 0; t < n; t++) {
		const ir_node *v = order[t];
		int id = v->id;
		m->buf_of[id] = -1;
		if (!ir_node_has_own_buffer(v))
			continue;
		int64_t bytes = ir_type_bytes(&v->type);
		int end = last[id] < t ? t : last[id];
		if (ir_op_has(v->op, IR_OPF_INPL) && v->nin > 0) {
			int b = m->buf_of[v->in[0]->id];
			if (b >= 0 && m->end[b] == t && m->bytes[b] == bytes && !read_in_run(m, order, first_of[t], t, b)) {
				m->buf_of[id] = b;
				m->end[b] = end;
				continue;
			}
		}
		m->buf_of[id] = nb;
		m->bytes[nb] = bytes;
		m->begin[nb] = v->op == IR_OP_INPUT ? 0 : t;
		m->end[nb] = end;
		m->first[nb] = (ir_node *)v;
		nb++;
	}
	m->nbuf = nb;
	/* A group's buffers live over its whole run. */
	for (int t = n - 1, l = n - 1; t >= 0; t--) {
		if (t + 1 < n && first_of[t + 1] != first_of[t])
			l = t;
		if (l == first_of[t])
			continue; /* a run of one node */
		const ir_node *v = order[t];
		int b = m->buf_of[v->id];
		if (b >= 0) {
			if (m->begin[b] > first_of[t])
				m->begin[b] = first_of[t];
			if (m->end[b] < l)
				m->end[b] = l;
		}
		for (int k = 0; k < v->nin; k++) {
			int o = m->buf_of[v->in[k]->id];
			if (o >= 0 && m->end[o] < l)
				m->end[o] = l;
		}
	}
	free(first_of);

	/* What each buffer holds.  A parameter gradient is what an optimiser
	 * step consumes (operand 1 of momentum, adam_m, adam_v) or a "grad:"
	 * output shows; a
	 * saved activation is a forward value something outside the forward
	 * pass reads; everything else is transient. */
	bool *read_late = calloc((size_t)nb + 1, sizeof *read_late);
	bool *grad = calloc((size_t)nb + 1, sizeof *grad);
	if (!read_late || !grad)
		IR_DIE("out of memory");
	for (int t = 0; t < n; t++) {
		const ir_node *r = order[t];
		for (int k = 0; k < r->nin; k++) {
			int b = m->buf_of[r->in[k]->id];
			if (b >= 0 && r->role != IR_ROLE_FWD)
				read_late[b] = true;
		}
		int g_b = -1;
		if (r->op == IR_OP_MOMENTUM || r->op == IR_OP_ADAM_M || r->op == IR_OP_ADAM_V)
			g_b = m->buf_of[r->in[1]->id];
		else if (ps_grad_param_name(r))
			g_b = m->buf_of[r->in[0]->id];
		if (g_b >= 0)
			grad[g_b] = true;
	}
	for (int b = 0; b < nb; b++) {
		const ir_node *v = m->first[b];
		if (grad[b])
			m->cat[b] = PS_MEM_GRADS;
		else if (v->role == IR_ROLE_FWD && read_late[b])
			m->cat[b] = PS_MEM_SAVED;
		else
			m->cat[b] = PS_MEM_TRANSIENT;
	}
	free(read_late);
	free(grad);

	ps_memory_persistent(g, m->persistent);

	/* Live bytes by step and category (difference arrays, then a sweep). */
	int64_t *delta = calloc(((size_t)n + 2) * PS_MEM_CAT_COUNT, sizeof *delta);
	if (!delta)
		IR_DIE("out of memory");
	for (int b = 0; b < nb; b++) {
		delta[(size_t)m->begin[b] * PS_MEM_CAT_COUNT + m->cat[b]] += m->bytes[b];
		delta[(size_t)(m->end[b] + 1) * PS_MEM_CAT_COUNT + m->cat[b]] -= m->bytes[b];
	}
	int64_t run[PS_MEM_CAT_COUNT] = {0};
	m->peak = -1;
	for (int t = 0; t < n; t++) {
		m->ws[t] = ws_fn ? ws_fn(order[t], ws_user) : 0;
		int64_t total = 0, act = 0;
		for (int c = 0; c < PS_MEM_CAT_COUNT; c++) {
			run[c] += delta[(size_t)t * PS_MEM_CAT_COUNT + c];
			int64_t v = run[c] + (c == PS_MEM_WORKSPACE ? m->ws[t] : 0);
			m->live[(size_t)t * PS_MEM_CAT_COUNT + c] = v;
			total += v;
		}
		act = run[PS_MEM_SAVED] + run[PS_MEM_TRANSIENT];
		if (total > m->peak) {
			m->peak = total;
			m->peak_step = t;
		}
		if (act > m->saved_transient_peak)
			m->saved_transient_peak = act;
	}
	if (m->peak < 0)
		m->peak = 0;
	free(delta);
	free(step);
	free(last);
	return true;
}
