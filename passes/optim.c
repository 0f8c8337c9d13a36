/* optim.c: the optimiser step, momentum SGD as in TensorFlow's
 * MomentumOptimizer (docs/model.md).
 *
 * requires: autodiff.
 * guarantees (when ctx->optimizer is set; otherwise the pass changes
 *   nothing and the gradients stay outputs): each "grad:NAME" output is
 *   replaced by
 *       v = momentum($NAME.mom, g [, $NAME]) {momentum, wd}    v in place
 *       w = sgd($NAME, v, lr)                                  w in place
 *   with role opt, where $NAME.mom is a new zero-initialised state and lr a
 *   new scalar input named "lr".  Weight decay applies to conv filters and
 *   dense weights (parameters used as operand 1 of conv2d or matmul) only.
 *   Each sgd has ordering edges to every other reader of its parameter, so
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
	ir_node **state_of = calloc((size_t)n0 + 1, sizeof *state_of);
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
		char mom_name[512];
		snprintf(mom_name, sizeof mom_name, "%s.mom", name);
		if (find_named(named, nnamed, mom_name)) {
			ir_diag_add(&ctx->diags, out->pos, "optim: $%s already has its momentum state $%s", name,
				mom_name);
			status = 1;
			break;
		}
		ir_node *v = ir_node_new(g, IR_OP_STATE, NULL, 0);
		v->name = ir_arena_strdup(g->arena, mom_name);
		v->type = p->type;
		v->scope = p->scope;
		ir_node_set_unit(v, p->unit, p->part);
		v->pos = p->pos;
		v->pos_printed = p->pos_printed;
		state_of[p->start_id] = v;

		bool wd = ctx->weight_decay > 0 && is_weight(&u, p);
		ir_node *in[3] = {v, out->in[0], p};
		ir_node *m = opt_node(g, IR_OP_MOMENTUM, in, wd ? 3 : 2, out);
		ir_node_set_float(g, m, IR_ATTR_MOMENTUM, ctx->momentum);
		if (wd)
			ir_node_set_float(g, m, IR_ATTR_WD, ctx->weight_decay);
		m->type = v->type;
		ir_node *in2[3] = {p, m, lr};
		ir_node *s = opt_node(g, IR_OP_SGD, in2, 3, out);
		s->type = p->type;
		/* The in-place update runs after every other reader of p. */
		for (int k = u.start[p->start_id]; k < u.start[p->start_id + 1]; k++)
			ir_node_add_after(g, s, u.user[k]);
	}
	if (status == 0) {
		/* Final order: lr first, each momentum state just after its
		 * parameter, the updates last; the gradient outputs go. */
		ir_node **order = malloc(((size_t)g->n + 1) * sizeof *order);
		if (!order)
			IR_DIE("out of memory");
		int n = 0;
		if (lr)
			order[n++] = lr;
		for (int i = 0; i < n0; i++) {
			order[n++] = g->nodes[i];
			if (state_of[i])
				order[n++] = state_of[i];
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
