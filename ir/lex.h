/* lex.h: internal to ir/.  Tokens of the IR text format. */
#ifndef REVC_IR_LEX_H
#define REVC_IR_LEX_H

#include "ir.h"

typedef enum {
	TK_EOF,
	TK_ERROR,  /* lexing failed; the diagnostic is already added */
	TK_IDENT,  /* graph, passes, op names, roles, attribute names, dtypes */
	TK_VALUE,  /* %12: ival holds the number */
	TK_PARAM,  /* $s0.u0.f.conv0.w: text/len hold the name without $ */
	TK_GRAPH,  /* @name: text/len hold the name without @ */
	TK_INT,
	TK_FLOAT,
	TK_STRING, /* sval holds the unescaped text (arena) */
	TK_LPAREN, TK_RPAREN, TK_LBRACE, TK_RBRACE, TK_LBRACKET, TK_RBRACKET,
	TK_COMMA, TK_EQUALS, TK_COLON, TK_MINUS,
} ir_tok_kind;

typedef struct {
	ir_tok_kind kind;
	const char *text; /* into the source */
	size_t len;
	ir_pos pos;
	int64_t ival;
	double fval;
	const char *sval;
} ir_tok;

typedef struct {
	const char *src, *end, *p;
	const char *file;
	int line;
	const char *line_start;
	ir_arena *arena;
	ir_diags *diags;
} ir_lexer;

/* Checks the whole input for overlong lines first; false (with a
 * diagnostic) when one is found. */
bool ir_lex_init(ir_lexer *lx, const char *file, const char *src, size_t len, ir_arena *a,
	ir_diags *d);
ir_tok ir_lex_next(ir_lexer *lx);
const char *ir_tok_describe(const ir_tok *t, char *buf, size_t n);

#endif
