/* verify_plan.c: checks an arena plan (the annotations of the liveness and
 * plan passes) on its own terms: every value a node reads is live when it
 * runs, and no two buffers live at the same step overlap in the arena.
 * Values that share a buffer (an in-place op and its operand 0) have the
 * same offset and live range; that is the one overlap allowed. */
#include <stdint.h>
#include <stdlib.h>

#include "ir.h"

typedef struct {
	int begin, end;
	int64_t lo, hi;
	const ir_node *n;
	int at;   /* n's list position */
	int root; /* that of the value whose buffer this is (root_of) */
	bool ws;
} item;

/* Sweep order: by first step, then place; identical buffers end up next to
 * each other, in list order (qsort leaves equal items in any order), so the
 * first of a run is the root of every in-place chain in it. */
static int by_begin(const void *a, const void *b)
{
	const item *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin - y->begin;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	if (x->hi != y->hi)
		return x->hi < y->hi ? -1 : 1;
	if (x->end != y->end)
		return x->end - y->end;
	if (x->ws != y->ws)
		return x->ws - y->ws;
	return x->at - y->at;
}

static const item *end_items;
static int by_end_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	int ex = end_items[x].end, ey = end_items[y].end;
	return ex != ey ? ex - ey : x - y;
}

static bool same_buffer(const item *a, const item *b)
{
	return !a->ws && !b->ws && a->lo == b->lo && a->hi == b->hi && a->begin == b->begin && a->end == b->end;
}

/* The list position of the value whose buffer the node at t's is: its
 * chain of in-place ops followed through operand 0 while it stays the same
 * buffer (offset, size, live range), so t itself when it is not in place.
 * root[] holds the answers for the nodes before t. */
static int root_of(const ir_graph *g, int t, const int *root)
{
	const ir_node *n = g->nodes[t];
	if (!ir_op_has(n->op, IR_OPF_INPL) || n->nin == 0)
		return t;
	const ir_node *o = n->in[0];
	bool listed = o->id >= 0 && o->id < t && g->nodes[o->id] == o; /* ids: ir_verify renumbered */
	if (!listed || o->offset != n->offset || ir_type_bytes(&o->type) != ir_type_bytes(&n->type) ||
	    o->live_begin != n->live_begin || o->live_end != n->live_end)
		return t;
	return root[o->id];
}

/* ---- the live set: an interval treap ------------------------------------
 *
 * Items ordered by (lo, index), each subtree knowing the highest end (hi)
 * in it.  The lowest-placed item overlapping a query is then found in one
 * walk down the tree, however many items overlap each other already. */
typedef struct {
	const item *it;
	int *left, *right;
	unsigned *prio;
	int64_t *top; /* highest hi in the subtree */
} treap;

static bool key_less(const treap *t, int a, int b)
{
	return t->it[a].lo != t->it[b].lo ? t->it[a].lo < t->it[b].lo : a < b;
}

static int64_t top_of(const treap *t, int r)
{
	return r < 0 ? INT64_MIN : t->top[r];
}

static void update(treap *t, int r)
{
	int64_t m = t->it[r].hi, l = top_of(t, t->left[r]), g = top_of(t, t->right[r]);
	t->top[r] = m > l ? (m > g ? m : g) : (l > g ? l : g);
}

/* Splits tree r into items ordered before item k (*l) and the rest (*g). */
static void split(treap *t, int r, int k, int *l, int *g)
{
	if (r < 0) {
		*l = *g = -1;
	} else if (key_less(t, r, k)) {
		split(t, t->right[r], k, &t->right[r], g);
		*l = r;
		update(t, r);
	} else {
		split(t, t->left[r], k, l, &t->left[r]);
		*g = r;
		update(t, r);
	}
}

static int merge(treap *t, int a, int b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	if (t->prio[a] > t->prio[b]) {
		t->right[a] = merge(t, t->right[a], b);
		update(t, a);
		return a;
	}
	t->left[b] = merge(t, a, t->left[b]);
	update(t, b);
	return b;
}

static int treap_insert(treap *t, int root, int k)
{
	int l, g;
	t->left[k] = t->right[k] = -1;
	t->top[k] = t->it[k].hi;
	split(t, root, k, &l, &g);
	return merge(t, merge(t, l, k), g);
}

static int treap_remove(treap *t, int root, int k)
{
	if (root == k)
		return merge(t, t->left[k], t->right[k]);
	if (key_less(t, k, root))
		t->left[root] = treap_remove(t, t->left[root], k);
	else
		t->right[root] = treap_remove(t, t->right[root], k);
	update(t, root);
	return root;
}

/* The lowest-placed item of r overlapping [lo, hi), or -1.  Where the
 * left subtree reaches above lo and this node starts below hi, everything
 * in the left subtree starts below hi too, so an overlap is there. */
static int first_overlap(const treap *t, int r, int64_t lo, int64_t hi)
{
	while (r >= 0 && t->top[r] > lo) {
		const item *a = &t->it[r];
		if (a->lo >= hi) {
			r = t->left[r];
		} else if (top_of(t, t->left[r]) > lo) {
			r = t->left[r];
		} else if (a->hi > lo) {
			return r;
		} else {
			r = t->right[r];
		}
	}
	return -1;
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
	int *roots = malloc(((size_t)g->n + 1) * sizeof *roots);
	if (!it || !roots)
		IR_DIE("out of memory");
	int n = 0;
	for (int t = 0; t < g->n; t++) {
		const ir_node *v = g->nodes[t];
		roots[t] = root_of(g, t, roots);
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
			it[n++] = (item){v->live_begin, v->live_end, v->offset, v->offset + ir_type_bytes(&v->type), v, t,
				roots[t], false};
		}
		if (v->ws_offset >= 0)
			it[n++] = (item){t, t, v->ws_offset, v->ws_offset + v->ws_bytes, v, t, t, true};
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
	/* Sweep in step order; items leave the live set, in order of their
	 * ends, before the first item that begins after them.  Each item that
	 * overlaps one live before it is reported once, naming the lowest such;
	 * the values sharing one buffer in place (one root) are one item. */
	int *by_end = malloc(((size_t)n + 1) * sizeof *by_end);
	bool *in = calloc((size_t)n + 1, sizeof *in);
	treap t = {it, malloc(((size_t)n + 1) * sizeof(int)), malloc(((size_t)n + 1) * sizeof(int)),
		malloc(((size_t)n + 1) * sizeof(unsigned)), malloc(((size_t)n + 1) * sizeof(int64_t))};
	if (!by_end || !in || !t.left || !t.right || !t.prio || !t.top)
		IR_DIE("out of memory");
	for (int i = 0; i < n; i++) {
		by_end[i] = i;
		t.prio[i] = (unsigned)i * 2654435761u; /* a fixed shuffle: deterministic */
	}
	end_items = it;
	qsort(by_end, (size_t)n, sizeof *by_end, by_end_cmp);
	end_items = NULL;
	int root = -1, gone = 0, first = -1; /* first: where a run of one buffer's items began */
	for (int i = 0; i < n; i++) {
		while (gone < n && it[by_end[gone]].end < it[i].begin) {
			if (in[by_end[gone]])
				root = treap_remove(&t, root, by_end[gone]);
			gone++;
		}
		if (it[i].hi <= it[i].lo)
			continue; /* empty: overlaps nothing */
		const item *a = NULL;
		if (first >= 0 && same_buffer(&it[first], &it[i])) {
			if (it[i].root == it[first].root)
				continue; /* the same buffer, already live */
			if (it[i].root != it[i].at)
				continue; /* in place of another buffer of the run: reported there */
			a = &it[first];
		} else {
			first = it[i].ws ? -1 : i;
			int o = first_overlap(&t, root, it[i].lo, it[i].hi);
			a = o >= 0 ? &it[o] : NULL;
			root = treap_insert(&t, root, i);
			in[i] = true;
		}
		if (a) {
			report(d, it[i].n, "%s [%lld, %lld) overlaps %s of %s [%lld, %lld) while both are live",
				it[i].ws ? "workspace" : "buffer", (long long)it[i].lo, (long long)it[i].hi,
				a->ws ? "the workspace" : "the buffer", ir_node_ref(a->n, r1, sizeof r1),
				(long long)a->lo, (long long)a->hi);
			errors++;
		}
	}
	free(by_end);
	free(in);
	free(t.top);
	free(t.left);
	free(t.right);
	free(t.prio);
	free(it);
	free(roots);
	return errors == 0;
}
