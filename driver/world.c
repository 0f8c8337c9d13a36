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

int64_t revc_model_comm_bytes(const revc_model *m, int64_t *bn_bytes)
{
	/* The model's forward graph: compiled, read, or lowered here. */
	ir_graph *own = NULL;
	const ir_graph *g = drv_model_first(m);
	if (!g)
		g = m->is_spec ? (own = fe_lower(&m->spec.spec, IR_F32, FE_LOWER_EVAL)) : m->ir;
	int64_t grads = 0, stats = 0;
	for (int i = 0; g && i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op == IR_OP_PARAM)
			grads += ir_type_bytes(&n->type);
		else if (ir_op_is_persistent(n->op))
			stats += ir_type_bytes(&n->type);
	}
	/* (Batch norm sums [sum; sum of squares] forward and two sums backward:
	 * twice the running statistics' size.) */
	if (bn_bytes)
		*bn_bytes = g ? 2 * stats : -1;
	bool any = g;
	ir_graph_free(own);
	return any ? grads : -1;
}
