/* aot.c: behind a compiled model library's C API (revc_aot.h): the
 * persistent tensors (initialised per docs/model.md from a seed exactly as revc
 * itself does, loaded and saved as NAME.npy files), the arenas, and calls
 * into the generated steps.  A library runs kernels on the calling thread;
 * BLAS has its own threads. */
#include <stdlib.h>
#include <string.h>

#include "revc_aot.h"
#include "rt.h"

struct revc_aot_state {
	const revc_aot_model *m;
	rt_store store;
	void **persist, **forward_persist;
	uint8_t *arena, *forward_arena;
	int32_t *zeros;          /* labels for the forward pass, which ignores them */
	char err[512];
};

revc_aot_state *revc_aot_new(const revc_aot_model *m, uint64_t seed)
{
	revc_aot_state *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->m = m;
	rt_store_init(&s->store);
	s->persist = calloc((size_t)m->ntensors + 1, sizeof *s->persist);
	s->forward_persist = calloc((size_t)m->nforward + 1, sizeof *s->forward_persist);
	s->arena = rt_step_arena_alloc(m->arena_bytes);
	s->forward_arena = rt_step_arena_alloc(m->forward_arena_bytes);
	s->zeros = calloc((size_t)m->batch, sizeof *s->zeros);
	if (!s->persist || !s->forward_persist || !s->arena || !s->forward_arena || !s->zeros) {
		revc_aot_free(s);
		return NULL;
	}
	rt_err e;
	for (int i = 0; i < m->ntensors; i++) {
		const revc_aot_tensor *t = &m->tensors[i];
		ir_type ty = ir_type_make(m->dtype_f64 ? IR_F64 : IR_F32, t->rank, t->dim);
		rt_tensor *x = rt_store_add(&s->store, t->name, &ty, t->trainable != 0, &e);
		if (!x || !rt_store_init_tensor(x, seed, &e)) {
			revc_aot_free(s);
			return NULL;
		}
	}
	for (int i = 0; i < m->ntensors; i++)
		s->persist[i] = s->store.t[i].data;
	for (int i = 0; i < m->nforward; i++)
		s->forward_persist[i] = s->store.t[m->forward_persist[i]].data;
	return s;
}

int revc_aot_load(revc_aot_state *s, const char *dir)
{
	rt_err e;
	if (!rt_store_load_all(&s->store, dir, &e)) {
		snprintf(s->err, sizeof s->err, "%s", e.msg);
		return -1;
	}
	return 0;
}

int revc_aot_save(revc_aot_state *s, const char *dir)
{
	rt_err e;
	if (!rt_store_save_dir(&s->store, dir, RT_DIR_PARAMS, s->m->name, &e)) {
		snprintf(s->err, sizeof s->err, "%s", e.msg);
		return -1;
	}
	return 0;
}

double revc_aot_train_step(revc_aot_state *s, const void *x, const int32_t *labels, double lr)
{
	const revc_aot_model *m = s->m;
	float lr32 = (float)lr;
	void *inputs[3];
	inputs[m->step_x] = (void *)x;
	inputs[m->step_labels] = (void *)labels;
	inputs[m->step_lr] = m->dtype_f64 ? (void *)&lr : (void *)&lr32;
	m->step(s->arena, s->persist, inputs, m->serial, NULL);
	const uint8_t *loss = s->arena + m->loss_offset;
	return m->dtype_f64 ? *(const double *)loss : (double)*(const float *)loss;
}

void revc_aot_forward(revc_aot_state *s, const void *x, void *logits)
{
	const revc_aot_model *m = s->m;
	void *inputs[2];
	inputs[m->forward_x] = (void *)x;
	inputs[m->forward_labels] = s->zeros;
	m->forward(s->forward_arena, s->forward_persist, inputs, m->serial, NULL);
	memcpy(logits, s->forward_arena + m->forward_logits_offset,
		(size_t)(m->batch * m->classes) * (m->dtype_f64 ? sizeof(double) : sizeof(float)));
}

const char *revc_aot_error(const revc_aot_state *s)
{
	return s->err;
}

void revc_aot_free(revc_aot_state *s)
{
	if (!s)
		return;
	rt_store_free(&s->store);
	free(s->persist);
	free(s->forward_persist);
	free(s->arena);
	free(s->forward_arena);
	free(s->zeros);
	free(s);
}
