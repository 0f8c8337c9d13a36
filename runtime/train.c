/* train.c: the training loop and evaluation.
 *
 * Training is a function of (parameters, state, step): the examples of step
 * s are batch s % spe of the shuffle of epoch s / spe (spe: full batches per
 * epoch), drawn from the data seed, and the learning rate comes from the
 * caller's schedule.  So a run resumed from a checkpoint taken after step s
 * repeats exactly what an uninterrupted run does from there, bit for bit.
 *
 * A checkpoint is a directory holding every tensor of the store as
 * NAME.npy, plus step.npy (steps done), data_seed.npy and a manifest that
 * marks it as revc's, written under a temporary name and swapped into place
 * (rt_dir), so a run killed at any moment leaves the previous checkpoint
 * whole.  The loop itself never prints: it reports through the callbacks in
 * rt_train_cfg, and cfg->stop ends it early at a safe point (between steps,
 * never inside a save) -- how the command line stops on SIGINT and SIGTERM.
 *
 * With check_numerics the step stops at its first non-finite value
 * (rt_exec_check_numerics: per kernel in the interpreter, by a replay in it
 * for native code), and the error names the node and the step.  Without
 * it, every step's loss (a scalar read anyway) is checked, the test logits
 * at each evaluation, and the state before each checkpoint (an evaluation
 * due at the same step comes first): a NaN loss, a non-finite logit or a
 * non-finite tensor stops the run with an error naming the step and the
 * checkpoint kept, so the poisoned state is never saved.
 *
 * In a world of K > 1 processes (comm.h, docs/distributed.md) the global
 * batch is K x the step's batch b: step s uses the same K*b examples a
 * single process at batch K*b would, and rank r takes b of them, from r*b.
 * Every rank starts from rank 0's store (broadcast), so they all hold the
 * same bits; the reported loss and accuracy are the global batch's, the
 * evaluation's batches are shared out between the ranks and summed, a stop
 * is decided by all of them together before each step, and only rank 0
 * writes checkpoints, which record K and b.  At each checkpoint and at the
 * end, every rank checks that its store is still rank 0's, bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "rt.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the world of processes ---------------------------------------------- */

/* Sums v[0..n) over the ranks (nothing on one), outside the step: the
 * time it waits is not the step's communication, and is not counted. */
static void world_sum(double *v, int n)
{
	rt_comm *w = rt_comm_world();
	if (w->size == 1)
		return;
	double blocked = w->blocked_seconds;
	w->allreduce_sum(w, v, n, IR_F64);
	w->blocked_seconds = blocked;
}

/* Whether to stop: asked on any rank (every rank decides together). */
static bool should_stop(bool (*stop)(void *), void *user)
{
	double v = stop && stop(user);
	world_sum(&v, 1);
	return v > 0;
}

/* 64-bit FNV-1a of every tensor of s. */
static uint64_t store_hash(const rt_store *s)
{
	uint64_t h = 14695981039346656037u;
	for (int i = 0; i < s->n; i++) {
		const unsigned char *p = s->t[i].data;
		for (int64_t k = 0, n = ir_type_bytes(&s->t[i].type); k < n; k++)
			h = (h ^ p[k]) * 1099511628211u;
	}
	return h;
}

/* True when every rank's store is rank 0's, bit for bit (always on one);
 * every rank gets the same answer. */
static bool same_as_rank0(const rt_store *s, int64_t step, rt_err *e)
{
	rt_comm *w = rt_comm_world();
	if (w->size == 1)
		return true;
	uint64_t mine = store_hash(s), root = mine;
	w->bcast(w, &root, sizeof root, 0);
	double differ = mine != root;
	world_sum(&differ, 1);
	if (differ == 0)
		return true;
	return rt_errorf(e, "after step %lld the parameters of %.0f of the %d processes differ from rank 0's "
		"(a step without its gradients' all-reduce?)", (long long)step, differ, w->size);
}

/* Fills the graph inputs "x" and "labels" with examples idx[0..bs). */
static void fill_batch(rt_exec *x, const rt_dataset *d, const int64_t *idx, int64_t bs)
{
	const ir_type *t;
	void *xs = rt_exec_input(x, "x", &t);
	int32_t *ys = rt_exec_input(x, "labels", NULL);
	if (t->dtype == IR_F32)
		rt_data_batch_f32(d, idx, bs, xs, ys);
	else
		rt_data_batch_f64(d, idx, bs, xs, ys);
}

static double logit(const void *logits, ir_dtype dt, int64_t i)
{
	return dt == IR_F32 ? (double)((const float *)logits)[i] : ((const double *)logits)[i];
}

/* Cross-entropy and correctness of row r of a [bs, k] logits tensor. */
static double row_loss(const void *logits, ir_dtype dt, int64_t r, int64_t k, int32_t label,
	bool *correct)
{
	double mx = -INFINITY;
	int64_t arg = 0;
	for (int64_t j = 0; j < k; j++) {
		double v = logit(logits, dt, r * k + j);
		if (v > mx) {
			mx = v;
			arg = j;
		}
	}
	double sum = 0;
	for (int64_t j = 0; j < k; j++)
		sum += exp(logit(logits, dt, r * k + j) - mx);
	double loss = mx + log(sum) - logit(logits, dt, r * k + label);
	/* A NaN or +∞ logit makes the loss NaN and predicts nothing (NaN never
	 * wins the argmax above). */
	*correct = arg == label && isfinite(loss);
	return loss;
}

/* rt_evaluate, polling stop (when not NULL) between batches: false with
 * *stopped set when it asks to stop. */
static bool evaluate(rt_exec *x, const rt_dataset *d, bool (*stop)(void *), void *user, bool *stopped,
	double *loss, double *accuracy, int64_t *nonfinite, rt_err *e)
{
	const ir_type *t;
	if (!rt_exec_input(x, "x", &t))
		return rt_errorf(e, "the evaluation graph has no input \"x\"");
	int64_t bs = t->dim[0], correct = 0, bad = 0;
	int64_t *idx = malloc((size_t)bs * sizeof *idx);
	if (!idx)
		return rt_error_oom(e, "the evaluation batch's indices", (int64_t)((size_t)bs * sizeof *idx));
	/* Rank r of K evaluates batches r, r + K, ...; the sums are the world's. */
	rt_comm *w = rt_comm_world();
	double total = 0;
	for (int64_t start = w->rank * bs; start < d->n; start += w->size * bs) {
		if (stop && stop(user)) {
			*stopped = true;
			free(idx);
			return false;
		}
		int64_t valid = d->n - start < bs ? d->n - start : bs;
		/* A short last batch is padded with repeats; they are not counted. */
		for (int64_t i = 0; i < bs; i++)
			idx[i] = start + (i < valid ? i : i % valid);
		fill_batch(x, d, idx, bs);
		if (!rt_exec_run(x, e)) {
			free(idx);
			return false;
		}
		const ir_type *lt;
		const void *logits = rt_exec_output(x, "logits", &lt);
		for (int64_t i = 0; i < valid; i++) {
			bool ok;
			double l = row_loss(logits, lt->dtype, i, lt->dim[1], d->labels[start + i], &ok);
			total += l;
			correct += ok;
			bad += !isfinite(l);
		}
	}
	free(idx);
	double sums[3] = {total, (double)correct, (double)bad};
	world_sum(sums, 3);
	total = sums[0];
	correct = (int64_t)sums[1];
	bad = (int64_t)sums[2];
	*loss = total / (double)d->n;
	*accuracy = (double)correct / (double)d->n;
	*nonfinite = bad;
	return true;
}

bool rt_evaluate(rt_exec *x, const rt_dataset *d, double *loss, double *accuracy, int64_t *nonfinite,
	rt_err *e)
{
	bool stopped = false;
	return evaluate(x, d, NULL, NULL, &stopped, loss, accuracy, nonfinite, e);
}

bool rt_error_nonfinite_logits(rt_err *e, const char *what, double loss, int64_t nonfinite, int64_t images)
{
	return rt_errorf(e, "%s is %s: the logits of %lld of %lld images are not finite", what,
		isnan(loss) ? "NaN" : "infinite", (long long)nonfinite, (long long)images);
}

static bool write_scalar(rt_dir *d, const char *name, int64_t v, rt_err *e)
{
	return rt_dir_write_npy(d, name, RT_NPY_I64, 0, NULL, &v, e);
}

static bool read_scalar(const char *dir, const char *name, int64_t *v, rt_err *e)
{
	char path[RT_PATH_MAX];
	rt_npy a;
	if (!rt_path_join(path, sizeof path, dir, name, ".npy", e) || !rt_npy_read(path, &a, e))
		return false;
	bool ok = a.rank == 0 && a.dtype == RT_NPY_I64;
	if (ok)
		*v = *(int64_t *)a.data;
	rt_npy_free(&a);
	return ok ? true : rt_errorf(e, "%s: expected a 0-d int64", path);
}

/* rt_checkpoint_save, of a run of ranks > 1 processes at batch each when
 * ranks > 1. */
static bool checkpoint_save(const rt_store *s, int64_t step, uint64_t seed, const char *model, const char *dir,
	int ranks, int64_t batch, rt_err *e)
{
	rt_dir d;
	if (!rt_dir_begin(&d, dir, RT_DIR_CHECKPOINT, model, e))
		return false;
	d.manifest.step = step;
	d.manifest.seed = (int64_t)seed;
	if (ranks > 1) {
		d.manifest.ranks = ranks;
		d.manifest.batch = batch;
	}
	if (!rt_store_save(s, &d, e) || !write_scalar(&d, "step", step, e) ||
	    !write_scalar(&d, "data_seed", (int64_t)seed, e)) {
		rt_dir_abort(&d);
		return false;
	}
	return rt_dir_commit(&d, e);
}

bool rt_checkpoint_save(const rt_store *s, int64_t step, uint64_t seed, const char *model, const char *dir,
	rt_err *e)
{
	return checkpoint_save(s, step, seed, model, dir, 1, 0, e);
}

bool rt_checkpoint_load(rt_store *s, const ir_graph *g, const char *dir, int64_t *step,
	uint64_t *seed, rt_err *e)
{
	/* A directory revc wrote says what it is; a plain one must have step.npy. */
	rt_manifest m;
	bool found;
	if (!rt_manifest_read(dir, &m, &found, e))
		return false;
	int64_t sd;
	bool ok = true;
	if (found && m.kind != RT_DIR_CHECKPOINT)
		ok = rt_errorf(e, "'%s' holds %s, not a checkpoint of revc train (it has no step)", dir,
			rt_dir_kind_name(m.kind));
	else if (found && (m.step < 0 || m.seed < 0))
		ok = rt_errorf(e, "%s/%s has no %s line", dir, RT_MANIFEST_NAME, m.step < 0 ? "step" : "seed");
	ok = ok && rt_store_load_with(s, g, dir, found ? &m : NULL, false, e) && read_scalar(dir, "step", step, e) &&
		read_scalar(dir, "data_seed", &sd, e);
	if (ok && (*step < 0 || sd < 0))
		ok = rt_errorf(e, "%s: negative step or seed", dir);
	if (ok && found && (*step != m.step || sd != m.seed))
		ok = rt_errorf(e, "%s: step.npy and data_seed.npy (%lld, %lld) disagree with %s (%lld, %lld)", dir,
			(long long)*step, (long long)sd, RT_MANIFEST_NAME, (long long)m.step, (long long)m.seed);
	rt_manifest_free(&m);
	if (ok)
		*seed = (uint64_t)sd;
	return ok;
}

bool rt_train_kept(const rt_train_cfg *c, const rt_train_result *res, char *buf, size_t n)
{
	if (!c->save_dir) {
		snprintf(buf, n, "%s", "");
		return false;
	}
	if (res->saved_step > 0)
		snprintf(buf, n, "the last checkpoint (step %lld) is in %s", (long long)res->saved_step, c->save_dir);
	else if (res->prior_step >= 0)
		snprintf(buf, n, "%s is unchanged (step %lld)", c->save_dir, (long long)res->prior_step);
	else
		snprintf(buf, n, "nothing was saved to %s", c->save_dir);
	return true;
}

/* Ends e's message with what the checkpoint directory holds: the last
 * checkpoint this run saved, or what was there before, never the state
 * that stopped it.  False. */
static bool kept_checkpoint(const rt_train_cfg *c, const rt_train_result *res, rt_err *e)
{
	char kept[RT_PATH_MAX + 64];
	return rt_train_kept(c, res, kept, sizeof kept) ? rt_err_appendf(e, "; %s", kept) : false;
}

/* The step of the checkpoint dir holds, or -1 (none, or not one of revc's). */
static int64_t checkpoint_step(const char *dir)
{
	rt_manifest m;
	bool found;
	rt_err e;
	int64_t step = rt_manifest_read(dir, &m, &found, &e) && found && m.kind == RT_DIR_CHECKPOINT ? m.step : -1;
	rt_manifest_free(&m);
	return step;
}

/* Evaluates at a report point; false with e set on an error or a
 * non-finite logit, false with res->stopped set when cfg->stop asked. */
static bool evaluate_at(const rt_train_cfg *c, int64_t step, rt_train_result *res, rt_err *e)
{
	double el, ea;
	int64_t bad;
	/* (On K > 1 ranks a stop waits for the next step: they decide it together.) */
	bool (*stop)(void *) = rt_comm_world()->size > 1 ? NULL : c->stop;
	double t0 = now();
	bool ok = evaluate(c->eval, c->test, stop, c->user, &res->stopped, &el, &ea, &bad, e);
	res->eval_seconds += now() - t0;
	if (!ok) {
		if (!res->stopped)
			rt_err_prefixf(e, "evaluating after step %lld: ", (long long)step);
		return false;
	}
	if (bad > 0) {
		rt_error_nonfinite_logits(e, "the test loss", el, bad, c->test->n);
		return rt_err_prefixf(e, "after step %lld, ", (long long)step);
	}
	res->test_loss = el;
	res->test_accuracy = ea;
	res->evaluated = true;
	if (c->on_eval)
		c->on_eval(c->user, step, el, ea);
	return true;
}

bool rt_train_run(const rt_train_cfg *c, rt_train_result *res, rt_err *e)
{
	memset(res, 0, sizeof *res);
	res->prior_step = c->save_dir ? checkpoint_step(c->save_dir) : -1;
	const ir_type *t;
	if (!rt_exec_input(c->step, "x", &t) || !rt_exec_input(c->step, "lr", NULL))
		return rt_errorf(e, "the training graph needs inputs \"x\", \"labels\" and \"lr\"");
	rt_comm *w = rt_comm_world();
	int64_t bs = t->dim[0], gbs = w->size * bs, n = c->train->n, spe = n / gbs;
	if (spe < 1 && w->size > 1)
		return rt_errorf(e, "the training set has %lld examples, fewer than one batch of %d x %lld",
			(long long)n, w->size, (long long)bs);
	if (spe < 1)
		return rt_errorf(e, "the training set has %lld examples, fewer than one batch of %lld",
			(long long)n, (long long)bs);
	/* Every rank starts from rank 0's state. */
	for (int i = 0; w->size > 1 && i < c->store->n; i++)
		w->bcast(w, c->store->t[i].data, ir_type_bytes(&c->store->t[i].type), 0);
	w->blocked_seconds = 0;
	int64_t *perm = malloc((size_t)n * sizeof *perm);
	if (!perm)
		return rt_error_oom(e, "the order of the training examples", (int64_t)((size_t)n * sizeof *perm));
	int64_t epoch = -1;
	rt_exec_check_numerics(c->step, c->check_numerics);
	double t0 = now(), window_loss = 0;
	int64_t window_correct = 0, window_steps = 0;
	bool ok = true;
	for (int64_t step = c->start_step; step < c->total_steps; step++) {
		/* A safe point: the store is a whole step's, no checkpoint is open. */
		if (should_stop(c->stop, c->user)) {
			res->stopped = true;
			break;
		}
		if (step / spe != epoch) {
			epoch = step / spe;
			rt_data_epoch_order(n, c->seed, epoch, perm);
		}
		fill_batch(c->step, c->train, perm + (step % spe) * gbs + w->rank * bs, bs);
		const ir_type *lrt;
		void *lr = rt_exec_input(c->step, "lr", &lrt);
		double rate = c->lr_at(c->user, step);
		if (lrt->dtype == IR_F32)
			*(float *)lr = (float)rate;
		else
			*(double *)lr = rate;
		if (!(ok = rt_exec_run(c->step, e))) {
			/* (A fault names its node: the step goes after it.) */
			if (rt_exec_fault(c->step))
				rt_err_appendf(e, ", step %lld", (long long)step + 1);
			else
				rt_err_prefixf(e, "step %lld: ", (long long)step + 1);
			kept_checkpoint(c, res, e);
			break;
		}
		const ir_type *lt;
		const void *loss = rt_exec_output(c->step, "loss", &lt);
		double l = logit(loss, lt->dtype, 0);
		const void *logits = rt_exec_output(c->step, "logits", &lt);
		const int32_t *labels = rt_exec_input(c->step, "labels", NULL);
		double sums[2] = {0, 0}; /* the rows' losses and how many are right */
		for (int64_t i = 0; i < bs; i++) {
			bool right;
			sums[0] += row_loss(logits, lt->dtype, i, lt->dim[1], labels[i], &right);
			sums[1] += right;
		}
		/* K > 1 ranks: the global batch's mean loss, from the logits (the
		 * step's own loss is of this rank's part). */
		if (w->size > 1) {
			world_sum(sums, 2);
			l = sums[0] / (double)gbs;
		}
		window_correct += (int64_t)sums[1];
		if (!isfinite(l)) {
			rt_errorf(e, "the loss became %s at step %lld", isnan(l) ? "NaN" : "infinite",
				(long long)step + 1);
			ok = kept_checkpoint(c, res, e);
			break;
		}
		window_loss += l;
		window_steps++;
		res->steps++;
		res->last_loss = l;
		rt_train_progress p = {
			.step = step + 1,
			.total = c->total_steps,
			.epoch = epoch,
			.loss = l,
			.lr = rate,
			.elapsed = now() - t0,
			.images = res->steps * gbs,
		};
		/* Report the window: at every report interval, and at an epoch's end. */
		bool report = c->report_every > 0 && (step + 1) % c->report_every == 0;
		if (report || step + 1 == c->total_steps) {
			p.window_loss = window_loss / (double)window_steps;
			p.window_accuracy = (double)window_correct / (double)(window_steps * gbs);
			res->train_loss = p.window_loss;
			res->train_accuracy = p.window_accuracy;
			window_loss = 0;
			window_correct = window_steps = 0;
		}
		if (c->on_step)
			c->on_step(c->user, &p);
		bool last = step + 1 == c->total_steps;
		/* Evaluation first, so that a state whose logits are not finite
		 * (finite weights can make them) is never saved; a stop asked for
		 * during it still lets this step's checkpoint be written. */
		if (c->eval && ((c->eval_every > 0 && (step + 1) % c->eval_every == 0) || last) &&
		    !evaluate_at(c, step + 1, res, e) && !res->stopped) {
			ok = kept_checkpoint(c, res, e);
			break;
		}
		if (c->save_dir && ((c->save_every > 0 && (step + 1) % c->save_every == 0) || last)) {
			if (!rt_store_check_finite(c->store, NULL, e)) {
				rt_err_prefixf(e, "after step %lld, ", (long long)step + 1);
				ok = kept_checkpoint(c, res, e);
				break;
			}
			if (!(ok = same_as_rank0(c->store, step + 1, e)))
				break;
			if (w->rank == 0 && !(ok = checkpoint_save(c->store, step + 1, c->seed, c->model, c->save_dir,
				w->size, bs, e)))
				break;
			res->saved_step = step + 1;
			if (c->on_save)
				c->on_save(c->user, step + 1, c->save_dir);
		}
		if (res->stopped)
			break;
	}
	res->seconds = now() - t0;
	res->comm_seconds = w->blocked_seconds;
	free(perm);
	if (ok && res->steps > 0)
		ok = same_as_rank0(c->store, c->start_step + res->steps, e);
	return ok;
}
