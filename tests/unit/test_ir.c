/* test_ir.c: unit tests of ir/: the op table, types, the builder, shape
 * rules, printer/parser round trips, the verifier and Graphviz output. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* ---- helpers ---------------------------------------------------------- */

/* qsort for this executable, the library's calls included: a merge sort
 * that keeps equal elements in order or, with ties_reversed, reverses
 * them.  C leaves their order unspecified, so what the library computes
 * must not depend on it (test_verify_plan_ties). */
static bool ties_reversed;

static void merge_sort(char *a, char *tmp, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n < 2)
		return;
	size_t h = n / 2, i = 0, j = h, k = 0;
	merge_sort(a, tmp, h, size, cmp);
	merge_sort(a + h * size, tmp, n - h, size, cmp);
	while (i < h || j < n) {
		int c = i == h ? 1 : j == n ? -1 : cmp(a + i * size, a + j * size);
		size_t from = c < 0 || (c == 0 && !ties_reversed) ? i++ : j++;
		memcpy(tmp + k++ * size, a + from * size, size);
	}
	memcpy(a, tmp, n * size);
}

void qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	char *tmp = malloc(n * size + 1);
	ck_assert_ptr_nonnull(tmp);
	merge_sort(base, tmp, n, size, cmp);
	free(tmp);
}

static ir_node *add_input(ir_graph *g, const char *name, ir_dtype dt, int rank, const int64_t *dims)
{
	ir_node *n = ir_node_new(g, IR_OP_INPUT, NULL, 0);
	ir_node_set_str(g, n, IR_ATTR_NAME, name);
	n->type = ir_type_make(dt, rank, dims);
	return n;
}

static ir_node *add_param(ir_graph *g, const char *name, int rank, const int64_t *dims)
{
	ir_node *n = ir_node_new(g, IR_OP_PARAM, NULL, 0);
	n->name = ir_arena_strdup(g->arena, name);
	n->type = ir_type_make(IR_F32, rank, dims);
	return n;
}

static ir_node *add_op(ir_graph *g, ir_op op, ir_node *a, ir_node *b)
{
	ir_node *in[2] = {a, b};
	ir_node *n = ir_node_new(g, op, in, b ? 2 : 1);
	return n;
}

static ir_node *infer(ir_node *n)
{
	ir_diags d;
	ir_diags_init(&d);
	bool ok = ir_node_infer(n, &d);
	if (!ok)
		fprintf(stderr, "infer: %s\n", d.items[0].msg);
	ck_assert(ok);
	ir_diags_free(&d);
	return n;
}

/* Verifies g and returns the diagnostics joined by newlines (caller frees). */
static char *verify_msgs(const ir_graph *g, int *count)
{
	ir_diags d;
	ir_diags_init(&d);
	ir_verify(g, &d);
	size_t len = 1;
	for (int i = 0; i < d.n; i++)
		len += strlen(d.items[i].msg) + 1;
	char *s = calloc(1, len);
	for (int i = 0; i < d.n; i++) {
		strcat(s, d.items[i].msg);
		strcat(s, "\n");
	}
	*count = d.n;
	ir_diags_free(&d);
	return s;
}

/* ---- op table --------------------------------------------------------- */

START_TEST(test_op_table)
{
	for (int i = 0; i < IR_OP_COUNT; i++) {
		const ir_op_info *info = ir_op_get((ir_op)i);
		ir_op back;
		ck_assert(ir_op_lookup(info->name, strlen(info->name), &back));
		ck_assert_int_eq(back, i);
		ck_assert_int_le(info->min_arity, info->max_arity);
		ck_assert_ptr_nonnull(info->rule);
		ck_assert_int_eq(info->req_attrs & info->opt_attrs, 0);
		if (info->flags & IR_OPF_SRC)
			ck_assert_int_eq(info->max_arity, 0);
		if (info->flags & IR_OPF_UPD)
			ck_assert(info->flags & IR_OPF_FX);
	}
	for (int k = 0; k < IR_ATTR_COUNT; k++) {
		const char *name = ir_attr_name((ir_attr_kind)k);
		ir_attr_kind back;
		ck_assert(ir_attr_lookup(name, strlen(name), &back));
		ck_assert_int_eq(back, k);
	}
	ir_op op;
	ck_assert(!ir_op_lookup("conv", 4, &op));
}
END_TEST

START_TEST(test_type_sizes)
{
	int64_t dims[4] = {100, 16, 28, 28};
	ir_type t = ir_type_make(IR_F32, 4, dims);
	ck_assert_int_eq(ir_type_elems(&t), 100 * 16 * 28 * 28);
	ck_assert_int_eq(ir_type_bytes(&t), 4 * 100 * 16 * 28 * 28);
	char buf[64];
	ir_type_str(&t, buf, sizeof buf);
	ck_assert_str_eq(buf, "f32[100,16,28,28]");
	ir_type s = ir_type_scalar(IR_F64);
	ir_type_str(&s, buf, sizeof buf);
	ck_assert_str_eq(buf, "f64[]");
	int64_t huge[3] = {1 << 20, 1 << 20, 1 << 20};
	ir_type h = ir_type_make(IR_F32, 3, huge);
	ck_assert(!ir_type_size_ok(&h));
	int64_t over[2] = {INT64_MAX / 2, 3};
	h = ir_type_make(IR_F32, 2, over);
	ck_assert(!ir_type_size_ok(&h));
	int64_t prod;
	ck_assert(!ir_size_mul(INT64_MAX, 2, &prod));
	ck_assert(!ir_size_add(INT64_MAX, 1, &prod));
	ck_assert(ir_size_mul(1 << 20, 1 << 20, &prod) && prod == (int64_t)1 << 40);
}
END_TEST

/* ---- shape rules ------------------------------------------------------ */

START_TEST(test_conv_same_stride2)
{
	/* TF SAME, 3x3 stride 2 on 28x28: pad 0 before, 1 after, 14x14 out. */
	ir_graph *g = ir_graph_new("t");
	int64_t xd[4] = {8, 16, 28, 28}, wd[4] = {32, 16, 3, 3}, pad[4] = {0, 1, 0, 1};
	ir_node *x = add_input(g, "x", IR_F32, 4, xd);
	ir_node *w = add_param(g, "w", 4, wd);
	ir_node *y = add_op(g, IR_OP_CONV2D, x, w);
	ir_node_set_int(g, y, IR_ATTR_STRIDE, 2);
	ir_node_set_ints(g, y, IR_ATTR_PAD, pad, 4);
	infer(y);
	char buf[64];
	ir_type_str(&y->type, buf, sizeof buf);
	ck_assert_str_eq(buf, "f32[8,32,14,14]");
	/* The data gradient infers back to 28x28. */
	ir_node *dx = add_op(g, IR_OP_CONV2D_DX, y, w);
	ir_node_set_int(g, dx, IR_ATTR_STRIDE, 2);
	ir_node_set_ints(g, dx, IR_ATTR_PAD, pad, 4);
	infer(dx);
	ck_assert(ir_type_eq(&dx->type, &x->type));
	ir_node *dw = add_op(g, IR_OP_CONV2D_DW, y, x);
	ir_node_set_int(g, dw, IR_ATTR_STRIDE, 2);
	ir_node_set_ints(g, dw, IR_ATTR_PAD, pad, 4);
	infer(dw);
	ck_assert(ir_type_eq(&dw->type, &w->type));
	ir_graph_free(g);
}
END_TEST

START_TEST(test_shape_mismatch_reported)
{
	ir_graph *g = ir_graph_new("t");
	int64_t a[2] = {4, 8}, b[2] = {4, 9};
	ir_node *x = add_input(g, "a", IR_F32, 2, a);
	ir_node *y = add_input(g, "b", IR_F32, 2, b);
	ir_node *s = add_op(g, IR_OP_ADD, x, y);
	s->type = x->type;
	int count;
	char *msgs = verify_msgs(g, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_ptr_nonnull(strstr(msgs, "operands 0 and 1 differ in shape: f32[4,8] vs f32[4,9]"));
	free(msgs);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_declared_type_checked)
{
	ir_graph *g = ir_graph_new("t");
	int64_t a[2] = {4, 8}, wrong[2] = {4, 7};
	ir_node *x = add_input(g, "a", IR_F32, 2, a);
	ir_node *r = add_op(g, IR_OP_RELU, x, NULL);
	r->type = ir_type_make(IR_F32, 2, wrong);
	int count;
	char *msgs = verify_msgs(g, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_ptr_nonnull(strstr(msgs, "declared type f32[4,7], but its operands give f32[4,8]"));
	free(msgs);
	ir_graph_free(g);
}
END_TEST

/* ---- printer and parser ----------------------------------------------- */

static ir_graph *parse_ok(const char *text)
{
	ir_diags d;
	ir_diags_init(&d);
	ir_graph *g = ir_parse("t.ir", text, strlen(text), &d);
	if (!g)
		fprintf(stderr, "parse: %d:%d: %s\n", d.items[0].pos.line, d.items[0].pos.col,
			d.items[0].msg);
	ck_assert_ptr_nonnull(g);
	ir_diags_free(&d);
	return g;
}

START_TEST(test_float_roundtrip)
{
	const double values[] = {0.1, 1.0 / 3.0, -2.5e-8, 1e-300, 5e-324, DBL_MAX, -0.0, 0.99,
		1e-3, 123456789.123, INFINITY, -INFINITY, NAN};
	const int nv = (int)(sizeof values / sizeof values[0]);
	ir_graph *g = ir_graph_new("floats");
	for (int i = 0; i < nv; i++) {
		ir_node *c = ir_node_new(g, IR_OP_CONST, NULL, 0);
		ir_node_set_float(g, c, IR_ATTR_VALUE, values[i]);
		c->type = ir_type_scalar(IR_F64);
	}
	char *text = ir_print_str(g);
	ir_graph *back = parse_ok(text);
	ck_assert_int_eq(back->n, nv);
	for (int i = 0; i < nv; i++) {
		double v = ir_node_float(back->nodes[i], IR_ATTR_VALUE);
		if (isnan(values[i]))
			ck_assert(isnan(v));
		else
			ck_assert(memcmp(&v, &values[i], sizeof v) == 0);
	}
	char *again = ir_print_str(back);
	ck_assert_str_eq(text, again);
	ck_assert_ptr_nonnull(strstr(text, "value=0.1}"));
	free(text);
	free(again);
	ir_graph_free(g);
	ir_graph_free(back);
}
END_TEST

static const char sample[] =
	"graph @sample passes(dce) {\n"
	"  %0 = input {name=\"x\"} : f32[2,4,8,8]\n"
	"  $s0.u0.f.conv0.w = param : f32[8,4,3,3]\n"
	"  $lr = state : f32[]\n"
	"  %3 = conv2d(%0, $s0.u0.f.conv0.w) {stride=1, pad=[1,1,1,1]} : f32[2,8,8,8]\n"
	"  %4 = recompute relu(%3) : f32[2,8,8,8] loc(\"m.rev\":3:7)\n"
	"  %5 = bwd scale(%4) {factor=-0.5} : f32[2,8,8,8] after(%3, $lr) group(2)\n"
	"  %6 = output(%5) {name=\"y \\\"q\\\"\"} : f32[2,8,8,8] mem(0, 4096) live(6, 6)\n"
	"}\n";

START_TEST(test_print_parse_identity)
{
	ir_graph *g = parse_ok(sample);
	char *text = ir_print_str(g);
	ck_assert_str_eq(text, sample);
	ck_assert_int_eq(g->nodes[4]->role, IR_ROLE_RECOMPUTE);
	ck_assert_str_eq(g->nodes[4]->pos.file, "m.rev");
	ck_assert_int_eq(g->nodes[5]->nafter, 2);
	ck_assert_int_eq(g->nodes[5]->group, 2);
	ck_assert_int_eq(g->nodes[6]->offset, 0);
	ck_assert_str_eq(ir_node_str(g->nodes[6], IR_ATTR_NAME), "y \"q\"");
	free(text);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_parse_renumbers)
{
	/* Any numbering reads; printing renumbers by position. */
	const char *in = "graph @g {\n  %7 = input {name=\"x\"} : f32[3]\n"
	                 "  %2 = relu(%7) : f32[3]\n  %9 = output(%2) {name=\"y\"} : f32[3]\n}\n";
	ir_graph *g = parse_ok(in);
	char *text = ir_print_str(g);
	ck_assert_str_eq(text, "graph @g {\n  %0 = input {name=\"x\"} : f32[3]\n"
	                       "  %1 = relu(%0) : f32[3]\n  %2 = output(%1) {name=\"y\"} : f32[3]\n}\n");
	free(text);
	ir_graph_free(g);
}
END_TEST

/* Inserting in the middle keeps every id its list position, so that the
 * functions reading a const graph (print, verify, users) need not
 * renumber it; printing then numbers by position. */
START_TEST(test_insert_keeps_ids)
{
	ir_graph *g = parse_ok("graph @g {\n  %0 = input {name=\"x\"} : f32[3]\n"
	                       "  %1 = relu(%0) : f32[3]\n  %2 = output(%1) {name=\"y\"} : f32[3]\n}\n");
	ir_node *x = g->nodes[0];
	ir_node *r = ir_node_insert(g, 1, IR_OP_RELU, &x, 1);
	r->type = x->type;
	ck_assert(ir_graph_ids_current(g));
	ck_assert_int_eq(g->nodes[3]->id, 3);
	ir_users u;
	ir_users_build(g, &u);
	ck_assert_int_eq(u.start[1] - u.start[0], 2); /* x: read by both relus */
	ir_users_free(&u);
	ir_graph_free(g);
}
END_TEST

typedef struct {
	const char *text;
	int line, col;
	const char *msg;
} parse_case;

static const parse_case parse_errors[] = {
	{"", 1, 1, "expected 'graph', found end of file"},
	{"graph @g {\n  %0 = input {name=\"x\"} : f32[3]\n", 3, 1, "expected a node (%N = ... or $name = ...) or '}', found end of file"},
	{"graph @g {\n  %0 = relu(%1) : f32[3]\n}\n", 2, 13, "undefined value '%1'"},
	{"graph @g {\n  %0 = input {name=\"x\"} : f32[3]\n  %0 = relu(%0) : f32[3]\n}\n", 3, 3, "value '%0' is defined twice"},
	{"graph @g {\n  %0 = frobnicate : f32[3]\n}\n", 2, 8, "unknown op 'frobnicate'"},
	{"graph @g {\n  %0 = input {name=3} : f32[3]\n}\n", 2, 20, "expected a string, found '3'"},
	{"graph @g {\n  %0 = input {name=\"x\"} : f32[3,-1]\n}\n", 2, 33, "a dimension must be between 0 and 1099511627776"},
	{"graph @g {\n  %0 = input {name=\"x\"} : f17[3]\n}\n", 2, 27, "expected a type (f32, f64 or i32), found 'f17'"},
	{"graph @g {\n  %0 = input {name=\"x\"} : f32[3]\n}\ntrailing", 4, 1, "expected end of file after the graph, found 'trailing'"},
	{"graph @g {\n  %0 = input {name=\"x\"} : f32[3] \x01\n}\n", 2, 34, "unexpected byte 0x01"},
};

START_TEST(test_parse_errors)
{
	const parse_case *c = &parse_errors[_i];
	ir_diags d;
	ir_diags_init(&d);
	ir_graph *g = ir_parse("t.ir", c->text, strlen(c->text), &d);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(d.n, 1);
	ck_assert_str_eq(d.items[0].msg, c->msg);
	ck_assert_int_eq(d.items[0].pos.line, c->line);
	ck_assert_int_eq(d.items[0].pos.col, c->col);
	ck_assert_str_eq(d.items[0].pos.file, "t.ir");
	ir_diags_free(&d);
}
END_TEST

/* Random acyclic graphs of elementwise ops with random ordering edges print,
 * parse and print again to the same text, and verify. */
START_TEST(test_random_roundtrip)
{
	srand(1234);
	for (int trial = 0; trial < 50; trial++) {
		ir_graph *g = ir_graph_new("rand");
		int64_t dims[2] = {3, 5};
		add_input(g, "x", IR_F32, 2, dims);
		int n = 2 + rand() % 40;
		for (int i = 0; i < n; i++) {
			ir_node *a = g->nodes[rand() % g->n], *b = g->nodes[rand() % g->n];
			ir_op ops[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_RELU, IR_OP_SCALE};
			ir_op op = ops[rand() % 4];
			ir_node *m = add_op(g, op, a, op == IR_OP_ADD || op == IR_OP_SUB ? b : NULL);
			if (op == IR_OP_SCALE)
				ir_node_set_float(g, m, IR_ATTR_FACTOR, (double)rand() / RAND_MAX - 0.5);
			m->role = (ir_role)(rand() % IR_ROLE_COUNT);
			infer(m);
			if (rand() % 3 == 0 && g->n > 2)
				ir_node_add_after(g, m, g->nodes[rand() % (g->n - 1)]);
		}
		ir_node *out = add_op(g, IR_OP_OUTPUT, g->nodes[g->n - 1], NULL);
		ir_node_set_str(g, out, IR_ATTR_NAME, "y");
		infer(out);
		int count;
		char *msgs = verify_msgs(g, &count);
		ck_assert_msg(count == 0, "%s", msgs);
		free(msgs);
		char *text = ir_print_str(g);
		ir_graph *back = parse_ok(text);
		msgs = verify_msgs(back, &count);
		ck_assert_msg(count == 0, "%s", msgs);
		free(msgs);
		char *again = ir_print_str(back);
		ck_assert_str_eq(text, again);
		free(text);
		free(again);
		ir_graph_free(g);
		ir_graph_free(back);
	}
}
END_TEST

/* ---- verifier --------------------------------------------------------- */

START_TEST(test_verify_cycle_through_ordering_edge)
{
	ir_graph *g = parse_ok("graph @g {\n"
	                       "  %0 = input {name=\"x\"} : f32[3]\n"
	                       "  %1 = relu(%0) : f32[3] after(%2)\n"
	                       "  %2 = relu(%1) : f32[3]\n"
	                       "}\n");
	int count;
	char *msgs = verify_msgs(g, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_ptr_nonnull(strstr(msgs, "is part of a cycle"));
	free(msgs);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_verify_collects_all)
{
	/* Four independent violations in one graph, all reported. */
	ir_graph *g = parse_ok("graph @g {\n"
	                       "  %0 = input {name=\"x\"} : f32[3]\n"
	                       "  %1 = relu(%0, %0) : f32[3]\n"
	                       "  %2 = scale(%0) : f32[3]\n"
	                       "  %3 = relu(%0) : f32[3] after(%3)\n"
	                       "  %4 = relu(%0) {eps=0.1} : f32[3]\n"
	                       "}\n");
	int count;
	char *msgs = verify_msgs(g, &count);
	ck_assert_int_eq(count, 4);
	ck_assert_ptr_nonnull(strstr(msgs, "takes 1 operand, got 2"));
	ck_assert_ptr_nonnull(strstr(msgs, "missing attribute 'factor'"));
	ck_assert_ptr_nonnull(strstr(msgs, "has an ordering edge to itself"));
	ck_assert_ptr_nonnull(strstr(msgs, "has no attribute 'eps'"));
	free(msgs);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_verify_update_ordering)
{
	/* sgd updates $w in place; the conv that reads $w must come first. */
static const char head[] = "graph @g {\n"
	                          "  %0 = input {name=\"x\"} : f32[1,1,4,4]\n"
	                          "  %1 = input {name=\"lr\"} : f32[]\n"
	                          "  $w = param : f32[1,1,1,1]\n"
	                          "  $v = state : f32[1,1,1,1]\n"
	                          "  %4 = conv2d(%0, $w) {stride=1, pad=[0,0,0,0]} : f32[1,1,4,4]\n"
	                          "  %5 = sgd($w, $v, %1) : f32[1,1,1,1]";
	static const char tail[] = "\n  %6 = output(%4) {name=\"y\"} : f32[1,1,4,4]\n}\n";
	char text[1024];
	snprintf(text, sizeof text, "%s%s", head, tail);
	ir_graph *g = parse_ok(text);
	int count;
	char *msgs = verify_msgs(g, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_ptr_nonnull(strstr(msgs, "updates $w in place but is not ordered after %4, which reads it"));
	free(msgs);
	ir_graph_free(g);
	snprintf(text, sizeof text, "%s after(%%4)%s", head, tail);
	g = parse_ok(text);
	msgs = verify_msgs(g, &count);
	ck_assert_msg(count == 0, "%s", msgs);
	free(msgs);
	ir_graph_free(g);
	/* Ordered through a chain: after a relu of the conv. */
#define CHAIN(edge)                                                          \
	"graph @g {\n"                                                        \
	"  %0 = input {name=\"x\"} : f32[1,1,4,4]\n"                           \
	"  %1 = input {name=\"lr\"} : f32[]\n"                                 \
	"  $w = param : f32[1,1,1,1]\n"                                       \
	"  $v = state : f32[1,1,1,1]\n"                                       \
	"  %4 = conv2d(%0, $w) {stride=1, pad=[0,0,0,0]} : f32[1,1,4,4]\n"    \
	"  %5 = relu(%4) : f32[1,1,4,4]\n"                                    \
	"  %6 = relu($v) : f32[1,1,1,1]\n"                                    \
	"  %7 = sgd($w, $v, %1) : f32[1,1,1,1] after(" edge ")\n"             \
	"  %8 = output(%5) {name=\"y\"} : f32[1,1,4,4]\n"                      \
	"}\n"
	g = parse_ok(CHAIN("%5"));
	msgs = verify_msgs(g, &count);
	ck_assert_msg(count == 0, "%s", msgs);
	free(msgs);
	ir_graph_free(g);
	g = parse_ok(CHAIN("%6")); /* a chain, but not from the conv */
	msgs = verify_msgs(g, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_ptr_nonnull(strstr(msgs, "updates $w in place but is not ordered after %4, which reads it"));
	free(msgs);
	ir_graph_free(g);
#undef CHAIN
}
END_TEST

START_TEST(test_verify_recompute_is_stateless)
{
	ir_graph *g = parse_ok("graph @g {\n"
	                       "  %0 = input {name=\"x\"} : f32[2,3,4,4]\n"
	                       "  $m = state : f32[3]\n"
	                       "  %2 = bn_stats(%0) : f32[2,3]\n"
	                       "  %3 = recompute bn_running_mean($m, %2) {momentum=0.99} : f32[3]\n"
	                       "}\n");
	int count;
	char *msgs = verify_msgs(g, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_ptr_nonnull(strstr(msgs, "a recomputation must not update $m"));
	free(msgs);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_verify_order)
{
	/* Acyclic but listed out of order. */
	ir_graph *g = parse_ok("graph @g {\n"
	                       "  %0 = input {name=\"x\"} : f32[3]\n"
	                       "  %1 = relu(%2) : f32[3]\n"
	                       "  %2 = relu(%0) : f32[3]\n"
	                       "}\n");
	int count;
	char *msgs = verify_msgs(g, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_ptr_nonnull(strstr(msgs, "uses %2, which comes later in the graph"));
	free(msgs);
	ir_graph_free(g);
}
END_TEST

/* A plan of n relus of %0, all live to the end, value i at `offset(i)`;
 * value `ws_at` (if > 0) also has a 16-byte workspace at `ws_offset`. */
static char *plan_text(int n, int64_t (*offset)(int), int ws_at, int64_t ws_offset)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	fprintf(f, "graph @p {\n  %%0 = input {name=\"x\"} : f32[4] mem(0, 16) live(0, %d)\n", n);
	for (int i = 1; i <= n; i++) {
		fprintf(f, "  %%%d = relu(%%0) : f32[4] mem(%lld, 16)", i, (long long)offset(i));
		if (i == ws_at)
			fprintf(f, " ws(%lld, 16)", (long long)ws_offset);
		fprintf(f, " live(%d, %d)\n", i, n);
	}
	fprintf(f, "}\n");
	fclose(f);
	return buf;
}

static int64_t spread(int i) { return 64 * (int64_t)i; }
static int64_t clash(int i) { return i == 137 ? 64 * 42 + 8 : 64 * (int64_t)i; }
static int64_t reverse(int i) { return 64 * (int64_t)(1000 - i); }

START_TEST(test_verify_plan_overlaps)
{
	static const struct {
		int64_t (*offset)(int);
		int ws_at;
		int64_t ws_offset;
		const char *want; /* NULL: verifies */
	} cases[] = {
		{spread, 0, 0, NULL},
		{reverse, 0, 0, NULL},
		{spread, 150, 64 * 200, NULL}, /* beyond every buffer */
		{clash, 0, 0, "%137 (relu): buffer [2696, 2712) overlaps the buffer of %42 [2688, 2704) while both are live"},
		{spread, 150, 64 * 99 + 4, "%150 (relu): workspace [6340, 6356) overlaps the buffer of %99 [6336, 6352) while both are live"},
		{spread, 150, 0, "%150 (relu): workspace [0, 16) overlaps the buffer of %0 [0, 16) while both are live"},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		char *text = plan_text(300, cases[c].offset, cases[c].ws_at, cases[c].ws_offset);
		ir_graph *g = parse_ok(text);
		int count;
		char *msgs = verify_msgs(g, &count);
		if (!cases[c].want) {
			ck_assert_msg(count == 0, "case %zu: %s", c, msgs);
		} else {
			ck_assert_msg(count == 1, "case %zu: %d: %s", c, count, msgs);
			ck_assert_msg(strstr(msgs, cases[c].want), "case %zu: %s", c, msgs);
		}
		free(msgs);
		free(text);
		ir_graph_free(g);
	}
}
END_TEST

START_TEST(test_verify_plan_in_place)
{
	/* relu may reuse its operand's buffer: same offset and live range. */
	const char *ok = "graph @p {\n"
	                 "  %0 = input {name=\"x\"} : f32[4] mem(0, 16) live(0, 2)\n"
	                 "  %1 = scale(%0) {factor=2} : f32[4] mem(64, 16) live(1, 2)\n"
	                 "  %2 = relu(%1) : f32[4] mem(64, 16) live(1, 2)\n"
	                 "}\n";
	const char *bad = "graph @p {\n"
	                  "  %0 = input {name=\"x\"} : f32[4] mem(0, 16) live(0, 2)\n"
	                  "  %1 = scale(%0) {factor=2} : f32[4] mem(64, 16) live(1, 2)\n"
	                  "  %2 = relu(%0) : f32[4] mem(64, 16) live(1, 2)\n"
	                  "}\n";
	const char *late = "graph @p {\n"
	                   "  %0 = input {name=\"x\"} : f32[4] mem(0, 16) live(0, 1)\n"
	                   "  %1 = scale(%0) {factor=2} : f32[4] mem(64, 16) live(1, 2)\n"
	                   "  %2 = relu(%0) : f32[4] mem(128, 16) live(2, 2)\n"
	                   "}\n";
	int count;
	ir_graph *g = parse_ok(ok);
	char *msgs = verify_msgs(g, &count);
	ck_assert_msg(count == 0, "%s", msgs);
	free(msgs);
	ir_graph_free(g);
	g = parse_ok(bad); /* relu of %0 in %1's buffer: not its operand's */
	msgs = verify_msgs(g, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_ptr_nonnull(strstr(msgs, "%2 (relu): buffer [64, 80) overlaps the buffer of %1 [64, 80)"));
	free(msgs);
	ir_graph_free(g);
	g = parse_ok(late);
	msgs = verify_msgs(g, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_ptr_nonnull(strstr(msgs, "reads %0 at step 2, after its live range ends at 1"));
	free(msgs);
	ir_graph_free(g);
}
END_TEST

/* %2 is in place of %0; %1 overlaps them.  With equal sort keys in the
 * reverse order %2 came first, and %1 passed as in place of it. */
START_TEST(test_verify_plan_ties)
{
	const char *text = "graph @p {\n"
	                   "  %0 = input {name=\"x\"} : f32[4] mem(0, 16) live(0, 3)\n"
	                   "  %1 = input {name=\"y\"} : f32[4] mem(0, 16) live(0, 3)\n"
	                   "  %2 = relu(%0) : f32[4] mem(0, 16) live(0, 3)\n"
	                   "  %3 = add(%2, %1) : f32[4] mem(64, 16) live(3, 4)\n"
	                   "  %4 = output(%3) {name=\"z\"} : f32[4]\n"
	                   "}\n";
	for (int reversed = 0; reversed < 2; reversed++) {
		ties_reversed = reversed;
		ir_graph *g = parse_ok(text);
		int count;
		char *msgs = verify_msgs(g, &count);
		ck_assert_msg(count == 1, "ties reversed %d: %d: %s", reversed, count, msgs);
		ck_assert_msg(strstr(msgs, "%1 (input): buffer [0, 16) overlaps the buffer of %0 [0, 16)"), "%s", msgs);
		free(msgs);
		ir_graph_free(g);
	}
	ties_reversed = false;
}
END_TEST

START_TEST(test_dot_dashed_ordering_edges)
{
	ir_graph *g = parse_ok(sample);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ir_dot(f, g);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(buf, "n3 -> n5 [style=dashed"));
	ck_assert_ptr_nonnull(strstr(buf, "n2 -> n5 [style=dashed"));
	ck_assert_ptr_nonnull(strstr(buf, "n4 -> n5;"));
	ck_assert_ptr_null(strstr(buf, "n4 -> n5 [style=dashed"));
	free(buf);
	ir_graph_free(g);
}
END_TEST

/* One coupling built with the marker, one part per call: it verifies,
 * prints its marking and reads it back, and Graphviz draws the unit as a
 * cluster with F and G as clusters inside it. */
START_TEST(test_unit_marker_and_clusters)
{
	int64_t d[2] = {2, 3};
	ir_graph *g = ir_graph_new("u");
	ir_node *x1 = add_input(g, "x1", IR_F32, 2, d), *x2 = add_input(g, "x2", IR_F32, 2, d);
	ir_unit_marker m;
	ir_unit_begin(&m, g, 0);
	ir_node *f = infer(add_op(g, IR_OP_RELU, x2, NULL));
	ir_unit_mark(&m, IR_PART_F);
	ir_node *y1 = infer(add_op(g, IR_OP_ADD, x1, f));
	ir_unit_mark(&m, IR_PART_Y1);
	ir_node *gy = infer(add_op(g, IR_OP_RELU, y1, NULL));
	ir_unit_mark(&m, IR_PART_G);
	ir_node *y2 = infer(add_op(g, IR_OP_ADD, x2, gy));
	ir_unit_mark(&m, IR_PART_Y2);
	ir_node *out = add_op(g, IR_OP_OUTPUT, y2, NULL);
	ir_node_set_str(g, out, IR_ATTR_NAME, "y");
	infer(out);
	ck_assert_int_eq(x2->unit, -1);
	ck_assert_int_eq(f->unit, 0);
	ck_assert_int_eq(f->part, IR_PART_F);
	ck_assert_int_eq(y2->part, IR_PART_Y2);
	ck_assert_int_eq(out->unit, -1);
	int count;
	char *msgs = verify_msgs(g, &count);
	ck_assert_msg(count == 0, "%s", msgs);
	free(msgs);

	char *text = ir_print_str(g);
	ck_assert_ptr_nonnull(strstr(text, "%2 = relu(%1) : f32[2,3] unit(0, f)\n"));
	ck_assert_ptr_nonnull(strstr(text, "%3 = add(%0, %2) : f32[2,3] unit(0, y1)\n"));
	ir_graph *back = parse_ok(text);
	char *again = ir_print_str(back);
	ck_assert_str_eq(text, again);
	free(again);
	ir_graph_free(back);
	free(text);

	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);
	ir_dot(fp, g);
	fclose(fp);
	char *unit = strstr(buf, "subgraph cluster_u0 {"), *fc = strstr(buf, "subgraph cluster_u0_f {");
	char *gc = strstr(buf, "subgraph cluster_u0_g {");
	ck_assert_ptr_nonnull(unit);
	ck_assert_ptr_nonnull(fc);
	ck_assert_ptr_nonnull(gc);
	ck_assert(unit < fc && fc < gc);
	ck_assert(strstr(buf, "n0 [") < unit);               /* x1 outside the unit */
	ck_assert(strstr(buf, "n3 [") > unit && strstr(buf, "n3 [") < fc); /* y1 in it */
	ck_assert(strstr(buf, "n2 [") > fc && strstr(buf, "n2 [") < gc);   /* F's relu in F */
	ck_assert(strstr(buf, "n4 [") > gc);                 /* G's relu in G */
	free(buf);
	ir_graph_free(g);
}
END_TEST

START_TEST(test_diag_caret)
{
	ir_diag_item it = {{"f.ir", 2, 5}, (char *)"bad thing"};
	const char *src = "line one\nabc defg\n";
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ir_diag_print(f, &it, src, strlen(src));
	fclose(f);
	ck_assert_str_eq(buf, "f.ir:2:5: error: bad thing\n  abc defg\n      ^\n");
	free(buf);
}
END_TEST

START_TEST(test_diags_capped)
{
	/* A hostile file's millions of errors must not cost a string each. */
	ir_diags d;
	ir_diags_init(&d);
	for (int i = 0; i < IR_MAX_DIAGS + 500; i++)
		ir_diag_add(&d, (ir_pos){"f.ir", i + 1, 1}, "error %d", i);
	ck_assert_int_eq(d.n, IR_MAX_DIAGS);
	ck_assert_int_eq(d.total, IR_MAX_DIAGS + 500);
	ck_assert_str_eq(d.items[IR_MAX_DIAGS - 1].msg, "error 999");
	ir_diags_clear(&d);
	ck_assert_int_eq(d.n, 0);
	ck_assert_int_eq(d.total, 0);
	ir_diag_add(&d, (ir_pos){0}, "again");
	ck_assert_int_eq(d.n, 1);
	ir_diags_free(&d);
}
END_TEST

static Suite *ir_suite(void)
{
	Suite *s = suite_create("ir");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_op_table);
	tcase_add_test(tc, test_type_sizes);
	tcase_add_test(tc, test_conv_same_stride2);
	tcase_add_test(tc, test_shape_mismatch_reported);
	tcase_add_test(tc, test_declared_type_checked);
	tcase_add_test(tc, test_float_roundtrip);
	tcase_add_test(tc, test_print_parse_identity);
	tcase_add_test(tc, test_parse_renumbers);
	tcase_add_test(tc, test_insert_keeps_ids);
	tcase_add_loop_test(tc, test_parse_errors, 0, (int)(sizeof parse_errors / sizeof parse_errors[0]));
	tcase_add_test(tc, test_random_roundtrip);
	tcase_add_test(tc, test_verify_cycle_through_ordering_edge);
	tcase_add_test(tc, test_verify_collects_all);
	tcase_add_test(tc, test_verify_update_ordering);
	tcase_add_test(tc, test_verify_recompute_is_stateless);
	tcase_add_test(tc, test_verify_order);
	tcase_add_test(tc, test_verify_plan_overlaps);
	tcase_add_test(tc, test_verify_plan_in_place);
	tcase_add_test(tc, test_verify_plan_ties);
	tcase_add_test(tc, test_dot_dashed_ordering_edges);
	tcase_add_test(tc, test_unit_marker_and_clusters);
	tcase_add_test(tc, test_diag_caret);
	tcase_add_test(tc, test_diags_capped);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ir_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
