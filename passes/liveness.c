/* liveness.c: live ranges over the schedule.
 *
 * requires: schedule.
 * guarantees: every value with a buffer of its own in the step's memory
 *   (memory.c: not params, state, in-place updates or outputs) carries
 *   live(B, E), the first and last schedule step its buffer is live, a
 *   buffer an in-place op reuses being one range for all its values; and
 *   every node whose kernel needs workspace carries its size. */
#include "passes.h"

int ps_liveness(ir_graph *g, ps_ctx *ctx)
{
	ps_memory m;
	ps_memory_compute(g, g->nodes, ctx->workspace, ctx->workspace_user, &m);
	for (int i = 0; i < g->n; i++) {
		ir_node *n = g->nodes[i];
		int b = m.buf_of[n->id];
		n->live_begin = b >= 0 ? m.begin[b] : -1;
		n->live_end = b >= 0 ? m.end[b] : -1;
		n->ws_bytes = m.ws[i];
		n->offset = n->ws_offset = -1;
	}
	ps_memory_free(&m);
	return 0;
}
