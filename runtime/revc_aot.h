/* revc_aot.h: the runtime of a model library made by `revc compile`.  The
 * generated code (the training step and the forward pass, see codegen/cg.h)
 * and a generated description of the model are wrapped by the NAME_* C API
 * of the generated header; these functions do the work behind it.  They are
 * linked into the library and hidden: only NAME_* is exported. */
#ifndef REVC_AOT_H
#define REVC_AOT_H

#include <stdint.h>

#include "revc_abi.h"

/* A persistent tensor of the model (parameter, running statistic or
 * momentum buffer), named per docs/model.md. */
typedef struct {
	const char *name;
	int rank;
	int64_t dim[6];
	int trainable;
} revc_aot_tensor;


typedef struct {
	const char *name;
	int dtype_f64;                 /* 0: float */
	int ntensors;
	const revc_aot_tensor *tensors; /* in the training step's persist order */
	revc_abi_step *step, *forward;
	revc_abi_parallel *serial;
	int64_t arena_bytes, forward_arena_bytes;
	int nforward;
	const int *forward_persist;    /* tensor indices in the forward's persist order */
	int64_t batch, example_elems, classes;
	int step_x, step_labels, step_lr; /* input positions in the training step */
	int forward_x, forward_labels;    /* and in the forward pass */
	int64_t loss_offset, logits_offset, forward_logits_offset; /* in the arenas */
} revc_aot_model;

typedef struct revc_aot_state revc_aot_state;

revc_aot_state *revc_aot_new(const revc_aot_model *m, uint64_t seed);
int revc_aot_load(revc_aot_state *s, const char *dir);
int revc_aot_save(revc_aot_state *s, const char *dir);
double revc_aot_train_step(revc_aot_state *s, const void *x, const int32_t *labels, double lr);
void revc_aot_forward(revc_aot_state *s, const void *x, void *logits);
const char *revc_aot_error(const revc_aot_state *s);
void revc_aot_free(revc_aot_state *s);

#endif
