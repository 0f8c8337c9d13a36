/* cg.h: the public interface of revc's LLVM code generator.
 *
 * It compiles a planned graph (the pipeline through `plan`; `fuse` groups
 * are honoured) into one LLVM module: a kernel per fusion group or node,
 * deduplicated by signature, and a step function that runs the schedule over
 * the planned arena.  The module is JIT-compiled with ORC LLJIT, or written
 * as an object file (codegen/object.c). */
#ifndef REVC_CG_H
#define REVC_CG_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu.h"
#include "ir.h"
#include "revc_abi.h"

/* "19.1.7": the LLVM revc is linked against. */
const char *cg_llvm_version(void);

/* Kernels earlier JIT compiles made, shared with later ones (kcache.c). */
typedef struct cg_kcache cg_kcache;

typedef struct {
	int threads;           /* threads kernels are divided among (>= 1) */
	bool optimize;         /* run LLVM's default<O3> pipeline for the CPU */
	const char *cpu;       /* the CPU to generate code for (cpu.h): NULL or "native" (this host), or a name cg_cpu_known accepts */
	const char *dump_llvm; /* write NAME.ll before and NAME.opt.ll after optimisation here */
	const char *name;      /* symbol prefix (default "revc") */
	bool libm_math;        /* f32 GELU and row kernels as in f64: libm's erf and exp, sums in order (the reference's way, slower; to compare) */
	bool profile;          /* mark each kernel call for the dispatcher to time (rt_pool_profile; JIT only) */
	cg_kcache *kcache;     /* NULL, or kernels to call rather than compile again, and to add this JIT's to (its JITs must outlive this one) */
} cg_options;

typedef struct {
	int kernels;      /* distinct kernels in the module */
	int reused;       /* of them, called from an earlier compile's code (cg_options.kcache) */
	int calls;        /* kernel calls in the step */
	int gemms;        /* BLAS calls per step (convolutions count per image) */
	double flops;     /* floating-point operations per step (GEMMs dominate) */
	double seconds_emit, seconds_optimize, seconds_jit;
	int objects;        /* object files the JIT loaded (the step's and its kernels' parts) */
	int objects_cached; /* of them, found in the object cache (codegen/objcache.c) */
} cg_stats;

/* The code generated follows the step ABI of runtime/revc_abi.h. */

/* Workspace bytes the generated kernel for n needs, for all threads: the
 * memory planner reserves it.  user is a cg_options. */
int64_t cg_workspace(const ir_node *n, void *user);

/* A node's op, operand and result types and attributes (the kernel
 * cache's key): "conv2d f32[100,16,28,28] f32[16,16,3,3] -> f32[...]
 * stride=1 pad=[...]". */
void cg_node_signature(const ir_node *n, char *buf, size_t len);
/* How convolution node n is computed in native code ("direct",
 * "winograd2", "winograd4" or "blas") when compiled with o (with the
 * conv tune, on unless REVC_CONV_TUNE=0, the choice kept for o's CPU and
 * threads once cg_jit_compile has timed it; NULL: the tune of the compile in progress,
 * if any, else the cost model) and, in *why when why is not
 * NULL, why ("measured: direct 0.410 ms, winograd2 0.470 ms"); NULL for
 * other nodes (codegen/k_conv_choice.c). */
const char *cg_conv_describe(const ir_node *n, const cg_options *o, const char **why);
/* The floating-point operations of the products conv node n's lowering
 * (for o, as cg_conv_describe) performs (Winograd's transforms not
 * counted): the direct count 2·N·O·C·KH·KW·Ho·Wo unless Winograd computes it. */
double cg_conv_product_flops(const ir_node *n, const cg_options *o);

typedef struct cg_jit cg_jit;

/* JIT-compiles g (planned) for o->cpu.  On failure (also when this host
 * cannot run code for o->cpu) returns NULL with diagnostics. */
cg_jit *cg_jit_compile(const ir_graph *g, const cg_options *o, cg_stats *stats, ir_diags *d);
/* Whether cg_jit_compile can make code for cpu here (LLVM knows it and
 * this host runs it); else a diagnostic saying why. */
bool cg_jit_cpu_ok(const char *cpu, ir_diags *d);
revc_abi_step *cg_jit_step(const cg_jit *j);

/* An empty kernel cache; free it after every JIT that used it. */
cg_kcache *cg_kcache_new(void);
void cg_kcache_free(cg_kcache *c);
void cg_jit_free(cg_jit *j);

/* Ahead of time: writes g's step (and the evaluation graph's forward, when
 * eval is given) as an object file for o->cpu, which need not be one this
 * host can run (codegen/object.c says what it holds). */
bool cg_emit_object(const ir_graph *step, const ir_graph *eval, const cg_options *o,
	const char *path, ir_diags *d);

#endif
