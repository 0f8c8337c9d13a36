/* dot.c: Graphviz output.  Data edges are solid, ordering edges dashed;
 * nodes are coloured by role.  Each reversible unit is a cluster holding
 * its additions and D, with F and G as clusters inside it; the nodes
 * derived from a unit's (gradients, recomputations) are drawn in it too,
 * so a picture of a training step shows which unit each belongs to. */
#include <stdlib.h>

#include "ir.h"

static const char *const role_color[] = {
	[IR_ROLE_FWD] = "#dbe9f6",
	[IR_ROLE_BWD] = "#f6e0db",
	[IR_ROLE_RECOMPUTE] = "#fff2b3",
	[IR_ROLE_OPT] = "#e0f0d8",
};
_Static_assert(sizeof role_color / sizeof role_color[0] == IR_ROLE_COUNT, "role colours");

/* Writes s escaped for a double-quoted DOT string. */
static void dot_escape(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', out);
		fputc(*s, out);
	}
}

static void dot_node(FILE *out, const ir_graph *g, int i, const char *indent)
{
	char ref[80], type[256];
	const ir_node *n = g->nodes[i];
	ir_type_str(&n->type, type, sizeof type);
	fprintf(out, "%sn%d [label=\"", indent, i);
	if (n->name)
		snprintf(ref, sizeof ref, "$%s", n->name);
	else
		snprintf(ref, sizeof ref, "%%%d", i);
	dot_escape(out, ref);
	fprintf(out, " = %s\\n%s\", fillcolor=\"%s\"", ir_op_name(n->op), type, role_color[n->role]);
	if (ir_op_has(n->op, IR_OPF_SRC))
		fputs(", shape=ellipse", out);
	fputs("];\n", out);
}

/* Where a node is drawn: 0 outside every unit, else 1 + 3 * unit + 0 for
 * the unit's own nodes (y1, y2, D), 1 for F's, 2 for G's. */
static int box_of(const ir_graph *g, const ir_node *n)
{
	if (n->unit < 0 || n->unit >= g->n) /* the verifier bounds unit numbers */
		return 0;
	return 1 + 3 * n->unit + (n->part == IR_PART_F ? 1 : n->part == IR_PART_G ? 2 : 0);
}

void ir_dot(FILE *out, const ir_graph *g)
{
	IR_ASSERT(ir_graph_ids_current(g));
	fputs("digraph \"", out);
	dot_escape(out, g->name);
	fputs("\" {\n  node [shape=box, style=filled, fontname=\"monospace\", fontsize=10];\n", out);
	/* The nodes by box (a counting sort, in list order within each). */
	int nbox = 1;
	for (int i = 0; i < g->n; i++)
		if (box_of(g, g->nodes[i]) + 1 > nbox)
			nbox = box_of(g, g->nodes[i]) + 1;
	int *start = calloc((size_t)nbox + 1, sizeof *start), *order = malloc(((size_t)g->n + 1) * sizeof *order);
	if (!start || !order)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++)
		start[box_of(g, g->nodes[i]) + 1]++;
	for (int b = 0; b < nbox; b++)
		start[b + 1] += start[b];
	for (int i = 0; i < g->n; i++)
		order[start[box_of(g, g->nodes[i])]++] = i;
	for (int b = nbox; b > 0; b--) /* start[b] is where box b begins again */
		start[b] = start[b - 1];
	start[0] = 0;
	for (int j = start[0]; j < start[1]; j++)
		dot_node(out, g, order[j], "  ");
	for (int k = 0; 1 + 3 * k < nbox; k++) {
		int b = 1 + 3 * k;
		if (start[b] == start[b + 3 < nbox ? b + 3 : nbox])
			continue;
		fprintf(out, "  subgraph cluster_u%d {\n    label=\"unit %d\"; style=rounded; color=\"#707070\";\n", k, k);
		for (int j = start[b]; j < start[b + 1]; j++)
			dot_node(out, g, order[j], "    ");
		for (int p = 1; p <= 2 && b + p < nbox; p++) {
			if (start[b + p] == start[b + p + 1])
				continue;
			fprintf(out, "    subgraph cluster_u%d_%s {\n      label=\"%s\"; style=dashed;\n", k,
				p == 1 ? "f" : "g", p == 1 ? "F" : "G");
			for (int j = start[b + p]; j < start[b + p + 1]; j++)
				dot_node(out, g, order[j], "      ");
			fputs("    }\n", out);
		}
		fputs("  }\n", out);
	}
	free(start);
	free(order);
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		for (int e = 0; e < n->nin; e++)
			fprintf(out, "  n%d -> n%d;\n", n->in[e]->id, i);
		for (int e = 0; e < n->nafter; e++)
			fprintf(out, "  n%d -> n%d [style=dashed, color=\"#c03030\"];\n", n->after[e]->id, i);
	}
	fputs("}\n", out);
}
