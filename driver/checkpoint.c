/* checkpoint.c: a model's tensors saved into and loaded from a directory
 * revc writes whole (docs/checkpoints.md): a checkpoint (with the step and
 * the data seed) or a parameter directory. */
#include <stdio.h>

#include "internal.h"

bool revc_save(const revc_model *m, const char *dir, int64_t step, revc_error **err)
{
	if (!m->compiled || m->store.n == 0)
		return drv_errorf(err, REVC_ERR_USAGE, "%s is not compiled: it has no tensors to save", m->name);
	rt_err e;
	const fe_spec *s = drv_model_settings(m);
	uint64_t seed = s ? (uint64_t)s->seed : 0;
	bool ok = step > 0 ? rt_checkpoint_save(&m->store, step, seed, m->name, dir, &e)
		: rt_store_save_dir(&m->store, dir, RT_DIR_PARAMS, m->name, &e);
	return ok ? true : drv_error_rt(err, &e);
}

bool revc_load(revc_model *m, const char *dir, int64_t *step, revc_error **err)
{
	if (!m->compiled || m->cut)
		return drv_errorf(err, REVC_ERR_USAGE, "%s is not compiled: load after revc_model_compile", m->name);
	rt_err e;
	uint64_t seed;
	bool ok = step ? rt_checkpoint_load(&m->store, drv_model_first(m), dir, step, &seed, &e)
		: rt_store_load(&m->store, drv_model_first(m), dir, true, &e);
	if (!ok)
		return drv_error_rt(err, &e);
	snprintf(m->loaded, sizeof m->loaded, "%s", dir);
	return true;
}
