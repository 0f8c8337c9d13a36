/* kernel_net.c: the harness of the kernel test suites (kernel_net.h). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_net.h"

/* ---- data ------------------------------------------------------------- */

uint64_t rng = 1; /* xorshift state of uniform() */

double uniform(double lo, double hi)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

int64_t elems(const ir_node *n) { return ir_type_elems(&n->type); }

/* The larger of two errors, NaN counting as infinite (fmax would drop it). */
double worse(double err, double e) { return isnan(e) ? HUGE_VAL : fmax(err, e); }

/* max |got − want| / max |want|: the error relative to the tensor's scale. */
double rel_err(const double *got, const double *want, int64_t n)
{
	double diff = 0, scale = 1e-300;
	for (int64_t i = 0; i < n; i++) {
		diff = worse(diff, fabs(got[i] - want[i]));
		scale = fmax(scale, fabs(want[i]));
	}
	return diff / scale;
}

void report(const char *what, double err, double tol)
{
	if (getenv("KERN_VERBOSE"))
		fprintf(stderr, "%-44s %.3g (tol %.0e)\n", what, err, tol);
	ck_assert_msg(err <= tol, "%s: error %g > %g", what, err, tol);
}

void check_close(const char *what, const double *got, const double *want, int64_t n,
	double tol)
{
	report(what, rel_err(got, want, n), tol);
}

/* ---- a tiny interpreter ------------------------------------------------ */

void net_init(net *t, ir_dtype dt)
{
	memset(t, 0, sizeof *t);
	t->g = ir_graph_new("k");
	t->dt = dt;
	t->round = dt == IR_F32;
}

void net_free(net *t)
{
	for (int i = 0; i < NET_MAX; i++)
		free(t->val[i]);
	ir_graph_free(t->g);
}

double *dval(net *t, const ir_node *n) { return t->val[n->id]; }

/* An input of dtype dt; its value is allocated, not filled. */
ir_node *leaf(net *t, ir_dtype dt, int rank, const int64_t *dims)
{
	ir_node *n = ir_node_new(t->g, IR_OP_INPUT, NULL, 0);
	ir_node_set_str(t->g, n, IR_ATTR_NAME, "x");
	n->type = ir_type_make(dt, rank, dims);
	ck_assert_int_lt(n->id, NET_MAX);
	t->val[n->id] = calloc((size_t)elems(n), dt == IR_I32 ? sizeof(int32_t) : sizeof(double));
	return n;
}

/* An input of the net's dtype, uniform in [lo, hi], rounded to float for an
 * f32 net so that the f32 and f64 runs see the same numbers. */
ir_node *input(net *t, int rank, const int64_t *dims, double lo, double hi)
{
	ir_node *n = leaf(t, t->dt, rank, dims);
	double *v = dval(t, n);
	for (int64_t i = 0; i < elems(n); i++)
		v[i] = t->round ? (double)(float)uniform(lo, hi) : uniform(lo, hi);
	return n;
}

ir_node *op(net *t, ir_op o, int nin, ...)
{
	ir_node *in[RT_MAX_OPERANDS];
	va_list ap;
	va_start(ap, nin);
	for (int i = 0; i < nin; i++)
		in[i] = va_arg(ap, ir_node *);
	va_end(ap);
	ir_node *n = ir_node_new(t->g, o, in, nin);
	ck_assert_int_lt(n->id, NET_MAX);
	return n;
}

/* Infers (or, when set, checks) n's type. */
ir_node *fin(ir_node *n)
{
	ir_diags d;
	ir_diags_init(&d);
	bool ok = ir_node_infer(n, &d);
	ck_assert_msg(ok, "infer: %s", ok ? "" : d.items[0].msg);
	ir_diags_free(&d);
	return n;
}

ir_node *declare(ir_node *n, const ir_node *like)
{
	n->type = like->type;
	return fin(n);
}

void set_window(net *t, ir_node *n, int64_t s, const int64_t pad[4])
{
	ir_node_set_int(t->g, n, IR_ATTR_STRIDE, s);
	ir_node_set_ints(t->g, n, IR_ATTR_PAD, pad, 4);
}

/* Runs n's kernel with operand values vals[n->in[i]->id], converting float
 * operands to n's dtype, with a workspace of exactly the declared size.
 * Returns the result as doubles (caller frees). */
double *run(const ir_node *n, void *const *vals)
{
	rt_kargs a = {.n = n};
	void *tmp[RT_MAX_OPERANDS] = {0};
	for (int i = 0; i < n->nin; i++) {
		const ir_node *o = n->in[i];
		a.in[i] = vals[o->id];
		if (o->type.dtype == IR_F32) {
			float *f = tmp[i] = malloc((size_t)elems(o) * sizeof *f);
			for (int64_t k = 0; k < elems(o); k++)
				f[k] = (float)((double *)vals[o->id])[k];
			a.in[i] = f;
		}
	}
	int64_t ws = rt_kernel_workspace(n);
	a.ws = ws ? malloc((size_t)ws) : NULL;
	a.out = malloc((size_t)ir_type_bytes(&n->type));
	rt_kernel_fn f = rt_kernel_get(n);
	rt_err e;
	ck_assert_ptr_nonnull(f);
	ck_assert_msg(f(&a, &e), "%s: %s", ir_op_name(n->op), e.msg);
	double *r = malloc((size_t)elems(n) * sizeof *r);
	for (int64_t k = 0; k < elems(n); k++)
		r[k] = n->type.dtype == IR_F32 ? (double)((float *)a.out)[k] : ((double *)a.out)[k];
	free(a.out);
	free(a.ws);
	for (int i = 0; i < n->nin; i++)
		free(tmp[i]);
	return r;
}

/* Evaluates the non-input nodes 0..last in list order. */
void net_eval(net *t, int last)
{
	for (int i = 0; i <= last && i < t->g->n; i++) {
		ir_node *n = t->g->nodes[i];
		if (n->op == IR_OP_INPUT)
			continue;
		free(t->val[i]);
		t->val[i] = run(n, t->val);
	}
}

/* ---- finite differences ------------------------------------------------ */

/* Checks that grad's value equals ∂/∂x Σ dy·y by central differences, x an
 * input, y a node computed from it (re-evaluated up to y per coordinate).
 * The sum is taken over dy·(y₊ − y₋), so that the elements x does not
 * touch cancel exactly instead of adding rounding noise. */
void fd_check(net *t, ir_node *x, ir_node *y, ir_node *dy, ir_node *grad, double tol,
	const char *what)
{
	net_eval(t, t->g->n - 1);
	ck_assert(ir_type_same_shape(&x->type, &grad->type));
	double *xv = dval(t, x), *g = dval(t, grad), *dyv = dval(t, dy), err = 0;
	double *yp = malloc((size_t)elems(y) * sizeof *yp);
	for (int64_t i = 0; i < elems(x); i++) {
		double x0 = xv[i], fd = 0;
		xv[i] = x0 + FD_H;
		net_eval(t, y->id);
		memcpy(yp, dval(t, y), (size_t)elems(y) * sizeof *yp);
		xv[i] = x0 - FD_H;
		net_eval(t, y->id);
		xv[i] = x0;
		for (int64_t k = 0; k < elems(y); k++)
			fd += dyv[k] * (yp[k] - dval(t, y)[k]);
		fd /= 2 * FD_H;
		err = worse(err, fabs(g[i] - fd) / fmax(fmax(fabs(g[i]), fabs(fd)), FD_FLOOR));
	}
	free(yp);
	net_eval(t, t->g->n - 1);
	report(what, err, tol);
}


/* ---- direct kernel calls ----------------------------------------------- */

void call(const ir_node *n, void *out, const void *in0, const void *in1, const void *in2)
{
	rt_kargs a = {.n = n, .out = out, .in = {in0, in1, in2}};
	rt_err e;
	ck_assert_msg(rt_kernel_get(n)(&a, &e), "%s", e.msg);
}

void call_n(const ir_node *n, void *out, const void *const *in)
{
	rt_kargs a = {.n = n, .out = out};
	for (int i = 0; i < n->nin; i++)
		a.in[i] = in[i];
	rt_err e;
	ck_assert_msg(rt_kernel_get(n)(&a, &e), "%s: %s", ir_op_name(n->op), e.msg);
}

/* Copies doubles into a buffer of dtype dt (at most 8 elements). */
void *as(ir_dtype dt, const double *v, int n, void *buf)
{
	for (int i = 0; i < n; i++)
		if (dt == IR_F32)
			((float *)buf)[i] = (float)v[i];
		else
			((double *)buf)[i] = v[i];
	return buf;
}

void check_buf(const char *what, ir_dtype dt, const void *got, const double *want, int n)
{
	double g[8];
	for (int i = 0; i < n; i++)
		g[i] = dt == IR_F32 ? (double)((const float *)got)[i] : ((const double *)got)[i];
	check_close(what, g, want, n, dt == IR_F32 ? 1e-7 : 1e-15);
}

