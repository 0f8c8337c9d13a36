/* passes.h: the pass manager, the pipeline, and every pass.
 *
 * Every pass has the same signature, int ps_<name>(ir_graph *, ps_ctx *),
 * returns 0 on success and on failure returns nonzero with diagnostics in
 * ctx->diags.  Passes never print; the manager alone dumps, verifies and
 * stops, as the pipeline table and the ps_options say. */
#ifndef REVC_PASSES_H
#define REVC_PASSES_H

#include <stdio.h>

#include "ir.h"

/* How the backward pass keeps what it needs of the forward pass. */
typedef enum {
	PS_STORE,      /* ordinary backprop: every activation is kept */
	PS_REVNET,     /* reversible units reconstruct their inputs */
	PS_CHECKPOINT, /* keep every sqrt(n)-th unit output, recompute the rest */
	PS_AUTO,       /* per-unit decisions given (ps_ctx.decisions; passes/keep.c) */
	PS_STRATEGY_COUNT
} ps_strategy;

/* The strategy every command uses unless told otherwise (ps_ctx_init):
 * revnet, the reason revc exists. */
#define PS_STRATEGY_DEFAULT PS_REVNET

const char *ps_strategy_name(ps_strategy s);
bool ps_strategy_lookup(const char *name, ps_strategy *out);

/* Bytes of scratch memory the backend's kernel for n needs. */
typedef int64_t (*ps_workspace_fn)(const ir_node *n, void *user);

/* What a pass may read besides the graph. */
typedef struct {
	ir_diags diags;       /* user-facing errors from passes */
	ps_strategy strategy; /* revbwd (default PS_STRATEGY_DEFAULT) */
	const char *decisions; /* revbwd, strategy auto: one letter a unit and segment (ps_keep_parse); NULL: all stored */
	bool no_order_edges;  /* schedule: no ordering edges, naive order */
	bool optimizer;       /* optim: add the SGD step (else gradients stay outputs) */
	double momentum;      /* optim: SGD momentum (docs/model.md: 0.9) */
	double weight_decay;  /* optim: on conv and dense weights (2e-4) */
	bool adamw;           /* optim: AdamW instead of momentum SGD */
	double beta1, beta2, eps; /* optim: AdamW's (0.9, 0.999, 1e-8) */
	ps_workspace_fn workspace; /* schedule, liveness, plan: the backend's needs (NULL: none) */
	void *workspace_user;      /* passed to workspace */
	const char *schedule; /* schedule: the heuristic it chose (set by the pass) */
	/* ---- data parallelism (issue 15) */
	int ranks;            /* allreduce: the processes the step is for (0: the pass is off) */
	bool allreduce_overlap; /* allreduce: gradients' sums as start/wait pairs (else each one blocks) */
	/* ---- tidy: why a plan failed */
	bool too_large;       /* plan (set by the pass): it refused an arena or a workspace beyond IR_MAX_BYTES; the driver
			       * sets it too when the spec's tensors are larger than that */
	int64_t bucket_bytes; /* allreduce: gradients summed together up to this many bytes (0: one a sum) */
} ps_ctx;

void ps_ctx_init(ps_ctx *ctx);
void ps_ctx_free(ps_ctx *ctx);

typedef int (*ps_fn)(ir_graph *g, ps_ctx *ctx);
/* What a pass that does not apply to this compilation returns (allreduce
 * for one process): the manager neither records nor dumps it, so the graph
 * reads as if the pass were not in the pipeline. */
#define PS_NOT_APPLIED (-1)

typedef struct {
	const char *name;
	ps_fn run;
	const char *requires; /* a pass that must have run first, or NULL */
	const char *why;      /* one line for --print-passes */
} ps_pass;

/* Whether pass p applies to this compilation (all do but allreduce, for
 * one process); one that does not is skipped as if it were not in the
 * table. */
bool ps_pass_applies(const ps_pass *p, const ps_ctx *ctx);

/* The pipeline, in order. */
const ps_pass *ps_pipeline(int *count);
const ps_pass *ps_pass_lookup(const char *name);

/* Manager options, set from the command line. */
typedef struct {
	const char *dump_after; /* a pass name, "all", or NULL */
	const char *dump_dir;   /* numbered files NN-pass.ir there; else dump_out */
	FILE *dump_out;         /* where dumps go without dump_dir (NULL: stderr) */
	const char *dump_tag;   /* or NULL; names a second graph's dumps: files
	                         * TAG-NN-pass.ir, headers "# ---- TAG: after pass" */
	bool verify_each;
	const char *stop_after; /* last pass to run, or NULL for all */
	const char *only;       /* comma-separated passes to run, or NULL for all */
} ps_options;

/* Steps through a comma-separated list (*p: the rest of it, NULL or ""
 * when none is left): sets *item and *len to the next name and returns
 * true, or returns false at the end.
 *     const char *p = list, *item; size_t len;
 *     while (ps_list_next(&p, &item, &len)) ... */
bool ps_list_next(const char **p, const char **item, size_t *len);
/* Whether the comma-separated list names the n bytes at name. */
bool ps_list_has(const char *list, const char *name, size_t n);

/* Checks that every pass name in opts exists; on failure writes the
 * offending name into bad and returns false. */
bool ps_options_check(const ps_options *opts, char *bad, size_t badlen);

/* Checks what g's passes(...) list claims (passes/claims.c): every name a
 * pass, each one's requirement listed, and the results later passes rely
 * on (autodiff's gradients, dce, liveness, plan) present in g as those
 * passes would have left them.  g must be verified.  On the first claim
 * that does not hold, adds a diagnostic (at the node that contradicts it,
 * or where the pass is listed) and returns false. */
bool ps_claims_check(ir_graph *g, ir_diags *d);

/* Runs the pipeline table over g.  Passes the graph already lists as applied
 * are skipped; a pass is not run on a graph that lists one after it in the
 * table (whose result it would leave stale); each pass that runs is
 * recorded on the graph (unless it returns PS_NOT_APPLIED).  The result is
 * verified after every pass with verify_each, and always at the end.
 * Returns 0, or nonzero with diagnostics in ctx->diags. */
int ps_run_table(const ps_pass *table, int n, ir_graph *g, ps_ctx *ctx, const ps_options *opts);
/* ps_run_table over the pipeline, once ps_claims_check agrees that g has
 * been through the passes it lists (so a graph that lists passes must be
 * verified first, as ps_claims_check requires). */
int ps_run(ir_graph *g, ps_ctx *ctx, const ps_options *opts);

/* ---- reversible units and recomputation (passes/units.c) ---------------- */

/* One reversible unit, as its marking says (ir.h, docs/ir.md). */
typedef struct {
	ir_node *x1, *x2;     /* inputs */
	ir_node *y1, *y2;     /* outputs: y1 = D(x1) + F(x2), y2 = D(x2) + G(y1) */
	ir_node *f_out, *g_out;
	bool invertible;      /* D is the identity: the unit has no D nodes */
	/* Units k - 1 and k are in one chain when k is invertible and its
	 * inputs are k - 1's outputs; chains are numbered 0, 1, ... (a stage
	 * of a RevNet, whose first unit downsamples, is one). */
	int chain;
} ps_unit;

/* The units of g, unit k at index k (its number), malloc'd.  A verified
 * graph's units are complete; in one that is not (DCE removed a unit's
 * unused y2 and its G), y1 or y2 is NULL and passes leave the unit alone. */
int ps_units_find(const ir_graph *g, ps_unit **units);

/* Where every node sits among the units, so passes visit a unit's nodes
 * without scanning the graph: for the node with id i (ids as when built),
 * unit[i] is its unit (node->unit) or -1, and part[i] its part.  The ids
 * of unit k's nodes, in list order, are ids[start[k] .. start[k + 1]). */
typedef struct {
	int n;
	int *unit;
	ir_unit_part *part;
	int *start, *ids;
} ps_unit_map;

/* Renumbers g and maps its nodes to its nu units (from ps_units_find). */
void ps_unit_map_build(ir_graph *g, int nu, ps_unit_map *m);
void ps_unit_map_free(ps_unit_map *m);
/* x[2 * k] and x[2 * k + 1] (2 * nu slots, filled with NULL where none):
 * unit k's reconstructions x2 = y2 - G(y1) and x1 = y1 - F(x2), the first
 * recompute subtractions marked y2 (y1) whose operand 1 is marked g (f) in
 * the same unit.  m is g's unit map. */
void ps_reconstructions(const ir_graph *g, const ps_unit_map *m, int nu, ir_node **x);

/* Forward values and their recomputed (or reconstructed) stand-ins.  New
 * nodes are appended to the graph and recorded with the original node they
 * must precede; ps_recompute_finish puts them there, so a pass adds any
 * number of nodes in time linear in the graph. */
typedef struct {
	ir_graph *g;
	ir_node **map;  /* by original id */
	ir_node **orig; /* the node list when the map was made */
	int n;
	int *before;    /* for each appended node, the original id it precedes */
	int nadded, cap_added;
} ps_recompute;

void ps_recompute_init(ps_recompute *r, ir_graph *g);
/* Moves every appended node just before the original it was placed
 * before (in the order they were added), renumbers, and frees r. */
void ps_recompute_finish(ps_recompute *r);
/* n's stand-in, or n itself. */
ir_node *ps_recompute_of(const ps_recompute *r, ir_node *n);
void ps_recompute_set(ps_recompute *r, ir_node *fwd, ir_node *value);
/* Records n, just appended to the graph, to go before original node at. */
void ps_recompute_place(ps_recompute *r, ir_node *n, const ir_node *at);
/* Adds before original node `at` a copy of forward node n with role
 * recompute, reading the stand-ins of n's operands. */
ir_node *ps_recompute_clone(ps_recompute *r, ir_node *n, const ir_node *at);
/* Replaces n's operands by their stand-ins. */
void ps_recompute_redirect(const ps_recompute *r, ir_node *n);

/* ---- per-unit decisions (passes/keep.c) ---------------------------------- */

/* A unit's decision: what its gradients read (ir_unit_keep), and for
 * IR_KEEP_RERUN the first unit of its segment (else the unit itself). */
typedef struct {
	ir_unit_keep keep;
	int from;
} ps_keep;

/* Decisions as letters, one a unit: s store, i invert, r recompute, c rerun
 * (a segment begins here), + rerun with the unit before.  Parse fills
 * out[0 .. nu) or says why not (false); format writes nu letters and a NUL. */
bool ps_keep_parse(const char *s, int nu, ps_keep *out, char *why, size_t whylen);
void ps_keep_format(const ps_keep *keep, int nu, char *buf);
/* The longest decisions string: a letter a unit and a segment. */
#define PS_MAX_LETTERS 2048

/* Non-invertible segments: the forward nodes outside the units (no sources,
 * nothing with side effects), segment j being those after unit j - 1's
 * forward nodes and before unit j's in list order (0 the stem, nu the
 * head); a segment is present when a gradient reads one of its values.
 * Find writes the present segments' places (0 .. nu) to at (nu + 1 slots)
 * and returns how many.  Parse reads the S (store) and R (recompute)
 * letters of s, one a present segment, in order (none: all stored); read
 * gives what the graph's nodes carry (keep(recompute)).  Decisions format
 * writes the units' letters with the segments' at their places, or the
 * units' alone when every segment is stored. */
int ps_segments_find(ir_graph *g, int nu, int *at);
/* seg[i]: the segment of node i (ids current), -1 for nodes of units,
 * sources and nodes with side effects. */
void ps_segments_index(const ir_graph *g, int *seg);
bool ps_segments_parse(const char *s, int ns, bool *rec, char *why, size_t whylen);
void ps_segments_read(ir_graph *g, int nu, const int *at, int ns, bool *rec);
void ps_decisions_format(const ps_keep *keep, int nu, const int *at, const bool *rec, int ns, char *buf);
/* The decisions units carry (on their y1), and whether any does. */
bool ps_keep_read(const ps_unit *u, int nu, ps_keep *out);
/* Writes keep on the units' y1 (and, rec given, rec on the ns segments at
 * at: ps_segments_find) and carries them out (keep.c says how). */
void ps_keep_apply(ir_graph *g, const ps_unit *u, int nu, const ps_keep *keep, const int *at, const bool *rec,
	int ns);
/* Whether some unit of g is inverted (so ordering edges apply). */
bool ps_keep_inverts(const ir_graph *g);

/* ---- strategy auto's choice (passes/auto.c) ------------------------------- */

/* What one unit costs and holds under each decision (auto.c says how). */
typedef struct {
	int64_t saved_bytes;     /* A: F, G and D values its gradients read */
	int64_t out_bytes;       /* O: y1 and y2 */
	double recompute_flops;  /* F and G again */
	double invert_flops;     /* and the two subtractions */
	double rerun_flops;      /* its whole forward: F, G, D, y1, y2 */
	int64_t in1_bytes, in2_bytes; /* x1, x2 when no unit made them (else 0) */
	bool invertible;
	bool follows;            /* continues the previous unit's chain */
} ps_auto_unit;

/* A segment (the forward outside the units, ps_segments_find): stored or
 * recomputed. */
typedef struct {
	int at;                  /* its place: 0 the stem, n the head */
	int64_t saved_bytes;     /* its values a gradient reads */
	double flops;            /* its forward again */
} ps_auto_seg;

typedef struct {
	int n;
	ps_auto_unit *unit;
	int nseg;
	ps_auto_seg *seg;        /* in order of place */
	double step_flops;       /* the step without recomputation */
	int64_t c_fwd, c_bwd;    /* the calibrated constants (0 until calibrated) */
} ps_auto_model;

/* FLOPs of one node (auto.c). */
double ps_node_flops(const ir_node *n);
/* The model of g: its training step after autodiff, decided nothing, ids
 * current. */
void ps_auto_model_build(const ir_graph *g, ps_auto_model *am);
void ps_auto_model_free(ps_auto_model *am);
/* Sets the constants so that the model's forward end and backward peak of
 * decisions d are fwd_end and bwd_peak (bytes, as totals). */
void ps_auto_model_calibrate(ps_auto_model *am, const ps_keep *d, const bool *rec, int64_t fwd_end,
	int64_t bwd_peak);
/* The model's total and the recomputation FLOPs of decisions d, with the
 * segments recomputed where rec says (nseg of them). */
int64_t ps_auto_model_peak(const ps_auto_model *am, const ps_keep *d, const bool *rec);
double ps_auto_model_cost(const ps_auto_model *am, const ps_keep *d, const bool *rec);
/* Whether the program decides segment j: the first four before the head
 * (the head, whose backward comes right after its forward, stays stored). */
bool ps_auto_seg_choice(const ps_auto_model *am, int j);
/* The cheapest decisions whose model total is at most budget, into out[0 ..
 * n) and rec[0 .. nseg); false when none fits. */
bool ps_auto_solve(const ps_auto_model *am, int64_t budget, ps_keep *out, bool *rec);

/* ---- the memory model (passes/memory.c) --------------------------------- */

typedef enum {
	PS_MEM_PARAMS,    /* parameters and running statistics (persistent) */
	PS_MEM_GRADS,     /* parameter gradients */
	PS_MEM_OPTSTATE,  /* momentum buffers, AdamW moments and step (persistent) */
	PS_MEM_SAVED,     /* forward values the backward pass reads */
	PS_MEM_TRANSIENT, /* other activations, recomputations, gradients */
	PS_MEM_WORKSPACE, /* kernel scratch */
	PS_MEM_CAT_COUNT
} ps_mem_cat;

const char *ps_mem_cat_name(ps_mem_cat c); /* "saved activations" */
const char *ps_mem_cat_key(ps_mem_cat c);  /* "saved", for JSON */

/* Buffers and live bytes of a graph run in a given order (rules: memory.c). */
typedef struct {
	int steps;
	int nbuf;
	int *buf_of;          /* by node id: its value's buffer, or -1 */
	int64_t *bytes;       /* by buffer */
	int *begin, *end;     /* by buffer: first and last step it is live */
	ps_mem_cat *cat;      /* by buffer */
	ir_node **first;      /* by buffer: the value it was made for */
	int64_t *ws;          /* by step: workspace bytes */
	int64_t *live;        /* [step * PS_MEM_CAT_COUNT + cat]: live bytes */
	int64_t persistent[PS_MEM_CAT_COUNT]; /* PARAMS and OPTSTATE */
	int64_t peak;         /* fragmentation-free peak: max live bytes at a step */
	int peak_step;
	int64_t saved_transient_peak; /* max over steps of saved + transient */
} ps_memory;

/* Computes the model for g run in `order` (a permutation of g's nodes). */
bool ps_memory_compute(const ir_graph *g, ir_node *const *order, ps_workspace_fn ws, void *ws_user,
	ps_memory *m);
void ps_memory_free(ps_memory *m);
/* The persistent bytes of g (ids must be list positions): persistent[
 * PS_MEM_PARAMS] and [PS_MEM_OPTSTATE]; other entries are left alone. */
void ps_memory_persistent(const ir_graph *g, int64_t persistent[PS_MEM_CAT_COUNT]);
/* Does op update optimiser state (its operand 0: a momentum buffer, AdamW's
 * moments or step count) in place? */
bool ps_optimizer_update(ir_op op);

/* ---- passes (one file each) ------------------------------------------- */

int ps_shape(ir_graph *g, ps_ctx *ctx);
int ps_autodiff(ir_graph *g, ps_ctx *ctx);
int ps_revbwd(ir_graph *g, ps_ctx *ctx);
int ps_checkpoint(ir_graph *g, ps_ctx *ctx);
int ps_optim(ir_graph *g, ps_ctx *ctx);
int ps_dce(ir_graph *g, ps_ctx *ctx);
/* The list position of the first node ps_dce would remove, or -1. */
int ps_dce_first_dead(ir_graph *g);
int ps_schedule(ir_graph *g, ps_ctx *ctx);
/* The ordering edges of the reversible backward pass (edges.c), which
 * ps_schedule inserts under strategy revnet. */
void ps_order_edges(ir_graph *g);
int ps_fuse(ir_graph *g, ps_ctx *ctx);
int ps_liveness(ir_graph *g, ps_ctx *ctx);
int ps_plan(ir_graph *g, ps_ctx *ctx);
/* Data parallelism (issue 15): the reductions over ctx->ranks processes. */
int ps_allreduce(ir_graph *g, ps_ctx *ctx);
bool ps_allreduce_applies(const ps_ctx *ctx); /* ctx->ranks >= 1 */

/* Arena offsets are multiples of this. */
#define PS_ALIGN 64
/* The arena a planned graph needs: the top of its highest buffer. */
int64_t ps_arena_bytes(const ir_graph *g);

/* The output name under which autodiff leaves a parameter's gradient:
 * "grad:" followed by the parameter's name. */
#define PS_GRAD_PREFIX "grad:"
/* The parameter whose gradient output n is ("grad:w" -> "w"), or NULL
 * when n is not one (passes/autodiff.c). */
const char *ps_grad_param_name(const ir_node *n);
/* The name of param's gradient output, into buf; returns buf. */
const char *ps_grad_output_name(char *buf, size_t len, const char *param);

#endif
