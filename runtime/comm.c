/* comm.c: the world of processes a step runs on (comm.h), the singleton
 * world of one process, and the entry points generated code calls. */
#include "comm.h"

static void single_allreduce_sum(rt_comm *c, void *buf, int64_t count, ir_dtype dt)
{
	(void)c, (void)buf, (void)count, (void)dt;
}

static int64_t single_allreduce_start(rt_comm *c, void *buf, int64_t count, ir_dtype dt)
{
	(void)c, (void)buf, (void)count, (void)dt;
	return 0;
}

static void single_wait(rt_comm *c, int64_t ticket)
{
	(void)c, (void)ticket;
}

static void single_bcast(rt_comm *c, void *buf, int64_t bytes, int root)
{
	(void)c, (void)buf, (void)bytes, (void)root;
}

static void single_barrier(rt_comm *c)
{
	(void)c;
}

static rt_comm single = {
	.rank = 0,
	.size = 1,
	.backend = "single",
	.allreduce_sum = single_allreduce_sum,
	.allreduce_start = single_allreduce_start,
	.wait = single_wait,
	.bcast = single_bcast,
	.barrier = single_barrier,
};

static rt_comm *world = &single;

rt_comm *rt_comm_world(void)
{
	return world;
}

void rt_comm_set_world(rt_comm *c)
{
	world = c ? c : &single;
}

void revc_comm_allreduce_sum(void *buf, int64_t count, int32_t dtype)
{
	world->allreduce_sum(world, buf, count, (ir_dtype)dtype);
}

int64_t revc_comm_allreduce_start(void *buf, int64_t count, int32_t dtype)
{
	return world->allreduce_start(world, buf, count, (ir_dtype)dtype);
}

void revc_comm_wait(int64_t ticket)
{
	world->wait(world, ticket);
}

/* ---- tickets by buffer (comm.h: allreduce_start / allreduce_wait) ---- */

static struct {
	void *buf;
	int64_t ticket;
} pending[RT_COMM_PENDING];
static int npending;

void revc_comm_allreduce_begin(void *buf, int64_t count, int32_t dtype)
{
	if (npending == RT_COMM_PENDING) {
		world->allreduce_sum(world, buf, count, (ir_dtype)dtype);
		return;
	}
	pending[npending].buf = buf;
	pending[npending++].ticket = world->allreduce_start(world, buf, count, (ir_dtype)dtype);
}

void revc_comm_allreduce_end(void *buf)
{
	for (int i = npending - 1; i >= 0; i--)
		if (pending[i].buf == buf) {
			int64_t t = pending[i].ticket;
			pending[i] = pending[--npending];
			world->wait(world, t);
			return;
		}
	/* finished at once by begin: nothing is pending */
}
