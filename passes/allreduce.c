/* allreduce.c: data parallelism inside the step: what K processes, each
 * given its own slice of a global batch of K·b examples, must sum so that
 * their step is the step of one process at batch K·b (docs/distributed.md).
 *
 * requires: autodiff.
 * guarantees (when ctx->ranks is K >= 1; with 0 the pass does not apply,
 *   and is not recorded on the graph):
 *   - batch norm is synchronised: each forward bn_stats s is followed by
 *         h = bn_share(s); r = allreduce(h) {factor=1/K}; t = bn_merge(r)
 *     (marked as s, so revbwd and checkpoint recompute them with it: every
 *     recomputation reduces again) and everything that read s reads t; the
 *     running variance's unbiased count becomes K times the rank's;
 *   - the backward's batch sums are reduced: bn_dx's dgamma and dbeta are
 *     allreduce {factor=1/K} of themselves, and so is every value that
 *     read them (the gamma and beta gradients among them);
 *   - every other "grad:NAME" output reads the sum over the ranks of its
 *     gradient g, times 1/K: the sum of each rank's gradient of its mean
 *     loss over b examples, divided by K, is the gradient of the mean loss
 *     over the K·b examples: w = allreduce(g) {factor=1/K}, one blocking
 *     sum right after g.  With ctx->allreduce_overlap the sum is started
 *     as soon as g is final and waited for after the backward pass:
 *         s = allreduce_start(g)            right after g, marked as g
 *         w = allreduce_wait(s) {factor=1/K}  in no unit
 *     Marked as g, s is one of the gradient nodes of its unit's part that
 *     the reconstruction of the unit's input runs after (edges.c), so the
 *     backward pass goes on to the unit before only once the sum is under
 *     way; ordering edges make the first wait run after every start and
 *     each wait after the one before, so the waits come after the whole
 *     backward pass, in the order of the gradient outputs.
 *   - gradients are summed in buckets (ctx->bucket_bytes; 0: one tensor
 *     a sum): the gradient outputs in the order autodiff made their
 *     gradients (the order they become final), consecutive ones together
 *     up to bucket_bytes (and 64 tensors); a bucket of several is
 *         p = bucket_pack(g1, ..., gn)   after the last of them, marked as it
 *         w = allreduce(p) (or the start/wait pair of p)
 *         grad:NAMEi reads bucket_unpack(w) {lo, hi}
 *     A pack and not the gradients planned contiguous: the planner places
 *     each value on its own, and the copies are cheap next to the sum
 *     (the bucket's buffer is an ordinary value, which revc mem counts).
 *   The factor is left out when K is 1, so the step of one process is the
 *   step without the pass, to the bit (kern_comm.c says why bn_merge is
 *   exact there).  Collectives run in schedule order, which is the same on
 *   every rank: the ranks compile the same graph. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct {
	ir_graph *g;
	int n0;           /* nodes before the pass */
	ir_node **repl;   /* by original id: what its readers read instead */
	ir_node **follow; /* by new node (id - n0): the node it goes after */
	int nnew, capnew;
	int ranks;
} syncer;

/* A new node of operands in[0..nin) after `at` (an original node or one
 * made after it), marked like it. */
static ir_node *after_n(syncer *S, ir_op op, ir_node *const *in, int nin, const ir_node *at)
{
	ir_node *n = ir_node_new(S->g, op, in, nin);
	n->role = at->role;
	n->scope = at->scope;
	ir_node_set_unit(n, at->unit, at->part);
	n->pos = at->pos;
	n->pos_printed = at->pos_printed;
	while (at->id >= S->n0)
		at = S->follow[at->id - S->n0];
	if (S->nnew == S->capnew) {
		S->capnew = S->capnew ? 2 * S->capnew : 64;
		S->follow = realloc(S->follow, (size_t)S->capnew * sizeof *S->follow);
		if (!S->follow)
			IR_DIE("out of memory");
	}
	n->id = S->n0 + S->nnew;
	S->follow[S->nnew++] = (ir_node *)at;
	return n;
}

static ir_node *after(syncer *S, ir_op op, ir_node *in, const ir_node *at)
{
	return after_n(S, op, &in, 1, at);
}

static ir_node *reduce(syncer *S, ir_node *x, const ir_node *at)
{
	ir_node *r = after(S, IR_OP_ALLREDUCE, x, at);
	if (S->ranks > 1)
		ir_node_set_float(S->g, r, IR_ATTR_FACTOR, 1.0 / S->ranks);
	r->type = x->type;
	return r;
}

static void sync_stats(syncer *S, ir_node *s)
{
	ir_node *h = after(S, IR_OP_BN_SHARE, s, s);
	int64_t dims[2] = {3, s->type.dim[1]};
	h->type = ir_type_make(s->type.dtype, 2, dims);
	ir_node *t = after(S, IR_OP_BN_MERGE, reduce(S, h, h), h);
	t->type = s->type;
	S->repl[s->id] = t;
}

static void sync_sum(syncer *S, ir_node *x)
{
	if (x->id < S->n0 && !S->repl[x->id])
		S->repl[x->id] = reduce(S, x, x);
}

/* Whether v is the same on every rank already: a reduction, or a sum of
 * such (a parameter's gradient from several synchronised batch norms). */
static bool reduced(const ir_node *v)
{
	return v->op == IR_OP_ALLREDUCE || v->op == IR_OP_ALLREDUCE_WAIT;
}

static bool global(const ir_node *v, int depth)
{
	if (reduced(v))
		return true;
	return v->op == IR_OP_ADD && depth < 64 && global(v->in[0], depth + 1) && global(v->in[1], depth + 1);
}

static bool touches_global(const ir_node *v, int depth)
{
	if (reduced(v))
		return true;
	return v->op == IR_OP_ADD && depth < 64 &&
	       (touches_global(v->in[0], depth + 1) || touches_global(v->in[1], depth + 1));
}

static bool is_grad(const ir_node *n)
{
	const ir_attr *a = n->op == IR_OP_OUTPUT ? ir_node_attr(n, IR_ATTR_NAME) : NULL;
	return a && strncmp(a->u.s, "grad:", 5) == 0;
}

/* The node list with every new node right after the node it follows. */
static void place(syncer *S)
{
	ir_graph *g = S->g;
	int *count = calloc((size_t)S->n0 + 1, sizeof *count);
	ir_node **order = malloc((size_t)g->n * sizeof *order);
	if (!count || !order)
		IR_DIE("out of memory");
	for (int j = 0; j < S->nnew; j++)
		count[S->follow[j]->id + 1]++;
	for (int i = 0; i < S->n0; i++)
		count[i + 1] += count[i] + 1;
	/* count[i]: where original node i goes; its followers come after it */
	int *next = malloc((size_t)S->n0 * sizeof *next);
	if (!next)
		IR_DIE("out of memory");
	for (int i = 0; i < S->n0; i++) {
		order[count[i]] = g->nodes[i];
		next[i] = count[i] + 1;
	}
	for (int j = 0; j < S->nnew; j++)
		order[next[S->follow[j]->id]++] = g->nodes[S->n0 + j];
	ir_graph_reorder(g, order);
	free(next);
	free(order);
	free(count);
}

/* Gradient outputs by their gradient's place in the graph. */
static int by_gradient(const void *pa, const void *pb)
{
	const ir_node *a = (*(ir_node *const *)pa)->in[0], *b = (*(ir_node *const *)pb)->in[0];
	return a->id < b->id ? -1 : a->id > b->id;
}

/* How many of the gradient outputs o[0..n) go in the bucket of o[0]:
 * consecutive, together at most `bytes` (at least one; at most the
 * operands bucket_pack takes; bytes 0: one). */
static int bucket_at(ir_node *const *o, int n, int64_t bytes)
{
	int64_t total = ir_type_bytes(&o[0]->in[0]->type);
	int k = 1;
	while (k < n && k < ir_op_get(IR_OP_BUCKET_PACK)->max_arity &&
	       total + ir_type_bytes(&o[k]->in[0]->type) <= bytes) {
		total += ir_type_bytes(&o[k]->in[0]->type);
		k++;
	}
	return k;
}

typedef struct {
	ir_node **starts, **waits; /* of the start/wait pairs, in order */
	int n;
} sums;

/* The sum over the ranks of x, times 1/K, right after x: blocking, or a
 * start/wait pair (recorded in Q) with overlap. */
static ir_node *sum_of(syncer *S, sums *Q, ir_node *x, bool overlap)
{
	if (!overlap)
		return reduce(S, x, x);
	ir_node *st = after(S, IR_OP_ALLREDUCE_START, x, x);
	st->type = x->type;
	ir_node *w = after(S, IR_OP_ALLREDUCE_WAIT, st, st);
	ir_node_set_unit(w, -1, IR_PART_NONE);
	w->type = st->type;
	if (S->ranks > 1)
		ir_node_set_float(S->g, w, IR_ATTR_FACTOR, 1.0 / S->ranks);
	Q->starts[Q->n] = st;
	Q->waits[Q->n++] = w;
	return w;
}

/* The gradient outputs o[0..n) read the sums of their gradients: one
 * tensor summed alone, more packed into one vector after the last of them
 * (the one autodiff made last), summed, and unpacked after the sum. */
static void sum_bucket(syncer *S, sums *Q, ir_node *const *o, int n, bool overlap)
{
	if (n == 1) {
		o[0]->in[0] = sum_of(S, Q, o[0]->in[0], overlap);
		return;
	}
	ir_node *in[64];
	IR_ASSERT(n <= (int)(sizeof in / sizeof *in));
	for (int i = 0; i < n; i++)
		in[i] = o[i]->in[0];
	ir_node *p = after_n(S, IR_OP_BUCKET_PACK, in, n, in[n - 1]);
	int64_t total = 0;
	for (int i = 0; i < n; i++)
		total += ir_type_elems(&in[i]->type);
	p->type = ir_type_make(in[0]->type.dtype, 1, &total);
	ir_node *r = sum_of(S, Q, p, overlap);
	int64_t lo = 0;
	for (int i = 0; i < n; i++) {
		ir_node *u = after(S, IR_OP_BUCKET_UNPACK, r, r);
		int64_t hi = lo + ir_type_elems(&in[i]->type);
		ir_node_set_int(S->g, u, IR_ATTR_LO, lo);
		ir_node_set_int(S->g, u, IR_ATTR_HI, hi);
		u->type = in[i]->type;
		o[i]->in[0] = u;
		lo = hi;
	}
}

bool ps_allreduce_applies(const ps_ctx *ctx)
{
	return ctx->ranks >= 1;
}

int ps_allreduce(ir_graph *g, ps_ctx *ctx)
{
	if (ctx->ranks < 1)
		return PS_NOT_APPLIED;
	ir_graph_renumber(g);
	syncer S = {.g = g, .n0 = g->n, .ranks = ctx->ranks};
	S.repl = calloc((size_t)g->n, sizeof *S.repl);
	if (!S.repl)
		IR_DIE("out of memory");
	for (int i = 0; i < S.n0; i++) {
		ir_node *n = g->nodes[i];
		if (n->op == IR_OP_BN_STATS && n->role == IR_ROLE_FWD)
			sync_stats(&S, n);
		else if (n->op == IR_OP_BN_RUNNING_VAR)
			ir_node_set_int(g, n, IR_ATTR_NCOUNT, ir_node_int(n, IR_ATTR_NCOUNT) * ctx->ranks);
		else if (n->op == IR_OP_BN_DX) {
			sync_sum(&S, n->in[4]);
			sync_sum(&S, n->in[5]);
		}
	}
	for (int i = 0; i < S.n0; i++)
		for (int k = 0; k < g->nodes[i]->nin; k++) {
			ir_node *v = g->nodes[i]->in[k];
			if (v->id < S.n0 && S.repl[v->id])
				g->nodes[i]->in[k] = S.repl[v->id];
		}
	int rc = 0, ngrads = 0;
	ir_node **outs = malloc(((size_t)S.n0 + 1) * sizeof *outs);
	if (!outs)
		IR_DIE("out of memory");
	for (int i = 0; i < S.n0; i++) {
		ir_node *o = g->nodes[i];
		if (!is_grad(o) || global(o->in[0], 0))
			continue;
		if (touches_global(o->in[0], 0)) {
			ir_diag_node(&ctx->diags, o, "allreduce: gradient %s adds a batch-norm sum to other terms",
				ir_node_str(o, IR_ATTR_NAME));
			rc = 1;
			break;
		}
		outs[ngrads++] = o;
	}
	/* in the order the gradients become final: autodiff's */
	qsort(outs, (size_t)ngrads, sizeof *outs, by_gradient);
	sums Q = {.starts = malloc(((size_t)ngrads + 1) * sizeof *Q.starts),
		.waits = malloc(((size_t)ngrads + 1) * sizeof *Q.waits)};
	if (!Q.starts || !Q.waits)
		IR_DIE("out of memory");
	for (int i = 0, n; rc == 0 && i < ngrads; i += n) {
		n = bucket_at(outs + i, ngrads - i, ctx->bucket_bytes);
		sum_bucket(&S, &Q, outs + i, n, ctx->allreduce_overlap);
	}
	free(outs);
	ir_node **starts = Q.starts, **waits = Q.waits;
	int nstarts = Q.n;
	/* the first wait after every start, each after the one before */
	for (int j = 0; j < nstarts; j++)
		ir_node_add_after(g, waits[0], starts[j]);
	for (int j = 1; j < nstarts; j++)
		ir_node_add_after(g, waits[j], waits[j - 1]);
	free(starts);
	free(waits);
	place(&S);
	free(S.follow);
	free(S.repl);
	return rc;
}
