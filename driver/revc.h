/* revc.h: librevc, the one public interface to revc.
 *
 * A model is read from a spec file, a spec string (each with KEY=VALUE
 * overrides) or an IR file, then compiled under options (strategy, dtype,
 * engine, CPU, memory limit, pass options).  A compiled model reports its
 * memory, runs training steps, evaluations and gradients, gives its
 * parameters by name as pointers into revc's memory, and loads and saves
 * checkpoints.  The drift report and ahead-of-time emission work from a
 * spec model too.
 *
 * Errors come back as values: a function that can fail returns false or
 * NULL and, when err is not NULL, sets *err to a revc_error the caller
 * frees.  Its message is the text the revc command prints: one or more
 * "file:line:col: error: ..." lines, each with the source line and a caret
 * where there is one.  Nothing in the library prints or exits.
 *
 * Objects are not shared between threads; separate models may be used from
 * separate threads. */
#ifndef REVC_H
#define REVC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ------------------------------------------------------------- */

#define REVC_VERSION_MAJOR 0
#define REVC_VERSION_MINOR 3
#define REVC_VERSION_PATCH 0

/* "0.3.0": the library's version, which may differ from the header's. */
const char *revc_version(void);

/* What this librevc was built with: LLVM's version ("19.1.7"), OpenBLAS's
 * ("OpenBLAS 0.3.21 ..."), and the kernels OpenBLAS runs on this host
 * ("SkylakeX", "Haswell"). */
const char *revc_llvm_version(void);
const char *revc_blas_version(void);
const char *revc_blas_core(void);

/* ---- errors -------------------------------------------------------------- */

typedef enum {
	REVC_ERR_USER = 1,   /* bad input: a spec, IR, data or checkpoint file; a failed check */
	REVC_ERR_USAGE = 2,  /* a bad argument: unknown option value, options that conflict */
	REVC_ERR_BUDGET = 3, /* a plan over a budget a caller set (revc mem --budget); over max_memory is a user error */
} revc_error_kind;

typedef struct revc_error revc_error;

/* The diagnostics, ready to print: lines ending in '\n'. */
const char *revc_error_message(const revc_error *e);
revc_error_kind revc_error_kind_of(const revc_error *e);
/* Whether planning failed only because something would be larger than
 * revc plans, 2^40 bytes (a tensor of the spec, a workspace, the arena): at
 * a larger batch, an error that means "does not fit" (revc mem
 * --max-batch), not a fault of the input. */
bool revc_error_too_large(const revc_error *e);
void revc_error_free(revc_error *e);

/* ---- sizes ----------------------------------------------------------------- */

/* "512MiB", "1.5GB", "2e9", "1000000": bytes; false for anything else. */
bool revc_parse_size(const char *s, int64_t *out);
/* 1536 -> "1.5 KiB", up to GiB with two decimals. */
void revc_format_bytes(char *buf, size_t n, int64_t bytes);

/* Every integer in a spec (a seed, a batch, a count of steps) is at most this. */
#define REVC_INT_MAX 2147483647

/* ---- options --------------------------------------------------------------- */

/* REVC_AUTO: per-unit decisions (revc_options.decisions, or chosen within
 * revc_options.budget by revc_auto_choose). */
typedef enum { REVC_STORE, REVC_REVNET, REVC_CHECKPOINT, REVC_AUTO } revc_strategy;
typedef enum { REVC_F32, REVC_F64 } revc_dtype;
typedef enum { REVC_JIT, REVC_INTERP } revc_engine;

/* The graphs a model compiles (a bit set; 0: step and eval).  An IR model
 * has only its step. */
typedef enum {
	REVC_GRAPH_STEP = 1, /* the training step: revc_train_step */
	REVC_GRAPH_EVAL = 2, /* the evaluation forward pass: revc_eval */
	REVC_GRAPH_GRAD = 4, /* the gradients without the optimiser: revc_grad (else built by its first call) */
} revc_graph;

typedef struct {
	unsigned graphs;        /* revc_graph bits (default 0: step and eval) */
	revc_strategy strategy; /* default REVC_REVNET */
	revc_dtype dtype;       /* default REVC_F32 */
	revc_engine engine;     /* default REVC_JIT */
	const char *cpu;        /* NULL or "native" (default), or an LLVM CPU name such as "x86-64-v3" */
	int threads;            /* default 2 */
	int64_t max_memory;     /* -1 (default): none; else refuse plans over this many bytes */
	/* Pass options, as the command's --dump-after etc. (NULL: not given). */
	const char *dump_after; /* a pass name or "all" */
	const char *dump_dir;   /* NULL: dumps go into revc_model_dump() */
	const char *dump_tag;   /* names these dumps apart from others: TAG-NN-PASS.ir */
	const char *stop_after;
	const char *passes;     /* "P1,P2": only these passes */
	bool verify_each;
	bool check_numerics;    /* stop at the first NaN or Inf, naming the node */
	bool no_order_edges;    /* no ordering edges: a naive as-soon-as-possible order */
	bool measure;           /* revc_memory_plan: also run one step in tracking mode (REVC_INTERP) */
	bool no_run;            /* plan the graphs (and check max_memory) but leave revc_model_prepare for later */
	const char *dump_llvm;  /* NULL, or a directory for each native module's .ll before and after optimisation */
	/* REVC_AUTO: each unit's decision, one letter a unit (s store, i invert,
	 * r recompute, c rerun from here, + rerun with the unit before:
	 * docs/ir.md), e.g. from revc_auto_choose. */
	const char *decisions;
	/* REVC_AUTO without decisions: revc_model_compile chooses them with
	 * revc_auto_choose within this total (-1, the default: max_memory,
	 * or with none, no budget: store). */
	int64_t budget;
	/* REVC_AUTO without decisions: the minimum-memory decisions instead
	 * (revc_auto_minimum; --strategy min), whatever the budget. */
	bool minimum;
	/* ---- data parallelism (issue 15; docs/distributed.md) */
	/* The processes the training step is for: 0 (the default) the world's
	 * size (1 without mpirun, and then the step sums nothing); K >= 1 the
	 * step of one of K processes, its reductions included (1: the
	 * allreduce pass forced on, which changes no result). */
	int ranks;
	/* Each bucket's sum starts where its last gradient is final and is
	 * waited for after the backward pass, before the optimiser reads it
	 * (the default); false: each sum blocks where it starts. */
	bool allreduce_overlap;
	/* Gradients are summed in buckets: consecutive in the backward pass,
	 * together up to this many bytes, one all-reduce a bucket (0: one a
	 * gradient; default REVC_BUCKET_DEFAULT). */
	int64_t bucket_bytes;
} revc_options;

/* revc_options.bucket_bytes's default: 25 MiB, as PyTorch DDP's. */
#define REVC_BUCKET_DEFAULT ((int64_t)25 << 20)

/* The defaults above. */
void revc_options_init(revc_options *o);
/* What revc_model_compile checks of o before it builds anything: a CPU
 * only with REVC_JIT, one LLVM knows and this host can run, and the pass
 * names; a usage error, or a user error for a CPU this host cannot run. */
bool revc_options_check(const revc_options *o, revc_error **err);
/* Whether LLVM knows CPU name ("native", "x86-64-v3", "znver3"), whether or
 * not this host can run its code. */
bool revc_cpu_known(const char *name);
/* The pipeline's passes in order (revc dump --print-passes): pass i's
 * name, what it is for, and the pass it requires (NULL if none); false
 * past the last. */
typedef struct {
	const char *name, *why, *requires;
} revc_pass;
bool revc_pass_at(int i, revc_pass *out);
/* Whether every pass o names (dump_after but "all", stop_after, passes)
 * exists; else the first that does not into bad. */
bool revc_pass_names_ok(const revc_options *o, char *bad, size_t n);
/* "store" / "revnet" / "checkpoint" and back; false for other names. */
const char *revc_strategy_name(revc_strategy s);
bool revc_strategy_parse(const char *name, revc_strategy *out);
/* The names a strategy option takes (revc's --strategy, the Python
 * module's strategy=), in the order help and errors list them: the
 * strategies by revc_strategy_name, then "min", REVC_AUTO with minimum
 * (its minimum-memory decisions, whatever the budget); NULL past the last. */
const char *revc_strategy_option_at(int i);
/* One of those names into *s and *minimum; false for any other. */
bool revc_strategy_option(const char *name, revc_strategy *s, bool *minimum);

/* ---- models ---------------------------------------------------------------- */

typedef struct revc_model revc_model;

/* A model from a spec file, or from spec text (name is what diagnostics
 * call it), with overrides "KEY=VALUE" (nsets of them, may be 0); or from an
 * IR file (a training step or any graph the passes accept). */
revc_model *revc_model_from_file(const char *path, const char *const *sets, int nsets, revc_error **err);
revc_model *revc_model_from_string(const char *name, const char *text, size_t len, const char *const *sets,
	int nsets, revc_error **err);
revc_model *revc_model_from_ir(const char *path, revc_error **err);
void revc_model_free(revc_model *m);

/* The spec's name ("fashion"), batch size and number of classes; for an IR
 * model the graph's name, its input's batch and the width of the logits its
 * loss reads (0 without a loss). */
const char *revc_model_name(const revc_model *m);
int64_t revc_model_batch(const revc_model *m);
int64_t revc_model_classes(const revc_model *m);
/* The input's C, H, W (an IR model's from its input x when that is
 * [N, C, H, W], else zeros); the spec's first learning rate (an IR file's
 * settings', 0 without them). */
void revc_model_input(const revc_model *m, int64_t chw[3]);
double revc_model_lr(const revc_model *m);
/* The spec's seed, of its parameters and data order (0 for an IR model
 * without settings). */
int64_t revc_model_seed(const revc_model *m);
/* The precision m computes in: once compiled, that of its options, but an
 * IR model's is its graph's whatever the options asked. */
revc_dtype revc_model_dtype(const revc_model *m);
/* Whether m has training settings: a spec has, an IR file when it carries
 * a `train { ... }` block (docs/ir.md); false with the error saying what is
 * missing, at the file's graph. */
bool revc_model_has_settings(const revc_model *m, revc_error **err);
/* A spec model's batch size, before it compiles (1 .. 2^31-1). */
bool revc_model_set_batch(revc_model *m, int64_t batch, revc_error **err);

/* Lowers, schedules, plans and (for the JIT) compiles the training step and
 * the evaluation graph under o (NULL: defaults), and initialises the
 * parameters from the spec's seed.  A model compiles once.  When
 * o->stop_after or o->passes cut the pipeline short the graphs are built
 * and dumped but not compiled: revc_model_cut() says so, and running fails;
 * when the cut came after shape the parameters are there all the same
 * (revc_param, revc_save). */
bool revc_model_compile(revc_model *m, const revc_options *o, revc_error **err);
bool revc_model_cut(const revc_model *m);
/* Allocates the arenas and (for the JIT) compiles the graphs: what
 * revc_model_compile does last unless o->no_run, and what running a model
 * does first when it has not been done. */
bool revc_model_prepare(revc_model *m, revc_error **err);
/* The dumps o->dump_after asked for (without o->dump_dir) as IR text, each
 * headed "# ---- [TAG: ]after PASS ----": with pass NULL all of them in the
 * order made, else from the first dump after pass on; NULL when there is
 * none.  Kept when compiling fails too.  Owned by m. */
const char *revc_model_dump(const revc_model *m, const char *pass);
/* A graph of the model (REVC_GRAPH_STEP also names an IR model's graph) as
 * IR text, or as Graphviz with dot, for the caller to free; NULL with an
 * error when the model did not build it. */
char *revc_model_print(const revc_model *m, revc_graph which, bool dot, revc_error **err);
/* The engine and CPU code is for: "jit (znver4)", "jit (x86-64-v3)", "interp". */
const char *revc_model_engine_label(const revc_model *m);
/* The same apart: "jit" or "interp"; the CPU name ("znver4") or NULL for
 * the interpreter. */
const char *revc_model_engine(const revc_model *m);
const char *revc_model_cpu(const revc_model *m);

/* ---- memory ---------------------------------------------------------------- */

/* The training step's planned memory: the figures revc mem --json gives
 * (docs/mem.md), for one strategy. */
#define REVC_MEM_TOP 5
#define REVC_MAX_UNITS 1000
/* A letter a unit and a segment (the forward outside the units: docs/ir.md). */
#define REVC_MAX_LETTERS (2 * REVC_MAX_UNITS + 1)
typedef struct {
	revc_strategy strategy;
	bool cut;               /* the pass options stopped before plan: no figures */
	const char *schedule;   /* the order heuristic the schedule pass chose, or "given" */
	int64_t steps;          /* nodes in the schedule */
	int64_t peak_step;      /* schedule step of the peak */
	int64_t peak_bytes;     /* fragmentation-free peak of buffers and workspace */
	int64_t arena_bytes;    /* planned arena */
	int64_t saved_transient_peak_bytes;
	int64_t total_bytes;    /* parameters + optimiser state + arena */
	struct {
		int64_t parameters, gradients, optimizer_state, saved, transient, workspace;
	} at_peak;
	/* The largest buffers live at the peak, largest first: the value each
	 * holds there, e.g. "%207", "conv2d", "fwd", "init", "f32[4,16,28,28]". */
	int nlargest;
	struct {
		char value[80], op[32], role[16], scope[80], type[128];
		int category;       /* an index of at_peak */
		int64_t bytes;
	} largest[REVC_MEM_TOP];
	/* With measure: the high-water mark of one step run by the tracking
	 * interpreter on random data; else -1. */
	int64_t measured_bytes;
	/* The units' decisions the plan carried out, one letter a unit (as
	 * revc_options.decisions; store's are all s), "" past REVC_MAX_UNITS. */
	char decisions[REVC_MAX_LETTERS + 1];
	/* ---- data parallelism (bucket): the step's sums of gradients over
	 * the processes (all-reduces of one tensor or of a bucket), and its
	 * buckets: how many, the bytes of their buffers (bucket_pack's, summed
	 * in place), the largest. */
	int grad_sums, buckets;
	int64_t bucket_buffer_bytes, largest_bucket_bytes;
} revc_memory;

/* The categories of at_peak, in its order: their JSON keys ("saved") and
 * names ("saved activations"); revc_memory_at(r, c) reads at_peak by index. */
#define REVC_MEM_CATEGORIES 6
const char *revc_memory_category_key(int c);
const char *revc_memory_category_name(int c);
int64_t revc_memory_at(const revc_memory *r, int c);

/* Of the compiled model. */
bool revc_model_memory(const revc_model *m, revc_memory *out, revc_error **err);
/* Of a spec model planned under strategy s with the other options of o
 * (NULL: defaults), without compiling or allocating it (what revc mem does);
 * dumps are added to revc_model_dump's. */
bool revc_memory_plan(revc_model *m, revc_strategy s, const revc_options *o, revc_memory *out,
	revc_error **err);

/* ---- strategy auto ------------------------------------------------------ */

/* The decisions strategy auto takes within a budget, and what they cost. */
typedef struct {
	char decisions[REVC_MAX_LETTERS + 1]; /* as revc_options.decisions */
	int units;
	double step_flops;      /* FLOPs of the step storing everything */
	double recompute_flops; /* what the decisions add (docs/mem.md: the cost model) */
	int64_t model_bytes;    /* the total the dynamic program's model predicts */
	int64_t total_bytes;    /* the total the planner gives (parameters + optimiser state + arena) */
	int64_t minimum_bytes;  /* the planned total of the minimum-memory decisions */
	int plans;              /* plans it took */
	int retries;            /* times the planner disagreed and the program chose again */
	int improved;           /* single-unit changes the planner then found cheaper and fitting */
	bool minimum;           /* revc_auto_minimum's: the least memory, not the fastest within a budget */
} revc_auto;

/* The fastest decisions for m's training step (under o: engine, threads,
 * dtype; NULL: defaults) whose planned total is at most budget (< 0: no
 * budget, every unit stored, or where that plan is beyond the planner's
 * 2^40-byte arena, the fastest within it).  A budget below the
 * minimum-memory decisions' total is a REVC_ERR_BUDGET error naming it, as
 * are decisions none of which plan within that arena. */
bool revc_auto_choose(revc_model *m, const revc_options *o, int64_t budget, revc_auto *out, revc_error **err);
/* The minimum-memory decisions (strategy min, auto at its lower end): the
 * least planned total single changes reach from revnet's decisions with
 * every segment that helps recomputed (docs/mem.md). */
bool revc_auto_minimum(revc_model *m, const revc_options *o, revc_auto *out, revc_error **err);
/* Strategy s's plan of m under o (NULL: defaults), strategy auto's
 * decisions chosen first when s is REVC_AUTO and o gives none:
 * revc_auto_minimum's when o->minimum, else revc_auto_choose's within
 * budget (< 0: o->budget, or else o->max_memory; both -1: no budget).
 * *au (NULL: not wanted) gets what was chosen, all zero (units 0) when
 * nothing was; out NULL chooses only and plans nothing more.  What revc mem,
 * revc mem --max-batch, revc_model_compile and the Python module do. */
bool revc_auto_plan(revc_model *m, revc_strategy s, const revc_options *o, int64_t budget, revc_auto *au,
	revc_memory *out, revc_error **err);
/* The FLOPs decisions (letters) add to m's step in the cost model. */
bool revc_auto_cost(revc_model *m, const revc_options *o, const char *decisions, double *recompute_flops,
	revc_error **err);

/* The memory timeline of the plan (revc mem --timeline): live bytes per
 * schedule step by category, as SVG text the caller frees. */
char *revc_memory_timeline_svg(revc_model *m, revc_strategy s, const revc_options *o, revc_error **err);

/* ---- the memory/time frontier (revc mem --sweep, --max-batch) ------------- */

/* The FLOP rate predicted seconds assume: the cost model's FLOPs a second
 * of revnet-38's training step under the JIT on 2 threads of an idle
 * AMD EPYC Zen 4 (docs/mem.md; other models run slower or faster). */
#define REVC_SWEEP_FLOP_RATE 140.0e9

/* One schedule on the frontier's axes. */
typedef struct {
	revc_strategy strategy;  /* REVC_AUTO for auto's choices */
	char decisions[REVC_MAX_LETTERS + 1]; /* as revc_options.decisions */
	int64_t budget_bytes;    /* auto: the least budget swept that chose it */
	int64_t total_bytes;     /* planned: parameters + optimiser state + arena */
	int64_t saved_transient_bytes;
	double flops;            /* the step's in the cost model, recomputation included */
	double recompute_flops;  /* of which recomputation */
	double predicted_seconds; /* flops / REVC_SWEEP_FLOP_RATE */
	double measured_seconds; /* the fastest timed step when the caller measured it; else -1 */
	double measured_cpu_seconds; /* that measurement's least processor time a step; else -1 */
} revc_sweep_point;

typedef struct {
	int max_points;          /* budgets walked at most (besides the fixed strategies'; default 40) */
	/* NULL, or called before each budget of the walk (done so far, the budget next). */
	void (*on_point)(void *user, int done, int64_t budget);
	void *user;
} revc_sweep_options;

void revc_sweep_options_init(revc_sweep_options *so);

typedef struct {
	int npoints;             /* the frontier, by total descending (cost ascending) */
	revc_sweep_point *points;
	revc_sweep_point fixed[3]; /* store, revnet, checkpoint */
	double step_flops;       /* store's */
	int64_t minimum_bytes;   /* the least total auto found */
	int choices, plans;      /* auto's choices made, and the plans they took */
	int dominated;           /* choices left off because another needs no more and costs no more */
} revc_sweep;

/* Auto's choices for m's step under o for the budgets from store's total
 * down to the minimum, the frontier of them, and the fixed strategies. */
bool revc_sweep_run(revc_model *m, const revc_options *o, const revc_sweep_options *so, revc_sweep *out,
	revc_error **err);
void revc_sweep_free(revc_sweep *s);
/* The frontier's point a budget gets (the fastest whose total fits), or NULL. */
const revc_sweep_point *revc_sweep_at(const revc_sweep *s, int64_t budget);
/* The frontier as an SVG figure (revc mem --plot), text the caller frees. */
char *revc_sweep_svg(const revc_model *m, const revc_sweep *s);

/* ---- tensors --------------------------------------------------------------- */

#define REVC_MAX_RANK 8

typedef struct {
	const char *name;       /* "s0.u0.f.conv0.w", as docs/model.md names it */
	revc_dtype dtype;
	int rank;
	int64_t dim[REVC_MAX_RANK];
	void *data;             /* row-major, contiguous; valid while the model lives */
	bool trainable;         /* a parameter (not batch-norm running state or optimiser state) */
} revc_tensor;

/* The model's persistent tensors (parameters, running statistics, optimiser
 * state) in docs/model.md order: index 0 .. revc_param_count()-1. */
int revc_param_count(const revc_model *m);
bool revc_param_at(const revc_model *m, int i, revc_tensor *out);
/* By name; false (and no error) when there is none. */
bool revc_param(const revc_model *m, const char *name, revc_tensor *out);

/* ---- running --------------------------------------------------------------- */

/* One batch: x is float32 (or float64 for REVC_F64) [batch, C, H, W] in
 * NCHW order, labels int32 [batch] in 0 .. classes-1. */
typedef struct {
	const void *x;
	const int32_t *labels;
	int64_t n;              /* examples; must be the model's batch */
} revc_batch;

/* One training step at learning rate lr: the parameters change in place.
 * *loss is the batch's mean cross-entropy before the update. */
bool revc_train_step(revc_model *m, const revc_batch *b, double lr, double *loss, revc_error **err);
/* Evaluation-mode forward pass of b.n examples (any number; batched as
 * the model's batch): mean loss and accuracy; logits (b.n x classes
 * floats of the model's dtype) when not NULL. */
bool revc_eval(revc_model *m, const revc_batch *b, double *loss, double *accuracy, void *logits, revc_error **err);
/* The gradient of the batch's loss with respect to every parameter, without
 * updating: afterwards revc_grad_at(i) gives parameter i's gradient (same
 * shape), valid until the next call that runs the model. */
bool revc_grad(revc_model *m, const revc_batch *b, double *loss, revc_error **err);
bool revc_grad_at(const revc_model *m, int i, revc_tensor *out);
/* Whether the last run stopped at a non-finite value (check_numerics): its
 * error names the node. */
bool revc_model_faulted(const revc_model *m);

/* ---- datasets and the training loop --------------------------------------- */

typedef struct revc_dataset revc_dataset;

/* The train or test split of which: "fashion-mnist[:DIR]", "cifar10:DIR" or
 * "synthetic" (NULL: the spec's dataset), checked against the model's input
 * shape and classes.  With max_memory it must fit in what the compiled plan
 * leaves, less the datasets loaded for this model before. */
revc_dataset *revc_dataset_load(revc_model *m, const char *which, bool train, revc_error **err);
int64_t revc_dataset_count(const revc_dataset *d);
/* which as given, or the spec's dataset: "fashion-mnist", "cifar10:DIR". */
const char *revc_dataset_name(const revc_dataset *d);
void revc_dataset_free(revc_dataset *d);

/* Mean loss and accuracy of the evaluation graph over all of d, in batches
 * of the model's batch.  A non-finite logit is an error that says how many
 * images had one and which tensors loaded last are not finite. */
bool revc_evaluate(revc_model *m, const revc_dataset *d, double *loss, double *accuracy, revc_error **err);

/* What the loop reports after each step. */
typedef struct {
	int64_t step, total, epoch; /* step counts steps done */
	double loss, lr;
	double elapsed;             /* seconds since this run started */
	int64_t images;             /* examples trained on in this run */
	/* At report points (every report_every steps, and the last): the mean
	 * loss and accuracy since the previous one; else 0. */
	double window_loss, window_accuracy;
} revc_progress;

typedef struct {
	const revc_dataset *train, *test; /* test may be NULL: no evaluation */
	int64_t steps;              /* steps in all; 0: epochs, else the spec's */
	int64_t epochs;             /* with steps 0: this many epochs; 0: the spec's */
	const char *resume;         /* continue the checkpoint there, or NULL */
	const char *save_dir;       /* write checkpoints there (at the end, every save_every), or NULL */
	int64_t save_every, eval_every;
	int64_t report_every;       /* steps per progress window (0: total / 20, within 1..100) */
	void *user;
	/* Once the checkpoint is resumed, before the first step. */
	void (*on_start)(void *user, int64_t start_step, int64_t total_steps);
	void (*on_step)(void *user, const revc_progress *p);
	void (*on_eval)(void *user, int64_t step, double loss, double accuracy);
	void (*on_save)(void *user, int64_t step, const char *dir);
	/* Polled at safe points: true stops the run there, successfully, with
	 * stopped set.  NULL: never. */
	bool (*stop)(void *user);
} revc_train_config;

typedef struct {
	int64_t start_step, total_steps, steps; /* steps: run in this call */
	double train_loss, train_accuracy;      /* over the last report window */
	bool evaluated;
	double test_loss, test_accuracy;
	double seconds;
	bool stopped;
	int64_t saved_step;         /* the last checkpoint this call wrote, or 0 */
	char kept[4200];            /* with save_dir: what it holds now ("the last checkpoint (step 30) is in ck") */
	/* mpi: the world's processes (1 without mpirun), each at the model's
	 * batch, and the seconds the steps spent blocked in communication. */
	int ranks;
	double comm_seconds;
	/* Of seconds, evaluating on the test split; and before the run, the
	 * JIT's compiling of the model's graphs (0 under the interpreter). */
	double eval_seconds, compile_seconds;
} revc_train_result;

/* Trains the compiled model with the spec's optimiser (momentum SGD, or
 * AdamW with optimizer = adamw) at its learning rates from start (or the
 * checkpoint resumed) to the last step. */
bool revc_train_run(revc_model *m, const revc_train_config *c, revc_train_result *r, revc_error **err);

/* ---- checkpoints ----------------------------------------------------------- */

/* Writes the parameters (and optimiser state and step, for a checkpoint)
 * atomically into dir, replacing only a directory revc wrote
 * (docs/checkpoints.md). */
bool revc_save(const revc_model *m, const char *dir, int64_t step, revc_error **err);
/* With step NULL, loads parameters and running statistics from dir (any
 * directory of NAME.npy files, NumPy's too; optimiser state -- momentum
 * buffers, AdamW's moments and step count -- starts at zero); else a
 * checkpoint, whose step *step gets. */
bool revc_load(revc_model *m, const char *dir, int64_t *step, revc_error **err);

/* ---- NumPy files ------------------------------------------------------------- */

/* A batch from X.npy (float32 or float64 [N, C, H, W], C, H, W the model's
 * input) and Y.npy (integer labels [N]), converted to dt in buffers *out
 * owns: free them with revc_batch_free.  N need not be the model's batch
 * (revc_model_set_batch can make it so). */
bool revc_batch_load(const revc_model *m, const char *x_npy, const char *labels_npy, revc_dtype dt, revc_batch *out,
	revc_error **err);
void revc_batch_free(revc_batch *b);

/* The directories of NAME.npy files revc writes whole, each with a
 * revc-manifest.txt naming its kind (docs/checkpoints.md). */
typedef enum {
	REVC_DIR_PARAMS,        /* every persistent tensor: revc_save(m, dir, 0) */
	REVC_DIR_GRADIENTS,     /* loss.npy and a gradient per parameter: revc_save_gradients */
	REVC_DIR_STATE,         /* the batch-norm running statistics: revc_save_state */
	REVC_DIR_CHECKPOINT,    /* a training run's checkpoint: revc_train_run's save_dir */
} revc_dir_kind;

/* Whether dir may be written as kind (it is new, empty, or a directory
 * revc wrote as that kind): check before the work, not after.  label, when
 * not NULL, begins the message ("--out: ..."). */
bool revc_dir_check(const char *dir, revc_dir_kind kind, const char *label, revc_error **err);
/* Writes len bytes of text to path atomically (a temporary file renamed
 * over it): on failure path is as it was. */
bool revc_write_file(const char *path, const char *text, size_t len, revc_error **err);
/* Whether a and b name the same directory (existing or not). */
bool revc_dir_same(const char *a, const char *b);
/* After revc_grad: loss.npy (0-d, the model's dtype) and the gradients. */
bool revc_save_gradients(const revc_model *m, const char *dir, double loss, revc_error **err);
/* The running statistics: the persistent tensors that are neither
 * parameters nor momentum buffers. */
bool revc_save_state(const revc_model *m, const char *dir, revc_error **err);

/* ---- checks ---------------------------------------------------------------- */

/* The finite-difference gradient check (revc check): a spec model's
 * gradients in f64 against central differences of the loss on sampled
 * coordinates of every trainable tensor. */
typedef struct {
	int samples;            /* coordinates per tensor (default 3) */
	int64_t seed;           /* of the parameters, the batch and the coordinates; -1 (default): the spec's */
	double tolerance;       /* largest relative error accepted (default 1e-6) */
	double step;            /* largest finite-difference step (default 1e-5) */
} revc_check_options;

/* The defaults above. */
void revc_check_options_init(revc_check_options *c);

/* One trainable tensor's result. */
typedef struct {
	const char *name;       /* "s0.u0.f.conv0.w" */
	int samples;            /* coordinates compared */
	int kinks;              /* coordinates replaced, no step being usable (a ReLU kink) */
	double scale;           /* max |gradient| */
	double error;           /* max |analytic - numeric| over scale */
	bool ok;                /* error within the tolerance */
} revc_check_tensor;

typedef struct {
	bool cut;               /* the pass options stopped the pipeline: graphs built and dumped, nothing checked */
	char engine[96];        /* what computed the gradients: "jit (znver4)", "interp" */
	uint64_t seed;          /* the seed used */
	revc_check_tensor *tensors; /* the trainable tensors, in docs/model.md order */
	int n, failed;
	double worst;           /* the largest error */
	int worst_at;           /* its tensor, or -1 */
} revc_check_report;

/* Checks spec model m under o (NULL: the options m compiled under, or the
 * defaults; its strategy, engine, CPU and pass options apply, the dtype is
 * f64 and BLAS runs on one thread): the gradients come from the engine,
 * the differences from the reference interpreter on the loss-only graph
 * (the evaluation pipeline, its dumps tagged "eval"), over parameters and
 * a batch drawn from the seed.  The graphs are the check's own: m need not
 * be compiled.  A tensor over the tolerance is a result (r->failed), not
 * an error; false when the graphs cannot be built or a run fails.  Free r
 * with revc_check_report_free whatever it returns. */
bool revc_check_gradients(revc_model *m, const revc_options *o, const revc_check_options *c, revc_check_report *r,
	revc_error **err);
void revc_check_report_free(revc_check_report *r);

/* The drift report of a spec model (revc check --drift): how far the
 * reversible backward pass strays from ordinary backprop, in f32 (column
 * 0 of each figure) and f64 (column 1). */
#define REVC_DRIFT_DTYPES 2

/* An invertible unit's reconstructed inputs against the forward values. */
typedef struct {
	char unit[64];          /* its scope, "s0.u1" */
	double abs[REVC_DRIFT_DTYPES][2], rel[REVC_DRIFT_DTYPES][2]; /* [dtype][x1, x2]: max|rec - fwd|, over max|fwd| */
} revc_drift_unit;

/* A trainable tensor's angle between its revnet and store gradients. */
typedef struct {
	char *name;
	double deg[REVC_DRIFT_DTYPES];
} revc_drift_grad;

/* Per dtype. */
typedef struct {
	double worst_degrees, median_degrees;
	int worst_grad;         /* index of the worst angle's tensor (0 when none) */
	double worst_rel;       /* the largest relative reconstruction error (0 when no unit) */
	int worst_unit, worst_x; /* of unit worst_unit's input x(worst_x + 1) */
} revc_drift_summary;

/* How one step's convolutions (forward, data and filter gradients) are
 * computed in native code: each lowering ("direct", "winograd2",
 * "winograd4", "blas"; docs/codegen.md) and how many convolution nodes got
 * it, in the order first met. */
#define REVC_DRIFT_LOWERINGS 4
typedef struct {
	const char *lowering[REVC_DRIFT_LOWERINGS];
	int count[REVC_DRIFT_LOWERINGS];
	int n;
} revc_drift_convs;

typedef struct {
	char *model;            /* the spec's name */
	int64_t batch;
	uint64_t seed;
	char engine[96];        /* what ran both steps: "jit (rocketlake)", "jit (x86-64-v3)", "interp" */
	bool jit;               /* native code ran them, and convs holds their lowerings */
	revc_drift_convs convs[REVC_DRIFT_DTYPES][2]; /* [dtype][revnet step, store step] */
	revc_drift_unit *units; /* the invertible units, in schedule order */
	int nunits;
	revc_drift_grad *grads; /* the trainable tensors, in docs/model.md order */
	int ngrads;
	revc_drift_summary sum[REVC_DRIFT_DTYPES];
} revc_drift_report;

/* Builds the revnet step (every reconstruction an output) and the store
 * step of m's spec in f32 and f64, runs each on the check batch with
 * parameters drawn from seed, and fills *r (free it with
 * revc_drift_report_free when this returns true).  The steps run on o's
 * engine, CPU and threads (o NULL: a compiled m's options, else the
 * defaults), so under the JIT the reconstructions go through the kernels
 * training uses, Winograd's where chosen (REVC_CONV forces one; f64 keeps
 * the direct kernels). */
bool revc_drift(const revc_model *m, const revc_options *o, uint64_t seed, revc_drift_report *r, revc_error **err);
void revc_drift_report_free(revc_drift_report *r);
/* The same report (revc check --drift --json: engine, convolution
 * lowerings, per-unit reconstruction errors, revnet-vs-store gradient
 * angles, f32 and f64) as JSON text the caller frees; seed draws the
 * parameters and the batch. */
char *revc_drift_json(const revc_model *m, const revc_options *o, uint64_t seed, revc_error **err);

/* ---- ahead of time --------------------------------------------------------- */

/* Emits a spec model's training step and forward pass as native code for
 * its options' strategy and CPU (f32): a shared library (path ends in .so)
 * or an object file (.o), with a C header when header is not NULL; prefix
 * names its functions (NULL: from the path, libNAME.so -> NAME), as revc
 * compile does.  The model need not be compiled. */
bool revc_emit(const revc_model *m, const char *path, const char *header, const char *prefix, revc_error **err);

/* revc_emit with every choice given (revc compile). */
typedef struct {
	const char *header;     /* also write the C header there, or NULL */
	const char *prefix;     /* NULL: from the path */
	revc_strategy strategy; /* default REVC_REVNET */
	const char *cpu;        /* NULL or "native" (default), or an LLVM CPU name */
	const char *dump_llvm;  /* NULL, or a directory for the module's .ll before and after optimisation */
	int64_t arena_bytes;    /* out: the training step's arena */
	/* REVC_AUTO: the decisions (letters), or NULL: revc_auto_choose's
	 * within budget (-1, the default: none, store), or with minimum
	 * revc_auto_minimum's, for the f32 step native code runs. */
	const char *decisions;
	int64_t budget;
	bool minimum;
} revc_emit_options;

void revc_emit_options_init(revc_emit_options *e);
/* The outputs are probed before the work: an output that cannot be
 * written fails before anything is planned. */
bool revc_emit_with(const revc_model *m, const char *path, revc_emit_options *e, revc_error **err);
/* The prefix emission to path takes by default: "dir/libfoo.so" or
 * "dir/foo.o" give "foo"; false for other names. */
bool revc_emit_default_prefix(const char *path, char *buf, size_t n);
/* Whether s is a C identifier (a prefix revc_emit accepts). */
bool revc_emit_prefix_ok(const char *s);

/* ---- benchmarks ------------------------------------------------------------ */

/* What revc bench times. */
typedef struct {
	int64_t steps;          /* timed steps, after one warm-up step (default 5) */
	bool gemm;              /* also time cblas_sgemm alone on the step's GEMM shapes */
	bool profile;           /* also time each kernel call (JIT only): revc_bench_result.kinds */
	int profile_calls;      /* with profile: also the longest calls, at most this many (and 64) */
	/* NULL, or called before each step: done of steps timed so far (-1:
	 * the warm-up is next). */
	void (*on_step)(void *user, int64_t done, int64_t steps);
	void *user;
} revc_bench_options;

/* The defaults above. */
void revc_bench_options_init(revc_bench_options *b);

typedef struct {
	bool cut;               /* the pass options stopped the pipeline: the step was built and dumped, not run */
	double compile_seconds; /* preparing the step to run (the JIT's compile) */
	double median_seconds, min_seconds, mean_seconds; /* of the timed steps */
	/* The least processor time (every thread of the process, spinning
	 * included) a timed step took: with one thread, what the step costs
	 * whatever else the machine runs (it is not charged for the time it
	 * waits for a core). */
	double min_cpu_seconds;
	/* A cache line's round trip between two threads, just before the
	 * timed steps and just after them (runtime/probe.c), in ns; -1 where
	 * it could not be measured (one CPU).  It tells a shared host's
	 * states apart: two threads' steps run slower while it is high. */
	double round_trip_ns[2];
	double flops;           /* per step: convolutions (one product per image) and dense layers */
	double gemm_seconds;    /* with gemm: cblas_sgemm alone on the same products; else 0 */
	int64_t arena_bytes;    /* the step's planned arena */
	const char *blas_core;  /* OpenBLAS's kernels: "SkylakeX", "Haswell" */
	bool cpu_native;        /* the JIT's code is for this host's CPU (revc_model_cpu names it) */
	/* The JIT's: distinct kernels, kernel calls per step, and where the
	 * compile's time went (zeros for the interpreter). */
	int kernels, calls;
	double seconds_emit, seconds_optimize, seconds_jit;
	/* Object files the JIT loaded, and how many of them came from the
	 * object cache (docs/codegen.md). */
	int objects, objects_cached;
	/* The convolutions' lowerings (native code; for the interpreter, what
	 * the JIT would choose): each distinct (op, shapes, lowering) once,
	 * with how many nodes of the step have it, and the FLOPs the products
	 * perform (Winograd's are fewer than `flops` counts). */
	int nconvs;
	struct {
		char what[160];          /* "conv2d f32[100,16,32,32] ... stride=1 pad=[1,1,1,1]" */
		const char *lowering;    /* "direct", "winograd2", "winograd4", "blas" */
		const char *why;
		int count;
	} convs[64];
	double performed_flops;
	/* With profile: as many steps again, each kernel call timed, summed
	 * per kind of kernel ("conv2d winograd2", "group bn_norm+relu"), in
	 * order of time.  Per step: the kind's calls, wall seconds, the
	 * threads' busy seconds in it (their chunks; all of the wall when the
	 * call is serial), bytes read and written, direct FLOPs. */
	bool profiled;
	double profile_median_seconds; /* step time while timing calls (the profile's overhead) */
	double profile_mean_seconds;   /* the same steps' mean, which the calls' time is part of */
	double profile_step_seconds;   /* the calls' wall time per step */
	int profile_threads;
	/* Per step: chunk t's time in every parallel call together (up to 256
	 * threads), and the part of the threads' waiting for the slowest chunk
	 * that repeats every step: per parallel call and chunk, the slowest
	 * chunk's time less this one's, each summed over the timed steps
	 * (uneven splits, or one thread slower throughout; what changes from
	 * step to step evens out in the sums). */
	double chunk_seconds[256];
	double repeat_wait_seconds;
	int nkinds;
	struct {
		char kind[96];
		double calls, seconds, busy_seconds, bytes, flops;
		double serial_seconds; /* of seconds, in calls run serially */
		/* of the threads' idle time in its parallel calls: before a
		 * thread's first chunk started, and waiting for the slowest
		 * chunk after its last ended (runtime/pool.c) */
		double late_seconds, wait_seconds;
	} kinds[96];
	/* With profile_calls: the longest calls of the step, longest first.
	 * Per step: the call's wall seconds, the threads' busy seconds in it,
	 * and their idle seconds before their first chunk and waiting for the
	 * slowest; its index in the step's calls, kind, and node ("%245
	 * s2.u0.g": as `revc dump --after plan` names it, and its scope).
	 * uneven: 1 − the fastest chunk's time over the slowest's, each summed
	 * over the timed steps (0 when even, or serial): an imbalance the
	 * kernel's split makes every step, where one that comes and goes
	 * evens out in the sums; slowest: that chunk's index. */
	int ntop;
	struct {
		int index, slowest;
		char kind[96], node[96];
		double seconds, busy_seconds, late_seconds, wait_seconds, uneven;
		bool parallel;
	} top[64];
} revc_bench_result;


/* Compiles spec model m's training step (f32) under o (NULL: defaults;
 * o->graphs and o->dtype do not apply) and times b->steps steps of it on
 * the random check batch at a tiny learning rate.  m is compiled
 * afterwards (its parameters trained a little). */
bool revc_bench(revc_model *m, const revc_options *o, const revc_bench_options *b, revc_bench_result *r,
	revc_error **err);

/* Two builds of one step timed side by side (driver/bench_versus.c): A
 * as o says, B with an environment variable set while it is built
 * (REVC_EPILOGUE=0, REVC_CONV=direct, or a switch a change under test
 * reads).  Their steps alternate, A B, B A, ..., so that a shared host's
 * drift falls on both; the ratio of each pair's times gives B/A to about
 * a percent where separate runs scatter by tens of percent. */
typedef struct {
	int64_t pairs;
	double median_seconds[2], min_seconds[2]; /* A's, B's */
	int kernels[2], calls[2];                 /* the JIT's, as revc_bench_result's */
	/* B's time over A's in each pair: the median and the quartiles */
	double ratio_median, ratio_low, ratio_high;
	double round_trip_ns[2];                  /* as revc_bench_result's */
} revc_versus_result;

/* Compiles spec models a and b (two models of the same spec and settings)
 * under o, b with `setting` ("NAME=VALUE") in the environment meanwhile
 * (restored afterwards), and times bo->steps pairs of their steps after a
 * warm-up step of each.  bo's other fields do not apply.  b's native code
 * runs on a's threads (one pool for both): b must not run after a is
 * freed. */
bool revc_bench_versus(revc_model *a, revc_model *b, const char *setting, const revc_options *o,
	const revc_bench_options *bo, revc_versus_result *r, revc_error **err);

/* ---- distributed training (driver/world.c; docs/distributed.md) ----------- */

/* Joins the world of processes an MPI launcher started this one in (mpirun
 * -np K: OMPI_COMM_WORLD_SIZE in the environment); without a launcher it
 * does nothing and the world stays the singleton of one process.  When a
 * collective fails later, fatal gets one line before the job ends on every
 * rank.  An error when the build has no MPI and the launcher asked for more
 * than one process. */
bool revc_world_init(void (*fatal)(const char *msg), revc_error **err);
/* This process's rank in [0, size), and the number of processes. */
int revc_world_rank(void);
int revc_world_size(void);
/* Leaves the world before the process exits: with status 0 every rank
 * leaves together; another status ends the job on every rank. */
void revc_world_end(int status);
/* What one training step of m sums over the processes: the bytes of its
 * parameter gradients (the return value), and in *bn_bytes those of its
 * synchronised batch-norm statistics; -1 before m has a graph. */
int64_t revc_model_comm_bytes(const revc_model *m, int64_t *bn_bytes);

#ifdef __cplusplus
}
#endif

#endif
