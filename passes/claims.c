/* claims.c: what a graph's passes(...) list promises, checked.
 *
 * A graph read from a file says which passes it has been through, and the
 * manager skips those and runs later passes on the strength of it.  So the
 * list is input like the rest of the file: every claim a later pass (or
 * the runtime) relies on is checked here against the graph, and one that
 * does not hold is an error at the pass's place in the list or at the first
 * node that contradicts it.
 *
 * requires: a verified graph (ir_verify: types agree with the shape rules,
 *   the list is an execution order honouring every ordering edge, fusion
 *   groups are loops codegen can compute, a plan's buffers do not overlap
 *   while live).  So `shape`, `schedule` and `fuse` need nothing more.
 * checks:
 *   - every listed name is a pass of the pipeline, and the pass each one
 *     requires is listed too;
 *   - autodiff: an output named "loss", and a gradient for every param (a
 *     "grad:NAME" output, or the sgd step that consumed it);
 *   - dce: no node DCE would remove;
 *   - liveness: every value's live(...) is exactly the range the memory
 *     model gives it over the list order, and values without a buffer of
 *     their own have none;
 *   - plan: mem(...) on every value with a buffer of their own, one
 *     offset per buffer (values sharing one in place share it), offsets of
 *     buffers and workspaces multiples of PS_ALIGN, the arena at most 2^40
 *     bytes.
 * revbwd, checkpoint and optim promise nothing a later pass relies on:
 * what they leave is ordinary IR, verified as any. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct {
	ir_graph *g;
	ir_diags *d;
	bool ok;
} claims;

/* One diagnostic at node n: "%3 (relu): passes(...) lists 'pass', but ...". */
static void refute(claims *c, const ir_node *n, const char *pass, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void refute(claims *c, const ir_node *n, const char *pass, const char *fmt, ...)
{
	char msg[512], ref[80];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n)
		ir_diag_add(c->d, n->pos, "%s (%s): passes(...) lists '%s', but %s", ir_node_ref(n, ref, sizeof ref),
			ir_op_name(n->op), pass, msg);
	else
		ir_diag_add(c->d, ir_graph_pass_pos(c->g, pass), "passes(...) lists '%s', but %s", pass, msg);
	c->ok = false;
}

static bool header(claims *c)
{
	const ir_graph *g = c->g;
	for (int i = 0; i < g->npasses; i++) {
		const ps_pass *p = ps_pass_lookup(g->passes[i]);
		ir_pos at = g->pass_pos[i];
		if (!p) {
			ir_diag_add(c->d, at, "passes(...) lists '%s', which is not a pass (revc dump --print-passes)",
				g->passes[i]);
			c->ok = false;
		} else if (p->requires && !ir_graph_has_pass(g, p->requires)) {
			ir_diag_add(c->d, at, "passes(...) lists '%s' but not '%s', which it requires", p->name,
				p->requires);
			c->ok = false;
		}
	}
	return c->ok;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* autodiff: the loss, and every param's gradient as an output or consumed
 * by its sgd (or adamw) step. */
static void check_autodiff(claims *c)
{
	const ir_graph *g = c->g;
	const char **have = malloc(((size_t)g->n + 1) * sizeof *have);
	if (!have)
		IR_DIE("out of memory");
	int n = 0;
	bool loss = false;
	for (int i = 0; i < g->n; i++) {
		const ir_node *v = g->nodes[i];
		if (v->op == IR_OP_OUTPUT) {
			loss = loss || strcmp(ir_node_str(v, IR_ATTR_NAME), "loss") == 0;
			if (ps_grad_param_name(v))
				have[n++] = ps_grad_param_name(v);
		} else if ((v->op == IR_OP_SGD || v->op == IR_OP_ADAMW) && v->in[0]->name) {
			have[n++] = v->in[0]->name;
		}
	}
	qsort(have, (size_t)n, sizeof *have, by_name);
	if (!loss)
		refute(c, NULL, "autodiff", "the graph has no output named \"loss\"");
	char want[512];
	for (int i = 0; i < g->n && c->ok; i++) {
		const ir_node *p = g->nodes[i];
		if (p->op == IR_OP_PARAM && !bsearch(&p->name, have, (size_t)n, sizeof *have, by_name))
			refute(c, p, "autodiff", "it has no gradient (no output \"%s\", no sgd or adamw step)",
				ps_grad_output_name(want, sizeof want, p->name));
	}
	free(have);
}

static void check_dce(claims *c)
{
	int i = ps_dce_first_dead(c->g);
	if (i >= 0)
		refute(c, c->g->nodes[i], "dce", "it is dead: no output, update or ordering edge needs it");
}

static void check_liveness(claims *c, const ps_memory *m)
{
	const ir_graph *g = c->g;
	for (int i = 0; i < g->n; i++) {
		const ir_node *v = g->nodes[i];
		int b = m->buf_of[v->id];
		if (b < 0 && v->live_begin >= 0) {
			refute(c, v, "liveness", "it has live(%d, %d) and no buffer of its own", v->live_begin,
				v->live_end);
			return;
		}
		if (b >= 0 && v->live_begin < 0) {
			refute(c, v, "liveness", "it has no live(...): the schedule gives live(%d, %d)", m->begin[b],
				m->end[b]);
			return;
		}
		if (b >= 0 && (v->live_begin != m->begin[b] || v->live_end != m->end[b])) {
			refute(c, v, "liveness", "it has live(%d, %d): the schedule gives live(%d, %d)", v->live_begin,
				v->live_end, m->begin[b], m->end[b]);
			return;
		}
	}
}

static void check_plan(claims *c, const ps_memory *m)
{
	const ir_graph *g = c->g;
	char ref[80];
	for (int i = 0; i < g->n; i++) {
		const ir_node *v = g->nodes[i];
		int b = m->buf_of[v->id];
		const ir_node *first = b >= 0 ? m->first[b] : NULL;
		/* A value with mem(...) but no buffer has no live(...) either
		 * (liveness, checked first), which ir_verify_plan rejects. */
		if (b >= 0 && v->offset < 0)
			refute(c, v, "plan", "it has no mem(...)");
		else if (v->offset > 0 && v->offset % PS_ALIGN)
			refute(c, v, "plan", "its mem offset %lld is not a multiple of %d", (long long)v->offset, PS_ALIGN);
		else if (v->ws_offset > 0 && v->ws_offset % PS_ALIGN)
			refute(c, v, "plan", "its ws offset %lld is not a multiple of %d", (long long)v->ws_offset,
				PS_ALIGN);
		else if (first && first != v && v->offset != first->offset)
			refute(c, v, "plan", "it shares %s's buffer in place, at mem(%lld, ...), not %s's %lld",
				ir_node_ref(first, ref, sizeof ref), (long long)v->offset, ref, (long long)first->offset);
		if (!c->ok)
			return;
	}
	int64_t arena = ps_arena_bytes(g);
	if (arena > IR_MAX_BYTES)
		refute(c, NULL, "plan", "its arena would need %lld bytes, more than 2^40", (long long)arena);
}

bool ps_claims_check(ir_graph *g, ir_diags *d)
{
	claims c = {g, d, true};
	if (g->npasses == 0 || !header(&c))
		return c.ok;
	if (ir_graph_has_pass(g, "autodiff"))
		check_autodiff(&c);
	if (c.ok && ir_graph_has_pass(g, "dce"))
		check_dce(&c);
	if (c.ok && (ir_graph_has_pass(g, "liveness") || ir_graph_has_pass(g, "plan"))) {
		ps_memory m;
		ps_memory_compute(g, g->nodes, NULL, NULL, &m);
		if (ir_graph_has_pass(g, "liveness"))
			check_liveness(&c, &m);
		if (c.ok && ir_graph_has_pass(g, "plan"))
			check_plan(&c, &m);
		ps_memory_free(&m);
	}
	return c.ok;
}
