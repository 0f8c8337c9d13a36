/* users.c: who reads each value, built once so that passes over large
 * graphs ask "who reads n" in time proportional to the answer, not to the
 * graph.  The index is keyed by node ids as they were when it was built. */
#include <stdlib.h>

#include "ir.h"

void ir_users_build(const ir_graph *g, ir_users *u)
{
	IR_ASSERT(ir_graph_ids_current(g));
	size_t total = 0;
	for (int i = 0; i < g->n; i++)
		total += (size_t)g->nodes[i]->nin;
	u->n = g->n;
	u->start = calloc((size_t)g->n + 1, sizeof *u->start);
	u->user = malloc((total ? total : 1) * sizeof *u->user);
	int *fill = calloc((size_t)g->n + 1, sizeof *fill);
	if (!u->start || !u->user || !fill)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++)
		for (int k = 0; k < g->nodes[i]->nin; k++)
			u->start[g->nodes[i]->in[k]->id + 1]++;
	for (int i = 0; i < g->n; i++)
		u->start[i + 1] += u->start[i];
	/* In list order, a reader once per operand slot that names the value. */
	for (int i = 0; i < g->n; i++)
		for (int k = 0; k < g->nodes[i]->nin; k++) {
			int m = g->nodes[i]->in[k]->id;
			u->user[u->start[m] + fill[m]++] = g->nodes[i];
		}
	free(fill);
}

void ir_users_free(ir_users *u)
{
	free(u->start);
	free(u->user);
	u->start = NULL;
	u->user = NULL;
}
