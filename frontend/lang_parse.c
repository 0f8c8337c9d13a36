/* lang_parse.c: reads the model language's definitions, `def NAME(params)
 * { ... }` and `network { ... }` (grammar: docs/spec.md), into the tree of
 * lang.h.
 *
 * A definition spans lines, one statement a line; a `{` ends the line that
 * opens a body and `}` stands on a line of its own (or `} else {`).  The
 * input is untrusted: every read is bounded by its line's end, and the
 * first error, left to right, is the one reported. */
#include <stdlib.h>
#include <string.h>

#include "lang.h"

#define MAX_TOKENS 512

typedef enum {
	K_END, K_IDENT, K_INT, K_LPAREN, K_RPAREN, K_LBRACK, K_RBRACK, K_LBRACE, K_RBRACE,
	K_COMMA, K_ASSIGN, K_OP, K_NOT,
} kind;

typedef struct {
	kind k;
	const char *s;
	size_t n;
	int col;
	bool space; /* whitespace before it */
	bool gap;   /* the end of an argument at a space (peek's stop) */
	fe_binop op;
	int64_t v;
} token;

typedef struct {
	const char *file;
	const char *text, *end; /* the whole text */
	const char *p;          /* start of the next line */
	int line;               /* of the current line */
	token t[MAX_TOKENS + 1];
	int nt, at;
	int depth;              /* open parentheses and brackets */
	bool tight;             /* layer arguments: whitespace ends an expression */
	int arg_begin;          /* the token that begins the argument being read */
	token stop;             /* what peek gives where tight mode ends an argument */
	fe_prog *prog;
	ir_arena *arena;
	ir_diags *d;
} parser;

static bool fail(parser *P, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail(parser *P, int col, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ir_diag_addv(P->d, (ir_pos){P->file, P->line, col}, fmt, ap);
	va_end(ap);
	return false;
}

static bool ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool ident_char(char c)
{
	return ident_start(c) || (c >= '0' && c <= '9');
}

static const struct {
	const char *s;
	fe_binop op;
} ops[] = {
	{"||", FE_OP_OR}, {"&&", FE_OP_AND}, {"==", FE_OP_EQ}, {"!=", FE_OP_NE}, {"<=", FE_OP_LE},
	{">=", FE_OP_GE}, {"<", FE_OP_LT}, {">", FE_OP_GT}, {"+", FE_OP_ADD}, {"-", FE_OP_SUB},
	{"*", FE_OP_MUL}, {"/", FE_OP_DIV}, {"%", FE_OP_MOD},
};

/* Scans the line [b, e) into P->t. */
static bool scan(parser *P, const char *b, const char *e)
{
	P->nt = P->at = P->depth = 0;
	P->tight = false;
	const char *q = b;
	for (;;) {
		bool space = false;
		while (q < e && (*q == ' ' || *q == '\t' || *q == '\r')) {
			if (*q == '\r' && q + 1 != e)
				return fail(P, (int)(q - b) + 1, "unexpected byte 0x0d");
			q++;
			space = true;
		}
		token *t = &P->t[P->nt];
		*t = (token){.k = K_END, .s = q, .n = 0, .col = (int)(q - b) + 1, .space = true};
		if (q == e || *q == '#') {
			if (q < e)
				for (const char *c = q; c < e; c++)
					if ((unsigned char)*c < 0x20 && *c != '\t' && !(*c == '\r' && c + 1 == e))
						return fail(P, (int)(c - b) + 1, "control byte 0x%02x in a comment",
							(unsigned char)*c);
			return true;
		}
		if (P->nt == MAX_TOKENS)
			return fail(P, t->col, "a line holds at most %d tokens", MAX_TOKENS);
		t->space = space;
		unsigned char c = (unsigned char)*q;
		if (ident_start((char)c)) {
			while (q < e && ident_char(*q))
				q++;
			t->k = K_IDENT;
		} else if (c >= '0' && c <= '9') {
			int64_t v = 0;
			while (q < e && *q >= '0' && *q <= '9') {
				if (v > (FE_INT_MAX - (*q - '0')) / 10)
					return fail(P, t->col, "integer is too large (at most %d)", FE_INT_MAX);
				v = v * 10 + (*q++ - '0');
			}
			if (q < e && ident_char(*q))
				return fail(P, t->col, "expected a number, found '%.*s'", (int)(q - t->s + 1), t->s);
			t->k = K_INT;
			t->v = v;
		} else {
			static const char single[] = "()[]{},";
			const char *sp = strchr(single, (int)c);
			if (c && sp) {
				t->k = (kind)(K_LPAREN + (sp - single));
				q++;
			} else {
				size_t i = 0;
				for (; i < sizeof ops / sizeof ops[0]; i++) {
					size_t n = strlen(ops[i].s);
					if ((size_t)(e - q) >= n && memcmp(q, ops[i].s, n) == 0)
						break;
				}
				if (i < sizeof ops / sizeof ops[0]) {
					t->k = K_OP;
					t->op = ops[i].op;
					q += strlen(ops[i].s);
				} else if (c == '=') {
					t->k = K_ASSIGN;
					q++;
				} else if (c == '!') {
					t->k = K_NOT;
					q++;
				} else if (c < 0x20 || c > 0x7e) {
					return fail(P, t->col, "unexpected byte 0x%02x", c);
				} else {
					return fail(P, t->col, "unexpected '%c'", c);
				}
			}
		}
		t->n = (size_t)(q - t->s);
		P->nt++;
	}
}

/* Moves to the next line of the text and scans it; false at the end of the
 * text (*eof set) or on an error. */
static bool next_line(parser *P, bool *eof)
{
	*eof = false;
	if (P->p >= P->end) {
		*eof = true;
		return false;
	}
	const char *nl = memchr(P->p, '\n', (size_t)(P->end - P->p));
	const char *le = nl ? nl : P->end;
	P->line++;
	const char *b = P->p;
	P->p = nl ? nl + 1 : P->end;
	if (le - b > FE_MAX_LINE)
		return fail(P, FE_MAX_LINE + 1, "line is longer than %d bytes", FE_MAX_LINE);
	return scan(P, b, le);
}

/* The current token; K_END past the line, and in tight mode at a space
 * outside parentheses. */
static const token *peek(parser *P)
{
	const token *t = &P->t[P->at];
	if (t->k != K_END && P->tight && P->depth == 0 && t->space && P->at != P->arg_begin) {
		P->stop = (token){.k = K_END, .s = t->s, .col = t->col, .space = true, .gap = true};
		return &P->stop;
	}
	return t;
}

static const token *take(parser *P)
{
	const token *t = &P->t[P->at];
	if (t->k != K_END)
		P->at++;
	return t;
}

static bool is_word(const token *t, const char *w)
{
	return t->k == K_IDENT && t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}

static const char *describe(const token *t, char *buf, size_t cap)
{
	if (t->gap)
		return "a space (an argument is written without spaces, or in parentheses)";
	if (t->k == K_END)
		return "end of line";
	snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
	return buf;
}

static bool expect(parser *P, kind k, const char *what)
{
	const token *t = peek(P);
	if (t->k == k) {
		take(P);
		return true;
	}
	char buf[64];
	return fail(P, t->col, "expected %s, found %s", what, describe(t, buf, sizeof buf));
}

static bool line_done(parser *P)
{
	P->tight = false;
	const token *t = peek(P);
	char buf[64];
	return t->k == K_END || fail(P, t->col, "unexpected %s", describe(t, buf, sizeof buf));
}

static ir_pos here(const parser *P, const token *t)
{
	return (ir_pos){P->file, P->line, t->col};
}

/* ---- expressions ---------------------------------------------------------- */

static fe_expr *expr(parser *P, int depth);

static fe_expr *mk(parser *P, fe_expr_kind k, const token *t)
{
	fe_expr *e = ir_arena_alloc(P->arena, sizeof *e);
	memset(e, 0, sizeof *e);
	e->kind = k;
	e->pos = here(P, t);
	return e;
}

static fe_expr *primary(parser *P, int depth)
{
	if (depth > 4 * FE_MAX_DEPTH) {
		fail(P, peek(P)->col, "expression nests deeper than %d", 4 * FE_MAX_DEPTH);
		return NULL;
	}
	const token *t = peek(P);
	char buf[64];
	if (t->k == K_INT) {
		fe_expr *e = mk(P, FE_E_INT, take(P));
		e->v = t->v;
		return e;
	}
	if (t->k == K_NOT || (t->k == K_OP && t->op == FE_OP_SUB)) {
		fe_expr *e = mk(P, t->k == K_NOT ? FE_E_NOT : FE_E_NEG, take(P));
		if (!(e->a = primary(P, depth + 1)))
			return NULL;
		return e;
	}
	if (t->k == K_LPAREN) {
		take(P);
		P->depth++;
		fe_expr *e = expr(P, depth + 1);
		if (!e || !expect(P, K_RPAREN, "')'"))
			return NULL;
		P->depth--;
		return e;
	}
	if (t->k != K_IDENT) {
		fail(P, t->col, "expected a value, found %s", describe(t, buf, sizeof buf));
		return NULL;
	}
	take(P);
	if (is_word(t, "len") && peek(P)->k == K_LPAREN && !P->t[P->at].space) {
		take(P);
		P->depth++;
		const token *k = peek(P);
		if (k->k != K_IDENT) {
			fail(P, k->col, "expected a key in len(), found %s", describe(k, buf, sizeof buf));
			return NULL;
		}
		fe_expr *e = mk(P, FE_E_LEN, take(P));
		e->name = k->s;
		e->n = k->n;
		if (!expect(P, K_RPAREN, "')'"))
			return NULL;
		P->depth--;
		return e;
	}
	fe_expr *e = mk(P, FE_E_NAME, t);
	e->name = t->s;
	e->n = t->n;
	if (peek(P)->k == K_LBRACK && !P->t[P->at].space) {
		take(P);
		P->depth++;
		e->kind = FE_E_INDEX;
		if (!(e->a = expr(P, depth + 1)) || !expect(P, K_RBRACK, "']'"))
			return NULL;
		P->depth--;
	}
	return e;
}

static int prec(fe_binop op)
{
	switch (op) {
	case FE_OP_OR: return 1;
	case FE_OP_AND: return 2;
	case FE_OP_EQ: case FE_OP_NE: case FE_OP_LT: case FE_OP_LE: case FE_OP_GT: case FE_OP_GE: return 3;
	case FE_OP_ADD: case FE_OP_SUB: return 4;
	default: return 5;
	}
}

/* Precedence climbing: operators of precedence >= min, left-associative. */
static fe_expr *binary(parser *P, int min, int depth)
{
	fe_expr *a = primary(P, depth);
	while (a) {
		const token *t = peek(P);
		if (t->k != K_OP || prec(t->op) < min)
			break;
		take(P);
		fe_expr *e = mk(P, FE_E_BIN, t);
		e->op = t->op;
		e->a = a;
		if (!(e->b = binary(P, prec(t->op) + 1, depth + 1)))
			return NULL;
		a = e;
	}
	return a;
}

static fe_expr *expr(parser *P, int depth)
{
	return binary(P, 1, depth);
}

/* ---- arguments ------------------------------------------------------------ */

static bool call_args(parser *P, fe_call *c);

/* One argument: `expr`, `key=expr` or, where calls may be, `key=NAME(args)`. */
static bool arg(parser *P, fe_arg *a, bool calls)
{
	P->arg_begin = P->at;
	const token *t = peek(P);
	memset(a, 0, sizeof *a);
	a->pos = here(P, t);
	if (t->k == K_IDENT && P->t[P->at + 1].k == K_ASSIGN && !P->t[P->at + 1].space) {
		a->key = t->s;
		a->keyn = t->n;
		take(P);
		take(P);
		const token *v = &P->t[P->at];
		P->arg_begin = P->at;
		if (v->k == K_END || (P->tight && P->depth == 0 && v->space)) {
			fail(P, v->col, "missing value after '%.*s='", (int)a->keyn, a->key);
			return false;
		}
		if (calls && v->k == K_IDENT && P->t[P->at + 1].k == K_LPAREN) {
			a->call = ir_arena_alloc(P->arena, sizeof *a->call);
			memset(a->call, 0, sizeof *a->call);
			a->call->name = v->s;
			a->call->n = v->n;
			a->call->pos = here(P, v);
			take(P);
			return call_args(P, a->call);
		}
	}
	return (a->e = expr(P, 0)) != NULL;
}

/* `( [arg {, arg}] )` after a call's name; the '(' is next. */
static bool call_args(parser *P, fe_call *c)
{
	bool tight = P->tight;
	take(P);
	P->depth++;
	if (peek(P)->k != K_RPAREN) {
		for (;;) {
			if (c->nargs == FE_MAX_ARGS)
				return fail(P, peek(P)->col, "a call takes at most %d arguments", FE_MAX_ARGS);
			if (!arg(P, &c->args[c->nargs++], false))
				return false;
			if (peek(P)->k != K_COMMA)
				break;
			take(P);
		}
	}
	if (!expect(P, K_RPAREN, "',' or ')'"))
		return false;
	P->depth--;
	P->tight = tight;
	return true;
}

/* Layer and coupling arguments, separated by spaces, up to the line's end
 * or `as`. */
static bool layer_args(parser *P, fe_stmt *s, bool calls)
{
	P->tight = true;
	for (;;) {
		const token *t = &P->t[P->at];
		if (t->k == K_END || is_word(t, "as"))
			break;
		if (s->nargs == FE_MAX_ARGS)
			return fail(P, t->col, "a layer takes at most %d arguments", FE_MAX_ARGS);
		if (!arg(P, &s->args[s->nargs++], calls))
			return false;
		const token *n = &P->t[P->at];
		if (n->k != K_END && !n->space) {
			char buf[64];
			return fail(P, n->col, "unexpected %s in an argument", describe(n, buf, sizeof buf));
		}
	}
	P->tight = false;
	return true;
}

/* ---- statements ----------------------------------------------------------- */

typedef enum { END_CLOSE, END_ELSE } body_end;

static bool body(parser *P, fe_stmt **out, int depth, bool network, body_end *how);

static fe_stmt *stmt_new(parser *P, fe_stmt_kind k, const token *t)
{
	fe_stmt *s = ir_arena_alloc(P->arena, sizeof *s);
	memset(s, 0, sizeof *s);
	s->kind = k;
	s->pos = here(P, t);
	s->word = t->s;
	s->n = t->n;
	return s;
}

static bool open_brace(parser *P)
{
	P->tight = false;
	return expect(P, K_LBRACE, "'{'") && line_done(P);
}

/* A nested body and its `}`; for if, an optional else body. */
static bool sub_body(parser *P, fe_stmt *s, int depth, bool network, bool may_else)
{
	if (depth >= FE_MAX_DEPTH)
		return fail(P, s->pos.col, "statements nest deeper than %d", FE_MAX_DEPTH);
	body_end how;
	if (!body(P, &s->body, depth + 1, network, &how))
		return false;
	if (how == END_ELSE) {
		if (!may_else)
			return fail(P, 1, "'else' without 'if'");
		if (!body(P, &s->other, depth + 1, network, &how))
			return false;
		if (how == END_ELSE)
			return fail(P, 1, "'else' after 'else'");
	}
	return true;
}

/* `NAME in EXPR {` of for and stage. */
static bool loop_head(parser *P, fe_stmt *s)
{
	const token *v = peek(P);
	char buf[64];
	if (v->k != K_IDENT)
		return fail(P, v->col, "expected a variable name, found %s", describe(v, buf, sizeof buf));
	take(P);
	s->word = v->s;
	s->n = v->n;
	const token *in = peek(P);
	if (!is_word(in, "in"))
		return fail(P, in->col, "expected 'in', found %s", describe(in, buf, sizeof buf));
	take(P);
	return (s->cond = expr(P, 0)) != NULL;
}

static bool statement(parser *P, fe_stmt **out, int depth, bool network)
{
	const token *t = take(P);
	char buf[64];
	fe_stmt *s;
	if (t->k != K_IDENT)
		return fail(P, t->col, "expected a statement, found %s", describe(t, buf, sizeof buf));
	if (is_word(t, "if")) {
		s = stmt_new(P, FE_S_IF, t);
		if (!(s->cond = expr(P, 0)) || !open_brace(P) || !sub_body(P, s, depth, network, true))
			return false;
	} else if (network && (is_word(t, "for") || is_word(t, "stage"))) {
		s = stmt_new(P, is_word(t, "for") ? FE_S_FOR : FE_S_STAGE, t);
		if (!loop_head(P, s) || !open_brace(P) || !sub_body(P, s, depth, network, false))
			return false;
	} else if (network && is_word(t, "section")) {
		s = stmt_new(P, FE_S_SECTION, t);
		const token *n = peek(P);
		if (n->k != K_IDENT)
			return fail(P, n->col, "expected a section name, found %s", describe(n, buf, sizeof buf));
		take(P);
		s->word = n->s;
		s->n = n->n;
		if (is_word(peek(P), "at")) {
			take(P);
			const token *k = peek(P);
			if (k->k != K_IDENT)
				return fail(P, k->col, "expected a key after 'at', found %s", describe(k, buf, sizeof buf));
			take(P);
			s->as = k->s;
			s->asn = k->n;
			s->as_pos = here(P, k);
		}
		if (!open_brace(P) || !sub_body(P, s, depth, false, false))
			return false;
	} else if (network && is_word(t, "coupling")) {
		s = stmt_new(P, FE_S_COUPLING, t);
		if (!layer_args(P, s, true) || !line_done(P))
			return false;
	} else if (network) {
		return fail(P, t->col, "expected section, stage, for or if in the network; layers belong in a "
			"section (section NAME { ... })");
	} else if (peek(P)->k == K_LPAREN && !P->t[P->at].space) {
		s = stmt_new(P, FE_S_CALL, t);
		s->call.name = t->s;
		s->call.n = t->n;
		s->call.pos = s->pos;
		if (!call_args(P, &s->call) || !line_done(P))
			return false;
	} else {
		static const char *const reserved[] = {"def", "network", "else", "in", "at", "as", "for", "stage",
			"section", "coupling"};
		for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
			if (is_word(t, reserved[i]))
				return fail(P, t->col, "'%s' cannot be used here", reserved[i]);
		s = stmt_new(P, FE_S_LAYER, t);
		if (!layer_args(P, s, false))
			return false;
		if (is_word(peek(P), "as")) {
			take(P);
			const token *n = peek(P);
			if (n->k != K_IDENT)
				return fail(P, n->col, "expected a name after 'as', found %s", describe(n, buf, sizeof buf));
			take(P);
			s->as = n->s;
			s->asn = n->n;
			s->as_pos = here(P, n);
		}
		if (!line_done(P))
			return false;
	}
	*out = s;
	return true;
}

/* Statements up to the `}` (or `} else {`) that closes the body. */
static bool body(parser *P, fe_stmt **out, int depth, bool network, body_end *how)
{
	fe_stmt **tail = out;
	*out = NULL;
	int open_line = P->line;
	for (;;) {
		bool eof;
		if (!next_line(P, &eof)) {
			if (eof)
				ir_diag_add(P->d, (ir_pos){P->file, open_line, 1},
					"this '{' is not closed before the end of the file");
			return false;
		}
		const token *t = peek(P);
		if (t->k == K_END)
			continue;
		if (t->k == K_RBRACE) {
			take(P);
			if (is_word(peek(P), "else")) {
				take(P);
				if (!open_brace(P))
					return false;
				*how = END_ELSE;
				return true;
			}
			*how = END_CLOSE;
			return line_done(P);
		}
		if (!statement(P, tail, depth, network))
			return false;
		tail = &(*tail)->next;
	}
}

/* ---- definitions ---------------------------------------------------------- */

bool fe_lang_opens(const char *line, size_t n)
{
	size_t i = 0;
	while (i < n && (line[i] == ' ' || line[i] == '\t'))
		i++;
	const char *w = line + i;
	size_t rest = n - i;
	if (rest > 4 && memcmp(w, "def", 3) == 0 && (w[3] == ' ' || w[3] == '\t'))
		return true;
	if (rest >= 7 && memcmp(w, "network", 7) == 0 && (rest == 7 || !ident_char(w[7])) &&
		memchr(w, '=', rest) == NULL)
		return true;
	return false;
}

bool fe_lang_parse_def(fe_prog *prog, const char *file, const char *text, const char *end, const char **p,
	int *line, bool prelude, ir_diags *d)
{
	parser *P = calloc(1, sizeof *P);
	if (!P)
		IR_DIE("out of memory");
	*P = (parser){.file = file, .text = text, .end = end, .p = *p, .line = *line - 1, .prog = prog, .d = d};
	P->arena = prog ? prog->arena : ir_arena_new();
	fe_def def = {.prelude = prelude};
	bool eof, ok = false;
	char buf[64];
	if (!next_line(P, &eof))
		goto done;
	const token *t = take(P);
	def.pos = here(P, t);
	if (is_word(t, "def")) {
		const token *n = peek(P);
		if (n->k != K_IDENT) {
			fail(P, n->col, "expected a block name after 'def', found %s", describe(n, buf, sizeof buf));
			goto done;
		}
		take(P);
		def.name = n->s;
		def.n = n->n;
		def.pos = here(P, n);
		if (!expect(P, K_LPAREN, "'(' after the block's name"))
			goto done;
		if (peek(P)->k != K_RPAREN) {
			for (;;) {
				const token *a = peek(P);
				if (a->k != K_IDENT) {
					fail(P, a->col, "expected a parameter name, found %s", describe(a, buf, sizeof buf));
					goto done;
				}
				for (int i = 0; i < def.nparams; i++)
					if (def.paramn[i] == a->n && memcmp(def.param[i], a->s, a->n) == 0) {
						fail(P, a->col, "parameter '%.*s' is named twice", (int)a->n, a->s);
						goto done;
					}
				if (def.nparams == FE_MAX_PARAMS) {
					fail(P, a->col, "a block takes at most %d parameters", FE_MAX_PARAMS);
					goto done;
				}
				take(P);
				def.param[def.nparams] = a->s;
				def.paramn[def.nparams++] = a->n;
				if (peek(P)->k != K_COMMA)
					break;
				take(P);
			}
		}
		if (!expect(P, K_RPAREN, "',' or ')'"))
			goto done;
	}
	if (!open_brace(P))
		goto done;
	body_end how;
	if (!body(P, &def.body, 0, def.name == NULL, &how))
		goto done;
	if (how == END_ELSE) {
		fail(P, 1, "'else' without 'if'");
		goto done;
	}
	if (prog) {
		const fe_def *was = def.name ? fe_prog_find(prog, def.name, def.n) : NULL;
		if (was) {
			if (was->prelude)
				ir_diag_add(d, def.pos, "block '%.*s' is already defined by the prelude (models/lib/%s)",
					(int)def.n, def.name, was->pos.file);
			else
				ir_diag_add(d, def.pos, "block '%.*s' is already defined at %d:%d", (int)def.n, def.name,
					was->pos.line, was->pos.col);
			goto done;
		}
		for (int i = 0; !def.name && i < prog->ndefs; i++)
			if (!prog->defs[i].name && !prog->defs[i].prelude) {
				ir_diag_add(d, def.pos, "the network is already defined");
				goto done;
			}
		int own = 0;
		for (int i = 0; i < prog->ndefs; i++)
			own += !prog->defs[i].prelude;
		if (!prelude && own == FE_MAX_DEFS) {
			ir_diag_add(d, def.pos, "a spec defines at most %d blocks", FE_MAX_DEFS);
			goto done;
		}
		IR_ASSERT(prog->ndefs < (int)(sizeof prog->defs / sizeof prog->defs[0]));
		prog->defs[prog->ndefs++] = def;
	}
	ok = true;
	*p = P->p;
	*line = P->line + 1;
done:
	if (!prog)
		ir_arena_free(P->arena);
	free(P);
	return ok;
}

/* ---- programs ------------------------------------------------------------- */

static void load_text(fe_prog *prog, const char *file, const char *text, size_t len, bool prelude)
{
	ir_diags d;
	ir_diags_init(&d);
	const char *p = text, *end = text + len;
	int line = 1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		if (fe_lang_opens(p, (size_t)(le - p))) {
			if (!fe_lang_parse_def(prog, file, text, end, &p, &line, prelude, &d))
				IR_DIE("%s:%d: a definition fe_spec_parse read does not parse: %s", file, line,
					d.n ? d.items[0].msg : "?");
			continue;
		}
		p = nl ? nl + 1 : end;
		line++;
	}
	ir_diags_free(&d);
}

void fe_prog_load(fe_prog *prog, const fe_spec *s)
{
	memset(prog, 0, sizeof *prog);
	prog->arena = ir_arena_new();
	if (s->network == FE_NET_REVVIT)
		load_text(prog, FE_PRELUDE_REVVIT_FILE, fe_prelude_revvit_text, fe_prelude_revvit_len, true);
	else
		load_text(prog, FE_PRELUDE_FILE, fe_prelude_text, fe_prelude_len, true);
	if (s->src)
		load_text(prog, s->src_file, s->src, s->src_len, false);
}

void fe_prog_free(fe_prog *prog)
{
	ir_arena_free(prog->arena);
	prog->arena = NULL;
}

const fe_def *fe_prog_find(const fe_prog *prog, const char *name, size_t n)
{
	for (int i = 0; i < prog->ndefs; i++)
		if (prog->defs[i].name && prog->defs[i].n == n && memcmp(prog->defs[i].name, name, n) == 0)
			return &prog->defs[i];
	return NULL;
}

bool fe_lang_next_def(const fe_spec *s, const char **p, int *line, const char **from)
{
	const char *end = s->src + s->src_len;
	ir_diags d;
	ir_diags_init(&d);
	bool found = false;
	while (!found && *p < end) {
		const char *nl = memchr(*p, '\n', (size_t)(end - *p));
		const char *le = nl ? nl : end;
		if (fe_lang_opens(*p, (size_t)(le - *p))) {
			*from = *p;
			if (!fe_lang_parse_def(NULL, s->src_file, s->src, end, p, line, false, &d))
				IR_DIE("a definition fe_spec_parse read does not parse");
			found = true;
		} else {
			*p = nl ? nl + 1 : end;
			++*line;
		}
	}
	ir_diags_free(&d);
	return found;
}

bool fe_lang_defs_equal(const fe_spec *a, const fe_spec *b)
{
	if (a->ndefs != b->ndefs)
		return false;
	if (!a->ndefs)
		return true;
	const char *pa = a->src, *pb = b->src, *fa, *fb;
	int la = 1, lb = 1;
	for (;;) {
		bool ha = fe_lang_next_def(a, &pa, &la, &fa), hb = fe_lang_next_def(b, &pb, &lb, &fb);
		if (ha != hb)
			return false;
		if (!ha)
			return true;
		/* A last definition may lack its newline. */
		size_t na = (size_t)(pa - fa), nb = (size_t)(pb - fb);
		na -= na && fa[na - 1] == '\n';
		nb -= nb && fb[nb - 1] == '\n';
		if (na != nb || memcmp(fa, fb, na) != 0)
			return false;
	}
}
