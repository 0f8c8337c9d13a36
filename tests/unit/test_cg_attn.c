/* test_cg_attn.c: the generated kernels of the attention and token-layout
 * ops (k_attn.c; bmatmul and matmul over tokens in k_conv.c) against the
 * interpreter, through test_codegen.c's harness: each case is a small graph,
 * planned, JIT-compiled and run in f32 and f64 on 1 and 2 threads, every
 * output within 1e-5 (f32) or 1e-12 (f64) relative of the reference
 * kernels'.  Run for the host's CPU and, by meson's codegen-x86-64-v3, for
 * AVX2.
 *
 * Then one attention sub-block, F(z) = proj(attn(qkv(z))), in a whole
 * network made of the new ops (patch embedding, positional embedding,
 * duplicated streams, the coupling's add, the stream merge (x1 + x2)/2,
 * tokens back to an image, pooling, cross-entropy), differentiated by
 * autodiff: its gradients against central finite differences of the loss
 * (f64, interpreter), and the JIT's whole step against the interpreter's.
 * Its attention has no softmax (softmax is not an op of this branch): the
 * scores are scaled by 1/sqrt(d) and multiply v directly. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_suites.h"
#include "passes.h"
#include "rt.h"

/* ---- building graphs ----------------------------------------------------- */

typedef struct {
	ir_graph *g;
	ir_dtype dt;
	int threads;
} net;

/* Loop index i: bit 0 the dtype, bit 1 the thread count, the rest the case. */
static net net_new(int i)
{
	return (net){ir_graph_new("attn"), i % 2 ? IR_F64 : IR_F32, 1 + i / 2 % 2};
}

static ir_node *source(net *b, ir_op op, const char *name, int rank, const int64_t *dims)
{
	ir_node *n = ir_node_new(b->g, op, NULL, 0);
	if (op == IR_OP_INPUT)
		ir_node_set_str(b->g, n, IR_ATTR_NAME, name);
	else
		n->name = ir_arena_strdup(b->g->arena, name);
	n->type = ir_type_make(b->dt, rank, dims);
	return n;
}

/* op(in...) with integer attributes given as (kind, value) pairs after the
 * operands, ending in -1; the result type inferred (or checked, when `as`
 * declares it). */
static ir_node *make(net *b, ir_op op, const ir_type *as, int nin, ...)
{
	ir_node *in[3];
	va_list ap;
	va_start(ap, nin);
	for (int i = 0; i < nin; i++)
		in[i] = va_arg(ap, ir_node *);
	ir_node *n = ir_node_new(b->g, op, in, nin);
	for (int k; (k = va_arg(ap, int)) >= 0;)
		ir_node_set_int(b->g, n, (ir_attr_kind)k, va_arg(ap, int64_t));
	va_end(ap);
	if (as)
		n->type = *as;
	ir_diags d;
	ir_diags_init(&d);
	bool ok = ir_node_infer(n, &d);
	ck_assert_msg(ok, "%s: %s", ir_op_name(op), ok ? "" : d.items[0].msg);
	ir_diags_free(&d);
	return n;
}

static ir_node *scaled(net *b, ir_node *x, double factor)
{
	ir_node *n = ir_node_new(b->g, IR_OP_SCALE, &x, 1);
	ir_node_set_float(b->g, n, IR_ATTR_FACTOR, factor);
	n->type = x->type;
	return n;
}

static void output(net *b, ir_node *v, const char *name)
{
	ir_node *n = ir_node_new(b->g, IR_OP_OUTPUT, &v, 1);
	ir_node_set_str(b->g, n, IR_ATTR_NAME, name);
	n->type = v->type;
}

static void check(net *b, uint64_t seed, const char *what, int i)
{
	cgt_plan(b->g, b->threads);
	double err = cgt_compare(b->g, b->threads, seed, 2);
	double tol = b->dt == IR_F32 ? 1e-5 : 1e-12;
	ck_assert_msg(err <= tol, "%s (case %d, %s, %d threads): error %g > %g", what, i / 4,
		ir_dtype_name(b->dt), b->threads, err, tol);
	ir_graph_free(b->g);
}

#define END (-1)
#define TA IR_ATTR_TRANS_A
#define TB IR_ATTR_TRANS_B

/* ---- products ------------------------------------------------------------ */

typedef struct {
	int rank;
	int64_t batch[2], m, k, n;
	int ta, tb;
} bmm_case;

static const bmm_case bmm_cases[] = {
	{3, {6}, 5, 4, 7, 0, 0},
	{4, {2, 3}, 5, 4, 7, 0, 1}, /* scores q·kᵀ */
	{4, {2, 3}, 5, 4, 7, 1, 0},
	{4, {2, 3}, 3, 6, 2, 1, 1},
	{3, {1}, 1, 1, 1, 0, 0},
	{4, {2, 2}, 9, 0, 3, 0, 0}, /* an empty reduction: zeros */
};

START_TEST(test_bmatmul)
{
	const bmm_case *c = &bmm_cases[_i / 4];
	net b = net_new(_i);
	int64_t ad[4], bd[4];
	int lead = c->rank - 2;
	for (int i = 0; i < lead; i++)
		ad[i] = bd[i] = c->batch[i];
	ad[lead] = c->ta ? c->k : c->m;
	ad[lead + 1] = c->ta ? c->m : c->k;
	bd[lead] = c->tb ? c->n : c->k;
	bd[lead + 1] = c->tb ? c->k : c->n;
	ir_node *y = make(&b, IR_OP_BMATMUL, NULL, 2, source(&b, IR_OP_INPUT, "a", c->rank, ad),
		source(&b, IR_OP_INPUT, "b", c->rank, bd), TA, (int64_t)c->ta, TB, (int64_t)c->tb, END);
	output(&b, y, "y");
	check(&b, 91, "bmatmul", _i);
}
END_TEST

/* A dense layer over tokens [3,7,5]·Wᵀ + bias, its data gradient and its
 * weight gradient (one product over the 21 rows each). */
START_TEST(test_dense_tokens)
{
	net b = net_new(_i);
	ir_node *x = source(&b, IR_OP_INPUT, "x", 3, (int64_t[]){3, 7, 5});
	ir_node *w = source(&b, IR_OP_PARAM, "fc.w", 2, (int64_t[]){6, 5});
	ir_node *bias = source(&b, IR_OP_PARAM, "fc.b", 1, (int64_t[]){6});
	ir_node *y = make(&b, IR_OP_MATMUL, NULL, 2, x, w, TB, (int64_t)1, END);
	output(&b, make(&b, IR_OP_BROADCAST_ADD, NULL, 2, y, bias, END), "y");
	ir_node *dy = source(&b, IR_OP_INPUT, "dy", 3, (int64_t[]){3, 7, 6});
	output(&b, make(&b, IR_OP_MATMUL, NULL, 2, dy, w, END), "dx");
	output(&b, make(&b, IR_OP_MATMUL, NULL, 2, dy, x, TA, (int64_t)1, END), "dw");
	output(&b, make(&b, IR_OP_MATMUL, NULL, 2, x, dy, TA, (int64_t)1, END), "dwt");
	check(&b, 93, "matmul over tokens", _i);
}
END_TEST

/* broadcast_add fused with its neighbours: a chain over tokens (the flat
 * loop: b read at the element index modulo its size), and one with
 * bias_add over [N,C] (the per-channel loop). */
START_TEST(test_broadcast_fused)
{
	net b = net_new(_i);
	ir_node *x = source(&b, IR_OP_INPUT, "x", 3, (int64_t[]){3, 7, 5});
	ir_node *bias = source(&b, IR_OP_PARAM, "fc.b", 1, (int64_t[]){5});
	ir_node *pos = source(&b, IR_OP_PARAM, "pos.b", 2, (int64_t[]){7, 5});
	ir_node *y = make(&b, IR_OP_RELU, NULL, 1, make(&b, IR_OP_BROADCAST_ADD, NULL, 2, x, bias, END), END);
	y = make(&b, IR_OP_BROADCAST_ADD, NULL, 2, scaled(&b, y, -0.5), pos, END);
	output(&b, make(&b, IR_OP_ADD, NULL, 2, y, x, END), "y");
	ir_node *v = source(&b, IR_OP_INPUT, "v", 2, (int64_t[]){6, 5});
	ir_node *w = make(&b, IR_OP_BIAS_ADD, NULL, 2, make(&b, IR_OP_BROADCAST_ADD, NULL, 2, v, bias, END), bias, END);
	output(&b, make(&b, IR_OP_RELU, NULL, 1, w, END), "w");
	cgt_plan(b.g, b.threads);
	int groups = 0;
	for (int i = 0; i < b.g->n; i++)
		groups = b.g->nodes[i]->group + 1 > groups ? b.g->nodes[i]->group + 1 : groups;
	ck_assert_int_eq(groups, 2);
	for (int i = 0; i < b.g->n; i++)
		ck_assert(b.g->nodes[i]->op != IR_OP_BROADCAST_ADD || b.g->nodes[i]->group >= 0);
	double err = cgt_compare(b.g, b.threads, 94, 2);
	ck_assert_msg(err <= (b.dt == IR_F32 ? 1e-5 : 1e-12), "fused broadcast_add: %g", err);
	ir_graph_free(b.g);
}
END_TEST

/* ---- layout ---------------------------------------------------------------- */

typedef struct {
	int64_t n, t, heads, d;
} heads_case;

static const heads_case heads_cases[] = {
	{2, 5, 3, 4},
	{1, 1, 1, 1},
	{3, 49, 4, 16}, /* revvit-fashion's shape, a smaller batch */
	{2, 7, 2, 3},
};

/* The three parts of qkv, merged back (1 and 3 operands), and the tokens
 * of a [N,C,H,W] image and back. */
START_TEST(test_heads)
{
	const heads_case *c = &heads_cases[_i / 4];
	net b = net_new(_i);
	int64_t D = c->heads * c->d;
	ir_node *qkv = source(&b, IR_OP_INPUT, "qkv", 3, (int64_t[]){c->n, c->t, 3 * D}), *p[3];
	for (int k = 0; k < 3; k++)
		p[k] = make(&b, IR_OP_HEADS_SPLIT, NULL, 1, qkv, IR_ATTR_HEADS, c->heads, IR_ATTR_PART, (int64_t)k,
			IR_ATTR_PARTS, (int64_t)3, END);
	output(&b, p[1], "k");
	output(&b, make(&b, IR_OP_HEADS_MERGE, NULL, 3, p[2], p[0], p[1], END), "vqk");
	output(&b, make(&b, IR_OP_HEADS_MERGE, NULL, 1, p[2], END), "v");
	ir_node *img = source(&b, IR_OP_INPUT, "img", 4, (int64_t[]){c->n, D, c->t, 2});
	ir_node *tok = make(&b, IR_OP_TO_TOKENS, NULL, 1, img, END);
	output(&b, tok, "tokens");
	output(&b, make(&b, IR_OP_FROM_TOKENS, &img->type, 1, tok, END), "image");
	ir_node *pos = source(&b, IR_OP_PARAM, "pos.b", 2, (int64_t[]){2 * c->t, D});
	output(&b, make(&b, IR_OP_BROADCAST_ADD, NULL, 2, tok, pos, END), "tokens+pos");
	check(&b, 95, "heads and tokens", _i);
}
END_TEST

/* The patch embedding: a p x p convolution with stride p, no padding, a
 * bias per channel, then tokens (28x28, p = 4: revvit-fashion's). */
START_TEST(test_patch_embedding)
{
	net b = net_new(_i);
	int64_t hw = _i / 4 ? 32 : 28, ch = _i / 4 ? 3 : 1;
	ir_node *x = source(&b, IR_OP_INPUT, "x", 4, (int64_t[]){2, ch, hw, hw});
	ir_node *w = source(&b, IR_OP_PARAM, "embed.conv.w", 4, (int64_t[]){8, ch, 4, 4});
	ir_node *bias = source(&b, IR_OP_PARAM, "embed.conv.b", 1, (int64_t[]){8});
	ir_node *conv = ir_node_new(b.g, IR_OP_CONV2D, (ir_node *[]){x, w}, 2);
	ir_node_set_int(b.g, conv, IR_ATTR_STRIDE, 4);
	ir_node_set_ints(b.g, conv, IR_ATTR_PAD, (int64_t[]){0, 0, 0, 0}, 4);
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(ir_node_infer(conv, &d));
	ir_diags_free(&d);
	ck_assert(conv->type.dim[2] == hw / 4 && conv->type.dim[3] == hw / 4);
	ir_node *tok = make(&b, IR_OP_TO_TOKENS, NULL, 1, make(&b, IR_OP_BIAS_ADD, NULL, 2, conv, bias, END), END);
	ck_assert(tok->type.dim[1] == hw / 4 * hw / 4 && tok->type.dim[2] == 8);
	output(&b, tok, "tokens");
	check(&b, 97, "patch embedding", _i);
}
END_TEST

/* ---- one attention sub-block, differentiated -------------------------------- */

enum { SB_N = 2, SB_C = 3, SB_HW = 8, SB_P = 4, SB_T = 4, SB_D = 8, SB_H = 2, SB_DH = 4 };

/* The network of the file's opening comment; loss is an output. */
static void subblock(net *b)
{
	ir_node *x = source(b, IR_OP_INPUT, "x", 4, (int64_t[]){SB_N, SB_C, SB_HW, SB_HW});
	ir_node *labels = source(b, IR_OP_INPUT, "labels", 1, (int64_t[]){SB_N});
	labels->type.dtype = IR_I32;
	ir_node *we = source(b, IR_OP_PARAM, "embed.conv.w", 4, (int64_t[]){SB_D, SB_C, SB_P, SB_P});
	ir_node *be = source(b, IR_OP_PARAM, "embed.conv.b", 1, (int64_t[]){SB_D});
	/* (".b": the store initialises it; the test overwrites every parameter) */
	ir_node *pos = source(b, IR_OP_PARAM, "embed.pos.b", 2, (int64_t[]){SB_T, SB_D});
	ir_node *wqkv = source(b, IR_OP_PARAM, "f.qkv.w", 2, (int64_t[]){3 * SB_D, SB_D});
	ir_node *bqkv = source(b, IR_OP_PARAM, "f.qkv.b", 1, (int64_t[]){3 * SB_D});
	ir_node *wp = source(b, IR_OP_PARAM, "f.proj.w", 2, (int64_t[]){SB_D, SB_D});
	ir_node *bp = source(b, IR_OP_PARAM, "f.proj.b", 1, (int64_t[]){SB_D});
	ir_node *conv = ir_node_new(b->g, IR_OP_CONV2D, (ir_node *[]){x, we}, 2);
	ir_node_set_int(b->g, conv, IR_ATTR_STRIDE, SB_P);
	ir_node_set_ints(b->g, conv, IR_ATTR_PAD, (int64_t[]){0, 0, 0, 0}, 4);
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(ir_node_infer(conv, &d));
	ir_diags_free(&d);
	ir_node *img = make(b, IR_OP_BIAS_ADD, NULL, 2, conv, be, END);
	ir_node *z = make(b, IR_OP_BROADCAST_ADD, NULL, 2, make(b, IR_OP_TO_TOKENS, NULL, 1, img, END), pos, END);
	/* x1 = x2 = z; y1 = x1 + F(x2) */
	ir_node *qkv = make(b, IR_OP_MATMUL, NULL, 2, z, wqkv, TB, (int64_t)1, END);
	qkv = make(b, IR_OP_BROADCAST_ADD, NULL, 2, qkv, bqkv, END);
	ir_node *p[3];
	for (int k = 0; k < 3; k++)
		p[k] = make(b, IR_OP_HEADS_SPLIT, NULL, 1, qkv, IR_ATTR_HEADS, (int64_t)SB_H, IR_ATTR_PART, (int64_t)k,
			IR_ATTR_PARTS, (int64_t)3, END);
	ir_node *s = make(b, IR_OP_BMATMUL, NULL, 2, p[0], p[1], TB, (int64_t)1, END);
	s = scaled(b, s, 1 / sqrt(SB_DH));
	ir_node *o = make(b, IR_OP_HEADS_MERGE, NULL, 1, make(b, IR_OP_BMATMUL, NULL, 2, s, p[2], END), END);
	ir_node *f = make(b, IR_OP_MATMUL, NULL, 2, o, wp, TB, (int64_t)1, END);
	f = make(b, IR_OP_BROADCAST_ADD, NULL, 2, f, bp, END);
	ir_node *y1 = make(b, IR_OP_ADD, NULL, 2, z, f, END);
	/* (y1 + x2) / 2 */
	ir_node *m = scaled(b, make(b, IR_OP_ADD, NULL, 2, y1, z, END), 0.5);
	ir_type it = ir_type_make(b->dt, 4, (int64_t[]){SB_N, SB_D, SB_HW / SB_P, SB_HW / SB_P});
	ir_node *logits = make(b, IR_OP_GLOBAL_AVGPOOL, NULL, 1, make(b, IR_OP_FROM_TOKENS, &it, 1, m, END), END);
	output(b, make(b, IR_OP_SOFTMAX_XENT, NULL, 2, logits, labels, END), "loss");
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ck_assert_msg(ps_autodiff(b->g, &ctx) == 0, "autodiff: %s", ctx.diags.n ? ctx.diags.items[0].msg : "");
	ps_ctx_free(&ctx);
}

/* The step's loss, with the inputs drawn from seed 5. */
static double run_loss(rt_exec *x, const ir_graph *g)
{
	rt_rng r;
	rt_rng_seed(&r, 5);
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_INPUT)
			continue;
		const ir_type *t;
		void *p = rt_exec_input(x, ir_node_str(n, IR_ATTR_NAME), &t);
		for (int64_t k = 0; k < ir_type_elems(t); k++)
			if (t->dtype == IR_I32)
				((int32_t *)p)[k] = (int32_t)rt_rng_below(&r, SB_D);
			else
				((double *)p)[k] = 2 * rt_rng_uniform(&r) - 1;
	}
	rt_err e;
	ck_assert_msg(rt_exec_run(x, &e), "%s", e.msg);
	return *(const double *)rt_exec_output(x, "loss", NULL);
}

/* Every coordinate of every parameter: autodiff's gradient against
 * (L(w+h) - L(w-h)) / 2h, the error max|g - fd| / max|fd| per tensor. */
START_TEST(test_subblock_fd)
{
	net b = {ir_graph_new("subblock"), IR_F64, 1};
	subblock(&b);
	cgt_plan(b.g, 1);
	rt_store s;
	rt_err e;
	rt_store_init(&s);
	ck_assert_msg(rt_store_init_from_graph(&s, b.g, 3, &e), "%s", e.msg);
	rt_rng r;
	rt_rng_seed(&r, 11);
	for (int i = 0; i < s.n; i++)
		for (int64_t k = 0; k < ir_type_elems(&s.t[i].type); k++)
			((double *)s.t[i].data)[k] = rt_rng_uniform(&r) - 0.5;
	rt_exec *x = rt_exec_new(b.g, &s, RT_EXEC_ARENA, &e);
	ck_assert_msg(x, "%s", e.msg);
	for (int i = 0; i < s.n; i++) {
		rt_tensor *t = &s.t[i];
		int64_t n = ir_type_elems(&t->type);
		char name[256];
		snprintf(name, sizeof name, "grad:%s", t->name);
		run_loss(x, b.g);
		const double *gp = rt_exec_output(x, name, NULL);
		ck_assert_msg(gp, "no output %s", name);
		double *g = malloc((size_t)n * sizeof *g), diff = 0, scale = 0;
		memcpy(g, gp, (size_t)n * sizeof *g);
		double *w = t->data, h = 1e-6;
		for (int64_t k = 0; k < n; k++) {
			double w0 = w[k];
			w[k] = w0 + h;
			double lp = run_loss(x, b.g);
			w[k] = w0 - h;
			double lm = run_loss(x, b.g);
			w[k] = w0;
			double fd = (lp - lm) / (2 * h);
			diff = fmax(diff, fabs(g[k] - fd));
			scale = fmax(scale, fabs(fd));
		}
		if (getenv("KERN_VERBOSE"))
			fprintf(stderr, "subblock %-16s max|g| %.3g  err %.3g\n", t->name, scale, diff / scale);
		ck_assert_msg(scale > 1e-3 && diff / scale <= 1e-7, "%s: error %g (max |fd| %g)", t->name, diff / scale,
			scale);
		free(g);
	}
	rt_exec_free(x);
	rt_store_free(&s);
	ir_graph_free(b.g);
}
END_TEST

/* The same step compiled: loss and every gradient against the interpreter. */
START_TEST(test_subblock_jit)
{
	net b = net_new(_i);
	subblock(&b);
	check(&b, 99, "attention sub-block step", _i);
}
END_TEST

Suite *cg_attn_suite(void)
{
	Suite *s = suite_create("codegen attention");
	TCase *tc = tcase_create("attention");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_bmatmul, 0, 4 * (int)(sizeof bmm_cases / sizeof bmm_cases[0]));
	tcase_add_loop_test(tc, test_dense_tokens, 0, 4);
	tcase_add_loop_test(tc, test_broadcast_fused, 0, 4);
	tcase_add_loop_test(tc, test_heads, 0, 4 * (int)(sizeof heads_cases / sizeof heads_cases[0]));
	tcase_add_loop_test(tc, test_patch_embedding, 0, 8);
	tcase_add_test(tc, test_subblock_fd);
	tcase_add_loop_test(tc, test_subblock_jit, 0, 4);
	suite_add_tcase(s, tc);
	return s;
}
