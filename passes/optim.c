/* optim.c: the optimiser step, momentum SGD as in TensorFlow's
 * MomentumOptimizer or AdamW as in PyTorch's (docs/model.md).
 *
 * requires: autodiff.
 * guarantees (when ctx->optimizer is set; otherwise the pass changes
 *   nothing and the gradients stay outputs): each "grad:NAME" output is
 *   replaced by
 *       v = momentum($NAME.mom, g [, $NAME]) {momentum, wd}    v in place
 *       w = sgd($NAME, v, lr)                                  w in place
 *   with role opt, where $NAME.mom is a new zero-initialised state and lr a
 *   new scalar input named "lr".  With ctx->adamw instead
 *       t  = adam_count($adamw.t)                 once, t in place
 *       c1 = adam_bias(t) {beta=beta1}            once: 1 - beta1^t
 *       c2 = adam_bias(t) {beta=beta2}            once: 1 - beta2^t
 *       m  = adam_m($NAME.m, g) {beta=beta1}      m in place, after c1, c2
 *       v  = adam_v($NAME.v, g) {beta=beta2}      v in place, after c1, c2
 *       w  = adamw($NAME, m, v, lr, c1, c2) {eps [, wd]}   w in place
 *   with new zero-initialised states $NAME.m, $NAME.v and the scalar step
 *   count $adamw.t (steps taken), so the bias corrections are computed once
 *   a step, not per element.  Weight decay applies to conv filters and
 *   dense weights (parameters used as operand 1 of conv2d or matmul) only;
 *   for AdamW it is decoupled (wd * the weight before the step).  Each sgd
 *   or adamw has ordering edges to every other reader of its parameter, so
 *   the in-place update can never overtake a use of the old value. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* Is p a conv filter or dense weight: operand 1 of a forward conv2d or
 * matmul?  u indexes readers by the ids the pass started with (`start_id`). */
static bool is_weight(const ir_users *u, const ir_node *p)
{
	for (int k = u->start[p->start_id]; k < u->start[p->start_id + 1]; k++) {
		const ir_node *n = u->user[k];
		if ((n->op == IR_OP_CONV2D || n->op == IR_OP_MATMUL) && n->role == IR_ROLE_FWD &&
		    n->nin > 1 && n->in[1] == p)
			return true;
	}
	return false;
}

static ir_node *opt_node(ir_graph *g, ir_op op, ir_node *const *in, int nin, const ir_node *like)
{
	ir_node *n = ir_node_new(g, op, in, nin);
	n->role = IR_ROLE_OPT;
	n->scope = like->scope;
	ir_node_set_unit(n, like->unit, like->part);
	n->pos = like->pos;
	n->pos_printed = like->pos_printed;
	return n;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(ir_node *const *)a)->name, (*(ir_node *const *)b)->name);
}

/* The param or state named `name` among the n name-sorted nodes, or NULL. */
static ir_node *find_named(ir_node **sorted, int n, const char *name)
{
	int lo = 0, hi = n;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2, c = strcmp(sorted[mid]->name, name);
		if (c == 0)
			return sorted[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static ir_node *new_state(ir_graph *g, const char *name, ir_type type, const ir_node *like)
{
	ir_node *v = ir_node_new(g, IR_OP_STATE, NULL, 0);
	v->name = ir_arena_strdup(g->arena, name);
	v->type = type;
	v->scope = like->scope;
	ir_node_set_unit(v, like->unit, like->part);
	v->pos = like->pos;
	v->pos_printed = like->pos_printed;
	return v;
}

/* AdamW's per-step scalars: the step count and its two bias corrections. */
typedef struct {
	ir_node *t, *c1, *c2;
} adam_step;

static void adam_step_new(ir_graph *g, ps_ctx *ctx, const ir_node *like, adam_step *s)
{
	s->t = new_state(g, "adamw.t", ir_type_scalar(like->type.dtype), like);
	s->t->scope = NULL; /* of the whole model, not of the first parameter */
	ir_node_set_unit(s->t, -1, IR_PART_NONE);
	ir_node *t = opt_node(g, IR_OP_ADAM_COUNT, &s->t, 1, s->t);
	t->type = s->t->type;
	s->c1 = opt_node(g, IR_OP_ADAM_BIAS, &t, 1, t);
	ir_node_set_float(g, s->c1, IR_ATTR_BETA, ctx->beta1);
	s->c1->type = t->type;
	s->c2 = opt_node(g, IR_OP_ADAM_BIAS, &t, 1, t);
	ir_node_set_float(g, s->c2, IR_ATTR_BETA, ctx->beta2);
	s->c2->type = t->type;
}

/* The AdamW update of p from its gradient out->in[0]; m and v its new
 * states.  Returns the weight update. */
static ir_node *adamw_update(ir_graph *g, ps_ctx *ctx, ir_node *p, ir_node *m, ir_node *v, ir_node *out,
	ir_node *lr, const adam_step *s, bool wd)
{
	ir_node *in_m[2] = {m, out->in[0]}, *in_v[2] = {v, out->in[0]};
	ir_node *nm = opt_node(g, IR_OP_ADAM_M, in_m, 2, out);
	ir_node_set_float(g, nm, IR_ATTR_BETA, ctx->beta1);
	nm->type = m->type;
	ir_node *nv = opt_node(g, IR_OP_ADAM_V, in_v, 2, out);
	ir_node_set_float(g, nv, IR_ATTR_BETA, ctx->beta2);
	nv->type = v->type;
	/* The moments wait for the bias corrections, so the weight update can
	 * join them in one fused loop whatever order the schedule picks. */
	ir_node_add_after(g, nm, s->c1);
	ir_node_add_after(g, nm, s->c2);
	ir_node_add_after(g, nv, s->c1);
	ir_node_add_after(g, nv, s->c2);
	ir_node *in[6] = {p, nm, nv, lr, s->c1, s->c2};
	ir_node *w = opt_node(g, IR_OP_ADAMW, in, 6, out);
	ir_node_set_float(g, w, IR_ATTR_EPS, ctx->eps);
	if (wd)
		ir_node_set_float(g, w, IR_ATTR_WD, ctx->weight_decay);
	w->type = p->type;
	return w;
}

int ps_optim(ir_graph *g, ps_ctx *ctx)
{
	if (!ctx->optimizer)
		return 0;
	/* Indexes of the graph as it is now: readers of each node, named nodes
	 * sorted by name.  `start_id` keeps each node's starting id. */
	ir_users u;
	ir_users_build(g, &u);
	int n0 = g->n, nnamed = 0, ngrads = 0;
	ir_node **grads = calloc((size_t)n0 + 1, sizeof *grads);
	ir_node **named = calloc((size_t)n0 + 1, sizeof *named);
	ir_node **state_of = calloc(2 * (size_t)n0 + 1, sizeof *state_of); /* 2 per node */
	if (!grads || !named || !state_of)
		IR_DIE("out of memory");
	for (int i = 0; i < n0; i++) {
		ir_node *n = g->nodes[i];
		n->start_id = i;
		if (n->name)
			named[nnamed++] = n;
		if (ps_grad_param_name(n))
			grads[ngrads++] = n;
	}
	qsort(named, (size_t)nnamed, sizeof *named, by_name);

	ir_node *lr = NULL;
	adam_step step = {0};
	int status = 0;
	for (int i = 0; i < ngrads; i++) {
		ir_node *out = grads[i];
		const char *name = ps_grad_param_name(out);
		ir_node *p = find_named(named, nnamed, name);
		if (!p || p->op != IR_OP_PARAM) {
			ir_diag_add(&ctx->diags, out->pos, "optim: no param $%s for output \"%s\"", name,
				ir_node_str(out, IR_ATTR_NAME));
			status = 1;
			break;
		}
		if (!lr) { /* the learning rate: a scalar input of the parameters' dtype */
			lr = ir_node_new(g, IR_OP_INPUT, NULL, 0);
			ir_node_set_str(g, lr, IR_ATTR_NAME, "lr");
			lr->type = ir_type_scalar(p->type.dtype);
		}
		/* The states' names: "NAME.mom", or "NAME.m" and "NAME.v". */
		const char *suffix[2] = {ctx->adamw ? "m" : "mom", ctx->adamw ? "v" : NULL};
		for (int k = 0; k < 2 && suffix[k] && status == 0; k++) {
			char state_name[512];
			snprintf(state_name, sizeof state_name, "%s.%s", name, suffix[k]);
			if (find_named(named, nnamed, state_name)) {
				ir_diag_add(&ctx->diags, out->pos, "optim: $%s already has its %s state $%s", name,
					ctx->adamw ? "AdamW" : "momentum", state_name);
				status = 1;
			} else {
				state_of[2 * p->start_id + k] = new_state(g, state_name, p->type, p);
			}
		}
		if (status)
			break;
		ir_node *v = state_of[2 * p->start_id];
		bool wd = ctx->weight_decay > 0 && is_weight(&u, p);
		ir_node *s;
		if (ctx->adamw) {
			if (!step.t) {
				if (find_named(named, nnamed, "adamw.t")) {
					ir_diag_add(&ctx->diags, out->pos, "optim: the graph already has a step count $adamw.t");
					status = 1;
					break;
				}
				adam_step_new(g, ctx, p, &step);
			}
			s = adamw_update(g, ctx, p, v, state_of[2 * p->start_id + 1], out, lr, &step, wd);
		} else {
			ir_node *in[3] = {v, out->in[0], p};
			ir_node *m = opt_node(g, IR_OP_MOMENTUM, in, wd ? 3 : 2, out);
			ir_node_set_float(g, m, IR_ATTR_MOMENTUM, ctx->momentum);
			if (wd)
				ir_node_set_float(g, m, IR_ATTR_WD, ctx->weight_decay);
			m->type = v->type;
			ir_node *in2[3] = {p, m, lr};
			s = opt_node(g, IR_OP_SGD, in2, 3, out);
			s->type = p->type;
		}
		/* The in-place update runs after every other reader of p. */
		for (int k = u.start[p->start_id]; k < u.start[p->start_id + 1]; k++)
			ir_node_add_after(g, s, u.user[k]);
	}
	if (status == 0) {
		/* Final order: lr first (then the step count), each parameter's
		 * states just after it, the updates last; the gradient outputs go. */
		ir_node **order = malloc(((size_t)g->n + 1) * sizeof *order);
		if (!order)
			IR_DIE("out of memory");
		int n = 0;
		if (lr)
			order[n++] = lr;
		if (step.t)
			order[n++] = step.t;
		for (int i = 0; i < n0; i++) {
			order[n++] = g->nodes[i];
			for (int k = 0; k < 2; k++)
				if (state_of[2 * i + k])
					order[n++] = state_of[2 * i + k];
		}
		for (int i = n0; i < g->n; i++)
			if (g->nodes[i] != lr && g->nodes[i]->op != IR_OP_STATE)
				order[n++] = g->nodes[i];
		IR_ASSERT(n == g->n);
		ir_graph_reorder(g, order);
		free(order);
		bool *dead = calloc((size_t)g->n + 1, sizeof *dead);
		if (!dead)
			IR_DIE("out of memory");
		for (int i = 0; i < ngrads; i++)
			dead[grads[i]->id] = true;
		ir_graph_remove(g, dead);
		free(dead);
	}
	free(state_of);
	free(named);
	free(grads);
	ir_users_free(&u);
	return status;
}
