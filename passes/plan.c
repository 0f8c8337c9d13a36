/* plan.c: every buffer and workspace gets an offset in one arena.
 *
 * requires: liveness.
 * guarantees: mem(OFFSET, SIZE) on every value with live(B, E), ws(OFFSET,
 *   SIZE) on every node with workspace; no two buffers live at the same
 *   step overlap (checked before the pass returns); offsets are multiples
 *   of PS_ALIGN; the arena is at most IR_MAX_BYTES (a larger plan, or a
 *   workspace beyond it, is an error, not an abort, and sets
 *   ctx->too_large: strategy auto's candidates that need it do not fit).
 *
 * Greedy by size, best fit (TensorFlow Lite's arena planner): buffers from
 * the largest down; each goes into the smallest gap, among the buffers
 * already placed that are live at the same time, that holds it, or above
 * them all.  In-place reuse was decided by the memory model: values sharing
 * a buffer share its offset. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct {
	int64_t bytes, offset;
	int begin, end;
	int index;
} slot;

static int64_t aligned(int64_t n)
{
	return (n + PS_ALIGN - 1) / PS_ALIGN * PS_ALIGN;
}

static int by_size(const void *a, const void *b)
{
	const slot *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->begin != y->begin)
		return x->begin - y->begin;
	return x->index - y->index;
}

/* Places s[0..n) (sorted by size) and returns the arena size.  The buffers
 * placed so far are kept in offset order, so each new one walks them once
 * and skips those not live with it: O(n^2) in all, no sorting per buffer. */
static int64_t place(slot *s, int n)
{
	slot **placed = malloc(((size_t)n + 1) * sizeof *placed);
	if (!placed)
		IR_DIE("out of memory");
	int64_t arena = 0;
	for (int i = 0; i < n; i++) {
		int64_t need = aligned(s[i].bytes), at = 0, best = -1, best_gap = 0;
		for (int j = 0; j < i; j++) {
			const slot *p = placed[j];
			if (p->begin > s[i].end || s[i].begin > p->end)
				continue;
			int64_t gap = p->offset - at;
			if (gap >= need && (best < 0 || gap < best_gap)) {
				best = at;
				best_gap = gap;
			}
			int64_t top = p->offset + aligned(p->bytes);
			if (top > at)
				at = top;
		}
		s[i].offset = best >= 0 ? best : at;
		if (s[i].offset + need > arena)
			arena = s[i].offset + need;
		/* Insert after every buffer at an offset no higher. */
		int lo = 0, hi = i;
		while (lo < hi) {
			int mid = (lo + hi) / 2;
			if (placed[mid]->offset <= s[i].offset)
				lo = mid + 1;
			else
				hi = mid;
		}
		memmove(placed + lo + 1, placed + lo, (size_t)(i - lo) * sizeof *placed);
		placed[lo] = &s[i];
	}
	free(placed);
	return arena;
}

/* Reports the first workspace beyond IR_MAX_BYTES (a backend saturates an
 * absurd one there); false then. */
static bool workspace_ok(const ps_memory *m, const ir_graph *g, ps_ctx *ctx)
{
	for (int t = 0; t < m->steps; t++)
		if (m->ws[t] < 0 || m->ws[t] > IR_MAX_BYTES) {
			char ref[80];
			const ir_node *v = g->nodes[t];
			ir_diag_add(&ctx->diags, v->pos, "plan: %s (%s) needs a workspace larger than 2^40 bytes",
				ir_node_ref(v, ref, sizeof ref), ir_op_name(v->op));
			return false;
		}
	return true;
}

int ps_plan(ir_graph *g, ps_ctx *ctx)
{
	ps_memory m;
	ps_memory_compute(g, g->nodes, ctx->workspace, ctx->workspace_user, &m);
	if (!workspace_ok(&m, g, ctx)) {
		ctx->too_large = true;
		ps_memory_free(&m);
		return 1;
	}
	int n = 0;
	slot *s = malloc(((size_t)m.nbuf + g->n + 1) * sizeof *s);
	if (!s)
		IR_DIE("out of memory");
	for (int b = 0; b < m.nbuf; b++)
		s[n++] = (slot){m.bytes[b], 0, m.begin[b], m.end[b], b};
	for (int t = 0; t < g->n; t++)
		if (m.ws[t] > 0)
			s[n++] = (slot){m.ws[t], 0, t, t, m.nbuf + t};
	qsort(s, (size_t)n, sizeof *s, by_size);
	int64_t arena = place(s, n);
	if (arena > IR_MAX_BYTES) {
		ir_diag_add(&ctx->diags, (ir_pos){0},
			"plan: the arena of @%s would need %lld bytes, more than 2^40 (the largest buffer is %lld)",
			g->name, (long long)arena, (long long)(n > 0 ? s[0].bytes : 0));
		ctx->too_large = true;
		free(s);
		ps_memory_free(&m);
		return 1;
	}
	/* Back to the nodes. */
	int64_t *offset = malloc(((size_t)m.nbuf + g->n + 1) * sizeof *offset);
	if (!offset)
		IR_DIE("out of memory");
	for (int i = 0; i < n; i++)
		offset[s[i].index] = s[i].offset;
	for (int t = 0; t < g->n; t++) {
		ir_node *v = g->nodes[t];
		int b = m.buf_of[v->id];
		v->offset = b >= 0 ? offset[b] : -1;
		v->ws_bytes = m.ws[t];
		v->ws_offset = m.ws[t] > 0 ? offset[m.nbuf + t] : -1;
	}
	free(offset);
	free(s);
	ps_memory_free(&m);
	if (!ir_verify_plan(g, &ctx->diags))
		IR_DIE("the arena plan of @%s overlaps live buffers", g->name);
	return 0;
}

int64_t ps_arena_bytes(const ir_graph *g)
{
	int64_t top = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *v = g->nodes[i];
		if (v->offset >= 0 && v->offset + aligned(ir_type_bytes(&v->type)) > top)
			top = v->offset + aligned(ir_type_bytes(&v->type));
		if (v->ws_offset >= 0 && v->ws_offset + aligned(v->ws_bytes) > top)
			top = v->ws_offset + aligned(v->ws_bytes);
	}
	return top;
}
