/* run.c: running a compiled model on a batch the caller holds: one
 * training step (the parameters change in place), the evaluation-mode
 * forward pass over any number of examples, and the gradients of the
 * loss without an update (from a graph without the optimiser, built and
 * compiled by the first call). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static bool ready(const revc_model *m, const rt_exec *x, revc_error **err)
{
	if (!m->compiled || m->cut)
		return drv_errorf(err, REVC_ERR_USAGE, "%s is not compiled (or its pipeline was cut short): nothing to run",
			m->name);
	if (!x)
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
	if (!ready(m, m->step_x, err) || !whole_batch(m, b, err) || !fill(m->step_x, m, b, 0, b->n, err))
		return false;
	const ir_type *t;
	void *rate = rt_exec_input(m->step_x, "lr", &t);
	if (!rate)
		return drv_errorf(err, REVC_ERR_USAGE, "%s's step has no input lr: it trains nothing", m->name);
	if (t->dtype == IR_F32)
		*(float *)rate = (float)lr;
	else
		*(double *)rate = lr;
	if (!run(m->step_x, err))
		return false;
	const void *l = rt_exec_output(m->step_x, "loss", &t);
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
	if (!ready(m, m->eval_x, err))
		return false;
	if (b->n < 1)
		return drv_errorf(err, REVC_ERR_USAGE, "no examples to evaluate");
	double total = 0;
	int64_t right = 0;
	for (int64_t from = 0; from < b->n; from += m->batch) {
		int64_t n = b->n - from < m->batch ? b->n - from : m->batch;
		if (!fill(m->eval_x, m, b, from, n, err) || !run(m->eval_x, err))
			return false;
		const ir_type *t;
		const void *out = rt_exec_output(m->eval_x, "logits", &t);
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

/* The gradient graph: the training step without the optimiser, planned
 * as the step was, on the same store. */
static bool grad_graph(revc_model *m, revc_error **err)
{
	if (!m->is_spec)
		return drv_errorf(err, REVC_ERR_USAGE, "%s: gradients need a spec, not IR", m->name);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.strategy = (ps_strategy)m->opts.strategy;
	ctx.no_order_edges = m->opts.no_order_edges;
	ctx.optimizer = false;
	drv_engine_plan(&m->engine, &ctx);
	m->grad = drv_spec_plan(&m->spec.spec, m->dt, FE_LOWER_TRAIN, &ctx, &(ps_options){0});
	if (!m->grad)
		drv_model_error(m, &ctx.diags, err);
	ps_ctx_free(&ctx);
	if (!m->grad || !(m->grad_x = drv_engine_exec(&m->engine, m->grad, &m->store, err)))
		return false;
	rt_exec_check_numerics(m->grad_x, m->opts.check_numerics);
	return true;
}

bool revc_grad(revc_model *m, const revc_batch *b, double *loss, revc_error **err)
{
	if (!ready(m, m->step_x, err) || !whole_batch(m, b, err))
		return false;
	if (!m->grad_x && !grad_graph(m, err))
		return false;
	if (!fill(m->grad_x, m, b, 0, b->n, err) || !run(m->grad_x, err))
		return false;
	const ir_type *t;
	const void *l = rt_exec_output(m->grad_x, "loss", &t);
	if (loss)
		*loss = l ? scalar(l, t->dtype) : (double)NAN;
	return true;
}

bool revc_grad_at(const revc_model *m, int i, revc_tensor *out)
{
	if (!m->grad_x || i < 0 || i >= m->store.n || !m->store.t[i].trainable)
		return false;
	char name[300];
	snprintf(name, sizeof name, "%s%s", PS_GRAD_PREFIX, m->store.t[i].name);
	const ir_type *t;
	const void *g = rt_exec_output(m->grad_x, name, &t);
	if (!g)
		return false;
	drv_tensor_of(m->store.t[i].name, t, (void *)g, true, out);
	return true;
}
