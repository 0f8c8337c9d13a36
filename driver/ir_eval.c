/* ir_eval.c: the evaluation graph of an IR file's forward graph, as the
 * front end would lower it for evaluation (FE_LOWER_EVAL): each training-
 * mode batch norm, bn_norm(x, bn_stats(x), gamma, beta) whose running
 * statistics bn_running_mean(mean, stats) and bn_running_var(var, stats)
 * update, becomes bn_infer(x, mean, var, gamma, beta) with its eps, and
 * the updates go.  Nothing else of a forward graph differs between the two
 * modes (the loss and logits outputs are the same).
 *
 * Requires: a forward graph (no pass but shape listed: no gradient, group,
 * liveness or plan to keep right), verified.  Guarantees: a verified graph
 * with no bn_stats read by a bn_norm that has running statistics. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool drv_ir_evaluable(const ir_graph *g)
{
	for (int i = 0; i < g->npasses; i++)
		if (strcmp(g->passes[i], "shape") != 0)
			return false;
	return true;
}

/* The reader of stats with op `op`, or NULL. */
static ir_node *reader(const ir_users *u, const ir_node *stats, ir_op op)
{
	for (int j = u->start[stats->id]; j < u->start[stats->id + 1]; j++)
		if (u->user[j]->op == op && u->user[j]->in[1] == stats)
			return u->user[j];
	return NULL;
}

void drv_ir_eval(ir_graph *g)
{
	IR_ASSERT(drv_ir_evaluable(g) && ir_graph_ids_current(g));
	ir_users u;
	ir_users_build(g, &u);
	bool *dead = calloc((size_t)g->n, sizeof *dead);
	if (!dead)
		IR_DIE("out of memory");
	bool any = false;
	for (int i = 0; i < g->n; i++) {
		ir_node *n = g->nodes[i];
		if (n->op != IR_OP_BN_NORM || n->in[1]->op != IR_OP_BN_STATS)
			continue;
		ir_node *stats = n->in[1];
		ir_node *rm = reader(&u, stats, IR_OP_BN_RUNNING_MEAN), *rv = reader(&u, stats, IR_OP_BN_RUNNING_VAR);
		if (!rm || !rv)
			continue;
		ir_node **in = ir_arena_array(g->arena, 5, sizeof *in);
		in[0] = n->in[0];
		in[1] = rm->in[0];
		in[2] = rv->in[0];
		in[3] = n->in[2];
		in[4] = n->in[3];
		n->op = IR_OP_BN_INFER;
		n->in = in;
		n->nin = 5;
		dead[rm->id] = dead[rv->id] = true;
		any = true;
	}
	/* What read the statistics alone goes too (DCE would take the
	 * statistics, but not the updates, which are effects). */
	for (int i = g->n - 1; i >= 0; i--) {
		ir_node *n = g->nodes[i];
		if (n->op != IR_OP_BN_STATS)
			continue;
		bool used = false;
		for (int j = u.start[i]; j < u.start[i + 1]; j++) {
			const ir_node *r = u.user[j];
			for (int k = 0; k < r->nin && !dead[r->id]; k++)
				used |= r->in[k] == n;
		}
		dead[i] = !used;
	}
	ir_users_free(&u);
	if (any)
		ir_graph_remove(g, dead);
	free(dead);
}
