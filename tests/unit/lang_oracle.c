/* lang_oracle.c: the RevNet lowering revc had in C before the model
 * language (frontend/lower.c until the prelude models/lib/revnet.rev
 * replaced it), kept only as the oracle of tests/unit/test_lang.c: for the
 * presets, the prelude's network must give this graph byte for byte.
 * Included by test_lang.c; not built on its own.
 *
 * Its scopes name things (parameters, dumps); the structure is in the unit
 * marking (ir.h's ir_unit_marker): every reversible unit, numbered 0, 1,
 * ... over all stages, with its F, G, y1, y2 and downsample D marked. */

#define BN_EPS 1e-3
#define BN_MOMENTUM 0.99

typedef struct {
	const fe_spec *spec;
	ir_graph *g;
	ir_dtype dt;
	fe_lower_mode mode;
	ir_pos pos;        /* position given to the nodes being made */
	const char *scope; /* scope given to them (interned) */
	ir_node *labels;
} lowerer;

static ir_node *node(lowerer *L, ir_op op, ir_node *a, ir_node *b)
{
	ir_node *in[2] = {a, b};
	ir_node *n = ir_node_new(L->g, op, in, a ? (b ? 2 : 1) : 0);
	n->pos = L->pos;
	n->pos_printed = L->pos.file != NULL;
	n->scope = L->scope;
	return n;
}

static ir_node *node_n(lowerer *L, ir_op op, ir_node *const *in, int nin)
{
	ir_node *n = ir_node_new(L->g, op, in, nin);
	n->pos = L->pos;
	n->pos_printed = L->pos.file != NULL;
	n->scope = L->scope;
	return n;
}

static void set_scope(lowerer *L, const char *scope, ir_pos pos)
{
	L->scope = ir_arena_strdup(L->g->arena, scope);
	L->pos = pos;
	if (pos.file)
		L->pos.file = ir_arena_strdup(L->g->arena, pos.file);
}

/* A param or state tensor named prefix.suffix. */
static ir_node *tensor(lowerer *L, ir_op op, const char *prefix, const char *suffix, int rank,
	const int64_t *dims)
{
	char name[256];
	snprintf(name, sizeof name, "%s.%s", prefix, suffix);
	ir_node *n = node(L, op, NULL, NULL);
	n->name = ir_arena_strdup(L->g->arena, name);
	n->type = ir_type_make(L->dt, rank, dims);
	return n;
}

/* TensorFlow's SAME padding for one dimension (docs/model.md). */
static void same_pad(int64_t size, int64_t k, int64_t s, int64_t *before, int64_t *after)
{
	int64_t out = (size + s - 1) / s;
	int64_t total = (out - 1) * s + k - size;
	if (total < 0)
		total = 0;
	*before = total / 2;
	*after = total - *before;
}

/* conv k x k, cin -> cout channels, SAME over an h x w input. */
static ir_node *conv(lowerer *L, ir_node *x, const char *prefix, const char *name, int64_t cin,
	int64_t cout, int64_t k, int64_t stride, int64_t h, int64_t w)
{
	char suffix[64];
	snprintf(suffix, sizeof suffix, "%s.w", name);
	int64_t wd[4] = {cout, cin, k, k}, pad[4];
	ir_node *wt = tensor(L, IR_OP_PARAM, prefix, suffix, 4, wd);
	same_pad(h, k, stride, &pad[0], &pad[1]);
	same_pad(w, k, stride, &pad[2], &pad[3]);
	ir_node *y = node(L, IR_OP_CONV2D, x, wt);
	ir_node_set_int(L->g, y, IR_ATTR_STRIDE, stride);
	ir_node_set_ints(L->g, y, IR_ATTR_PAD, pad, 4);
	return y;
}

/* Batch norm of x (c channels, count elements per channel) named prefix.name. */
static ir_node *batch_norm(lowerer *L, ir_node *x, const char *prefix, const char *name, int64_t c,
	int64_t count)
{
	char base[256];
	snprintf(base, sizeof base, "%s.%s", prefix, name);
	ir_node *gamma = tensor(L, IR_OP_PARAM, base, "gamma", 1, &c);
	ir_node *beta = tensor(L, IR_OP_PARAM, base, "beta", 1, &c);
	ir_node *mean = tensor(L, IR_OP_STATE, base, "mean", 1, &c);
	ir_node *var = tensor(L, IR_OP_STATE, base, "var", 1, &c);
	if (L->mode == FE_LOWER_EVAL) {
		ir_node *in[5] = {x, mean, var, gamma, beta};
		ir_node *y = node_n(L, IR_OP_BN_INFER, in, 5);
		ir_node_set_float(L->g, y, IR_ATTR_EPS, BN_EPS);
		return y;
	}
	ir_node *stats = node(L, IR_OP_BN_STATS, x, NULL);
	ir_node *in[4] = {x, stats, gamma, beta};
	ir_node *y = node_n(L, IR_OP_BN_NORM, in, 4);
	ir_node_set_float(L->g, y, IR_ATTR_EPS, BN_EPS);
	ir_node *rm = node(L, IR_OP_BN_RUNNING_MEAN, mean, stats);
	ir_node_set_float(L->g, rm, IR_ATTR_MOMENTUM, BN_MOMENTUM);
	ir_node *rv = node(L, IR_OP_BN_RUNNING_VAR, var, stats);
	ir_node_set_float(L->g, rv, IR_ATTR_MOMENTUM, BN_MOMENTUM);
	ir_node_set_int(L->g, rv, IR_ATTR_NCOUNT, count);
	return y;
}

/* A residual function F or G of unit (s, u): [BN -> ReLU] -> conv ... as in
 * docs/model.md, basic or bottleneck.  x has cin channels at h x w; the result
 * has cout channels at (h, w) / stride. */
static ir_node *residual(lowerer *L, ir_node *x, const char *prefix, bool preact, int64_t cin,
	int64_t cout, int64_t stride, int64_t h, int64_t w)
{
	const fe_spec *s = L->spec;
	int64_t n = s->batch;
	bool bottleneck = s->block == FE_BLOCK_BOTTLENECK;
	int nconv = bottleneck ? 3 : 2;
	int64_t inner = bottleneck ? cout / 4 : cout;
	int64_t c = cin;
	char name[16];
	for (int k = 0; k < nconv; k++) {
		if (k > 0 || preact) {
			snprintf(name, sizeof name, "bn%d", k);
			x = node(L, IR_OP_RELU, batch_norm(L, x, prefix, name, c, n * h * w), NULL);
		}
		int64_t out = k == nconv - 1 ? cout : inner;
		int64_t ks = bottleneck && k != 1 ? 1 : 3;
		int64_t st = k == 0 ? stride : 1;
		snprintf(name, sizeof name, "conv%d", k);
		x = conv(L, x, prefix, name, c, out, ks, st, h, w);
		h = (h + st - 1) / st;
		w = (w + st - 1) / st;
		c = out;
	}
	return x;
}

/* The downsample D of unit 0 of a stage: average pool (window = stride,
 * VALID), then zero channels up to cout, half before and the rest after. */
static ir_node *downsample(lowerer *L, ir_node *x, int64_t cin, int64_t cout, int64_t stride)
{
	if (stride > 1) {
		x = node(L, IR_OP_AVGPOOL, x, NULL);
		ir_node_set_int(L->g, x, IR_ATTR_WINDOW, stride);
	}
	if (cout > cin) {
		x = node(L, IR_OP_CHANNEL_PAD, x, NULL);
		ir_node_set_int(L->g, x, IR_ATTR_LO, (cout - cin) / 2);
		ir_node_set_int(L->g, x, IR_ATTR_HI, cout - cin - (cout - cin) / 2);
	}
	return x;
}

static ir_node *split_half(lowerer *L, ir_node *x, int part)
{
	ir_node *y = node(L, IR_OP_SPLIT, x, NULL);
	ir_node_set_int(L->g, y, IR_ATTR_AXIS, 1);
	ir_node_set_int(L->g, y, IR_ATTR_PART, part);
	ir_node_set_int(L->g, y, IR_ATTR_PARTS, 2);
	return y;
}

static void lower_network(lowerer *L)
{
	const fe_spec *s = L->spec;
	ir_graph *g = L->g;
	int64_t n = s->batch, c = s->input[0], h = s->input[1], w = s->input[2];

	set_scope(L, "input", s->pos[FE_KEY_INPUT]);
	int64_t xd[4] = {n, c, h, w};
	ir_node *x = node(L, IR_OP_INPUT, NULL, NULL);
	ir_node_set_str(g, x, IR_ATTR_NAME, "x");
	x->type = ir_type_make(L->dt, 4, xd);
	L->labels = node(L, IR_OP_INPUT, NULL, NULL);
	ir_node_set_str(g, L->labels, IR_ATTR_NAME, "labels");
	L->labels->type = ir_type_make(IR_I32, 1, &n);

	/* Init block: conv -> BN -> ReLU [-> max pool], split in halves. */
	set_scope(L, "init", s->pos[FE_KEY_INIT_FILTERS]);
	int64_t f0 = s->init_filters;
	ir_node *y = conv(L, x, "init", "conv", c, f0, s->init_kernel, s->init_stride, h, w);
	h = (h + s->init_stride - 1) / s->init_stride;
	w = (w + s->init_stride - 1) / s->init_stride;
	y = node(L, IR_OP_RELU, batch_norm(L, y, "init", "bn", f0, n * h * w), NULL);
	if (s->init_max_pool) {
		int64_t pad[4];
		same_pad(h, 3, 2, &pad[0], &pad[1]);
		same_pad(w, 3, 2, &pad[2], &pad[3]);
		y = node(L, IR_OP_MAXPOOL, y, NULL);
		ir_node_set_int(g, y, IR_ATTR_WINDOW, 3);
		ir_node_set_int(g, y, IR_ATTR_STRIDE, 2);
		ir_node_set_ints(g, y, IR_ATTR_PAD, pad, 4);
	}
	ir_node *x1 = split_half(L, y, 0), *x2 = split_half(L, y, 1);

	/* Stages of reversible units: y1 = D(x1) + F(x2), y2 = D(x2) + G(y1),
	 * numbered 0, 1, ... across the stages and marked part by part. */
	int k = 0;
	ir_unit_marker mark;
	for (int st = 0; st < s->nstages; st++) {
		int64_t half_in, hs, ws;
		fe_spec_stage_input(s, st, &hs, &ws, &half_in);
		int64_t half = s->filters[st] / 2;
		for (int64_t u = 0; u < s->units[st]; u++) {
			bool first = u == 0;
			int64_t stride = first ? s->strides[st] : 1, cin = first ? half_in : half;
			int64_t h_in = first ? hs : hs / s->strides[st], w_in = first ? ws : ws / s->strides[st];
			char unit[64], part[80];
			snprintf(unit, sizeof unit, "s%d.u%lld", st, (long long)u);
			snprintf(part, sizeof part, "%s.f", unit);
			set_scope(L, part, s->units_pos[st]);
			ir_unit_begin(&mark, g, k++);
			bool preact = !(st == 0 && u == 0);
			ir_node *f = residual(L, x2, part, preact, cin, half, stride, h_in, w_in);
			ir_unit_mark(&mark, IR_PART_F);
			set_scope(L, unit, s->units_pos[st]);
			ir_node *d1 = downsample(L, x1, cin, half, stride);
			if (d1 != x1)
				ir_unit_mark(&mark, IR_PART_D);
			ir_node *y1 = node(L, IR_OP_ADD, d1, f);
			ir_unit_mark(&mark, IR_PART_Y1);
			snprintf(part, sizeof part, "%s.g", unit);
			set_scope(L, part, s->units_pos[st]);
			ir_node *gy = residual(L, y1, part, true, half, half, 1, h_in / stride, w_in / stride);
			ir_unit_mark(&mark, IR_PART_G);
			set_scope(L, unit, s->units_pos[st]);
			ir_node *d2 = downsample(L, x2, cin, half, stride);
			if (d2 != x2)
				ir_unit_mark(&mark, IR_PART_D);
			ir_node *y2 = node(L, IR_OP_ADD, d2, gy);
			ir_unit_mark(&mark, IR_PART_Y2);
			x1 = y1;
			x2 = y2;
		}
	}

	/* Final block: concat -> BN -> ReLU -> global average pool -> dense. */
	set_scope(L, "final", s->pos[FE_KEY_CLASSES]);
	int64_t hf, wf, half;
	fe_spec_stage_input(s, s->nstages, &hf, &wf, &half);
	ir_node *cat = node(L, IR_OP_CONCAT, x1, x2);
	ir_node_set_int(g, cat, IR_ATTR_AXIS, 1);
	y = node(L, IR_OP_RELU, batch_norm(L, cat, "final", "bn", 2 * half, n * hf * wf), NULL);
	y = node(L, IR_OP_GLOBAL_AVGPOOL, y, NULL);
	int64_t dw[2] = {s->classes, 2 * half};
	ir_node *wt = tensor(L, IR_OP_PARAM, "final.dense", "w", 2, dw);
	ir_node *b = tensor(L, IR_OP_PARAM, "final.dense", "b", 1, &s->classes);
	ir_node *mm = node(L, IR_OP_MATMUL, y, wt);
	ir_node_set_int(g, mm, IR_ATTR_TRANS_B, 1);
	ir_node *logits = node(L, IR_OP_BIAS_ADD, mm, b);

	ir_node *loss = node(L, IR_OP_SOFTMAX_XENT, logits, L->labels);
	ir_node *out = node(L, IR_OP_OUTPUT, loss, NULL);
	ir_node_set_str(g, out, IR_ATTR_NAME, "loss");
	out = node(L, IR_OP_OUTPUT, logits, NULL);
	ir_node_set_str(g, out, IR_ATTR_NAME, "logits");
}

static ir_graph *oracle_lower(const fe_spec *s, ir_dtype dt, fe_lower_mode mode)
{
	lowerer L = {.spec = s, .dt = dt, .mode = mode};
	L.g = ir_graph_new(s->name);
	lower_network(&L);
	return L.g;
}
