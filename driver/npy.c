/* npy.c: NumPy files in and out of a model, for revc grad and programs like
 * it: a batch read from .npy files and checked against the model's input,
 * and the directories of .npy files a gradient computation writes (the
 * gradients with the loss, the batch-norm running statistics), each
 * written whole (docs/checkpoints.md); and a file written atomically, for
 * a command's -o. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Checks X and Y against m's input. */
static bool batch_shape(const revc_model *m, const char *xpath, const char *ypath, const rt_npy *x, const rt_npy *y,
	revc_error **err)
{
	int64_t in[3];
	revc_model_input(m, in);
	if (x->rank != 4 || x->dim[1] != in[0] || x->dim[2] != in[1] || x->dim[3] != in[2] ||
	    (x->dtype != RT_NPY_F32 && x->dtype != RT_NPY_F64))
		return drv_errorf(err, REVC_ERR_USER, "%s: need float [N,%lld,%lld,%lld] for this model", xpath,
			(long long)in[0], (long long)in[1], (long long)in[2]);
	if (x->dim[0] < 1 || x->dim[0] > FE_INT_MAX)
		return drv_errorf(err, REVC_ERR_USER, "%s: batch size %lld out of range", xpath, (long long)x->dim[0]);
	if (y->rank != 1 || y->dim[0] != x->dim[0] || (y->dtype != RT_NPY_I64 && y->dtype != RT_NPY_I32 &&
		y->dtype != RT_NPY_U8))
		return drv_errorf(err, REVC_ERR_USER, "%s: need integer labels [%lld]", ypath, (long long)x->dim[0]);
	return true;
}

/* X and Y converted into *out's own buffers. */
static bool convert(const rt_npy *x, const rt_npy *y, revc_dtype dt, revc_batch *out, revc_error **err)
{
	size_t es = dt == REVC_F64 ? sizeof(double) : sizeof(float);
	void *xs = malloc((size_t)x->count * es + 1);
	int32_t *labels = malloc((size_t)y->count * sizeof(int32_t) + 1);
	double *tmp = malloc((size_t)y->count * sizeof(double) + 1);
	if (!xs || !labels || !tmp) {
		free(xs);
		free(labels);
		free(tmp);
		rt_err e;
		rt_error_oom(&e, "the batch", (int64_t)((size_t)x->count * es));
		return drv_error_rt(err, &e);
	}
	if (dt == REVC_F64)
		rt_npy_to_f64(x, xs);
	else
		rt_npy_to_f32(x, xs);
	rt_npy_to_f64(y, tmp);
	for (int64_t i = 0; i < y->count; i++)
		labels[i] = (int32_t)tmp[i];
	free(tmp);
	*out = (revc_batch){.x = xs, .labels = labels, .n = y->count};
	return true;
}

bool revc_batch_load(const revc_model *m, const char *x_npy, const char *labels_npy, revc_dtype dt, revc_batch *out,
	revc_error **err)
{
	*out = (revc_batch){0};
	rt_npy x = {0}, y = {0};
	rt_err e;
	bool ok = rt_npy_read(x_npy, &x, &e) && rt_npy_read(labels_npy, &y, &e);
	if (!ok)
		drv_error_rt(err, &e);
	ok = ok && batch_shape(m, x_npy, labels_npy, &x, &y, err) && convert(&x, &y, drv_model_dtype(m, dt), out, err);
	rt_npy_free(&x);
	rt_npy_free(&y);
	return ok;
}

void revc_batch_free(revc_batch *b)
{
	free((void *)b->x);
	free((void *)b->labels);
	*b = (revc_batch){0};
}

static const rt_dir_kind dir_kinds[] = {RT_DIR_PARAMS, RT_DIR_GRADIENTS, RT_DIR_STATE, RT_DIR_CHECKPOINT};
_Static_assert(REVC_DIR_PARAMS == 0 && REVC_DIR_GRADIENTS == 1 && REVC_DIR_STATE == 2 && REVC_DIR_CHECKPOINT == 3,
	"dir_kinds is revc_dir_kind");

bool revc_dir_check(const char *dir, revc_dir_kind kind, const char *label, revc_error **err)
{
	rt_err e;
	if (rt_dir_check(dir, dir_kinds[kind], &e))
		return true;
	return label ? drv_errorf(err, REVC_ERR_USER, "%s: %s", label, e.msg) : drv_error_rt(err, &e);
}

bool revc_write_file(const char *path, const char *text, size_t len, revc_error **err)
{
	rt_err e;
	return rt_file_write_atomic(path, text, len, &e) ? true : drv_error_rt(err, &e);
}

bool revc_dir_same(const char *a, const char *b)
{
	return rt_dir_same(a, b);
}

static bool write_npy(rt_dir *d, const char *name, ir_dtype dt, int rank, const int64_t *dim, const void *data,
	rt_err *e)
{
	return rt_dir_write_npy(d, name, dt == IR_F64 ? RT_NPY_F64 : RT_NPY_F32, rank, dim, data, e);
}

/* Writes loss.npy and one NAME.npy per parameter gradient into d. */
static bool write_grads(const revc_model *m, double loss, rt_dir *d, rt_err *e)
{
	float lf = (float)loss;
	bool ok = write_npy(d, "loss", m->dt, 0, NULL, m->dt == IR_F64 ? (const void *)&loss : (const void *)&lf, e);
	revc_tensor t;
	for (int i = 0; ok && i < revc_param_count(m); i++)
		ok = !revc_grad_at(m, i, &t) || write_npy(d, t.name, drv_dtype(t.dtype), t.rank, t.dim, t.data, e);
	return ok;
}

/* Whether the persistent tensor named name is optimiser state (momentum
 * buffers, AdamW's moments and step count): what an optimiser update of m's
 * graphs writes, as the memory model counts it (passes/memory.c). */
static bool is_optimizer_state(const revc_model *m, const char *name)
{
	for (int k = 0; k < DRV_GRAPHS; k++)
		for (int i = 0; m->g[k] && i < m->g[k]->n; i++) {
			const ir_node *v = m->g[k]->nodes[i];
			if (ps_optimizer_update(v->op) && v->in[0]->name && strcmp(v->in[0]->name, name) == 0)
				return true;
		}
	return false;
}

/* Writes the state tensors but optimiser state: the running statistics. */
static bool write_state(const revc_model *m, rt_dir *d, rt_err *e)
{
	bool ok = true;
	for (int i = 0; ok && i < m->store.n; i++) {
		const rt_tensor *t = &m->store.t[i];
		if (!t->trainable && !is_optimizer_state(m, t->name))
			ok = write_npy(d, t->name, t->type.dtype, t->type.rank, t->type.dim, t->data, e);
	}
	return ok;
}

/* Writes dir whole: the gradients (kind RT_DIR_GRADIENTS) or the state. */
static bool write_dir(const revc_model *m, const char *dir, rt_dir_kind kind, double loss, revc_error **err)
{
	rt_dir d;
	rt_err e;
	if (!rt_dir_begin(&d, dir, kind, m->name, &e))
		return drv_error_rt(err, &e);
	if (!(kind == RT_DIR_GRADIENTS ? write_grads(m, loss, &d, &e) : write_state(m, &d, &e))) {
		rt_dir_abort(&d);
		return drv_error_rt(err, &e);
	}
	return rt_dir_commit(&d, &e) ? true : drv_error_rt(err, &e);
}

bool revc_save_gradients(const revc_model *m, const char *dir, double loss, revc_error **err)
{
	if (!m->x[DRV_GRAD])
		return drv_errorf(err, REVC_ERR_USAGE, "%s has no gradients: save them after revc_grad", m->name);
	return write_dir(m, dir, RT_DIR_GRADIENTS, loss, err);
}

bool revc_save_state(const revc_model *m, const char *dir, revc_error **err)
{
	if (!m->compiled || m->store.n == 0)
		return drv_errorf(err, REVC_ERR_USAGE, "%s is not compiled: it has no tensors to save", m->name);
	return write_dir(m, dir, RT_DIR_STATE, 0, err);
}
