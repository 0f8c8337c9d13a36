/* unit.c: the marking of reversible units (couplings) on nodes: the names
 * of the parts in the text format, and the marker front ends build units
 * with (ir.h).  What a marking must satisfy: verify_units.c. */
#include <string.h>

#include "ir.h"

static const char *const parts[] = {
	[IR_PART_NONE] = "",
	[IR_PART_F] = "f",
	[IR_PART_G] = "g",
	[IR_PART_Y1] = "y1",
	[IR_PART_Y2] = "y2",
	[IR_PART_D] = "d",
};
_Static_assert(sizeof parts / sizeof parts[0] == IR_PART_COUNT, "part table");

const char *ir_unit_part_name(ir_unit_part p)
{
	IR_ASSERT((unsigned)p < IR_PART_COUNT);
	return parts[p];
}

/* The index of s[0..n) among names[1..count), or 0 (the table's "none"). */
_Static_assert(IR_PART_NONE == 0 && IR_KEEP_NONE == 0, "index 0 of each table is none");
static int name_index(const char *const *names, int count, const char *s, size_t n)
{
	for (int i = 1; i < count; i++)
		if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0)
			return i;
	return 0;
}

bool ir_unit_part_lookup(const char *s, size_t n, ir_unit_part *out)
{
	int i = name_index(parts, IR_PART_COUNT, s, n);
	if (i)
		*out = (ir_unit_part)i;
	return i != 0;
}

static const char *const keeps[] = {
	[IR_KEEP_NONE] = "",
	[IR_KEEP_STORE] = "store",
	[IR_KEEP_INVERT] = "invert",
	[IR_KEEP_RECOMPUTE] = "recompute",
	[IR_KEEP_RERUN] = "rerun",
};
_Static_assert(sizeof keeps / sizeof keeps[0] == IR_KEEP_COUNT, "keep table");

const char *ir_unit_keep_name(ir_unit_keep k)
{
	IR_ASSERT((unsigned)k < IR_KEEP_COUNT);
	return keeps[k];
}

bool ir_unit_keep_lookup(const char *s, size_t n, ir_unit_keep *out)
{
	int i = name_index(keeps, IR_KEEP_COUNT, s, n);
	if (i)
		*out = (ir_unit_keep)i;
	return i != 0;
}

void ir_unit_begin(ir_unit_marker *m, ir_graph *g, int unit)
{
	IR_ASSERT(unit >= 0);
	m->g = g;
	m->unit = unit;
	m->from = g->n;
}

void ir_unit_mark(ir_unit_marker *m, ir_unit_part part)
{
	IR_ASSERT(part != IR_PART_NONE && m->from <= m->g->n);
	for (int i = m->from; i < m->g->n; i++)
		ir_node_set_unit(m->g->nodes[i], m->unit, part);
	m->from = m->g->n;
}
