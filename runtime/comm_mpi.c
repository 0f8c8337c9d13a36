/* comm_mpi.c: the world of processes over MPI (comm.h), when the build has
 * it (REVC_HAVE_MPI): MPI_Allreduce, MPI_Iallreduce + MPI_Wait, MPI_Bcast
 * and MPI_Barrier on MPI_COMM_WORLD, with the time spent blocked in them.
 *
 * MPI is initialised only when a launcher started the process, so a
 * revc run without mpirun never touches it.  Errors on the world return to
 * us (MPI_ERRORS_RETURN); a collective cannot be retried once a rank is
 * gone, so a failure calls the caller's fatal hook with one line and ends
 * the job on every rank with MPI_Abort -- what comm.h promises, and how the
 * other ranks learn of it instead of hanging. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "revc_config.h"

int rt_comm_launched_size(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *v = getenv(vars[i]);
		if (v && *v) {
			long n = strtol(v, NULL, 10);
			return n > 0 && n < 1 << 24 ? (int)n : 0;
		}
	}
	return 0;
}

#if REVC_HAVE_MPI

#include <mpi.h>

static struct {
	rt_comm comm;
	void (*fatal)(const char *msg);
	MPI_Request *req; /* by ticket; MPI_REQUEST_NULL when free or done */
	bool *done;       /* by ticket: finished (by progress), not yet waited for */
	int64_t nreq;
	bool live;
} mw;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Ends the job on every rank after a failed call. */
static void check(int rc, const char *what)
{
	if (rc == MPI_SUCCESS)
		return;
	char text[MPI_MAX_ERROR_STRING], msg[MPI_MAX_ERROR_STRING + 128];
	int len = 0;
	if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
		snprintf(text, sizeof text, "error %d", rc);
	snprintf(msg, sizeof msg, "rank %d of %d: %s failed: %s; ending the job", mw.comm.rank, mw.comm.size, what,
		text);
	if (mw.fatal)
		mw.fatal(msg);
	MPI_Abort(MPI_COMM_WORLD, 1);
	abort(); /* (MPI_Abort does not return) */
}

static MPI_Datatype mpi_type(ir_dtype dt)
{
	switch (dt) {
	case IR_F32: return MPI_FLOAT;
	case IR_F64: return MPI_DOUBLE;
	case IR_I32: return MPI_INT32_T;
	default: IR_DIE("all-reduce of an unknown dtype %d", (int)dt);
	}
}

static size_t dtype_size(ir_dtype dt)
{
	return dt == IR_F64 ? 8 : 4;
}

/* MPI counts are ints: a longer buffer goes in pieces of at most this. */
#define PIECE ((int64_t)1 << 30)

static void mpi_allreduce_sum(rt_comm *c, void *buf, int64_t count, ir_dtype dt)
{
	double t0 = now();
	for (int64_t at = 0; at < count; at += PIECE) {
		int64_t k = count - at < PIECE ? count - at : PIECE;
		check(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + (size_t)at * dtype_size(dt), (int)k, mpi_type(dt),
			MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
	}
	c->blocked_seconds += now() - t0;
}

/* A free ticket, growing the table when there is none. */
static int64_t ticket(void)
{
	for (int64_t i = 0; i < mw.nreq; i++)
		if (mw.req[i] == MPI_REQUEST_NULL && !mw.done[i])
			return i;
	int64_t n = mw.nreq ? 2 * mw.nreq : 64;
	MPI_Request *r = realloc(mw.req, (size_t)n * sizeof *r);
	bool *d = r ? realloc(mw.done, (size_t)n * sizeof *d) : NULL;
	if (!r || !d)
		IR_DIE("out of memory for %lld all-reduce requests", (long long)n);
	for (int64_t i = mw.nreq; i < n; i++) {
		r[i] = MPI_REQUEST_NULL;
		d[i] = false;
	}
	mw.req = r;
	mw.done = d;
	int64_t t = mw.nreq;
	mw.nreq = n;
	return t;
}

/* Moves the sums under way along: OpenMPI progresses a non-blocking
 * collective only inside MPI calls (it has no progress thread), so without
 * this a sum started early would travel only when its wait is reached.
 * Each start tests the sums started before it, and one that has finished
 * is marked done for its wait. */
static void progress(void)
{
	for (int64_t i = 0; i < mw.nreq; i++)
		if (mw.req[i] != MPI_REQUEST_NULL) {
			int flag = 0;
			check(MPI_Test(&mw.req[i], &flag, MPI_STATUS_IGNORE), "MPI_Test");
			if (flag)
				mw.done[i] = true;
		}
}

static int64_t mpi_allreduce_start(rt_comm *c, void *buf, int64_t count, ir_dtype dt)
{
	(void)c;
	if (count > PIECE) { /* (no bucket is this big: sum it now) */
		mpi_allreduce_sum(c, buf, count, dt);
		return -1;
	}
	int64_t t = ticket();
	check(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(dt), MPI_SUM, MPI_COMM_WORLD, &mw.req[t]),
		"MPI_Iallreduce");
	progress();
	return t;
}

static void mpi_wait(rt_comm *c, int64_t t)
{
	if (t < 0)
		return;
	IR_ASSERT(t < mw.nreq && (mw.req[t] != MPI_REQUEST_NULL || mw.done[t]));
	if (mw.done[t]) {
		mw.done[t] = false;
		return;
	}
	double t0 = now();
	check(MPI_Wait(&mw.req[t], MPI_STATUS_IGNORE), "MPI_Wait");
	c->blocked_seconds += now() - t0;
	mw.req[t] = MPI_REQUEST_NULL;
}

static void mpi_bcast(rt_comm *c, void *buf, int64_t bytes, int root)
{
	(void)c;
	for (int64_t at = 0; at < bytes; at += PIECE) {
		int64_t k = bytes - at < PIECE ? bytes - at : PIECE;
		check(MPI_Bcast((char *)buf + at, (int)k, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
	}
}

static void mpi_barrier(rt_comm *c)
{
	(void)c;
	check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

bool rt_comm_mpi_built(void)
{
	return true;
}

bool rt_comm_mpi_init(void (*fatal)(const char *msg), char *msg, size_t n)
{
	/* The step's collectives come from one thread at a time. */
	int provided;
	if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
		snprintf(msg, n, "MPI_Init_thread failed");
		return false;
	}
	mw.live = true;
	if (provided < MPI_THREAD_SERIALIZED) {
		snprintf(msg, n, "this MPI gives thread level %d, not MPI_THREAD_SERIALIZED", provided);
		return false;
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	mw.fatal = fatal;
	mw.comm = (rt_comm){
		.backend = "mpi",
		.allreduce_sum = mpi_allreduce_sum,
		.allreduce_start = mpi_allreduce_start,
		.wait = mpi_wait,
		.bcast = mpi_bcast,
		.barrier = mpi_barrier,
	};
	MPI_Comm_rank(MPI_COMM_WORLD, &mw.comm.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &mw.comm.size);
	rt_comm_set_world(&mw.comm);
	return true;
}

void rt_comm_mpi_end(int status)
{
	if (!mw.live)
		return;
	mw.live = false;
	rt_comm_set_world(NULL);
	free(mw.req);
	free(mw.done);
	mw.req = NULL;
	mw.done = NULL;
	mw.nreq = 0;
	if (status != 0)
		MPI_Abort(MPI_COMM_WORLD, status);
	MPI_Finalize();
}

#else /* no MPI in this build */

bool rt_comm_mpi_built(void)
{
	return false;
}

bool rt_comm_mpi_init(void (*fatal)(const char *msg), char *msg, size_t n)
{
	(void)fatal;
	snprintf(msg, n, "this revc was built without MPI (meson -Dmpi=disabled, or no libopenmpi-dev)");
	return false;
}

void rt_comm_mpi_end(int status)
{
	(void)status;
}

#endif
