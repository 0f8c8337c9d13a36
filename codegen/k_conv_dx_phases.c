/* k_conv_dx_phases.c: the data gradient of a stride-2 convolution by the
 * phases of dX, without unfolded columns.
 *
 * Along one axis, dX element i = 2a + p (phase p = i % 2) gathers dY
 * element o through window offset k exactly when 2o + k - pad = i: k has
 * the parity of p + pad, and for the offsets first, first + 2, ... of that
 * parity (first = (p + pad) % 2), offset first + 2u reads
 *     o = a + base - u,     base = (p + pad) / 2.
 * So phase (p, q) of dX (its elements [2a + p][2b + q], a plane of
 * ceil((H - p) / 2) x ceil((W - q) / 2)) is a stride-1 correlation of dY
 * with the filter taps of rows first_p, first_p + 2, ... and columns
 * first_q, first_q + 2, ...: the register-blocked products of gemm.c read
 * it from dY copied once into a zero-bordered buffer, as the stride-1 data
 * gradient does (k_conv_implicit.c), each tap a shift of that buffer.  Its
 * top and left borders make every offset o >= 0 (a tap that reads o < 0
 * reads a zero), its size every o past the last row or column a zero.
 * The four phase planes go into the thread's workspace in padded rows,
 * and each row of dX is interleaved from a row of two of them.  Every
 * element of dX lies in exactly one phase, so dX is written once and
 * needs no zeroing, and there is no col2im.  Windows of 2x2 and more give
 * every phase a tap; the others stay unfolded (k_conv.c). */
#include "internal.h"

/* One axis: its two phases, and dY's placement in its padded rows (or
 * columns). */
typedef struct {
	int64_t first[2]; /* the first window offset of phase p: (p + pad) % 2 */
	int64_t taps[2];  /* its window offsets: first, first + 2, ... < k */
	int64_t base[2];  /* (p + pad) / 2: the dY element of offset `first` at a = 0 */
	int64_t count[2]; /* dX elements in phase p: p, p + 2, ... < n */
	int64_t lo, size; /* dY's elements at lo .. lo + out - 1 of size */
} axis;

/* The axis of an input of n elements, an output of `out`, a window of k
 * at stride 2 with padding pad before. */
static axis axis_of(int64_t n, int64_t out, int64_t k, int64_t pad)
{
	axis a = {.lo = 0};
	int64_t end = out;
	for (int p = 0; p < 2; p++) {
		a.first[p] = (p + pad) % 2;
		a.taps[p] = (k - a.first[p] + 1) / 2;
		a.base[p] = (p + pad) / 2;
		a.count[p] = (n - p + 1) / 2;
		/* Element 0 reads o down to base - (taps - 1); the last element
		 * up to count - 1 + base. */
		int64_t before = a.taps[p] - 1 - a.base[p];
		a.lo = before > a.lo ? before : a.lo;
		end = a.count[p] + a.base[p] > end ? a.count[p] + a.base[p] : end;
	}
	a.size = a.lo + end;
	return a;
}

typedef struct {
	axis h, w;
	int64_t plane; /* a phase plane's elements: phase 0's rows of w.size */
} phases;

static phases phases_of(const ir_conv_geom *g)
{
	phases ph = {axis_of(g->h, g->ho, g->kh, g->pt), axis_of(g->w, g->wo, g->kw, g->pl), 0};
	ph.plane = ph.h.count[0] * ph.w.size;
	return ph;
}

bool cg_conv_dx_phases_fits(const ir_conv_geom *g)
{
	return g->op == IR_OP_CONV2D_DX && g->s == 2 && g->kh >= 2 && g->kw >= 2 && g->kh * g->kw <= CG_MAX_TAPS;
}

/* Whether dY needs a padded copy (else the products read it in place). */
static bool pads_dy(const ir_conv_geom *g, const phases *ph)
{
	return ph->h.lo || ph->w.lo || ph->h.size != g->ho || ph->w.size != g->wo;
}

static int64_t padded_dy_elems(const ir_conv_geom *g, const phases *ph)
{
	return pads_dy(g, ph) ? g->o * ph->h.size * ph->w.size : 0;
}

int64_t cg_conv_dx_phases_workspace(const ir_conv_geom *g)
{
	phases ph = phases_of(g);
	return padded_dy_elems(g, &ph) + 4 * g->c * ph.plane;
}

/* Phase (p, q) of dX for one image: out[c][(2p + q)·plane + a·w.size + b]
 * = its element [a][b] of plane c, for b < w.count[q] (the other columns
 * of each padded row are computed and not used); dy the image's dY in
 * padded planes, w the filter. */
static void phase_product(cg_kb *k, const ir_conv_geom *g, const phases *ph, int p, int q, LLVMValueRef w,
	LLVMValueRef dy, LLVMValueRef out)
{
	const axis *h = &ph->h, *x = &ph->w;
	int64_t a_tap[CG_MAX_TAPS], b_tap[CG_MAX_TAPS];
	int nt = 0;
	for (int64_t u = 0; u < h->taps[p]; u++)
		for (int64_t v = 0; v < x->taps[q]; v++, nt++) {
			a_tap[nt] = (h->first[p] + 2 * u) * g->kw + x->first[q] + 2 * v;
			b_tap[nt] = (h->lo + h->base[p] - u) * x->size + x->lo + x->base[q] - v;
		}
	/* Up to the last element used: the taps of the ones after it would
	 * read past dY's padded planes. */
	cg_ab mm = {
		.m = g->c, .r = g->o, .p = (h->count[p] - 1) * x->size + x->count[q],
		.a = w, .a_rs = g->kh * g->kw, .a_cs = g->c * g->kh * g->kw,
		.b = dy, .ldb = h->size * x->size,
		.c = cg_gep(k, NULL, out, cg_i64(k, (2 * p + q) * ph->plane)), .ldc = 4 * ph->plane,
		.taps = nt, .a_tap = a_tap, .b_tap = b_tap,
	};
	cg_gemm_ab(k, &mm);
}

/* Row 2a + p of plane c of dX (dx: the plane) from phases (p, 0) and
 * (p, 1) of out. */
static void interleave(cg_kb *k, const ir_conv_geom *g, const phases *ph, LLVMValueRef out, LLVMValueRef c,
	LLVMValueRef a, int p, LLVMValueRef dx)
{
	LLVMValueRef at = cg_iadd(k, cg_imul(k, c, cg_i64(k, 4 * ph->plane)), cg_imul(k, a, cg_i64(k, ph->w.size)));
	LLVMValueRef even = cg_gep(k, NULL, out, cg_iadd(k, at, cg_i64(k, 2 * p * ph->plane)));
	LLVMValueRef odd = cg_gep(k, NULL, out, cg_iadd(k, at, cg_i64(k, (2 * p + 1) * ph->plane)));
	LLVMValueRef row = cg_iadd(k, cg_imul(k, a, cg_i64(k, 2)), cg_i64(k, p));
	cg_interleave_row(k, cg_gep(k, NULL, dx, cg_imul(k, row, cg_i64(k, g->w))), even, odd, g->w);
}

void cg_conv_dx_phases_emit(cg_kb *k, const ir_node *n, const ir_conv_geom *g, LLVMValueRef ws)
{
	IR_ASSERT(cg_conv_dx_phases_fits(g));
	phases ph = phases_of(g);
	LLVMValueRef dx = cg_arg(k, 0), dy = cg_arg(k, 1), w = cg_arg(k, 2);
	LLVMValueRef out = cg_gep(k, NULL, ws, cg_i64(k, padded_dy_elems(g, &ph)));
	cg_loop l, lc, la;
	LLVMValueRef img = cg_for(k, &l, k->lo, k->hi);
	LLVMValueRef b = cg_gep(k, NULL, dy, cg_imul(k, img, cg_i64(k, g->o * g->ho * g->wo)));
	if (pads_dy(g, &ph)) {
		cg_conv_pad_planes(k, g->o, g->ho, g->wo, ph.h.lo, ph.w.lo, ph.h.size, ph.w.size, b, ws, false);
		b = ws;
	}
	for (int p = 0; p < 2; p++)
		for (int q = 0; q < 2; q++)
			if (ph.h.count[p] > 0 && ph.w.count[q] > 0)
				phase_product(k, g, &ph, p, q, w, b, out);
	/* dX's rows two at a time, then the last one when H is odd. */
	LLVMValueRef dxi = cg_gep(k, NULL, dx, cg_imul(k, img, cg_i64(k, g->c * g->h * g->w)));
	LLVMValueRef c = cg_for(k, &lc, cg_i64(k, 0), cg_i64(k, g->c));
	LLVMValueRef plane = cg_gep(k, NULL, dxi, cg_imul(k, c, cg_i64(k, g->h * g->w)));
	if (ph.h.count[1] > 0) {
		LLVMValueRef a = cg_for(k, &la, cg_i64(k, 0), cg_i64(k, ph.h.count[1]));
		interleave(k, g, &ph, out, c, a, 0, plane);
		interleave(k, g, &ph, out, c, a, 1, plane);
		cg_keep_loop(&la);
		cg_end_for(k, &la, NULL);
	}
	if (ph.h.count[0] > ph.h.count[1])
		interleave(k, g, &ph, out, c, cg_i64(k, ph.h.count[1]), 0, plane);
	cg_keep_loop(&lc);
	cg_end_for(k, &lc, NULL);
	cg_conv_epilogue_tile(k, n, img, cg_i64(k, 1));
	cg_end_for(k, &l, NULL);
}
