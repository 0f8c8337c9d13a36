/* internal.h: internal to codegen/.  The module being built, the kernel
 * builder (a thin layer over the LLVM C API for the loops kernels are made
 * of), and the table of op emitters.
 *
 * Kernel ABI.  Every generated kernel is
 *     void kernel(void **args, int64_t lo, int64_t hi, int64_t tid)
 * and computes the part [lo, hi) of its parallel extent (images, rows,
 * channels or element chunks, as its emitter says) as thread tid.  args
 * holds the buffers: for one node, args[0] is the result, args[1..nin] the
 * operands, args[nin+1] the workspace (each thread uses its own slice of
 * it).  The step function fills args and hands the kernel to the parallel
 * dispatcher.
 *
 * LLVM ownership: a cg_module owns its LLVMContext (through an ORC
 * thread-safe context), its LLVMModule and its builder; the JIT and the
 * object emitter compile the modules to object code in memory and leave
 * them to it, and cg_module_free disposes of all three. */
#ifndef REVC_CG_INTERNAL_H
#define REVC_CG_INTERNAL_H

#include <llvm-c/Core.h>
#include <llvm-c/Orc.h>
#include <llvm-c/TargetMachine.h>

#include "cg.h"
#include "conv_geom.h"

/* ---- the target, optimisation, the step (module.c, jit.c, step.c) -------- */

/* A target machine for cpu (cg_options.cpu: NULL or "native" is the host's
 * CPU and features, a name that CPU's features); the caller disposes. */
LLVMTargetMachineRef cg_target_machine(const char *cpu, LLVMCodeGenOptLevel level, LLVMRelocMode reloc,
	char **err);
/* default<O3> for tm; on failure *err (LLVMDisposeErrorMessage it). */
bool cg_optimize(LLVMModuleRef mod, LLVMTargetMachineRef tm, char **err);
bool cg_dump_module(LLVMModuleRef mod, const char *dir, const char *name, ir_diags *d);
/* Verifies a module, writing its text to dump_dir first when asked (so an
 * invalid module can be read); false with a diagnostic when invalid. */
bool cg_check_module(LLVMModuleRef mod, const char *dump_dir, const char *name, ir_diags *d);

/* ---- compiled objects kept on disk (objcache.c) ---------------------------- */

#define CG_OBJCACHE_KEY 33 /* 32 hex digits and a NUL */
/* On unless REVC_OBJECT_CACHE=0. */
bool cg_objcache_on(void);
/* False, with a diagnostic, when REVC_OBJECT_CACHE is not 0, 1 or unset. */
bool cg_objcache_env_ok(ir_diags *d);
/* The key of mod (not yet optimised) compiled for cpu at code generation
 * level `level`, optimised or not; false when the module cannot be
 * written out. */
bool cg_objcache_key(LLVMModuleRef mod, const char *cpu, int level, bool optimize, char key[CG_OBJCACHE_KEY]);
/* The object cached under key (the caller's), or NULL when there is none
 * or its file is damaged. */
LLVMMemoryBufferRef cg_objcache_load(const char *key);
/* Keeps obj (still the caller's) under key; failures are silent. */
void cg_objcache_store(const char *key, LLVMMemoryBufferRef obj);

typedef struct cg_module cg_module;
/* m's kernels compiled for o->cpu and loaded into a new JIT (jit.c;
 * cg_jit_free it), each then found by its function: NULL with
 * diagnostics on failure.  m stays the caller's. */
cg_jit *cg_jit_kernels(cg_module *m, const cg_options *o, ir_diags *d);
revc_abi_kernel *cg_jit_kernel(cg_jit *j, LLVMValueRef fn, ir_diags *d);

/* Where a kernel's body is: the module it is emitted into. */
typedef struct {
	cg_module *m;
	LLVMValueRef fn;
} cg_home;

/* A kernel, found by its signature: fn is callable from the step's module,
 * home where its body lives. */
typedef struct {
	char *key;
	LLVMValueRef fn;
	cg_home home;
} cg_cached;

/* A kernel this compile calls at an address from the kcache. */
typedef struct {
	char name[96];
	uint64_t addr;
} cg_reused;

/* The address of the kernel with kcache key key (kctx, a tab, the
 * signature), or 0; adding keeps the first address a key was given. */
uint64_t cg_kcache_find(cg_kcache *c, const char *key);
void cg_kcache_add(cg_kcache *c, const char *key, uint64_t addr);
/* Writes the kcache key of signature key in m to buf (malloc'd). */
char *cg_kcache_key(const cg_module *m, const char *key);

/* The modules of one compilation: the step's, and optionally `parts`
 * modules, each with its own context, that kernels are spread over so they
 * can be optimised and compiled in parallel. */
#define CG_MAX_PARTS 8

struct cg_module {
	LLVMOrcThreadSafeContextRef tsctx; /* owns ctx */
	LLVMContextRef ctx;
	LLVMModuleRef mod;                 /* NULL once taken */
	LLVMBuilderRef b;                  /* owned; disposed by cg_module_free */
	LLVMTypeRef ptr, i1, i32, i64, f32, f64, vd;
	LLVMTypeRef kernel_ty;             /* void (ptr, i64, i64, i64) */
	LLVMTypeRef par_ty;                /* void (ptr ctx, ptr kernel, ptr args, i64 n) */
	cg_cached *cache;
	int ncache, capcache;
	int threads;                       /* workspace slices per kernel */
	cg_stats *stats;
	cg_module *part[CG_MAX_PARTS];     /* kernel modules (the step module only) */
	int nparts;
	int part_cost[CG_MAX_PARTS];       /* the kernels' estimated compile times in each part (module.c) */
	char prefix[64];                   /* of external kernel names */
	const char *cpu;                   /* the CPU code is for (cg_options.cpu) */
	int vec_bytes;                     /* its vector width (gemm.c) */
	bool libm_math;                    /* cg_options.libm_math */
	bool profile;                      /* cg_options.profile (the step module) */
	cg_kcache *kcache;                 /* cg_options.kcache (the step module), or NULL */
	char kctx[128];                    /* what besides the signature makes a kernel's code (kcache.c) */
	cg_reused *reused;                 /* kernels called from the kcache: symbol and address */
	int nreused, capreused;
};

/* The kernel cache lives in one cg_module, that is one compilation for one
 * CPU: kernels are never shared between CPUs. */
void cg_module_init(cg_module *m, const char *name, const char *cpu, int threads, cg_stats *stats);
/* Spreads kernels over n more modules (n <= CG_MAX_PARTS). */
void cg_module_add_parts(cg_module *m, int n);
/* The kernel modules (and compile threads) for code run on `threads`
 * threads: that many, from 1 to CG_MAX_PARTS. */
int cg_module_parts_for(int threads);
void cg_module_free(cg_module *m);
/* An external function declared in the module (e.g. cblas_sgemm). */
LLVMValueRef cg_extern(cg_module *m, const char *name, LLVMTypeRef ty);

/* Emits NAME_step for planned g into m (kernels as needed). */
LLVMValueRef cg_emit_step(cg_module *m, const ir_graph *g, const char *name, ir_diags *d);

/* ---- the kernel builder --------------------------------------------------- */

typedef struct {
	cg_module *m;
	LLVMBuilderRef b;
	LLVMValueRef fn, args, lo, hi, tid;
	ir_dtype dt;
	LLVMTypeRef real; /* float or double */
	const struct cg_conv_epi_s *epi; /* a convolution's epilogue (k_conv.c), or NULL */
	const struct cg_conv_pro_s *pro; /* a conv2d's prologue (k_conv_prologue.c), or NULL */
} cg_kb;

/* The kernel whose signature is key, callable from m's step: *fresh says
 * whether it is new, and then its body must be emitted into home (with
 * cg_kb_begin(home.m, home.fn) ... cg_kb_end). */
LLVMValueRef cg_kernel(cg_module *m, const char *key, bool *fresh, cg_home *home);
void cg_kb_begin(cg_kb *k, cg_module *m, LLVMValueRef fn, ir_dtype dt);
void cg_kb_end(cg_kb *k);

LLVMValueRef cg_i64(cg_kb *k, int64_t v);
LLVMValueRef cg_real(cg_kb *k, double v);
LLVMValueRef cg_f64(cg_kb *k, double v);
/* args[i], a pointer. */
LLVMValueRef cg_arg(cg_kb *k, int i);
/* &base[i] for elements of type ty (real when ty is NULL). */
LLVMValueRef cg_gep(cg_kb *k, LLVMTypeRef ty, LLVMValueRef base, LLVMValueRef i);
LLVMValueRef cg_ld(cg_kb *k, LLVMValueRef base, LLVMValueRef i);
void cg_st(cg_kb *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v);
LLVMValueRef cg_ld_i32(cg_kb *k, LLVMValueRef base, LLVMValueRef i);
/* Integer arithmetic on i64. */
LLVMValueRef cg_iadd(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_isub(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_imul(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_idiv(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_irem(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_imin(cg_kb *k, LLVMValueRef a, LLVMValueRef b); /* signed */
LLVMValueRef cg_imax(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
/* Real arithmetic (in the kernel's type, or f64 for accumulators). */
LLVMValueRef cg_fadd(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_fsub(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_fmul(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_fdiv(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
/* a > b || isnan(a) ? a : b: a NaN in either wins, as in PyTorch's max and
 * max pooling; of equal values, b (so a running maximum keeps the first). */
LLVMValueRef cg_fmax(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
/* a <= 0 ? 0 : b, relu's select (a = b = x) and relu_grad's (a = y, b = dy):
 * a NaN a passes b, so NaN propagates as in IEEE arithmetic and PyTorch. */
LLVMValueRef cg_relu_select(cg_kb *k, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_to_f64(cg_kb *k, LLVMValueRef v);
LLVMValueRef cg_to_real(cg_kb *k, LLVMValueRef v);
/* The declaration of LLVM intrinsic `name` overloaded on over[0..nover),
 * and its function type in *fty. */
LLVMValueRef cg_intrinsic(cg_kb *k, const char *name, LLVMTypeRef *over, int nover, LLVMTypeRef *fty);
/* A unary math intrinsic ("llvm.exp", "llvm.log", "llvm.sqrt") on v's type. */
LLVMValueRef cg_math(cg_kb *k, const char *name, LLVMValueRef v);
/* a·b + c rounded once (llvm.fma: C's fma and fmaf give the same bits). */
LLVMValueRef cg_fma(cg_kb *k, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
/* A call of libm's double function `name` of one double (erf, which LLVM
 * has no intrinsic for): the JIT finds it in the process, and a compiled
 * model links it with -lm. */
LLVMValueRef cg_libm(cg_kb *k, const char *name, LLVMValueRef v);
/* Straight-line math in double that the loop vectoriser widens (vmath.c):
 * exp(v), and Φ(x), the normal distribution function, accurate to ~4e-14
 * relative in both tails; with gauss, *gauss = exp(−x²/2) as well. */
LLVMValueRef cg_vexp(cg_kb *k, LLVMValueRef v);
LLVMValueRef cg_vphi(cg_kb *k, LLVMValueRef x, LLVMValueRef *gauss);
/* Φ(x) to ~2e-9 relative at half the cost: for a product with Φ rounded to
 * f32 (GELU), never for a sum that cancels (GELU's gradient). */
LLVMValueRef cg_vphi_fast(cg_kb *k, LLVMValueRef x);
/* Whether k's f32 kernel uses them (and reassociates its row sums) rather
 * than libm and the reference's order: not in f64, not under libm_math. */
static inline bool cg_vector_math(const cg_kb *k)
{
	return k->dt == IR_F32 && !k->m->libm_math;
}
void cg_memset0(cg_kb *k, LLVMValueRef ptr, LLVMValueRef bytes);
/* Zeroes elems elements of the kernel's type at p (a call), or p[lo .. hi)
 * with a loop (for the few elements at a row's edge). */
void cg_zero(cg_kb *k, LLVMValueRef p, LLVMValueRef elems);
void cg_zero_loop(cg_kb *k, LLVMValueRef p, LLVMValueRef lo, LLVMValueRef hi);
void cg_memcpy(cg_kb *k, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef bytes);

/* Vectors of `lanes` elements (vec.c; at most CG_MAX_VLANES): the mask of
 * the first n lanes; x in every lane; base[i ..] of the kernel's type, only
 * the first n lanes when n < lanes (the rest zero); v stored at base[i ..],
 * only its first n lanes when n is less than its width. */
#define CG_MAX_VLANES 64
LLVMValueRef cg_vmask(cg_kb *k, int lanes, int n);
LLVMValueRef cg_vsplat(cg_kb *k, LLVMValueRef x, int lanes);
LLVMValueRef cg_vload(cg_kb *k, int lanes, LLVMValueRef base, LLVMValueRef i, int n);
void cg_vstore(cg_kb *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v, int n);

/* for (i = lo; i < hi; i++): cg_for positions the builder in the body and
 * returns i; up to CG_MAX_CARRY values can be carried around the loop
 * (cg_carry right after cg_for gives each one's value in the body;
 * cg_end_for takes their next values and leaves their final values in
 * l->out). */
#define CG_MAX_CARRY 24
typedef struct {
	LLVMBasicBlockRef head, exit;
	LLVMValueRef i;
	LLVMValueRef phi[CG_MAX_CARRY];
	LLVMValueRef out[CG_MAX_CARRY];
	int ncarry;
	bool keep; /* set before cg_end_for: never unroll this loop */
	bool parallel; /* set before cg_end_for: its iterations are independent */
} cg_loop;

LLVMValueRef cg_for(cg_kb *k, cg_loop *l, LLVMValueRef lo, LLVMValueRef hi);
LLVMValueRef cg_carry(cg_kb *k, cg_loop *l, LLVMValueRef init);
void cg_end_for(cg_kb *k, cg_loop *l, const LLVMValueRef *next);
/* Marks loop l (before its cg_end_for) as one the optimiser must not unroll:
 * outer loops with constant trip counts, whose full unrolling would make
 * compile time explode for no speed. */
void cg_keep_loop(cg_loop *l);
/* Marks loop l (before its cg_end_for) as one whose iterations touch no
 * memory another iteration writes (llvm.loop.parallel_accesses over every
 * load and store in its body), so the vectoriser needs no run-time overlap
 * checks: the element loops of in-place kernels, whose result is the
 * storage of an operand read at the same index, which such checks reject. */
void cg_parallel_loop(cg_loop *l);

/* if (cond) { ... } */
typedef struct {
	LLVMBasicBlockRef join;
} cg_if;
void cg_if_begin(cg_kb *k, cg_if *c, LLVMValueRef cond);
void cg_if_end(cg_kb *k, cg_if *c);

/* ---- matrix products on registers (codegen/gemm.c) ------------------------ */

/* Each reduction index of these products may stand for a few `taps`:
 * element t of row r of B is at r·ldb + b_tap[t] (and of A at
 * r·a_cs + a_tap[t]), so a convolution's window offsets address the padded
 * image directly instead of unfolded columns.  taps 0 means one tap at 0. */
#define CG_MAX_TAPS 9

/* C = A·B: C is m x p, the reduction r (times taps) long.  A's elements are
 * anywhere (A[i][j, t] at a[i·a_rs + j·a_cs + a_tap[t]]); B's rows and C's
 * are contiguous (B[j, t][x] at b[j·ldb + b_tap[t] + x], C[i][x] at
 * c[i·ldc + x]). */
typedef struct {
	int64_t m, r, p;
	LLVMValueRef a;
	int64_t a_rs, a_cs;
	LLVMValueRef b;
	int64_t ldb;
	LLVMValueRef c;
	int64_t ldc;
	int taps;
	const int64_t *a_tap, *b_tap;
} cg_ab;

void cg_gemm_ab(cg_kb *k, const cg_ab *g);

/* dst[j] = src[s·j + off] where 0 <= s·j + off < w, else 0, for j in
 * [0, n): a row of a zero-bordered plane (s = 1) or of one phase of a
 * plane split by stride (s = 2), in whole vectors, masked at the ends.
 * Elements of src outside [0, w) are not read.  With sc (and shift),
 * a convolution's prologue is applied to the elements read
 * (cg_conv_prologue_vec); NULL for a plain copy. */
void cg_gather_row(cg_kb *k, LLVMValueRef dst, LLVMValueRef src, int64_t n, int s, int64_t off, int64_t w,
	LLVMValueRef sc, LLVMValueRef shift);
/* dst[2j] = even[j] and dst[2j + 1] = odd[j] for the n elements of dst: a
 * row put back together from its two phases (the inverse of
 * cg_gather_row at s = 2), in whole vectors, masked at the end.  even's
 * elements from (n + 1) / 2 on and odd's from n / 2 on are not read. */
void cg_interleave_row(cg_kb *k, LLVMValueRef dst, LLVMValueRef even, LLVMValueRef odd, int64_t n);

/* C += A·B^T reducing over `count` segments of q contiguous elements: C is
 * m x (n·taps) at c[i·ldc + j·taps + t]; row i of A in segment s starts at
 * a[s·a_is + i·lda], row (j, t) of B at b[s·b_is + j·ldb + b_tap[t]]. */
typedef struct {
	int64_t m, n, q;
	LLVMValueRef a;
	int64_t lda, a_is;
	LLVMValueRef b;
	int64_t ldb, b_is;
	LLVMValueRef c;
	int64_t ldc;
	int taps;
	const int64_t *b_tap;
} cg_abt;

void cg_gemm_abt(cg_kb *k, const cg_abt *g, LLVMValueRef count);

/* ---- images per parallel index (split.c) ------------------------------------ */

/* The thread count whose chunks cg_split_images balances. */
#define CG_SPLIT_THREADS 2
/* The images of the fullest of `threads` chunks when n images go `per` to
 * a parallel index (the last index taking what is left). */
int64_t cg_split_most(int64_t n, int64_t per, int threads);
/* The images per index in [lo, hi] whose fullest chunk over
 * CG_SPLIT_THREADS threads holds the fewest images; of those the nearest
 * to want (the larger at equal distance), so want itself when it splits
 * as evenly as any.  A bound below 1 is taken as 1, and lo above hi as
 * hi. */
int64_t cg_split_images(int64_t n, int64_t want, int64_t lo, int64_t hi);
/* The parallel extent for n images at most `per` to an index, when index
 * i holds images [i·n/E, (i+1)·n/E) (cg_split_first): ceil(n/per), made a
 * multiple of CG_SPLIT_THREADS by one more index where that is short of
 * n, so that the threads' chunks hold the same images. */
int64_t cg_split_extent(int64_t n, int64_t per);
/* Index i's first image, i·n/extent, and (*count) its images. */
LLVMValueRef cg_split_first(cg_kb *k, LLVMValueRef i, int64_t n, int64_t extent, LLVMValueRef *count);

/* ---- convolutions (k_conv.c, k_conv_implicit.c) ----------------------------- */

/* How a convolution is computed (k_conv_choice.c): the register-blocked
 * products of gemm.c on the image (stride 1) or its unfolded columns,
 * Winograd's F(2x2, 3x3) or F(4x4, 3x3) (k_conv_winograd.c), or im2col and
 * cblas_sgemm/dgemm, the lowering revc had first (for comparison). */
typedef enum {
	CG_CONV_AUTO, /* only as cg_conv_forced's answer: nothing forced */
	CG_CONV_DIRECT,
	CG_CONV_WINOGRAD2,
	CG_CONV_WINOGRAD4,
	CG_CONV_BLAS,
} cg_conv_lowering;

/* REVC_CONV=direct|winograd2|winograd4|blas (REVC_CONV_BLAS=1 is blas). */
cg_conv_lowering cg_conv_forced(void);
/* False, with a diagnostic naming the accepted values, when REVC_CONV is
 * set to something else (empty is unset). */
bool cg_conv_env_ok(ir_diags *d);
/* The lowering of a convolution node's geometry in dtype dt, and in *why
 * (when why is not NULL) a phrase saying why. */
cg_conv_lowering cg_conv_lowering_of(const ir_conv_geom *g, ir_dtype dt, const char **why);
const char *cg_conv_lowering_name(cg_conv_lowering l);
/* The cost model's lowering of g, which Winograd fits, and why. */
cg_conv_lowering cg_conv_modelled(const ir_conv_geom *g, const char **why);
/* The measured choice (k_conv_tune.c): on unless REVC_CONV_TUNE=0 or a
 * lowering is forced. */
bool cg_conv_tune_on(void);
/* Times the candidates of g's convolutions not in the cache for o (and
 * caches them); until cg_conv_tune_end the calling thread's
 * cg_conv_lowering_of gives the measured choices that are in the cache
 * file (the cost model's for the others, so that a run without a
 * writable cache is reproducible). */
void cg_conv_tune_begin(const ir_graph *g, const cg_options *o);
/* Which of the n candidates cand (minimum times ms) the tune keeps: the
 * cost model's choice `model` unless the fastest is 5% faster than it;
 * the fastest (the first on a tie) when model is not among them (MARGIN
 * in k_conv_tune.c). */
int cg_conv_tune_pick(const double *ms, const cg_conv_lowering *cand, int n, cg_conv_lowering model);
void cg_conv_tune_end(void);
/* revc's cache directory, $XDG_CACHE_HOME/revc (else $HOME/.cache/revc),
 * or false when neither is an absolute path (the conv tune's file and the
 * object cache, objcache.c, live there). */
bool cg_cache_dir(char *buf, size_t len);
/* mkdir -p: dir and every missing directory above it (XDG_CACHE_HOME
 * itself may not exist yet); false when one cannot be made. */
bool cg_make_dirs(const char *dir);
/* The same choices for o (NULL: none) until cg_conv_tune_leave(saved),
 * saved holding what was in force. */
void cg_conv_tune_enter(const cg_options *o, char *saved, size_t len);
void cg_conv_tune_leave(const char *saved);
/* The lowering measured for g under the tune in force, and why. */
bool cg_conv_tuned(const ir_conv_geom *g, cg_conv_lowering *l, const char **why);
/* The candidate being emitted for timing, or CG_CONV_AUTO. */
cg_conv_lowering cg_conv_tune_trying(void);
/* elems(g, n), a lowering's workspace elements: when nothing is forced
 * and Winograd fits g, the largest of the tune's candidates' and the cost
 * model's choice's, whether the tune is on or not (so that the plan does
 * not depend on what was measured, nor on REVC_CONV_TUNE). */
int64_t cg_conv_tune_largest(const ir_conv_geom *g, const ir_node *n,
	int64_t (*elems)(const ir_conv_geom *, const ir_node *));
/* Every convolution on BLAS (REVC_CONV=blas). */
bool cg_conv_on_blas(void);
/* Convolutions lowered without unfolding (k_conv_implicit.c: stride 1,
 * and stride 2 with windows of 2x2 and more):
 * whether g is one, its images per parallel index, workspace elements per
 * thread, where conv2d_dw's partial sum starts in it, and the body. */
bool cg_conv_implicit(const ir_conv_geom *g);
int64_t cg_conv_implicit_tile(const ir_conv_geom *g);
int64_t cg_conv_implicit_workspace(const ir_conv_geom *g, bool pro);
int64_t cg_conv_implicit_partial(const ir_conv_geom *g);
void cg_conv_implicit_emit(cg_kb *k, const ir_node *n, const ir_conv_geom *g, LLVMValueRef ws);
/* The stride-2 data gradient by the phases of dX (k_conv_dx_phases.c):
 * whether g is one it computes (windows of 2x2 and more), its workspace
 * elements per thread, and the body (one image per parallel index). */
bool cg_conv_dx_phases_fits(const ir_conv_geom *g);
int64_t cg_conv_dx_phases_workspace(const ir_conv_geom *g);
void cg_conv_dx_phases_emit(cg_kb *k, const ir_node *n, const ir_conv_geom *g, LLVMValueRef ws);
/* Copies src's planes (h x w) into dst's (hp x wp) at (top, left), with
 * zero borders; with `pro`, the kernel's prologue applied to what is
 * copied (src being one image's planes, one per channel). */
void cg_conv_pad_planes(cg_kb *k, int64_t planes, int64_t h, int64_t w, int64_t top, int64_t left, int64_t hp,
	int64_t wp, LLVMValueRef src, LLVMValueRef dst, bool pro);
/* Winograd (k_conv_winograd.c): whether g in dt can be computed so (a 3x3
 * stride-1 conv2d, conv2d_dx or conv2d_dw in f32), whether it is, its parallel
 * extent, its workspace elements per thread, and the body. */
bool cg_conv_winograd_fits(const ir_conv_geom *g, ir_dtype dt);
bool cg_conv_winograd(const ir_conv_geom *g, ir_dtype dt);
int64_t cg_conv_winograd_extent(const ir_conv_geom *g, ir_dtype dt);
int64_t cg_conv_winograd_workspace(const ir_conv_geom *g, ir_dtype dt);
void cg_conv_winograd_emit(cg_kb *k, const ir_node *n, const ir_conv_geom *g, LLVMValueRef ws);
/* conv2d_dw's finish: dW's output planes [k->lo, k->hi) from the threads'
 * partial sums (per: each thread's workspace, in elements). */
void cg_conv_winograd_finish(cg_kb *k, const ir_node *n, const ir_conv_geom *g, int threads, int64_t per);

/* Convolution epilogues (k_conv.c): what the kernel of a conv2d that
 * opens an epilogue group (passes/fuse.c) also computes, for each tile of
 * images of its result y it has just written: z = o + y or o - y (the
 * group's add or sub, o its other operand), then the bn_stats of z (or of
 * y when there is no add or sub); a conv2d_dx's: z = relu_grad(y, o), y
 * masked where o is not positive, then maybe the bn_dgamma of z and its
 * dbeta.  Their buffers are the kernel's arguments from conv->nin + 2 on:
 * z and o, then the statistics; or z and o, then dgamma, its x and stats
 * operands, and dbeta. */
typedef struct cg_conv_epi_s {
	bool res;      /* an add or sub */
	bool sub;      /* z = o - y (else o + y) */
	bool mask;     /* a relu_grad */
	bool stats;    /* a bn_stats */
	bool dgamma;   /* after the relu_grad, a bn_dgamma and its dbeta */
	double eps;    /* the bn_dgamma's */
} cg_conv_epi;
#define CG_EPI_ARGS 6 /* the most buffers an epilogue adds */

/* Convolution prologues (k_conv_prologue.c): a conv2d that follows the
 * bn_norm and relu of a prologue group (passes/fuse.c) reads the bn_norm's
 * input as its x and applies batch norm and ReLU to each element as it
 * copies it (its padded copy, or its unfolded columns): relu(x·sc + shift),
 * one fused multiply-add in the tensor's type with the channel's sc and
 * shift as the bn_norm kernel computes them, rounded to that type.  The
 * bn_norm's statistics, gamma and beta are the kernel's arguments
 * CG_PRO_ARG, + 1 and + 2. */
typedef struct cg_conv_pro_s {
	double eps;       /* the bn_norm's */
	int64_t channels; /* x's */
} cg_conv_pro;
#define CG_PRO_ARG (4 + CG_EPI_ARGS) /* after y, x, w, the workspace and an epilogue's */

/* Does the group g->nodes[i] opens have a prologue: a bn_norm, its relu
 * and a conv2d?  Then *pro is filled in. */
bool cg_conv_opens_prologue(const ir_graph *g, int i, cg_conv_pro *pro);
/* Is conv2d n the convolution of a prologue group (its x a relu in its
 * group)? */
bool cg_conv_has_prologue(const ir_node *n);
/* Appends the prologue's part of the kernel cache's key. */
void cg_conv_prologue_key(const cg_conv_pro *pro, char *key, size_t len);
/* Channel c's sc and shift (in the tensor's type), from the kernel's
 * arguments. */
void cg_conv_prologue_coeffs(cg_kb *k, LLVMValueRef c, LLVMValueRef *sc, LLVMValueRef *shift);
/* relu(x·sc + shift) for one element x (or a vector of them, sc and
 * shift splat). */
LLVMValueRef cg_conv_prologue_apply(cg_kb *k, LLVMValueRef x, LLVMValueRef sc, LLVMValueRef shift);
/* The same for a vector's lanes [lo, hi); the others are zero. */
LLVMValueRef cg_conv_prologue_vec(cg_kb *k, LLVMValueRef v, int64_t lo, int64_t hi, LLVMValueRef sc,
	LLVMValueRef shift);

/* Batch norm's sc = gamma / sqrt(var + eps) and shift = beta - mean·sc, in
 * double (k_elementwise.c's bn_norm and bn_infer, and prologues). */
void cg_bn_coeffs(cg_kb *k, LLVMValueRef mean, LLVMValueRef var, LLVMValueRef gamma, LLVMValueRef beta, double eps,
	LLVMValueRef *sc, LLVMValueRef *shift);

/* Does bn_dgamma n open a dbeta group (passes/fuse.c), its kernel also
 * writing the group's reduce_sum, its argument nin + 2 (k_bn.c)? */
bool cg_bn_opens_dbeta(const ir_node *n);

/* Does conv2d or conv2d_dx n open an epilogue group? */
bool cg_conv_opens_epilogue(const ir_node *n);
/* The epilogue of the group the convolution g->nodes[i] opens, the nodes whose
 * buffers are its arguments (*nargs of them, at most CG_EPI_ARGS), and the group's
 * last list position. */
int cg_conv_epilogue_of(const ir_graph *g, int i, cg_conv_epi *epi, const ir_node **args, int *nargs);
/* Appends the epilogue's part of the kernel cache's key. */
void cg_conv_epilogue_key(const cg_conv_epi *epi, char *key, size_t len);
/* The epilogue of images first .. first+count-1 (a no-op when k->epi has
 * nothing), inside the convolution's loop. */
void cg_conv_epilogue_tile(cg_kb *k, const ir_node *n, LLVMValueRef first, LLVMValueRef count);
/* The serial finish of the statistics: the threads' partials added. */
void cg_conv_stats_finish(cg_kb *k, const ir_node *n, int threads);
/* The serial finish of a data gradient's bn_dgamma and dbeta. */
void cg_conv_dgamma_finish(cg_kb *k, const ir_node *n, int threads);

/* ---- op emitters ------------------------------------------------------------ */

/* How one op is compiled: the extent the step divides among threads, the
 * workspace per thread, a signature of everything the body depends on (for
 * the kernel cache), and the body itself. */
typedef struct {
	int64_t (*extent)(const ir_node *n);
	int64_t (*workspace)(const ir_node *n); /* bytes per thread, or NULL */
	void (*emit)(cg_kb *k, const ir_node *n);
	bool serial; /* run on one thread (tiny kernels, or whole-tensor ones) */
	/* A serial kernel run right after the parallel one, over extent
	 * `threads` (e.g. summing per-thread partial results); or NULL.  The
	 * dispatcher calls every thread, with an empty range if need be, so
	 * each thread's workspace slice is always initialised. */
	void (*finish)(cg_kb *k, const ir_node *n, int threads);
	/* The finish's extent (it covers [k->lo, k->hi) of it), divided
	 * among the threads when the result has FINISH_SPLIT_BYTES or more
	 * (codegen/step.c); NULL: 1. */
	int64_t (*finish_extent)(const ir_node *n);
} cg_op_impl;

/* The emitter for n's op, or NULL (sources, outputs, and ops handled by
 * fusion groups). */
const cg_op_impl *cg_op_impl_get(const ir_node *n);

/* Families (codegen/k_*.c): cg_impl_<op> for every op whose native column
 * in ops.def is IMPL. */
#define CG_IMPL_DECL_IMPL(op) extern const cg_op_impl cg_impl_##op;
#define CG_IMPL_DECL_FUSED(op)
#define CG_IMPL_DECL_BOUND(op)
#define IR_OP(name, ENUM, mn, mx, req, opt, rule, flags, interp, native) CG_IMPL_DECL_##native(name)
#include "ops.def"
#undef IR_OP
#undef CG_IMPL_DECL_IMPL
#undef CG_IMPL_DECL_FUSED
#undef CG_IMPL_DECL_BOUND

/* ---- elementwise groups (codegen/k_elementwise.c) --------------------------- */

/* A fusion group (or one elementwise node): its members in schedule order,
 * and the buffers its kernel reads and writes, in args order: at most
 * every member's operands and its own value (k_elementwise.c checks the
 * bounds against the IR's). */
#define CG_MAX_GROUP 64
#define CG_MAX_GROUP_ARGS (IR_MAX_GROUP * (IR_MAX_FUSE_ARITY + 1))
typedef struct {
	const ir_node *member[CG_MAX_GROUP];
	int n;
	const ir_node *buf[CG_MAX_GROUP_ARGS]; /* each arg's node (its value's buffer) */
	int nbuf;
	bool stored[CG_MAX_GROUP];             /* member's value is written out */
} cg_group;

/* Layer norm's row passes (k_norm.c), shared by its kernels and by fusion
 * groups a row reduction opens (k_elementwise.c), so both compute the same
 * values in the same order.  cg_ln_row_stats: a row's mean and biased
 * variance, in double. */
void cg_ln_row_stats(cg_kb *k, LLVMValueRef row, int64_t d, LLVMValueRef *mean, LLVMValueRef *var);
/* 1/sqrt(var + eps), var in double. */
LLVMValueRef cg_ln_inv_std(cg_kb *k, LLVMValueRef var, double eps);
/* ln_dx on one row: its dy and x rows, gamma [D], the row's mean and inv
 * (double); mg = mean(dy·gamma), mgx = mean(dy·gamma·xhat) as cg_ln_dx_sums
 * leaves them; cg_ln_dx_at gives dx at place j in double. */
typedef struct {
	LLVMValueRef dy, x, gamma;
	LLVMValueRef mu, inv;
	LLVMValueRef mg, mgx;
	int64_t d;
} cg_ln_dx_row;
void cg_ln_dx_sums(cg_kb *k, cg_ln_dx_row *w);
LLVMValueRef cg_ln_dx_at(cg_kb *k, const cg_ln_dx_row *w, LLVMValueRef j);

/* Can n be computed element by element inside a group? */
bool cg_elementwise(const ir_node *n);
/* Fills in buf and stored for g's members; `needed_outside(member)` says
 * whether a member's value is read after the group. */
void cg_group_bind(cg_group *g, bool (*needed_outside)(const ir_node *, void *), void *user);
int64_t cg_group_extent(const cg_group *g);
/* Emits (or finds) the group's kernel. */
LLVMValueRef cg_group_kernel(cg_module *m, const cg_group *g);

#endif
