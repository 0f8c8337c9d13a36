/* codegen_suites.h: the Check suites of the codegen module and the harness
 * they share (tests/unit/test_codegen.c). */
#ifndef REVC_CODEGEN_SUITES_H
#define REVC_CODEGEN_SUITES_H

#include <check.h>

#include "ir.h"

/* IR text parsed and verified (a failed check when it is not valid). */
ir_graph *cgt_parse(const char *name, const char *text);
/* Plans a hand-built graph (dce, schedule, fuse, liveness, plan) with the
 * generated kernels' workspace for `threads` threads. */
void cgt_plan(ir_graph *g, int threads);
/* Runs planned g `steps` times with the JIT (`threads` threads) and with the
 * interpreter in tracking mode, on the same random parameters and inputs
 * from seed, and returns the worst max|a-b|/max|b| over every output and
 * every parameter and state tensor. */
double cgt_compare(ir_graph *g, int threads, uint64_t seed, int steps);
/* A value written over element `at` of the input or the parameter or state
 * tensor called `name`, after the random fill. */
typedef struct {
	const char *name;
	int64_t at;
	double value;
} cgt_poke;
/* cgt_compare with the pokes applied (to inputs at every step), and, when
 * out is given, output `out` of the last step copied as doubles into jit
 * (the JIT's) and ref (the interpreter's). */
double cgt_compare_poked(ir_graph *g, int threads, uint64_t seed, int steps, const cgt_poke *pokes,
	int npokes, const char *out, double *jit, double *ref);
double cgt_rel_err(const void *a, const void *b, ir_dtype dt, int64_t n);
/* A convolution x [n,c,h,w] * w [o,c,k,k] with stride s and padding pad
 * (top, bottom, left, right): conv2d, conv2d_dx and conv2d_dw as outputs
 * y, dx and dw of inputs x, w and dy, planned for `threads` threads. */
typedef struct {
	int64_t n, c, h, w, o, k, s, pad[4];
} cgt_conv;
ir_graph *cgt_conv_graph(const cgt_conv *c, ir_dtype dt, int threads);
/* Conv c's types in IR text (x, w, y; a channel vector and batch-norm
 * statistics of x's channels and of y's), and its attributes. */
typedef struct {
	char x[96], w[96], y[96], xc[96], xs[96], yc[96], ys[96], attrs[160];
} cgt_conv_text;
void cgt_conv_text_of(const cgt_conv *c, ir_dtype dt, cgt_conv_text *t);
/* Appends a formatted line to buf (of len bytes, at *at). */
__attribute__((format(printf, 4, 5))) void cgt_line(char *buf, size_t len, size_t *at, const char *fmt, ...);

Suite *cg_ops_suite(void);
Suite *cg_attn_suite(void);
Suite *cg_norm_suite(void);
Suite *cg_gelu_suite(void); /* fuse: GELU's accuracy in f32 */
Suite *cg_winograd_suite(void);
Suite *cg_conv_tune_suite(void); /* the measured choice of a lowering, cached */
Suite *cg_epilogue_suite(void); /* the batch-norm statistics epilogue of convolutions */
Suite *cg_prologue_suite(void); /* batch norm and ReLU computed by the next convolution */
Suite *cg_split_suite(void); /* images per parallel index, even over two threads */
Suite *cg_objcache_suite(void); /* compiled objects kept on disk */
Suite *cg_conv_dx_suite(void); /* the stride-2 data gradient by the phases of dX */

#endif
