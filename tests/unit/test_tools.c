/* test_tools.c: the driver's tools (driver/tools.h) and the shared facts
 * they rest on: the step ABI's argument order (ir/slots.c) and the conv
 * geometry (ir/conv_geom.h), each against an oracle written here
 * independently (list positions, the shape formula), bench's GEMM count
 * against products counted by hand, and the gradient check, drift report
 * and AOT naming on a tiny fashion net. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_geom.h"
#include "test_cpu.h"
#include "tools.h"

static char spec_path[1024];

/* models/fashion.rev with three one-unit stages at batch 2. */
static fe_spec tiny_spec(void)
{
	const char *r = getenv("REVC_SOURCE_ROOT");
	snprintf(spec_path, sizeof spec_path, "%s/models/fashion.rev", r ? r : ".");
	char *text;
	size_t len;
	rt_err e;
	ck_assert_msg(rt_file_read(spec_path, 1 << 20, &text, &len, &e), "%s", e.msg);
	ir_diags d;
	ir_diags_init(&d);
	fe_spec s;
	/* Small enough to run under valgrind in minutes. */
	const char *sets[] = {"units=1,1,1", "batch=2", "input=1,12,12", "init_filters=4", "filters=4,8,8"};
	bool ok = fe_spec_parse(&s, spec_path, text, len, &d);
	for (int i = 0; ok && i < (int)(sizeof sets / sizeof *sets); i++)
		ok = fe_spec_set(&s, sets[i], i + 1, &d);
	ok = ok && fe_spec_check(&s, &d);
	ck_assert_msg(ok, "%s", d.n ? d.items[0].msg : "");
	ir_diags_free(&d);
	free(text);
	return s;
}

static ir_graph *tiny_graph(const fe_spec *s, ir_dtype dt, ps_strategy strategy, const ps_options *opts)
{
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.strategy = strategy;
	ctx.optimizer = false;
	ir_graph *g = drv_spec_plan(s, dt, FE_LOWER_TRAIN, &ctx, opts);
	ck_assert_msg(g, "%s", ctx.diags.n ? ctx.diags.items[0].msg : "");
	ps_ctx_free(&ctx);
	return g;
}

/* The FLOPs revc bench counts, against products counted by hand: a dense
 * layer over tokens [N,T,K] is one [N*T,K] product, its weight gradient
 * (trans_a) contracts over N*T, and a batched product runs once per head
 * and image. */
START_TEST(gemm_shapes_count_tokens_and_heads)
{
	static const char text[] =
		"graph @g passes(shape) {\n"
		"  %0 = input {name=\"x\"} : f32[2,5,4]\n"
		"  $w = param : f32[12,4]\n"
		"  %2 = matmul(%0, $w) {trans_b=1} : f32[2,5,12]\n"
		"  %3 = matmul(%2, %0) {trans_a=1} : f32[12,4]\n"
		"  %4 = heads_split(%2) {part=0, parts=3, heads=2} : f32[2,2,5,2]\n"
		"  %5 = heads_split(%2) {part=1, parts=3, heads=2} : f32[2,2,5,2]\n"
		"  %6 = bmatmul(%4, %5) {trans_b=1} : f32[2,2,5,5]\n"
		"  %7 = bmatmul(%6, %5) : f32[2,2,5,2]\n"
		"  %8 = bmatmul(%6, %4) {trans_a=1} : f32[2,2,5,2]\n"
		"}\n";
	ir_diags d;
	ir_diags_init(&d);
	ir_graph *g = ir_parse("gemm.ir", text, sizeof text - 1, &d);
	ck_assert_msg(g, "%s", d.n ? d.items[0].msg : "");
	drv_gemm_shape sh[8];
	int n = drv_gemm_shapes(g, sh, 8);
	/* m n k count: x w^T, x^T-contracted weight gradient, q k^T per head and
	 * image, P v and P^T q likewise (the same shape, so one entry of 8). */
	const int64_t want[][4] = {{10, 12, 4, 1}, {12, 4, 10, 1}, {5, 5, 2, 4}, {5, 2, 5, 8}};
	ck_assert_int_eq(n, 4);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(sh[i].m, want[i][0]);
		ck_assert_int_eq(sh[i].n, want[i][1]);
		ck_assert_int_eq(sh[i].k, want[i][2]);
		ck_assert_int_eq(sh[i].count, want[i][3]);
	}
	double flops = 2.0 * (10 * 12 * 4 + 12 * 4 * 10 + 5 * 5 * 2 * 4 + 5 * 2 * 5 * 8);
	ck_assert(drv_gemm_flops(sh, n) == flops);
	ir_graph_free(g);
	ir_diags_free(&d);
}
END_TEST

START_TEST(slots_follow_list_order)
{
	fe_spec s = tiny_spec();
	ir_graph *g = tiny_graph(&s, IR_F32, PS_REVNET, &(ps_options){0});
	int *ps = calloc((size_t)g->n, sizeof *ps), *is = calloc((size_t)g->n, sizeof *is);
	int np = ir_persist_slots(g, ps), ni = ir_input_slots(g, is);
	int kp = 0, ki = 0;
	for (int i = 0; i < g->n; i++) {
		ir_op op = g->nodes[i]->op;
		ck_assert_int_eq(ps[i], op == IR_OP_PARAM || op == IR_OP_STATE ? kp++ : -1);
		ck_assert_int_eq(is[i], op == IR_OP_INPUT ? ki++ : -1);
	}
	ck_assert_int_eq(np, kp);
	ck_assert_int_eq(ni, ki);
	ck_assert_int_gt(np, 10);
	ck_assert_int_eq(ni, 2); /* x, labels (no lr without the optimiser) */
	free(ps);
	free(is);
	ir_graph_free(g);
}
END_TEST

/* Every convolution of a training step (forward, dx, dw), with stride-2
 * units, has the geometry its shapes imply. */
START_TEST(conv_geometry_matches_shapes)
{
	fe_spec s = tiny_spec();
	ir_graph *g = tiny_graph(&s, IR_F32, PS_STORE, &(ps_options){0});
	int seen[3] = {0}, strided = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *v = g->nodes[i];
		int k = v->op == IR_OP_CONV2D ? 0 : v->op == IR_OP_CONV2D_DX ? 1 : v->op == IR_OP_CONV2D_DW ? 2 : -1;
		if (k < 0)
			continue;
		seen[k]++;
		ir_conv_geom c = ir_conv_geom_of(v);
		const ir_type *x = k == 0 ? &v->in[0]->type : k == 1 ? &v->type : &v->in[1]->type;
		const ir_type *w = k == 2 ? &v->type : &v->in[1]->type;
		ck_assert_int_eq(c.n, x->dim[0]);
		ck_assert_int_eq(c.c, w->dim[1]);
		ck_assert_int_eq(c.o, w->dim[0]);
		ck_assert_int_eq(c.ho, (c.h + c.pt + c.pb - c.kh) / c.s + 1);
		ck_assert_int_eq(c.wo, (c.w + c.pl + c.pr - c.kw) / c.s + 1);
		ck_assert_int_eq(c.op, v->op);
		ck_assert(ir_conv_direct(&c) == (c.kh == 1 && c.kw == 1 && c.s == 1 && !c.pt && !c.pb && !c.pl && !c.pr));
		strided += c.s == 2;
	}
	ck_assert(seen[0] && seen[1] && seen[2]);
	ck_assert_int_gt(strided, 0);
	ir_graph_free(g);
}
END_TEST

/* The check on the interpreter: every tensor agrees; at a tolerance no
 * finite difference meets, tensors fail (a result, not an error); the
 * worst is the largest error. */
static void run_check(double tol, drv_check_report *r)
{
	fe_spec s = tiny_spec();
	ps_options eval = drv_eval_passes;
	ir_graph *gg = tiny_graph(&s, IR_F64, PS_REVNET, &(ps_options){0});
	ir_graph *fg = tiny_graph(&s, IR_F64, PS_REVNET, &eval);
	rt_store store;
	rt_store_init(&store);
	rt_err e;
	ck_assert_msg(rt_store_init_from_graph(&store, gg, 7, &e), "%s", e.msg);
	rt_exec *gx = rt_exec_new(gg, &store, RT_EXEC_AUTO, &e), *fx = rt_exec_new(fg, &store, RT_EXEC_AUTO, &e);
	ck_assert(gx && fx);
	ir_diags d;
	ir_diags_init(&d);
	drv_check_options o = {2, 7, tol, 1e-5};
	ck_assert_msg(drv_check_gradients(gx, fx, &store, s.classes, &o, r, &d), "%s", d.n ? d.items[0].msg : "");
	ck_assert_int_eq(d.n, 0);
	int trainable = 0;
	for (int i = 0; i < store.n; i++)
		trainable += store.t[i].trainable;
	ck_assert_int_eq(r->n, trainable);
	double worst = 0;
	for (int i = 0; i < r->n; i++)
		worst = fmax(worst, r->tensors[i].error);
	ck_assert(r->worst_at >= 0 && r->worst == worst && r->tensors[r->worst_at].error == worst);
	ir_diags_free(&d);
	rt_exec_free(gx);
	rt_exec_free(fx);
	rt_store_free(&store);
	ir_graph_free(gg);
	ir_graph_free(fg);
}

START_TEST(check_passes_and_fails)
{
	drv_check_report r;
	run_check(1e-6, &r);
	ck_assert_int_eq(r.failed, 0);
	ck_assert_int_eq(r.n, 41);
	for (int i = 0; i < r.n; i++)
		ck_assert(r.tensors[i].ok && r.tensors[i].samples == 2 && r.tensors[i].scale > 0);
	revc_check_report_free(&r);
	run_check(1e-16, &r);
	ck_assert_int_gt(r.failed, 0);
	revc_check_report_free(&r);
}
END_TEST

/* The drift report of s on one thread of engine kind (native: this host). */
static bool drift_on(const fe_spec *s, revc_engine kind, drv_drift_report *r, ir_diags *d)
{
	drv_engine e;
	drv_engine_init(&e, kind, 1, kind == REVC_JIT ? test_cpu() : NULL); /* REVC_CPU, as cli-drift */
	bool ok = drv_drift(s, &e, 1, r, d);
	drv_engine_free(&e);
	return ok;
}

/* The tiny spec's report under engine kind, which must succeed. */
static void drift_ok(revc_engine kind, drv_drift_report *r)
{
	fe_spec s = tiny_spec();
	ir_diags d;
	ir_diags_init(&d);
	ck_assert_msg(drift_on(&s, kind, r, &d), "%s", d.n ? d.items[0].msg : "");
	ir_diags_free(&d);
}

START_TEST(drift_report)
{
	drv_drift_report r;
	drift_ok(REVC_INTERP, &r);
	ck_assert_str_eq(r.model, "fashion");
	ck_assert_str_eq(r.engine, "interp");
	ck_assert(!r.jit && r.convs[0][0].n == 0);
	ck_assert_int_eq(r.nunits, 1);
	ck_assert_str_eq(r.units[0].unit, "s0.u0");
	ck_assert_int_eq(r.ngrads, 41);
	ck_assert(drv_drift_dtypes[1] == IR_F64);
	for (int j = 0; j < 2; j++) {
		ck_assert(r.units[0].rel[1][j] < 1e-12 && r.units[0].rel[1][j] <= r.units[0].rel[0][j] + 1e-12);
		ck_assert(r.units[0].rel[0][j] < 1e-4);
	}
	ck_assert(r.sum[1].worst_degrees < 1e-9 && r.sum[0].median_degrees <= r.sum[0].worst_degrees);
	ck_assert(r.sum[0].worst_rel == fmax(r.units[0].rel[0][0], r.units[0].rel[0][1]));
	char *json = drv_drift_json(&r);
	const char *start = "{\"model\":\"fashion\",\"batch\":2,\"seed\":1,\"engine\":\"interp\",\"jit\":false,"
		"\"convolutions\":{\"f32\":{\"revnet\":{},\"store\":{}},\"f64\":{\"revnet\":{},\"store\":{}}},"
		"\"units\":[{\"unit\":\"s0.u0\",";
	ck_assert_msg(strncmp(json, start, strlen(start)) == 0, "%.80s", json);
	ck_assert(strstr(json, "\"tensors\":[{\"name\":\"init.conv.w\","));
	ck_assert_str_eq(json + strlen(json) - 4, "]}}\n");
	free(json);
	revc_drift_report_free(&r);
}
END_TEST

/* Under the JIT (for REVC_CPU, when set) the report counts each step's
 * convolution lowerings: in f64 every one is direct (Winograd is f32
 * only), in f32 the revnet step has as many as in f64 (the lowering
 * changes, not the graph), and the revnet step recomputes, so it has more
 * than the store step. */
START_TEST(drift_report_jit)
{
	drv_drift_report r;
	drift_ok(REVC_JIT, &r);
	ck_assert(r.jit && strncmp(r.engine, "jit (", 5) == 0);
	char want[80];
	snprintf(want, sizeof want, "jit (%s)", test_cpu() ? test_cpu() : "");
	ck_assert_msg(!test_cpu() || !strcmp(r.engine, want), "%s, not for REVC_CPU", r.engine);
	int total[2][2] = {{0}};
	for (int dt = 0; dt < 2; dt++)
		for (int k = 0; k < 2; k++)
			for (int i = 0; i < r.convs[dt][k].n; i++)
				total[dt][k] += r.convs[dt][k].count[i];
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(r.convs[1][k].n, 1);
		ck_assert_str_eq(r.convs[1][k].lowering[0], "direct");
		ck_assert_int_eq(total[0][k], total[1][k]);
	}
	ck_assert_int_gt(total[0][0], total[0][1]);
	ck_assert(r.sum[0].worst_rel > 0 && r.sum[0].worst_rel < 1e-4 && r.sum[1].worst_rel < 1e-12);
	revc_drift_report_free(&r);
}
END_TEST

/* A spec too large fails with the diagnostic pointing into --set. */
START_TEST(drift_error_is_a_value)
{
	fe_spec s = tiny_spec();
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(fe_spec_set(&s, "batch=2000000000", 1, &d));
	drv_drift_report r;
	ck_assert(!drift_on(&s, REVC_INTERP, &r, &d));
	ck_assert_int_eq(d.n, 1);
	ck_assert_str_eq(d.items[0].pos.file, "--set");
	ck_assert(strstr(d.items[0].msg, "larger than 2^40 bytes"));
	ir_diags_free(&d);
}
END_TEST

START_TEST(aot_names)
{
	static const struct {
		const char *out, *name;
		bool shared;
	} ok[] = {{"libfoo.so", "foo", true}, {"dir/libm_2.so", "m_2", true}, {"x/bar.o", "bar", false},
		{"baz.so", "baz", true}};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		char name[64];
		bool shared = !ok[i].shared;
		ck_assert_msg(drv_aot_default_name(ok[i].out, name, sizeof name, &shared), "%s", ok[i].out);
		ck_assert_str_eq(name, ok[i].name);
		ck_assert(shared == ok[i].shared);
	}
	static const char *bad[] = {"lib.so.1", "foo.a", ".o", "dir/", "foo"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char name[64];
		bool shared;
		ck_assert_msg(!drv_aot_default_name(bad[i], name, sizeof name, &shared), "%s", bad[i]);
	}
	ck_assert(drv_aot_valid_prefix("fashion_2") && drv_aot_valid_prefix("_x"));
	ck_assert(!drv_aot_valid_prefix("2x") && !drv_aot_valid_prefix("a-b") && !drv_aot_valid_prefix(""));
}
END_TEST

START_TEST(diags_append_keeps_count)
{
	ir_diags a, b;
	ir_diags_init(&a);
	ir_diags_init(&b);
	ir_diag_add(&a, (ir_pos){0}, "first");
	for (int i = 0; i < IR_MAX_DIAGS + 5; i++)
		ir_diag_add(&b, (ir_pos){"f.rev", 2, 3}, "e%d", i);
	drv_diags_append(&a, &b);
	ck_assert_int_eq(a.total, 1 + IR_MAX_DIAGS + 5);
	ck_assert_str_eq(a.items[1].msg, "e0");
	ck_assert_str_eq(a.items[1].pos.file, "f.rev");
	ck_assert_int_eq(a.items[1].pos.col, 3);
	ir_diags_free(&a);
	ir_diags_free(&b);
}
END_TEST

int main(void)
{
	int status = test_cpu_check();
	if (status != -1)
		return status;
	Suite *s = suite_create("tools");
	TCase *tc = tcase_create("tools");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, slots_follow_list_order);
	tcase_add_test(tc, conv_geometry_matches_shapes);
	tcase_add_test(tc, check_passes_and_fails);
	tcase_add_test(tc, drift_report);
	tcase_add_test(tc, drift_report_jit);
	tcase_add_test(tc, drift_error_is_a_value);
	tcase_add_test(tc, aot_names);
	tcase_add_test(tc, diags_append_keeps_count);
	tcase_add_test(tc, gemm_shapes_count_tokens_and_heads);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
