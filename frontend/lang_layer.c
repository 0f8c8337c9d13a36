/* lang_layer.c: the model language's layers: the table of kinds (name,
 * arguments, streams, lowering, naming of parameters), the binding of a
 * layer statement's arguments to its kind's parameters, and each kind's
 * lowering to IR nodes on the current stream(s).  Shapes are tracked as
 * [N,C,H,W], tokens [N,T,D] or [N,F] (lang_lower.h's tensor). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang_lower.h"

#define BN_EPS 1e-3
#define BN_MOMENTUM 0.99
#define LN_EPS 1e-5 /* PyTorch's nn.LayerNorm */

typedef enum {
	NAME_NONE,     /* no parameters */
	NAME_COUNTED,  /* in F and G kindK, counted; elsewhere the kind */
	NAME_AFTER,    /* in F and G, kind and the count of `after` layers so far (bnK after convK-1) */
	NAME_ONCE,     /* the kind, everywhere (ln, pos): a second in one part needs `as NAME` */
} naming;

typedef struct {
	const char *name;
	const char *params; /* "k c stride=1 bias?": positional, =default, ?flag */
	int streams;        /* streams it takes: 1, or 2 (merge) */
	layer_fn lower;
	naming naming;
	const char *after;  /* NAME_AFTER: the kind counted */
} layer_kind;

static void same_pad(int64_t size, int64_t k, int64_t s, int64_t *before, int64_t *after)
{
	int64_t out = (size + s - 1) / s;
	int64_t total = (out - 1) * s + k - size;
	if (total < 0)
		total = 0;
	*before = total / 2;
	*after = total - *before;
}

static bool need_rank(lw *L, const fe_stmt *st, int rank)
{
	const tensor *x = &L->x[0];
	if (x->rank == rank)
		return true;
	return fe_lw_fail(L, st->pos, "%.*s takes %s, but its input has rank %d", (int)st->n, st->word,
		rank == 4 ? "an image tensor [N,C,H,W]" : rank == 3 ? "tokens [N,T,D]" : "a matrix [N,F]", x->rank);
}

static bool positive(lw *L, const bound *b, int i, const char *what, int64_t max)
{
	if (b->a[i].v < 1)
		return fe_lw_fail(L, b->pos[i], "%s must be positive, found %lld", what, (long long)b->a[i].v);
	if (b->a[i].v > max)
		return fe_lw_fail(L, b->pos[i], "%s is at most %lld, found %lld", what, (long long)max, (long long)b->a[i].v);
	return true;
}

static bool lower_conv(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	if (!need_rank(L, st, 4) || !positive(L, b, 0, "the kernel size", FE_MAX_WINDOW) ||
		!positive(L, b, 1, "the channel count", FE_INT_MAX) ||
		!positive(L, b, 2, "the stride", FE_MAX_WINDOW))
		return false;
	tensor *x = &L->x[0];
	int64_t k = b->a[0].v, c = b->a[1].v, stride = b->a[2].v;
	int64_t wd[4] = {c, x->dim[1], k, k}, pad[4];
	ir_node *w = fe_lw_tensor_node(L, IR_OP_PARAM, name, "w", 4, wd,
		b->a[0].keys | b->a[1].keys | x->keys[1]);
	ir_node *bias = w && b->a[4].v ? fe_lw_tensor_node(L, IR_OP_PARAM, name, "b", 1, &c, b->a[1].keys) : NULL;
	if (!w || (b->a[4].v && !bias))
		return false;
	bool valid = b->a[3].v;
	if (valid) {
		memset(pad, 0, sizeof pad);
		if (x->dim[2] < k || x->dim[3] < k)
			return fe_lw_fail(L, b->pos[0], "a VALID %lldx%lld conv does not fit in %lldx%lld", (long long)k,
				(long long)k, (long long)x->dim[2], (long long)x->dim[3]);
	} else {
		same_pad(x->dim[2], k, stride, &pad[0], &pad[1]);
		same_pad(x->dim[3], k, stride, &pad[2], &pad[3]);
	}
	ir_node *y = fe_lw_node(L, IR_OP_CONV2D, x->n, w);
	ir_node_set_int(L->g, y, IR_ATTR_STRIDE, stride);
	ir_node_set_ints(L->g, y, IR_ATTR_PAD, pad, 4);
	if (bias)
		y = fe_lw_node(L, IR_OP_BIAS_ADD, y, bias);
	x->dim[1] = c;
	x->keys[1] = b->a[1].keys;
	for (int i = 2; i < 4; i++) {
		x->dim[i] = valid ? (x->dim[i] - k) / stride + 1 : (x->dim[i] + stride - 1) / stride;
		x->keys[i] |= b->a[2].keys | (valid ? b->a[0].keys : 0);
	}
	char what[160];
	snprintf(what, sizeof what, "%s.%s", L->prefix, name);
	return fe_lw_output(L, x, y, what);
}

static bool lower_bn(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	tensor *x = &L->x[0];
	if (x->rank == 3)
		return fe_lw_fail(L, st->pos, "bn normalises channels of an image or matrix; tokens [N,T,D] take ln");
	int64_t c = x->dim[1], count = x->dim[0];
	for (int i = 2; i < x->rank; i++)
		if (__builtin_mul_overflow(count, x->dim[i], &count))
			count = INT64_MAX; /* only unchecked sizes (fe_spec_check) get here */
	unsigned keys = x->keys[1];
	ir_node *gamma = fe_lw_tensor_node(L, IR_OP_PARAM, name, "gamma", 1, &c, keys);
	ir_node *beta = gamma ? fe_lw_tensor_node(L, IR_OP_PARAM, name, "beta", 1, &c, keys) : NULL;
	ir_node *mean = beta ? fe_lw_tensor_node(L, IR_OP_STATE, name, "mean", 1, &c, keys) : NULL;
	ir_node *var = mean ? fe_lw_tensor_node(L, IR_OP_STATE, name, "var", 1, &c, keys) : NULL;
	if (!var)
		return false;
	ir_node *y;
	if (L->mode == FE_LOWER_EVAL) {
		ir_node *in[5] = {x->n, mean, var, gamma, beta};
		y = fe_lw_node_n(L, IR_OP_BN_INFER, in, 5);
		ir_node_set_float(L->g, y, IR_ATTR_EPS, BN_EPS);
	} else {
		ir_node *stats = fe_lw_node(L, IR_OP_BN_STATS, x->n, NULL);
		ir_node *in[4] = {x->n, stats, gamma, beta};
		y = fe_lw_node_n(L, IR_OP_BN_NORM, in, 4);
		ir_node_set_float(L->g, y, IR_ATTR_EPS, BN_EPS);
		ir_node *rm = fe_lw_node(L, IR_OP_BN_RUNNING_MEAN, mean, stats);
		ir_node_set_float(L->g, rm, IR_ATTR_MOMENTUM, BN_MOMENTUM);
		ir_node *rv = fe_lw_node(L, IR_OP_BN_RUNNING_VAR, var, stats);
		ir_node_set_float(L->g, rv, IR_ATTR_MOMENTUM, BN_MOMENTUM);
		ir_node_set_int(L->g, rv, IR_ATTR_NCOUNT, count);
	}
	x->n = y;
	return true;
}

static bool lower_relu(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	L->x[0].n = fe_lw_node(L, IR_OP_RELU, L->x[0].n, NULL);
	return true;
}

static bool lower_maxpool(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	if (!need_rank(L, st, 4) || !positive(L, b, 0, "the window", FE_MAX_WINDOW) ||
		!positive(L, b, 1, "the stride", FE_MAX_WINDOW))
		return false;
	tensor *x = &L->x[0];
	int64_t k = b->a[0].v, stride = b->a[1].v, pad[4];
	same_pad(x->dim[2], k, stride, &pad[0], &pad[1]);
	same_pad(x->dim[3], k, stride, &pad[2], &pad[3]);
	ir_node *y = fe_lw_node(L, IR_OP_MAXPOOL, x->n, NULL);
	ir_node_set_int(L->g, y, IR_ATTR_WINDOW, k);
	ir_node_set_int(L->g, y, IR_ATTR_STRIDE, stride);
	ir_node_set_ints(L->g, y, IR_ATTR_PAD, pad, 4);
	for (int i = 2; i < 4; i++) {
		int64_t span = x->dim[i] + pad[2 * (i - 2)] + pad[2 * (i - 2) + 1];
		if (span < k)
			return fe_lw_fail(L, b->pos[0], "a %lld window does not fit in size %lld", (long long)k,
				(long long)x->dim[i]);
		x->dim[i] = (span - k) / stride + 1;
		x->keys[i] |= b->a[0].keys | b->a[1].keys;
	}
	x->n = y;
	return true;
}

/* Average pool, window = stride, VALID: the window must divide H and W. */
ir_node *fe_lw_avgpool(lw *L, tensor *x, int64_t k, unsigned keys, ir_pos at)
{
	if (x->dim[2] % k || x->dim[3] % k) {
		fe_lw_fail(L, at, "an average pool of window %lld does not divide %lldx%lld", (long long)k,
			(long long)x->dim[2], (long long)x->dim[3]);
		return NULL;
	}
	ir_node *y = fe_lw_node(L, IR_OP_AVGPOOL, x->n, NULL);
	ir_node_set_int(L->g, y, IR_ATTR_WINDOW, k);
	for (int i = 2; i < 4; i++) {
		x->dim[i] /= k;
		x->keys[i] |= keys;
	}
	return x->n = y;
}

static bool lower_avgpool(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	return need_rank(L, st, 4) && positive(L, b, 0, "the window", FE_MAX_WINDOW) &&
		fe_lw_avgpool(L, &L->x[0], b->a[0].v, b->a[0].keys, b->pos[0]) != NULL;
}

static bool lower_global_avgpool(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	if (!need_rank(L, st, 4))
		return false;
	tensor *x = &L->x[0];
	x->n = fe_lw_node(L, IR_OP_GLOBAL_AVGPOOL, x->n, NULL);
	x->rank = 2;
	return true;
}

static bool lower_dense(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	tensor *x = &L->x[0];
	if (x->rank != 3 && !need_rank(L, st, 2))
		return false;
	if (!positive(L, b, 0, "the output width", FE_INT_MAX))
		return false;
	int f = x->rank - 1; /* the feature axis: [N,F], or tokens [N,T,D] (one GEMM over N*T rows) */
	int64_t dw[2] = {b->a[0].v, x->dim[f]};
	ir_node *w = fe_lw_tensor_node(L, IR_OP_PARAM, name, "w", 2, dw, b->a[0].keys | x->keys[f]);
	ir_node *bias = NULL;
	if (w && b->a[1].v)
		bias = fe_lw_tensor_node(L, IR_OP_PARAM, name, "b", 1, &dw[0], b->a[0].keys);
	if (!w || (b->a[1].v && !bias))
		return false;
	ir_node *y = fe_lw_node(L, IR_OP_MATMUL, x->n, w);
	ir_node_set_int(L->g, y, IR_ATTR_TRANS_B, 1);
	if (bias)
		y = fe_lw_node(L, x->rank == 3 ? IR_OP_BROADCAST_ADD : IR_OP_BIAS_ADD, y, bias);
	x->dim[f] = dw[0];
	x->keys[f] = b->a[0].keys;
	char what[160];
	snprintf(what, sizeof what, "%s.%s", L->prefix, name);
	return fe_lw_output(L, x, y, what);
}

static bool lower_split(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	tensor x = L->x[0];
	if (x.rank == 3)
		return fe_lw_fail(L, st->pos, "split halves the channels of an image or matrix; tokens [N,T,D] take "
			"duplicate");
	if (x.dim[1] % 2)
		return fe_lw_fail(L, st->pos, "split needs an even channel count, found %lld", (long long)x.dim[1]);
	for (int part = 0; part < 2; part++) {
		ir_node *y = fe_lw_node(L, IR_OP_SPLIT, x.n, NULL);
		ir_node_set_int(L->g, y, IR_ATTR_AXIS, 1);
		ir_node_set_int(L->g, y, IR_ATTR_PART, part);
		ir_node_set_int(L->g, y, IR_ATTR_PARTS, 2);
		L->x[part] = x;
		L->x[part].n = y;
		L->x[part].dim[1] = x.dim[1] / 2;
	}
	L->nstreams = 2;
	return true;
}

static bool lower_merge(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	tensor *a = &L->x[0], *c = &L->x[1];
	if (a->rank == 3)
		return fe_lw_fail(L, st->pos, "merge concatenates the channels of images or matrices; tokens [N,T,D] take "
			"merge_mean");
	for (int i = 0; i < a->rank; i++)
		if (i != 1 && a->dim[i] != c->dim[i])
			return fe_lw_fail(L, st->pos, "merge needs streams of one size; dimension %d is %lld and %lld", i,
				(long long)a->dim[i], (long long)c->dim[i]);
	ir_node *y = fe_lw_node(L, IR_OP_CONCAT, a->n, c->n);
	ir_node_set_int(L->g, y, IR_ATTR_AXIS, 1);
	a->n = y;
	a->dim[1] += c->dim[1];
	a->keys[1] |= c->keys[1];
	L->nstreams = 1;
	return true;
}

/* ---- the transformer's layers -------------------------------------------- */

/* [N,C,H,W] -> tokens [N,H*W,C]: pixel (i,j) is token i*W+j. */
static bool lower_tokens(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	if (!need_rank(L, st, 4))
		return false;
	tensor *x = &L->x[0];
	*x = (tensor){fe_lw_node(L, IR_OP_TO_TOKENS, x->n, NULL), 3, {x->dim[0], x->dim[2] * x->dim[3], x->dim[1]},
		{x->keys[0], x->keys[2] | x->keys[3], x->keys[1]}};
	return true;
}

/* The learned positional embedding NAME [T,D], added to every example. */
static bool lower_pos(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	if (!need_rank(L, st, 3))
		return false;
	tensor *x = &L->x[0];
	ir_node *pos = fe_lw_tensor_node(L, IR_OP_PARAM, name, NULL, 2, &x->dim[1], x->keys[1] | x->keys[2]);
	if (!pos)
		return false;
	x->n = fe_lw_node(L, IR_OP_BROADCAST_ADD, x->n, pos);
	return true;
}

/* Layer norm over the last axis D, with NAME.gamma and NAME.beta [D]. */
static bool lower_ln(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	tensor *x = &L->x[0];
	if (x->rank == 4)
		return fe_lw_fail(L, st->pos, "ln normalises the last axis of tokens [N,T,D] or a matrix [N,F], but its "
			"input is an image tensor [N,C,H,W] (make tokens first)");
	int f = x->rank - 1;
	ir_node *gamma = fe_lw_tensor_node(L, IR_OP_PARAM, name, "gamma", 1, &x->dim[f], x->keys[f]);
	ir_node *beta = gamma ? fe_lw_tensor_node(L, IR_OP_PARAM, name, "beta", 1, &x->dim[f], x->keys[f]) : NULL;
	if (!beta)
		return false;
	ir_node *stats = fe_lw_node(L, IR_OP_LN_STATS, x->n, NULL);
	ir_node *in[4] = {x->n, stats, gamma, beta};
	x->n = fe_lw_node_n(L, IR_OP_LN_NORM, in, 4);
	ir_node_set_float(L->g, x->n, IR_ATTR_EPS, LN_EPS);
	return true;
}

static bool lower_gelu(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	L->x[0].n = fe_lw_node(L, IR_OP_GELU, L->x[0].n, NULL);
	return true;
}

/* Multi-head attention on qkv [N,T,3D] (q, k, v its column thirds, head j
 * columns j*d..j*d+d-1 of each): softmax(q_j k_j^T / sqrt(d)) v_j, the heads
 * merged back to [N,T,D].  The scores [N,h,T,T] are checked for size. */
static bool lower_attend(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	if (!need_rank(L, st, 3) || !positive(L, b, 0, "the head count", FE_INT_MAX))
		return false;
	tensor *x = &L->x[0];
	int64_t h = b->a[0].v, width = x->dim[2];
	if (width % (3 * h))
		return fe_lw_fail(L, b->pos[0], "attend takes qkv [N,T,3*D] with D a multiple of the %lld heads, but its "
			"input has width %lld", (long long)h, (long long)width);
	ir_node *part[3];
	for (int p = 0; p < 3; p++) {
		part[p] = fe_lw_node(L, IR_OP_HEADS_SPLIT, x->n, NULL);
		ir_node_set_int(L->g, part[p], IR_ATTR_HEADS, h);
		ir_node_set_int(L->g, part[p], IR_ATTR_PART, p);
		ir_node_set_int(L->g, part[p], IR_ATTR_PARTS, 3);
	}
	int64_t scores[4] = {x->dim[0], h, x->dim[1], x->dim[1]};
	if (!fe_lw_fits(L, L->pos, x->keys[0] | x->keys[1] | b->a[0].keys, "the attention scores", L->dt, 4, scores))
		return false;
	ir_node *s = fe_lw_node(L, IR_OP_BMATMUL, part[0], part[1]);
	ir_node_set_int(L->g, s, IR_ATTR_TRANS_B, 1);
	ir_node *p = fe_lw_node(L, IR_OP_SOFTMAX, s, NULL);
	ir_node_set_float(L->g, p, IR_ATTR_FACTOR, 1 / sqrt((double)(width / 3 / h)));
	ir_node *o = fe_lw_node(L, IR_OP_BMATMUL, p, part[2]);
	x->n = fe_lw_node(L, IR_OP_HEADS_MERGE, o, NULL);
	x->dim[2] = width / 3;
	return true;
}

/* tokens [N,T,D] -> [N,D], the mean over the tokens. */
static bool lower_token_mean(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	if (!need_rank(L, st, 3))
		return false;
	tensor *x = &L->x[0];
	*x = (tensor){fe_lw_node(L, IR_OP_TOKEN_MEAN, x->n, NULL), 2, {x->dim[0], x->dim[2]}, {x->keys[0], x->keys[2]}};
	return true;
}

/* Two streams x1 = x2 = x of full width: one value read by both (its
 * gradient is the sum of theirs). */
static bool lower_duplicate(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	L->x[1] = L->x[0];
	L->nstreams = 2;
	return true;
}

/* One stream (x1 + x2) / 2 from two of one shape. */
static bool lower_merge_mean(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	tensor *a = &L->x[0], *c = &L->x[1];
	if (a->rank != c->rank || memcmp(a->dim, c->dim, (size_t)a->rank * sizeof a->dim[0]) != 0)
		return fe_lw_fail(L, st->pos, "merge_mean needs two streams of one shape");
	ir_node *y = fe_lw_node(L, IR_OP_SCALE, fe_lw_node(L, IR_OP_ADD, a->n, c->n), NULL);
	ir_node_set_float(L->g, y, IR_ATTR_FACTOR, 0.5);
	a->n = y;
	for (int i = 0; i < a->rank; i++)
		a->keys[i] |= c->keys[i];
	L->nstreams = 1;
	return true;
}

/* The layer kinds: name, arguments, streams, how to lower, how its
 * parameters are named. */
static const layer_kind kinds[] = {
	{"conv", "k c stride=1 valid? bias?", 1, lower_conv, NAME_COUNTED, NULL},
	{"bn", "", 1, lower_bn, NAME_AFTER, "conv"},
	{"relu", "", 1, lower_relu, NAME_NONE, NULL},
	{"maxpool", "k stride=1", 1, lower_maxpool, NAME_NONE, NULL},
	{"avgpool", "k", 1, lower_avgpool, NAME_NONE, NULL},
	{"global_avgpool", "", 1, lower_global_avgpool, NAME_NONE, NULL},
	{"dense", "n bias?", 1, lower_dense, NAME_COUNTED, NULL},
	{"split", "", 1, lower_split, NAME_NONE, NULL},
	{"merge", "", 2, lower_merge, NAME_NONE, NULL},
	/* ---- the transformer (RevViT, docs/model.md) */
	{"tokens", "", 1, lower_tokens, NAME_NONE, NULL},
	{"pos", "", 1, lower_pos, NAME_ONCE, NULL},
	{"ln", "", 1, lower_ln, NAME_ONCE, NULL},
	{"gelu", "", 1, lower_gelu, NAME_NONE, NULL},
	{"attend", "heads", 1, lower_attend, NAME_NONE, NULL},
	{"token_mean", "", 1, lower_token_mean, NAME_NONE, NULL},
	{"duplicate", "", 1, lower_duplicate, NAME_NONE, NULL},
	{"merge_mean", "", 2, lower_merge_mean, NAME_NONE, NULL},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))
_Static_assert(NKINDS <= 32, "lw.count holds a counter per kind");

static int kind_index(const char *s, size_t n)
{
	for (int i = 0; i < NKINDS; i++)
		if (strlen(kinds[i].name) == n && memcmp(kinds[i].name, s, n) == 0)
			return i;
	return -1;
}

/* One parameter of a kind's params string: name, default, flag. */
typedef struct {
	char name[16];
	bool has_def, flag;
	int64_t def;
} param;

static int kind_params(const layer_kind *lk, param *p)
{
	int n = 0;
	for (const char *q = lk->params; *q;) {
		while (*q == ' ')
			q++;
		if (!*q)
			break;
		size_t len = strcspn(q, " =?");
		IR_ASSERT(n < 8 && len < sizeof p[n].name);
		p[n] = (param){0};
		memcpy(p[n].name, q, len);
		q += len;
		if (*q == '=') {
			p[n].has_def = true;
			char *e;
			p[n].def = strtoll(q + 1, &e, 10);
			q = e;
		} else if (*q == '?') {
			p[n].flag = p[n].has_def = true;
			q++;
		}
		n++;
	}
	return n;
}

/* "conv k c [stride=1]", for messages. */
static void usage(const layer_kind *lk, char *buf, size_t cap)
{
	param p[8];
	int np = kind_params(lk, p);
	size_t used = (size_t)snprintf(buf, cap, "%s", lk->name);
	for (int i = 0; i < np && used < cap; i++) {
		if (p[i].flag)
			used += (size_t)snprintf(buf + used, cap - used, " [%s]", p[i].name);
		else if (p[i].has_def)
			used += (size_t)snprintf(buf + used, cap - used, " [%s=%lld]", p[i].name, (long long)p[i].def);
		else
			used += (size_t)snprintf(buf + used, cap - used, " %s", p[i].name);
	}
}

static bool bind(lw *L, const frame *f, const fe_stmt *st, const layer_kind *lk, bound *b)
{
	param p[8];
	int np = kind_params(lk, p), next = 0;
	bool set[8] = {0};
	char use[128];
	usage(lk, use, sizeof use);
	for (int i = 0; i < st->nargs; i++) {
		const fe_arg *a = &st->args[i];
		int at = -1;
		if (a->key) {
			for (int j = 0; j < np; j++)
				if (strlen(p[j].name) == a->keyn && memcmp(p[j].name, a->key, a->keyn) == 0)
					at = j;
			if (at < 0)
				return fe_lw_fail(L, a->pos, "%s has no argument '%.*s' (write: %s)", lk->name, (int)a->keyn,
					a->key, use);
		} else if (a->e->kind == FE_E_NAME) {
			for (int j = 0; j < np; j++)
				if (p[j].flag && strlen(p[j].name) == a->e->n && memcmp(p[j].name, a->e->name, a->e->n) == 0)
					at = j;
		}
		if (at >= 0 && !a->key && p[at].flag) {
			b->a[at] = (val){.v = 1};
		} else {
			if (at < 0) {
				while (next < np && (set[next] || p[next].flag))
					next++;
				if (next == np)
					return fe_lw_fail(L, a->pos, "too many arguments for %s (write: %s)", lk->name, use);
				at = next;
			}
			if (set[at])
				return fe_lw_fail(L, a->pos, "%s's argument '%s' is given twice", lk->name, p[at].name);
			if (!fe_lw_eval(L, f, a->e, &b->a[at]))
				return false;
		}
		b->pos[at] = a->pos;
		set[at] = true;
	}
	for (int j = 0; j < np; j++) {
		if (set[j])
			continue;
		if (!p[j].has_def)
			return fe_lw_fail(L, st->pos, "%s needs its argument '%s' (write: %s)", lk->name, p[j].name, use);
		b->a[j] = (val){.v = p[j].def};
		b->pos[j] = st->pos;
	}
	return true;
}

/* The name of the parameters of a layer of kind ki; false on a clash. */
static bool layer_name(lw *L, const fe_stmt *st, int ki, char *name, size_t cap)
{
	const layer_kind *lk = &kinds[ki];
	if (lk->naming == NAME_NONE) {
		if (st->as)
			return fe_lw_fail(L, st->as_pos, "%s has no parameters to name", lk->name);
		name[0] = 0;
		return true;
	}
	if (st->as)
		snprintf(name, cap, "%.*s", (int)st->asn, st->as);
	else if (!L->part || lk->naming == NAME_ONCE)
		snprintf(name, cap, "%s", lk->name);
	else if (lk->naming == NAME_COUNTED)
		snprintf(name, cap, "%s%d", lk->name, L->count[ki]);
	else
		snprintf(name, cap, "%s%d", lk->name, L->count[kind_index(lk->after, strlen(lk->after))]);
	L->count[ki]++;
	for (int i = 0; i < L->nnames; i++)
		if (strcmp(L->names[i], name) == 0)
			return fe_lw_fail(L, st->as ? st->as_pos : st->pos,
				"'%s.%s' is already a parameter name; give this %s another with 'as NAME'", L->prefix, name,
				lk->name);
	if (L->nnames == MAX_NAMES)
		return fe_lw_fail(L, st->pos, "a section or residual function holds at most %d named layers", MAX_NAMES);
	L->names[L->nnames++] = ir_arena_strdup(L->g->arena, name);
	return true;
}

bool fe_lw_run_layer(lw *L, const frame *f, const fe_stmt *st)
{
	int ki = kind_index(st->word, st->n);
	if (ki < 0 && fe_prog_find(L->prog, st->word, st->n))
		return fe_lw_fail(L, st->pos, "'%.*s' is a block: call it as %.*s(args), with no space before '('",
			(int)st->n, st->word, (int)st->n, st->word);
	if (ki < 0)
		return fe_lw_fail(L, st->pos, "unknown layer '%.*s'", (int)st->n, st->word);
	const layer_kind *lk = &kinds[ki];
	if (++L->layers > MAX_LAYERS)
		return fe_lw_fail(L, st->pos, "the network has more than %d layers", MAX_LAYERS);
	if (L->nstreams != lk->streams)
		return fe_lw_fail(L, st->pos, "%s takes %s, but there %s", lk->name, lk->streams == 1 ? "one stream" : "two streams",
			L->nstreams == 1 ? "is one (split makes two)" : "are two (merge makes one)");
	bound b;
	memset(&b, 0, sizeof b);
	char name[80];
	if (!bind(L, f, st, lk, &b) || !layer_name(L, st, ki, name, sizeof name))
		return false;
	fe_lw_place_stmt(L, st->pos);
	return lk->lower(L, st, &b, name);
}
