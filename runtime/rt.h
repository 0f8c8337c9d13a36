/* rt.h: the public interface of revc's runtime: files and atomic writes,
 * random numbers and datasets, .npy files, the directories revc writes
 * whole (checkpoints and their manifests), the parameter store, the
 * interpreter and native executor, threads, the training loop and BLAS.
 * Internal headers: kernels.h (reference kernels), data_in.h (the byte
 * streams loaders read), manifest.h (writing manifests).
 *
 * Runtime functions report user errors (a missing file, a short read, a
 * size the user chose that memory cannot hold) by returning false with a
 * message in an rt_err; they never print or exit.  A broken invariant
 * aborts (IR_ASSERT, IR_DIE). */
#ifndef REVC_RT_H
#define REVC_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir.h"
#include "revc_abi.h"

typedef struct {
	char msg[512];
} rt_err;

bool rt_errorf(rt_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Put fmt's text before or after e's message ("step 3: " + msg,
 * msg + "; the last checkpoint ..."); false. */
bool rt_err_prefixf(rt_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool rt_err_appendf(rt_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A failed allocation whose size the user chose (a spec, a data file):
 * "out of memory: WHAT takes N bytes (X GiB)".  False. */
bool rt_error_oom(rt_err *e, const char *what, int64_t bytes);

/* ---- step arenas (runtime/step_arena.c) ------------------------------ */

/* An arena of bytes (64-byte aligned; from 2 MiB up 2 MiB aligned, with
 * transparent huge pages asked for unless REVC_HUGEPAGES=0), or NULL when
 * out of memory.  Free it with free(). */
void *rt_step_arena_alloc(int64_t bytes);

/* ---- files (runtime/file.c) ------------------------------------------- */

/* The longest path revc builds (PATH_MAX). */
#define RT_PATH_MAX 4096
/* DIR/NAME followed by suffix (e.g. ".npy") into buf (n bytes); false with
 * "path too long" rather than a name cut short. */
bool rt_path_join(char *buf, size_t n, const char *dir, const char *name, const char *suffix, rt_err *e);

/* Opens path for reading, refusing anything but a regular file ("'PATH' is
 * not a regular file") without waiting on a FIFO; *size is its size. */
bool rt_file_open_regular(const char *path, int *fd, int64_t *size, rt_err *e);
/* read(2) until n bytes or the end of the file, retrying on EINTR; false
 * with errno on an error, *got bytes read either way. */
bool rt_file_read_fd(int fd, void *buf, size_t n, size_t *got);
/* Reads a whole regular file (at most max bytes) into a malloc'd buffer with
 * a NUL after the data. */
bool rt_file_read(const char *path, size_t max, char **data, size_t *len, rt_err *e);

/* Writes into buf (n bytes) the template mkstemp and mkdtemp take: the
 * first len bytes of base, then tag (RT_TMP_TAG for revc's temporaries),
 * then the RT_TMP_SUFFIX characters they replace with a unique suffix.
 * False when buf is too small. */
bool rt_temp_template(char *buf, size_t n, const char *base, size_t len, const char *tag);

/* Where `revc compile` finds the runtime it links into model libraries
 * (runtime/aot_path.c): LIBDIR/revc of the installation this code runs
 * from, wherever that prefix now is, else the build tree. */
typedef struct {
	char lib[RT_PATH_MAX];     /* librevc_aot.a */
	char include[RT_PATH_MAX]; /* the directory holding revc_aot.h */
} rt_aot_paths;

bool rt_aot_find(rt_aot_paths *p, rt_err *e);

/* A file written under a temporary name in the same directory, made durable
 * and renamed into place on commit, so readers never see half of it. */
typedef struct {
	FILE *f;
	char *path, *tmp;
} rt_atomic;

bool rt_atomic_open(rt_atomic *a, const char *path, rt_err *e);
bool rt_atomic_commit(rt_atomic *a, rt_err *e);
void rt_atomic_abort(rt_atomic *a);
/* Writes len bytes to path atomically. */
bool rt_file_write_atomic(const char *path, const void *data, size_t len, rt_err *e);
/* Makes a rename into path's directory durable (fsync of the directory);
 * best effort, as the rename has happened either way. */
void rt_sync_parent(const char *path);
/* mode less the process's umask: what open(2) or mkdir(2) would give. */
unsigned rt_umasked(unsigned mode);

/* The temporary names files and directories are built under before their
 * rename: the final name, RT_TMP_TAG, then RT_TMP_SUFFIX characters that
 * mkstemp or mkdtemp choose ("ck.tmp.a8Zk3Q", "x.npy.tmp.Qq01xz"). */
#define RT_TMP_TAG ".tmp."
#define RT_TMP_SUFFIX 6

/* ---- random numbers and data (runtime/rng.c, runtime/data*.c) ---- */

/* xoshiro256** seeded through splitmix64.  Its output never changes between
 * versions: checkpoints store seeds, not streams. */
typedef struct {
	uint64_t s[4];
} rt_rng;

void rt_rng_seed(rt_rng *r, uint64_t seed);
uint64_t rt_rng_next(rt_rng *r);
/* [0, 1) with 53 random bits. */
double rt_rng_uniform(rt_rng *r);
/* Exactly uniform in [0, n); n must be at least 1. */
uint64_t rt_rng_below(rt_rng *r, uint64_t n);
/* An independent stream for (seed, purpose, index): purpose says what the
 * numbers are for (an RT_RNG_* constant), index which one (epoch, tensor). */
void rt_rng_derive(rt_rng *r, uint64_t seed, uint64_t purpose, uint64_t index);

/* Purposes in use; add new ones, never renumber ("epoch", "synth"). */
#define RT_RNG_EPOCH UINT64_C(0x65706f6368)
#define RT_RNG_SYNTHETIC UINT64_C(0x73796e7468)
#define RT_RNG_INIT UINT64_C(0x696e6974)        /* "init": parameter initialisation */
#define RT_RNG_CHECK_BATCH UINT64_C(0x6261746368) /* "batch": revc check's batch */
#define RT_RNG_CHECK_PICK UINT64_C(0x7069636b)    /* "pick": revc check's coordinates */

/* A labelled image set held in memory. */
typedef struct {
	int64_t n;            /* examples */
	int c, h, w;          /* image shape */
	int classes;
	uint8_t *pixels;      /* n*c*h*w bytes, CHW per image, as stored */
	int32_t *labels;      /* n */
} rt_dataset;

/* Largest dataset held in memory: pixels and int32 labels together.  A
 * header or file that promises more is refused before anything is
 * allocated. */
#define RT_DATA_MAX_BYTES ((int64_t)1 << 34)
/* Where Debian's dataset-fashion-mnist installs its files. */
#define RT_FASHION_DIR "/usr/share/datasets/fashion-mnist"

/* A limit a caller puts on one dataset, below RT_DATA_MAX_BYTES: at most
 * `bytes` of pixels and labels (rt_dataset_bytes); 0 or less admits no
 * dataset at all.  `what` names it in messages, as the words after "more
 * than" ("the 2.0 MiB left of --max-memory 64 MiB"); NULL says "the N bytes
 * allowed".  Loaders take a pointer to one, or NULL for no limit but
 * RT_DATA_MAX_BYTES. */
typedef struct {
	int64_t bytes;
	const char *what;
} rt_data_limit;

/* Loaders: on failure *out is left empty (zeroed), nothing is leaked, and
 * the message names the offending file (it starts with its path, but for
 * one that cannot be opened: "cannot open 'PATH': ...", "'PATH' is not a
 * regular file", as for every file revc reads).  Inputs are untrusted:
 * a loader allocates the dataset once, exactly as large as the file's
 * header (IDX) or size (CIFAR-10) says, after checking that against the
 * limits, and reads no further into a file than that plus one byte, so a
 * gzip file that inflates to far more than it promises costs no more than
 * its promise.
 *
 * IDX (MNIST family): images magic 0x00000803 [n,h,w], labels 0x00000801 [n],
 * gzip-compressed or plain; labels must be below 10. */
bool rt_data_load_idx(const char *images_path, const char *labels_path, const rt_data_limit *lim,
	rt_dataset *out, rt_err *e);
/* Fashion-MNIST's four standard file names in dir (with or without .gz);
 * dir NULL means RT_FASHION_DIR. */
bool rt_data_load_fashion(const char *dir, bool train, const rt_data_limit *lim, rt_dataset *out,
	rt_err *e);
/* CIFAR-10 binary version: data_batch_1.bin .. data_batch_5.bin (train) or
 * test_batch.bin (test) in dir; records of 1 label byte + 3072 CHW pixels.
 * The files must be uncompressed: having no header, only their sizes say
 * how much they hold. */
bool rt_data_load_cifar10(const char *dir, bool train, const rt_data_limit *lim, rt_dataset *out,
	rt_err *e);

/* The loaders' parsers, on bytes already in memory (decompressed): fuzzing
 * entry points.  Names are used in messages only. */
bool rt_data_parse_idx(const uint8_t *img, size_t img_len, const uint8_t *lab, size_t lab_len,
	const char *img_name, const char *lab_name, rt_dataset *out, rt_err *e);
bool rt_data_parse_cifar10(const uint8_t *buf, size_t len, const char *name, rt_dataset *out, rt_err *e);

/* Whether n examples of c x h x w pixels make a dataset rt_dataset_alloc
 * accepts: n >= 1, every dim >= 1, one image below 2^31 values, and
 * pixels + labels within RT_DATA_MAX_BYTES and lim (may be NULL).  *bytes
 * receives what the dataset takes (rt_dataset_bytes). */
bool rt_dataset_fits(int64_t n, int64_t c, int64_t h, int64_t w, const rt_data_limit *lim,
	const char *name, int64_t *bytes, rt_err *e);
/* Checks the shape with rt_dataset_fits and allocates d's arrays. */
bool rt_dataset_alloc(rt_dataset *d, int64_t n, int64_t c, int64_t h, int64_t w, int classes,
	const char *name, const rt_data_limit *lim, rt_err *e);
/* The bytes d's arrays take: one a pixel, four a label. */
int64_t rt_dataset_bytes(const rt_dataset *d);
void rt_dataset_free(rt_dataset *d);

/* Deterministic learnable data: each class is a stripe pattern with its own
 * orientation and period; each example has a random phase and contrast plus
 * pixel noise.  Fails, with out empty, on a shape rt_dataset_alloc
 * refuses. */
bool rt_data_synthetic(int64_t n, int64_t c, int64_t h, int64_t w, int classes, uint64_t seed,
	const rt_data_limit *lim, rt_dataset *out, rt_err *e);

/* The order of examples in epoch `epoch`: a Fisher-Yates shuffle of 0..n-1
 * drawn from rt_rng_derive(seed, RT_RNG_EPOCH, epoch). */
void rt_data_epoch_order(int64_t n, uint64_t seed, int64_t epoch, int64_t *perm);

/* Gathers examples idx[0..bs) into x (bs*c*h*w values, pixel/255) and y. */
void rt_data_batch_f32(const rt_dataset *d, const int64_t *idx, int64_t bs, float *x, int32_t *y);
void rt_data_batch_f64(const rt_dataset *d, const int64_t *idx, int64_t bs, double *x, int32_t *y);

/* ---- .npy files (runtime/npy.c) ---------------------------------------- */

/* The element types revc exchanges; anything else in a file is refused. */
typedef enum { RT_NPY_F32, RT_NPY_F64, RT_NPY_I32, RT_NPY_I64, RT_NPY_U8, RT_NPY_DTYPE_COUNT } rt_npy_dtype;

#define RT_NPY_MAX_RANK 8

typedef struct {
	rt_npy_dtype dtype;
	int rank;                       /* 0 for a 0-d array (e.g. a scalar loss) */
	int64_t dim[RT_NPY_MAX_RANK];
	void *data;                     /* malloc'd, C order, little-endian native values */
	int64_t count;                  /* number of elements */
} rt_npy;

/* Parses a whole .npy file image (format 1.0, 2.0 or 3.0) held in memory;
 * `name` starts every message.  Untrusted input is fine: any bytes give
 * either an array or false with a message, never a read out of bounds.
 * Refuses Fortran order, big-endian and non-numeric dtypes, shapes over
 * 2^40 bytes, and data that is short or followed by trailing bytes.  On
 * failure *out is zeroed (rt_npy_free on it is harmless).  Used by
 * rt_npy_read and by fuzzers. */
bool rt_npy_parse(const void *buf, size_t len, const char *name, rt_npy *out, rt_err *e);
/* Reads the file at path as rt_npy_parse does, with path as the name. */
bool rt_npy_read(const char *path, rt_npy *out, rt_err *e);
/* Writes atomically, with the header NumPy's np.save writes (format 1.0;
 * 2.0 only if the header needs it), so numpy.load reads it back. */
bool rt_npy_write(const char *path, rt_npy_dtype dtype, int rank, const int64_t *dim,
	const void *data, rt_err *e);
void rt_npy_free(rt_npy *a);
/* NumPy's descr for the type as the writer puts it in headers: "<f4",
 * "<f8", "<i4", "<i8", "|u1". */
const char *rt_npy_dtype_name(rt_npy_dtype t);
/* Bytes per element. */
int rt_npy_dtype_size(rt_npy_dtype t);
/* revc's name for the type: "f32", "f64", "i32", "i64", "u8". */
const char *rt_npy_dtype_word(rt_npy_dtype t);
/* "[16,1,3,3]", "[]" for rank 0; returns what snprintf does. */
int rt_npy_dims_str(int rank, const int64_t *dim, char *buf, size_t n);
/* Convert a->count elements to double / to float, whatever the source
 * dtype (for loading params and labels). */
void rt_npy_to_f64(const rt_npy *a, double *dst);
void rt_npy_to_f32(const rt_npy *a, float *dst);

/* ---- directories revc writes whole (runtime/dir.c, runtime/manifest.c) ---- */

/* What a directory revc wrote holds. */
typedef enum {
	RT_DIR_CHECKPOINT, /* revc train --save: the store, step.npy, data_seed.npy */
	RT_DIR_PARAMS,     /* revc init, revc grad --params-out, a compiled library's save */
	RT_DIR_GRADIENTS,  /* revc grad --out */
	RT_DIR_STATE,      /* revc grad --state-out */
	RT_DIR_KIND_COUNT
} rt_dir_kind;

/* "checkpoint", "params", "gradients", "state": the manifest's word. */
const char *rt_dir_kind_name(rt_dir_kind k);
/* What such a directory holds, for messages: "a checkpoint (revc train
 * --save)", "parameters", "gradients (revc grad --out)", ... */
const char *rt_dir_kind_what(rt_dir_kind k);

/* The file that marks a directory as revc's and lists its tensors. */
#define RT_MANIFEST_NAME "revc-manifest.txt"
/* At most this many tensors in one directory (a model has a few hundred). */
#define RT_MANIFEST_MAX_TENSORS 65536
/* The longest tensor name: NAME.npy and its temporary NAME.npy.tmp.<random>
 * must each be one file name (NAME_MAX, 255 bytes). */
#define RT_MANIFEST_MAX_NAME (255 - 4 - (int)(sizeof RT_TMP_TAG - 1) - RT_TMP_SUFFIX)

typedef struct {
	char *name;                     /* the file is NAME.npy */
	rt_npy_dtype dtype;
	int rank;
	int64_t dim[RT_NPY_MAX_RANK];
	int line;                       /* where rt_manifest_parse read it, else 0 */
} rt_manifest_tensor;

typedef struct {
	rt_dir_kind kind;
	char *model;                    /* the spec's model name, or NULL */
	int64_t step, seed;             /* checkpoints: steps done, data seed; else -1 */
	int64_t ranks, batch;           /* of K > 1 processes: K, the batch of each; else -1 */
	rt_manifest_tensor *t;          /* every NAME.npy of the directory, in list order */
	int n, cap;
	const rt_manifest_tensor **index; /* t by name (rt_manifest_seal), NULL after an add */
} rt_manifest;

void rt_manifest_init(rt_manifest *m, rt_dir_kind kind);
void rt_manifest_free(rt_manifest *m);
bool rt_manifest_set_model(rt_manifest *m, const char *model, rt_err *e);
/* Records NAME.npy: a name is one word without '/' of at most
 * RT_MANIFEST_MAX_NAME bytes, and a manifest holds at most
 * RT_MANIFEST_MAX_TENSORS.  A name given twice is found by rt_manifest_seal. */
bool rt_manifest_add(rt_manifest *m, const char *name, rt_npy_dtype dtype, int rank, const int64_t *dim,
	rt_err *e);
/* Sorts the tensors by name for rt_manifest_find and checks that each name
 * is there once ("two tensors named 'x'").  rt_manifest_parse seals what it
 * reads, and a manifest is sealed before it is written. */
bool rt_manifest_seal(rt_manifest *m, rt_err *e);
/* The tensor of a sealed manifest named name, or NULL (a binary search). */
const rt_manifest_tensor *rt_manifest_find(const rt_manifest *m, const char *name);
/* "f32[16,1,3,3]", "i64[]"; returns what snprintf does. */
int rt_manifest_shape_str(const rt_manifest_tensor *t, char *buf, size_t n);
/* The text of the manifest (malloc'd, *len bytes), or NULL with a message
 * (out of memory, or longer than a manifest may be). */
char *rt_manifest_format(const rt_manifest *m, size_t *len, rt_err *e);
/* Parses a manifest held in memory (untrusted; `name` starts messages);
 * the result is sealed. */
bool rt_manifest_parse(const char *buf, size_t len, const char *name, rt_manifest *out, rt_err *e);
/* Reads DIR/revc-manifest.txt: *found is false (and the result true) when
 * there is none; a manifest that does not parse is an error. */
bool rt_manifest_read(const char *dir, rt_manifest *out, bool *found, rt_err *e);

/* Whether path may be written by rt_dir_begin .. rt_dir_commit with a
 * directory of kind: a new name in a writable directory, an empty
 * directory, or a directory revc wrote of the same kind (its manifest, and
 * only the NAME.npy files listed there).  Refuses anything else -- a
 * non-empty directory of the user's, a checkpoint that gradients would
 * replace, a file, a symlink, ".", "..", a mount point -- with a message
 * naming what is in the way. */
bool rt_dir_check(const char *path, rt_dir_kind kind, rt_err *e);
/* Whether paths a and b name the same directory to write: their parents
 * resolved (they need not exist yet), trailing slashes dropped. */
bool rt_dir_same(const char *a, const char *b);

/* A directory built under the temporary sibling name PATH.tmp.<random> and
 * swapped into place by rt_dir_commit, which replaces a previous directory
 * of that name only once the new one is complete: a crash at any moment
 * leaves either the old directory or the new one (and a temporary that the
 * next rt_dir_begin for PATH removes). */
typedef struct {
	char *path;                     /* without trailing slashes */
	char *tmp;                      /* where it is built */
	int fd;                         /* tmp, flock'ed while it is built */
	rt_manifest manifest;           /* what has been written; set step and seed here */
} rt_dir;

/* rt_dir_check for kind, removes PATH's stale temporaries, and creates the
 * temporary, marked from the start by a manifest of kind and model
 * (model may be NULL). */
bool rt_dir_begin(rt_dir *d, const char *path, rt_dir_kind kind, const char *model, rt_err *e);
/* Writes NAME.npy into the directory (atomically) and lists it. */
bool rt_dir_write_npy(rt_dir *d, const char *name, rt_npy_dtype dtype, int rank, const int64_t *dim,
	const void *data, rt_err *e);
/* Writes the manifest, checks PATH again, and swaps the directory into
 * place.  Commit and abort release everything, on failure too. */
bool rt_dir_commit(rt_dir *d, rt_err *e);
void rt_dir_abort(rt_dir *d);

/* ---- the parameter store (runtime/store.c) ------------------------------ */

/* A named persistent tensor: a parameter, a running statistic or
 * optimiser state (a momentum buffer, AdamW's moments and step count). */
typedef struct {
	char *name;
	ir_type type;
	void *data;     /* ir_type_bytes(&type) bytes */
	bool trainable; /* a param (else state) */
} rt_tensor;

typedef struct {
	rt_tensor *t;
	int n, cap;
} rt_store;

void rt_store_init(rt_store *s);
void rt_store_free(rt_store *s);
rt_tensor *rt_store_find(const rt_store *s, const char *name);
/* Whether every element of data (of type t) is finite; integer types
 * always are. */
bool rt_all_finite(const void *data, const ir_type *t);
/* True when every tensor of s is finite; else false, saying which are
 * not: "init.conv.w in ck holds NaN or Inf", "2 of 108 tensors in ck hold
 * NaN or Inf, init.conv.w first" (where names the store, or is NULL). */
bool rt_store_check_finite(const rt_store *s, const char *where, rt_err *e);
/* Adds a copy of t. */
bool rt_store_add_copy(rt_store *s, const rt_tensor *t, rt_err *e);
/* Adds a zeroed tensor; NULL with the size in e when memory runs out. */
rt_tensor *rt_store_add(rt_store *s, const char *name, const ir_type *type, bool trainable, rt_err *e);
/* Sets t to its initial value per docs/model.md (see rt_store_init_from_graph). */
bool rt_store_init_tensor(rt_tensor *t, uint64_t seed, rt_err *e);
/* Reads DIR/NAME.npy into t, converting to t's dtype; the shape must match. */
bool rt_store_load_tensor(rt_tensor *t, const char *dir, rt_err *e);
/* Adds every param and state of g that s lacks, initialised per docs/model.md
 * from seed: weights (".w") Glorot-uniform, ".gamma" 1, ".beta" and ".b" 0,
 * ".mean" 0, ".var" 1, optimiser state 0 (momentum buffers ".mom", AdamW's
 * moments ".m" and ".v" and step count "adamw.t").  A tensor already there
 * must have the graph's type. */
bool rt_store_init_from_graph(rt_store *s, const ir_graph *g, uint64_t seed, rt_err *e);
/* Puts s's tensors in the order of canon's persistent nodes, each followed
 * by the tensors named after it ("NAME.mom"), the rest after them all in
 * their order: a model's store in docs/model.md order (canon its lowered
 * forward graph), whatever order the scheduled step happens to use them in. */
void rt_store_order_like(rt_store *s, const ir_graph *canon);
/* Loads every param and state of g from DIR/NAME.npy, converting to the
 * graph's dtype.  Tensors the model does not have are ignored (a checkpoint
 * of a deeper model loads into a shallower one); every tensor it has must be
 * there with its shape, else an error names the first that is missing or
 * mis-shaped.  DIR need not be revc's (NumPy can write it).  When it holds
 * a manifest, that must be of kind params or checkpoint ("'G' holds
 * gradients (revc grad --out), not parameters"), and every tensor is
 * checked against its list before any file is read; without one, the
 * files are read one by one.  With params_only, optimiser state (momentum
 * buffers, AdamW's moments and step count) starts at zero instead. */
bool rt_store_load(rt_store *s, const ir_graph *g, const char *dir, bool params_only, rt_err *e);
/* The same with DIR's manifest already read: m, or NULL when it has none. */
bool rt_store_load_with(rt_store *s, const ir_graph *g, const char *dir, const rt_manifest *m, bool params_only,
	rt_err *e);
/* Loads every tensor s holds from DIR, by the same rules (a compiled
 * library's load). */
bool rt_store_load_all(rt_store *s, const char *dir, rt_err *e);
/* Writes every tensor as NAME.npy into d. */
bool rt_store_save(const rt_store *s, rt_dir *d, rt_err *e);
/* The same into a directory of that kind replacing DIR whole once complete
 * (rt_dir_begin .. rt_dir_commit), so DIR is never half-written. */
bool rt_store_save_dir(const rt_store *s, const char *dir, rt_dir_kind kind, const char *model, rt_err *e);

/* ---- the interpreter (runtime/exec*.c) ---------------------------------- */

/* Bytes of workspace the reference kernel for n needs (0 for most): what
 * the memory planner reserves for it (runtime/kernels.c). */
int64_t rt_kernel_workspace(const ir_node *n);
/* The same, in the planner's form (ps_workspace_fn); user is ignored. */
int64_t rt_workspace_fn(const ir_node *n, void *user);
/* Every one of n labels is a class in 0..k-1, else an error naming the
 * first that is not (softmax kernels; native runs check before a step). */
bool rt_check_labels(const int32_t *labels, int64_t n, int64_t k, rt_err *e);

typedef struct rt_exec rt_exec;

typedef enum {
	RT_EXEC_AUTO,   /* arena when the graph is planned, else tracking */
	RT_EXEC_ARENA,  /* one allocation at the planned offsets */
	RT_EXEC_TRACK,  /* one allocation per buffer; records the high-water mark */
	RT_EXEC_NATIVE, /* the arena, run by a compiled step (rt_exec_new_native) */
} rt_exec_mode;

/* Compiled code follows the step ABI of revc_abi.h. */

/* ---- threads (runtime/pool.c) ----------------------------------------- */

typedef struct rt_pool rt_pool;
rt_pool *rt_pool_new(int threads);
void rt_pool_free(rt_pool *p);
/* Runs fn over [0, n) split into one chunk per thread (every thread called,
 * chunks fixed by n and the thread count); ctx is the pool. */
void rt_parallel(void *ctx, revc_abi_kernel *fn, void **args, int64_t n);
int rt_pool_threads(const rt_pool *p);

/* A cache line's round trip between two threads pinned to the first two
 * CPUs the caller may use, in ns (the median of a few batches;
 * runtime/probe.c); -1 with one CPU, or when the other thread did not run
 * within the 50 ms the probe allows itself.  Takes a few milliseconds. */
double rt_probe_round_trip_ns(void);

/* Per-call profile of a step compiled with cg_options.profile (its marks:
 * rt_parallel with fn NULL, runtime/pool.c).  rt_pool_profile(p, true)
 * forgets what was timed and starts timing, false stops; between steps
 * only.  rt_pool_profile_calls gives one record per call index. */
typedef struct {
	const char *label;   /* the kernel's, from the step (lives with its code) */
	int64_t count;       /* times it ran */
	double seconds;      /* wall time, mark to mark */
	double busy_seconds; /* the threads' time in its chunks (all of seconds when serial) */
	/* Of the threads' idle time in a parallel call: before a thread's
	 * first chunk started (the whole call for a thread that ran none), and
	 * after its last chunk ended until the last of all ended.  The rest
	 * of seconds·threads − busy_seconds is handing out and collecting. */
	double late_seconds, wait_seconds;
	bool parallel;       /* handed to the dispatcher (else called directly) */
} rt_pool_call;
void rt_pool_profile(rt_pool *p, bool on);
const rt_pool_call *rt_pool_profile_calls(const rt_pool *p, int *n);
/* Call k's time in each of its rt_pool_threads chunks, summed over its
 * parallel runs: chunk t's total against the others' tells an imbalance
 * the kernel's split makes in every run from one that changes from run to
 * run (which these sums even out). */
const double *rt_pool_profile_chunks(const rt_pool *p, int k);

/* Prepares to run g (verified, scheduled) with the tensors of store, which
 * must hold every param and state of g. */
rt_exec *rt_exec_new(const ir_graph *g, rt_store *store, rt_exec_mode mode, rt_err *e);
/* Runs planned g with a compiled step on the pool's threads. */
rt_exec *rt_exec_new_native(const ir_graph *g, rt_store *store, revc_abi_step *step, rt_pool *pool,
	rt_err *e);
void rt_exec_free(rt_exec *x);
/* The buffer of the input named name, to fill before a run, or NULL. */
void *rt_exec_input(rt_exec *x, const char *name, const ir_type **type);
/* Runs one step.  Updates of params and state land in the store. */
bool rt_exec_run(rt_exec *x, rt_err *e);
/* The value of the output named name after a run, or NULL. */
const void *rt_exec_output(const rt_exec *x, const char *name, const ir_type **type);
/* Tracking mode: the high-water mark of buffer and workspace bytes in the
 * last run.  Arena mode: the arena's size. */
int64_t rt_exec_peak_bytes(const rt_exec *x);
/* Check every float value for NaN and Inf as it is made (inputs, params and
 * state as the step starts, each kernel's result right after it runs).  The first non-finite one
 * stops rt_exec_run with "the first non-finite value came from %12
 * (conv2d_dx in s1.u0.f) at FILE:LINE:COL" (node, op, scope, spec
 * position), and rt_exec_fault gives its node.  Native code cannot stop
 * mid-step: each run copies the params and state first, checks outputs,
 * params and state after it, and on a non-finite value restores the copy
 * and replays the step in the interpreter to find the node (the store is
 * then as that replay left it). */
void rt_exec_check_numerics(rt_exec *x, bool on);
/* Interpreter modes: while on, each run digests which outputs of every
 * relu are positive (its kinks' sides); rt_exec_kinks gives the last run's
 * digest.  Two runs with equal digests took the same side of every kink,
 * so a finite difference between them is not spoilt by one. */
void rt_exec_kink_digest(rt_exec *x, bool on);
uint64_t rt_exec_kinks(const rt_exec *x);
/* The node of the last run's non-finite value, or NULL. */
const ir_node *rt_exec_fault(const rt_exec *x);

/* ---- training (runtime/train.c) ------------------------------------------ */

/* What the loop reports after each step. */
typedef struct {
	int64_t step, total, epoch; /* step counts steps done */
	double loss, lr;
	double elapsed;             /* seconds since this run started */
	int64_t images;             /* examples trained on in this run */
	/* At report points (every report_every steps, and the last): the mean
	 * loss and accuracy over the steps since the previous one; else 0. */
	double window_loss, window_accuracy;
} rt_train_progress;

typedef struct {
	rt_exec *step;              /* the training step: inputs x, labels, lr; outputs loss, logits */
	rt_exec *eval;              /* evaluation forward (output logits), or NULL */
	rt_store *store;            /* what step and eval run on */
	const rt_dataset *train, *test;
	uint64_t seed;              /* data order */
	int64_t start_step, total_steps;
	double (*lr_at)(void *user, int64_t step);
	int64_t report_every;       /* steps per progress window */
	bool check_numerics;        /* stop at the first non-finite value (rt_exec_check_numerics;
	                               native steps are replayed in the interpreter to find it) */
	const char *save_dir;       /* checkpoint directory, or NULL */
	const char *model;          /* the model's name, for the checkpoint's manifest (or NULL) */
	int64_t save_every;         /* checkpoint every N steps (0: only at the end) */
	int64_t eval_every;         /* evaluate every N steps (0: only at the end) */
	void *user;
	void (*on_step)(void *user, const rt_train_progress *p);
	void (*on_eval)(void *user, int64_t step, double loss, double accuracy);
	void (*on_save)(void *user, int64_t step, const char *dir);
	/* Polled at safe points (before each step, between evaluation
	 * batches; a checkpoint being written is finished first): true stops
	 * the run there, successfully, with res->stopped set.  NULL: never. */
	bool (*stop)(void *user);
} rt_train_cfg;

typedef struct {
	int64_t steps;              /* run in this call */
	double last_loss;
	double train_loss, train_accuracy; /* over the last report window */
	bool evaluated;
	double test_loss, test_accuracy;
	double seconds;
	double comm_seconds;        /* of seconds, blocked in the step's communication (comm.h) */
	double eval_seconds;        /* of seconds, evaluating on the test split */
	bool stopped;               /* cfg->stop asked to stop before the last step's work was done */
	int64_t saved_step;         /* the step of the last checkpoint written by this call, or 0 */
	int64_t prior_step;         /* the step of the checkpoint save_dir held before, or -1 */
} rt_train_result;

/* Trains from cfg->start_step to cfg->total_steps (see train.c for the
 * exact order of examples), checkpointing and evaluating as configured.
 * On an error, e ends with what cfg->save_dir holds (rt_train_kept). */
bool rt_train_run(const rt_train_cfg *cfg, rt_train_result *res, rt_err *e);
/* What cfg->save_dir holds after a run that stopped early, into buf: "the
 * last checkpoint (step 30) is in ck", "ck is unchanged (step 12)" (no
 * checkpoint written, the one before kept), "nothing was saved to ck".
 * False, with buf empty, when there is no save_dir. */
bool rt_train_kept(const rt_train_cfg *cfg, const rt_train_result *res, char *buf, size_t n);
/* Mean cross-entropy and accuracy of the evaluation graph over all of d,
 * and how many examples gave a non-finite loss (a NaN or +∞ logit makes the
 * loss NaN; such an example counts as wrong). */
bool rt_evaluate(rt_exec *eval, const rt_dataset *d, double *loss, double *accuracy, int64_t *nonfinite,
	rt_err *e);
/* What a non-finite count from rt_evaluate means, in e: "WHAT is NaN: the
 * logits of 3 of 1000 images are not finite" (what: "the loss", "the test
 * loss").  False. */
bool rt_error_nonfinite_logits(rt_err *e, const char *what, double loss, int64_t nonfinite, int64_t images);
/* A checkpoint: the store's tensors, step.npy and data_seed.npy in dir,
 * with a manifest of kind checkpoint naming the model, step and seed,
 * swapped in whole (rt_dir).  Loading needs every tensor of g (extra ones
 * are ignored, see rt_store_load) and step.npy and data_seed.npy; a
 * manifest, when there is one, must be a checkpoint's and agree with them. */
bool rt_checkpoint_save(const rt_store *s, int64_t step, uint64_t seed, const char *model, const char *dir,
	rt_err *e);
bool rt_checkpoint_load(rt_store *s, const ir_graph *g, const char *dir, int64_t *step,
	uint64_t *seed, rt_err *e);

/* ---- BLAS (runtime/blas.c) -------------------------------------------- */

/* "OpenBLAS 0.3.21". */
const char *rt_blas_version(void);
/* The kernels OpenBLAS chose for this CPU at run time ("Haswell",
 * "SkylakeX", "Zen"; OPENBLAS_CORETYPE overrides its choice). */
const char *rt_blas_core(void);
/* Threads BLAS may use. */
void rt_set_threads(int n);

#endif
