/* autodiff.c: reverse-mode automatic differentiation.
 *
 * requires: shape.
 * guarantees: for the output named "loss" (a softmax_xent), every param
 *   gets its gradient as an output named "grad:<param name>", computed by
 *   role-bwd nodes appended after the forward pass.  Gradients are of the
 *   loss alone (weight decay belongs to the optimiser).
 *
 * Forward nodes are visited in reverse list order; each one that received a
 * gradient passes contributions to its operands by its op's rule.  When a
 * value gets a second contribution the two are added; the addition takes the
 * unit marking (and scope) of the node whose rule contributed last, so each
 * unit's F and G backward, including the accumulation into their input's
 * gradient, stays in part F or G of the unit (the schedule pass relies on
 * that).  Every gradient node is marked as the node whose rule made it.
 *
 * The heads_split parts of one tensor (q, k and v of qkv) pass their
 * gradients on together: held until the sweep reaches the split tensor,
 * then one heads_merge of them (a zero const for a part without one).
 *
 * Batch norm in training mode is bn_norm(x, bn_stats(x), gamma, beta); its
 * rule gives the full gradient through the batch statistics, so bn_stats
 * itself passes nothing on.  Running-statistic updates are effects, not
 * part of the loss.  Layer norm, ln_norm(x, ln_stats(x), gamma, beta), is
 * differentiated the same way. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct {
	ir_graph *g;
	ps_ctx *ctx;
	ir_node **grad;       /* by node id: the gradient of that node's value */
	const ir_node *from;  /* the node whose rule is running: gradients take
	                         its unit marking and scope */
	ir_pos pos;
	bool failed;
	/* heads_split's gradients, by the id of the split tensor: its parts'
	 * (split_part[3*id + part]) and one of its splits; merged into one
	 * gradient when the sweep reaches the tensor, after all its splits. */
	ir_node **split_part;
	ir_node **split_like;
	bool *wanted;         /* by node id: the value depends on a param, so
	                         the loss's gradient with respect to it is
	                         wanted */
} differ;

static ir_node *make_n(differ *D, ir_op op, ir_node *const *in, int nin)
{
	ir_node *n = ir_node_new(D->g, op, in, nin);
	n->role = IR_ROLE_BWD;
	n->scope = D->from->scope;
	ir_node_set_unit(n, D->from->unit, D->from->part);
	n->pos = D->pos;
	n->pos_printed = D->pos.file != NULL;
	return n;
}

static ir_node *make(differ *D, ir_op op, ir_node *a, ir_node *b)
{
	ir_node *in[2] = {a, b};
	return make_n(D, op, in, a ? (b ? 2 : 1) : 0);
}

/* Infers n's type (declared beforehand for ops that need it). */
static ir_node *typed(differ *D, ir_node *n)
{
	if (!ir_node_infer(n, &D->ctx->diags)) {
		D->failed = true;
		n->type = ir_type_scalar(IR_F32); /* keeps later rules well-defined */
	}
	return n;
}

/* Whether v's gradient is wanted.  A rule whose contribution costs real
 * work (a convolution's data gradient of the input image) asks first, so
 * that it makes nothing no one reads: a node made and dropped would stay
 * alive through the optimiser's ordering edges. */
static bool wants(const differ *D, const ir_node *v)
{
	return D->wanted[v->id];
}

/* Adds g to the gradient of v. */
static void contribute(differ *D, ir_node *v, ir_node *g)
{
	if (!wants(D, v))
		return; /* nothing the loss is differentiated for depends on v */
	ir_node **slot = &D->grad[v->id];
	*slot = *slot ? typed(D, make(D, IR_OP_ADD, *slot, g)) : g;
}

static ir_node *with_int(differ *D, ir_node *n, ir_attr_kind k, int64_t v)
{
	ir_node_set_int(D->g, n, k, v);
	return n;
}

static void copy_attr(differ *D, ir_node *to, const ir_node *from, ir_attr_kind k)
{
	const ir_attr *a = ir_node_attr(from, k);
	if (!a)
		return;
	if (ir_attr_vtype_of(k) == IR_AV_INTS)
		ir_node_set_ints(D->g, to, k, a->u.ints.v, a->u.ints.n);
	else if (ir_attr_vtype_of(k) == IR_AV_FLOAT)
		ir_node_set_float(D->g, to, k, a->u.f);
	else
		ir_node_set_int(D->g, to, k, a->u.i);
}

/* A node like n's forward op whose result type is declared as `as`. */
static ir_node *declared(differ *D, ir_op op, ir_node *a, ir_node *b, const ir_node *fwd,
	const ir_type *as)
{
	ir_node *n = make(D, op, a, b);
	copy_attr(D, n, fwd, IR_ATTR_STRIDE);
	copy_attr(D, n, fwd, IR_ATTR_PAD);
	copy_attr(D, n, fwd, IR_ATTR_WINDOW);
	n->type = *as;
	return typed(D, n);
}

static ir_node *channel_op(differ *D, ir_op op, ir_node *x, int64_t lo, int64_t hi)
{
	ir_node *n = make(D, op, x, NULL);
	with_int(D, n, IR_ATTR_LO, lo);
	with_int(D, n, IR_ATTR_HI, hi);
	return typed(D, n);
}

/* Sum of dy over every axis but `keep`: dbeta of batch norm and bias_add
 * (keep the channels, 1) or of layer norm (keep the last axis). */
static ir_node *sum_but(differ *D, ir_node *dy, int keep)
{
	int64_t axes[IR_MAX_RANK];
	int n = 0;
	for (int i = 0; i < dy->type.rank; i++)
		if (i != keep)
			axes[n++] = i;
	ir_node *r = make(D, IR_OP_REDUCE_SUM, dy, NULL);
	ir_node_set_ints(D->g, r, IR_ATTR_AXES, axes, n);
	return typed(D, r);
}

static void fail(differ *D, const ir_node *n, const char *why)
{
	char ref[80];
	ir_diag_add(&D->ctx->diags, n->pos, "autodiff: %s (%s): %s", ir_node_ref(n, ref, sizeof ref),
		ir_op_name(n->op), why);
	D->failed = true;
}

/* matmul and bmatmul: the same rule, per batch index for bmatmul. */
static void matmul_grads(differ *D, ir_node *n, ir_node *dy)
{
	const ir_attr *a = ir_node_attr(n, IR_ATTR_TRANS_A), *b = ir_node_attr(n, IR_ATTR_TRANS_B);
	int64_t ta = a ? a->u.i : 0, tb = b ? b->u.i : 0;
	ir_node *A = n->in[0], *B = n->in[1], *da, *db;
	ir_op op = n->op;
	if (op == IR_OP_MATMUL && (B->type.rank == 3 || (A->type.rank == 3 && ta))) {
		fail(D, n, "only a dense layer's use of tokens [N,T,K] (operand 0, not transposed) is differentiable");
		return;
	}
	/* C = op(A) op(B) */
	if (!ta)
		da = with_int(D, make(D, op, dy, B), IR_ATTR_TRANS_B, !tb);
	else
		da = with_int(D, with_int(D, make(D, op, B, dy), IR_ATTR_TRANS_A, tb),
			IR_ATTR_TRANS_B, 1);
	if (!tb)
		db = with_int(D, make(D, op, A, dy), IR_ATTR_TRANS_A, !ta);
	else
		db = with_int(D, with_int(D, make(D, op, dy, A), IR_ATTR_TRANS_A, 1),
			IR_ATTR_TRANS_B, ta);
	contribute(D, A, typed(D, da));
	contribute(D, B, typed(D, db));
}

/* broadcast_add(x, b): db is dy summed over the dimensions b is repeated
 * along. */
static void broadcast_add_grads(differ *D, ir_node *n, ir_node *dy)
{
	int64_t axes[IR_MAX_RANK];
	int lead = n->type.rank - n->in[1]->type.rank;
	for (int i = 0; i < lead; i++)
		axes[i] = i;
	ir_node *db = make(D, IR_OP_REDUCE_SUM, dy, NULL);
	ir_node_set_ints(D->g, db, IR_ATTR_AXES, axes, lead);
	contribute(D, n->in[0], dy);
	contribute(D, n->in[1], typed(D, db));
}

static ir_node *heads_split_of(differ *D, ir_node *dy, int64_t heads, int64_t part, int64_t parts)
{
	ir_node *s = make(D, IR_OP_HEADS_SPLIT, dy, NULL);
	with_int(D, s, IR_ATTR_HEADS, heads);
	with_int(D, s, IR_ATTR_PART, part);
	with_int(D, s, IR_ATTR_PARTS, parts);
	return typed(D, s);
}

/* heads_split: the part's gradient waits for the other parts' (see
 * merge_split_grads). */
static void heads_split_grad(differ *D, ir_node *n, ir_node *dy)
{
	int id = n->in[0]->id;
	ir_node *like = D->split_like[id];
	if (like && (ir_node_int(like, IR_ATTR_PARTS) != ir_node_int(n, IR_ATTR_PARTS) ||
		     ir_node_int(like, IR_ATTR_HEADS) != ir_node_int(n, IR_ATTR_HEADS))) {
		fail(D, n, "splits of one tensor into different heads or parts have no gradient rule");
		return;
	}
	D->split_like[id] = n;
	ir_node **slot = &D->split_part[3 * id + ir_node_int(n, IR_ATTR_PART)];
	*slot = *slot ? typed(D, make(D, IR_OP_ADD, *slot, dy)) : dy;
}

/* x's splits are all done: one heads_merge of their gradients (zeros for a
 * part nothing depends on) is x's gradient from them, so the three parts of
 * qkv come back in one tensor without adding three. */
static void merge_split_grads(differ *D, ir_node *x)
{
	ir_node *like = D->split_like[x->id], *in[3];
	int parts = (int)ir_node_int(like, IR_ATTR_PARTS);
	D->from = like;
	D->pos = like->pos;
	for (int p = 0; p < parts; p++) {
		in[p] = D->split_part[3 * x->id + p];
		if (!in[p]) {
			in[p] = make(D, IR_OP_CONST, NULL, NULL);
			ir_node_set_float(D->g, in[p], IR_ATTR_VALUE, 0);
			in[p]->type = like->type;
			typed(D, in[p]);
		}
	}
	contribute(D, x, typed(D, make_n(D, IR_OP_HEADS_MERGE, in, parts)));
}

/* Batch norm (bn_norm) or layer norm (ln_norm) of x with its own
 * statistics: dgamma, dbeta and dx (bn_dx also takes dgamma and dbeta). */
static void norm_grads(differ *D, ir_node *n, ir_node *dy)
{
	bool ln = n->op == IR_OP_LN_NORM;
	ir_node *x = n->in[0], *stats = n->in[1], *gamma = n->in[2], *beta = n->in[3];
	if (stats->op != (ln ? IR_OP_LN_STATS : IR_OP_BN_STATS) || stats->in[0] != x) {
		fail(D, n, ln ? "layer-norm statistics must be ln_stats of the same input"
			      : "batch statistics must be bn_stats of the same input");
		return;
	}
	double eps = ir_node_float(n, IR_ATTR_EPS);
	ir_node *dbeta = sum_but(D, dy, ln ? dy->type.rank - 1 : 1);
	ir_node *in3[3] = {dy, x, stats};
	ir_node *dgamma = make_n(D, ln ? IR_OP_LN_DGAMMA : IR_OP_BN_DGAMMA, in3, 3);
	ir_node_set_float(D->g, dgamma, IR_ATTR_EPS, eps);
	typed(D, dgamma);
	ir_node *in6[6] = {dy, x, stats, gamma, dgamma, dbeta};
	ir_node *dx = make_n(D, ln ? IR_OP_LN_DX : IR_OP_BN_DX, in6, ln ? 4 : 6);
	ir_node_set_float(D->g, dx, IR_ATTR_EPS, eps);
	contribute(D, gamma, dgamma);
	contribute(D, beta, dbeta);
	contribute(D, x, typed(D, dx));
}

/* The transformer's ops (layer norm, GELU, softmax, mean over tokens):
 * false when n is none of them. */
static bool transformer_rule(differ *D, ir_node *n, ir_node *dy)
{
	ir_node *x = n->in[0];
	switch (n->op) {
	case IR_OP_LN_NORM:
		norm_grads(D, n, dy);
		return true;
	case IR_OP_GELU:
		contribute(D, x, typed(D, make(D, IR_OP_GELU_GRAD, dy, x)));
		return true;
	case IR_OP_SOFTMAX: {
		ir_node *g = make(D, IR_OP_SOFTMAX_GRAD, dy, n);
		copy_attr(D, g, n, IR_ATTR_FACTOR);
		contribute(D, x, typed(D, g));
		return true;
	}
	case IR_OP_TOKEN_MEAN:
		contribute(D, x, declared(D, IR_OP_TOKEN_MEAN_GRAD, dy, NULL, n, &x->type));
		return true;
	default:
		return false;
	}
}

static void rule(differ *D, ir_node *n, ir_node *dy)
{
	ir_node *x = n->nin ? n->in[0] : NULL;
	switch (n->op) {
	case IR_OP_ADD:
		contribute(D, n->in[0], dy);
		contribute(D, n->in[1], dy);
		break;
	case IR_OP_SUB: {
		contribute(D, n->in[0], dy);
		ir_node *neg = make(D, IR_OP_SCALE, dy, NULL);
		ir_node_set_float(D->g, neg, IR_ATTR_FACTOR, -1);
		contribute(D, n->in[1], typed(D, neg));
		break;
	}
	case IR_OP_SCALE: {
		ir_node *s = make(D, IR_OP_SCALE, dy, NULL);
		ir_node_set_float(D->g, s, IR_ATTR_FACTOR, ir_node_float(n, IR_ATTR_FACTOR));
		contribute(D, x, typed(D, s));
		break;
	}
	case IR_OP_RELU:
		contribute(D, x, typed(D, make(D, IR_OP_RELU_GRAD, dy, n)));
		break;
	case IR_OP_SPLIT: {
		if (ir_node_int(n, IR_ATTR_AXIS) != 1 || x->type.rank != 4) {
			fail(D, n, "only splits along the channels of [N,C,H,W] are differentiable");
			break;
		}
		int64_t part = ir_node_int(n, IR_ATTR_PART), parts = ir_node_int(n, IR_ATTR_PARTS);
		int64_t c = n->type.dim[1];
		contribute(D, x, channel_op(D, IR_OP_CHANNEL_PAD, dy, part * c, (parts - 1 - part) * c));
		break;
	}
	case IR_OP_CONCAT: {
		if (ir_node_int(n, IR_ATTR_AXIS) != 1 || n->type.rank != 4) {
			fail(D, n, "only concatenations along the channels of [N,C,H,W] are differentiable");
			break;
		}
		int64_t ca = n->in[0]->type.dim[1], cb = n->in[1]->type.dim[1];
		contribute(D, n->in[0], channel_op(D, IR_OP_CHANNEL_SLICE, dy, 0, cb));
		contribute(D, n->in[1], channel_op(D, IR_OP_CHANNEL_SLICE, dy, ca, 0));
		break;
	}
	case IR_OP_CHANNEL_PAD:
		contribute(D, x, channel_op(D, IR_OP_CHANNEL_SLICE, dy, ir_node_int(n, IR_ATTR_LO),
			ir_node_int(n, IR_ATTR_HI)));
		break;
	case IR_OP_CHANNEL_SLICE:
		contribute(D, x, channel_op(D, IR_OP_CHANNEL_PAD, dy, ir_node_int(n, IR_ATTR_LO),
			ir_node_int(n, IR_ATTR_HI)));
		break;
	case IR_OP_CONV2D:
		if (wants(D, x))
			contribute(D, x, declared(D, IR_OP_CONV2D_DX, dy, n->in[1], n, &x->type));
		contribute(D, n->in[1], declared(D, IR_OP_CONV2D_DW, dy, x, n, &n->in[1]->type));
		break;
	case IR_OP_BN_NORM:
		norm_grads(D, n, dy);
		break;
	case IR_OP_AVGPOOL:
		contribute(D, x, declared(D, IR_OP_AVGPOOL_GRAD, dy, NULL, n, &x->type));
		break;
	case IR_OP_MAXPOOL:
		contribute(D, x, declared(D, IR_OP_MAXPOOL_GRAD, dy, x, n, &x->type));
		break;
	case IR_OP_GLOBAL_AVGPOOL:
		contribute(D, x, declared(D, IR_OP_GLOBAL_AVGPOOL_GRAD, dy, NULL, n, &x->type));
		break;
	case IR_OP_MATMUL:
		matmul_grads(D, n, dy);
		break;
	case IR_OP_BIAS_ADD:
		contribute(D, x, dy);
		contribute(D, n->in[1], sum_but(D, dy, 1));
		break;
	/* ---- attention and token layout */
	case IR_OP_BMATMUL:
		matmul_grads(D, n, dy);
		break;
	case IR_OP_BROADCAST_ADD:
		broadcast_add_grads(D, n, dy);
		break;
	case IR_OP_HEADS_SPLIT:
		heads_split_grad(D, n, dy);
		break;
	case IR_OP_HEADS_MERGE:
		for (int p = 0; p < n->nin; p++)
			contribute(D, n->in[p], heads_split_of(D, dy, n->in[0]->type.dim[1], p, n->nin));
		break;
	case IR_OP_TO_TOKENS:
		contribute(D, x, declared(D, IR_OP_FROM_TOKENS, dy, NULL, n, &x->type));
		break;
	case IR_OP_FROM_TOKENS:
		contribute(D, x, typed(D, make(D, IR_OP_TO_TOKENS, dy, NULL)));
		break;
	default:
		if (!transformer_rule(D, n, dy))
			fail(D, n, "has no gradient rule");
	}
}

/* The output named "loss", which must be a softmax_xent. */
static ir_node *find_loss(ir_graph *g, ps_ctx *ctx)
{
	for (int i = 0; i < g->n; i++) {
		ir_node *n = g->nodes[i];
		if (n->op != IR_OP_OUTPUT || strcmp(ir_node_str(n, IR_ATTR_NAME), "loss") != 0)
			continue;
		if (n->in[0]->op != IR_OP_SOFTMAX_XENT) {
			ir_diag_add(&ctx->diags, n->pos, "autodiff: the loss must be a softmax_xent, not %s",
				ir_op_name(n->in[0]->op));
			return NULL;
		}
		return n->in[0];
	}
	ir_diag_add(&ctx->diags, (ir_pos){0}, "autodiff: graph @%s has no output named \"loss\"", g->name);
	return NULL;
}

const char *ps_grad_param_name(const ir_node *n)
{
	if (n->op != IR_OP_OUTPUT)
		return NULL;
	const char *name = ir_node_str(n, IR_ATTR_NAME);
	size_t plen = strlen(PS_GRAD_PREFIX);
	return strncmp(name, PS_GRAD_PREFIX, plen) == 0 ? name + plen : NULL;
}

const char *ps_grad_output_name(char *buf, size_t len, const char *param)
{
	snprintf(buf, len, "%s%s", PS_GRAD_PREFIX, param);
	return buf;
}

/* A gradient output already there (a graph that has been through autodiff
 * but does not list it) would be made twice under one name. */
static bool no_gradients_yet(ir_graph *g, ps_ctx *ctx)
{
	for (int i = 0; i < g->n; i++) {
		ir_node *n = g->nodes[i];
		if (ps_grad_param_name(n)) {
			ir_diag_add(&ctx->diags, n->pos,
				"autodiff: graph @%s already has the gradient output \"%s\" (it has been differentiated)",
				g->name, ir_node_str(n, IR_ATTR_NAME));
			return false;
		}
	}
	return true;
}

int ps_autodiff(ir_graph *g, ps_ctx *ctx)
{
	if (!no_gradients_yet(g, ctx))
		return 1;
	ir_node *loss = find_loss(g, ctx);
	if (!loss)
		return 1;
	ir_graph_renumber(g);
	int nfwd = g->n;
	differ D = {g, ctx, calloc((size_t)nfwd, sizeof(ir_node *)), loss, loss->pos, false,
		calloc(3 * (size_t)nfwd, sizeof(ir_node *)), calloc((size_t)nfwd, sizeof(ir_node *)),
		calloc((size_t)nfwd, sizeof(bool))};
	if (!D.grad || !D.split_part || !D.split_like || !D.wanted)
		IR_DIE("out of memory");
	for (int i = 0; i < nfwd; i++) {
		ir_node *n = g->nodes[i];
		D.wanted[i] = n->op == IR_OP_PARAM;
		for (int k = 0; k < n->nin && !D.wanted[i]; k++)
			D.wanted[i] = D.wanted[n->in[k]->id];
	}

	/* d(mean cross-entropy)/d(logits) seeds the sweep. */
	contribute(&D, loss->in[0], typed(&D, make(&D, IR_OP_SOFTMAX_XENT_GRAD, loss->in[0], loss->in[1])));
	for (int i = loss->id - 1; i >= 0 && !D.failed; i--) {
		ir_node *n = g->nodes[i];
		if (D.split_like[i])
			merge_split_grads(&D, n);
		if (!D.grad[i] || n->role != IR_ROLE_FWD || ir_op_has(n->op, IR_OPF_SRC))
			continue;
		D.from = n;
		D.pos = n->pos;
		rule(&D, n, D.grad[i]);
	}

	/* Every parameter's gradient becomes an output. */
	for (int i = 0; i < nfwd && !D.failed; i++) {
		ir_node *p = g->nodes[i];
		if (p->op != IR_OP_PARAM)
			continue;
		D.from = p;
		D.pos = p->pos;
		ir_node *dp = D.grad[i];
		if (!dp) { /* the loss does not depend on it */
			dp = make(&D, IR_OP_CONST, NULL, NULL);
			ir_node_set_float(g, dp, IR_ATTR_VALUE, 0);
			dp->type = p->type;
		}
		char name[512];
		ir_node *out = make(&D, IR_OP_OUTPUT, dp, NULL);
		ir_node_set_str(g, out, IR_ATTR_NAME, ps_grad_output_name(name, sizeof name, p->name));
		typed(&D, out);
	}
	free(D.grad);
	free(D.split_part);
	free(D.split_like);
	free(D.wanted);
	return D.failed;
}
