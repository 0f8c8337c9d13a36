/* kern_pool.c: the reference kernels of pooling: avgpool, avgpool_grad,
 * maxpool, maxpool_grad, global_avgpool, global_avgpool_grad.
 *
 * All work on [N,C,H,W] one plane (n,c) at a time.  avgpool is VALID with
 * stride = window, so rows and columns beyond the last full tile take no
 * part (and get a zero gradient).  maxpool pads with −∞: padding never wins,
 * and a window entirely in padding gives −∞ and routes nothing back.  As in
 * PyTorch, a NaN in a window wins (the last NaN, in row-major order), so
 * NaN propagates; otherwise the gradient goes to the first maximum of the
 * window, the element maxpool's strict comparison keeps.
 *
 * Compiled once per real type (kernels.h).  Preconditions: the node
 * verified.  Results never overlap operands. */
#include <math.h>

#include "kernels.h"

typedef struct {
	int64_t planes;   /* N·C */
	int64_t h, w;     /* input plane */
	int64_t ho, wo;   /* output plane */
} pool_geom;

static pool_geom planes_of(const ir_type *x, const ir_type *y)
{
	pool_geom p = {x->dim[0] * x->dim[1], x->dim[2], x->dim[3], y->dim[2], y->dim[3]};
	return p;
}

bool K(rt_k_avgpool)(const rt_kargs *a, rt_err *e)
{
	pool_geom p = planes_of(&a->n->in[0]->type, &a->n->type);
	int64_t k = ir_node_int(a->n, IR_ATTR_WINDOW);
	double area = (double)(k * k);
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t pl = 0; pl < p.planes; pl++) {
		const real *xp = x + pl * p.h * p.w;
		real *yp = y + pl * p.ho * p.wo;
		for (int64_t i = 0; i < p.ho; i++)
			for (int64_t j = 0; j < p.wo; j++) {
				double sum = 0;
				for (int64_t r = i * k; r < (i + 1) * k; r++)
					for (int64_t c = j * k; c < (j + 1) * k; c++)
						sum += (double)xp[r * p.w + c];
				yp[i * p.wo + j] = (real)(sum / area);
			}
	}
	return true;
}

/* avgpool_grad(dy): the result type (x's) is declared. */
bool K(rt_k_avgpool_grad)(const rt_kargs *a, rt_err *e)
{
	pool_geom p = planes_of(&a->n->type, &a->n->in[0]->type);
	int64_t k = ir_node_int(a->n, IR_ATTR_WINDOW);
	double area = (double)(k * k);
	const real *dy = a->in[0];
	real *dx = a->out;
	for (int64_t pl = 0; pl < p.planes; pl++) {
		const real *dyp = dy + pl * p.ho * p.wo;
		real *dxp = dx + pl * p.h * p.w;
		for (int64_t r = 0; r < p.h; r++)
			for (int64_t c = 0; c < p.w; c++) {
				bool in = r / k < p.ho && c / k < p.wo;
				dxp[r * p.w + c] = in ? (real)((double)dyp[(r / k) * p.wo + c / k] / area) : 0;
			}
	}
	return true;
}

typedef struct {
	int64_t k, s, top, left;
} window;

static window window_of(const ir_node *n)
{
	const ir_attr *pad = ir_node_attr(n, IR_ATTR_PAD);
	window w = {ir_node_int(n, IR_ATTR_WINDOW), ir_node_int(n, IR_ATTR_STRIDE), pad->u.ints.v[0],
		pad->u.ints.v[2]};
	return w;
}

/* The offset in plane xp of the first maximum of output (i,j)'s window (of
 * its last NaN if it holds one), or -1 when the window lies entirely in
 * padding: PyTorch's "val > maxval || isnan(val)". */
static int64_t argmax(const pool_geom *p, const window *w, const real *xp, int64_t i, int64_t j)
{
	int64_t best = -1;
	for (int64_t r = i * w->s - w->top; r < i * w->s - w->top + w->k; r++) {
		if (r < 0 || r >= p->h)
			continue;
		for (int64_t c = j * w->s - w->left; c < j * w->s - w->left + w->k; c++) {
			if (c < 0 || c >= p->w)
				continue;
			int64_t o = r * p->w + c;
			if (best < 0 || xp[o] > xp[best] || isnan(xp[o]))
				best = o;
		}
	}
	return best;
}

bool K(rt_k_maxpool)(const rt_kargs *a, rt_err *e)
{
	pool_geom p = planes_of(&a->n->in[0]->type, &a->n->type);
	window w = window_of(a->n);
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t pl = 0; pl < p.planes; pl++) {
		const real *xp = x + pl * p.h * p.w;
		real *yp = y + pl * p.ho * p.wo;
		for (int64_t i = 0; i < p.ho; i++)
			for (int64_t j = 0; j < p.wo; j++) {
				int64_t o = argmax(&p, &w, xp, i, j);
				yp[i * p.wo + j] = o < 0 ? (real)-INFINITY : xp[o];
			}
	}
	return true;
}

/* maxpool_grad(dy, x): windows may overlap, so contributions add up. */
bool K(rt_k_maxpool_grad)(const rt_kargs *a, rt_err *e)
{
	pool_geom p = planes_of(&a->n->in[1]->type, &a->n->in[0]->type);
	window w = window_of(a->n);
	const real *dy = a->in[0], *x = a->in[1];
	real *dx = a->out;
	for (int64_t i = 0; i < p.planes * p.h * p.w; i++)
		dx[i] = 0;
	for (int64_t pl = 0; pl < p.planes; pl++) {
		const real *xp = x + pl * p.h * p.w, *dyp = dy + pl * p.ho * p.wo;
		real *dxp = dx + pl * p.h * p.w;
		for (int64_t i = 0; i < p.ho; i++)
			for (int64_t j = 0; j < p.wo; j++) {
				int64_t o = argmax(&p, &w, xp, i, j);
				if (o >= 0)
					dxp[o] += dyp[i * p.wo + j];
			}
	}
	return true;
}

bool K(rt_k_global_avgpool)(const rt_kargs *a, rt_err *e)
{
	const ir_type *xt = &a->n->in[0]->type;
	int64_t planes = xt->dim[0] * xt->dim[1], hw = xt->dim[2] * xt->dim[3];
	const real *x = a->in[0];
	real *y = a->out;
	for (int64_t pl = 0; pl < planes; pl++) {
		double sum = 0;
		for (int64_t k = 0; k < hw; k++)
			sum += (double)x[pl * hw + k];
		y[pl] = (real)(sum / (double)hw);
	}
	return true;
}

/* global_avgpool_grad(dy [N,C]): the result type [N,C,H,W] is declared. */
bool K(rt_k_global_avgpool_grad)(const rt_kargs *a, rt_err *e)
{
	const ir_type *xt = &a->n->type;
	int64_t planes = xt->dim[0] * xt->dim[1], hw = xt->dim[2] * xt->dim[3];
	const real *dy = a->in[0];
	real *dx = a->out;
	for (int64_t pl = 0; pl < planes; pl++) {
		real v = (real)((double)dy[pl] / (double)hw);
		for (int64_t k = 0; k < hw; k++)
			dx[pl * hw + k] = v;
	}
	return true;
}
