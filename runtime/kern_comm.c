/* kern_comm.c: the reference kernels of data parallelism: allreduce (and
 * its halves allreduce_start, allreduce_wait), bn_share, bn_merge (ops.def's block for issue 15; docs/distributed.md).
 *
 * allreduce hands its buffer to the world (comm.h) through the same entry
 * point generated code calls, so the interpreter and the JIT reach one
 * backend.  It works in place when the planner gave its result operand 0's
 * storage, and copies operand 0 first when not.  The factor multiplies the
 * sum afterwards (in the tensor's type: factor 1 leaves it untouched, so a
 * world of one process changes no bit).
 *
 * bn_share and bn_merge frame the all-reduce of batch statistics: each
 * rank's [mean; var] [2,C] becomes [mean; var; mean²] [3,C], whose average
 * over the K ranks (all at the same per-rank batch) bn_merge turns into
 * the statistics of the whole batch: the mean M of the means, and the
 * variance as the mean within-rank variance plus the variance of the
 * means, v + (q − M²), M² rounded to the tensor's type as q was.  With one
 * rank q − M² is then exactly 0, so the result is the rank's own statistics
 * to the bit.  Arithmetic in double, rounded
 * once.
 *
 * bucket_pack and bucket_unpack copy gradients into one vector and back
 * out, so that one all-reduce sums a bucket of them. */
#include <string.h>

#include "comm.h"
#include "kernels.h"

/* x *= the node's factor, when it has one other than 1. */
static void scale(const rt_kargs *a, real *x, int64_t count)
{
	const ir_attr *f = ir_node_attr(a->n, IR_ATTR_FACTOR);
	if (f && f->u.f != 1) {
		real s = (real)f->u.f;
		for (int64_t i = 0; i < count; i++)
			x[i] *= s;
	}
}

bool K(rt_k_allreduce)(const rt_kargs *a, rt_err *e)
{
	(void)e;
	int64_t count = ir_type_elems(&a->n->type);
	real *x = a->out;
	if (a->out != a->in[0])
		memcpy(a->out, a->in[0], (size_t)count * sizeof(real));
	revc_comm_allreduce_sum(x, count, (int32_t)a->n->type.dtype);
	scale(a, x, count);
	return true;
}

/* The sum of allreduce_start's result, which must stay untouched until its
 * allreduce_wait (the planner keeps it live until then). */
bool K(rt_k_allreduce_start)(const rt_kargs *a, rt_err *e)
{
	(void)e;
	int64_t count = ir_type_elems(&a->n->type);
	if (a->out != a->in[0])
		memcpy(a->out, a->in[0], (size_t)count * sizeof(real));
	revc_comm_allreduce_begin(a->out, count, (int32_t)a->n->type.dtype);
	return true;
}

bool K(rt_k_allreduce_wait)(const rt_kargs *a, rt_err *e)
{
	(void)e;
	int64_t count = ir_type_elems(&a->n->type);
	revc_comm_allreduce_end((void *)a->in[0]);
	if (a->out != a->in[0])
		memcpy(a->out, a->in[0], (size_t)count * sizeof(real));
	scale(a, a->out, count);
	return true;
}

bool K(rt_k_bn_share)(const rt_kargs *a, rt_err *e)
{
	(void)e;
	int64_t c = a->n->type.dim[1];
	const real *st = a->in[0];
	real *out = a->out;
	for (int64_t i = 0; i < c; i++) {
		double m = (double)st[i];
		out[i] = st[i];
		out[c + i] = st[c + i];
		out[2 * c + i] = (real)(m * m);
	}
	return true;
}

bool K(rt_k_bn_merge)(const rt_kargs *a, rt_err *e)
{
	(void)e;
	int64_t c = a->n->type.dim[1];
	const real *sh = a->in[0];
	real *out = a->out;
	for (int64_t i = 0; i < c; i++) {
		double m = (double)sh[i], v = (double)sh[c + i], q = (double)sh[2 * c + i];
		/* m² rounded as bn_share rounded it, so one rank gives q − m² = 0 */
		double var = v + (q - (double)(real)(m * m));
		out[i] = sh[i];
		out[c + i] = (real)(var > 0 ? var : 0);
	}
	return true;
}

bool K(rt_k_bucket_pack)(const rt_kargs *a, rt_err *e)
{
	(void)e;
	char *out = a->out;
	for (int i = 0; i < a->n->nin; i++) {
		size_t bytes = (size_t)ir_type_bytes(&a->n->in[i]->type);
		memcpy(out, a->in[i], bytes);
		out += bytes;
	}
	return true;
}

bool K(rt_k_bucket_unpack)(const rt_kargs *a, rt_err *e)
{
	(void)e;
	memcpy(a->out, (const real *)a->in[0] + ir_node_int(a->n, IR_ATTR_LO),
		(size_t)ir_type_bytes(&a->n->type));
	return true;
}
