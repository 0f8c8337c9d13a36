/* ir.h: the public interface of revc's dataflow IR.
 *
 * A graph is an ordered list of nodes in SSA form.  Each node is one op with
 * operands, attributes and exactly one result value (a typed tensor with a
 * static shape).  The list order is always an execution order: every node
 * comes after its operands and after the nodes its ordering edges name.
 *
 * Ordering edges ("run after", no data) are first-class: node->after lists
 * nodes that must have run before this one.  The printer shows them as
 * after(%12, %15), the parser reads them, the verifier keeps the whole graph
 * acyclic through them, and every pass must honour them.
 *
 * Memory: all nodes, attribute arrays and strings of a graph live in the
 * graph's arena and are freed together by ir_graph_free.  Nothing is freed
 * per node.
 */
#ifndef REVC_IR_H
#define REVC_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- arena (ir/arena.c) ---------------------------------------------- */

typedef struct ir_arena ir_arena;

ir_arena *ir_arena_new(void);
void ir_arena_free(ir_arena *a);
/* Zeroed, 16-byte aligned.  Aborts on exhaustion (the IR of one compile is
 * small; a failure here is an invariant, not user error). */
void *ir_arena_alloc(ir_arena *a, size_t size);
void *ir_arena_array(ir_arena *a, size_t count, size_t elem);
char *ir_arena_strdup(ir_arena *a, const char *s);
char *ir_arena_strndup(ir_arena *a, const char *s, size_t n);

/* ---- checked size arithmetic (ir/arena.c) ----------------------------- */

/* The one place where shape products and byte sizes are overflow-checked.
 * Each returns false (and leaves *out unspecified) on overflow. */
bool ir_size_mul(int64_t a, int64_t b, int64_t *out);
bool ir_size_add(int64_t a, int64_t b, int64_t *out);

/* Largest tensor the IR accepts: 2^40 bytes.  Anything larger is user error. */
#define IR_MAX_BYTES ((int64_t)1 << 40)

/* ---- invariant failures (ir/diag.c) ----------------------------------- */

/* Broken invariants abort with file, line and a message; user errors never
 * come here (they are ir_diag items). */
_Noreturn void ir_die_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define IR_DIE(...) ir_die_at(__FILE__, __LINE__, __VA_ARGS__)
#define IR_ASSERT(c) ((c) ? (void)0 : IR_DIE("assertion failed: %s", #c))

/* ---- source positions and diagnostics (ir/diag.c) --------------------- */

typedef struct {
	const char *file; /* interned, NULL when the node was built in code */
	int line, col;    /* 1-based; 0 when unknown */
} ir_pos;

typedef struct {
	ir_pos pos;
	char *msg;
} ir_diag_item;

/* A list of user-facing errors.  Parsers stop at the first; the verifier
 * collects every violation.  Only the first IR_MAX_DIAGS are kept (a
 * hostile file can hold millions); total counts them all. */
#define IR_MAX_DIAGS 1000
typedef struct {
	ir_diag_item *items;
	int n, cap;
	int64_t total; /* diagnostics added, kept or not */
} ir_diags;

void ir_diags_init(ir_diags *d);
void ir_diags_free(ir_diags *d);
void ir_diags_clear(ir_diags *d);
void ir_diag_add(ir_diags *d, ir_pos pos, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ir_diag_addv(ir_diags *d, ir_pos pos, const char *fmt, va_list ap);

/* Prints "file:line:col: error: msg", then, when src (the text of pos.file)
 * is given, the source line and a caret under the column. */
void ir_diag_print(FILE *out, const ir_diag_item *it, const char *src, size_t srclen);

/* ---- dtypes and types (ir/type.c) ------------------------------------- */

typedef enum { IR_F32, IR_F64, IR_I32, IR_DTYPE_COUNT } ir_dtype;

#define IR_MAX_RANK 6
#define IR_MAX_WINDOW 1024 /* largest stride, padding and pooling window */

typedef struct {
	ir_dtype dtype;
	int rank;
	int64_t dim[IR_MAX_RANK];
} ir_type;

const char *ir_dtype_name(ir_dtype t);
bool ir_dtype_parse(const char *s, size_t n, ir_dtype *out);
int ir_dtype_size(ir_dtype t);
bool ir_dtype_is_float(ir_dtype t);

ir_type ir_type_make(ir_dtype dt, int rank, const int64_t *dims);
ir_type ir_type_scalar(ir_dtype dt);
bool ir_type_eq(const ir_type *a, const ir_type *b);
bool ir_type_same_shape(const ir_type *a, const ir_type *b);
int64_t ir_type_elems(const ir_type *t); /* product of dims; verified types never overflow */
int64_t ir_type_bytes(const ir_type *t);
/* Checks that elems and bytes fit (<= IR_MAX_BYTES). */
bool ir_type_size_ok(const ir_type *t);
/* "f32[8,16,28,28]".  Returns the number of characters written (snprintf). */
int ir_type_str(const ir_type *t, char *buf, size_t n);

/* ---- attributes (ir/attrs.def, ir/op.c) ------------------------------- */

typedef enum {
#define IR_ATTR(name, ENUM, vt) IR_ATTR_##ENUM,
#include "attrs.def"
#undef IR_ATTR
	IR_ATTR_COUNT
} ir_attr_kind;

typedef enum { IR_AV_INT, IR_AV_FLOAT, IR_AV_INTS, IR_AV_STR } ir_attr_vtype;

#define IR_MAX_INTS 8

typedef struct {
	ir_attr_kind kind;
	union {
		int64_t i;
		double f;
		const char *s;
		struct {
			int n;
			int64_t v[IR_MAX_INTS];
		} ints;
	} u;
} ir_attr;

const char *ir_attr_name(ir_attr_kind k);
ir_attr_vtype ir_attr_vtype_of(ir_attr_kind k);
bool ir_attr_lookup(const char *s, size_t n, ir_attr_kind *out);

/* ---- ops (ir/ops.def, ir/op.c) ---------------------------------------- */

typedef enum {
#define IR_OP(name, ENUM, mn, mx, req, opt, rule, flags, interp, native) IR_OP_##ENUM,
#include "ops.def"
#undef IR_OP
	IR_OP_COUNT
} ir_op;

enum {
	IR_OPF_SRC = 1u << 0,  /* no operands; the value comes from outside */
	IR_OPF_FX = 1u << 1,   /* effect beyond its result: a root for DCE */
	IR_OPF_UPD = 1u << 2,  /* writes its result into operand 0's storage */
	IR_OPF_INPL = 1u << 3, /* result may reuse operand 0's buffer */
	IR_OPF_FUSE = 1u << 4, /* computable element by element in a fusion group */
	IR_OPF_ROW = 1u << 5,  /* a reduction over each row of the last axis that may
	                          open a fusion group along it (IR_MAX_GROUP) */
};

typedef struct ir_node ir_node;

/* A shape rule checks operand types and attributes and computes the result
 * type into *out.  *out arrives holding the declared type (or rank -1 when
 * there is none): rules for ops whose result cannot be derived from operands
 * alone (e.g. conv2d_dx) read it and check it for consistency.  On a
 * violation a rule adds a diagnostic at n->pos and returns false. */
typedef bool (*ir_shape_rule)(const ir_node *n, ir_type *out, ir_diags *d);

typedef struct {
	const char *name;
	int min_arity, max_arity;
	uint32_t req_attrs, opt_attrs; /* bit masks over ir_attr_kind */
	ir_shape_rule rule;
	uint32_t flags;
} ir_op_info;

const ir_op_info *ir_op_get(ir_op op);
const char *ir_op_name(ir_op op);
bool ir_op_lookup(const char *s, size_t n, ir_op *out);
static inline bool ir_op_has(ir_op op, uint32_t flag) { return (ir_op_get(op)->flags & flag) != 0; }
/* param and state: the persistent tensors, named, living in the store
 * across steps rather than in the step's memory. */
static inline bool ir_op_is_persistent(ir_op op) { return op == IR_OP_PARAM || op == IR_OP_STATE; }

/* ---- roles ------------------------------------------------------------ */

typedef enum { IR_ROLE_FWD, IR_ROLE_BWD, IR_ROLE_RECOMPUTE, IR_ROLE_OPT, IR_ROLE_COUNT } ir_role;

const char *ir_role_name(ir_role r);
bool ir_role_lookup(const char *s, size_t n, ir_role *out);

/* ---- couplings (ir/unit.c; rules: ir/verify_units.c, docs/ir.md) -------- */

/* A reversible unit is an additive coupling of two streams,
 *     y1 = D(x1) + F(x2),   y2 = D(x2) + G(y1),
 * marked on its nodes: node->unit is the unit's number (0, 1, ...) and
 * node->part the part of it the node is in.  D is the identity in an
 * invertible unit, which then has no D nodes.  x1 and x2 are not marked:
 * they are y1's and y2's operand 0 (D's input when there is one).  Nodes
 * derived from a unit's nodes (gradients, recomputations, reconstructions)
 * carry the marking of the node they derive from. */
typedef enum {
	IR_PART_NONE, /* in no unit (node->unit is -1) */
	IR_PART_F,    /* inside F */
	IR_PART_G,    /* inside G */
	IR_PART_Y1,   /* the addition y1 = D(x1) + F(x2) */
	IR_PART_Y2,   /* the addition y2 = D(x2) + G(y1) */
	IR_PART_D,    /* the downsample D of a unit that cannot be inverted */
	IR_PART_COUNT
} ir_unit_part;

const char *ir_unit_part_name(ir_unit_part p); /* "f", "y1", ... ("" for none) */
bool ir_unit_part_lookup(const char *s, size_t n, ir_unit_part *out);

/* What the backward pass does for a unit: its decision, written on the
 * unit's forward y1 node (node->keep, node->keep_from; docs/ir.md).  The
 * passes revbwd and checkpoint write the decisions their strategy makes and
 * carry out the ones a graph carries. */
typedef enum {
	IR_KEEP_NONE,      /* undecided, or not a unit's forward y1 */
	IR_KEEP_STORE,     /* keep what the unit's gradients read */
	IR_KEEP_INVERT,    /* reconstruct x2 = y2 - G(y1), x1 = y1 - F(x2) */
	IR_KEEP_RECOMPUTE, /* recompute G from y1 and F from x2 as they stand */
	IR_KEEP_RERUN,     /* rerun the forward of units keep_from .. this one
	                      (a segment) from keep_from's stored inputs */
	IR_KEEP_COUNT
} ir_unit_keep;

const char *ir_unit_keep_name(ir_unit_keep k); /* "store", ... ("" for none) */
bool ir_unit_keep_lookup(const char *s, size_t n, ir_unit_keep *out);

/* ---- nodes and graphs (ir/graph.c) ------------------------------------ */

struct ir_node {
	ir_op op;
	ir_role role;
	ir_type type;      /* the result value's type */
	const char *name;  /* param/state name printed as $name; NULL otherwise */
	ir_node **in;      /* operands, nin of them */
	int nin;
	ir_node **after;   /* ordering edges: nodes that must run first */
	int nafter, cap_after;
	ir_attr *attrs;    /* sorted by kind, no duplicates */
	int nattrs;
	ir_pos pos;        /* where the node came from (spec or IR file) */
	const char *scope; /* the model part it belongs to ("s0.u1.g"), or NULL:
	                      set by lowering, inherited by gradients and
	                      recomputations; names and reports only (the
	                      structure is in unit and part) */
	int unit;          /* the reversible unit it is part of, or -1 ... */
	ir_unit_part part; /* ... and which part (IR_PART_NONE when unit is -1) */
	ir_unit_keep keep; /* on a unit's forward y1: its decision ... */
	int keep_from;     /* ... and for IR_KEEP_RERUN the segment's first unit */
	bool pos_printed;  /* print pos as loc(...): false for positions that are
	                      just the IR text line the node was parsed from */
	/* Annotations written by later passes; -1 when unset. */
	int group;         /* fusion group (fuse): see IR_MAX_GROUP */
	int64_t offset;    /* arena offset of the value in bytes (plan) */
	int64_t ws_offset, ws_bytes; /* its kernel's workspace in the arena (plan) */
	int live_begin, live_end; /* schedule interval of the value (liveness) */
	int label;         /* N of the %N the node was parsed as, or -1: the
	                      verifier names values as their source did */
	/* The index in the graph's node list (kept current: see
	 * ir_graph_ids_current).  Scratch for passes: a stamp for traversals
	 * (the verifier); the id the node had when a pass that moves nodes
	 * began (fuse and optim key their reader indexes by it). */
	int id;
	int mark;
	int start_id;
};

/* A fusion group is a run of consecutive nodes with one group number, at
 * most this many, all computable element by element (IR_OPF_FUSE, float)
 * with one result type, each after the first reading an earlier one.  The
 * first may instead be a row reduction (IR_OPF_ROW: ln_stats, ln_dx), whose
 * pass over a row runs ahead of the group's loop over that row's elements;
 * the group's type is then that of the rows it reduces (ir_group_type). */
#define IR_MAX_GROUP 32
/* Operands an op computable in a group (IR_OPF_FUSE) takes at most
 * (ops.def; ir/op.c checks it). */
#define IR_MAX_FUSE_ARITY 6
/* How an op computable in a group broadcasts operands smaller than its
 * result (scalars aside): per channel (axis 1), along the rows of the last
 * axis (layer norm, token_mean_grad), or not at all (broadcast_add, whose b
 * repeats along the leading dimensions, reads at the element index in any
 * loop).  A group's kernel runs over one kind of row, so no group has
 * members of both kinds. */
typedef enum { IR_BCAST_NONE, IR_BCAST_CHANNEL, IR_BCAST_LAST_AXIS } ir_bcast;
ir_bcast ir_node_bcast(const ir_node *n);
/* The type of the elements a group opened by n runs over: n's result type,
 * or, for a row reduction (IR_OPF_ROW), that of the rows it reduces. */
const ir_type *ir_group_type(const ir_node *n);

typedef struct {
	ir_arena *arena;
	const char *name;  /* without the @ */
	ir_node **nodes;   /* in execution order */
	int n, cap;
	const char **passes; /* passes already applied, in order */
	ir_pos *pass_pos;    /* where each was listed (a passes(...) header), or {0};
	                        allocated with passes */
	int npasses;
} ir_graph;

ir_graph *ir_graph_new(const char *name);
void ir_graph_free(ir_graph *g);
/* Creates a node and appends it.  Operands are copied.  The result type is
 * left with rank -1; set it or run ir_node_infer. */
ir_node *ir_node_new(ir_graph *g, ir_op op, ir_node *const *in, int nin);
/* Same, at a given list position (0..g->n). */
ir_node *ir_node_insert(ir_graph *g, int at, ir_op op, ir_node *const *in, int nin);
/* Infers n->type from operands and attributes by the op's shape rule. */
bool ir_node_infer(ir_node *n, ir_diags *d);

void ir_node_set_int(ir_graph *g, ir_node *n, ir_attr_kind k, int64_t v);
void ir_node_set_float(ir_graph *g, ir_node *n, ir_attr_kind k, double v);
void ir_node_set_str(ir_graph *g, ir_node *n, ir_attr_kind k, const char *s);
void ir_node_set_ints(ir_graph *g, ir_node *n, ir_attr_kind k, const int64_t *v, int count);
const ir_attr *ir_node_attr(const ir_node *n, ir_attr_kind k);
/* Attribute getters for attributes the verifier guarantees present. */
int64_t ir_node_int(const ir_node *n, ir_attr_kind k);
double ir_node_float(const ir_node *n, ir_attr_kind k);
const char *ir_node_str(const ir_node *n, ir_attr_kind k);

/* Adds an ordering edge "n runs after dep" unless it is already there. */
void ir_node_add_after(ir_graph *g, ir_node *n, ir_node *dep);

/* Whether n's value needs a buffer of its own in the step's memory: not a
 * persistent tensor, an output (its operand's value) or an update (written
 * into operand 0's storage). */
bool ir_node_has_own_buffer(const ir_node *n);

/* Is r a reduce_sum of bn_dgamma d's dy, of its type, over every axis but
 * the channel one (batch norm's dbeta beside its dgamma)? */
bool ir_node_is_dbeta(const ir_node *d, const ir_node *r);

/* "%12" (the parsed label, else the list index) or "$name", for messages. */
const char *ir_node_ref(const ir_node *n, char *buf, size_t len);
/* A diagnostic at node n, as the verifier words them: "%12 (conv2d): msg". */
void ir_diag_node(ir_diags *d, const ir_node *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Sets node->id to the list index for every node. */
void ir_graph_renumber(ir_graph *g);
/* Whether every node's id is its list index.  The functions that change
 * the list keep it so (ir_node_insert, ir_graph_remove, ir_graph_reorder),
 * as must a pass that moves nodes itself; so functions that only read a
 * graph rely on it (and assert it) instead of renumbering. */
bool ir_graph_ids_current(const ir_graph *g);
/* Removes the nodes for which dead[node->id] is true (ids must be current),
 * dropping ordering edges to them, then renumbers. */
void ir_graph_remove(ir_graph *g, const bool *dead);
/* Reorders the node list to order (a permutation of the nodes), renumbers. */
void ir_graph_reorder(ir_graph *g, ir_node **order);
void ir_graph_mark_pass(ir_graph *g, const char *pass);
/* Same, recording where the pass was listed. */
void ir_graph_mark_pass_at(ir_graph *g, const char *pass, ir_pos pos);
bool ir_graph_has_pass(const ir_graph *g, const char *pass);
/* Where g lists pass (in a passes(...) header), or {0} when it does not
 * list it there. */
ir_pos ir_graph_pass_pos(const ir_graph *g, const char *pass);

/* Marks n as part `part` of unit `unit` (-1 and IR_PART_NONE: of none). */
static inline void ir_node_set_unit(ir_node *n, int unit, ir_unit_part part)
{
	n->unit = part == IR_PART_NONE ? -1 : unit;
	n->part = unit < 0 ? IR_PART_NONE : part;
}

/* Marking the units of a graph as it is built, one call per part:
 *     ir_unit_marker m;
 *     ir_unit_begin(&m, g, k);
 *     ... make F's nodes ...        ir_unit_mark(&m, IR_PART_F);
 *     ... make y1 = x1 + F ...      ir_unit_mark(&m, IR_PART_Y1);
 * Each call marks the nodes appended since the previous one (or since
 * ir_unit_begin).  Units are numbered by the builder: 0, 1, ... in forward
 * order. */
typedef struct {
	ir_graph *g;
	int unit;
	int from; /* the first node not yet marked */
} ir_unit_marker;

void ir_unit_begin(ir_unit_marker *m, ir_graph *g, int unit);
void ir_unit_mark(ir_unit_marker *m, ir_unit_part part);

/* ---- readers of each value (ir/users.c) ------------------------------- */

/* The readers of node i (its id when the index was built) are
 * user[start[i] .. start[i + 1]), in list order, once per operand slot. */
typedef struct {
	int n;
	int *start;
	ir_node **user;
} ir_users;

/* Indexes g (its ids current); dies on out of memory as the graph does. */
void ir_users_build(const ir_graph *g, ir_users *u);
void ir_users_free(ir_users *u);

/* ---- text format (ir/print.c, ir/parse.c); grammar in docs/ir.md ------- */

/* Prints the graph in the text format.  Values are numbered %0, %1, ... in
 * list order, so the output is deterministic. */
void ir_print(FILE *out, const ir_graph *g);
/* Same, into a malloc'd string (caller frees). */
char *ir_print_str(const ir_graph *g);

/* Limits the parser enforces on any input. */
#define IR_MAX_LINE 65536
#define IR_MAX_NODES 10000000
#define IR_MAX_PASSES 64 /* names in passes(...) */

/* Parses one graph from text (len bytes, need not be NUL-terminated).  file
 * names the source for positions.  On error returns NULL with exactly one
 * diagnostic in d. */
ir_graph *ir_parse(const char *file, const char *text, size_t len, ir_diags *d);

/* ---- verifier (ir/verify.c) and Graphviz (ir/dot.c) ------------------- */

/* Checks every invariant a graph must hold and reports every violation, each
 * at its node.  Returns true when there was none. */
bool ir_verify(const ir_graph *g, ir_diags *d);

/* Checks an arena plan (mem, ws and live annotations, ir/verify_plan.c):
 * every value is live when read, and no two buffers live at one step
 * overlap, but for an in-place op sharing its operand 0's buffer.
 * ir_verify runs it when a graph has a plan. */
bool ir_verify_plan(const ir_graph *g, ir_diags *d);

/* Checks the marking of the reversible units (ir/verify_units.c, rules in
 * docs/ir.md).  ir_verify runs it on every acyclic graph. */
bool ir_verify_units(const ir_graph *g, ir_diags *d);

void ir_dot(FILE *out, const ir_graph *g);

/* ---- the step ABI's argument order (ir/slots.c) ------------------------ */

/* slot[i] (g->n of them) is node i's index in the step's persist[] (its
 * param and state nodes) or inputs[] (its input nodes), in list order, and
 * -1 for other nodes (runtime/revc_abi.h).  Return how many there are. */
int ir_persist_slots(const ir_graph *g, int *slot);
int ir_input_slots(const ir_graph *g, int *slot);

#endif
