/* lang_lower.c: the model language's network becomes forward IR: the walk
 * over its statements (blocks, stages, couplings) and the network itself.
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
 * user's file.  The expressions, nodes and layers it uses: lang_lower.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang_lower.h"

bool fe_lw_fail(lw *L, ir_pos pos, const char *fmt, ...)
{
	if (L->failed)
		return false;
	/* The user cannot see the prelude: point at what they wrote that led
	 * there (the stage's or section's key). */
	if (fe_is_prelude(pos.file))
		pos = L->anchor.file ? L->anchor
			: L->s->vpos[L->s->network == FE_NET_REVVIT ? FE_KEY_NETWORK : FE_KEY_BLOCK];
	va_list ap;
	va_start(ap, fmt);
	ir_diag_addv(L->d, pos, fmt, ap);
	va_end(ap);
	L->failed = true;
	return false;
}

/* ---- statements ----------------------------------------------------------- */

static bool run_body(lw *L, frame *f, const fe_stmt *st);

static bool push_var(lw *L, frame *f, const fe_stmt *st, val v)
{
	fe_key k;
	for (int i = 0; i < f->count; i++)
		if (f->n[i] == st->n && memcmp(f->name[i], st->word, st->n) == 0)
			return fe_lw_fail(L, st->pos, "'%.*s' is already a variable here", (int)st->n, st->word);
	if (fe_key_lookup(st->word, st->n, &k))
		return fe_lw_fail(L, st->pos, "'%.*s' is a key; name the variable otherwise", (int)st->n, st->word);
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
		fe_lw_fail(L, c->pos, "undefined block '%.*s'", (int)c->n, c->name);
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
			return fe_lw_fail(L, c->pos, "block '%.*s' calls itself: blocks cannot recurse", (int)d->n, d->name);
	if (L->depth == FE_MAX_DEPTH)
		return fe_lw_fail(L, c->pos, "blocks nest deeper than %d", FE_MAX_DEPTH);
	/* A user's block called from the prelude: blame its def. */
	bool from_prelude = fe_is_prelude(c->pos.file) && !d->prelude;
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
				return fe_lw_fail(L, a->pos, "block '%.*s' has no parameter '%.*s'", (int)d->n, d->name,
					(int)a->keyn, a->key);
		} else {
			while (next < d->nparams && set[next])
				next++;
			k = next;
		}
		if (k >= d->nparams)
			return fe_lw_fail(L, from_prelude ? d->pos : a->pos, "block '%.*s' takes %d argument%s, found %d%s",
				(int)d->n, d->name, d->nparams, d->nparams == 1 ? "" : "s", c->nargs, hint);
		if (set[k])
			return fe_lw_fail(L, a->pos, "parameter '%.*s' is given twice", (int)d->paramn[k], d->param[k]);
		set[k] = true;
		if (!fe_lw_eval(L, f, a->e, &callee.v[k]))
			return false;
	}
	for (int j = 0; j < d->nparams; j++) {
		if (!set[j])
			return fe_lw_fail(L, at, "block '%.*s' takes %d argument%s, found %d%s", (int)d->n, d->name,
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
	else if (t->rank == 3)
		snprintf(buf, cap, "[%lld,%lld,%lld]", (long long)t->dim[0], (long long)t->dim[1], (long long)t->dim[2]);
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
	fe_lw_place(L, L->prefix, L->pos);
	L->part = true;
	L->nnames = 0;
	memset(L->count, 0, sizeof L->count);
	L->nstreams = 1;
	L->x[0] = *x;
	if (!run_call(L, f, c))
		return false;
	if (L->nstreams != 1)
		return fe_lw_fail(L, c->pos, "%s=%.*s(...) must end in one stream", part, (int)c->n, c->name);
	*x = L->x[0];
	fe_lw_place(L, unit, L->pos);
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
		return fe_lw_fail(L, at, "the downsample cannot make %s %s into %s (it pools by an integer stride and "
			"adds channels)", what, a, b);
	int64_t stride = x->dim[2] / to->dim[2];
	if (stride > 1 && !fe_lw_avgpool(L, x, stride, to->keys[2], at))
		return false;
	if (to->dim[1] > x->dim[1]) {
		int64_t more = to->dim[1] - x->dim[1];
		ir_node *y = fe_lw_node(L, IR_OP_CHANNEL_PAD, x->n, NULL);
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
	if (!fe_is_prelude(a->pos.file))
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
		return fe_lw_fail(L, st->pos, "a coupling belongs in a stage (stage u in N { coupling ... })");
	if (++L->couplings > 1)
		return fe_lw_fail(L, st->pos, "a unit of a stage holds one coupling");
	if (++L->units > FE_MAX_UNITS)
		return fe_lw_fail(L, st->pos, "the network has more than %d units", FE_MAX_UNITS);
	if (L->nstreams != 2)
		return fe_lw_fail(L, st->pos, "a coupling takes two streams, but there is one (split makes two)");
	bool down = false;
	ir_pos down_pos = st->pos;
	for (int i = 0; i < st->nargs; i++) {
		const fe_arg *a = &st->args[i];
		bool fg = a->key && a->keyn == 1 && (a->key[0] == 'f' || a->key[0] == 'g');
		if (fg && !a->call)
			return fe_lw_fail(L, a->pos, "%c= takes a block call: %c=NAME(args)", a->key[0], a->key[0]);
		if (!fg && !(!a->key && a->e->kind == FE_E_NAME && a->e->n == 4 && memcmp(a->e->name, "down", 4) == 0))
			return fe_lw_fail(L, a->pos, "a coupling takes f=NAME(args), g=NAME(args) and down");
		for (int j = 0; j < i; j++)
			if (st->args[j].keyn == a->keyn && (!a->key || memcmp(st->args[j].key, a->key, a->keyn) == 0))
				return fe_lw_fail(L, a->pos, "this argument of the coupling is given twice");
		if (!a->key) {
			down = true;
			down_pos = a->pos;
		}
	}
	const fe_arg *fa = find_arg(st, "f"), *ga = find_arg(st, "g");
	if (!fa || !ga)
		return fe_lw_fail(L, st->pos, "a coupling needs f=NAME(args) and g=NAME(args)");
	for (int k = 0; down && k < 2; k++)
		if (L->x[k].rank != 4) {
			char a[96];
			shape_str(&L->x[k], a, sizeof a);
			return fe_lw_fail(L, down_pos, "a downsampling coupling needs image (NCHW) streams, but x%d is %s%s",
				k + 1, a, L->x[k].rank == 3 ? " (tokens): leave out down" : "");
		}
	ir_pos fpos = part_pos(L, fa), gpos = part_pos(L, ga);
	char unit[64];
	snprintf(unit, sizeof unit, "s%d.u%lld", L->stage - 1, (long long)L->unit);
	/* A unit begins here: numbered 0, 1, ... over the network, each part
	 * marked as it is made (F, then D of x1, y1, G, D of x2, y2). */
	tensor x1 = L->x[0], x2 = L->x[1], fy = x2, gy;
	fe_lw_place_stmt(L, st->pos);
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
		return fe_lw_fail(L, fpos, "F of unit %s gives %s, but x1 is %s: a coupling's F must keep x1's shape (or "
			"the coupling says down)", unit, a, b);
	}
	ir_node *y1 = fe_lw_node(L, IR_OP_ADD, x1.n, fy.n);
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
		return fe_lw_fail(L, gpos, "G of unit %s gives %s, but y1 is %s: a coupling's G must keep its input's shape",
			unit, a, b);
	}
	if (down) {
		if (!downsample(L, &x2, &gy, gpos, "x2"))
			return false;
		ir_unit_mark(&mark, IR_PART_D);
	} else if (!same_shape(&x2, &gy)) {
		shape_str(&gy, a, sizeof a);
		shape_str(&x2, b, sizeof b);
		return fe_lw_fail(L, gpos, "G of unit %s gives %s, but x2 is %s: a coupling's G must keep x2's shape (or "
			"the coupling says down)", unit, a, b);
	}
	ir_node *y2 = fe_lw_node(L, IR_OP_ADD, x2.n, gy.n);
	ir_unit_mark(&mark, IR_PART_Y2);
	L->x[0] = y1t;
	L->x[1] = gy;
	L->x[1].n = y2;
	L->nstreams = 2;
	return true;
}

static bool count_of(lw *L, frame *f, const fe_stmt *st, val *n)
{
	if (!fe_lw_eval(L, f, st->cond, n))
		return false;
	if (n->v < 0 || n->v > FE_MAX_UNITS)
		return fe_lw_fail(L, st->cond->pos, "a %.*s repeats 0 to %d times, not %lld", st->kind == FE_S_FOR ? 3 : 5,
			st->kind == FE_S_FOR ? "for" : "stage", FE_MAX_UNITS, (long long)n->v);
	return true;
}

static bool run_stmt(lw *L, frame *f, const fe_stmt *st)
{
	if (++L->steps > MAX_STEPS)
		return fe_lw_fail(L, st->pos, "the network runs more than %d statements", MAX_STEPS);
	switch (st->kind) {
	case FE_S_LAYER:
		return fe_lw_run_layer(L, f, st);
	case FE_S_CALL:
		return run_call(L, f, &st->call);
	case FE_S_IF: {
		val c;
		if (!fe_lw_eval(L, f, st->cond, &c))
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
			return fe_lw_fail(L, st->pos, "stages do not nest");
		ir_pos anchor = L->anchor;
		if (fe_is_prelude(st->pos.file) && n.origin.file)
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
				return fe_lw_fail(L, st->as_pos, "unknown key '%.*s'", (int)st->asn, st->as);
			L->anchor = L->s->pos[k];
		} else {
			L->anchor = st->pos;
		}
		fe_lw_place(L, L->prefix, L->pos);
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
			return fe_lw_fail(L, s->vpos[FE_KEY_BLOCK], "unknown block kind '%s' (expected basic or bottleneck)",
				s->block_name);
		return fe_lw_fail(L, s->vpos[FE_KEY_BLOCK], "unknown block kind '%s' (expected basic, bottleneck or a "
			"block this file defines)", s->block_name);
	}
	int64_t n = s->batch;
	fe_lw_place(L, "input", s->pos[FE_KEY_INPUT]);
	tensor *x = &L->x[0];
	*x = (tensor){NULL, 4, {n, s->input[0], s->input[1], s->input[2]},
		{K(BATCH), K(INPUT), K(INPUT), K(INPUT)}};
	if (!fe_lw_fits(L, s->vpos[FE_KEY_INPUT], K(INPUT), "the input tensor", L->dt, 4, x->dim) ||
		!fe_lw_fits(L, s->vpos[FE_KEY_BATCH], 0, "the labels", IR_I32, 1, &n))
		return false;
	x->n = fe_lw_node(L, IR_OP_INPUT, NULL, NULL);
	ir_node_set_str(g, x->n, IR_ATTR_NAME, "x");
	x->n->type = ir_type_make(L->dt, 4, x->dim);
	L->labels = fe_lw_node(L, IR_OP_INPUT, NULL, NULL);
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
		return fe_lw_fail(L, net->pos, "the network ends in two streams; merge them and end in the logits");
	if (x->rank != 2 || x->dim[1] != s->classes)
		return fe_lw_fail(L, net->pos, "the network ends in %s; it must end in the logits [N,classes] = [%lld,%lld]",
			sh, (long long)n, (long long)s->classes);
	ir_node *loss = fe_lw_node(L, IR_OP_SOFTMAX_XENT, x->n, L->labels);
	ir_node *out = fe_lw_node(L, IR_OP_OUTPUT, loss, NULL);
	ir_node_set_str(g, out, IR_ATTR_NAME, "loss");
	out = fe_lw_node(L, IR_OP_OUTPUT, x->n, NULL);
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
