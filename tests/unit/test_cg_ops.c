/* test_cg_ops.c: the generated kernels of the non-elementwise ops (k_bn.c,
 * k_pool.c, k_layout.c, k_loss.c, and matmul) against the interpreter,
 * through the harness of test_codegen.c: each case is a small hand-built
 * graph, planned, JIT-compiled and run for two steps in f32 and f64 on 1
 * and 2 threads (3 where a thread's range can split a row or block), and
 * every output and state tensor must match the reference kernels within
 * 1e-5 (f32) or 1e-12 (f64) relative.
 *
 * The shapes are chosen odd: pools with leftover rows and columns, padded
 * and fully padded maxpool windows, ties (maxpool over relu's zeros),
 * rank-2 batch norm, reduce_sum over every kind of axis set, unequal concat
 * and split pieces, copies long enough to be cut into pieces, and logits
 * large enough to overflow exp without the max shift. */
#include <check.h>
#include <math.h>
#include <stdio.h>

#include "codegen_suites.h"

/* ---- building graphs -------------------------------------------------------- */

typedef struct {
	ir_graph *g;
	ir_dtype dt;
	int threads;
} gb;

static gb gb_new(const char *name, int i)
{
	gb b = {ir_graph_new(name), i % 2 ? IR_F64 : IR_F32, 1 + i / 2 % 2};
	return b;
}

static ir_node *input(gb *b, const char *name, int rank, const int64_t *dims)
{
	ir_node *n = ir_node_new(b->g, IR_OP_INPUT, NULL, 0);
	ir_node_set_str(b->g, n, IR_ATTR_NAME, name);
	n->type = ir_type_make(b->dt, rank, dims);
	return n;
}

static ir_node *labels(gb *b, const char *name, int64_t n)
{
	ir_node *l = input(b, name, 1, &n);
	l->type.dtype = IR_I32;
	return l;
}

static ir_node *state(gb *b, const char *name, int64_t c)
{
	ir_node *n = ir_node_new(b->g, IR_OP_STATE, NULL, 0);
	n->name = ir_arena_strdup(b->g->arena, name);
	n->type = ir_type_make(b->dt, 1, &c);
	return n;
}

/* A node whose type is inferred later (typed), after its attributes. */
static ir_node *node(gb *b, ir_op op, ir_node *x, ir_node *y, ir_node *z)
{
	ir_node *in[3] = {x, y, z};
	return ir_node_new(b->g, op, in, z ? 3 : y ? 2 : 1);
}

static ir_node *typed(ir_node *n)
{
	ir_diags d;
	ir_diags_init(&d);
	bool ok = ir_node_infer(n, &d);
	ck_assert_msg(ok, "%s: %s", ir_op_name(n->op), ok ? "" : d.items[0].msg);
	ir_diags_free(&d);
	return n;
}

/* The same, with the result type declared (gradients of pools). */
static ir_node *declared(ir_node *n, const ir_type *t)
{
	n->type = *t;
	return typed(n);
}

static void output(gb *b, ir_node *v, const char *name)
{
	ir_node *n = ir_node_new(b->g, IR_OP_OUTPUT, &v, 1);
	ir_node_set_str(b->g, n, IR_ATTR_NAME, name);
	n->type = v->type;
}

/* Plans, compiles and compares b's graph over two steps, then frees it. */
static void check_graph(gb *b, uint64_t seed, const char *what, int i)
{
	cgt_plan(b->g, b->threads);
	double err = cgt_compare(b->g, b->threads, seed, 2);
	double tol = b->dt == IR_F32 ? 1e-5 : 1e-12;
	ck_assert_msg(err <= tol, "%s (case %d, %s, %d threads): error %g > %g", what, i,
		ir_dtype_name(b->dt), b->threads, err, tol);
	ir_graph_free(b->g);
}

/* Loop index i: bits 0 and 1 choose the dtype and the thread count (1, 2),
 * the rest the case. */
#define CASE(i, table) (&(table)[(i) / 4])
#define LOOPS(table) ((int)(sizeof(table) / sizeof((table)[0])) * 4)

/* ---- batch norm: statistics, dgamma, dbeta, running statistics --------------- */

typedef struct {
	int rank;
	int64_t dims[4];
} shape_case;

static const shape_case bn_cases[] = {
	{4, {3, 5, 7, 7}},
	{2, {6, 5}},       /* [N,C]: H·W counts as 1 */
	{4, {2, 1, 3, 3}}, /* one channel: an extent of 1 */
	{4, {4, 3, 1, 1}},
	{4, {2, 3, 17, 19}},
	/* fashion's planes: runs of 49, 196 and 784, a whole number of
	 * vectors or not, and longer than the vector blocks (k_bn.c) */
	{4, {3, 4, 7, 7}},
	{4, {2, 3, 14, 14}},
	{4, {2, 2, 28, 28}},
	{4, {5, 2, 6, 6}}, /* 36: a tail after full vectors */
};

START_TEST(test_bn)
{
	const shape_case *c = CASE(_i, bn_cases);
	gb b = gb_new("bn", _i);
	int64_t ch = c->dims[1], m = c->dims[0] * (c->rank == 4 ? c->dims[2] * c->dims[3] : 1);
	ir_node *x = input(&b, "x", c->rank, c->dims), *dy = input(&b, "dy", c->rank, c->dims);
	ir_node *mean = state(&b, "bn.mean", ch), *var = state(&b, "bn.var", ch);
	ir_node *st = typed(node(&b, IR_OP_BN_STATS, x, NULL, NULL));
	ir_node *dg = node(&b, IR_OP_BN_DGAMMA, dy, x, st);
	ir_node_set_float(b.g, dg, IR_ATTR_EPS, 1e-3);
	typed(dg);
	ir_node *db = node(&b, IR_OP_REDUCE_SUM, dy, NULL, NULL);
	static const int64_t nchw[] = {0, 2, 3}, nc[] = {0};
	ir_node_set_ints(b.g, db, IR_ATTR_AXES, c->rank == 4 ? nchw : nc, c->rank == 4 ? 3 : 1);
	typed(db);
	ir_node *rm = node(&b, IR_OP_BN_RUNNING_MEAN, mean, st, NULL);
	ir_node_set_float(b.g, rm, IR_ATTR_MOMENTUM, 0.9);
	typed(rm);
	ir_node *rv = node(&b, IR_OP_BN_RUNNING_VAR, var, st, NULL);
	ir_node_set_float(b.g, rv, IR_ATTR_MOMENTUM, 0.75);
	ir_node_set_int(b.g, rv, IR_ATTR_NCOUNT, m);
	typed(rv);
	output(&b, st, "stats");
	output(&b, dg, "dgamma");
	output(&b, db, "dbeta");
	check_graph(&b, 21, "batch norm", _i);
}
END_TEST

/* Statistics of data far from zero: x + 1e6 (x the random fill, in
 * [-0.5, 0.5]).  The f32 kernel's one pass is shifted by the channel's
 * first element; without the shift, E[x²] − E[x]² would lose the variance
 * (mean²/var ~ 1e13) and miss the reference's two passes by ~1e-3. */
START_TEST(test_bn_offset)
{
	static const int64_t dims[] = {3, 4, 7, 7};
	gb b = gb_new("bn_offset", _i);
	ir_node *x = input(&b, "x", 4, dims);
	ir_node *big = ir_node_new(b.g, IR_OP_CONST, NULL, 0);
	ir_node_set_float(b.g, big, IR_ATTR_VALUE, 1e6);
	big->type = x->type;
	ir_node *xs = typed(node(&b, IR_OP_ADD, x, big, NULL));
	output(&b, typed(node(&b, IR_OP_BN_STATS, xs, NULL, NULL)), "stats");
	check_graph(&b, 23, "batch norm statistics, offset", _i);
}
END_TEST

/* ---- reduce_sum over any increasing axes ------------------------------------ */

typedef struct {
	int rank;
	int64_t dims[4];
	int naxes;
	int64_t axes[4];
} reduce_case;

static const reduce_case reduce_cases[] = {
	{4, {3, 4, 5, 6}, 3, {0, 2, 3}}, /* dbeta */
	{2, {7, 9}, 1, {0}},             /* dense bias gradient: innermost kept */
	{2, {7, 9}, 1, {1}},
	{4, {3, 4, 5, 6}, 1, {0}},       /* kept C·H·W, one long row */
	{4, {3, 4, 5, 6}, 1, {1}},       /* kept N and H·W */
	{4, {3, 4, 5, 6}, 1, {3}},
	{4, {3, 4, 5, 6}, 2, {0, 1}},
	{4, {3, 4, 5, 6}, 2, {1, 3}},
	{4, {3, 4, 5, 6}, 2, {0, 2}},    /* kept C and W: rows of W split across threads */
	{4, {3, 4, 5, 6}, 2, {2, 3}},
	{4, {3, 4, 5, 6}, 4, {0, 1, 2, 3}}, /* to a scalar */
	{3, {3, 4, 5}, 1, {1}},          /* 15 outputs in blocks of 5 */
	{3, {2, 1, 5}, 1, {1}},          /* a reduced axis of size 1 */
	{4, {3, 2, 14, 14}, 3, {0, 2, 3}}, /* dbeta over runs of 196 */
	{3, {2, 3, 70}, 2, {0, 2}},      /* runs of 70: vector blocks and a tail */
};

START_TEST(test_reduce_sum)
{
	const reduce_case *c = CASE(_i, reduce_cases);
	gb b = gb_new("reduce", _i);
	ir_node *x = input(&b, "x", c->rank, c->dims);
	ir_node *r = node(&b, IR_OP_REDUCE_SUM, x, NULL, NULL);
	ir_node_set_ints(b.g, r, IR_ATTR_AXES, c->axes, c->naxes);
	output(&b, typed(r), "sum");
	check_graph(&b, 31, "reduce_sum", _i);
}
END_TEST

/* Three threads: ranges that start and end inside a kept row. */
START_TEST(test_reduce_sum_3)
{
	const reduce_case *c = &reduce_cases[_i];
	gb b = gb_new("reduce", 0);
	b.threads = 3;
	ir_node *x = input(&b, "x", c->rank, c->dims);
	ir_node *r = node(&b, IR_OP_REDUCE_SUM, x, NULL, NULL);
	ir_node_set_ints(b.g, r, IR_ATTR_AXES, c->axes, c->naxes);
	output(&b, typed(r), "sum");
	check_graph(&b, 33, "reduce_sum", _i);
}
END_TEST

/* ---- pooling ------------------------------------------------------------------ */

typedef struct {
	int64_t dims[4];
	int64_t window;
} avg_case;

static const avg_case avg_cases[] = {
	{{2, 3, 7, 7}, 2}, /* a leftover row and column */
	{{2, 3, 7, 7}, 3},
	{{1, 2, 8, 6}, 2}, /* exact */
	{{3, 2, 5, 9}, 4}, /* leftovers of 1 and 1 */
	{{2, 2, 4, 4}, 1},
	{{2, 3, 7, 7}, 7}, /* the whole plane */
};

START_TEST(test_avgpool)
{
	const avg_case *c = CASE(_i, avg_cases);
	gb b = gb_new("avgpool", _i);
	ir_node *x = input(&b, "x", 4, c->dims);
	ir_node *y = node(&b, IR_OP_AVGPOOL, x, NULL, NULL);
	ir_node_set_int(b.g, y, IR_ATTR_WINDOW, c->window);
	typed(y);
	ir_node *dy = input(&b, "dy", 4, y->type.dim);
	ir_node *dx = node(&b, IR_OP_AVGPOOL_GRAD, dy, NULL, NULL);
	ir_node_set_int(b.g, dx, IR_ATTR_WINDOW, c->window);
	declared(dx, &x->type);
	output(&b, y, "y");
	output(&b, dx, "dx");
	check_graph(&b, 41, "avgpool", _i);
}
END_TEST

typedef struct {
	int64_t dims[4];
	int64_t window, stride, pad[4];
	bool ties;  /* pool relu(x): windows of equal zeros */
	bool empty; /* some windows lie wholly in the padding (−∞) */
} max_case;

static const max_case max_cases[] = {
	{{2, 3, 7, 7}, 3, 2, {1, 1, 1, 1}, false, false}, /* SAME-style, overlapping */
	{{2, 3, 7, 7}, 2, 2, {0, 0, 0, 0}, false, false}, /* leftovers */
	{{2, 2, 6, 5}, 3, 1, {0, 2, 1, 0}, false, false}, /* asymmetric padding */
	{{2, 3, 7, 7}, 3, 2, {1, 1, 1, 1}, true, false},
	{{2, 2, 5, 5}, 2, 2, {2, 2, 3, 1}, false, true},
	{{1, 2, 4, 4}, 2, 2, {2, 2, 2, 2}, true, true},
};

START_TEST(test_maxpool)
{
	const max_case *c = CASE(_i, max_cases);
	gb b = gb_new("maxpool", _i);
	ir_node *x = input(&b, "x", 4, c->dims);
	if (c->ties)
		x = typed(node(&b, IR_OP_RELU, x, NULL, NULL));
	ir_node *y = node(&b, IR_OP_MAXPOOL, x, NULL, NULL);
	ir_node *dy = NULL, *dx = NULL;
	for (int k = 0; k < 2; k++) {
		ir_node *n = k ? dx : y;
		ir_node_set_int(b.g, n, IR_ATTR_WINDOW, c->window);
		ir_node_set_int(b.g, n, IR_ATTR_STRIDE, c->stride);
		ir_node_set_ints(b.g, n, IR_ATTR_PAD, c->pad, 4);
		if (k) {
			declared(n, &x->type);
		} else {
			typed(n);
			dy = input(&b, "dy", 4, y->type.dim);
			dx = node(&b, IR_OP_MAXPOOL_GRAD, dy, x, NULL);
		}
	}
	if (c->empty) {
		/* −∞ compares as 0 error against anything infinite: check it as
		 * relu(y) (finite) and y − y (NaN exactly where y is infinite). */
		output(&b, typed(node(&b, IR_OP_RELU, y, NULL, NULL)), "relu_y");
		output(&b, typed(node(&b, IR_OP_SUB, y, y, NULL)), "nan_where_inf");
	} else {
		output(&b, y, "y");
	}
	output(&b, dx, "dx");
	check_graph(&b, 43, "maxpool", _i);
}
END_TEST

static const shape_case gap_cases[] = {
	{4, {3, 5, 7, 7}},
	{4, {2, 3, 1, 1}},
	{4, {1, 1, 13, 11}},
};

START_TEST(test_global_avgpool)
{
	const shape_case *c = CASE(_i, gap_cases);
	gb b = gb_new("gap", _i);
	ir_node *x = input(&b, "x", 4, c->dims);
	output(&b, typed(node(&b, IR_OP_GLOBAL_AVGPOOL, x, NULL, NULL)), "y");
	check_graph(&b, 47, "global_avgpool", _i);
}
END_TEST

/* ---- layout --------------------------------------------------------------------- */

typedef struct {
	ir_op op;
	int64_t a[4], b[4]; /* operand shapes (b for concat) */
	int64_t axis, part, parts; /* split, concat */
	int64_t lo, hi;            /* channel_pad, channel_slice */
} layout_case;

static const layout_case layout_cases[] = {
	{IR_OP_SPLIT, {2, 6, 3, 3}, {0}, 1, 0, 2, 0, 0},
	{IR_OP_SPLIT, {2, 6, 3, 3}, {0}, 1, 2, 3, 0, 0},
	{IR_OP_SPLIT, {4, 3, 3, 5}, {0}, 0, 1, 2, 0, 0},
	{IR_OP_SPLIT, {2, 3, 4, 6}, {0}, 3, 1, 3, 0, 0},
	{IR_OP_SPLIT, {2, 8, 96, 96}, {0}, 0, 1, 2, 0, 0},  /* one row cut into pieces */
	{IR_OP_CONCAT, {2, 3, 4, 4}, {2, 5, 4, 4}, 1, 0, 0, 0, 0},
	{IR_OP_CONCAT, {2, 3, 4, 4}, {3, 3, 4, 4}, 0, 0, 0, 0, 0},
	{IR_OP_CONCAT, {2, 3, 4, 4}, {2, 3, 1, 4}, 2, 0, 0, 0, 0},
	{IR_OP_CONCAT, {1, 8, 96, 96}, {2, 8, 96, 96}, 0, 0, 0, 0, 0}, /* 2 + 3 pieces */
	{IR_OP_CHANNEL_PAD, {2, 3, 5, 5}, {0}, 0, 0, 0, 1, 2},
	{IR_OP_CHANNEL_PAD, {2, 3, 5, 5}, {0}, 0, 0, 0, 0, 3},
	{IR_OP_CHANNEL_PAD, {3, 2, 4, 3}, {0}, 0, 0, 0, 4, 0},
	{IR_OP_CHANNEL_SLICE, {2, 6, 5, 5}, {0}, 0, 0, 0, 1, 2},
	{IR_OP_CHANNEL_SLICE, {2, 6, 5, 5}, {0}, 0, 0, 0, 0, 3},
	{IR_OP_CHANNEL_SLICE, {3, 6, 4, 3}, {0}, 0, 0, 0, 5, 0},
};

static void layout_graph(gb *b, const layout_case *c)
{
	ir_node *x = input(b, "a", 4, c->a), *n;
	if (c->op == IR_OP_CONCAT) {
		n = node(b, IR_OP_CONCAT, x, input(b, "b", 4, c->b), NULL);
		ir_node_set_int(b->g, n, IR_ATTR_AXIS, c->axis);
	} else if (c->op == IR_OP_SPLIT) {
		n = node(b, IR_OP_SPLIT, x, NULL, NULL);
		ir_node_set_int(b->g, n, IR_ATTR_AXIS, c->axis);
		ir_node_set_int(b->g, n, IR_ATTR_PART, c->part);
		ir_node_set_int(b->g, n, IR_ATTR_PARTS, c->parts);
	} else {
		n = node(b, c->op, x, NULL, NULL);
		ir_node_set_int(b->g, n, IR_ATTR_LO, c->lo);
		ir_node_set_int(b->g, n, IR_ATTR_HI, c->hi);
	}
	output(b, typed(n), "y");
}

START_TEST(test_layout)
{
	const layout_case *c = CASE(_i, layout_cases);
	gb b = gb_new("layout", _i);
	layout_graph(&b, c);
	check_graph(&b, 51, ir_op_name(c->op), _i);
}
END_TEST

START_TEST(test_layout_3)
{
	gb b = gb_new("layout", 0);
	b.threads = 3;
	layout_graph(&b, &layout_cases[_i]);
	check_graph(&b, 53, ir_op_name(layout_cases[_i].op), _i);
}
END_TEST

/* ---- softmax cross-entropy -------------------------------------------------------- */

typedef struct {
	int64_t n, k;
	double factor; /* logits = factor · uniform(-1, 1) */
} xent_case;

static const xent_case xent_cases[] = {
	{7, 10, 1},
	{1, 3, 1},
	{5, 1, 1},     /* one class: loss 0, gradient 0 */
	{9, 13, 1000}, /* exp(1000) overflows without the max shift */
	{33, 4, 20},
};

START_TEST(test_softmax_xent)
{
	const xent_case *c = CASE(_i, xent_cases);
	gb b = gb_new("xent", _i);
	int64_t dims[2] = {c->n, c->k};
	ir_node *x = input(&b, "logits", 2, dims), *y = labels(&b, "labels", c->n);
	if (c->factor != 1) {
		x = node(&b, IR_OP_SCALE, x, NULL, NULL);
		ir_node_set_float(b.g, x, IR_ATTR_FACTOR, c->factor);
		typed(x);
	}
	output(&b, typed(node(&b, IR_OP_SOFTMAX_XENT, x, y, NULL)), "loss");
	output(&b, typed(node(&b, IR_OP_SOFTMAX_XENT_GRAD, x, y, NULL)), "dlogits");
	check_graph(&b, 61, "softmax_xent", _i);
}
END_TEST

/* ---- matmul ------------------------------------------------------------------------- */

typedef struct {
	int64_t m, k, n, ta, tb;
} matmul_case;

static const matmul_case matmul_cases[] = {
	{5, 7, 3, 0, 0},
	{5, 7, 3, 1, 0},
	{5, 7, 3, 0, 1}, /* a dense layer: x·wᵀ */
	{4, 6, 9, 1, 1},
	{1, 1, 1, 0, 0},
};

START_TEST(test_matmul)
{
	const matmul_case *c = CASE(_i, matmul_cases);
	gb b = gb_new("matmul", _i);
	int64_t ad[2] = {c->ta ? c->k : c->m, c->ta ? c->m : c->k};
	int64_t bd[2] = {c->tb ? c->n : c->k, c->tb ? c->k : c->n};
	ir_node *y = node(&b, IR_OP_MATMUL, input(&b, "a", 2, ad), input(&b, "b", 2, bd), NULL);
	ir_node_set_int(b.g, y, IR_ATTR_TRANS_A, c->ta);
	ir_node_set_int(b.g, y, IR_ATTR_TRANS_B, c->tb);
	output(&b, typed(y), "y");
	check_graph(&b, 71, "matmul", _i);
}
END_TEST

/* ---- NaN and ±∞ ------------------------------------------------------------------ */

/* Poked inputs: the JIT must agree with the interpreter element by element,
 * NaN where it has NaN, and both must give what PyTorch gives. */

typedef struct {
	int64_t at;
	double want; /* NaN: must be NaN */
} expect;

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Plans and runs b's graph on the poked inputs, checks output `out` of both
 * engines against want, and frees the graph. */
static void check_poked(gb *b, const cgt_poke *p, int np, const char *out, const expect *want, int nwant)
{
	static double jit[4096], ref[4096];
	cgt_plan(b->g, b->threads);
	double err = cgt_compare_poked(b->g, b->threads, 81, 1, p, np, out, jit, ref);
	ck_assert_msg(err <= (b->dt == IR_F32 ? 1e-5 : 1e-12), "%s: JIT vs interpreter %g", out, err);
	for (int k = 0; k < nwant; k++) {
		double w = want[k].want, j = jit[want[k].at], r = ref[want[k].at];
		ck_assert_msg(isnan(w) ? isnan(j) && isnan(r) : j == w && r == w,
			"%s[%lld] (%s, %d threads): JIT %g, interpreter %g, want %g", out, (long long)want[k].at,
			ir_dtype_name(b->dt), b->threads, j, r, w);
	}
	ir_graph_free(b->g);
}

/* relu(NaN) = NaN, relu(±∞) = ∞, 0; relu_grad passes dy where y is NaN (as
 * PyTorch's threshold_backward) and gives 0 where y <= 0, even for a NaN
 * dy.  1938 elements, so the vector loop sees the NaNs, and the tail. */
START_TEST(test_relu_nan)
{
	static const int64_t dims[4] = {2, 3, 17, 19};
	static const cgt_poke pokes[] = {
		{"x", 0, NAN}, {"x", 1, INFINITY}, {"x", 2, -INFINITY}, {"x", 100, NAN}, {"x", 500, -1},
		{"x", 1001, NAN}, {"x", 1937, NAN},
		{"dy", 0, 0.5}, {"dy", 1, 0.25}, {"dy", 2, 4}, {"dy", 100, NAN}, {"dy", 500, NAN},
		{"dy", 1001, -2}, {"dy", 1937, 3},
	};
	static const expect y_want[] = {{0, NAN}, {1, INFINITY}, {2, 0}, {100, NAN}, {500, 0},
		{1001, NAN}, {1937, NAN}};
	static const expect dx_want[] = {{0, 0.5}, {1, 0.25}, {2, 0}, {100, NAN}, {500, 0},
		{1001, -2}, {1937, 3}};
	for (int k = 0; k < 2; k++) {
		gb b = gb_new("relu_nan", _i);
		ir_node *y = typed(node(&b, IR_OP_RELU, input(&b, "x", 4, dims), NULL, NULL));
		output(&b, y, "y");
		output(&b, typed(node(&b, IR_OP_RELU_GRAD, input(&b, "dy", 4, dims), y, NULL)), "dx");
		check_poked(&b, pokes, COUNT(pokes), k ? "dx" : "y", k ? dx_want : y_want,
			k ? COUNT(dx_want) : COUNT(y_want));
	}
}
END_TEST

static ir_node *window3s2(gb *b, ir_node *n)
{
	static const int64_t pad[4] = {1, 1, 1, 1};
	ir_node_set_int(b->g, n, IR_ATTR_WINDOW, 3);
	ir_node_set_int(b->g, n, IR_ATTR_STRIDE, 2);
	ir_node_set_ints(b->g, n, IR_ATTR_PAD, pad, 4);
	return n;
}

/* A NaN wins its windows; of two NaNs in one window, the last in row-major
 * order takes the gradient (PyTorch's "val > maxval || isnan(val)"). */
START_TEST(test_maxpool_nan)
{
	static const int64_t dims[4] = {2, 3, 7, 7};
	/* Plane 0: NaN at (1,1), in windows (0,0), (0,1), (1,0), (1,1), and at
	 * (0,2), in window (0,1) only, before (1,1).  Plane 1: +∞ at (3,3). */
	static const cgt_poke pokes[] = {
		{"x", 8, NAN}, {"x", 2, NAN}, {"x", 49 + 24, INFINITY},
		{"dy", 0, 1}, {"dy", 1, 2}, {"dy", 4, 4}, {"dy", 5, 8},
	};
	static const expect y_want[] = {{0, NAN}, {1, NAN}, {4, NAN}, {5, NAN}, {16 + 5, INFINITY}};
	static const expect dx_want[] = {{8, 1 + 2 + 4 + 8}, {2, 0}};
	for (int k = 0; k < 2; k++) {
		gb b = gb_new("maxpool_nan", _i);
		ir_node *x = input(&b, "x", 4, dims);
		ir_node *y = typed(window3s2(&b, node(&b, IR_OP_MAXPOOL, x, NULL, NULL)));
		ir_node *dy = input(&b, "dy", 4, y->type.dim);
		output(&b, y, "y");
		output(&b, declared(window3s2(&b, node(&b, IR_OP_MAXPOOL_GRAD, dy, x, NULL)), &x->type), "dx");
		check_poked(&b, pokes, COUNT(pokes), k ? "dx" : "y", k ? dx_want : y_want,
			k ? COUNT(dx_want) : COUNT(y_want));
	}
}
END_TEST

/* A NaN logit (also as a row's first, where the max starts) or +∞ makes the
 * loss and its row's gradient NaN; −∞ (not the label) is harmless, which
 * the comparison with the interpreter checks. */
START_TEST(test_softmax_xent_nan)
{
	static const int64_t dims[2] = {5, 10};
	static const cgt_poke pokes[] = {
		{"logits", 3, NAN}, {"logits", 10, NAN}, {"logits", 25, INFINITY}, {"logits", 32, -INFINITY},
	};
	static const expect loss_want[] = {{0, NAN}};
	expect rows_want[30];
	for (int i = 0; i < 30; i++)
		rows_want[i] = (expect){i, NAN};
	for (int k = 0; k < 2; k++) {
		gb b = gb_new("xent_nan", _i);
		ir_node *x = input(&b, "logits", 2, dims), *lab = labels(&b, "labels", 5);
		output(&b, typed(node(&b, IR_OP_SOFTMAX_XENT, x, lab, NULL)), "loss");
		output(&b, typed(node(&b, IR_OP_SOFTMAX_XENT_GRAD, x, lab, NULL)), "dlogits");
		check_poked(&b, pokes, COUNT(pokes), k ? "dlogits" : "loss", k ? rows_want : loss_want,
			k ? COUNT(rows_want) : COUNT(loss_want));
	}
}
END_TEST

Suite *cg_ops_suite(void)
{
	Suite *s = suite_create("codegen ops");
	TCase *tc = tcase_create("ops");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_bn, 0, LOOPS(bn_cases));
	tcase_add_loop_test(tc, test_bn_offset, 0, 4);
	tcase_add_loop_test(tc, test_reduce_sum, 0, LOOPS(reduce_cases));
	tcase_add_loop_test(tc, test_reduce_sum_3, 0, LOOPS(reduce_cases) / 4);
	tcase_add_loop_test(tc, test_avgpool, 0, LOOPS(avg_cases));
	tcase_add_loop_test(tc, test_maxpool, 0, LOOPS(max_cases));
	tcase_add_loop_test(tc, test_global_avgpool, 0, LOOPS(gap_cases));
	tcase_add_loop_test(tc, test_layout, 0, LOOPS(layout_cases));
	tcase_add_loop_test(tc, test_layout_3, 0, LOOPS(layout_cases) / 4);
	tcase_add_loop_test(tc, test_softmax_xent, 0, LOOPS(xent_cases));
	tcase_add_loop_test(tc, test_matmul, 0, LOOPS(matmul_cases));
	tcase_add_loop_test(tc, test_relu_nan, 0, 4);
	tcase_add_loop_test(tc, test_maxpool_nan, 0, 4);
	tcase_add_loop_test(tc, test_softmax_xent_nan, 0, 4);
	suite_add_tcase(s, tc);
	return s;
}
