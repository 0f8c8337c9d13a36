/* diags.c: diagnostics the driver's tools pass on: an rt_err as one, and
 * one list appended to another. */
#include <stdio.h>

#include "tools.h"

void drv_diag_rt(ir_diags *d, const rt_err *e)
{
	ir_diag_add(d, (ir_pos){0}, "%s", e->msg);
}

void drv_diags_append(ir_diags *to, const ir_diags *from)
{
	for (int i = 0; i < from->n; i++)
		ir_diag_add(to, from->items[i].pos, "%s", from->items[i].msg);
	to->total += from->total - from->n;
}
