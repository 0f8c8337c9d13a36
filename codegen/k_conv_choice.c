/* k_conv_choice.c: which lowering each convolution gets (cg_conv_lowering,
 * internal.h), decided at compile time from the node alone, so that the
 * memory planner's workspace sizes and the emitted kernel agree and do not
 * depend on the CPU.
 *
 * REVC_CONV=direct|winograd2|winograd4|blas forces one for every
 * convolution it applies to (Winograd only to 3x3 stride-1 convolutions
 * and their gradients in f32; the others then stay direct); any other
 * value is an error (cg_conv_env_ok, checked by cg_jit_compile).
 * Otherwise the choice measured on this host (k_conv_tune.c, unless
 * REVC_CONV_TUNE=0) for the convolutions Winograd fits, once it is in the
 * cache file; else, and for shapes the tune has not kept, the cost model
 * below picks. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const struct {
	const char *name;
	cg_conv_lowering l;
} forcings[] = {
	{"direct", CG_CONV_DIRECT},
	{"winograd2", CG_CONV_WINOGRAD2},
	{"winograd4", CG_CONV_WINOGRAD4},
	{"blas", CG_CONV_BLAS},
};
#define NFORCINGS (sizeof forcings / sizeof forcings[0])
_Static_assert(NFORCINGS == 4, "cg_conv_env_ok names four");

cg_conv_lowering cg_conv_forced(void)
{
	const char *e = getenv("REVC_CONV");
	for (size_t i = 0; e && i < NFORCINGS; i++)
		if (!strcmp(e, forcings[i].name))
			return forcings[i].l;
	const char *b = getenv("REVC_CONV_BLAS");
	return b && *b == '1' ? CG_CONV_BLAS : CG_CONV_AUTO;
}

bool cg_conv_env_ok(ir_diags *d)
{
	const char *t = getenv("REVC_CONV_TUNE");
	if (t && *t && strcmp(t, "0") && strcmp(t, "1")) {
		ir_diag_add(d, (ir_pos){0}, "REVC_CONV_TUNE must be 0 or 1 (or unset), not '%.60s'", t);
		return false;
	}
	const char *e = getenv("REVC_CONV");
	if (!e || !*e || cg_conv_forced() != CG_CONV_AUTO)
		return true;
	ir_diag_add(d, (ir_pos){0}, "REVC_CONV must be %s, %s, %s or %s (or unset), not '%.60s'", forcings[0].name,
		forcings[1].name, forcings[2].name, forcings[3].name, e);
	return false;
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

/* ---- the cost model --------------------------------------------------------
 *
 * Costs per output element and output plane, in multiply-adds of the
 * direct kernel's products, for a stride-1 3x3 convolution reading `in`
 * planes and writing `out` planes of ho x wo:
 *   direct     9·in·(wo + 2)/wo: the implicit kernel also computes the two
 *              padding columns of each padded row;
 *   F(m x m)   p·(m+2)²/m²·in·(whole tiles' outputs / ho·wo) for the
 *              products, plus the transforms, x·in/out + x.
 * p (the products' multiply-adds cost 1.66 times the direct kernel's:
 * their reductions are only `in` long and each ends in stores of M) and
 * x (6.6 for F(2x2)) were fitted to perf(1) cycle counts of the 3x3
 * stride-1 conv2d and conv2d_dx of fashion (batch 50) on a 2-core AMD EPYC
 * (Zen 4, AVX-512), one thread (docs/codegen.md gives the figures); the
 * model puts those layers, revnet-38's, and the filter gradients
 * (conv2d_dw, costed as its forward convolution: the same products and
 * two transforms) on the side they measured.  F(4x4)'s x, 75, is the
 * earlier fit (before the transforms worked on whole vectors), not
 * refitted; it must be 10% cheaper than F(2x2) to be chosen, for its
 * larger rounding error.  Planes under 7x7 and fewer than 8 input planes
 * (not measured with these kernels) stay direct.  The choice does not
 * depend on the CPU code is made for, so workspace sizes do not either. */

static double cost_direct(const ir_conv_geom *g)
{
	bool fwd = g->op != IR_OP_CONV2D_DX;
	double in = (double)(fwd ? g->c : g->o), wo = (double)(fwd ? g->wo : g->w);
	return 9 * in * (wo + 2) / wo;
}

/* The planes a stride-1 conv2d or conv2d_dx reads and writes, and the size
 * of those it writes (conv2d_dw: its forward convolution's). */
static void planes(const ir_conv_geom *g, double *in, double *out, int64_t *ho, int64_t *wo)
{
	bool fwd = g->op != IR_OP_CONV2D_DX;
	*in = (double)(fwd ? g->c : g->o), *out = (double)(fwd ? g->o : g->c);
	*ho = fwd ? g->ho : g->h, *wo = fwd ? g->wo : g->w;
}

static double cost_winograd(const ir_conv_geom *g, int m)
{
	double in, out;
	int64_t ho, wo;
	planes(g, &in, &out, &ho, &wo);
	int64_t th = (ho + m - 1) / m, tw = (wo + m - 1) / m;
	double whole = (double)(th * tw * m * m) / (double)(ho * wo);
	double a2 = (double)((m + 2) * (m + 2)) / (double)(m * m);
	double p = 1.66, x = m == 2 ? 6.6 : 75;
	return p * a2 * in * whole + x * in / out + x;
}

/* Why Winograd cannot compute g in dt, or NULL when it can. */
static const char *unfit(const ir_conv_geom *g, ir_dtype dt)
{
	if (cg_conv_winograd_fits(g, dt))
		return NULL;
	if (g->kh != 3 || g->kw != 3)
		return "Winograd only for 3x3 windows";
	if (g->s != 1)
		return "Winograd only at stride 1";
	if (dt != IR_F32)
		return "Winograd only in f32";
	return "Winograd only for paddings up to 2";
}

cg_conv_lowering cg_conv_lowering_of(const ir_conv_geom *g, ir_dtype dt, const char **why)
{
	cg_conv_lowering f = cg_conv_forced(), t = cg_conv_tune_trying();
	const char *no = unfit(g, dt);
	bool fits = !no;
	if (t != CG_CONV_AUTO && fits)
		return because(why, "a candidate being timed", t);
	switch (f) {
	case CG_CONV_BLAS:
		return because(why, "REVC_CONV=blas", f);
	case CG_CONV_DIRECT:
		return because(why, "REVC_CONV=direct", f);
	case CG_CONV_WINOGRAD2:
	case CG_CONV_WINOGRAD4:
		if (fits)
			return because(why, f == CG_CONV_WINOGRAD2 ? "REVC_CONV=winograd2" : "REVC_CONV=winograd4", f);
		return because(why, no, CG_CONV_DIRECT);
	default:
		break;
	}
	if (!fits)
		return because(why, no, CG_CONV_DIRECT);
	cg_conv_lowering tuned;
	if (cg_conv_tuned(g, &tuned, why))
		return tuned;
	return cg_conv_modelled(g, why);
}

cg_conv_lowering cg_conv_modelled(const ir_conv_geom *g, const char **why)
{
	bool fwd = g->op != IR_OP_CONV2D_DX;
	int64_t ho = fwd ? g->ho : g->h, wo = fwd ? g->wo : g->w;
	if (ho < 7 || wo < 7)
		return because(why, "cost model: planes under 7x7 (not measured)", CG_CONV_DIRECT);
	if ((fwd ? g->c : g->o) < 8)
		return because(why, "cost model: under 8 input planes (not measured)", CG_CONV_DIRECT);
	double direct = cost_direct(g), w2 = cost_winograd(g, 2), w4 = cost_winograd(g, 4);
	if (w4 < 0.9 * w2 && w4 < direct)
		return because(why, "cost model: winograd4 cheapest", CG_CONV_WINOGRAD4);
	if (w2 < direct)
		return because(why, "cost model: winograd2 cheaper than direct", CG_CONV_WINOGRAD2);
	return because(why, "cost model: direct cheaper than Winograd", CG_CONV_DIRECT);
}

/* n's lowering under o's tune (o NULL: the one in force). */
static cg_conv_lowering lowering_for(const ir_node *n, const cg_options *o, const char **why)
{
	char saved[160];
	ir_conv_geom g = ir_conv_geom_of(n);
	cg_conv_tune_enter(o, saved, sizeof saved);
	cg_conv_lowering l = cg_conv_lowering_of(&g, n->type.dtype, why);
	cg_conv_tune_leave(saved);
	return l;
}

const char *cg_conv_describe(const ir_node *n, const cg_options *o, const char **why)
{
	if (n->op != IR_OP_CONV2D && n->op != IR_OP_CONV2D_DX && n->op != IR_OP_CONV2D_DW)
		return NULL;
	return cg_conv_lowering_name(lowering_for(n, o, why));
}

double cg_conv_product_flops(const ir_node *n, const cg_options *o)
{
	ir_conv_geom g = ir_conv_geom_of(n);
	double direct = 2.0 * (double)g.n * (double)(g.o * g.c * g.kh * g.kw) * (double)(g.ho * g.wo);
	cg_conv_lowering l = lowering_for(n, o, NULL);
	if (l != CG_CONV_WINOGRAD2 && l != CG_CONV_WINOGRAD4)
		return direct;
	int m = l == CG_CONV_WINOGRAD4 ? 4 : 2;
	double in, out;
	int64_t ho, wo;
	planes(&g, &in, &out, &ho, &wo);
	double tiles = (double)(((ho + m - 1) / m) * ((wo + m - 1) / m));
	return 2.0 * (double)g.n * in * out * (double)((m + 2) * (m + 2)) * tiles;
}
