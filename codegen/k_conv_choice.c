/* k_conv_choice.c: which lowering each convolution gets (cg_conv_lowering,
 * internal.h), decided at compile time from the node alone, so that the
 * memory planner's workspace sizes and the emitted kernel agree and do not
 * depend on the CPU.
 *
 * REVC_CONV=direct|winograd2|winograd4|blas forces one for every
 * convolution it applies to (Winograd only to 3x3 stride-1 conv2d and
 * conv2d_dx in f32; the others then stay direct).  Otherwise the cost
 * model below picks. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

cg_conv_lowering cg_conv_forced(void)
{
	static const struct {
		const char *name;
		cg_conv_lowering l;
	} names[] = {
		{"direct", CG_CONV_DIRECT},
		{"winograd2", CG_CONV_WINOGRAD2},
		{"winograd4", CG_CONV_WINOGRAD4},
		{"blas", CG_CONV_BLAS},
	};
	const char *e = getenv("REVC_CONV");
	for (size_t i = 0; e && i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(e, names[i].name))
			return names[i].l;
	const char *b = getenv("REVC_CONV_BLAS");
	return b && *b == '1' ? CG_CONV_BLAS : CG_CONV_AUTO;
}

bool cg_conv_on_blas(void)
{
	return cg_conv_forced() == CG_CONV_BLAS;
}

const char *cg_conv_lowering_name(cg_conv_lowering l)
{
	static const char *const names[] = {"auto", "direct", "winograd2", "winograd4", "blas"};
	_Static_assert(sizeof names / sizeof names[0] == CG_CONV_BLAS + 1, "one name per lowering");
	return names[l];
}

static cg_conv_lowering because(const char **why, const char *reason, cg_conv_lowering l)
{
	if (why)
		*why = reason;
	return l;
}

cg_conv_lowering cg_conv_lowering_of(const ir_conv_geom *g, ir_dtype dt, const char **why)
{
	cg_conv_lowering f = cg_conv_forced();
	bool fits = cg_conv_winograd_fits(g, dt);
	switch (f) {
	case CG_CONV_BLAS:
		return because(why, "REVC_CONV=blas", f);
	case CG_CONV_DIRECT:
		return because(why, "REVC_CONV=direct", f);
	case CG_CONV_WINOGRAD2:
	case CG_CONV_WINOGRAD4:
		if (fits)
			return because(why, f == CG_CONV_WINOGRAD2 ? "REVC_CONV=winograd2" : "REVC_CONV=winograd4", f);
		return because(why, "Winograd needs a 3x3 stride-1 conv2d or conv2d_dx in f32", CG_CONV_DIRECT);
	default:
		break;
	}
	if (!fits)
		return because(why, "not a 3x3 stride-1 conv2d or conv2d_dx in f32", CG_CONV_DIRECT);
	return because(why, "cost model: direct", CG_CONV_DIRECT);
}
