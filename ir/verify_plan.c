/* verify_plan.c: checks an arena plan (the annotations of the liveness and
 * plan passes) on its own terms: every value a node reads is live when it
 * runs, and no two buffers live at the same step overlap in the arena.
 * Values that share a buffer (an in-place op and its operand 0) have the
 * same offset and live range; that is the one overlap allowed. */
#include <stdlib.h>

#include "ir.h"

typedef struct {
	int begin, end;
	int64_t lo, hi;
	const ir_node *n;
	bool ws;
} item;

static int by_begin(const void *a, const void *b)
{
	const item *x = a, *y = b;
	return x->begin != y->begin ? x->begin - y->begin : (x->lo < y->lo ? -1 : x->lo > y->lo);
}

static bool same_buffer(const item *a, const item *b)
{
	return a->lo == b->lo && a->begin == b->begin && a->end == b->end;
}

/* a and b share a buffer legitimately: one is an in-place op whose
 * operand 0 is in that same buffer. */
static bool alias(const item *a, const item *b)
{
	if (a->ws || b->ws || !same_buffer(a, b))
		return false;
	for (int k = 0; k < 2; k++) {
		const ir_node *x = k ? b->n : a->n;
		if (ir_op_has(x->op, IR_OPF_INPL) && x->nin > 0) {
			const ir_node *o = x->in[0];
			if (o->offset == a->lo && o->live_begin == a->begin && o->live_end == a->end)
				return true;
		}
	}
	return false;
}

static void report(ir_diags *d, const ir_node *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void report(ir_diags *d, const ir_node *n, const char *fmt, ...)
{
	char msg[512], ref[80];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ir_diag_add(d, n->pos, "%s (%s): %s", ir_node_ref(n, ref, sizeof ref), ir_op_name(n->op), msg);
}

bool ir_verify_plan(const ir_graph *g, ir_diags *d)
{
	int errors = 0;
	char r1[80];
	item *it = malloc(((size_t)2 * g->n + 1) * sizeof *it);
	if (!it)
		IR_DIE("out of memory");
	int n = 0;
	for (int t = 0; t < g->n; t++) {
		const ir_node *v = g->nodes[t];
		if (v->offset >= 0) {
			if (v->live_begin < 0) {
				report(d, v, "has an arena offset but no live range");
				errors++;
				continue;
			}
			if (v->live_begin > t || v->live_end < t) {
				report(d, v, "live(%d, %d) does not cover its own step %d", v->live_begin,
					v->live_end, t);
				errors++;
			}
			it[n++] = (item){v->live_begin, v->live_end, v->offset, v->offset + ir_type_bytes(&v->type), v, false};
		}
		if (v->ws_offset >= 0)
			it[n++] = (item){t, t, v->ws_offset, v->ws_offset + v->ws_bytes, v, true};
		for (int k = 0; k < v->nin; k++) {
			const ir_node *o = v->in[k];
			int need = v->op == IR_OP_OUTPUT ? g->n - 1 : t;
			if (o->offset >= 0 && o->live_end < need) {
				report(d, v, "reads %s at step %d, after its live range ends at %d",
					ir_node_ref(o, r1, sizeof r1), need, o->live_end);
				errors++;
			}
		}
	}
	qsort(it, (size_t)n, sizeof *it, by_begin);
	/* Sweep: items still live when the next one begins. */
	item **active = malloc(((size_t)n + 1) * sizeof *active);
	if (!active)
		IR_DIE("out of memory");
	int na = 0;
	for (int i = 0; i < n && errors < 20; i++) {
		int m = 0;
		for (int j = 0; j < na; j++)
			if (active[j]->end >= it[i].begin)
				active[m++] = active[j];
		na = m;
		for (int j = 0; j < na; j++) {
			const item *a = active[j];
			if (a->lo < it[i].hi && it[i].lo < a->hi && !alias(a, &it[i])) {
				report(d, it[i].n, "%s [%lld, %lld) overlaps %s of %s [%lld, %lld) while both are live",
					it[i].ws ? "workspace" : "buffer", (long long)it[i].lo, (long long)it[i].hi,
					a->ws ? "the workspace" : "the buffer", ir_node_ref(a->n, r1, sizeof r1),
					(long long)a->lo, (long long)a->hi);
				errors++;
			}
		}
		active[na++] = &it[i];
	}
	free(active);
	free(it);
	return errors == 0;
}
