/* internal.h: what the driver's files share behind revc.h: the model
 * handle, errors from the lower modules' diagnostics, the engine glue and
 * the pipeline choices (workspace, evaluation pipeline, --max-memory).
 * The CLI goes through revc.h (it borrows only tools.h's JSON string
 * escaper); nothing below the driver includes this. */
#ifndef REVC_DRV_INTERNAL_H
#define REVC_DRV_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "fe.h"
#include "ir.h"
#include "passes.h"
#include "revc.h"
#include "rt.h"

/* ---- errors (driver/error.c) --------------------------------------------- */

struct revc_error {
	revc_error_kind kind;
	char *msg;      /* lines ending in '\n' */
	bool too_large; /* revc_error_too_large's */
};

/* A source text diagnostics may point into (a spec, the --set lines, an
 * IR file). */
typedef struct {
	const char *path;
	const char *text;
	size_t len;
} drv_source;

/* Diagnostics a formatter writes at most (the lower modules keep
 * IR_MAX_DIAGS and count the rest). */
#define DRV_MAX_DIAGS 20

/* d's diagnostics as the command prints them: each "file:line:col: error:
 * ..." with its source line and caret where srcs holds the file; the first
 * DRV_MAX_DIAGS, then "... and N more errors".  Malloc'd. */
char *drv_diags_format(const ir_diags *d, const drv_source *srcs, int nsrcs);
/* Set *err (when err is not NULL) and return false. */
bool drv_error_diags(revc_error **err, revc_error_kind kind, const ir_diags *d, const drv_source *srcs,
	int nsrcs);
/* "revc: error: MSG\n", the form of errors without a source position. */
bool drv_errorf(revc_error **err, revc_error_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool drv_error_rt(revc_error **err, const rt_err *e);

/* Sizes: revc_parse_size and revc_format_bytes (revc.h, driver/size.c). */

/* ---- engines (driver/engine.c) ----------------------------------------------- */

#define DRV_MAX_JITS 4

/* How graphs run: the reference interpreter, or native code from the LLVM
 * JIT for a CPU.  The engine decides how many threads work and what
 * workspace the planner reserves. */
typedef struct {
	revc_engine kind;
	int threads;
	cg_options cg;
	cg_stats stats;
	rt_pool *pool;
	bool pool_borrowed; /* another engine's (drv_engine_share_pool), not freed here */
	cg_jit *jit[DRV_MAX_JITS];
	int njit;
	cg_kcache *kcache; /* the kernels of jit[0 .. njit), which later compiles call (cg.kcache) */
} drv_engine;

/* Whether code for cpu (NULL: native) may run here with kind: --cpu with
 * the interpreter is a usage error, a CPU this host cannot run a user
 * error. */
bool drv_engine_check(revc_engine kind, const char *cpu, revc_error **err);
/* Sets BLAS threads; native code is for cpu (NULL or "native": this host),
 * run by a thread pool started with the first compiled graph. */
void drv_engine_init(drv_engine *e, revc_engine kind, int threads, const char *cpu);
/* The workspace the engine's kernels need, for the planner. */
void drv_engine_plan(drv_engine *e, ps_ctx *ctx);
/* Prepares to run planned g (compiling it for the JIT). */
rt_exec *drv_engine_exec(drv_engine *e, const ir_graph *g, rt_store *store, revc_error **err);
/* The same with the errors in d (for the tools, whose errors are diagnostics). */
rt_exec *drv_engine_exec_diags(drv_engine *e, const ir_graph *g, rt_store *store, ir_diags *d);
/* Makes `to` run its native code on `from`'s thread pool (which `from`
 * must have: it has compiled a graph), before `to` compiles one; `from`
 * must outlive `to`'s runs.  Two builds timed side by side then use the
 * same worker threads, and neither's idle workers spin beside the
 * other's steps. */
void drv_engine_share_pool(drv_engine *to, const drv_engine *from);
void drv_engine_free(drv_engine *e);
const char *drv_engine_name(const drv_engine *e);
/* The CPU native code is for ("x86-64-v3", or the host's name when native,
 * with *native set). */
const char *drv_engine_cpu(const drv_engine *e, char *buf, size_t len, bool *native);
/* "jit (znver4)", "jit (x86-64-v3)" or "interp". */
const char *drv_engine_label(const drv_engine *e, char *buf, size_t len);

/* ---- specs and the pipeline (driver/spec.c, driver/pipeline.c) ------------- */

/* A spec read with its overrides, and the texts diagnostics point into. */
typedef struct {
	char *path;
	char *text;
	size_t len;
	char *sets_text; /* the sets, one per line */
	size_t sets_len;
	fe_spec spec;
} drv_spec;

/* Parses text (len bytes; name is what diagnostics call it), applies the
 * sets and checks the spec.  On failure s holds nothing. */
bool drv_spec_parse(drv_spec *s, const char *name, const char *text, size_t len, const char *const *sets,
	int nsets, revc_error **err);
/* Reads the file first. */
bool drv_spec_load(drv_spec *s, const char *path, const char *const *sets, int nsets, revc_error **err);
void drv_spec_free(drv_spec *s);
/* d as an error against s's sources. */
bool drv_spec_error(const drv_spec *s, const ir_diags *d, revc_error **err);

/* ctx takes s's optimiser settings, and the interpreter's workspace unless
 * one is set. */
void drv_ctx_settings(ps_ctx *ctx, const fe_spec *s);
/* Lowers the spec and runs the pipeline as opts say (ctx: the spec's
 * optimiser settings, and the interpreter's workspace unless one is set);
 * NULL with the errors in ctx->diags. */
ir_graph *drv_spec_plan(const fe_spec *s, ir_dtype dt, fe_lower_mode mode, ps_ctx *ctx, const ps_options *opts);

/* The passes an evaluation graph goes through: no autodiff, no optimiser. */
extern const ps_options drv_eval_passes;
/* The eval pipeline under the user's pass options: *out is user with the
 * dump tag "eval" and, of drv_eval_passes, only the passes user->only names
 * (all without it), written into only[n].  Returns out. */
const ps_options *drv_eval_options(const ps_options *user, ps_options *out, char *only, size_t n);

/* The plan's total: parameters + optimiser state of graphs[0] + the arenas
 * of all n graphs; its parts in part[3] when not NULL. */
int64_t drv_plan_bytes(ir_graph *const *graphs, int n, int64_t *part);
/* With limit >= 0, the plan of the n graphs must fit in limit bytes, else
 * an error (REVC_ERR_USER) naming the total and the limit. */
bool drv_check_max_memory(int64_t limit, ir_graph *const *graphs, int n, revc_error **err);

/* ---- datasets (driver/data.c) ------------------------------------------------ */

struct revc_dataset {
	rt_dataset d;
	char name[RT_PATH_MAX]; /* as given: "fashion-mnist", "cifar10:DIR" */
};

/* The memory timeline of planned g as SVG text (driver/timeline.c). */
char *drv_timeline_svg(const char *model, int64_t batch, ps_strategy s, const ir_graph *g, const ps_memory *m);

/* ---- SVG figures (driver/svg.c) -------------------------------------------- */

/* Width of a character, in font sizes: above DejaVu Sans's average. */
#define DRV_SVG_EM 0.62
/* The estimated width of s at font size size. */
double drv_svg_text_w(const char *s, double size);
/* s as SVG character data. */
void drv_svg_escaped(FILE *f, const char *s);
/* A <text> at (x, y), anchored (NULL: start), with extra attributes. */
void drv_svg_text(FILE *f, double x, double y, const char *anchor, const char *extra, const char *s);
/* 1, 2, 2.5 or 5 times a power of ten: at most `want` intervals over span. */
double drv_svg_nice_step(double span, int want);
/* "12.5" with as many decimals as step needs. */
void drv_svg_tick_label(char *buf, size_t n, double v, double step);
/* A stream into *buf (the caller closes it, then frees *buf) that has the
 * header of a W x H canvas with a white background written. */
FILE *drv_svg_open(double W, double H, double font, char **buf, size_t *len);

/* ---- an IR file's training settings (driver/ir_settings.c) ----------------- */

/* Where the `train { ... }` block ahead of an IR file's graph is. */
typedef struct {
	bool found;
	ir_pos pos;            /* of its 'train' */
	size_t body, body_len; /* the lines between 'train {' and '}', as bytes of the text */
	int body_line;         /* the first of them */
	size_t after;          /* the bytes up to the end of the '}' line */
	ir_pos graph;          /* where the graph begins */
} drv_ir_settings;

/* Finds the block of text (len bytes, path naming it): *out->found false
 * when the file has none; false with one diagnostic in d when the block is
 * malformed (its body is not read here). */
bool drv_ir_settings_find(const char *path, const char *text, size_t len, drv_ir_settings *out, ir_diags *d);
/* A malloc'd copy of text (NUL-terminated) with the block's bytes but its
 * newlines made blanks: the graph alone, at the positions it has in the file. */
char *drv_ir_settings_blank(const char *text, size_t len, const drv_ir_settings *s);

/* Whether forward graph g can be made an evaluation graph: it lists no pass
 * but shape (driver/ir_eval.c). */
bool drv_ir_evaluable(const ir_graph *g);
/* Makes evaluable g the evaluation graph: batch norm with the running
 * statistics, their updates removed. */
void drv_ir_eval(ir_graph *g);

/* ---- the model handle (driver/model.c, driver/compile.c) ------------------- */

/* A model's graphs: the training step, the evaluation forward pass, the
 * gradients without the optimiser (bit k is revc_graph 1 << k). */
enum { DRV_STEP, DRV_EVAL, DRV_GRAD, DRV_GRAPHS };
_Static_assert(REVC_GRAPH_STEP == 1 << DRV_STEP && REVC_GRAPH_EVAL == 1 << DRV_EVAL &&
	REVC_GRAPH_GRAD == 1 << DRV_GRAD, "revc_graph bits are the driver's graphs");

struct revc_model {
	bool is_spec;
	drv_spec spec;          /* is_spec */
	char *ir_path;          /* !is_spec: the IR file and its text */
	char *ir_text;
	size_t ir_len;
	char *ir_graph_text;    /* !is_spec: ir_text with its settings blanked */
	ir_graph *ir;           /* !is_spec: the graph read, until compiled */
	bool settings;          /* !is_spec: the file carries training settings, in spec */
	ir_pos graph_pos;       /* !is_spec: where its graph begins */
	char name[FE_MAX_NAME];
	int64_t batch, classes;

	/* revc_model_compile */
	bool compiled, cut;
	revc_options opts;
	ir_dtype dt;
	drv_engine engine;
	bool engine_on;
	ir_graph *g[DRV_GRAPHS]; /* planned, as opts.graphs asked (an IR model: its step) */
	rt_store store;
	rt_exec *x[DRV_GRAPHS];  /* g's, ready to run */
	char *dumps;            /* every dump of the passes, in order */
	size_t dumps_len;
	char label[96], cpu[64];
	char decisions[REVC_MAX_LETTERS + 1]; /* strategy auto's choice (opts.decisions) */
	int64_t data_bytes;     /* of the datasets loaded for it (max_memory) */
	char loaded[RT_PATH_MAX]; /* the directory revc_load read last, or "" */
	const char *schedule;   /* the heuristic the step's schedule chose */
};

/* The training settings of m: its spec's, or those its IR file carries;
 * NULL for an IR file without them. */
const fe_spec *drv_model_settings(const revc_model *m);
/* The error when m has no settings: at its graph, naming what needs them. */
bool drv_no_settings(const revc_model *m, const char *what, revc_error **err);
/* The options a tool runs m under: *o, else a compiled m's, else the
 * defaults. */
void drv_model_options(const revc_model *m, const revc_options *o, revc_options *out);
/* The dtype m computes in: an IR file's graph's; a spec's as asked. */
revc_dtype drv_model_dtype(const revc_model *m, revc_dtype asked);
/* The processes a training step under o is for (ps_ctx.ranks): o->ranks,
 * or the world's size when that is more than 1, else 0 (no reductions). */
int drv_ranks(const revc_options *o);
/* Plans spec graph k under m's options and popts; prepares it to run. */
bool drv_model_plan(revc_model *m, int k, const ps_options *popts, revc_error **err);
bool drv_model_exec(revc_model *m, int k, revc_error **err);
/* The first graph built (the store's tensors are its). */
ir_graph *drv_model_first(const revc_model *m);
/* Plans m's spec as drv_spec_plan does, the dumps popts asks for (without
 * a dump directory) added to m's; NULL with the error against m's sources.
 * An IR model's forward graph the same way (drv_ir_plan), when it is in dt. */
ir_graph *drv_model_plan_spec(revc_model *m, ir_dtype dt, fe_lower_mode mode, ps_ctx *ctx, const ps_options *popts,
	revc_error **err);
/* The same for an IR model: its file's forward graph (one autodiff has not
 * run on) through the pipeline under ctx, with the optimiser settings the
 * file carries (the defaults without them). */
ir_graph *drv_model_plan_ir(revc_model *m, ps_ctx *ctx, const ps_options *popts, revc_error **err);
/* An IR model's graph k through the pipeline under ctx, with the file's
 * settings: the file's graph, made the evaluation graph for DRV_EVAL.
 * NULL with the errors in ctx->diags. */
ir_graph *drv_ir_plan(const revc_model *m, int k, ps_ctx *ctx, const ps_options *opts);
/* Plans m under o->strategy (and decisions) as revc_memory_plan does:
 * its total, and the total it would have if the arena were sized for the
 * bytes live when the last forward node has run (fwd_end), or for the
 * most live at a later step (bwd_peak); the arena's slack over the peak
 * counts in both. */
bool drv_memory_phases(revc_model *m, const revc_options *o, int64_t *total, int64_t *fwd_end, int64_t *bwd_peak,
	revc_error **err);
/* The planned total of m's step under o (o->strategy), as
 * revc_memory_plan's; DRV_TOO_LARGE (no error) when the plan pass refused
 * an arena or a workspace beyond IR_MAX_BYTES: a plan that fits no budget. */
#define DRV_TOO_LARGE INT64_MAX
bool drv_memory_total(revc_model *m, const revc_options *o, int64_t *total, revc_error **err);
/* The pass options of o as the manager takes them (dump_out left NULL). */
void drv_pass_options(const revc_options *o, ps_options *out);
ir_dtype drv_dtype(revc_dtype d);
/* *out describing a tensor of type t at data. */
void drv_tensor_of(const char *name, const ir_type *t, void *data, bool trainable, revc_tensor *out);
/* Appends text to the model's dumps. */
void drv_model_add_dumps(revc_model *m, const char *text, size_t len);
/* The error of a failed compile or run: ctx's diagnostics against the
 * model's sources. */
bool drv_model_error(const revc_model *m, const ir_diags *d, revc_error **err);
/* drv_model_error of a pipeline that failed with ctx, marked
 * revc_error_too_large when ctx->too_large says so. */
bool drv_plan_error(const revc_model *m, const ps_ctx *ctx, revc_error **err);

#endif
