/* comm.h: the processes one training step runs on, and the collective
 * operations between them (data-parallel training).
 *
 * A process belongs to one world of `size` processes and has a `rank` in
 * [0, size).  Without a distributed launcher (mpirun) the world is the
 * singleton: rank 0 of 1, where every collective is the identity, so a
 * single-process run behaves exactly as if there were no communication.
 * A backend (runtime/comm_mpi.c, when the build has MPI) replaces the
 * world with rt_comm_set_world before the first step runs.
 *
 * Collectives are called by every rank in the same order with the same
 * counts.  They give every rank the same bits.  A failure inside one (a
 * rank gone) is not an error value a step could recover from: the backend
 * ends the job, on every rank, with a message.
 *
 * Generated code reaches the world through the plain-C entry points at the
 * end (revc_comm_*), which take only <stdint.h> types. */
#ifndef REVC_COMM_H
#define REVC_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h"

typedef struct rt_comm rt_comm;
struct rt_comm {
	int rank, size;
	const char *backend; /* "single", "mpi" */
	/* Sums buf (count elements of dtype dt) over the world, in place. */
	void (*allreduce_sum)(rt_comm *c, void *buf, int64_t count, ir_dtype dt);
	/* Starts the same sum and returns a ticket; the buffer must not be
	 * touched until wait(ticket) returns. */
	int64_t (*allreduce_start)(rt_comm *c, void *buf, int64_t count, ir_dtype dt);
	void (*wait)(rt_comm *c, int64_t ticket);
	/* Copies root's bytes of buf to every rank. */
	void (*bcast)(rt_comm *c, void *buf, int64_t bytes, int root);
	void (*barrier)(rt_comm *c);
	/* Seconds spent blocked in allreduce_sum and wait since the last reset
	 * (the time a step waits on communication). */
	double blocked_seconds;
	void *impl;
};

/* The process's world: the singleton unless a backend has set another. */
rt_comm *rt_comm_world(void);
void rt_comm_set_world(rt_comm *c);

/* The entry points generated code calls (dtype is an ir_dtype). */
void revc_comm_allreduce_sum(void *buf, int64_t count, int32_t dtype);
int64_t revc_comm_allreduce_start(void *buf, int64_t count, int32_t dtype);
void revc_comm_wait(int64_t ticket);
/* ---- the allreduce_start / allreduce_wait ops (kern_comm.c, codegen/k_comm.c):
 * the same sum, started on buf and finished by naming buf again, so that
 * a kernel needs no ticket of its own; the tickets of started buffers are
 * kept here (past RT_COMM_PENDING of them the sum is finished at once). */
#define RT_COMM_PENDING 4096
void revc_comm_allreduce_begin(void *buf, int64_t count, int32_t dtype);
void revc_comm_allreduce_end(void *buf);

/* ---- the MPI world (runtime/comm_mpi.c; docs/distributed.md) ----------- */

/* The world size an MPI launcher gave this process (mpirun's
 * OMPI_COMM_WORLD_SIZE, or PMI_SIZE / PMIX_SIZE of other launchers), or 0
 * when it was not started by one. */
int rt_comm_launched_size(void);
/* Whether this build has the MPI backend. */
bool rt_comm_mpi_built(void);
/* Initialises MPI and makes its world the process's.  A collective that
 * fails later calls fatal (when not NULL) with a one-line message, then
 * ends the job on every rank.  False with msg (n bytes) on failure. */
bool rt_comm_mpi_init(void (*fatal)(const char *msg), char *msg, size_t n);
/* Leaves the MPI world, when it was initialised: with status 0 every rank
 * finalises; any other status ends the job on every rank (MPI_Abort). */
void rt_comm_mpi_end(int status);

#endif
