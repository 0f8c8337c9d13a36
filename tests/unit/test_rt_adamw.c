/* test_rt_adamw.c: the AdamW kernels (runtime/kern_optim.c) against the
 * revvit-b4 fixture (tests/data/revvit-b4/README.md), an independent PyTorch
 * implementation: from each of its 55 parameters and its float64 gradient,
 * one step from m = v = t = 0 (lr 1e-3, betas 0.9 and 0.999, eps 1e-8,
 * weight decay 0.05 on the ".w" tensors), in f64 and in f32, compared with
 * the fixture's step_f64 (the weights) and adam_f64 (the moments) within
 * the README's tolerances. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_net.h"
#include "runtime_suites.h"

#define LR 1e-3
#define WD 0.05

static const char *root(void)
{
	const char *r = getenv("REVC_SOURCE_ROOT");
	return r ? r : ".";
}

static rt_npy read_npy(const char *dir, const char *name)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/tests/data/revvit-b4/%s/%s.npy", root(), dir, name);
	rt_npy a;
	rt_err e;
	ck_assert_msg(rt_npy_read(path, &a, &e), "%s", e.msg);
	return a;
}

static int64_t npy_elems(const rt_npy *a)
{
	int64_t n = 1;
	for (int i = 0; i < a->rank; i++)
		n *= a->dim[i];
	return n;
}

/* a's values as doubles (malloc'd). */
static double *values(const rt_npy *a)
{
	double *v = malloc(((size_t)npy_elems(a) + 1) * sizeof *v);
	ck_assert(v);
	rt_npy_to_f64(a, v);
	return v;
}

static ir_node *leaf_of(ir_graph *g, ir_dtype dt, int rank, const int64_t *dim)
{
	ir_node *n = ir_node_new(g, IR_OP_INPUT, NULL, 0);
	n->type = ir_type_make(dt, rank, dim);
	return n;
}

static ir_node *node(ir_graph *g, ir_op op, ir_node **in, int nin, double beta)
{
	ir_node *n = ir_node_new(g, op, in, nin);
	if (op == IR_OP_ADAMW) {
		ir_node_set_float(g, n, IR_ATTR_EPS, 1e-8);
	} else if (op == IR_OP_ADAM_BIAS || op == IR_OP_ADAM_M || op == IR_OP_ADAM_V) {
		ir_node_set_float(g, n, IR_ATTR_BETA, beta);
	}
	n->type = in[0]->type;
	return n;
}

/* A buffer of n values of dtype dt from doubles (malloc'd). */
static void *buffer(ir_dtype dt, const double *v, int64_t n)
{
	void *b = malloc(((size_t)n + 1) * (size_t)ir_dtype_size(dt));
	ck_assert(b);
	for (int64_t i = 0; i < n; i++)
		if (dt == IR_F32)
			((float *)b)[i] = (float)v[i];
		else
			((double *)b)[i] = v[i];
	return b;
}

static double at(ir_dtype dt, const void *b, int64_t i)
{
	return dt == IR_F32 ? (double)((const float *)b)[i] : ((const double *)b)[i];
}

static double max_abs(const double *b, int64_t n)
{
	double m = 0;
	for (int64_t i = 0; i < n; i++)
		m = fmax(m, fabs(b[i]));
	return m;
}

/* max|a-b| over the elements where sel (or all, sel NULL) holds. */
static double max_err(ir_dtype dt, const void *a, const double *b, int64_t n, const double *g, bool big)
{
	double m = 0;
	for (int64_t i = 0; i < n; i++)
		if (!g || (fabs(g[i]) >= 1e-6) == big)
			m = fmax(m, fabs(at(dt, a, i) - b[i]));
	return m;
}

/* One step for parameter `name` in dt; checks it; returns the worst
 * relative errors of w (on the well-conditioned elements), m and v. */
static void step_one(const char *name, ir_dtype dt, double worst[3])
{
	rt_npy pw = read_npy("params", name), pg = read_npy("grad_f64", name), pstep = read_npy("step_f64", name);
	char mn[520], vn[520];
	snprintf(mn, sizeof mn, "%s.m", name);
	snprintf(vn, sizeof vn, "%s.v", name);
	rt_npy pm = read_npy("adam_f64", mn), pv = read_npy("adam_f64", vn);
	int64_t n = npy_elems(&pw);
	ck_assert_int_eq(npy_elems(&pg), n);
	double *w0 = values(&pw), *g = values(&pg), *want_w = values(&pstep), *want_m = values(&pm), *want_v = values(&pv);

	ir_graph *gr = ir_graph_new("adamw");
	ir_node *t = leaf_of(gr, dt, 0, NULL), *lr = leaf_of(gr, dt, 0, NULL);
	ir_node *w = leaf_of(gr, dt, pw.rank, pw.dim), *gn = leaf_of(gr, dt, pw.rank, pw.dim);
	ir_node *m = leaf_of(gr, dt, pw.rank, pw.dim), *v = leaf_of(gr, dt, pw.rank, pw.dim);
	ir_node *count = node(gr, IR_OP_ADAM_COUNT, &t, 1, 0);
	ir_node *c1 = node(gr, IR_OP_ADAM_BIAS, &count, 1, 0.9), *c2 = node(gr, IR_OP_ADAM_BIAS, &count, 1, 0.999);
	ir_node *am = node(gr, IR_OP_ADAM_M, (ir_node *[]){m, gn}, 2, 0.9);
	ir_node *av = node(gr, IR_OP_ADAM_V, (ir_node *[]){v, gn}, 2, 0.999);
	ir_node *aw = node(gr, IR_OP_ADAMW, (ir_node *[]){w, am, av, lr, c1, c2}, 6, 0);
	size_t len = strlen(name);
	bool decay = len > 2 && strcmp(name + len - 2, ".w") == 0;
	if (decay)
		ir_node_set_float(gr, aw, IR_ATTR_WD, WD);
	ir_diags d;
	ir_diags_init(&d);
	ir_node *const all[] = {count, c1, c2, am, av, aw};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		ck_assert_msg(ir_node_infer(all[i], &d), "%s: %s", name, d.n ? d.items[0].msg : "");
	ir_diags_free(&d);

	double zero = 0, rate = LR;
	void *tb = buffer(dt, &zero, 1), *lrb = buffer(dt, &rate, 1), *c1b = buffer(dt, &zero, 1);
	void *c2b = buffer(dt, &zero, 1), *wb = buffer(dt, w0, n), *gb = buffer(dt, g, n);
	double *zeros = calloc((size_t)n + 1, sizeof *zeros);
	ck_assert(zeros);
	void *mb = buffer(dt, zeros, n), *vb = buffer(dt, zeros, n);
	call_n(count, tb, (const void *[]){tb});
	call_n(c1, c1b, (const void *[]){tb});
	call_n(c2, c2b, (const void *[]){tb});
	call_n(am, mb, (const void *[]){mb, gb});
	call_n(av, vb, (const void *[]){vb, gb});
	call_n(aw, wb, (const void *[]){wb, mb, vb, lrb, c1b, c2b});
	ck_assert(at(dt, tb, 0) == 1);

	double em = max_err(dt, mb, want_m, n, NULL, false) / max_abs(want_m, n);
	double ev = max_err(dt, vb, want_v, n, NULL, false) / max_abs(want_v, n);
	double ew = max_err(dt, wb, want_w, n, dt == IR_F32 ? g : NULL, true) / max_abs(want_w, n);
	double tol_mv = dt == IR_F32 ? 1e-4 : 1e-9, tol_w = dt == IR_F32 ? 1e-5 : 1e-9;
	ck_assert_msg(em <= tol_mv, "%s %s: m off by %g of max|m|", name, ir_dtype_name(dt), em);
	ck_assert_msg(ev <= tol_mv, "%s %s: v off by %g of max|v|", name, ir_dtype_name(dt), ev);
	ck_assert_msg(ew <= tol_w, "%s %s: w off by %g of max|w|", name, ir_dtype_name(dt), ew);
	if (dt == IR_F32) {
		/* Where |g| < 1e-6 the step is rounding noise times lr. */
		double small = max_err(dt, wb, want_w, n, g, false);
		ck_assert_msg(small <= 2 * LR, "%s f32: a tiny-gradient element off by %g > 2*lr", name, small);
	}
	worst[0] = fmax(worst[0], ew);
	worst[1] = fmax(worst[1], em);
	worst[2] = fmax(worst[2], ev);

	free(zeros);
	void *bufs[] = {tb, lrb, c1b, c2b, wb, gb, mb, vb, w0, g, want_w, want_m, want_v};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		free(bufs[i]);
	rt_npy *arrays[] = {&pw, &pg, &pstep, &pm, &pv};
	for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
		rt_npy_free(arrays[i]);
	ir_graph_free(gr);
}

START_TEST(test_adamw_fixture)
{
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/tests/data/revvit-b4/params", root());
	for (int k = 0; k < 2; k++) {
		ir_dtype dt = k ? IR_F64 : IR_F32;
		DIR *dp = opendir(dir);
		ck_assert_msg(dp, "cannot open %s", dir);
		int tensors = 0, decayed = 0;
		double worst[3] = {0};
		for (struct dirent *de; (de = readdir(dp));) {
			size_t len = strlen(de->d_name);
			if (len < 5 || strcmp(de->d_name + len - 4, ".npy") != 0)
				continue;
			char name[512];
			snprintf(name, sizeof name, "%.*s", (int)(len - 4), de->d_name);
			step_one(name, dt, worst);
			tensors++;
			decayed += strcmp(name + strlen(name) - 2, ".w") == 0;
		}
		closedir(dp);
		fprintf(stderr, "adamw fixture %s: worst w %.3g, m %.3g, v %.3g (of max|b| per tensor)\n",
			ir_dtype_name(dt), worst[0], worst[1], worst[2]);
		/* Every tensor, and the README's 18 weights with decay. */
		ck_assert_int_eq(tensors, 55);
		ck_assert_int_eq(decayed, 18);
	}
}
END_TEST

Suite *rt_adamw_suite(void)
{
	Suite *s = suite_create("adamw");
	TCase *tc = tcase_create("fixture");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_adamw_fixture);
	suite_add_tcase(s, tc);
	return s;
}
