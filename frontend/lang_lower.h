/* lang_lower.h: internal to frontend/.  The state of lowering a model-language
 * network to forward IR, shared by the files that do it: lang_lower.c walks
 * the statements (blocks, stages, couplings, the network), lang_eval.c
 * evaluates expressions, lang_node.c makes nodes and checks tensor sizes,
 * lang_layer.c binds and lowers the layers of its table.  What the lowering
 * produces: lang_lower.c's opening comment. */
#ifndef REVC_FE_LANG_LOWER_H
#define REVC_FE_LANG_LOWER_H

#include "lang.h"

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
	int rank;       /* 4: [N,C,H,W]; 3: tokens [N,T,D]; 2: [N,F] */
	int64_t dim[4];
	unsigned keys[4];
} tensor;

typedef struct {
	const char *name[MAX_VARS];
	size_t n[MAX_VARS];
	val v[MAX_VARS];
	int count;
} frame;

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
	int count[32];     /* layers of each kind so far in this section or part */
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

/* A layer's arguments, bound to the parameters its kind declares. */
typedef struct {
	val a[8];
	ir_pos pos[8];
} bound;

typedef bool (*layer_fn)(lw *L, const fe_stmt *st, const bound *b, const char *name);

/* Records the first error at pos (the user's anchor for the prelude's
 * positions) and returns false; later errors are dropped. */
bool fe_lw_fail(lw *L, ir_pos pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* lang_eval.c */
bool fe_lw_key_ints(const fe_spec *s, fe_key k, const int64_t **v, const ir_pos **pos, int *n, int64_t *tmp);
bool fe_lw_eval(lw *L, const frame *f, const fe_expr *e, val *out);

/* lang_node.c */
void fe_lw_place(lw *L, const char *scope, ir_pos pos);
void fe_lw_place_stmt(lw *L, ir_pos stmt_pos);
ir_node *fe_lw_node_n(lw *L, ir_op op, ir_node *const *in, int nin);
ir_node *fe_lw_node(lw *L, ir_op op, ir_node *a, ir_node *b);
bool fe_lw_fits(lw *L, ir_pos at, unsigned keys, const char *what, ir_dtype dt, int rank, const int64_t *dims);
bool fe_lw_output(lw *L, tensor *t, ir_node *y, const char *what);
ir_node *fe_lw_tensor_node(lw *L, ir_op op, const char *name, const char *suffix, int rank, const int64_t *dims,
	unsigned keys);

/* lang_layer.c */
ir_node *fe_lw_avgpool(lw *L, tensor *x, int64_t k, unsigned keys, ir_pos at);
bool fe_lw_run_layer(lw *L, const frame *f, const fe_stmt *st);

#endif
