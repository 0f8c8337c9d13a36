/* test_codegen.c: native code against the reference interpreter, the
 * oracle: every output (and every parameter and state tensor the step
 * updates) of a JIT-compiled graph must match the interpreter's run of the
 * same graph on the same data, within 1e-5 relative in f32 and 1e-12 in
 * f64 (max|a-b| / max|b| per tensor).  Also: identical kernels compile once,
 * whole training steps of the presets agree, and on small configurations
 * no preset has, every engine and strategy gives ordinary backprop's
 * gradients.
 *
 * The bounds against the measured worst (CG_VERBOSE=1 prints every
 * comparison; 2-core AMD EPYC Zen 4): f32 7.4e-7 natively (AVX-512) and
 * 6.9e-7 with REVC_CPU=x86-64-v3 and OpenBLAS's Haswell kernels, both in
 * the two-step fashion training step (convolutions alone: 3.3e-7, 4.2e-7);
 * f64 2.1e-14 on both (global average pooling).  So 1e-5 and 1e-12 leave
 * margins of 13 and 47 on both ISAs, while a wrong kernel is off by O(1).
 * These graphs are small and shallow, so no ReLU input lies within
 * rounding of its kink and the errors are rounding alone (the deep
 * presets of test_model.c are another matter: see its f32 strategies).
 *
 * The harness (cgt_*) is shared with test_cg_ops.c and test_cg_norm.c. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "codegen_suites.h"
#include "fe.h"
#include "internal.h" /* codegen's: cg_op_impl_get, cg_elementwise */
#include "passes.h"
#include "rt.h"
#include "test_cpu.h"

/* ---- the harness ------------------------------------------------------------ */

static double value(const void *p, ir_dtype dt, int64_t i)
{
	return dt == IR_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* max|a-b| / max|b| over the finite elements; a non-finite element must be
 * the same non-finite value in both, or the error is infinite. */
double cgt_rel_err(const void *a, const void *b, ir_dtype dt, int64_t n)
{
	double diff = 0, scale = 1e-300;
	for (int64_t i = 0; i < n; i++) {
		double x = value(a, dt, i), y = value(b, dt, i);
		if (!isfinite(x) || !isfinite(y)) {
			bool same = (isnan(x) && isnan(y)) || x == y;
			if (!same)
				return INFINITY;
			continue;
		}
		diff = fmax(diff, fabs(x - y));
		scale = fmax(scale, fabs(y));
	}
	return diff / scale;
}

void cgt_plan(ir_graph *g, int threads)
{
	cg_options o = {.threads = threads};
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.workspace = cg_workspace;
	ctx.workspace_user = &o;
	ps_options opts = {.only = "dce,schedule,fuse,liveness,plan", .verify_each = true};
	int rc = ps_run(g, &ctx, &opts);
	ck_assert_msg(rc == 0, "planning failed: %s", ctx.diags.n ? ctx.diags.items[0].msg : "");
	ps_ctx_free(&ctx);
}

static void set_value(void *p, ir_dtype dt, int64_t i, double v)
{
	if (dt == IR_F32)
		((float *)p)[i] = (float)v;
	else
		((double *)p)[i] = v;
}

/* Random inputs from seed: floats in [-1, 1), labels in range; then the
 * pokes that name an input. */
static void fill(rt_exec *x, const ir_graph *g, uint64_t seed, const cgt_poke *pokes, int npokes)
{
	rt_rng r;
	rt_rng_seed(&r, seed);
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_INPUT)
			continue;
		const ir_type *t;
		void *p = rt_exec_input(x, ir_node_str(n, IR_ATTR_NAME), &t);
		int64_t classes = 2;
		for (int j = 0; j < g->n; j++)
			if ((g->nodes[j]->op == IR_OP_SOFTMAX_XENT || g->nodes[j]->op == IR_OP_SOFTMAX_XENT_GRAD) &&
			    g->nodes[j]->in[1] == n)
				classes = g->nodes[j]->in[0]->type.dim[1];
		for (int64_t k = 0; k < ir_type_elems(t); k++) {
			if (t->dtype == IR_I32)
				((int32_t *)p)[k] = (int32_t)rt_rng_below(&r, (uint64_t)classes);
			else if (t->dtype == IR_F32)
				((float *)p)[k] = (float)(2 * rt_rng_uniform(&r) - 1);
			else
				((double *)p)[k] = 2 * rt_rng_uniform(&r) - 1;
		}
		/* A scalar input is a learning rate: keep it small. */
		if (t->rank == 0 && t->dtype == IR_F32)
			*(float *)p = 0.05f;
		else if (t->rank == 0 && t->dtype == IR_F64)
			*(double *)p = 0.05;
	}
	for (int k = 0; k < npokes; k++) {
		const ir_type *t;
		void *p = rt_exec_input(x, pokes[k].name, &t);
		if (p) {
			ck_assert_int_lt(pokes[k].at, ir_type_elems(t));
			set_value(p, t->dtype, pokes[k].at, pokes[k].value);
		}
	}
}

/* Output `name` of a run as doubles, into out. */
static void copy_output(const rt_exec *x, const char *name, double *out)
{
	const ir_type *t;
	const void *p = rt_exec_output(x, name, &t);
	ck_assert_msg(p, "no output %s", name);
	for (int64_t i = 0; i < ir_type_elems(t); i++)
		out[i] = value(p, t->dtype, i);
}

double cgt_compare(ir_graph *g, int threads, uint64_t seed, int steps)
{
	return cgt_compare_poked(g, threads, seed, steps, NULL, 0, NULL, NULL, NULL);
}

double cgt_compare_poked(ir_graph *g, int threads, uint64_t seed, int steps, const cgt_poke *pokes,
	int npokes, const char *out, double *jit, double *ref)
{
	rt_err e;
	rt_store sj, si;
	rt_store_init(&sj);
	rt_store_init(&si);
	ck_assert_msg(rt_store_init_from_graph(&sj, g, seed, &e), "%s", e.msg);
	ck_assert(rt_store_init_from_graph(&si, g, seed, &e));
	/* Random parameters and state, so that every path is exercised. */
	rt_rng r;
	rt_rng_seed(&r, seed + 7);
	for (int i = 0; i < sj.n; i++) {
		int64_t n = ir_type_elems(&sj.t[i].type);
		for (int64_t k = 0; k < n; k++) {
			double v = rt_rng_uniform(&r) + (strstr(sj.t[i].name, "var") ? 0.5 : -0.5);
			if (sj.t[i].type.dtype == IR_F32)
				((float *)sj.t[i].data)[k] = ((float *)si.t[i].data)[k] = (float)v;
			else
				((double *)sj.t[i].data)[k] = ((double *)si.t[i].data)[k] = v;
		}
	}
	for (int k = 0; k < npokes; k++) {
		rt_tensor *tj = rt_store_find(&sj, pokes[k].name), *ti = rt_store_find(&si, pokes[k].name);
		if (tj) {
			ck_assert_int_lt(pokes[k].at, ir_type_elems(&tj->type));
			set_value(tj->data, tj->type.dtype, pokes[k].at, pokes[k].value);
			set_value(ti->data, ti->type.dtype, pokes[k].at, pokes[k].value);
		}
	}
	cg_options o = {.threads = threads, .optimize = true, .cpu = test_cpu()};
	cg_stats stats = {0};
	ir_diags d;
	ir_diags_init(&d);
	cg_jit *j = cg_jit_compile(g, &o, &stats, &d);
	ck_assert_msg(j, "compile: %s", d.n ? d.items[0].msg : "");
	ir_diags_free(&d);
	rt_pool *pool = rt_pool_new(threads);
	rt_exec *xj = rt_exec_new_native(g, &sj, cg_jit_step(j), pool, &e);
	ck_assert_msg(xj, "%s", e.msg);
	rt_exec *xi = rt_exec_new(g, &si, RT_EXEC_TRACK, &e);
	ck_assert_msg(xi, "%s", e.msg);
	double worst = 0;
	for (int s = 0; s < steps; s++) {
		fill(xj, g, seed + (uint64_t)s, pokes, npokes);
		fill(xi, g, seed + (uint64_t)s, pokes, npokes);
		ck_assert_msg(rt_exec_run(xj, &e), "%s", e.msg);
		ck_assert_msg(rt_exec_run(xi, &e), "%s", e.msg);
		if (out && s == steps - 1) {
			copy_output(xj, out, jit);
			copy_output(xi, out, ref);
		}
		for (int i = 0; i < g->n; i++) {
			const ir_node *n = g->nodes[i];
			if (n->op != IR_OP_OUTPUT)
				continue;
			const char *name = ir_node_str(n, IR_ATTR_NAME);
			const ir_type *t;
			const void *a = rt_exec_output(xj, name, &t), *b = rt_exec_output(xi, name, NULL);
			double err = cgt_rel_err(a, b, t->dtype, ir_type_elems(t));
			if (getenv("CG_VERBOSE") && err > 1e-7)
				fprintf(stderr, "  output %s: %g\n", name, err);
			worst = fmax(worst, err);
		}
	}
	for (int i = 0; i < sj.n; i++) {
		double err = cgt_rel_err(sj.t[i].data, si.t[i].data, sj.t[i].type.dtype, ir_type_elems(&sj.t[i].type));
		if (getenv("CG_VERBOSE") && err > 1e-7)
			fprintf(stderr, "  tensor %s: %g\n", sj.t[i].name, err);
		worst = fmax(worst, err);
	}
	if (getenv("CG_VERBOSE"))
		fprintf(stderr, "%s %s, %d threads: worst %g\n", g->name,
			ir_dtype_name(sj.n ? sj.t[0].type.dtype : g->nodes[0]->type.dtype), threads, worst);
	rt_exec_free(xj);
	rt_exec_free(xi);
	rt_pool_free(pool);
	cg_jit_free(j);
	rt_store_free(&sj);
	rt_store_free(&si);
	return worst;
}

/* ---- graphs ----------------------------------------------------------------- */

static ir_node *input(ir_graph *g, const char *name, ir_dtype dt, int rank, const int64_t *dims)
{
	ir_node *n = ir_node_new(g, IR_OP_INPUT, NULL, 0);
	ir_node_set_str(g, n, IR_ATTR_NAME, name);
	n->type = ir_type_make(dt, rank, dims);
	return n;
}

static ir_node *output(ir_graph *g, ir_node *v, const char *name)
{
	ir_node *n = ir_node_new(g, IR_OP_OUTPUT, &v, 1);
	ir_node_set_str(g, n, IR_ATTR_NAME, name);
	n->type = v->type;
	return n;
}

static ir_node *typed(ir_node *n)
{
	ir_diags d;
	ir_diags_init(&d);
	bool ok = ir_node_infer(n, &d);
	ck_assert_msg(ok, "%s", ok ? "" : d.items[0].msg);
	ir_diags_free(&d);
	return n;
}

static ir_node *op2(ir_graph *g, ir_op op, ir_node *a, ir_node *b)
{
	ir_node *in[2] = {a, b};
	return ir_node_new(g, op, in, b ? 2 : 1);
}

typedef cgt_conv conv_case;

static const conv_case conv_cases[] = {
	{3, 4, 9, 9, 6, 3, 1, {1, 1, 1, 1}},
	{2, 3, 8, 8, 5, 3, 2, {0, 1, 0, 1}},   /* TF SAME at stride 2 */
	{3, 4, 7, 7, 2, 3, 2, {1, 1, 1, 1}},
	{2, 6, 5, 5, 4, 1, 1, {0, 0, 0, 0}},   /* 1x1: no im2col */
	{2, 6, 6, 6, 4, 1, 2, {0, 0, 0, 0}},   /* 1x1 stride 2 */
	{4, 16, 14, 14, 32, 3, 2, {0, 1, 0, 1}}, /* a RevNet stage boundary */
	{2, 8, 8, 8, 17, 3, 1, {1, 1, 1, 1}},   /* whole vectors; a short row block */
	{3, 5, 16, 16, 9, 3, 1, {1, 1, 1, 1}},  /* many column blocks */
	{3, 1, 28, 28, 16, 3, 1, {1, 1, 1, 1}}, /* fashion's init: one input plane, rows of 28 */
	{3, 8, 28, 28, 16, 3, 2, {0, 1, 0, 1}}, /* fashion's stage boundary: phase-split rows of 15 */
	{3, 3, 11, 9, 4, 3, 2, {2, 0, 1, 2}},   /* stride 2, odd sizes, asymmetric padding */
	{2, 3, 10, 13, 5, 2, 2, {0, 0, 1, 0}},  /* a 2x2 window at stride 2 */
	{2, 5, 13, 15, 6, 3, 1, {0, 2, 2, 1}},  /* stride 1, asymmetric padding */
	{2, 4, 37, 37, 3, 3, 2, {1, 1, 1, 1}},  /* rows wider than two vectors */
};
#define NCONV ((int)(sizeof conv_cases / sizeof conv_cases[0]))

ir_graph *cgt_conv_graph(const cgt_conv *c, ir_dtype dt, int threads)
{
	ir_graph *g = ir_graph_new("conv");
	int64_t xd[4] = {c->n, c->c, c->h, c->w}, wd[4] = {c->o, c->c, c->k, c->k};
	ir_node *x = input(g, "x", dt, 4, xd), *w = input(g, "w", dt, 4, wd);
	ir_node *y = op2(g, IR_OP_CONV2D, x, w);
	ir_node_set_int(g, y, IR_ATTR_STRIDE, c->s);
	ir_node_set_ints(g, y, IR_ATTR_PAD, c->pad, 4);
	typed(y);
	ir_node *dy = input(g, "dy", dt, 4, y->type.dim);
	ir_node *dx = op2(g, IR_OP_CONV2D_DX, dy, w);
	ir_node *dw = op2(g, IR_OP_CONV2D_DW, dy, x);
	for (int k = 0; k < 2; k++) {
		ir_node *n = k ? dw : dx;
		ir_node_set_int(g, n, IR_ATTR_STRIDE, c->s);
		ir_node_set_ints(g, n, IR_ATTR_PAD, c->pad, 4);
		n->type = k ? w->type : x->type;
		typed(n);
	}
	output(g, y, "y");
	output(g, dx, "dx");
	output(g, dw, "dw");
	cgt_plan(g, threads);
	return g;
}

void cgt_conv_text_of(const cgt_conv *c, ir_dtype dt, cgt_conv_text *t)
{
	const char *d = dt == IR_F32 ? "f32" : "f64";
	int64_t ho = (c->h + c->pad[0] + c->pad[1] - c->k) / c->s + 1;
	int64_t wo = (c->w + c->pad[2] + c->pad[3] - c->k) / c->s + 1;
	snprintf(t->x, sizeof t->x, "%s[%lld,%lld,%lld,%lld]", d, (long long)c->n, (long long)c->c, (long long)c->h,
		(long long)c->w);
	snprintf(t->w, sizeof t->w, "%s[%lld,%lld,%lld,%lld]", d, (long long)c->o, (long long)c->c, (long long)c->k,
		(long long)c->k);
	snprintf(t->y, sizeof t->y, "%s[%lld,%lld,%lld,%lld]", d, (long long)c->n, (long long)c->o, (long long)ho,
		(long long)wo);
	snprintf(t->xc, sizeof t->xc, "%s[%lld]", d, (long long)c->c);
	snprintf(t->xs, sizeof t->xs, "%s[2,%lld]", d, (long long)c->c);
	snprintf(t->yc, sizeof t->yc, "%s[%lld]", d, (long long)c->o);
	snprintf(t->ys, sizeof t->ys, "%s[2,%lld]", d, (long long)c->o);
	snprintf(t->attrs, sizeof t->attrs, "{stride=%lld, pad=[%lld,%lld,%lld,%lld]}", (long long)c->s,
		(long long)c->pad[0], (long long)c->pad[1], (long long)c->pad[2], (long long)c->pad[3]);
}

void cgt_line(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	ck_assert(k > 0 && (size_t)k < len - *at);
	*at += (size_t)k;
}

START_TEST(test_conv)
{
	ir_dtype dt = _i / NCONV % 2 ? IR_F64 : IR_F32;
	int threads = _i / (2 * NCONV) ? 2 : 1;
	ir_graph *g = cgt_conv_graph(&conv_cases[_i % NCONV], dt, threads);
	double err = cgt_compare(g, threads, 3, 1);
	ck_assert_msg(err <= (dt == IR_F32 ? 1e-5 : 1e-12), "case %d: %g", _i, err);
	ir_graph_free(g);
}
END_TEST

#define CHAIN(t) \
	"graph @chain {\n" \
	"  %0 = input {name=\"x\"} : " t "[3,4,5,5]\n" \
	"  %1 = input {name=\"dy\"} : " t "[3,4,5,5]\n" \
	"  %2 = input {name=\"lr\"} : " t "[]\n" \
	"  $gamma.gamma = param : " t "[4]\n" \
	"  $gamma.beta = param : " t "[4]\n" \
	"  $gamma.gamma.mom = state : " t "[4]\n" \
	"  %6 = bn_stats(%0) : " t "[2,4]\n" \
	"  %7 = bn_norm(%0, %6, $gamma.gamma, $gamma.beta) {eps=0.001} : " t "[3,4,5,5]\n" \
	"  %8 = relu(%7) : " t "[3,4,5,5]\n" \
	"  %9 = output(%8) {name=\"y\"} : " t "[3,4,5,5]\n" \
	"  %10 = relu_grad(%1, %8) : " t "[3,4,5,5]\n" \
	"  %11 = reduce_sum(%10) {axes=[0,2,3]} : " t "[4]\n" \
	"  %12 = bn_dgamma(%10, %0, %6) {eps=0.001} : " t "[4]\n" \
	"  %13 = bn_dx(%10, %0, %6, $gamma.gamma, %12, %11) {eps=0.001} : " t "[3,4,5,5]\n" \
	"  %14 = add(%13, %1) : " t "[3,4,5,5]\n" \
	"  %15 = scale(%14) {factor=0.5} : " t "[3,4,5,5]\n" \
	"  %16 = output(%15) {name=\"dx\"} : " t "[3,4,5,5]\n" \
	"  %17 = momentum($gamma.gamma.mom, %12) {momentum=0.9} : " t "[4] after(%7)\n" \
	"  %18 = sgd($gamma.gamma, %17, %2) : " t "[4] after(%7, %13)\n" \
	"}\n"

ir_graph *cgt_parse(const char *name, const char *text)
{
	ir_diags d;
	ir_diags_init(&d);
	ir_graph *g = ir_parse(name, text, strlen(text), &d);
	ck_assert_msg(g && ir_verify(g, &d), "%s\n%s", d.n ? d.items[0].msg : "", text);
	ir_diags_free(&d);
	return g;
}

/* IR text parsed, verified and planned for `threads` threads. */
static ir_graph *parse_planned(const char *name, const char *text, int threads)
{
	ir_graph *g = cgt_parse(name, text);
	cgt_plan(g, threads);
	return g;
}

/* A training-shaped chain that fuses: BN apply + ReLU, ReLU backward into
 * BN backward + accumulation, and a momentum + SGD update. */
START_TEST(test_fusion_chain)
{
	ir_dtype dt = _i % 2 ? IR_F64 : IR_F32;
	int threads = _i / 2 ? 2 : 1;
	ir_graph *g = parse_planned("chain.ir", dt == IR_F32 ? CHAIN("f32") : CHAIN("f64"), threads);
	int grouped = 0;
	for (int i = 0; i < g->n; i++)
		grouped += g->nodes[i]->group >= 0;
	ck_assert_int_ge(grouped, 6);
	double err = cgt_compare(g, threads, 11, 2);
	ck_assert_msg(err <= (dt == IR_F32 ? 1e-5 : 1e-12), "case %d: %g", _i, err);
	ir_graph_free(g);
}
END_TEST

#define ADAMW(t) \
	"graph @adamw {\n" \
	"  %0 = input {name=\"lr\"} : " t "[]\n" \
	"  %1 = input {name=\"g\"} : " t "[2,3]\n" \
	"  %2 = input {name=\"gb\"} : " t "[3]\n" \
	"  $adamw.t = state : " t "[]\n" \
	"  $d.w = param : " t "[2,3]\n" \
	"  $d.w.m = state : " t "[2,3]\n" \
	"  $d.w.v = state : " t "[2,3]\n" \
	"  $d.b = param : " t "[3]\n" \
	"  $d.b.m = state : " t "[3]\n" \
	"  $d.b.v = state : " t "[3]\n" \
	"  %10 = opt adam_count($adamw.t) : " t "[]\n" \
	"  %11 = opt adam_bias(%10) {beta=0.9} : " t "[]\n" \
	"  %12 = opt adam_bias(%10) {beta=0.999} : " t "[]\n" \
	"  %13 = opt adam_m($d.w.m, %1) {beta=0.9} : " t "[2,3] after(%11, %12)\n" \
	"  %14 = opt adam_v($d.w.v, %1) {beta=0.999} : " t "[2,3] after(%11, %12)\n" \
	"  %15 = opt adamw($d.w, %13, %14, %0, %11, %12) {eps=1e-08, wd=0.05} : " t "[2,3]\n" \
	"  %16 = opt adam_m($d.b.m, %2) {beta=0.9} : " t "[3] after(%11, %12)\n" \
	"  %17 = opt adam_v($d.b.v, %2) {beta=0.999} : " t "[3] after(%11, %12)\n" \
	"  %18 = opt adamw($d.b, %16, %17, %0, %11, %12) {eps=1e-08} : " t "[3]\n" \
	"}\n"

/* AdamW's update: the step count and bias corrections fuse into one scalar
 * kernel, each parameter's two moments (siblings reading its gradient) and
 * weight into one loop; three steps from t = 0 and v >= 0 (the random
 * fill's state is in [-0.5, 0.5], which no second moment can be) agree with
 * the interpreter. */
START_TEST(test_fusion_adamw)
{
	ir_dtype dt = _i % 2 ? IR_F64 : IR_F32;
	int threads = _i / 2 ? 2 : 1;
	ir_graph *g = parse_planned("adamw.ir", dt == IR_F32 ? ADAMW("f32") : ADAMW("f64"), threads);
	int grouped = 0, groups = 0;
	for (int i = 0; i < g->n; i++) {
		grouped += g->nodes[i]->group >= 0;
		groups = g->nodes[i]->group + 1 > groups ? g->nodes[i]->group + 1 : groups;
	}
	ck_assert_int_eq(grouped, 9);
	ck_assert_int_eq(groups, 3);
	cgt_poke pokes[10] = {{"adamw.t", 0, 0}};
	for (int k = 0; k < 6; k++)
		pokes[1 + k] = (cgt_poke){"d.w.v", k, 0.01 * (k + 1)};
	for (int k = 0; k < 3; k++)
		pokes[7 + k] = (cgt_poke){"d.b.v", k, k == 0 ? 0 : 0.02 * k};
	double err = cgt_compare_poked(g, threads, 13, 3, pokes, 10, NULL, NULL, NULL);
	ck_assert_msg(err <= (dt == IR_F32 ? 1e-6 : 1e-14), "case %d: %g", _i, err);
	ir_graph_free(g);
}
END_TEST

/* ---- whole training steps ---------------------------------------------------- */

/* A training step of model `name` (models/NAME.rev with sets), planned for
 * the JIT (jit) or the interpreter: each engine reserves its own workspace,
 * so the two may schedule differently.  Without optimizer the gradients
 * stay outputs. */
static ir_graph *model(const char *name, const char *const *sets, int nsets, ps_strategy st,
	ir_dtype dt, int threads, bool jit, bool optimizer)
{
	char path[1024];
	const char *root = getenv("REVC_SOURCE_ROOT");
	snprintf(path, sizeof path, "%s/models/%s.rev", root ? root : ".", name);
	char *text;
	size_t len;
	rt_err e;
	ck_assert_msg(rt_file_read(path, 1 << 20, &text, &len, &e), "%s", e.msg);
	ir_diags d;
	ir_diags_init(&d);
	fe_spec s;
	bool ok = fe_spec_parse(&s, path, text, len, &d);
	for (int i = 0; ok && i < nsets; i++)
		ok = fe_spec_set(&s, sets[i], i + 1, &d);
	ck_assert_msg(ok && fe_spec_check(&s, &d), "%s", d.n ? d.items[0].msg : "");
	ir_graph *g = fe_lower(&s, dt, FE_LOWER_TRAIN);
	cg_options o = {.threads = threads};
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.strategy = st;
	ctx.optimizer = optimizer;
	ctx.workspace = jit ? cg_workspace : rt_workspace_fn;
	ctx.workspace_user = jit ? &o : NULL;
	ps_options opts = {0};
	ck_assert_msg(ps_run(g, &ctx, &opts) == 0, "%s %s: %s", ps_strategy_name(st), jit ? "jit" : "interp",
		ctx.diags.n ? ctx.diags.items[0].msg : "");
	ps_ctx_free(&ctx);
	ir_diags_free(&d);
	free(text);
	return g;
}

static ir_graph *preset(const char *name, const char *const *sets, int nsets, ps_strategy st,
	ir_dtype dt, int threads)
{
	return model(name, sets, nsets, st, dt, threads, true, true);
}

/* Two training steps of a small fashion model, every strategy and thread
 * count, the 3x3 convolutions direct and then F(2x2): parameters, state,
 * momentum and outputs agree.  The lowering is named, not the tune's: a
 * ReLU input within rounding of zero flips its mask, and F(4x4), which
 * the tune may choose, rounds ten times as coarsely (docs/codegen.md,
 * Numerics): with it, this step's revnet gradients move by 2e-2 at this
 * seed, and agree to 1e-5 at others.  F(4x4)'s step is compared at batch
 * 1 (test_batch_one) and with no ReLU near zero (test_training_step_f4). */
START_TEST(test_training_step)
{
	static const char *const sets[] = {"units=1,1,1", "batch=4"};
	static const char *const conv[] = {"direct", "winograd2"};
	ps_strategy st = (ps_strategy)(_i % 3);
	int threads = _i % 6 / 3 ? 2 : 1;
	setenv("REVC_CONV", conv[_i / 6], 1);
	ir_graph *g = preset("fashion", sets, 2, st, IR_F32, threads);
	double err = cgt_compare(g, threads, 5, 2);
	ck_assert_msg(err <= 1e-5, "%s, %d threads, REVC_CONV=%s: %g", ps_strategy_name(st), threads, conv[_i / 6],
		err);
	ir_graph_free(g);
	unsetenv("REVC_CONV");
}
END_TEST

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* test_training_step with F(4x4) on every 3x3 convolution it fits, every
 * batch norm's shift 1 and scale 0.05, so that a ReLU's input is
 * 1 + 0.05·x̂, x̂ normalised over the m elements of its channel: within
 * √(m - 1) of zero, so 0.3 or more at 7x7 (m = 196), and in practice a few
 * units at most anywhere.  No rounding flips a mask.  (With random shifts
 * and scales this seed's revnet gradients move by 2e-2 under F(4x4):
 * test_training_step.) */
START_TEST(test_training_step_f4)
{
	static const char *const sets[] = {"units=1,1,1", "batch=4"};
	ps_strategy st = (ps_strategy)(_i % 3);
	int threads = _i / 3 ? 2 : 1;
	setenv("REVC_CONV", "winograd4", 1);
	ir_graph *g = preset("fashion", sets, 2, st, IR_F32, threads);
	cgt_poke pokes[4096];
	int np = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_PARAM)
			continue;
		const char *name = n->name;
		bool beta = ends_with(name, ".beta"), gamma = ends_with(name, ".gamma");
		for (int64_t k = 0; (beta || gamma) && k < ir_type_elems(&n->type); k++) {
			ck_assert_int_lt(np, (int)(sizeof pokes / sizeof pokes[0]));
			pokes[np++] = (cgt_poke){name, k, beta ? 1.0 : 0.05};
		}
	}
	ck_assert_int_gt(np, 100);
	double err = cgt_compare_poked(g, threads, 5, 2, pokes, np, NULL, NULL, NULL);
	ck_assert_msg(err <= 1e-5, "%s, %d threads: %g", ps_strategy_name(st), threads, err);
	ir_graph_free(g);
	unsetenv("REVC_CONV");
}
END_TEST

/* Batch 1 on two threads: each filter gradient's kernel has one parallel
 * index, so the step runs it on thread 0 alone, and its finish must add
 * thread 0's partial only (it added the other's unwritten workspace too,
 * and the loss became NaN at the second step).  Under store and revnet,
 * every lowering of the 3x3 convolutions. */
START_TEST(test_batch_one)
{
	static const char *const sets[] = {"units=1,1,1", "batch=1"};
	static const char *const conv[] = {"direct", "winograd2", "winograd4"};
	ps_strategy st = _i % 2 ? PS_REVNET : PS_STORE;
	setenv("REVC_CONV", conv[_i / 2], 1);
	ir_graph *g = preset("fashion", sets, 2, st, IR_F32, 2);
	double err = cgt_compare(g, 2, 5, 3);
	ck_assert_msg(err <= 1e-5, "%s, REVC_CONV=%s: %g", ps_strategy_name(st), conv[_i / 2], err);
	ir_graph_free(g);
	unsetenv("REVC_CONV");
}
END_TEST

/* One NaN in a convolution's weight (the s1.u0.f.conv0.w) makes the
 * loss NaN on both engines, under store and revnet: no kernel hides it (a
 * ReLU that mapped NaN to 0 gave a finite loss).  The engines agree on
 * every tensor, NaN where the other has NaN. */
START_TEST(test_nan_weight)
{
	static const char *const sets[] = {"units=1,1,1", "batch=4"};
	ps_strategy st = _i % 2 ? PS_REVNET : PS_STORE;
	ir_dtype dt = _i / 2 ? IR_F64 : IR_F32;
	ir_graph *g = preset("fashion", sets, 2, st, dt, 2);
	static const cgt_poke poke = {"s1.u0.f.conv0.w", 5, NAN};
	double jit, ref;
	double err = cgt_compare_poked(g, 2, 5, 1, &poke, 1, "loss", &jit, &ref);
	ck_assert_msg(isnan(jit) && isnan(ref), "%s %s: loss %g (JIT), %g (interpreter)",
		ps_strategy_name(st), ir_dtype_name(dt), jit, ref);
	ck_assert_msg(err <= (dt == IR_F32 ? 1e-5 : 1e-12), "%s: %g", ps_strategy_name(st), err);
	double fine = cgt_compare_poked(g, 2, 5, 1, NULL, 0, "loss", &jit, &ref);
	ck_assert_msg(isfinite(jit) && isfinite(ref) && fine <= (dt == IR_F32 ? 1e-5 : 1e-12),
		"without the NaN: loss %g, %g", jit, ref);
	ir_graph_free(g);
}
END_TEST

/* Small configurations no preset has: odd init kernels, stages of one unit,
 * stride-2 stages, a bottleneck, max pooling, odd image sizes.  Each runs
 * under every engine and strategy, planned for its engine. */
static const char *const small_configs[][9] = {
	{"input=3,8,8", "init_filters=8", "init_kernel=5", "units=1,2", "filters=8,16", "strides=1,2"},
	{"input=1,6,6", "init_filters=4", "init_kernel=3", "units=1", "filters=4", "strides=2"},
	{"input=2,8,8", "init_filters=8", "init_kernel=1", "units=1,1", "filters=8,16", "strides=2,1",
		"block=bottleneck"},
	{"input=1,12,12", "init_filters=4", "init_kernel=7", "init_stride=2", "init_max_pool=true",
		"units=2,1", "filters=4,8", "strides=1,3"},
	{"input=1,5,5", "init_filters=6", "init_kernel=3", "units=3", "filters=6", "strides=1"},
	{"input=3,8,8", "init_filters=8", "init_kernel=5", "units=1,2", "filters=8,16", "strides=1,2",
		"block=bottleneck"},
};
#define NSMALL ((int)(sizeof small_configs / sizeof small_configs[0]))

/* Gradients of g at batch 2 from parameters and data that depend on names
 * only, so that graphs scheduled differently see the same numbers. */
static rt_exec *small_run(ir_graph *g, bool jit, rt_store *store, cg_jit **j, rt_pool *pool)
{
	rt_err e;
	rt_store_init(store);
	ck_assert_msg(rt_store_init_from_graph(store, g, 3, &e), "%s", e.msg);
	rt_exec *x;
	*j = NULL;
	if (jit) {
		cg_options o = {.threads = 2, .optimize = true, .cpu = test_cpu()};
		cg_stats stats = {0};
		ir_diags d;
		ir_diags_init(&d);
		*j = cg_jit_compile(g, &o, &stats, &d);
		ck_assert_msg(*j, "compile: %s", d.n ? d.items[0].msg : "");
		ir_diags_free(&d);
		x = rt_exec_new_native(g, store, cg_jit_step(*j), pool, &e);
	} else {
		x = rt_exec_new(g, store, RT_EXEC_AUTO, &e);
	}
	ck_assert_msg(x, "%s", e.msg);
	rt_rng r;
	rt_rng_seed(&r, 17);
	const ir_type *t;
	double *in = rt_exec_input(x, "x", &t);
	for (int64_t i = 0; i < ir_type_elems(t); i++)
		in[i] = 2 * rt_rng_uniform(&r) - 1;
	int32_t *labels = rt_exec_input(x, "labels", &t);
	for (int64_t i = 0; i < ir_type_elems(t); i++)
		labels[i] = (int32_t)rt_rng_below(&r, 10);
	ck_assert_msg(rt_exec_run(x, &e), "%s", e.msg);
	return x;
}

/* Every engine and strategy on one small configuration, in f64: each
 * gradient within 1e-10 (relative) of ordinary backprop on the
 * interpreter, so revnet and checkpoint agree with store on both engines
 * and the JIT with the interpreter. */
START_TEST(test_small_configs)
{
	const char *const *cfg = small_configs[_i];
	const char *sets[10];
	int nsets = 0;
	while (nsets < 9 && cfg[nsets])
		sets[nsets] = cfg[nsets], nsets++;
	sets[nsets++] = "batch=2";
	rt_pool *pool = rt_pool_new(2);
	ir_graph *ref = model("fashion", sets, nsets, PS_STORE, IR_F64, 2, false, false);
	rt_store rs;
	cg_jit *rj;
	rt_exec *rx = small_run(ref, false, &rs, &rj, pool);
	for (int jit = 0; jit <= 1; jit++)
		for (int st = 0; st < PS_STRATEGY_COUNT; st++) {
			ir_graph *g = model("fashion", sets, nsets, (ps_strategy)st, IR_F64, 2, jit, false);
			rt_store s;
			cg_jit *j;
			rt_exec *x = small_run(g, jit, &s, &j, pool);
			for (int i = 0; i < rs.n; i++) {
				if (!rs.t[i].trainable)
					continue;
				char name[300];
				snprintf(name, sizeof name, "grad:%s", rs.t[i].name);
				const ir_type *t;
				const void *want = rt_exec_output(rx, name, &t), *got = rt_exec_output(x, name, NULL);
				ck_assert_msg(want && got, "config %d: no %s", _i, name);
				double err = cgt_rel_err(got, want, IR_F64, ir_type_elems(t));
				ck_assert_msg(err <= 1e-10, "config %d, %s on %s: %s differs from store by %g", _i,
					ps_strategy_name((ps_strategy)st), jit ? "jit" : "interp", name, err);
			}
			rt_exec_free(x);
			cg_jit_free(j);
			rt_store_free(&s);
			ir_graph_free(g);
		}
	rt_exec_free(rx);
	rt_store_free(&rs);
	ir_graph_free(ref);
	rt_pool_free(pool);
}
END_TEST

/* The kernel cache: revnet-110's many identical units compile once. */
START_TEST(test_kernel_cache)
{
	static const char *const sets[] = {"batch=2"};
	ir_graph *g = preset("revnet-110", sets, 1, PS_REVNET, IR_F32, 2);
	cg_options o = {.threads = 2, .optimize = false, .cpu = test_cpu()};
	cg_stats stats = {0};
	ir_diags d;
	ir_diags_init(&d);
	cg_jit *j = cg_jit_compile(g, &o, &stats, &d);
	ck_assert_msg(j, "%s", d.n ? d.items[0].msg : "");
	ck_assert_int_gt(stats.calls, 5 * stats.kernels);
	cg_jit_free(j);
	ir_diags_free(&d);
	ir_graph_free(g);
}
END_TEST

/* ---- the CPU code is for ------------------------------------------------------ */

START_TEST(test_cpu_names)
{
	ck_assert(cg_cpu_known(NULL) && cg_cpu_known("native"));
	ck_assert(!cg_cpu_known("foo") && !cg_cpu_known(""));
	char missing[64] = "";
	ck_assert(cg_cpu_runs_here(NULL, missing, sizeof missing));
#if defined(__x86_64__)
	ck_assert(cg_cpu_known("x86-64-v3") && cg_cpu_known("znver3") && cg_cpu_known("x86-64-v4"));
	/* 32-bit CPUs cannot take 64-bit code (LLVM would abort). */
	ck_assert(!cg_cpu_known("i386") && !cg_cpu_known("pentium4"));
	/* Every x86-64 host runs the baseline; v4 needs AVX-512. */
	ck_assert(cg_cpu_runs_here("x86-64", missing, sizeof missing));
	bool v4 = cg_cpu_runs_here("x86-64-v4", missing, sizeof missing);
	ck_assert_msg(v4 == (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")), "x86-64-v4: %d (%s)", v4,
		v4 ? "" : missing);
	ck_assert(v4 || strncmp(missing, "avx512", 6) == 0 || strcmp(missing, "evex512") == 0);
	/* The vectors gemm.c blocks for: SSE's 16 bytes, AVX's 32, AVX-512's 64. */
	ck_assert_int_eq(cg_cpu_vector_bytes("x86-64"), 16);
	ck_assert_int_eq(cg_cpu_vector_bytes("x86-64-v3"), 32);
	ck_assert_int_eq(cg_cpu_vector_bytes("x86-64-v4"), 64);
#endif
}
END_TEST

/* Whether a file of dir holds text. */
static bool dir_has(const char *dir, const char *file, const char *text)
{
	char path[1200];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	char *s;
	size_t n;
	rt_err e;
	ck_assert_msg(rt_file_read(path, (size_t)1 << 30, &s, &n, &e), "%s", e.msg);
	bool has = strstr(s, text) != NULL;
	free(s);
	return has;
}

/* A named CPU's features, not the host's, decide the vector width (the
 * generated products use 16 floats with AVX-512, 8 without) and what the
 * optimiser may use: code for x86-64-v3 never has 512-bit vectors, even
 * on an AVX-512 host, and code for x86-64-v4 has them, even on an AVX2
 * one (written as an object, which needs no host to run it). */
START_TEST(test_cpu_vector_width)
{
#if defined(__x86_64__)
	static const char *const cpus[] = {"x86-64-v3", "x86-64-v4"};
	ir_graph *g = cgt_conv_graph(&conv_cases[6], IR_F32, 1);
	for (int i = 0; i < 2; i++) {
		char dir[128];
		rt_temp_template(dir, sizeof dir, "/tmp/revc-cpu", strlen("/tmp/revc-cpu"), "-");
		ck_assert(mkdtemp(dir));
		char obj[200];
		snprintf(obj, sizeof obj, "%s/conv.o", dir);
		cg_options o = {.threads = 1, .optimize = true, .cpu = cpus[i], .dump_llvm = dir, .name = "conv"};
		ir_diags d;
		ir_diags_init(&d);
		ck_assert_msg(cg_emit_object(g, NULL, &o, obj, &d), "%s", d.n ? d.items[0].msg : "");
		ir_diags_free(&d);
		bool wide = dir_has(dir, "conv.opt.ll", "<16 x float>");
		ck_assert_msg(wide == (i == 1), "%s: 512-bit vectors %s", cpus[i], wide ? "present" : "absent");
		ck_assert(dir_has(dir, "conv.opt.ll", "<8 x float>"));
		char rm[300];
		snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
		ck_assert_int_eq(system(rm), 0);
	}
	/* The JIT refuses code this host cannot run. */
	char missing[64];
	if (!cg_cpu_runs_here("x86-64-v4", missing, sizeof missing)) {
		cg_options o = {.threads = 1, .optimize = false, .cpu = "x86-64-v4"};
		ir_diags d;
		ir_diags_init(&d);
		ck_assert(!cg_jit_compile(g, &o, NULL, &d));
		ck_assert_msg(d.n == 1 && strstr(d.items[0].msg, "cannot run code for CPU x86-64-v4"), "%s",
			d.n ? d.items[0].msg : "no diagnostic");
		ir_diags_free(&d);
	}
	ir_graph_free(g);
#endif
}
END_TEST

/* Every op the interpreter runs has a native path: an emitter (with a body
 * and an extent), or the elementwise group emitter, in both float types;
 * only the sources and output, whose values are bound to outside storage,
 * have neither. */
START_TEST(test_every_op_has_a_native_path)
{
	ir_graph *g = ir_graph_new("paths");
	for (int o = 0; o < IR_OP_COUNT; o++)
		for (int f64 = 0; f64 < 2; f64++) {
			ir_node *n = ir_node_new(g, (ir_op)o, NULL, 0);
			n->type = ir_type_scalar(f64 ? IR_F64 : IR_F32);
			bool bound = o == IR_OP_OUTPUT || (ir_op_has((ir_op)o, IR_OPF_SRC) && o != IR_OP_CONST);
			const cg_op_impl *impl = cg_op_impl_get(n);
			bool emitted = impl && impl->emit && impl->extent;
			if (bound)
				ck_assert_msg(!impl && !cg_elementwise(n), "%s is bound", ir_op_name((ir_op)o));
			else
				ck_assert_msg(emitted != cg_elementwise(n), "%s: %s", ir_op_name((ir_op)o),
					emitted ? "two native paths" : "no native path");
		}
	ir_graph_free(g);
}
END_TEST

static Suite *codegen_suite(void)
{
	Suite *s = suite_create("codegen");
	TCase *tc = tcase_create("kernels");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_conv, 0, 4 * NCONV);
	tcase_add_loop_test(tc, test_fusion_chain, 0, 4);
	tcase_add_loop_test(tc, test_fusion_adamw, 0, 4);
	tcase_add_test(tc, test_every_op_has_a_native_path);
	suite_add_tcase(s, tc);
	tc = tcase_create("steps");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_training_step, 0, 12);
	tcase_add_loop_test(tc, test_training_step_f4, 0, 6);
	tcase_add_loop_test(tc, test_batch_one, 0, 6);
	tcase_add_test(tc, test_kernel_cache);
	tcase_add_loop_test(tc, test_nan_weight, 0, 4);
	suite_add_tcase(s, tc);
	tc = tcase_create("cpu");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_cpu_names);
	tcase_add_test(tc, test_cpu_vector_width);
	suite_add_tcase(s, tc);
	tc = tcase_create("small configurations");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_small_configs, 0, NSMALL);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	int status = test_cpu_check();
	if (status >= 0)
		return status;
	SRunner *sr = srunner_create(codegen_suite());
	srunner_add_suite(sr, cg_ops_suite());
	srunner_add_suite(sr, cg_attn_suite());
	srunner_add_suite(sr, cg_norm_suite());
	srunner_add_suite(sr, cg_gelu_suite());
	srunner_add_suite(sr, cg_winograd_suite());
	srunner_add_suite(sr, cg_epilogue_suite());
	srunner_add_suite(sr, cg_prologue_suite());
	srunner_add_suite(sr, cg_conv_tune_suite());
	srunner_add_suite(sr, cg_split_suite());
	srunner_add_suite(sr, cg_objcache_suite());
	srunner_add_suite(sr, cg_conv_dx_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
