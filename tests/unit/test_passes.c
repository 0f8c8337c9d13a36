/* test_passes.c: unit tests of passes/: the pass manager's flags, what a
 * passes(...) list claims, DCE, fusion and the memory model. */
#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "passes.h"

static ir_graph *parse_ok(const char *text)
{
	ir_diags d;
	ir_diags_init(&d);
	ir_graph *g = ir_parse("t.ir", text, strlen(text), &d);
	if (!g)
		fprintf(stderr, "parse: %s\n", d.items[0].msg);
	ck_assert_ptr_nonnull(g);
	ck_assert(ir_verify(g, &d));
	ir_diags_free(&d);
	return g;
}

static void expect_text(ir_graph *g, const char *want)
{
	char *got = ir_print_str(g);
	ck_assert_str_eq(got, want);
	free(got);
}

/* ---- DCE -------------------------------------------------------------- */

START_TEST(test_dce_removes_dead_chain)
{
	ir_graph *g = parse_ok("graph @g {\n"
	                       "  %0 = input {name=\"x\"} : f32[3]\n"
	                       "  $w = param : f32[3]\n"
	                       "  %2 = relu(%0) : f32[3]\n"
	                       "  %3 = scale(%2) {factor=2} : f32[3]\n"
	                       "  %4 = add(%3, $w) : f32[3]\n"
	                       "  %5 = output(%2) {name=\"y\"} : f32[3]\n"
	                       "}\n");
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ck_assert_int_eq(ps_dce(g, &ctx), 0);
	/* %3 and %4 are dead; the unused param stays: it is interface. */
	expect_text(g, "graph @g {\n"
	               "  %0 = input {name=\"x\"} : f32[3]\n"
	               "  $w = param : f32[3]\n"
	               "  %2 = relu(%0) : f32[3]\n"
	               "  %3 = output(%2) {name=\"y\"} : f32[3]\n"
	               "}\n");
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_dce_keeps_ordering_targets)
{
	/* %3 feeds nothing, but the output must run after it, and %3 must run
	 * after %2: both stay.  %4 is dead and its edge to %2 goes with it. */
	ir_graph *g = parse_ok("graph @g {\n"
	                       "  %0 = input {name=\"x\"} : f32[3]\n"
	                       "  %1 = relu(%0) : f32[3]\n"
	                       "  %2 = scale(%0) {factor=3} : f32[3]\n"
	                       "  %3 = scale(%0) {factor=2} : f32[3] after(%2)\n"
	                       "  %4 = scale(%1) {factor=5} : f32[3] after(%2)\n"
	                       "  %5 = output(%1) {name=\"y\"} : f32[3] after(%3)\n"
	                       "}\n");
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ck_assert_int_eq(ps_dce(g, &ctx), 0);
	expect_text(g, "graph @g {\n"
	               "  %0 = input {name=\"x\"} : f32[3]\n"
	               "  %1 = relu(%0) : f32[3]\n"
	               "  %2 = scale(%0) {factor=3} : f32[3]\n"
	               "  %3 = scale(%0) {factor=2} : f32[3] after(%2)\n"
	               "  %4 = output(%1) {name=\"y\"} : f32[3] after(%3)\n"
	               "}\n");
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_dce_keeps_updates)
{
	ir_graph *g = parse_ok("graph @g {\n"
	                       "  %0 = input {name=\"x\"} : f32[2,3]\n"
	                       "  $m = state : f32[3]\n"
	                       "  %2 = bn_stats(%0) : f32[2,3]\n"
	                       "  %3 = bn_running_mean($m, %2) {momentum=0.99} : f32[3]\n"
	                       "}\n");
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ck_assert_int_eq(ps_dce(g, &ctx), 0);
	ck_assert_int_eq(g->n, 4);
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

/* ---- fusion ------------------------------------------------------------- */

#define FUSE_SRC(after)                                    \
	"graph @g passes(dce, schedule) {\n"                     \
	"  %0 = input {name=\"x\"} : f32[8]\n"                   \
	"  %1 = relu(%0) : f32[8]\n"                              \
	"  %2 = scale(%0) {factor=2} : f32[8]\n"                  \
	"  %3 = scale(%1) {factor=3} : f32[8]" after "\n"         \
	"  %4 = output(%3) {name=\"y\"} : f32[8]\n"              \
	"  %5 = output(%2) {name=\"z\"} : f32[8]\n"              \
	"}\n"

/* Without an edge the reader of relu moves up beside it and joins it. */
START_TEST(test_fuse_groups_chain)
{
	ir_graph *g = parse_ok(FUSE_SRC(""));
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ck_assert_int_eq(ps_fuse(g, &ctx), 0);
	ck_assert_int_eq(g->nodes[1]->op, IR_OP_RELU);
	ck_assert_int_eq(g->nodes[2]->op, IR_OP_SCALE);
	ck_assert(ir_node_float(g->nodes[2], IR_ATTR_FACTOR) == 3);
	ck_assert_int_ge(g->nodes[1]->group, 0);
	ck_assert_int_eq(g->nodes[1]->group, g->nodes[2]->group);
	ck_assert_int_eq(g->nodes[3]->group, -1);
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(ir_verify(g, &d));
	ir_diags_free(&d);
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

/* With an ordering edge from the reader to the node in between, fusion may
 * not move it ahead of that node: nothing moves and nothing fuses. */
START_TEST(test_fuse_respects_ordering_edges)
{
	ir_graph *g = parse_ok(FUSE_SRC(" after(%2)"));
	char *before = ir_print_str(g);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ck_assert_int_eq(ps_fuse(g, &ctx), 0);
	for (int i = 0; i < g->n; i++)
		ck_assert_int_eq(g->nodes[i]->group, -1);
	char *after = ir_print_str(g);
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

/* ---- the memory model ------------------------------------------------- */

/* A fusion group is one loop over its elements: what its members read
 * stays live to its end, their buffers are live from its start, and a
 * member takes over a buffer in place only when no other member reads it.
 * (Step by step, %7 could take %3's bytes: the stats die at %6, but the
 * loop still reads them for later rows when %7 writes its first.) */
START_TEST(test_memory_group_is_one_step)
{
	ir_graph *g = parse_ok("graph @g {\n"
	                       "  %0 = input {name=\"x\"} : f32[2,2,3,3]\n"
	                       "  %1 = input {name=\"dy\"} : f32[2,2,3,3]\n"
	                       "  $g = param : f32[2]\n"
	                       "  %3 = bn_stats(%0) : f32[2,2]\n"
	                       "  %4 = bwd bn_dgamma(%1, %0, %3) {eps=0.001} : f32[2]\n"
	                       "  %5 = bwd reduce_sum(%1) {axes=[0,2,3]} : f32[2]\n"
	                       "  %6 = bwd bn_dx(%1, %0, %3, $g, %4, %5) {eps=0.001} : f32[2,2,3,3] group(0)\n"
	                       "  %7 = bwd add(%1, %6) : f32[2,2,3,3] group(0)\n"
	                       "  %8 = bwd relu(%7) : f32[2,2,3,3] group(0)\n"
	                       "  %9 = output(%8) {name=\"y\"} : f32[2,2,3,3]\n"
	                       "}\n");
	ps_memory m;
	ps_memory_compute(g, g->nodes, NULL, NULL, &m);
	int stats = m.buf_of[3], dy = m.buf_of[1], sum = m.buf_of[7];
	ck_assert_int_eq(m.end[stats], 8);
	ck_assert_int_eq(m.end[m.buf_of[4]], 8);
	ck_assert_int_eq(m.begin[m.buf_of[6]], 6);
	ck_assert_int_eq(m.end[m.buf_of[6]], 8);
	/* add is dy's last reader, but bn_dx reads dy too: no reuse. */
	ck_assert_int_ne(sum, dy);
	ck_assert_int_eq(m.begin[sum], 6);
	/* relu is the only reader of the sum: it reuses it. */
	ck_assert_int_eq(m.buf_of[8], sum);
	ps_memory_free(&m);
	/* Without the group, step by step: add takes dy over. */
	for (int i = 6; i <= 8; i++)
		g->nodes[i]->group = -1;
	ps_memory_compute(g, g->nodes, NULL, NULL, &m);
	ck_assert_int_eq(m.end[m.buf_of[3]], 6);
	ck_assert_int_eq(m.buf_of[7], m.buf_of[1]);
	ps_memory_free(&m);
	ir_graph_free(g);
}
END_TEST

/* ---- what a passes(...) list claims ------------------------------------ */

#define LISTED(live0, live1)                                                 \
	"graph @g passes(shape, dce, schedule, liveness) {\n"                 \
	"  %0 = input {name=\"x\"} : f32[2,4]" live0 "\n"                      \
	"  %1 = relu(%0) : f32[2,4]" live1 "\n"                                 \
	"  %2 = output(%1) {name=\"y\"} : f32[2,4]\n"                          \
	"}\n"

/* plan runs on the strength of the liveness the list claims: only when
 * the graph has it, and then it plans. */
START_TEST(test_claims_liveness)
{
	ps_options opts = {.only = "plan"};
	ir_graph *g = parse_ok(LISTED("", ""));
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ck_assert_int_ne(ps_run(g, &ctx, &opts), 0);
	ck_assert_int_eq(ctx.diags.n, 1);
	ck_assert_str_eq(ctx.diags.items[0].msg,
		"%0 (input): passes(...) lists 'liveness', but it has no live(...): the schedule gives live(0, 2)");
	ck_assert_int_eq(ctx.diags.items[0].pos.line, 2);
	ck_assert(!ir_graph_has_pass(g, "plan"));
	ps_ctx_free(&ctx);
	ir_graph_free(g);
	g = parse_ok(LISTED(" live(0, 2)", " live(0, 2)"));
	ps_ctx_init(&ctx);
	ck_assert_int_eq(ps_run(g, &ctx, &opts), 0);
	ck_assert(ir_graph_has_pass(g, "plan"));
	ck_assert_int_eq(g->nodes[1]->offset, 0);
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

/* fuse would reorder a graph whose live ranges are already listed. */
START_TEST(test_manager_refuses_stale)
{
	ir_graph *g = parse_ok(LISTED(" live(0, 2)", " live(0, 2)"));
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ps_options opts = {.only = "fuse,liveness,plan"};
	ck_assert_int_ne(ps_run(g, &ctx, &opts), 0);
	ck_assert_int_eq(ctx.diags.n, 1);
	ck_assert_str_eq(ctx.diags.items[0].msg,
		"pass 'fuse' cannot run on @g: it lists 'liveness', which comes after 'fuse' and would be left stale; "
		"--passes plan runs what can follow");
	ck_assert(!ir_graph_has_pass(g, "fuse"));
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST
#undef LISTED

/* ---- the manager ------------------------------------------------------ */

static int calls_a, calls_b;

static int pass_a(ir_graph *g, ps_ctx *ctx)
{
	(void)g;
	(void)ctx;
	calls_a++;
	return 0;
}

static int pass_b(ir_graph *g, ps_ctx *ctx)
{
	(void)g;
	(void)ctx;
	calls_b++;
	return 0;
}

/* Breaks the graph: makes the last node run after itself. */
static int pass_break(ir_graph *g, ps_ctx *ctx)
{
	(void)ctx;
	ir_node *n = g->nodes[g->n - 1];
	ir_node_add_after(g, n, n);
	return 0;
}

static int pass_fail(ir_graph *g, ps_ctx *ctx)
{
	(void)g;
	ir_diag_add(&ctx->diags, (ir_pos){0}, "pass failed on purpose");
	return 1;
}

static const char tiny[] = "graph @g {\n  %0 = input {name=\"x\"} : f32[3]\n"
                           "  %1 = output(%0) {name=\"y\"} : f32[3]\n}\n";

START_TEST(test_manager_stop_after_and_skip)
{
	const ps_pass table[] = {
		{"a", pass_a, NULL, "first"},
		{"b", pass_b, "a", "second"},
	};
	ir_graph *g = parse_ok(tiny);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	calls_a = calls_b = 0;
	ps_options opts = {.stop_after = "a"};
	ck_assert_int_eq(ps_run_table(table, 2, g, &ctx, &opts), 0);
	ck_assert_int_eq(calls_a, 1);
	ck_assert_int_eq(calls_b, 0);
	/* A second run skips the pass already applied. */
	ps_options all = {0};
	ck_assert_int_eq(ps_run_table(table, 2, g, &ctx, &all), 0);
	ck_assert_int_eq(calls_a, 1);
	ck_assert_int_eq(calls_b, 1);
	ck_assert(ir_graph_has_pass(g, "a") && ir_graph_has_pass(g, "b"));
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_manager_requires)
{
	const ps_pass table[] = {
		{"a", pass_a, NULL, "first"},
		{"b", pass_b, "a", "second"},
	};
	ir_graph *g = parse_ok(tiny);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ps_options opts = {.only = "b"};
	ck_assert_int_ne(ps_run_table(table, 2, g, &ctx, &opts), 0);
	ck_assert_str_eq(ctx.diags.items[0].msg,
		"pass 'b' requires pass 'a', which has not run on this graph");
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_manager_verify_each_names_pass)
{
	const ps_pass table[] = {
		{"a", pass_a, NULL, "fine"},
		{"breaker", pass_break, NULL, "breaks the graph"},
		{"b", pass_b, NULL, "never reached"},
	};
	ir_graph *g = parse_ok(tiny);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	calls_b = 0;
	ps_options opts = {.verify_each = true};
	ck_assert_int_ne(ps_run_table(table, 3, g, &ctx, &opts), 0);
	ck_assert_int_eq(calls_b, 0);
	ck_assert_int_eq(ctx.diags.n, 1);
	ck_assert_ptr_nonnull(strstr(ctx.diags.items[0].msg, "after pass 'breaker': "));
	ck_assert_ptr_nonnull(strstr(ctx.diags.items[0].msg, "ordering edge to itself"));
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_manager_pass_failure_stops)
{
	const ps_pass table[] = {
		{"f", pass_fail, NULL, "fails"},
		{"b", pass_b, NULL, "never reached"},
	};
	ir_graph *g = parse_ok(tiny);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	calls_b = 0;
	ps_options opts = {0};
	ck_assert_int_ne(ps_run_table(table, 2, g, &ctx, &opts), 0);
	ck_assert_int_eq(calls_b, 0);
	ck_assert_str_eq(ctx.diags.items[0].msg, "pass failed on purpose");
	ck_assert(!ir_graph_has_pass(g, "f"));
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

/* Two independent passes, for the dump tests. */
static const ps_pass two[] = {
	{"a", pass_a, NULL, "first"},
	{"b", pass_b, NULL, "second"},
};

START_TEST(test_manager_dump_dir_numbered)
{
	char dir[] = "/tmp/revc-dump-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ir_graph *g = parse_ok(tiny);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ps_options opts = {.dump_after = "all", .dump_dir = dir};
	ck_assert_int_eq(ps_run_table(two, 2, g, &ctx, &opts), 0);
	char path[256];
	snprintf(path, sizeof path, "%s/01-a.ir", dir);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	char line[128];
	ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
	ck_assert_str_eq(line, "graph @g passes(a) {\n");
	fclose(f);
	unlink(path);
	snprintf(path, sizeof path, "%s/02-b.ir", dir);
	ck_assert_int_eq(access(path, R_OK), 0);
	unlink(path);
	/* Nothing else (no temporaries) was left behind. */
	DIR *dp = opendir(dir);
	int entries = 0;
	for (struct dirent *e; (e = readdir(dp));)
		entries += e->d_name[0] != '.';
	closedir(dp);
	ck_assert_int_eq(entries, 0);
	rmdir(dir);
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

/* A tagged graph's dumps (a command's second pipeline) are told apart by
 * the tag, in file names and in the headers of streamed dumps. */
START_TEST(test_manager_dump_tag)
{
	char dir[] = "/tmp/revc-dump-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ir_graph *g = parse_ok(tiny);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ps_options opts = {.dump_after = "b", .dump_dir = dir, .dump_tag = "eval"};
	ck_assert_int_eq(ps_run_table(two, 2, g, &ctx, &opts), 0);
	char path[256];
	snprintf(path, sizeof path, "%s/eval-02-b.ir", dir);
	ck_assert_int_eq(access(path, R_OK), 0);
	unlink(path);
	ck_assert_int_eq(rmdir(dir), 0); /* nothing else was written */
	ir_graph_free(g);

	char *buf = NULL;
	size_t len = 0;
	g = parse_ok(tiny);
	opts = (ps_options){.dump_after = "a", .dump_tag = "eval", .dump_out = open_memstream(&buf, &len)};
	ck_assert_int_eq(ps_run_table(two, 2, g, &ctx, &opts), 0);
	fclose(opts.dump_out);
	ck_assert_ptr_nonnull(strstr(buf, "# ---- eval: after a ----\ngraph @g passes(a) {\n"));
	free(buf);
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_options_check)
{
	char bad[64];
	ps_options ok = {.dump_after = "all", .stop_after = "dce", .only = "dce"};
	ck_assert(ps_options_check(&ok, bad, sizeof bad));
	ps_options wrong = {.only = "dce,nonesuch"};
	ck_assert(!ps_options_check(&wrong, bad, sizeof bad));
	ck_assert_str_eq(bad, "nonesuch");
}
END_TEST

/* Gradient outputs are named "grad:PARAM", and only outputs are. */
/* ---- optim: AdamW ------------------------------------------------------ */

#define DIFFERENTIATED(extra) \
	"graph @d passes(shape, autodiff) {\n" \
	"  %0 = input {name=\"x\"} : f32[2,3]\n" \
	"  %1 = input {name=\"labels\"} : i32[2]\n" \
	"  $w = param : f32[4,3]\n" \
	extra \
	"  %3 = matmul(%0, $w) {trans_b=1} : f32[2,4]\n" \
	"  %4 = softmax_xent(%3, %1) : f32[]\n" \
	"  %5 = output(%4) {name=\"loss\"} : f32[]\n" \
	"  %6 = bwd softmax_xent_grad(%3, %1) : f32[2,4]\n" \
	"  %7 = bwd matmul(%6, %0) {trans_a=1} : f32[4,3]\n" \
	"  %8 = output(%7) {name=\"grad:w\"} : f32[4,3]\n" \
	"}\n"

/* With ctx.adamw the gradient output becomes the step count, its bias
 * corrections and the three updates, with the context's settings; a graph
 * that already holds $w.m is refused. */
START_TEST(test_optim_adamw)
{
	ir_graph *g = parse_ok(DIFFERENTIATED(""));
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.adamw = true;
	ctx.beta1 = 0.5;
	ctx.beta2 = 0.75;
	ctx.eps = 1e-6;
	ctx.weight_decay = 0.125;
	ck_assert_int_eq(ps_optim(g, &ctx), 0);
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(ir_verify(g, &d));
	ir_diags_free(&d);
	expect_text(g, "graph @d passes(shape, autodiff) {\n"
	               "  %0 = input {name=\"lr\"} : f32[]\n"
	               "  $adamw.t = state : f32[]\n"
	               "  %2 = input {name=\"x\"} : f32[2,3]\n"
	               "  %3 = input {name=\"labels\"} : i32[2]\n"
	               "  $w = param : f32[4,3]\n"
	               "  $w.m = state : f32[4,3]\n"
	               "  $w.v = state : f32[4,3]\n"
	               "  %7 = matmul(%2, $w) {trans_b=1} : f32[2,4]\n"
	               "  %8 = softmax_xent(%7, %3) : f32[]\n"
	               "  %9 = output(%8) {name=\"loss\"} : f32[]\n"
	               "  %10 = bwd softmax_xent_grad(%7, %3) : f32[2,4]\n"
	               "  %11 = bwd matmul(%10, %2) {trans_a=1} : f32[4,3]\n"
	               "  %12 = opt adam_count($adamw.t) : f32[]\n"
	               "  %13 = opt adam_bias(%12) {beta=0.5} : f32[]\n"
	               "  %14 = opt adam_bias(%12) {beta=0.75} : f32[]\n"
	               "  %15 = opt adam_m($w.m, %11) {beta=0.5} : f32[4,3] after(%13, %14)\n"
	               "  %16 = opt adam_v($w.v, %11) {beta=0.75} : f32[4,3] after(%13, %14)\n"
	               "  %17 = opt adamw($w, %15, %16, %0, %13, %14) {eps=1e-06, wd=0.125} : f32[4,3] after(%7)\n"
	               "}\n");
	ps_ctx_free(&ctx);
	ir_graph_free(g);

	g = parse_ok(DIFFERENTIATED("  $w.m = state : f32[4,3]\n"));
	ps_ctx_init(&ctx);
	ctx.adamw = true;
	ck_assert_int_eq(ps_optim(g, &ctx), 1);
	ck_assert_int_eq(ctx.diags.n, 1);
	ck_assert_str_eq(ctx.diags.items[0].msg, "optim: $w already has its AdamW state $w.m");
	ps_ctx_free(&ctx);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_grad_names)
{
	ir_graph *g = parse_ok("graph @g {\n"
	                       "  %0 = input {name=\"grad:x\"} : f32[2]\n"
	                       "  %1 = relu(%0) : f32[2]\n"
	                       "  %2 = output(%1) {name=\"grad:s0.u1.w\"} : f32[2]\n"
	                       "  %3 = output(%1) {name=\"loss\"} : f32[2]\n"
	                       "}\n");
	ck_assert_ptr_null(ps_grad_param_name(g->nodes[0]));
	ck_assert_ptr_null(ps_grad_param_name(g->nodes[1]));
	ck_assert_str_eq(ps_grad_param_name(g->nodes[2]), "s0.u1.w");
	ck_assert_ptr_null(ps_grad_param_name(g->nodes[3]));
	char buf[64];
	ck_assert_str_eq(ps_grad_output_name(buf, sizeof buf, "s0.u1.w"), "grad:s0.u1.w");
	ir_graph_free(g);
}
END_TEST

static Suite *passes_suite(void)
{
	Suite *s = suite_create("passes");
	TCase *tc = tcase_create("dce");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_dce_removes_dead_chain);
	tcase_add_test(tc, test_dce_keeps_ordering_targets);
	tcase_add_test(tc, test_dce_keeps_updates);
	suite_add_tcase(s, tc);
	tc = tcase_create("fuse");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_fuse_groups_chain);
	tcase_add_test(tc, test_fuse_respects_ordering_edges);
	suite_add_tcase(s, tc);
	tc = tcase_create("memory");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_memory_group_is_one_step);
	suite_add_tcase(s, tc);
	tc = tcase_create("manager");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_manager_stop_after_and_skip);
	tcase_add_test(tc, test_manager_requires);
	tcase_add_test(tc, test_manager_verify_each_names_pass);
	tcase_add_test(tc, test_manager_pass_failure_stops);
	tcase_add_test(tc, test_manager_dump_dir_numbered);
	tcase_add_test(tc, test_manager_dump_tag);
	tcase_add_test(tc, test_options_check);
	tcase_add_test(tc, test_claims_liveness);
	tcase_add_test(tc, test_manager_refuses_stale);
	tcase_add_test(tc, test_grad_names);
	tcase_add_test(tc, test_optim_adamw);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(passes_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
