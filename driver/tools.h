/* tools.h: the driver's tools over a model's graphs, internal to librevc
 * (prefix drv_): the finite-difference gradient check (check.c), the drift
 * report (drift.c) and ahead-of-time emission (aot.c), with the
 * diagnostics helpers they share (diags.c).  None of them prints or exits: errors come
 * back in an ir_diags, whose items without a file read "revc: error: ...". */
#ifndef REVC_DRV_TOOLS_H
#define REVC_DRV_TOOLS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cg.h"
#include "internal.h"
#include "fe.h"
#include "ir.h"
#include "passes.h"
#include "rt.h"

/* ---- lowering (diags.c) ----------------------------------------------------- */

/* Specs are lowered with drv_spec_plan and evaluation graphs planned with
 * drv_eval_passes (internal.h). */

/* Adds e's message to d as a diagnostic without a position. */
void drv_diag_rt(ir_diags *d, const rt_err *e);
/* Adds from's diagnostics (and its count of those not kept) to to. */
void drv_diags_append(ir_diags *to, const ir_diags *from);

/* ---- the gradient check (check.c) ----------------------------------------- */

/* The random batch revc check, revc check --drift and revc mem run: inputs
 * "x" (uniform in [0, 1), f32 or f64) and "labels" (below classes) of x,
 * whichever x has, drawn from seed. */
void drv_check_batch(rt_exec *x, uint64_t seed, int64_t classes);

typedef struct {
	int samples;      /* coordinates per tensor */
	uint64_t seed;    /* of the batch and the coordinates */
	double tolerance; /* largest relative error accepted */
	double step;      /* largest finite-difference step */
} drv_check_options;

/* A tensor's result and the whole check's, as revc.h has them. */
typedef revc_check_tensor drv_check_tensor;
typedef revc_check_report drv_check_report;

/* Runs gx (the f64 training step without optimiser, whose outputs are the
 * loss's gradients) once on the check batch, then compares o->samples
 * coordinates of every trainable tensor of store with central differences
 * of fx's loss (the interpreter on the loss-only graph, over the same
 * store).  A tensor over the tolerance is a failed result, not an error:
 * false only when a run fails, with the error in d.  Free r with
 * revc_check_report_free either way. */
bool drv_check_gradients(rt_exec *gx, rt_exec *fx, rt_store *store, int64_t classes, const drv_check_options *o,
	drv_check_report *r, ir_diags *d);

/* ---- drift (drift.c) ------------------------------------------------------ */

#define DRV_DRIFT_NDT 2
/* The dtypes of the report's columns: f32, f64. */
extern const ir_dtype drv_drift_dtypes[DRV_DRIFT_NDT];

/* The report's parts, as revc.h has them. */
typedef revc_drift_unit drv_drift_unit;
typedef revc_drift_grad drv_drift_grad;
typedef revc_drift_summary drv_drift_summary;
typedef revc_drift_convs drv_drift_convs;
typedef revc_drift_report drv_drift_report;
_Static_assert(DRV_DRIFT_NDT == REVC_DRIFT_DTYPES, "the drift report's columns are revc.h's");

/* Builds the revnet step (with every reconstruction made an output) and
 * the store step of s in f32 and f64, runs each with e (initialised; it
 * compiles four graphs under the JIT) on the check batch from seed with
 * the parameters from seed, and fills *r (free it with
 * revc_drift_report_free); false with the errors in d. */
bool drv_drift(const fe_spec *s, drv_engine *e, uint64_t seed, drv_drift_report *r, ir_diags *d);
/* The report as one JSON object and a newline (revc check --drift --json);
 * the caller frees it. */
char *drv_drift_json(const drv_drift_report *r);

/* ---- ahead of time (aot.c) ------------------------------------------------- */

typedef struct {
	const char *out;       /* libNAME.so or NAME.o (drv_aot_default_name accepts it) */
	const char *header;    /* the C header to write too, or NULL */
	const char *prefix;    /* of the API's symbols: a C identifier */
	ps_strategy strategy;
	const char *cpu;       /* NULL or "native", or an LLVM CPU name */
	const char *dump_llvm; /* a directory for the module's .ll, or NULL */
	const char *source;    /* the spec's path, named in the header */
	const char *decisions; /* strategy auto's (ps_ctx.decisions) */
} drv_aot_options;

/* The prefix from "dir/libfoo.so" or "dir/foo.o" ("foo"), and whether the
 * output is a shared library; false for other names. */
bool drv_aot_default_name(const char *out, char *name, size_t n, bool *shared);
bool drv_aot_valid_prefix(const char *s);

/* An emission under way: what it made, to be removed unless it succeeds. */
typedef struct {
	drv_aot_options o;
	bool shared, made;
	cg_options cg;
	rt_atomic hdr;
	char dir[64], obj[256], api[256], api_o[256], map[256], tmp_out[4200];
	int64_t arena_bytes;   /* out: the training step's arena */
} drv_aot;

/* Fails early on outputs that cannot be written: probes the output's
 * directory and opens the header (atomically).  Call drv_aot_end whatever
 * it returns. */
bool drv_aot_begin(drv_aot *a, const drv_aot_options *o, ir_diags *d);
/* Plans m's training step (f32, a->o.strategy) and forward pass for the
 * code generator, emits them, links the output and writes the header;
 * errors in d (planning errors point into the spec or IR file).  m has
 * settings (drv_model_settings): an IR file's are read, its graph f32. */
bool drv_aot_emit(drv_aot *a, const struct revc_model *m, ir_diags *d);
/* Removes the temporary files, and the output's when it did not succeed. */
void drv_aot_end(drv_aot *a);

/* ---- revc bench's GEMM figures (bench.c) ----------------------------------- */

/* One GEMM shape of a step and how many times a step runs it. */
typedef struct {
	int64_t m, n, k, count;
} drv_gemm_shape;

/* The GEMMs of g's convolutions (one per image) and dense layers, each
 * distinct shape once (up to max). */
int drv_gemm_shapes(const ir_graph *g, drv_gemm_shape *out, int max);
double drv_gemm_flops(const drv_gemm_shape *s, int n);
/* Seconds cblas_sgemm (threads BLAS threads) takes for all of them: each
 * shape timed on its own, best of a few runs. */
double drv_gemm_seconds(const drv_gemm_shape *s, int n, int threads);

/* Compiles spec model m's training step (f32) under o for timing: true
 * with *cut set when the pass options stopped the pipeline before it. */
bool drv_bench_compile(revc_model *m, const revc_options *o, bool *cut, revc_error **err);
/* Prepares the compiled step to run (the JIT's compile) on the random
 * check batch at a tiny learning rate: its exec, or NULL. */
rt_exec *drv_bench_prepare(revc_model *m, revc_error **err);
/* Seconds on the monotonic clock. */
double drv_bench_now(void);
/* x (n values) sorted, ascending. */
void drv_sort_values(double *x, int64_t n);

/* ---- JSON (json.c) ------------------------------------------------------- */

/* Writes s escaped for the inside of a JSON string. */
void drv_json_string(FILE *out, const char *s);

/* max(a, b) that keeps a NaN (fmax drops it), for error figures: a NaN
 * gradient must fail a check, not pass it. */
static inline double drv_max_nan(double a, double b)
{
	return b > a || b != b ? b : a;
}

#endif
