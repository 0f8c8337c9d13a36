/* exec.h: internal to runtime/.  The executor's state (rt_exec, rt.h),
 * shared by its four files:
 *   exec.c          the interpreter: set-up, inputs and outputs, the run
 *                   loop over the reference kernels, arena mode
 *   exec_track.c    tracking mode: a buffer per value, freed after its last
 *                   reader, and the high-water mark
 *   exec_native.c   running a compiled step over the arena
 *   exec_numerics.c non-finite checks, the native replay that names the
 *                   node, and the relu kink digest
 * (exec.c's opening comment tells the modes' rules.) */
#ifndef REVC_RT_EXEC_H
#define REVC_RT_EXEC_H

#include "kernels.h"
#include "rt.h"

/* A buffer in tracking mode. */
typedef struct {
	void *data;
	int64_t bytes;
	int remaining; /* reader nodes of its values still to run */
	bool pinned;   /* an output shows it: kept to the end */
} buffer;

struct rt_exec {
	const ir_graph *g;
	rt_store *store;
	rt_exec_mode mode;
	void **val;          /* by node id: where the value is */
	rt_kernel_fn *kern;  /* by node id */
	void **staging;      /* by node id, for input nodes */
	int *readers;        /* by node id: distinct nodes reading the value */
	/* arena mode */
	unsigned char *arena;
	int64_t arena_bytes;
	/* native mode */
	revc_abi_step *step;
	rt_pool *pool;
	void **persist;      /* param and state data, in list order */
	void **inputs;       /* staging buffers, in list order */
	/* tracking mode */
	buffer *bufs;        /* by node id of the value that created it */
	int *buf_of;         /* by node id: its buffer (a node id), or -1 */
	int64_t live, peak;
	/* rt_exec_check_numerics */
	bool check_numerics;
	const ir_node *fault; /* the node whose value was not finite, or NULL */
	/* rt_exec_kink_digest */
	bool kinks;
	uint64_t kink_digest;
	void **saved;         /* native mode: by node id, param and state data before the run */
};

/* calloc that dies on out of memory, as the graph's allocations do. */
void *rt_exec_calloc(size_t n, size_t size);
/* Does n read its operand k through an earlier operand too?  (Readers are
 * counted once.) */
bool rt_exec_read_before(const ir_node *n, int k);

/* ---- tracking mode (exec_track.c) ---- */

/* Frees every buffer of the last run. */
void rt_track_release_all(rt_exec *x);
/* As a run starts: no value has a buffer, inputs are copied into theirs. */
bool rt_track_start(rt_exec *x, rt_err *e);
/* Where node i's value goes (operand 0's buffer for an in-place op that is
 * its last reader). */
bool rt_track_output(rt_exec *x, const ir_node *n, int i, rt_err *e);
/* An output node: its operand's buffer is kept to the end. */
void rt_track_pin(rt_exec *x, const ir_node *out);
/* After the last member of the group run first..last (one node when it is
 * in no group): releases what its members read and what nothing reads. */
void rt_track_run_done(rt_exec *x, int first, int last);

/* ---- numerics (exec_numerics.c) ---- */

/* Records n as the fault, with the message naming it in e; false. */
bool rt_exec_nonfinite(rt_exec *x, const ir_node *n, rt_err *e);
/* With numerics checked, as an interpreted run starts: its inputs, params
 * and state are finite. */
bool rt_exec_numerics_start(rt_exec *x, rt_err *e);
/* Folds which of a relu's outputs are positive into the digest. */
void rt_exec_fold_kinks(rt_exec *x, const void *data, const ir_type *t);
/* Native runs with numerics checked: before the step, a copy of the params
 * and state; after it, a look at what it left and, on a non-finite value,
 * the copy restored and the step replayed by the interpreter, to name the
 * node (then false). */
bool rt_exec_numerics_save(rt_exec *x, rt_err *e);
bool rt_exec_numerics_check(rt_exec *x, rt_err *e);

/* ---- native mode (exec_native.c) ---- */

bool rt_exec_run_native(rt_exec *x, rt_err *e);

#endif
