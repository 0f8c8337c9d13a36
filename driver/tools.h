/* tools.h: the driver's tools over a model's graphs, internal to librevc
 * (prefix drv_): the finite-difference gradient check (check.c), the drift
 * report (drift.c) and ahead-of-time emission (aot.c), with the spec
 * lowering they share (plan.c).  None of them prints or exits: errors come
 * back in an ir_diags, whose items without a file read "revc: error: ...". */
#ifndef REVC_DRV_TOOLS_H
#define REVC_DRV_TOOLS_H

#include <stdbool.h>
#include <stdint.h>

#include "cg.h"
#include "fe.h"
#include "ir.h"
#include "passes.h"
#include "rt.h"

/* ---- lowering (plan.c) ----------------------------------------------------- */

/* Lowers spec s in dt and runs the pipeline as opts say, with the spec's
 * optimiser settings in ctx and the interpreter's workspace unless ctx has
 * one; NULL with the errors in ctx->diags. */
ir_graph *drv_plan(const fe_spec *s, ir_dtype dt, fe_lower_mode mode, ps_ctx *ctx, const ps_options *opts);
/* Adds e's message to d as a diagnostic without a position. */
void drv_diag_rt(ir_diags *d, const rt_err *e);

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

/* One trainable tensor's result. */
typedef struct {
	const char *name;  /* the store's */
	int samples;       /* coordinates compared */
	int kinks;         /* coordinates replaced, no step being usable */
	double scale;      /* max |gradient| */
	double error;      /* max |analytic - numeric| over scale */
	bool ok;
} drv_check_tensor;

typedef struct {
	drv_check_tensor *t; /* malloc'd, in store order */
	int n, failed;
	double worst;        /* the largest error */
	int worst_at;        /* its tensor, or -1 */
} drv_check_report;

/* Runs gx (the f64 training step without optimiser, whose outputs are the
 * loss's gradients) once on the check batch, then compares o->samples
 * coordinates of every trainable tensor of store with central differences
 * of fx's loss (the interpreter on the loss-only graph, over the same
 * store).  A tensor over the tolerance is a failed result, not an error:
 * false only when a run fails, with the error in d. */
bool drv_check_gradients(rt_exec *gx, rt_exec *fx, rt_store *store, int64_t classes, const drv_check_options *o,
	drv_check_report *r, ir_diags *d);
void drv_check_report_free(drv_check_report *r);

/* max(a, b) that keeps a NaN (fmax drops it), for error figures: a NaN
 * gradient must fail a check, not pass it. */
static inline double drv_max_nan(double a, double b)
{
	return b > a || b != b ? b : a;
}

#endif
