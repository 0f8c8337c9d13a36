/* exec_track.c: the interpreter's tracking mode (exec.c tells its rules):
 * every buffer its own allocation, made when its first value is computed
 * and freed once nothing more reads it, and the high-water mark of live
 * bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

void rt_track_release_all(rt_exec *x)
{
	if (x->mode != RT_EXEC_TRACK || !x->bufs)
		return;
	for (int i = 0; i < x->g->n; i++) {
		free(x->bufs[i].data);
		x->bufs[i].data = NULL;
	}
	x->live = 0;
}

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

bool rt_track_start(rt_exec *x, rt_err *e)
{
	const ir_graph *g = x->g;
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
	return true;
}

void rt_track_pin(rt_exec *x, const ir_node *out)
{
	int b = x->buf_of[out->in[0]->id];
	if (b >= 0) {
		x->bufs[b].pinned = true;
		x->bufs[b].remaining--;
	}
}

bool rt_track_output(rt_exec *x, const ir_node *n, int i, rt_err *e)
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

void rt_track_run_done(rt_exec *x, int first, int last)
{
	for (int j = first; j <= last; j++) {
		const ir_node *n = x->g->nodes[j];
		if (n->op == IR_OP_INPUT || ir_op_is_persistent(n->op) || n->op == IR_OP_OUTPUT)
			continue;
		for (int k = 0; k < n->nin; k++) {
			int b = x->buf_of[n->in[k]->id];
			if (b >= 0 && !rt_exec_read_before(n, k)) {
				x->bufs[b].remaining--;
				track_release(x, b);
			}
		}
		if (x->buf_of[j] == j)
			track_release(x, j); /* read by nothing */
	}
}
