/* optim.c: the optimiser step, momentum SGD as in TensorFlow's
 * MomentumOptimizer (MODEL.md).
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

static bool is_weight(const ir_graph *g, const ir_node *p)
{
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
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
	n->pos = like->pos;
	n->pos_printed = like->pos_printed;
	return n;
}

/* Adds an ordering edge from s to every reader of p other than s and m. */
static void after_readers(ir_graph *g, ir_node *s, const ir_node *m, const ir_node *p)
{
	for (int j = 0; j < g->n; j++) {
		ir_node *r = g->nodes[j];
		if (r == s || r == m)
			continue;
		for (int k = 0; k < r->nin; k++)
			if (r->in[k] == p) {
				ir_node_add_after(g, s, r);
				break;
			}
	}
}

int ps_optim(ir_graph *g, ps_ctx *ctx)
{
	if (!ctx->optimizer)
		return 0;
	size_t plen = strlen(PS_GRAD_PREFIX);
	int ngrads = 0;
	ir_node **grads = calloc((size_t)g->n + 1, sizeof *grads);
	if (!grads)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		ir_node *out = g->nodes[i];
		if (out->op == IR_OP_OUTPUT && strncmp(ir_node_str(out, IR_ATTR_NAME), PS_GRAD_PREFIX, plen) == 0)
			grads[ngrads++] = out;
	}
	ir_node *lr = NULL;
	for (int i = 0; i < ngrads; i++) {
		ir_node *out = grads[i];
		const char *name = ir_node_str(out, IR_ATTR_NAME) + plen;
		ir_node *p = ir_graph_find_param(g, name);
		if (!p || p->op != IR_OP_PARAM) {
			ir_diag_add(&ctx->diags, out->pos, "optim: no param $%s for output \"%s\"", name,
				ir_node_str(out, IR_ATTR_NAME));
			free(grads);
			return 1;
		}
		if (!lr) { /* the learning rate: a scalar input of the parameters' dtype */
			lr = ir_node_insert(g, 0, IR_OP_INPUT, NULL, 0);
			ir_node_set_str(g, lr, IR_ATTR_NAME, "lr");
			lr->type = ir_type_scalar(p->type.dtype);
		}
		char mom_name[512];
		snprintf(mom_name, sizeof mom_name, "%s.mom", name);
		ir_graph_renumber(g);
		ir_node *v = ir_node_insert(g, p->id + 1, IR_OP_STATE, NULL, 0);
		v->name = ir_arena_strdup(g->arena, mom_name);
		v->type = p->type;
		v->scope = p->scope;
		v->pos = p->pos;
		v->pos_printed = p->pos_printed;

		bool wd = ctx->weight_decay > 0 && is_weight(g, p);
		ir_node *in[3] = {v, out->in[0], p};
		ir_node *m = opt_node(g, IR_OP_MOMENTUM, in, wd ? 3 : 2, out);
		ir_node_set_float(g, m, IR_ATTR_MOMENTUM, ctx->momentum);
		if (wd)
			ir_node_set_float(g, m, IR_ATTR_WD, ctx->weight_decay);
		m->type = v->type;
		ir_node *in2[3] = {p, m, lr};
		ir_node *s = opt_node(g, IR_OP_SGD, in2, 3, out);
		s->type = p->type;
		after_readers(g, s, m, p);
	}
	/* The gradients are consumed now: their outputs go. */
	ir_graph_renumber(g);
	bool *dead = calloc((size_t)g->n + 1, sizeof *dead);
	if (!dead)
		IR_DIE("out of memory");
	for (int i = 0; i < ngrads; i++)
		dead[grads[i]->id] = true;
	ir_graph_remove(g, dead);
	free(dead);
	free(grads);
	return 0;
}
