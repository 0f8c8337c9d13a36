/* run.c: running a compiled model on a batch the caller holds: one
 * training step (the parameters change in place), the evaluation-mode
 * forward pass over any number of examples, and the gradients of the
 * loss without an update (from a graph without the optimiser, built by
 * the first call unless the model compiled it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Graph k of m is ready to run (prepared now if need be). */
static bool ready(revc_model *m, int k, revc_error **err)
{
	if (!revc_model_prepare(m, err))
		return false;
	if (!m->x[k])
		return drv_errorf(err, REVC_ERR_USAGE, "%s has no such graph (an IR model has only its step)", m->name);
	return true;
}

/* Copies examples [from, from + n) of b into x's inputs (zeros past n, up to
 * the graph's batch). */
static bool fill(rt_exec *x, const revc_model *m, const revc_batch *b, int64_t from, int64_t n, revc_error **err)
{
	const ir_type *t, *lt;
	void *in = rt_exec_input(x, "x", &t);
	int32_t *labels = rt_exec_input(x, "labels", &lt);
	if (!in || !labels)
		return drv_errorf(err, REVC_ERR_USAGE, "%s's graph has no inputs x and labels", m->name);
	int64_t bs = t->dim[0], per = ir_type_elems(t) / bs;
	size_t es = t->dtype == IR_F64 ? sizeof(double) : sizeof(float);
	memcpy(in, (const char *)b->x + (size_t)(from * per) * es, (size_t)(n * per) * es);
	memset((char *)in + (size_t)(n * per) * es, 0, (size_t)((bs - n) * per) * es);
	memcpy(labels, b->labels + from, (size_t)n * sizeof *labels);
	memset(labels + n, 0, (size_t)(bs - n) * sizeof *labels);
	rt_err e;
	if (m->classes > 0 && !rt_check_labels(b->labels + from, n, m->classes, &e))
		return drv_error_rt(err, &e);
	return true;
}

static double scalar(const void *p, ir_dtype dt)
{
	return dt == IR_F32 ? (double)*(const float *)p : *(const double *)p;
}

static bool run(rt_exec *x, revc_error **err)
{
	rt_err e;
	return rt_exec_run(x, &e) ? true : drv_error_rt(err, &e);
}

static bool whole_batch(const revc_model *m, const revc_batch *b, revc_error **err)
{
	if (b->n != m->batch)
		return drv_errorf(err, REVC_ERR_USAGE, "a batch of %lld examples, but %s's batch is %lld", (long long)b->n,
			m->name, (long long)m->batch);
	return true;
}

bool revc_train_step(revc_model *m, const revc_batch *b, double lr, double *loss, revc_error **err)
{
	if (!ready(m, DRV_STEP, err) || !whole_batch(m, b, err) || !fill(m->x[DRV_STEP], m, b, 0, b->n, err))
		return false;
	const ir_type *t;
	void *rate = rt_exec_input(m->x[DRV_STEP], "lr", &t);
	if (!rate)
		return drv_errorf(err, REVC_ERR_USAGE, "%s's step has no input lr: it trains nothing", m->name);
	if (t->dtype == IR_F32)
		*(float *)rate = (float)lr;
	else
		*(double *)rate = lr;
	if (!run(m->x[DRV_STEP], err))
		return false;
	const void *l = rt_exec_output(m->x[DRV_STEP], "loss", &t);
	if (loss)
		*loss = l ? scalar(l, t->dtype) : (double)NAN;
	return true;
}

/* Cross-entropy of one row of logits, and whether its arg max is label. */
static double row_loss(const void *logits, ir_dtype dt, int64_t r, int64_t k, int32_t label, bool *correct)
{
	const size_t es = dt == IR_F32 ? sizeof(float) : sizeof(double);
	const char *row = (const char *)logits + (size_t)(r * k) * es;
	double mx = -INFINITY, sum = 0;
	int64_t arg = -1;
	for (int64_t j = 0; j < k; j++) {
		double v = scalar(row + (size_t)j * es, dt);
		if (v > mx || arg < 0) {
			mx = v;
			arg = j;
		}
	}
	for (int64_t j = 0; j < k; j++)
		sum += exp(scalar(row + (size_t)j * es, dt) - mx);
	double l = mx + log(sum) - scalar(row + (size_t)label * es, dt);
	*correct = arg == label && isfinite(l);
	return l;
}

bool revc_eval(revc_model *m, const revc_batch *b, double *loss, double *accuracy, void *logits, revc_error **err)
{
	if (!ready(m, DRV_EVAL, err))
		return false;
	if (b->n < 1)
		return drv_errorf(err, REVC_ERR_USAGE, "no examples to evaluate");
	double total = 0;
	int64_t right = 0;
	for (int64_t from = 0; from < b->n; from += m->batch) {
		int64_t n = b->n - from < m->batch ? b->n - from : m->batch;
		if (!fill(m->x[DRV_EVAL], m, b, from, n, err) || !run(m->x[DRV_EVAL], err))
			return false;
		const ir_type *t;
		const void *out = rt_exec_output(m->x[DRV_EVAL], "logits", &t);
		int64_t k = t->dim[1];
		for (int64_t i = 0; i < n; i++) {
			bool ok;
			total += row_loss(out, t->dtype, i, k, b->labels[from + i], &ok);
			right += ok;
		}
		if (logits) {
			size_t es = t->dtype == IR_F32 ? sizeof(float) : sizeof(double);
			memcpy((char *)logits + (size_t)(from * k) * es, out, (size_t)(n * k) * es);
		}
	}
	if (loss)
		*loss = total / (double)b->n;
	if (accuracy)
		*accuracy = (double)right / (double)b->n;
	return true;
}

bool revc_grad(revc_model *m, const revc_batch *b, double *loss, revc_error **err)
{
	if (!m->compiled || m->cut || m->g[DRV_GRAD] || (!m->is_spec && ir_graph_has_pass(m->ir, "autodiff"))) {
		if (!ready(m, DRV_GRAD, err))
			return false;
	} else if (!drv_model_plan(m, DRV_GRAD, &(ps_options){0}, err) || !drv_model_exec(m, DRV_GRAD, err)) {
		return false; /* (the graph is planned as the others were, without the pass options) */
	}
	if (!whole_batch(m, b, err))
		return false;
	if (!fill(m->x[DRV_GRAD], m, b, 0, b->n, err) || !run(m->x[DRV_GRAD], err))
		return false;
	const ir_type *t;
	const void *l = rt_exec_output(m->x[DRV_GRAD], "loss", &t);
	if (loss)
		*loss = l ? scalar(l, t->dtype) : (double)NAN;
	return true;
}

bool revc_grad_at(const revc_model *m, int i, revc_tensor *out)
{
	if (!m->x[DRV_GRAD] || i < 0 || i >= m->store.n || !m->store.t[i].trainable)
		return false;
	char name[300];
	snprintf(name, sizeof name, "%s%s", PS_GRAD_PREFIX, m->store.t[i].name);
	const ir_type *t;
	const void *g = rt_exec_output(m->x[DRV_GRAD], name, &t);
	if (!g)
		return false;
	drv_tensor_of(m->store.t[i].name, t, (void *)g, true, out);
	return true;
}

bool revc_model_faulted(const revc_model *m)
{
	for (int k = 0; k < DRV_GRAPHS; k++)
		if (m->x[k] && rt_exec_fault(m->x[k]))
			return true;
	return false;
}
