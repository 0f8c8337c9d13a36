/* lang_lower.c: the model language's network becomes forward IR.
 *
 * requires: fe_spec_check passed (for fe_lower); the program of the spec
 *   (fe_prog_load) parses.
 * produces: the graph fe_lower promises (frontend/fe.h): sources typed, the
 *   other nodes not (the shape pass types them), each node with a position
 *   and a scope naming the model part:
 *     "input"           the inputs x and labels
 *     NAME              a `section NAME` (the prelude's "init", "final")
 *     "sS.uU"           unit U of stage S: its two additions and downsample
 *     "sS.uU.f"/".g"    the unit's residual functions F and G
 *   Scopes name things; the structure is the unit marking (ir.h's
 *   ir_unit_marker): every coupling a unit, numbered 0, 1, ... over the
 *   network, its F, G, y1, y2 and downsample D marked.
 *   Parameters are named after docs/model.md: SCOPE.NAME.SUFFIX, where NAME
 *   is `as NAME`, else in F and G the numbered convK (and bnK after convK-1,
 *   denseK), elsewhere the layer's kind (init.conv, final.bn).
 *
 * The same walk checks a network without building it (fe_spec_check): every
 * shape rule, argument, name and size limit is tested as the layers are
 * met, so fe_lower itself cannot fail.  Shapes are tracked here as [N,C,H,W]
 * or [N,F], each dimension with the keys that decided it, so a tensor that
 * is too large blames the key written last, as fe_spec_check_sizes does.
 *
 * Positions: a statement of the user's file gives its nodes its own line; a
 * statement of the prelude gives them the key its section or stage is
 * anchored at (`section init at init_filters`: init_filters; `stage u in
 * units[s]`: the element units[s]), so errors of later passes point into the
 * user's file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang.h"

#define BN_EPS 1e-3
#define BN_MOMENTUM 0.99
#define MAX_VARS (FE_MAX_PARAMS + 2 * FE_MAX_DEPTH)
#define MAX_LAYERS (1 << 18) /* layers one network may lower (10000 bottleneck units: 180000) */
#define MAX_STEPS (1 << 22)  /* statements it may run (empty loops too) */
#define MAX_NAMES 256        /* parameter names one section or F/G may hold */

/* An integer value and the keys it was computed from. */
typedef struct {
	int64_t v;
	unsigned keys; /* bit k: key k */
	ir_pos origin; /* where the first key it read was written */
} val;

typedef struct {
	ir_node *n;
	int rank;       /* 4: [N,C,H,W]; 2: [N,F] */
	int64_t dim[4];
	unsigned keys[4];
} tensor;

typedef struct {
	const char *name[MAX_VARS];
	size_t n[MAX_VARS];
	val v[MAX_VARS];
	int count;
} frame;

typedef struct layer_kind layer_kind;

typedef struct {
	const fe_spec *s;
	const fe_prog *prog;
	ir_graph *g;
	ir_dtype dt;
	fe_lower_mode mode;
	bool sizes;        /* check tensor sizes */
	ir_diags *d;
	bool failed;

	const char *scope; /* interned */
	ir_pos pos;        /* of the nodes being made; file interned */
	ir_pos anchor;     /* for the prelude's statements */
	char prefix[96];   /* of parameter names: the scope */
	bool part;         /* in F or G: layers are numbered */
	int count[16];     /* layers of each kind so far in this section or part */
	const char *names[MAX_NAMES];
	int nnames;

	tensor x[2];
	int nstreams;
	int stage;         /* stages begun */
	int64_t unit;      /* unit of the current stage, -1 outside one */
	int couplings;     /* couplings in the current unit */
	int64_t units;     /* couplings in all */
	int64_t layers;
	int64_t steps;
	const fe_def *stack[FE_MAX_DEPTH + 1];
	int depth;
	ir_node *labels;
} lw;

#define K(key) (1u << FE_KEY_##key)

static bool fail(lw *L, ir_pos pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail(lw *L, ir_pos pos, const char *fmt, ...)
{
	if (L->failed)
		return false;
	/* The user cannot see the prelude: point at what they wrote that led
	 * there (the stage's or section's key). */
	if (pos.file && strcmp(pos.file, FE_PRELUDE_FILE) == 0)
		pos = L->anchor.file ? L->anchor : L->s->vpos[FE_KEY_BLOCK];
	va_list ap;
	va_start(ap, fmt);
	ir_diag_addv(L->d, pos, fmt, ap);
	va_end(ap);
	L->failed = true;
	return false;
}

/* ---- keys and expressions ------------------------------------------------- */

/* The integer values of key k (n of them), their positions; false when k
 * is not an integer key. */
static bool key_ints(const fe_spec *s, fe_key k, const int64_t **v, const ir_pos **pos, int *n, int64_t *tmp)
{
	*pos = NULL;
	*n = 1;
	switch (k) {
	case FE_KEY_INPUT: *v = s->input; *pos = s->input_pos; *n = 3; return true;
	case FE_KEY_UNITS: *v = s->units; *pos = s->units_pos; *n = s->nstages; return true;
	case FE_KEY_FILTERS: *v = s->filters; *pos = s->filters_pos; *n = s->nfilters; return true;
	case FE_KEY_STRIDES: *v = s->strides; *pos = s->strides_pos; *n = s->nstrides; return true;
	case FE_KEY_LR_STEPS: *v = s->lr_steps; *pos = s->lr_steps_pos; *n = s->nlr_steps; return true;
	case FE_KEY_CLASSES: *v = &s->classes; return true;
	case FE_KEY_INIT_FILTERS: *v = &s->init_filters; return true;
	case FE_KEY_INIT_KERNEL: *v = &s->init_kernel; return true;
	case FE_KEY_INIT_STRIDE: *v = &s->init_stride; return true;
	case FE_KEY_BATCH: *v = &s->batch; return true;
	case FE_KEY_STEPS: *v = &s->steps; return true;
	case FE_KEY_EPOCHS: *v = &s->epochs; return true;
	case FE_KEY_SEED: *v = &s->seed; return true;
	case FE_KEY_INIT_MAX_POOL: *tmp = s->init_max_pool; *v = tmp; return true;
	default: return false;
	}
}

static bool is_list_key(fe_key k)
{
	return fe_keys[k].nmax > 1;
}

static bool lookup_key(lw *L, const fe_expr *e, fe_key *k)
{
	if (fe_key_lookup(e->name, e->n, k))
		return true;
	return fail(L, e->pos, "unknown name '%.*s'", (int)e->n, e->name);
}

static bool eval(lw *L, const frame *f, const fe_expr *e, val *out);

static bool eval_key(lw *L, const frame *f, const fe_expr *e, val *out)
{
	fe_key k;
	if (!lookup_key(L, e, &k))
		return false;
	const int64_t *v;
	const ir_pos *pos;
	int n;
	int64_t tmp;
	if (!key_ints(L->s, k, &v, &pos, &n, &tmp))
		return fail(L, e->pos, "key '%s' is not an integer", fe_keys[k].name);
	out->keys = 1u << k;
	if (e->kind == FE_E_LEN) {
		if (!is_list_key(k))
			return fail(L, e->pos, "'%s' is not a list", fe_keys[k].name);
		out->v = n;
		out->origin = L->s->vpos[k];
		return true;
	}
	if (e->kind == FE_E_NAME) {
		if (is_list_key(k))
			return fail(L, e->pos, "'%s' is a list: write %s[i]", fe_keys[k].name, fe_keys[k].name);
		out->v = v[0];
		out->origin = L->s->vpos[k];
		return true;
	}
	if (!is_list_key(k))
		return fail(L, e->pos, "'%s' is not a list", fe_keys[k].name);
	val i;
	if (!eval(L, f, e->a, &i))
		return false;
	if (i.v < 0 || i.v >= n)
		return fail(L, e->a->pos, "index %lld is outside %s, which has %d values", (long long)i.v,
			fe_keys[k].name, n);
	out->v = v[i.v];
	out->keys |= i.keys;
	out->origin = pos[i.v];
	return true;
}

static bool eval(lw *L, const frame *f, const fe_expr *e, val *out)
{
	*out = (val){0};
	switch (e->kind) {
	case FE_E_INT:
		out->v = e->v;
		return true;
	case FE_E_NAME:
		for (int i = f->count - 1; i >= 0; i--)
			if (f->n[i] == e->n && memcmp(f->name[i], e->name, e->n) == 0) {
				*out = f->v[i];
				return true;
			}
		return eval_key(L, f, e, out);
	case FE_E_INDEX:
	case FE_E_LEN:
		return eval_key(L, f, e, out);
	case FE_E_NOT:
	case FE_E_NEG:
		if (!eval(L, f, e->a, out))
			return false;
		out->v = e->kind == FE_E_NOT ? !out->v : -out->v;
		return true;
	case FE_E_BIN:
		break;
	}
	val a, b;
	if (!eval(L, f, e->a, &a) || !eval(L, f, e->b, &b))
		return false;
	*out = a;
	out->keys |= b.keys;
	if (!out->origin.file)
		out->origin = b.origin;
	int64_t r = 0;
	bool over = false;
	switch (e->op) {
	case FE_OP_OR: r = a.v || b.v; break;
	case FE_OP_AND: r = a.v && b.v; break;
	case FE_OP_EQ: r = a.v == b.v; break;
	case FE_OP_NE: r = a.v != b.v; break;
	case FE_OP_LT: r = a.v < b.v; break;
	case FE_OP_LE: r = a.v <= b.v; break;
	case FE_OP_GT: r = a.v > b.v; break;
	case FE_OP_GE: r = a.v >= b.v; break;
	case FE_OP_ADD: over = __builtin_add_overflow(a.v, b.v, &r); break;
	case FE_OP_SUB: over = __builtin_sub_overflow(a.v, b.v, &r); break;
	case FE_OP_MUL: over = __builtin_mul_overflow(a.v, b.v, &r); break;
	case FE_OP_DIV:
	case FE_OP_MOD:
		if (b.v == 0)
			return fail(L, e->pos, "division by zero");
		if (a.v == INT64_MIN && b.v == -1)
			over = true;
		else
			r = e->op == FE_OP_DIV ? a.v / b.v : a.v % b.v;
		break;
	}
	if (over || r > FE_INT_MAX || r < -(int64_t)FE_INT_MAX)
		return fail(L, e->pos, "the value is out of range (at most %d)", FE_INT_MAX);
	out->v = r;
	return true;
}

/* ---- nodes and sizes ------------------------------------------------------ */

static void place(lw *L, const char *scope, ir_pos pos)
{
	if (!L->scope || strcmp(L->scope, scope) != 0)
		L->scope = ir_arena_strdup(L->g->arena, scope);
	if (pos.file && (!L->pos.file || strcmp(L->pos.file, pos.file) != 0))
		pos.file = ir_arena_strdup(L->g->arena, pos.file);
	else if (pos.file)
		pos.file = L->pos.file;
	L->pos = pos;
}

/* Nodes of statement st take its position, or the anchor when it is the
 * prelude's. */
static void place_stmt(lw *L, ir_pos stmt_pos)
{
	place(L, L->scope, strcmp(stmt_pos.file, FE_PRELUDE_FILE) == 0 ? L->anchor : stmt_pos);
}

static ir_node *node_n(lw *L, ir_op op, ir_node *const *in, int nin)
{
	ir_node *n = ir_node_new(L->g, op, in, nin);
	n->pos = L->pos;
	n->pos_printed = L->pos.file != NULL;
	n->scope = L->scope;
	return n;
}

static ir_node *node(lw *L, ir_op op, ir_node *a, ir_node *b)
{
	ir_node *in[2] = {a, b};
	return node_n(L, op, in, a ? (b ? 2 : 1) : 0);
}

/* Checks a tensor of dtype dt against IR_MAX_BYTES; blames the key, among
 * `keys` and the batch and input, that was written last. */
static bool fits(lw *L, ir_pos at, unsigned keys, const char *what, ir_dtype dt, int rank, const int64_t *dims)
{
	ir_type t = ir_type_make(dt, rank, dims);
	if (!L->sizes || ir_type_size_ok(&t))
		return true;
	const fe_spec *s = L->s;
	keys |= K(BATCH);
	int blame = -1;
	for (int k = 0; k < FE_KEY_COUNT; k++)
		if ((keys & (1u << k)) && s->seq[k] && (blame < 0 || s->seq[k] >= s->seq[blame]))
			blame = k;
	char type[160], value[200];
	ir_type_str(&t, type, sizeof type);
	if (blame < 0)
		return fail(L, at, "%s %s is larger than 2^40 bytes", what, type);
	const int64_t *v;
	const ir_pos *pos;
	int n;
	int64_t tmp;
	size_t used = 0;
	value[0] = 0;
	if (key_ints(s, (fe_key)blame, &v, &pos, &n, &tmp))
		for (int i = 0; i < n && used < sizeof value - 24; i++)
			used += (size_t)snprintf(value + used, sizeof value - used, "%s%lld", i ? "," : "", (long long)v[i]);
	return fail(L, s->vpos[blame], "%s %s makes %s %s larger than 2^40 bytes", fe_keys[blame].name, value, what,
		type);
}

static unsigned all_keys(const tensor *t)
{
	unsigned k = 0;
	for (int i = 0; i < t->rank; i++)
		k |= t->keys[i];
	return k;
}

/* Gives y (made by the layer named what) the shape in t and checks its size. */
static bool output(lw *L, tensor *t, ir_node *y, const char *what)
{
	t->n = y;
	char buf[160];
	snprintf(buf, sizeof buf, "the output of %s", what);
	return fits(L, L->pos, all_keys(t), buf, L->dt, t->rank, t->dim);
}

/* A parameter or state tensor named prefix.name.suffix. */
static ir_node *tensor_node(lw *L, ir_op op, const char *name, const char *suffix, int rank, const int64_t *dims,
	unsigned keys)
{
	char full[256];
	snprintf(full, sizeof full, "%s.%s.%s", L->prefix, name, suffix);
	char what[300];
	snprintf(what, sizeof what, "the weight %s", full);
	if (!fits(L, L->pos, keys, what, L->dt, rank, dims))
		return NULL;
	ir_node *n = node(L, op, NULL, NULL);
	n->name = ir_arena_strdup(L->g->arena, full);
	n->type = ir_type_make(L->dt, rank, dims);
	return n;
}

static void same_pad(int64_t size, int64_t k, int64_t s, int64_t *before, int64_t *after)
{
	int64_t out = (size + s - 1) / s;
	int64_t total = (out - 1) * s + k - size;
	if (total < 0)
		total = 0;
	*before = total / 2;
	*after = total - *before;
}

/* ---- layers --------------------------------------------------------------- */

/* A layer's arguments, bound to the parameters its kind declares. */
typedef struct {
	val a[8];
	ir_pos pos[8];
} bound;

typedef bool (*layer_fn)(lw *L, const fe_stmt *st, const bound *b, const char *name);

typedef enum {
	NAME_NONE,     /* no parameters */
	NAME_COUNTED,  /* in F and G kindK, counted; elsewhere the kind */
	NAME_AFTER,    /* in F and G, kind and the count of `after` layers so far (bnK after convK-1) */
} naming;

struct layer_kind {
	const char *name;
	const char *params; /* "k c stride=1 bias?": positional, =default, ?flag */
	int streams;        /* streams it takes: 1, or 2 (merge) */
	layer_fn lower;
	naming naming;
	const char *after;  /* NAME_AFTER: the kind counted */
};

static bool need_rank(lw *L, const fe_stmt *st, int rank)
{
	const tensor *x = &L->x[0];
	if (x->rank == rank)
		return true;
	return fail(L, st->pos, "%.*s takes %s, but its input has rank %d", (int)st->n, st->word,
		rank == 4 ? "an image tensor [N,C,H,W]" : "a matrix [N,F]", x->rank);
}

static bool positive(lw *L, const bound *b, int i, const char *what, int64_t max)
{
	if (b->a[i].v < 1)
		return fail(L, b->pos[i], "%s must be positive, found %lld", what, (long long)b->a[i].v);
	if (b->a[i].v > max)
		return fail(L, b->pos[i], "%s is at most %lld, found %lld", what, (long long)max, (long long)b->a[i].v);
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
	ir_node *w = tensor_node(L, IR_OP_PARAM, name, "w", 4, wd,
		b->a[0].keys | b->a[1].keys | x->keys[1]);
	if (!w)
		return false;
	same_pad(x->dim[2], k, stride, &pad[0], &pad[1]);
	same_pad(x->dim[3], k, stride, &pad[2], &pad[3]);
	ir_node *y = node(L, IR_OP_CONV2D, x->n, w);
	ir_node_set_int(L->g, y, IR_ATTR_STRIDE, stride);
	ir_node_set_ints(L->g, y, IR_ATTR_PAD, pad, 4);
	x->dim[1] = c;
	x->keys[1] = b->a[1].keys;
	for (int i = 2; i < 4; i++) {
		x->dim[i] = (x->dim[i] + stride - 1) / stride;
		x->keys[i] |= b->a[2].keys;
	}
	char what[160];
	snprintf(what, sizeof what, "%s.%s", L->prefix, name);
	return output(L, x, y, what);
}

static bool lower_bn(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	tensor *x = &L->x[0];
	int64_t c = x->dim[1], count = x->dim[0];
	for (int i = 2; i < x->rank; i++)
		if (__builtin_mul_overflow(count, x->dim[i], &count))
			count = INT64_MAX; /* only unchecked sizes (fe_spec_check) get here */
	unsigned keys = x->keys[1];
	ir_node *gamma = tensor_node(L, IR_OP_PARAM, name, "gamma", 1, &c, keys);
	ir_node *beta = gamma ? tensor_node(L, IR_OP_PARAM, name, "beta", 1, &c, keys) : NULL;
	ir_node *mean = beta ? tensor_node(L, IR_OP_STATE, name, "mean", 1, &c, keys) : NULL;
	ir_node *var = mean ? tensor_node(L, IR_OP_STATE, name, "var", 1, &c, keys) : NULL;
	if (!var)
		return false;
	ir_node *y;
	if (L->mode == FE_LOWER_EVAL) {
		ir_node *in[5] = {x->n, mean, var, gamma, beta};
		y = node_n(L, IR_OP_BN_INFER, in, 5);
		ir_node_set_float(L->g, y, IR_ATTR_EPS, BN_EPS);
	} else {
		ir_node *stats = node(L, IR_OP_BN_STATS, x->n, NULL);
		ir_node *in[4] = {x->n, stats, gamma, beta};
		y = node_n(L, IR_OP_BN_NORM, in, 4);
		ir_node_set_float(L->g, y, IR_ATTR_EPS, BN_EPS);
		ir_node *rm = node(L, IR_OP_BN_RUNNING_MEAN, mean, stats);
		ir_node_set_float(L->g, rm, IR_ATTR_MOMENTUM, BN_MOMENTUM);
		ir_node *rv = node(L, IR_OP_BN_RUNNING_VAR, var, stats);
		ir_node_set_float(L->g, rv, IR_ATTR_MOMENTUM, BN_MOMENTUM);
		ir_node_set_int(L->g, rv, IR_ATTR_NCOUNT, count);
	}
	x->n = y;
	return true;
}

static bool lower_relu(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	L->x[0].n = node(L, IR_OP_RELU, L->x[0].n, NULL);
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
	ir_node *y = node(L, IR_OP_MAXPOOL, x->n, NULL);
	ir_node_set_int(L->g, y, IR_ATTR_WINDOW, k);
	ir_node_set_int(L->g, y, IR_ATTR_STRIDE, stride);
	ir_node_set_ints(L->g, y, IR_ATTR_PAD, pad, 4);
	for (int i = 2; i < 4; i++) {
		int64_t span = x->dim[i] + pad[2 * (i - 2)] + pad[2 * (i - 2) + 1];
		if (span < k)
			return fail(L, b->pos[0], "a %lld window does not fit in size %lld", (long long)k,
				(long long)x->dim[i]);
		x->dim[i] = (span - k) / stride + 1;
		x->keys[i] |= b->a[0].keys | b->a[1].keys;
	}
	x->n = y;
	return true;
}

/* Average pool, window = stride, VALID: the window must divide H and W. */
static ir_node *avgpool(lw *L, tensor *x, int64_t k, unsigned keys, ir_pos at)
{
	if (x->dim[2] % k || x->dim[3] % k) {
		fail(L, at, "an average pool of window %lld does not divide %lldx%lld", (long long)k,
			(long long)x->dim[2], (long long)x->dim[3]);
		return NULL;
	}
	ir_node *y = node(L, IR_OP_AVGPOOL, x->n, NULL);
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
		avgpool(L, &L->x[0], b->a[0].v, b->a[0].keys, b->pos[0]) != NULL;
}

static bool lower_global_avgpool(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	if (!need_rank(L, st, 4))
		return false;
	tensor *x = &L->x[0];
	x->n = node(L, IR_OP_GLOBAL_AVGPOOL, x->n, NULL);
	x->rank = 2;
	return true;
}

static bool lower_dense(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	if (!need_rank(L, st, 2) || !positive(L, b, 0, "the output width", FE_INT_MAX))
		return false;
	tensor *x = &L->x[0];
	int64_t dw[2] = {b->a[0].v, x->dim[1]};
	ir_node *w = tensor_node(L, IR_OP_PARAM, name, "w", 2, dw, b->a[0].keys | x->keys[1]);
	ir_node *bias = NULL;
	if (w && b->a[1].v)
		bias = tensor_node(L, IR_OP_PARAM, name, "b", 1, &dw[0], b->a[0].keys);
	if (!w || (b->a[1].v && !bias))
		return false;
	ir_node *y = node(L, IR_OP_MATMUL, x->n, w);
	ir_node_set_int(L->g, y, IR_ATTR_TRANS_B, 1);
	if (bias)
		y = node(L, IR_OP_BIAS_ADD, y, bias);
	x->dim[1] = dw[0];
	x->keys[1] = b->a[0].keys;
	char what[160];
	snprintf(what, sizeof what, "%s.%s", L->prefix, name);
	return output(L, x, y, what);
}

static bool lower_split(lw *L, const fe_stmt *st, const bound *b, const char *name)
{
	tensor x = L->x[0];
	if (x.dim[1] % 2)
		return fail(L, st->pos, "split needs an even channel count, found %lld", (long long)x.dim[1]);
	for (int part = 0; part < 2; part++) {
		ir_node *y = node(L, IR_OP_SPLIT, x.n, NULL);
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
	for (int i = 0; i < a->rank; i++)
		if (i != 1 && a->dim[i] != c->dim[i])
			return fail(L, st->pos, "merge needs streams of one size; dimension %d is %lld and %lld", i,
				(long long)a->dim[i], (long long)c->dim[i]);
	ir_node *y = node(L, IR_OP_CONCAT, a->n, c->n);
	ir_node_set_int(L->g, y, IR_ATTR_AXIS, 1);
	a->n = y;
	a->dim[1] += c->dim[1];
	a->keys[1] |= c->keys[1];
	L->nstreams = 1;
	return true;
}

/* The layer kinds: name, arguments, streams, how to lower, how its
 * parameters are named.  The transformer layers (layer norm, GELU,
 * attention, token reshapes) join at the end of this table. */
static const layer_kind kinds[] = {
	{"conv", "k c stride=1", 1, lower_conv, NAME_COUNTED, NULL},
	{"bn", "", 1, lower_bn, NAME_AFTER, "conv"},
	{"relu", "", 1, lower_relu, NAME_NONE, NULL},
	{"maxpool", "k stride=1", 1, lower_maxpool, NAME_NONE, NULL},
	{"avgpool", "k", 1, lower_avgpool, NAME_NONE, NULL},
	{"global_avgpool", "", 1, lower_global_avgpool, NAME_NONE, NULL},
	{"dense", "n bias?", 1, lower_dense, NAME_COUNTED, NULL},
	{"split", "", 1, lower_split, NAME_NONE, NULL},
	{"merge", "", 2, lower_merge, NAME_NONE, NULL},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))
_Static_assert(NKINDS <= 16, "lw.count holds a counter per kind");

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
				return fail(L, a->pos, "%s has no argument '%.*s' (write: %s)", lk->name, (int)a->keyn,
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
					return fail(L, a->pos, "too many arguments for %s (write: %s)", lk->name, use);
				at = next;
			}
			if (set[at])
				return fail(L, a->pos, "%s's argument '%s' is given twice", lk->name, p[at].name);
			if (!eval(L, f, a->e, &b->a[at]))
				return false;
		}
		b->pos[at] = a->pos;
		set[at] = true;
	}
	for (int j = 0; j < np; j++) {
		if (set[j])
			continue;
		if (!p[j].has_def)
			return fail(L, st->pos, "%s needs its argument '%s' (write: %s)", lk->name, p[j].name, use);
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
			return fail(L, st->as_pos, "%s has no parameters to name", lk->name);
		name[0] = 0;
		return true;
	}
	if (st->as)
		snprintf(name, cap, "%.*s", (int)st->asn, st->as);
	else if (!L->part)
		snprintf(name, cap, "%s", lk->name);
	else if (lk->naming == NAME_COUNTED)
		snprintf(name, cap, "%s%d", lk->name, L->count[ki]);
	else
		snprintf(name, cap, "%s%d", lk->name, L->count[kind_index(lk->after, strlen(lk->after))]);
	L->count[ki]++;
	for (int i = 0; i < L->nnames; i++)
		if (strcmp(L->names[i], name) == 0)
			return fail(L, st->as ? st->as_pos : st->pos,
				"'%s.%s' is already a parameter name; give this %s another with 'as NAME'", L->prefix, name,
				lk->name);
	if (L->nnames == MAX_NAMES)
		return fail(L, st->pos, "a section or residual function holds at most %d named layers", MAX_NAMES);
	L->names[L->nnames++] = ir_arena_strdup(L->g->arena, name);
	return true;
}

static bool run_layer(lw *L, const frame *f, const fe_stmt *st)
{
	int ki = kind_index(st->word, st->n);
	if (ki < 0 && fe_prog_find(L->prog, st->word, st->n))
		return fail(L, st->pos, "'%.*s' is a block: call it as %.*s(args), with no space before '('",
			(int)st->n, st->word, (int)st->n, st->word);
	if (ki < 0)
		return fail(L, st->pos, "unknown layer '%.*s'", (int)st->n, st->word);
	const layer_kind *lk = &kinds[ki];
	if (++L->layers > MAX_LAYERS)
		return fail(L, st->pos, "the network has more than %d layers", MAX_LAYERS);
	if (L->nstreams != lk->streams)
		return fail(L, st->pos, "%s takes %s, but there %s", lk->name, lk->streams == 1 ? "one stream" : "two streams",
			L->nstreams == 1 ? "is one (split makes two)" : "are two (merge makes one)");
	bound b;
	memset(&b, 0, sizeof b);
	char name[80];
	if (!bind(L, f, st, lk, &b) || !layer_name(L, st, ki, name, sizeof name))
		return false;
	place_stmt(L, st->pos);
	return lk->lower(L, st, &b, name);
}

/* ---- statements ----------------------------------------------------------- */

static bool run_body(lw *L, frame *f, const fe_stmt *st);

static bool push_var(lw *L, frame *f, const fe_stmt *st, val v)
{
	fe_key k;
	for (int i = 0; i < f->count; i++)
		if (f->n[i] == st->n && memcmp(f->name[i], st->word, st->n) == 0)
			return fail(L, st->pos, "'%.*s' is already a variable here", (int)st->n, st->word);
	if (fe_key_lookup(st->word, st->n, &k))
		return fail(L, st->pos, "'%.*s' is a key; name the variable otherwise", (int)st->n, st->word);
	IR_ASSERT(f->count < MAX_VARS);
	f->name[f->count] = st->word;
	f->n[f->count] = st->n;
	f->v[f->count++] = v;
	return true;
}

static const fe_def *resolve(lw *L, const fe_call *c)
{
	const fe_def *d = fe_prog_find(L->prog, c->name, c->n);
	if (!d && c->n == 5 && memcmp(c->name, "block", 5) == 0)
		d = fe_prog_find(L->prog, L->s->block_name, strlen(L->s->block_name));
	if (!d)
		fail(L, c->pos, "undefined block '%.*s'", (int)c->n, c->name);
	return d;
}

/* Runs block c.name with c's arguments (evaluated in f) on the current
 * stream. */
static bool run_call(lw *L, const frame *f, const fe_call *c)
{
	const fe_def *d = resolve(L, c);
	if (!d)
		return false;
	for (int i = 0; i < L->depth; i++)
		if (L->stack[i] == d)
			return fail(L, c->pos, "block '%.*s' calls itself: blocks cannot recurse", (int)d->n, d->name);
	if (L->depth == FE_MAX_DEPTH)
		return fail(L, c->pos, "blocks nest deeper than %d", FE_MAX_DEPTH);
	/* A user's block called from the prelude: blame its def. */
	bool from_prelude = strcmp(c->pos.file, FE_PRELUDE_FILE) == 0 && !d->prelude;
	ir_pos at = from_prelude ? d->pos : c->pos;
	const char *hint = from_prelude ? " (the RevNet network calls block(c, stride, pre))" : "";
	frame callee = {0};
	bool set[FE_MAX_PARAMS] = {0};
	int next = 0;
	for (int i = 0; i < c->nargs; i++) {
		const fe_arg *a = &c->args[i];
		int k = -1;
		if (a->key) {
			for (int j = 0; j < d->nparams; j++)
				if (d->paramn[j] == a->keyn && memcmp(d->param[j], a->key, a->keyn) == 0)
					k = j;
			if (k < 0)
				return fail(L, a->pos, "block '%.*s' has no parameter '%.*s'", (int)d->n, d->name,
					(int)a->keyn, a->key);
		} else {
			while (next < d->nparams && set[next])
				next++;
			k = next;
		}
		if (k >= d->nparams)
			return fail(L, from_prelude ? d->pos : a->pos, "block '%.*s' takes %d argument%s, found %d%s",
				(int)d->n, d->name, d->nparams, d->nparams == 1 ? "" : "s", c->nargs, hint);
		if (set[k])
			return fail(L, a->pos, "parameter '%.*s' is given twice", (int)d->paramn[k], d->param[k]);
		set[k] = true;
		if (!eval(L, f, a->e, &callee.v[k]))
			return false;
	}
	for (int j = 0; j < d->nparams; j++) {
		if (!set[j])
			return fail(L, at, "block '%.*s' takes %d argument%s, found %d%s", (int)d->n, d->name,
				d->nparams, d->nparams == 1 ? "" : "s", c->nargs, hint);
		callee.name[j] = d->param[j];
		callee.n[j] = d->paramn[j];
	}
	callee.count = d->nparams;
	L->stack[L->depth++] = d;
	bool ok = run_body(L, &callee, d->body);
	L->depth--;
	return ok;
}

static void shape_str(const tensor *t, char *buf, size_t cap)
{
	if (t->rank == 4)
		snprintf(buf, cap, "[%lld,%lld,%lld,%lld]", (long long)t->dim[0], (long long)t->dim[1],
			(long long)t->dim[2], (long long)t->dim[3]);
	else
		snprintf(buf, cap, "[%lld,%lld]", (long long)t->dim[0], (long long)t->dim[1]);
}

static bool same_shape(const tensor *a, const tensor *b)
{
	return a->rank == b->rank && memcmp(a->dim, b->dim, (size_t)a->rank * sizeof a->dim[0]) == 0;
}

/* The residual function F or G of the current unit: c on one stream x. */
static bool run_part(lw *L, const frame *f, const fe_call *c, const char *part, tensor *x)
{
	char unit[64];
	snprintf(unit, sizeof unit, "s%d.u%lld", L->stage - 1, (long long)L->unit);
	snprintf(L->prefix, sizeof L->prefix, "%s.%s", unit, part);
	place(L, L->prefix, L->pos);
	L->part = true;
	L->nnames = 0;
	memset(L->count, 0, sizeof L->count);
	L->nstreams = 1;
	L->x[0] = *x;
	if (!run_call(L, f, c))
		return false;
	if (L->nstreams != 1)
		return fail(L, c->pos, "%s=%.*s(...) must end in one stream", part, (int)c->n, c->name);
	*x = L->x[0];
	place(L, unit, L->pos);
	return true;
}

/* The downsample D of a unit that changes the shape: x becomes `to`'s shape
 * by an average pool (window = stride, VALID) and zero channels, half
 * before and the rest after. */
static bool downsample(lw *L, tensor *x, const tensor *to, ir_pos at, const char *what)
{
	char a[96], b[96];
	shape_str(x, a, sizeof a);
	shape_str(to, b, sizeof b);
	if (x->rank != 4 || to->rank != 4 || to->dim[0] != x->dim[0] || to->dim[2] < 1 || to->dim[3] < 1 ||
		x->dim[2] % to->dim[2] || x->dim[3] % to->dim[3] || x->dim[2] / to->dim[2] != x->dim[3] / to->dim[3] ||
		to->dim[1] < x->dim[1])
		return fail(L, at, "the downsample cannot make %s %s into %s (it pools by an integer stride and "
			"adds channels)", what, a, b);
	int64_t stride = x->dim[2] / to->dim[2];
	if (stride > 1 && !avgpool(L, x, stride, to->keys[2], at))
		return false;
	if (to->dim[1] > x->dim[1]) {
		int64_t more = to->dim[1] - x->dim[1];
		ir_node *y = node(L, IR_OP_CHANNEL_PAD, x->n, NULL);
		ir_node_set_int(L->g, y, IR_ATTR_LO, more / 2);
		ir_node_set_int(L->g, y, IR_ATTR_HI, more - more / 2);
		x->n = y;
	}
	*x = (tensor){x->n, 4, {to->dim[0], to->dim[1], to->dim[2], to->dim[3]},
		{to->keys[0], to->keys[1], to->keys[2], to->keys[3]}};
	return true;
}

static const fe_arg *find_arg(const fe_stmt *st, const char *key)
{
	for (int i = 0; i < st->nargs; i++) {
		const fe_arg *a = &st->args[i];
		if (a->key && a->keyn == strlen(key) && memcmp(a->key, key, a->keyn) == 0)
			return a;
	}
	return NULL;
}

/* Where to blame a residual function's shape: its f= or g= argument, or,
 * when that is the prelude's, the user's def it calls. */
static ir_pos part_pos(lw *L, const fe_arg *a)
{
	if (strcmp(a->pos.file, FE_PRELUDE_FILE) != 0)
		return a->pos;
	const fe_def *d = fe_prog_find(L->prog, a->call->name, a->call->n);
	if (!d && a->call->n == 5 && memcmp(a->call->name, "block", 5) == 0)
		d = fe_prog_find(L->prog, L->s->block_name, strlen(L->s->block_name));
	return d && !d->prelude ? d->pos : a->pos;
}

/* y1 = D(x1) + F(x2), y2 = D(x2) + G(y1); D only with `down`, else F and G
 * must keep the shapes. */
static bool run_coupling(lw *L, const frame *f, const fe_stmt *st)
{
	if (L->unit < 0)
		return fail(L, st->pos, "a coupling belongs in a stage (stage u in N { coupling ... })");
	if (++L->couplings > 1)
		return fail(L, st->pos, "a unit of a stage holds one coupling");
	if (++L->units > FE_MAX_UNITS)
		return fail(L, st->pos, "the network has more than %d units", FE_MAX_UNITS);
	if (L->nstreams != 2)
		return fail(L, st->pos, "a coupling takes two streams, but there is one (split makes two)");
	bool down = false;
	for (int i = 0; i < st->nargs; i++) {
		const fe_arg *a = &st->args[i];
		bool fg = a->key && a->keyn == 1 && (a->key[0] == 'f' || a->key[0] == 'g');
		if (fg && !a->call)
			return fail(L, a->pos, "%c= takes a block call: %c=NAME(args)", a->key[0], a->key[0]);
		if (!fg && !(!a->key && a->e->kind == FE_E_NAME && a->e->n == 4 && memcmp(a->e->name, "down", 4) == 0))
			return fail(L, a->pos, "a coupling takes f=NAME(args), g=NAME(args) and down");
		for (int j = 0; j < i; j++)
			if (st->args[j].keyn == a->keyn && (!a->key || memcmp(st->args[j].key, a->key, a->keyn) == 0))
				return fail(L, a->pos, "this argument of the coupling is given twice");
		down |= !a->key;
	}
	const fe_arg *fa = find_arg(st, "f"), *ga = find_arg(st, "g");
	if (!fa || !ga)
		return fail(L, st->pos, "a coupling needs f=NAME(args) and g=NAME(args)");
	ir_pos fpos = part_pos(L, fa), gpos = part_pos(L, ga);
	char unit[64];
	snprintf(unit, sizeof unit, "s%d.u%lld", L->stage - 1, (long long)L->unit);
	/* A unit begins here: numbered 0, 1, ... over the network, each part
	 * marked as it is made (F, then D of x1, y1, G, D of x2, y2). */
	tensor x1 = L->x[0], x2 = L->x[1], fy = x2, gy;
	place_stmt(L, st->pos);
	ir_pos at = L->pos;
	char a[96], b[96];
	ir_unit_marker mark;
	ir_unit_begin(&mark, L->g, (int)(L->units - 1));
	if (!run_part(L, f, fa->call, "f", &fy))
		return false;
	ir_unit_mark(&mark, IR_PART_F);
	L->pos = at;
	if (down) {
		if (!downsample(L, &x1, &fy, fpos, "x1"))
			return false;
		ir_unit_mark(&mark, IR_PART_D);
	} else if (!same_shape(&fy, &x1)) {
		shape_str(&fy, a, sizeof a);
		shape_str(&x1, b, sizeof b);
		return fail(L, fpos, "F of unit %s gives %s, but x1 is %s: a coupling's F must keep x1's shape (or "
			"the coupling says down)", unit, a, b);
	}
	ir_node *y1 = node(L, IR_OP_ADD, x1.n, fy.n);
	ir_unit_mark(&mark, IR_PART_Y1);
	gy = fy;
	gy.n = y1;
	tensor y1t = gy;
	if (!run_part(L, f, ga->call, "g", &gy))
		return false;
	ir_unit_mark(&mark, IR_PART_G);
	L->pos = at;
	if (!same_shape(&gy, &y1t)) {
		shape_str(&gy, a, sizeof a);
		shape_str(&y1t, b, sizeof b);
		return fail(L, gpos, "G of unit %s gives %s, but y1 is %s: a coupling's G must keep its input's shape",
			unit, a, b);
	}
	if (down) {
		if (!downsample(L, &x2, &gy, gpos, "x2"))
			return false;
		ir_unit_mark(&mark, IR_PART_D);
	} else if (!same_shape(&x2, &gy)) {
		shape_str(&gy, a, sizeof a);
		shape_str(&x2, b, sizeof b);
		return fail(L, gpos, "G of unit %s gives %s, but x2 is %s: a coupling's G must keep x2's shape (or "
			"the coupling says down)", unit, a, b);
	}
	ir_node *y2 = node(L, IR_OP_ADD, x2.n, gy.n);
	ir_unit_mark(&mark, IR_PART_Y2);
	L->x[0] = y1t;
	L->x[1] = gy;
	L->x[1].n = y2;
	L->nstreams = 2;
	return true;
}

static bool count_of(lw *L, frame *f, const fe_stmt *st, val *n)
{
	if (!eval(L, f, st->cond, n))
		return false;
	if (n->v < 0 || n->v > FE_MAX_UNITS)
		return fail(L, st->cond->pos, "a %.*s repeats 0 to %d times, not %lld", st->kind == FE_S_FOR ? 3 : 5,
			st->kind == FE_S_FOR ? "for" : "stage", FE_MAX_UNITS, (long long)n->v);
	return true;
}

static bool run_stmt(lw *L, frame *f, const fe_stmt *st)
{
	if (++L->steps > MAX_STEPS)
		return fail(L, st->pos, "the network runs more than %d statements", MAX_STEPS);
	switch (st->kind) {
	case FE_S_LAYER:
		return run_layer(L, f, st);
	case FE_S_CALL:
		return run_call(L, f, &st->call);
	case FE_S_IF: {
		val c;
		if (!eval(L, f, st->cond, &c))
			return false;
		return run_body(L, f, c.v ? st->body : st->other);
	}
	case FE_S_FOR: {
		val n;
		if (!count_of(L, f, st, &n))
			return false;
		for (int64_t i = 0; i < n.v; i++) {
			if (!push_var(L, f, st, (val){.v = i}))
				return false;
			bool ok = run_body(L, f, st->body);
			f->count--;
			if (!ok)
				return false;
		}
		return true;
	}
	case FE_S_STAGE: {
		val n;
		if (!count_of(L, f, st, &n))
			return false;
		if (L->unit >= 0)
			return fail(L, st->pos, "stages do not nest");
		ir_pos anchor = L->anchor;
		if (strcmp(st->pos.file, FE_PRELUDE_FILE) == 0 && n.origin.file)
			L->anchor = n.origin;
		L->stage++;
		bool ok = true;
		for (int64_t u = 0; ok && u < n.v; u++) {
			L->unit = u;
			L->couplings = 0;
			ok = push_var(L, f, st, (val){.v = u}) && run_body(L, f, st->body);
			f->count -= ok;
		}
		L->unit = -1;
		L->anchor = anchor;
		return ok;
	}
	case FE_S_SECTION: {
		snprintf(L->prefix, sizeof L->prefix, "%.*s", (int)st->n, st->word);
		if (st->as) {
			fe_key k;
			if (!fe_key_lookup(st->as, st->asn, &k))
				return fail(L, st->as_pos, "unknown key '%.*s'", (int)st->asn, st->as);
			L->anchor = L->s->pos[k];
		} else {
			L->anchor = st->pos;
		}
		place(L, L->prefix, L->pos);
		L->part = false;
		L->nnames = 0;
		memset(L->count, 0, sizeof L->count);
		return run_body(L, f, st->body);
	}
	case FE_S_COUPLING:
		return run_coupling(L, f, st);
	}
	IR_DIE("bad statement kind");
}

static bool run_body(lw *L, frame *f, const fe_stmt *st)
{
	for (; st; st = st->next)
		if (!run_stmt(L, f, st))
			return false;
	return true;
}

/* ---- the network ---------------------------------------------------------- */

static const fe_def *network(const fe_prog *prog)
{
	const fe_def *net = NULL;
	for (int i = 0; i < prog->ndefs; i++)
		if (!prog->defs[i].name && (!net || net->prelude))
			net = &prog->defs[i];
	IR_ASSERT(net);
	return net;
}

static bool lower_all(lw *L)
{
	const fe_spec *s = L->s;
	ir_graph *g = L->g;
	if (s->block == FE_BLOCK_DEF && !fe_prog_find(L->prog, s->block_name, strlen(s->block_name))) {
		if (!s->ndefs)
			return fail(L, s->vpos[FE_KEY_BLOCK], "unknown block kind '%s' (expected basic or bottleneck)",
				s->block_name);
		return fail(L, s->vpos[FE_KEY_BLOCK], "unknown block kind '%s' (expected basic, bottleneck or a "
			"block this file defines)", s->block_name);
	}
	int64_t n = s->batch;
	place(L, "input", s->pos[FE_KEY_INPUT]);
	tensor *x = &L->x[0];
	*x = (tensor){NULL, 4, {n, s->input[0], s->input[1], s->input[2]},
		{K(BATCH), K(INPUT), K(INPUT), K(INPUT)}};
	if (!fits(L, s->vpos[FE_KEY_INPUT], K(INPUT), "the input tensor", L->dt, 4, x->dim) ||
		!fits(L, s->vpos[FE_KEY_BATCH], 0, "the labels", IR_I32, 1, &n))
		return false;
	x->n = node(L, IR_OP_INPUT, NULL, NULL);
	ir_node_set_str(g, x->n, IR_ATTR_NAME, "x");
	x->n->type = ir_type_make(L->dt, 4, x->dim);
	L->labels = node(L, IR_OP_INPUT, NULL, NULL);
	ir_node_set_str(g, L->labels, IR_ATTR_NAME, "labels");
	L->labels->type = ir_type_make(IR_I32, 1, &n);
	L->nstreams = 1;
	L->unit = -1;

	const fe_def *net = network(L->prog);
	frame f = {0};
	L->stack[L->depth++] = net;
	if (!run_body(L, &f, net->body))
		return false;
	char sh[96];
	shape_str(x, sh, sizeof sh);
	if (L->nstreams != 1)
		return fail(L, net->pos, "the network ends in two streams; merge them and end in the logits");
	if (x->rank != 2 || x->dim[1] != s->classes)
		return fail(L, net->pos, "the network ends in %s; it must end in the logits [N,classes] = [%lld,%lld]",
			sh, (long long)n, (long long)s->classes);
	ir_node *loss = node(L, IR_OP_SOFTMAX_XENT, x->n, L->labels);
	ir_node *out = node(L, IR_OP_OUTPUT, loss, NULL);
	ir_node_set_str(g, out, IR_ATTR_NAME, "loss");
	out = node(L, IR_OP_OUTPUT, x->n, NULL);
	ir_node_set_str(g, out, IR_ATTR_NAME, "logits");
	return true;
}

bool fe_lang_lower(const fe_spec *s, ir_graph *g, ir_dtype dt, fe_lower_mode mode, bool sizes, ir_diags *d)
{
	fe_prog prog;
	fe_prog_load(&prog, s);
	lw *L = calloc(1, sizeof *L);
	if (!L)
		IR_DIE("out of memory");
	*L = (lw){.s = s, .prog = &prog, .g = g ? g : ir_graph_new(s->name), .dt = dt, .mode = mode, .sizes = sizes,
		.d = d};
	bool ok = lower_all(L);
	if (!g)
		ir_graph_free(L->g);
	free(L);
	fe_prog_free(&prog);
	return ok;
}

ir_graph *fe_lower(const fe_spec *s, ir_dtype dt, fe_lower_mode mode)
{
	ir_graph *g = ir_graph_new(s->name);
	ir_diags d;
	ir_diags_init(&d);
	if (!fe_lang_lower(s, g, dt, mode, true, &d))
		IR_DIE("fe_lower of a spec that fe_spec_check_sizes passed failed: %s", d.items[0].msg);
	ir_diags_free(&d);
	return g;
}
