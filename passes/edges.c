/* edges.c: the ordering edges of the reversible backward pass, inserted by
 * the schedule pass (schedule.c) before it searches for an order.
 *
 * As the TensorFlow RevNet example's control dependencies, for each
 * invertible unit
 *     x2 = y2 - G(y1)  runs after G's weight gradients and dx1,
 *     x1 = y1 - F(x2)  runs after F's weight gradients and dx2,
 * so a unit's reconstruction waits until the unit after it is done, and at
 * most one unit's recomputed activations are live at a time.  Autodiff marks
 * G's whole backward, the accumulation into dx1 included, as part G of the
 * unit (and F's, with dx2, as F), so the edges go to the gradient nodes of
 * that part that nothing else in it reads. */
#include <stdlib.h>

#include "passes.h"

void ps_order_edges(ir_graph *g)
{
	ps_unit *u;
	int nu = ps_units_find(g, &u);
	ps_unit_map m;
	ps_unit_map_build(g, nu, &m);
	ir_node **x = calloc(2 * (size_t)nu + 1, sizeof *x);
	/* read_in_part[id]: a gradient node of the same part of its unit reads it. */
	bool *read_in_part = calloc((size_t)g->n + 1, sizeof *read_in_part);
	if (!x || !read_in_part)
		IR_DIE("out of memory");
	ps_reconstructions(g, &m, nu, x);
	for (int i = 0; i < g->n; i++) {
		ir_node *r = g->nodes[i];
		if (r->role == IR_ROLE_BWD && r->unit >= 0)
			for (int k = 0; k < r->nin; k++) {
				const ir_node *o = r->in[k];
				if (o->role == IR_ROLE_BWD && o->unit == r->unit && o->part == r->part)
					read_in_part[o->id] = true;
			}
	}
	/* Each reconstruction runs after every gradient node of its part that
	 * no other gradient node of that part reads. */
	for (int i = 0; i < g->n; i++) {
		ir_node *n = g->nodes[i];
		int k = m.unit[i];
		if (k < 0 || n->role != IR_ROLE_BWD || read_in_part[i] || (m.part[i] != IR_PART_G && m.part[i] != IR_PART_F))
			continue;
		ir_node *r = x[2 * k + (m.part[i] == IR_PART_F)];
		if (r)
			ir_node_add_after(g, r, n);
	}
	free(read_in_part);
	free(x);
	ps_unit_map_free(&m);
	free(u);
}
