/* print.c: the IR text format, written (grammar: docs/ir.md).
 *
 * Output is deterministic: a value is named by its node's list index (%12),
 * or $name for parameters and state; attributes come in attrs.def order;
 * floats are printed with the fewest digits that read back to the same
 * double.  ir_parse reads everything this file writes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* Writes the shortest decimal that strtod maps back to v. */
static void print_double(FILE *out, double v)
{
	if (isnan(v)) {
		fputs("nan", out);
		return;
	}
	if (isinf(v)) {
		fputs(v < 0 ? "-inf" : "inf", out);
		return;
	}
	char buf[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, out);
}

static void print_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(out, "\\x%02x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

static void print_ref(FILE *out, const ir_node *n)
{
	if (n->name)
		fprintf(out, "$%s", n->name);
	else
		fprintf(out, "%%%d", n->id);
}

static void print_attr(FILE *out, const ir_attr *a)
{
	fprintf(out, "%s=", ir_attr_name(a->kind));
	switch (ir_attr_vtype_of(a->kind)) {
	case IR_AV_INT:
		fprintf(out, "%lld", (long long)a->u.i);
		break;
	case IR_AV_FLOAT:
		print_double(out, a->u.f);
		break;
	case IR_AV_STR:
		print_string(out, a->u.s);
		break;
	case IR_AV_INTS:
		fputc('[', out);
		for (int i = 0; i < a->u.ints.n; i++)
			fprintf(out, "%s%lld", i ? "," : "", (long long)a->u.ints.v[i]);
		fputc(']', out);
		break;
	}
}

static void print_node(FILE *out, const ir_node *n)
{
	char tbuf[256];
	fputs("  ", out);
	print_ref(out, n);
	fputs(" = ", out);
	if (n->role != IR_ROLE_FWD)
		fprintf(out, "%s ", ir_role_name(n->role));
	fputs(ir_op_name(n->op), out);
	if (n->nin) {
		fputc('(', out);
		for (int i = 0; i < n->nin; i++) {
			if (i)
				fputs(", ", out);
			print_ref(out, n->in[i]);
		}
		fputc(')', out);
	}
	if (n->nattrs) {
		fputs(" {", out);
		for (int i = 0; i < n->nattrs; i++) {
			if (i)
				fputs(", ", out);
			print_attr(out, &n->attrs[i]);
		}
		fputc('}', out);
	}
	ir_type_str(&n->type, tbuf, sizeof tbuf);
	fprintf(out, " : %s", tbuf);
	if (n->nafter) {
		fputs(" after(", out);
		for (int i = 0; i < n->nafter; i++) {
			if (i)
				fputs(", ", out);
			print_ref(out, n->after[i]);
		}
		fputc(')', out);
	}
	if (n->group >= 0)
		fprintf(out, " group(%d)", n->group);
	if (n->offset >= 0)
		fprintf(out, " mem(%lld, %lld)", (long long)n->offset, (long long)ir_type_bytes(&n->type));
	if (n->ws_offset >= 0)
		fprintf(out, " ws(%lld, %lld)", (long long)n->ws_offset, (long long)n->ws_bytes);
	if (n->live_begin >= 0)
		fprintf(out, " live(%d, %d)", n->live_begin, n->live_end);
	if (n->unit >= 0) {
		fprintf(out, " unit(%d, %s", n->unit, ir_unit_part_name(n->part));
		if (n->keep != IR_KEEP_NONE)
			fprintf(out, ", %s", ir_unit_keep_name(n->keep));
		if (n->keep == IR_KEEP_RERUN)
			fprintf(out, ", %d", n->keep_from);
		fputc(')', out);
	} else if (n->keep != IR_KEEP_NONE) {
		fprintf(out, " keep(%s)", ir_unit_keep_name(n->keep));
	}
	if (n->scope) {
		fputs(" scope(", out);
		print_string(out, n->scope);
		fputc(')', out);
	}
	if (n->pos_printed && n->pos.file) {
		fputs(" loc(", out);
		print_string(out, n->pos.file);
		fprintf(out, ":%d:%d)", n->pos.line, n->pos.col);
	}
	fputc('\n', out);
}

void ir_print(FILE *out, const ir_graph *g)
{
	IR_ASSERT(ir_graph_ids_current(g)); /* values are numbered by list position */
	fprintf(out, "graph @%s", g->name);
	if (g->npasses) {
		fputs(" passes(", out);
		for (int i = 0; i < g->npasses; i++)
			fprintf(out, "%s%s", i ? ", " : "", g->passes[i]);
		fputc(')', out);
	}
	fputs(" {\n", out);
	for (int i = 0; i < g->n; i++)
		print_node(out, g->nodes[i]);
	fputs("}\n", out);
}

char *ir_print_str(const ir_graph *g)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		IR_DIE("open_memstream failed");
	ir_print(f, g);
	fclose(f);
	return buf;
}
