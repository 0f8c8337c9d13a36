/* lang.h: internal to frontend/.  The model language's syntax tree: the
 * `def` blocks and the `network` of a spec file and of the RevNet prelude
 * (models/lib/revnet.rev), as lang_parse.c reads them and lang_lower.c
 * lowers them (grammar: docs/spec.md, "Blocks and networks").
 *
 * A tree lives in one arena (fe_prog.arena) and points into the text it was
 * read from; keep that text alive while the tree is used. */
#ifndef REVC_FE_LANG_H
#define REVC_FE_LANG_H

#include <string.h>

#include "spec_int.h"

#define FE_MAX_PARAMS 16  /* parameters of one def */
#define FE_MAX_ARGS 16    /* arguments of one layer, call or coupling */
#define FE_MAX_DEPTH 16   /* blocks nested in blocks, and statements in statements */
#define FE_MAX_DEFS 64    /* defs in one file */

typedef enum {
	FE_E_INT,   /* v */
	FE_E_NAME,  /* name: a parameter, loop variable or key */
	FE_E_INDEX, /* name[a]: an element of a list key */
	FE_E_LEN,   /* len(name): the length of a list key */
	FE_E_NOT,   /* !a */
	FE_E_NEG,   /* -a */
	FE_E_BIN,   /* a op b */
} fe_expr_kind;

/* Binary operators, lowest precedence first. */
typedef enum {
	FE_OP_OR, FE_OP_AND, FE_OP_EQ, FE_OP_NE, FE_OP_LT, FE_OP_LE, FE_OP_GT, FE_OP_GE,
	FE_OP_ADD, FE_OP_SUB, FE_OP_MUL, FE_OP_DIV, FE_OP_MOD,
} fe_binop;

typedef struct fe_expr {
	fe_expr_kind kind;
	fe_binop op;
	int64_t v;
	const char *name;
	size_t n;
	struct fe_expr *a, *b;
	ir_pos pos;
} fe_expr;

typedef struct fe_call fe_call;

/* One argument: `expr`, `key=expr`, or (coupling) `f=NAME(args)`. */
typedef struct {
	const char *key; /* NULL: positional */
	size_t keyn;
	fe_expr *e;      /* NULL for a call */
	fe_call *call;
	ir_pos pos;
} fe_arg;

struct fe_call {
	const char *name;
	size_t n;
	fe_arg args[FE_MAX_ARGS];
	int nargs;
	ir_pos pos;
};

typedef enum {
	FE_S_LAYER,    /* word args [as NAME] */
	FE_S_CALL,     /* NAME(args) */
	FE_S_IF,       /* if cond { body } [else { other }] */
	FE_S_FOR,      /* for var in count { body } */
	FE_S_STAGE,    /* stage var in count { body } */
	FE_S_SECTION,  /* section NAME [at KEY] { body } */
	FE_S_COUPLING, /* coupling f=CALL g=CALL [down] */
} fe_stmt_kind;

typedef struct fe_stmt {
	fe_stmt_kind kind;
	ir_pos pos;
	const char *word; /* layer kind, section name, loop variable */
	size_t n;
	fe_arg args[FE_MAX_ARGS];
	int nargs;
	const char *as;   /* layer: `as NAME`; section: `at KEY` */
	size_t asn;
	ir_pos as_pos;
	fe_call call;     /* FE_S_CALL */
	fe_expr *cond;    /* if: condition; for, stage: count */
	struct fe_stmt *body, *other;
	struct fe_stmt *next;
} fe_stmt;

typedef struct {
	const char *name; /* NULL: the network */
	size_t n;
	const char *param[FE_MAX_PARAMS];
	size_t paramn[FE_MAX_PARAMS];
	int nparams;
	fe_stmt *body;
	ir_pos pos;
	bool prelude;     /* from models/lib/revnet.rev, not the user's file */
} fe_def;

typedef struct {
	ir_arena *arena;
	fe_def defs[FE_MAX_DEFS + 8]; /* the prelude's (3) and a file's */
	int ndefs;
} fe_prog;

/* The preludes' texts (generated from models/lib/revnet.rev and revvit.rev
 * at build time) and the names their positions carry; a spec is read with
 * the one its network key names. */
extern const char fe_prelude_text[];
extern const size_t fe_prelude_len;
extern const char fe_prelude_revvit_text[];
extern const size_t fe_prelude_revvit_len;
#define FE_PRELUDE_FILE "revnet.rev"
#define FE_PRELUDE_REVVIT_FILE "revvit.rev"

/* Whether a position's file is a prelude's (the user cannot see it). */
static inline bool fe_is_prelude(const char *file)
{
	return file && (strcmp(file, FE_PRELUDE_FILE) == 0 || strcmp(file, FE_PRELUDE_REVVIT_FILE) == 0);
}

/* True when a line (n bytes) opens a definition: `def NAME(` or `network {`. */
bool fe_lang_opens(const char *line, size_t n);

/* Reads one definition starting at the line *p points to, up to its closing
 * `}` line; on success *p and *line move past it.  Adds it to prog (which
 * may be NULL: the syntax is only checked).  On error one diagnostic. */
bool fe_lang_parse_def(fe_prog *prog, const char *file, const char *text, const char *end, const char **p,
	int *line, bool prelude, ir_diags *d);

/* The next definition of a spec's file (s->src) at or after *p, which
 * starts a line numbered *line: false when there is none; else its text is
 * [*from, *p) after the call, and *line numbers the line *p starts. */
bool fe_lang_next_def(const fe_spec *s, const char **p, int *line, const char **from);

/* Whether two specs' files define the same blocks and network, text for
 * text (comments and blank lines between definitions aside). */
bool fe_lang_defs_equal(const fe_spec *a, const fe_spec *b);

/* The program of a spec: the prelude's defs, then those of the spec's file
 * (s->src).  Never fails: fe_spec_parse read the same text.  Free with
 * fe_prog_free. */
void fe_prog_load(fe_prog *prog, const fe_spec *s);
void fe_prog_free(fe_prog *prog);
const fe_def *fe_prog_find(const fe_prog *prog, const char *name, size_t n);

/* Lowers the spec's network (its own, else the prelude's) into g, or only
 * checks it when g is NULL: every shape rule, argument, name and limit,
 * and with `sizes` every tensor's bytes in dtype dt.  On error one
 * diagnostic and false. */
bool fe_lang_lower(const fe_spec *s, ir_graph *g, ir_dtype dt, fe_lower_mode mode, bool sizes, ir_diags *d);

#endif
