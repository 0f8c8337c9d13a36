/* train.c: revc_train_run: the runtime's training loop (runtime/train.c)
 * over a compiled model and its datasets, with the spec's learning-rate
 * schedule, checkpoints, resumption and the caller's callbacks. */
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "internal.h"

typedef struct {
	const revc_model *m;
	const revc_train_config *c;
} loop;

static double lr_at(void *user, int64_t step)
{
	return fe_spec_lr_at(&((loop *)user)->m->spec.spec, step);
}

static void on_step(void *user, const rt_train_progress *s)
{
	const loop *l = user;
	if (!l->c->on_step)
		return;
	revc_progress p = {.step = s->step, .total = s->total, .epoch = s->epoch, .loss = s->loss, .lr = s->lr,
		.elapsed = s->elapsed, .images = s->images, .window_loss = s->window_loss,
		.window_accuracy = s->window_accuracy};
	l->c->on_step(l->c->user, &p);
}

static void on_eval(void *user, int64_t step, double loss, double accuracy)
{
	const loop *l = user;
	if (l->c->on_eval)
		l->c->on_eval(l->c->user, step, loss, accuracy);
}

static void on_save(void *user, int64_t step, const char *dir)
{
	const loop *l = user;
	if (l->c->on_save)
		l->c->on_save(l->c->user, step, dir);
}

static bool stop(void *user)
{
	const loop *l = user;
	return l->c->stop && l->c->stop(l->c->user);
}

/* True when the checkpoint in dir, if its manifest records the processes
 * and batch it was trained on, had the global batch of ranks x batch: the
 * same examples in each step (docs/distributed.md). */
static bool same_global_batch(const char *dir, int ranks, int64_t batch, rt_err *e)
{
	rt_manifest mf;
	bool found;
	if (!rt_manifest_read(dir, &mf, &found, e))
		return false;
	int64_t k = mf.ranks, b = mf.batch;
	rt_manifest_free(&mf);
	if (!found || k < 1 || b < 1 || k * b == ranks * batch)
		return true;
	return rt_errorf(e, "the checkpoint in %s was trained at a global batch of %lld (%lld processes x %lld), "
		"this run's is %lld (%d x %lld): give the same global batch", dir, (long long)(k * b), (long long)k,
		(long long)b, (long long)(ranks * batch), ranks, (long long)batch);
}

/* The steps c asks for in all, at spe steps an epoch. */
static int64_t total_steps(const fe_spec *s, const revc_train_config *c, int64_t spe)
{
	return c->steps > 0 ? c->steps : c->epochs > 0 ? c->epochs * spe : s->steps > 0 ? s->steps : s->epochs * spe;
}

bool revc_train_run(revc_model *m, const revc_train_config *c, revc_train_result *r, revc_error **err)
{
	memset(r, 0, sizeof *r);
	if (!revc_model_prepare(m, err))
		return false;
	if (!drv_model_settings(m))
		return drv_no_settings(m, "training", err);
	if (!m->x[DRV_STEP] || (!m->is_spec && ir_graph_has_pass(m->ir, "autodiff")))
		return drv_errorf(err, REVC_ERR_USAGE, "%s has no compiled training step from a spec or a forward graph",
			m->name);
	const fe_spec *s = &m->spec.spec;
	/* K processes at batch b train as one at batch K*b (docs/distributed.md). */
	int ranks = rt_comm_world()->size;
	int64_t spe = c->train->d.n / (ranks * s->batch);
	if (spe < 1 && ranks > 1)
		return drv_errorf(err, REVC_ERR_USER, "%s has %lld training examples, fewer than one batch of %d x %lld",
			c->train->name, (long long)c->train->d.n, ranks, (long long)s->batch);
	if (spe < 1)
		return drv_errorf(err, REVC_ERR_USER, "%s has %lld training examples, fewer than one batch of %lld",
			c->train->name, (long long)c->train->d.n, (long long)s->batch);
	loop l = {m, c};
	rt_train_cfg rc = {.store = &m->store, .train = &c->train->d, .test = c->test ? &c->test->d : NULL,
		.seed = (uint64_t)s->seed, .lr_at = lr_at, .save_dir = c->save_dir, .save_every = c->save_every,
		.eval_every = c->eval_every, .check_numerics = m->opts.check_numerics, .model = s->name,
		.step = m->x[DRV_STEP], .eval = c->test ? m->x[DRV_EVAL] : NULL, .user = &l, .on_step = on_step,
		.on_eval = on_eval, .on_save = on_save, .stop = stop};
	rc.total_steps = total_steps(s, c, spe);
	rt_err e;
	if (c->resume) {
		if (!rt_checkpoint_load(&m->store, drv_model_first(m), c->resume, &rc.start_step, &rc.seed, &e))
			return drv_errorf(err, REVC_ERR_USER, "cannot resume: %s", e.msg);
		if (!same_global_batch(c->resume, ranks, s->batch, &e))
			return drv_errorf(err, REVC_ERR_USER, "cannot resume: %s", e.msg);
		if (rc.start_step >= rc.total_steps)
			return drv_errorf(err, REVC_ERR_USER, "the checkpoint in %s is at step %lld, not before the last step %lld",
				c->resume, (long long)rc.start_step, (long long)rc.total_steps);
	}
	int64_t window = rc.total_steps / 20;
	rc.report_every = c->report_every > 0 ? c->report_every : window < 1 ? 1 : window > 100 ? 100 : window;
	r->start_step = rc.start_step;
	r->total_steps = rc.total_steps;
	if (c->on_start)
		c->on_start(c->user, rc.start_step, rc.total_steps);
	rt_train_result res;
	if (!rt_train_run(&rc, &res, &e))
		return drv_error_rt(err, &e);
	r->steps = res.steps;
	r->train_loss = res.train_loss;
	r->train_accuracy = res.train_accuracy;
	r->evaluated = res.evaluated;
	r->test_loss = res.test_loss;
	r->test_accuracy = res.test_accuracy;
	r->seconds = res.seconds;
	r->stopped = res.stopped;
	r->saved_step = res.saved_step;
	rt_train_kept(&rc, &res, r->kept, sizeof r->kept);
	r->ranks = ranks;
	r->comm_seconds = res.comm_seconds;
	r->eval_seconds = res.eval_seconds;
	const cg_stats *st = &m->engine.stats;
	r->compile_seconds = st->seconds_emit + st->seconds_optimize + st->seconds_jit;
	return true;
}
