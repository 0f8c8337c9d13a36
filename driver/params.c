/* params.c: the model's persistent tensors (parameters, running
 * statistics, momentum buffers) by index and by name, as pointers into the
 * store the compiled graphs run on: a training step updates them in place. */
#include <string.h>

#include "internal.h"

_Static_assert(REVC_MAX_RANK >= IR_MAX_RANK, "revc_tensor holds any IR type");

void drv_tensor_of(const char *name, const ir_type *t, void *data, bool trainable, revc_tensor *out)
{
	memset(out, 0, sizeof *out);
	out->name = name;
	out->dtype = t->dtype == IR_F64 ? REVC_F64 : REVC_F32;
	out->rank = t->rank;
	for (int k = 0; k < t->rank; k++)
		out->dim[k] = t->dim[k];
	out->data = data;
	out->trainable = trainable;
}

int revc_param_count(const revc_model *m)
{
	return m->store.n;
}

bool revc_param_at(const revc_model *m, int i, revc_tensor *out)
{
	if (i < 0 || i >= m->store.n)
		return false;
	const rt_tensor *t = &m->store.t[i];
	drv_tensor_of(t->name, &t->type, t->data, t->trainable, out);
	return true;
}

bool revc_param(const revc_model *m, const char *name, revc_tensor *out)
{
	const rt_tensor *t = rt_store_find(&m->store, name);
	if (!t)
		return false;
	drv_tensor_of(t->name, &t->type, t->data, t->trainable, out);
	return true;
}
