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
	PS_STRATEGY_COUNT
} ps_strategy;

const char *ps_strategy_name(ps_strategy s);
bool ps_strategy_lookup(const char *name, ps_strategy *out);

/* What a pass may read besides the graph. */
typedef struct {
	ir_diags diags;       /* user-facing errors from passes */
	ps_strategy strategy; /* revbwd */
	bool no_order_edges;  /* schedule: no ordering edges, naive order */
	bool optimizer;       /* optim: add the SGD step (else gradients stay outputs) */
	double momentum;      /* optim: SGD momentum (MODEL.md: 0.9) */
	double weight_decay;  /* optim: on conv and dense weights (2e-4) */
} ps_ctx;

void ps_ctx_init(ps_ctx *ctx);
void ps_ctx_free(ps_ctx *ctx);

typedef int (*ps_fn)(ir_graph *g, ps_ctx *ctx);

typedef struct {
	const char *name;
	ps_fn run;
	const char *requires; /* a pass that must have run first, or NULL */
	const char *why;      /* one line for --print-passes */
} ps_pass;

/* The pipeline, in order. */
const ps_pass *ps_pipeline(int *count);
const ps_pass *ps_pass_lookup(const char *name);

/* Manager options, set from the command line. */
typedef struct {
	const char *dump_after; /* a pass name, "all", or NULL */
	const char *dump_dir;   /* numbered files NN-pass.ir there; else dump_out */
	FILE *dump_out;         /* where dumps go without dump_dir (NULL: stderr) */
	bool verify_each;
	const char *stop_after; /* last pass to run, or NULL for all */
	const char *only;       /* comma-separated passes to run, or NULL for all */
} ps_options;

/* Checks that every pass name in opts exists; on failure writes the
 * offending name into bad and returns false. */
bool ps_options_check(const ps_options *opts, char *bad, size_t badlen);

/* Runs the pipeline table over g.  Passes the graph already lists as applied
 * are skipped; each pass that runs is recorded on the graph.  The result is
 * verified after every pass with verify_each, and always at the end.
 * Returns 0, or nonzero with diagnostics in ctx->diags. */
int ps_run_table(const ps_pass *table, int n, ir_graph *g, ps_ctx *ctx, const ps_options *opts);
int ps_run(ir_graph *g, ps_ctx *ctx, const ps_options *opts);

/* ---- passes (one file each) ------------------------------------------- */

int ps_shape(ir_graph *g, ps_ctx *ctx);
int ps_autodiff(ir_graph *g, ps_ctx *ctx);
int ps_optim(ir_graph *g, ps_ctx *ctx);
int ps_dce(ir_graph *g, ps_ctx *ctx);

/* The output name under which autodiff leaves a parameter's gradient:
 * "grad:" followed by the parameter's name. */
#define PS_GRAD_PREFIX "grad:"

#endif
