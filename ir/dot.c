/* dot.c: Graphviz output.  Data edges are solid, ordering edges dashed;
 * nodes are coloured by role. */
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

void ir_dot(FILE *out, const ir_graph *g)
{
	char ref[80], type[256];
	IR_ASSERT(ir_graph_ids_current(g));
	fputs("digraph \"", out);
	dot_escape(out, g->name);
	fputs("\" {\n  node [shape=box, style=filled, fontname=\"monospace\", fontsize=10];\n", out);
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		ir_type_str(&n->type, type, sizeof type);
		fprintf(out, "  n%d [label=\"", i);
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
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		for (int e = 0; e < n->nin; e++)
			fprintf(out, "  n%d -> n%d;\n", n->in[e]->id, i);
		for (int e = 0; e < n->nafter; e++)
			fprintf(out, "  n%d -> n%d [style=dashed, color=\"#c03030\"];\n", n->after[e]->id, i);
	}
	fputs("}\n", out);
}
