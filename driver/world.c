/* world.c: revc_world_*: the world of processes a run belongs to -- the
 * singleton, or MPI's when a launcher started it (runtime/comm_mpi.c). */
#include "internal.h"
#include "comm.h"

bool revc_world_init(void (*fatal)(const char *msg), revc_error **err)
{
	int k = rt_comm_launched_size();
	if (k == 0 || (k == 1 && !rt_comm_mpi_built()))
		return true;
	char msg[256];
	if (!rt_comm_mpi_init(fatal, msg, sizeof msg))
		return drv_errorf(err, REVC_ERR_USER, "cannot join the %d processes mpirun started: %s", k, msg);
	return true;
}

int revc_world_rank(void)
{
	return rt_comm_world()->rank;
}

int revc_world_size(void)
{
	return rt_comm_world()->size;
}

void revc_world_end(int status)
{
	rt_comm_mpi_end(status);
}
