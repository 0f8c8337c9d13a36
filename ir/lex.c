/* lex.c: the tokenizer of the IR text format.  Input is arbitrary bytes: any
 * byte that cannot start a token is an error at its line and column. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lex.h"

static ir_pos here(const ir_lexer *lx)
{
	return (ir_pos){lx->file, lx->line, (int)(lx->p - lx->line_start) + 1};
}

bool ir_lex_init(ir_lexer *lx, const char *file, const char *src, size_t len, ir_arena *a,
	ir_diags *d)
{
	*lx = (ir_lexer){src, src + len, src, file, 1, src, a, d};
	int line = 1;
	for (const char *p = src, *start = src; p <= src + len; p++) {
		if (p == src + len || *p == '\n') {
			if (p - start > IR_MAX_LINE) {
				ir_diag_add(d, (ir_pos){file, line, IR_MAX_LINE + 1},
					"line is longer than %d bytes", IR_MAX_LINE);
				return false;
			}
			line++;
			start = p + 1;
		}
	}
	return true;
}

static bool is_ident_start(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_ident(int c) { return is_ident_start(c) || is_digit(c); }
static bool is_name(int c) { return is_ident(c) || c == '.' || c == '-'; }

static ir_tok error_tok(ir_lexer *lx, ir_pos pos, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static ir_tok error_tok(ir_lexer *lx, ir_pos pos, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ir_diag_addv(lx->diags, pos, fmt, ap);
	va_end(ap);
	return (ir_tok){.kind = TK_ERROR, .pos = pos};
}

static void skip_space(ir_lexer *lx)
{
	while (lx->p < lx->end) {
		char c = *lx->p;
		if (c == '\n') {
			lx->p++;
			lx->line++;
			lx->line_start = lx->p;
		} else if (c == ' ' || c == '\t' || c == '\r') {
			lx->p++;
		} else if (c == '#') {
			while (lx->p < lx->end && *lx->p != '\n')
				lx->p++;
		} else {
			break;
		}
	}
}

static ir_tok lex_number(ir_lexer *lx, ir_tok t)
{
	const char *s = lx->p;
	if (*lx->p == '-')
		lx->p++;
	bool is_float = false;
	while (lx->p < lx->end && (is_digit(*lx->p) || *lx->p == '.' || *lx->p == 'e' ||
		*lx->p == 'E' || ((*lx->p == '+' || *lx->p == '-') && (lx->p[-1] == 'e' || lx->p[-1] == 'E')))) {
		if (!is_digit(*lx->p))
			is_float = true;
		lx->p++;
	}
	size_t n = (size_t)(lx->p - s);
	char buf[64];
	if (n >= sizeof buf)
		return error_tok(lx, t.pos, "number is too long");
	memcpy(buf, s, n);
	buf[n] = 0;
	char *end;
	errno = 0;
	t.text = s;
	t.len = n;
	if (is_float) {
		t.kind = TK_FLOAT;
		t.fval = strtod(buf, &end);
	} else {
		t.kind = TK_INT;
		t.ival = strtoll(buf, &end, 10);
		t.fval = strtod(buf, NULL); /* for float contexts: keeps -0 and huge values */
	}
	if (*end)
		return error_tok(lx, t.pos, "malformed number '%s'", buf);
	if (errno == ERANGE && !is_float)
		return error_tok(lx, t.pos, "integer '%s' is out of range", buf);
	if (lx->p < lx->end && is_ident(*lx->p))
		return error_tok(lx, t.pos, "malformed number '%.*s'", (int)n + 1, s);
	return t;
}

static bool is_hex(int c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static ir_tok lex_string(ir_lexer *lx, ir_tok t)
{
	lx->p++; /* opening quote */
	/* The text ends at its first unescaped quote, within its line, and
	 * unescaping never lengthens it: that bounds the buffer.  (Sizing it by
	 * the rest of the input made many strings quadratic in time and space.) */
	const char *q = lx->p;
	while (q < lx->end && *q != '"' && *q != '\n')
		q += *q == '\\' && q + 1 < lx->end && q[1] != '\n' ? 2 : 1;
	char *buf = ir_arena_alloc(lx->arena, (size_t)(q - lx->p) + 1);
	size_t n = 0;
	for (;;) {
		if (lx->p >= lx->end || *lx->p == '\n')
			return error_tok(lx, t.pos, "unterminated string");
		char c = *lx->p++;
		if (c == '"')
			break;
		if (c != '\\') {
			if ((unsigned char)c < 0x20)
				return error_tok(lx, here(lx), "control character in string");
			buf[n++] = c;
			continue;
		}
		if (lx->p >= lx->end)
			return error_tok(lx, t.pos, "unterminated string");
		c = *lx->p++;
		if (c == '"' || c == '\\') {
			buf[n++] = c;
		} else if (c == 'x' && lx->end - lx->p >= 2) {
			char hex[3] = {lx->p[0], lx->p[1], 0};
			char *end;
			long v = strtol(hex, &end, 16);
			/* Two hex digits: strtol alone takes " 1", "-1", even a newline. */
			if (*end || v == 0 || !is_hex(hex[0]) || !is_hex(hex[1]))
				return error_tok(lx, here(lx), "bad \\x escape in string");
			buf[n++] = (char)v;
			lx->p += 2;
		} else {
			return error_tok(lx, here(lx), "unknown escape '\\%c' in string", c);
		}
	}
	buf[n] = 0;
	t.kind = TK_STRING;
	t.sval = buf;
	return t;
}

ir_tok ir_lex_next(ir_lexer *lx)
{
	skip_space(lx);
	ir_tok t = {.pos = here(lx), .text = lx->p};
	if (lx->p >= lx->end) {
		t.kind = TK_EOF;
		return t;
	}
	unsigned char c = (unsigned char)*lx->p;
	static const char punct[] = "(){}[],=:";
	static const ir_tok_kind pkind[] = {TK_LPAREN, TK_RPAREN, TK_LBRACE, TK_RBRACE, TK_LBRACKET,
		TK_RBRACKET, TK_COMMA, TK_EQUALS, TK_COLON};
	const char *pc = c ? strchr(punct, c) : NULL;
	if (pc) {
		lx->p++;
		t.kind = pkind[pc - punct];
		t.len = 1;
		return t;
	}
	if (is_digit(c) || (c == '-' && lx->p + 1 < lx->end && is_digit(lx->p[1])))
		return lex_number(lx, t);
	if (c == '-') {
		lx->p++;
		t.kind = TK_MINUS;
		t.len = 1;
		return t;
	}
	if (c == '"')
		return lex_string(lx, t);
	if (is_ident_start(c)) {
		while (lx->p < lx->end && is_ident(*lx->p))
			lx->p++;
		t.kind = TK_IDENT;
		t.len = (size_t)(lx->p - t.text);
		return t;
	}
	if (c == '%') {
		lx->p++;
		const char *s = lx->p;
		while (lx->p < lx->end && is_digit(*lx->p))
			lx->p++;
		size_t n = (size_t)(lx->p - s);
		if (n == 0 || (lx->p < lx->end && is_name(*lx->p)))
			return error_tok(lx, t.pos, "a value name is %% followed by digits");
		if (n > 9)
			return error_tok(lx, t.pos, "value number is too large");
		t.ival = 0;
		for (size_t i = 0; i < n; i++)
			t.ival = t.ival * 10 + (s[i] - '0');
		t.kind = TK_VALUE;
		t.len = n + 1;
		return t;
	}
	if (c == '$' || c == '@') {
		lx->p++;
		const char *s = lx->p;
		while (lx->p < lx->end && is_name(*lx->p))
			lx->p++;
		if (lx->p == s)
			return error_tok(lx, t.pos, "'%c' must be followed by a name", c);
		t.kind = c == '$' ? TK_PARAM : TK_GRAPH;
		t.text = s;
		t.len = (size_t)(lx->p - s);
		return t;
	}
	if (c >= 0x20 && c < 0x7f)
		return error_tok(lx, t.pos, "unexpected character '%c'", c);
	return error_tok(lx, t.pos, "unexpected byte 0x%02x", c);
}

const char *ir_tok_describe(const ir_tok *t, char *buf, size_t n)
{
	switch (t->kind) {
	case TK_EOF:
		return "end of file";
	case TK_STRING:
		return "a string";
	case TK_VALUE:
		snprintf(buf, n, "'%%%lld'", (long long)t->ival);
		return buf;
	case TK_PARAM:
		snprintf(buf, n, "'$%.*s'", (int)(t->len > 40 ? 40 : t->len), t->text);
		return buf;
	case TK_GRAPH:
		snprintf(buf, n, "'@%.*s'", (int)(t->len > 40 ? 40 : t->len), t->text);
		return buf;
	default:
		snprintf(buf, n, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->text);
		return buf;
	}
}
