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

/* What a pass may read besides the graph. */
typedef struct {
	ir_diags diags; /* user-facing errors from passes */
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

int ps_dce(ir_graph *g, ps_ctx *ctx);

#endif
