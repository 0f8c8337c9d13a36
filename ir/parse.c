/* parse.c: the IR text format, read (grammar: docs/ir.md).
 *
 * A recursive-descent parser over lex.c's tokens.  It stops at the first
 * error with exactly one diagnostic.  References may point forward (so that
 * cyclic graphs can be written down for the verifier to reject); they are
 * resolved once the whole graph is read.  The parser checks syntax, names and
 * attribute value types; whether the graph makes sense is ir_verify's job. */
#include <stdlib.h>
#include <string.h>

#include "lex.h"

/* A reference as written: %N or $name, resolved after the graph is read. */
typedef struct {
	ir_tok tok;
	ir_node **slot; /* where the resolved node goes */
} ref;

typedef struct {
	ir_lexer lx;
	ir_tok tok; /* current token */
	ir_graph *g;
	ir_diags *d;
	ref *refs;
	int nrefs, caprefs;
	ir_tok *defs; /* defining token of each node, by list index */
	int capdefs;
	bool failed;
} parser;

static void next(parser *p)
{
	p->tok = ir_lex_next(&p->lx);
	if (p->tok.kind == TK_ERROR)
		p->failed = true;
}

static bool error_at(parser *p, ir_pos pos, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool error_at(parser *p, ir_pos pos, const char *fmt, ...)
{
	if (p->failed)
		return false;
	va_list ap;
	va_start(ap, fmt);
	ir_diag_addv(p->d, pos, fmt, ap);
	va_end(ap);
	p->failed = true;
	return false;
}

static bool expected(parser *p, const char *what)
{
	char buf[64];
	return error_at(p, p->tok.pos, "expected %s, found %s", what,
		ir_tok_describe(&p->tok, buf, sizeof buf));
}

static bool accept(parser *p, ir_tok_kind k)
{
	if (p->failed || p->tok.kind != k)
		return false;
	next(p);
	return true;
}

static bool expect(parser *p, ir_tok_kind k, const char *what)
{
	if (p->failed)
		return false;
	if (p->tok.kind != k)
		return expected(p, what);
	next(p);
	return true;
}

static bool is_word(const ir_tok *t, const char *w)
{
	return t->kind == TK_IDENT && t->len == strlen(w) && memcmp(t->text, w, t->len) == 0;
}

static bool accept_word(parser *p, const char *w)
{
	if (p->failed || !is_word(&p->tok, w))
		return false;
	next(p);
	return true;
}

static bool parse_int(parser *p, int64_t *v, int64_t lo, int64_t hi, const char *what)
{
	if (p->failed)
		return false;
	if (p->tok.kind != TK_INT)
		return expected(p, what);
	if (p->tok.ival < lo || p->tok.ival > hi)
		return error_at(p, p->tok.pos, "%s must be between %lld and %lld", what, (long long)lo,
			(long long)hi);
	*v = p->tok.ival;
	next(p);
	return true;
}

static void add_ref(parser *p, ir_node **slot)
{
	if (p->nrefs == p->caprefs) {
		p->caprefs = p->caprefs ? 2 * p->caprefs : 256;
		p->refs = realloc(p->refs, (size_t)p->caprefs * sizeof *p->refs);
		if (!p->refs)
			IR_DIE("out of memory");
	}
	p->refs[p->nrefs++] = (ref){p->tok, slot};
}

/* ref-list := ref {',' ref}, written into a fresh array of slots. */
static ir_node **parse_refs(parser *p, int *count, ir_tok_kind close)
{
	int n = 0, cap = 4;
	ir_tok *toks = malloc((size_t)cap * sizeof *toks);
	if (!toks)
		IR_DIE("out of memory");
	while (!p->failed && p->tok.kind != close) {
		if (n && !expect(p, TK_COMMA, "',' or ')'"))
			break;
		if (p->tok.kind != TK_VALUE && p->tok.kind != TK_PARAM) {
			expected(p, "a value (%N or $name)");
			break;
		}
		if (n == 256) {
			error_at(p, p->tok.pos, "more than 256 references in one list");
			break;
		}
		if (n == cap) {
			cap *= 2;
			toks = realloc(toks, (size_t)cap * sizeof *toks);
			if (!toks)
				IR_DIE("out of memory");
		}
		toks[n++] = p->tok;
		next(p);
	}
	ir_node **slots = ir_arena_array(p->g->arena, (size_t)n, sizeof *slots);
	ir_tok saved = p->tok;
	for (int i = 0; i < n; i++) {
		p->tok = toks[i];
		add_ref(p, &slots[i]);
	}
	p->tok = saved;
	free(toks);
	*count = n;
	return slots;
}

static bool parse_float_value(parser *p, double *v)
{
	bool neg = accept(p, TK_MINUS);
	if (p->tok.kind == TK_INT || p->tok.kind == TK_FLOAT) {
		if (neg)
			return expected(p, "'inf' after '-'");
		*v = p->tok.fval;
	} else if (is_word(&p->tok, "inf")) {
		*v = neg ? -__builtin_inf() : __builtin_inf();
	} else if (is_word(&p->tok, "nan") && !neg) {
		*v = __builtin_nan("");
	} else {
		return expected(p, "a number");
	}
	next(p);
	return true;
}

/* attr := IDENT '=' value, the value's form fixed by the attribute. */
static bool parse_attr(parser *p, ir_node *n)
{
	if (p->tok.kind != TK_IDENT)
		return expected(p, "an attribute name");
	ir_attr_kind k;
	ir_tok name = p->tok;
	if (!ir_attr_lookup(name.text, name.len, &k))
		return error_at(p, name.pos, "unknown attribute '%.*s'", (int)name.len, name.text);
	if (ir_node_attr(n, k))
		return error_at(p, name.pos, "attribute '%s' given twice", ir_attr_name(k));
	next(p);
	if (!expect(p, TK_EQUALS, "'='"))
		return false;
	switch (ir_attr_vtype_of(k)) {
	case IR_AV_INT:
		if (p->tok.kind != TK_INT)
			return expected(p, "an integer");
		ir_node_set_int(p->g, n, k, p->tok.ival);
		next(p);
		return true;
	case IR_AV_FLOAT: {
		double v = 0;
		if (!parse_float_value(p, &v))
			return false;
		ir_node_set_float(p->g, n, k, v);
		return true;
	}
	case IR_AV_STR:
		if (p->tok.kind != TK_STRING)
			return expected(p, "a string");
		ir_node_set_str(p->g, n, k, p->tok.sval);
		next(p);
		return true;
	case IR_AV_INTS: {
		int64_t v[IR_MAX_INTS] = {0};
		int count = 0;
		if (!expect(p, TK_LBRACKET, "'['"))
			return false;
		while (!p->failed && p->tok.kind != TK_RBRACKET) {
			if (count && !expect(p, TK_COMMA, "',' or ']'"))
				return false;
			if (count == IR_MAX_INTS)
				return error_at(p, p->tok.pos, "more than %d integers in a list", IR_MAX_INTS);
			if (p->tok.kind != TK_INT)
				return expected(p, "an integer");
			v[count++] = p->tok.ival;
			next(p);
		}
		if (!expect(p, TK_RBRACKET, "']'"))
			return false;
		ir_node_set_ints(p->g, n, k, v, count);
		return true;
	}
	}
	return false;
}

/* type := DTYPE '[' [INT {',' INT}] ']' */
static bool parse_type(parser *p, ir_type *t)
{
	ir_tok dt = p->tok;
	if (dt.kind != TK_IDENT || !ir_dtype_parse(dt.text, dt.len, &t->dtype))
		return expected(p, "a type (f32, f64 or i32)");
	next(p);
	if (!expect(p, TK_LBRACKET, "'[' after the dtype"))
		return false;
	t->rank = 0;
	while (!p->failed && p->tok.kind != TK_RBRACKET) {
		if (t->rank && !expect(p, TK_COMMA, "',' or ']'"))
			return false;
		if (t->rank == IR_MAX_RANK)
			return error_at(p, p->tok.pos, "rank is limited to %d", IR_MAX_RANK);
		if (!parse_int(p, &t->dim[t->rank], 0, IR_MAX_BYTES, "a dimension"))
			return false;
		t->rank++;
	}
	if (!expect(p, TK_RBRACKET, "']'"))
		return false;
	if (!ir_type_size_ok(t))
		return error_at(p, dt.pos, "tensor is larger than 2^40 bytes");
	return true;
}

/* The annotations after the type, each optional, in this order:
 * after(...) group(N) mem(OFFSET, SIZE) ws(OFFSET, SIZE) live(B, E) unit(K, PART)
 * scope("s0.u1.g") loc("file":L:C) */
static bool parse_annotations(parser *p, ir_node *n)
{
	ir_pos kw = p->tok.pos;
	if (accept_word(p, "after")) {
		if (!expect(p, TK_LPAREN, "'('"))
			return false;
		int count;
		ir_node **slots = parse_refs(p, &count, TK_RPAREN);
		if (!expect(p, TK_RPAREN, "')'"))
			return false;
		if (count == 0)
			return error_at(p, kw, "after() needs at least one value");
		n->after = slots;
		n->nafter = n->cap_after = count;
	}
	int64_t v;
	if (accept_word(p, "group")) {
		if (!expect(p, TK_LPAREN, "'('") || !parse_int(p, &v, 0, IR_MAX_NODES, "a group number") ||
		    !expect(p, TK_RPAREN, "')'"))
			return false;
		n->group = (int)v;
	}
	kw = p->tok.pos;
	if (accept_word(p, "mem")) {
		int64_t size;
		if (!expect(p, TK_LPAREN, "'('") || !parse_int(p, &n->offset, 0, IR_MAX_BYTES, "an offset") ||
		    !expect(p, TK_COMMA, "','") || !parse_int(p, &size, 0, IR_MAX_BYTES, "a size") ||
		    !expect(p, TK_RPAREN, "')'"))
			return false;
		if (size != ir_type_bytes(&n->type))
			return error_at(p, kw, "mem size %lld does not match the type's %lld bytes",
				(long long)size, (long long)ir_type_bytes(&n->type));
	}
	if (accept_word(p, "ws")) {
		if (!expect(p, TK_LPAREN, "'('") ||
		    !parse_int(p, &n->ws_offset, 0, IR_MAX_BYTES, "a workspace offset") ||
		    !expect(p, TK_COMMA, "','") ||
		    !parse_int(p, &n->ws_bytes, 1, IR_MAX_BYTES, "a workspace size") ||
		    !expect(p, TK_RPAREN, "')'"))
			return false;
	}
	if (accept_word(p, "live")) {
		int64_t b, e;
		if (!expect(p, TK_LPAREN, "'('") || !parse_int(p, &b, 0, IR_MAX_NODES, "a schedule step") ||
		    !expect(p, TK_COMMA, "','") || !parse_int(p, &e, b, IR_MAX_NODES, "a later schedule step") ||
		    !expect(p, TK_RPAREN, "')'"))
			return false;
		n->live_begin = (int)b;
		n->live_end = (int)e;
	}
	if (accept_word(p, "unit")) {
		int64_t k;
		ir_unit_part part;
		if (!expect(p, TK_LPAREN, "'('") || !parse_int(p, &k, 0, IR_MAX_NODES, "a unit number") ||
		    !expect(p, TK_COMMA, "','"))
			return false;
		if (p->tok.kind != TK_IDENT || !ir_unit_part_lookup(p->tok.text, p->tok.len, &part))
			return expected(p, "a part of a unit (f, g, y1, y2 or d)");
		next(p);
		ir_node_set_unit(n, (int)k, part);
		if (p->tok.kind == TK_COMMA) {
			next(p);
			if (p->tok.kind != TK_IDENT || !ir_unit_keep_lookup(p->tok.text, p->tok.len, &n->keep))
				return expected(p, "a unit's decision (store, invert, recompute or rerun)");
			next(p);
			int64_t from = k;
			if (n->keep == IR_KEEP_RERUN &&
			    (!expect(p, TK_COMMA, "','") || !parse_int(p, &from, 0, k, "the segment's first unit")))
				return false;
			n->keep_from = (int)from;
		}
		if (!expect(p, TK_RPAREN, "')'"))
			return false;
	}
	if (accept_word(p, "keep")) { /* a segment's decision, outside the units */
		if (!expect(p, TK_LPAREN, "'('"))
			return false;
		if (p->tok.kind != TK_IDENT || !ir_unit_keep_lookup(p->tok.text, p->tok.len, &n->keep))
			return expected(p, "a segment's decision (store or recompute)");
		next(p);
		if (!expect(p, TK_RPAREN, "')'"))
			return false;
	}
	if (accept_word(p, "scope")) {
		if (!expect(p, TK_LPAREN, "'('"))
			return false;
		if (p->tok.kind != TK_STRING)
			return expected(p, "a scope string");
		n->scope = p->tok.sval;
		next(p);
		if (!expect(p, TK_RPAREN, "')'"))
			return false;
	}
	if (accept_word(p, "loc")) {
		int64_t line, col;
		if (!expect(p, TK_LPAREN, "'('"))
			return false;
		if (p->tok.kind != TK_STRING)
			return expected(p, "a file name string");
		const char *file = p->tok.sval;
		next(p);
		if (!expect(p, TK_COLON, "':'") || !parse_int(p, &line, 1, 1 << 30, "a line") ||
		    !expect(p, TK_COLON, "':'") || !parse_int(p, &col, 1, 1 << 30, "a column") ||
		    !expect(p, TK_RPAREN, "')'"))
			return false;
		n->pos = (ir_pos){file, (int)line, (int)col};
		n->pos_printed = true;
	}
	return !p->failed;
}

/* node := result '=' [role] OP ['(' refs ')'] ['{' attrs '}'] ':' type annotations */
static bool parse_node(parser *p)
{
	ir_tok result = p->tok;
	next(p);
	if (!expect(p, TK_EQUALS, "'='"))
		return false;
	ir_role role = IR_ROLE_FWD;
	if (p->tok.kind == TK_IDENT && ir_role_lookup(p->tok.text, p->tok.len, &role))
		next(p);
	ir_op op;
	if (p->tok.kind != TK_IDENT)
		return expected(p, "an op name");
	if (!ir_op_lookup(p->tok.text, p->tok.len, &op))
		return error_at(p, p->tok.pos, "unknown op '%.*s'", (int)(p->tok.len > 40 ? 40 : p->tok.len),
			p->tok.text);
	bool is_param = ir_op_is_persistent(op);
	if (is_param != (result.kind == TK_PARAM))
		return error_at(p, result.pos, is_param ? "%s defines a $name, not a %%value"
			: "%s defines a %%value, not a $name", ir_op_name(op));
	if (p->g->n >= IR_MAX_NODES)
		return error_at(p, result.pos, "more than %d nodes", IR_MAX_NODES);
	next(p);

	ir_node *n = ir_node_new(p->g, op, NULL, 0);
	n->role = role;
	n->pos = result.pos;
	if (result.kind == TK_PARAM)
		n->name = ir_arena_strndup(p->g->arena, result.text, result.len);
	else
		n->label = (int)result.ival;
	if (p->g->n > p->capdefs) {
		p->capdefs = p->capdefs ? 2 * p->capdefs : 256;
		p->defs = realloc(p->defs, (size_t)p->capdefs * sizeof *p->defs);
		if (!p->defs)
			IR_DIE("out of memory");
	}
	p->defs[p->g->n - 1] = result;

	if (accept(p, TK_LPAREN)) {
		n->in = parse_refs(p, &n->nin, TK_RPAREN);
		if (!expect(p, TK_RPAREN, "')'"))
			return false;
	}
	if (accept(p, TK_LBRACE)) {
		do {
			if (!parse_attr(p, n))
				return false;
		} while (accept(p, TK_COMMA));
		if (!expect(p, TK_RBRACE, "',' or '}'"))
			return false;
	}
	if (!expect(p, TK_COLON, "':' and a type"))
		return false;
	if (!parse_type(p, &n->type))
		return false;
	return parse_annotations(p, n);
}

/* Definition lookup tables: %N and $name, sorted for binary search. */
typedef struct {
	int64_t num;
	const char *name;
	size_t len;
	int index; /* node list index */
} def;

/* Orders by key only: %N before $name, numbers numerically, names bytewise. */
static int key_cmp(const def *x, const def *y)
{
	if (!x->name != !y->name)
		return x->name ? 1 : -1;
	if (!x->name)
		return x->num < y->num ? -1 : x->num > y->num;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->name, y->name, n);
	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Orders by key, then by definition order. */
static int def_cmp(const void *a, const void *b)
{
	const def *x = a, *y = b;
	int c = key_cmp(x, y);
	return c ? c : x->index - y->index;
}

static def tok_def(const ir_tok *t, int index)
{
	def d = {.index = index};
	if (t->kind == TK_VALUE)
		d.num = t->ival;
	else {
		d.name = t->text;
		d.len = t->len;
	}
	return d;
}

/* Resolves every reference; reports the first duplicate definition or
 * undefined reference in source order. */
static bool resolve(parser *p)
{
	int n = p->g->n;
	def *defs = malloc((size_t)(n ? n : 1) * sizeof *defs);
	if (!defs)
		IR_DIE("out of memory");
	for (int i = 0; i < n; i++)
		defs[i] = tok_def(&p->defs[i], i);
	qsort(defs, (size_t)n, sizeof *defs, def_cmp);
	int dup = -1;
	for (int i = 1; i < n; i++)
		if (key_cmp(&defs[i - 1], &defs[i]) == 0 && (dup < 0 || defs[i].index < dup))
			dup = defs[i].index;
	const ref *undef = NULL;
	for (int i = 0; i < p->nrefs; i++) {
		def key = tok_def(&p->refs[i].tok, 0);
		int lo = 0, hi = n;
		while (lo < hi) {
			int mid = (lo + hi) / 2;
			if (key_cmp(&defs[mid], &key) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < n && key_cmp(&defs[lo], &key) == 0) {
			*p->refs[i].slot = p->g->nodes[defs[lo].index];
		} else if (!undef) {
			undef = &p->refs[i];
		}
	}
	free(defs);
	/* Report whichever problem comes first in the file. */
	ir_pos dpos = dup >= 0 ? p->defs[dup].pos : (ir_pos){0};
	ir_pos upos = undef ? undef->tok.pos : (ir_pos){0};
	bool dup_first = dup >= 0 && (!undef || dpos.line < upos.line ||
		(dpos.line == upos.line && dpos.col < upos.col));
	char buf[64];
	if (dup_first)
		return error_at(p, dpos, "value %s is defined twice",
			ir_tok_describe(&p->defs[dup], buf, sizeof buf));
	if (undef)
		return error_at(p, upos, "undefined value %s", ir_tok_describe(&undef->tok, buf, sizeof buf));
	return true;
}

/* graph := 'graph' '@'NAME ['passes' '(' IDENT {',' IDENT} ')'] '{' {node} '}' EOF */
static bool parse_graph(parser *p)
{
	if (!accept_word(p, "graph"))
		return expected(p, "'graph'");
	if (p->tok.kind != TK_GRAPH)
		return expected(p, "a graph name (@name)");
	p->g->name = ir_arena_strndup(p->g->arena, p->tok.text, p->tok.len);
	next(p);
	if (accept_word(p, "passes")) {
		if (!expect(p, TK_LPAREN, "'('"))
			return false;
		do {
			if (p->tok.kind != TK_IDENT)
				return expected(p, "a pass name");
			char name[64];
			if (p->tok.len >= sizeof name)
				return error_at(p, p->tok.pos, "pass name is too long");
			memcpy(name, p->tok.text, p->tok.len);
			name[p->tok.len] = 0;
			if (ir_graph_has_pass(p->g, name))
				return error_at(p, p->tok.pos, "pass '%s' listed twice", name);
			if (p->g->npasses >= IR_MAX_PASSES)
				return error_at(p, p->tok.pos, "more than %d passes listed", IR_MAX_PASSES);
			ir_graph_mark_pass_at(p->g, name, p->tok.pos);
			next(p);
		} while (accept(p, TK_COMMA));
		if (!expect(p, TK_RPAREN, "',' or ')'"))
			return false;
	}
	if (!expect(p, TK_LBRACE, "'{'"))
		return false;
	while (!p->failed && p->tok.kind != TK_RBRACE) {
		if (p->tok.kind != TK_VALUE && p->tok.kind != TK_PARAM)
			return expected(p, "a node (%N = ... or $name = ...) or '}'");
		if (!parse_node(p))
			return false;
	}
	if (!expect(p, TK_RBRACE, "'}'"))
		return false;
	if (p->tok.kind != TK_EOF)
		return expected(p, "end of file after the graph");
	return resolve(p);
}

ir_graph *ir_parse(const char *file, const char *text, size_t len, ir_diags *d)
{
	parser p = {.d = d};
	p.g = ir_graph_new("main");
	file = ir_arena_strdup(p.g->arena, file ? file : "<input>");
	if (ir_lex_init(&p.lx, file, text, len, p.g->arena, d)) {
		next(&p);
		parse_graph(&p);
	} else {
		p.failed = true;
	}
	free(p.refs);
	free(p.defs);
	if (p.failed) {
		ir_graph_free(p.g);
		return NULL;
	}
	ir_graph_renumber(p.g);
	return p.g;
}
