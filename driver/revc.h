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
#define REVC_VERSION_MINOR 2
#define REVC_VERSION_PATCH 0

/* "0.2.0": the library's version, which may differ from the header's. */
const char *revc_version(void);

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
void revc_error_free(revc_error *e);

/* ---- options --------------------------------------------------------------- */

typedef enum { REVC_STORE, REVC_REVNET, REVC_CHECKPOINT } revc_strategy;
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
} revc_options;

/* The defaults above. */
void revc_options_init(revc_options *o);
/* "store" / "revnet" / "checkpoint" and back; false for other names. */
const char *revc_strategy_name(revc_strategy s);
bool revc_strategy_parse(const char *name, revc_strategy *out);

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
 * model the graph's name, its input's batch and 0. */
const char *revc_model_name(const revc_model *m);
int64_t revc_model_batch(const revc_model *m);
int64_t revc_model_classes(const revc_model *m);
/* The input's C, H, W (zeros for an IR model); the spec's first learning
 * rate (0 for an IR model). */
void revc_model_input(const revc_model *m, int64_t chw[3]);
double revc_model_lr(const revc_model *m);
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

/* The memory timeline of the plan (revc mem --timeline): live bytes per
 * schedule step by category, as SVG text the caller frees. */
char *revc_memory_timeline_svg(revc_model *m, revc_strategy s, const revc_options *o, revc_error **err);

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

/* ---- checks ---------------------------------------------------------------- */

/* (The finite-difference gradient check, revc check, is not in the library
 * yet: it runs through the CLI.) */
/* The drift report of a spec model (revc check --drift --json: per-unit
 * reconstruction errors, revnet-vs-store gradient angles, f32 and f64) as
 * JSON text the caller frees; seed draws the parameters and the batch. */
char *revc_drift_json(const revc_model *m, uint64_t seed, revc_error **err);

/* ---- ahead of time --------------------------------------------------------- */

/* Emits a spec model's training step and forward pass as native code for
 * its options' strategy and CPU (f32): a shared library (path ends in .so)
 * or an object file (.o), with a C header when header is not NULL; prefix
 * names its functions (NULL: from the path, libNAME.so -> NAME), as revc
 * compile does.  The model need not be compiled. */
bool revc_emit(const revc_model *m, const char *path, const char *header, const char *prefix, revc_error **err);

#ifdef __cplusplus
}
#endif

#endif
