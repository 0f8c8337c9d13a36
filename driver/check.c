/* check.c: the gradient check, which compares the gradients revc computes
 * with central finite differences of the loss, in f64, on sampled
 * coordinates of every parameter; the random batch it runs on; and
 * revc_check_gradients, which builds the check's graphs for a model.
 *
 * The step is a compromise: rounding noise grows as the step shrinks, and a
 * ReLU whose input crosses zero inside the step puts a kink in the loss that
 * spoils the estimate (early layers move many activations, so large steps
 * cross kinks almost surely).  So each coordinate tries steps h, h/2,
 * h/4, ... down to h/1000 and takes the first at which D(step) and D(step/2) agree
 * within a quarter of the tolerance and the losses' rounding cannot move
 * D(step/2) by half the tolerance: a smooth stretch, measured as finely as
 * needed and no finer.  The rounding test stops steps so small that the
 * two differences are a few ulps each and agree by chance.  Among usable
 * steps, the first that changes the sign of no ReLU input (the
 * interpreter's kink digest) is preferred: a kink very near the coordinate
 * spoils D(step) and D(step/2) alike and so passes the agreement test.  A
 * coordinate where no step is usable is counted as on a kink and replaced
 * by another.  A wrong gradient gives differences that
 * agree with each other and not with it, so it is never excused.
 *
 * Requires: gx and fx made over one store, fx by the interpreter (the kink
 * digest is the interpreter's). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"

void drv_check_batch(rt_exec *x, uint64_t seed, int64_t classes)
{
	const ir_type *tx, *ty;
	void *xs = rt_exec_input(x, "x", &tx);
	int32_t *ys = rt_exec_input(x, "labels", &ty);
	rt_rng r;
	rt_rng_derive(&r, seed, RT_RNG_CHECK_BATCH, 0);
	for (int64_t i = 0; xs && i < ir_type_elems(tx); i++) {
		double v = rt_rng_uniform(&r);
		if (tx->dtype == IR_F32)
			((float *)xs)[i] = (float)v;
		else
			((double *)xs)[i] = v;
	}
	for (int64_t i = 0; ys && i < ir_type_elems(ty); i++)
		ys[i] = (int32_t)rt_rng_below(&r, (uint64_t)classes);
}

typedef struct {
	rt_exec *fwd;   /* the loss alone */
	double h, tol;
} fd_ctx;

static bool loss_at(fd_ctx *c, double *loss, rt_err *e)
{
	if (!rt_exec_run(c->fwd, e))
		return false;
	*loss = *(const double *)rt_exec_output(c->fwd, "loss", NULL);
	return true;
}

/* One central difference of the loss. */
typedef struct {
	double d;     /* (L(w + h) - L(w - h)) / 2h */
	double noise; /* what rounding of the two losses can do to d: 4 ulps of each */
	bool kink;    /* some ReLU input changed sign between w - h and w + h */
} difference;

static bool central(fd_ctx *c, double *w, double h, difference *out, rt_err *e)
{
	double w0 = *w, lp = 0, lm = 0;
	*w = w0 + h;
	bool ok = loss_at(c, &lp, e);
	uint64_t sides = rt_exec_kinks(c->fwd);
	*w = w0 - h;
	ok = ok && loss_at(c, &lm, e);
	out->kink = rt_exec_kinks(c->fwd) != sides;
	*w = w0;
	out->d = (lp - lm) / (2 * h);
	out->noise = 4 * DBL_EPSILON * fmax(fabs(lp), fabs(lm)) / h;
	return ok;
}

/* The finite difference at coordinate w: the first usable step that
 * crosses no kink, else the first usable one (in a deep net nearly every
 * step flips some ReLU somewhere, mostly to no visible effect).  *usable is
 * false when no step is. */
static bool estimate(fd_ctx *c, double *w, double scale, double *fd, bool *usable, rt_err *e)
{
	bool smooth = false;
	difference d1, d2;
	*usable = false;
	if (!central(c, w, c->h, &d1, e))
		return false;
	for (double h = c->h; h / 2 >= c->h / 1000 && !smooth; h /= 2, d1 = d2) {
		if (!central(c, w, h / 2, &d2, e))
			return false;
		if (fabs(d1.d - d2.d) > c->tol * scale / 4 || d2.noise > c->tol * scale / 2)
			continue;
		smooth = !d1.kink && !d2.kink;
		if (smooth || !*usable)
			*fd = d2.d;
		*usable = true;
	}
	return true;
}

/* Checks tensor t (store index index) against its gradient. */
static bool check_tensor(fd_ctx *c, rt_tensor *t, const double *grad, int samples, uint64_t seed, int index,
	drv_check_tensor *out, rt_err *e)
{
	int64_t n = ir_type_elems(&t->type);
	double *w = t->data, max_err = 0, scale = 0;
	int done = 0, kinks = 0;
	for (int64_t i = 0; i < n; i++)
		scale = drv_max_nan(scale, fabs(grad[i]));
	rt_rng r;
	rt_rng_derive(&r, seed, RT_RNG_CHECK_PICK, (uint64_t)index);
	for (int tries = 0; done < samples && done < n && tries < 4 * samples; tries++) {
		int64_t i = (int64_t)rt_rng_below(&r, (uint64_t)n);
		double fd = 0;
		bool usable;
		if (!estimate(c, &w[i], scale, &fd, &usable, e))
			return false;
		if (!usable) {
			kinks++;
			continue;
		}
		max_err = drv_max_nan(max_err, fabs(grad[i] - fd));
		done++;
	}
	double rel = scale > 0 ? max_err / scale : max_err;
	char *name = strdup(t->name);
	if (!name)
		IR_DIE("out of memory");
	*out = (drv_check_tensor){name, done, kinks, scale, rel, done > 0 && rel <= c->tol};
	return true;
}

bool drv_check_gradients(rt_exec *gx, rt_exec *fx, rt_store *store, int64_t classes, const drv_check_options *o,
	drv_check_report *r, ir_diags *d)
{
	*r = (drv_check_report){.worst_at = -1};
	r->tensors = calloc((size_t)store->n + 1, sizeof *r->tensors);
	if (!r->tensors)
		IR_DIE("out of memory");
	drv_check_batch(gx, o->seed, classes);
	drv_check_batch(fx, o->seed, classes);
	rt_exec_kink_digest(fx, true);
	rt_err e;
	if (!rt_exec_run(gx, &e)) {
		drv_diag_rt(d, &e);
		return false;
	}
	fd_ctx c = {fx, o->step, o->tolerance};
	for (int i = 0; i < store->n; i++) {
		rt_tensor *t = &store->t[i];
		if (!t->trainable)
			continue;
		char name[512];
		const double *grad = rt_exec_output(gx, ps_grad_output_name(name, sizeof name, t->name), NULL);
		if (!grad) {
			ir_diag_add(d, (ir_pos){0}, "no gradient output");
			return false;
		}
		drv_check_tensor *ct = &r->tensors[r->n];
		if (!check_tensor(&c, t, grad, o->samples, o->seed, i, ct, &e)) {
			drv_diag_rt(d, &e);
			return false;
		}
		r->failed += !ct->ok;
		if (r->worst_at < 0 || !(ct->error <= r->worst)) {
			r->worst = ct->error;
			r->worst_at = r->n;
		}
		r->n++;
	}
	return true;
}

void revc_check_report_free(drv_check_report *r)
{
	for (int i = 0; r->tensors && i < r->n; i++)
		free((char *)r->tensors[i].name);
	free(r->tensors);
	*r = (drv_check_report){.worst_at = -1};
}

/* ---- revc_check_gradients: the check's graphs, engine and store ----------- */

void revc_check_options_init(revc_check_options *c)
{
	*c = (revc_check_options){.samples = 3, .seed = -1, .tolerance = 1e-6, .step = 1e-5};
}

/* The two graphs the check runs, over one store: the f64 gradient step
 * (gx, by the engine) and the loss alone (fx, by the interpreter). */
typedef struct {
	drv_engine engine;
	ir_graph *gg, *fg;
	rt_exec *gx, *fx;
	rt_store store;
} check_graphs;

/* Builds them under o; true with gx and fx set, or with *cut when the pass
 * options stopped the pipeline first. */
static bool build(revc_model *m, const revc_options *o, uint64_t seed, check_graphs *c, bool *cut, revc_error **err)
{
	ps_ctx ctx, fctx;
	ps_ctx_init(&ctx);
	ps_ctx_init(&fctx);
	ctx.optimizer = false;
	ctx.strategy = (ps_strategy)o->strategy;
	ctx.decisions = o->decisions;
	ctx.no_order_edges = o->no_order_edges;
	drv_engine_plan(&c->engine, &ctx);
	ps_options popts, eopts;
	char eval_only[128];
	drv_pass_options(o, &popts);
	c->gg = drv_model_plan_spec(m, IR_F64, FE_LOWER_TRAIN, &ctx, &popts, err);
	c->fg = c->gg ? drv_model_plan_spec(m, IR_F64, FE_LOWER_TRAIN, &fctx,
		drv_eval_options(&popts, &eopts, eval_only, sizeof eval_only), err) : NULL;
	ps_ctx_free(&ctx);
	ps_ctx_free(&fctx);
	*cut = c->fg && (popts.stop_after || popts.only);
	if (!c->fg || *cut)
		return c->fg != NULL;
	rt_err e;
	if (!rt_store_init_from_graph(&c->store, c->gg, seed, &e) ||
	    !(c->fx = rt_exec_new(c->fg, &c->store, RT_EXEC_AUTO, &e)))
		return drv_error_rt(err, &e);
	return (c->gx = drv_engine_exec(&c->engine, c->gg, &c->store, err)) != NULL;
}

bool revc_check_gradients(revc_model *m, const revc_options *o, const revc_check_options *co, revc_check_report *r,
	revc_error **err)
{
	*r = (revc_check_report){.worst_at = -1};
	revc_options opts;
	drv_model_options(m, o, &opts);
	revc_check_options c;
	if (co)
		c = *co;
	else
		revc_check_options_init(&c);
	if (!m->is_spec && ir_graph_has_pass(m->ir, "autodiff"))
		return drv_errorf(err, REVC_ERR_USAGE, "the gradient check needs a spec or a forward graph; %s has been "
			"through autodiff", m->ir_path);
	if (c.samples < 1 || !(c.tolerance > 0 && c.tolerance < 1) || !(c.step > 0 && c.step < 1))
		return drv_errorf(err, REVC_ERR_USAGE, "the check needs samples >= 1 and a tolerance and step in (0, 1)");
	if (!revc_options_check(&opts, err))
		return false;
	/* Strategy auto: its choice for the f64 step the check differentiates. */
	char letters[REVC_MAX_LETTERS + 1];
	revc_options ao = opts;
	ao.dtype = REVC_F64;
	revc_auto au;
	if (!revc_auto_plan(m, opts.strategy, &ao, -1, &au, NULL, err))
		return false;
	if (au.units) {
		memcpy(letters, au.decisions, sizeof letters);
		opts.decisions = letters;
	}
	uint64_t seed = (uint64_t)(c.seed >= 0 ? c.seed : revc_model_seed(m));
	check_graphs g = {0};
	rt_store_init(&g.store);
	/* One BLAS thread: the check's products are small and many, and a
	 * second thread's hand-offs cost more than it does (revnet-38 at batch
	 * 8: a third longer, mostly in sched_yield). */
	drv_engine_init(&g.engine, opts.engine, 1, opts.cpu);
	bool cut = false, ok = build(m, &opts, seed, &g, &cut, err);
	if (ok && !cut) {
		drv_check_options dc = {c.samples, seed, c.tolerance, c.step};
		ir_diags d;
		ir_diags_init(&d);
		ok = drv_check_gradients(g.gx, g.fx, &g.store, m->classes, &dc, r, &d);
		if (!ok)
			drv_error_diags(err, REVC_ERR_USER, &d, NULL, 0);
		ir_diags_free(&d);
	}
	r->cut = cut;
	r->seed = seed;
	if (g.gx)
		drv_engine_label(&g.engine, r->engine, sizeof r->engine);
	rt_exec_free(g.gx);
	rt_exec_free(g.fx);
	rt_store_free(&g.store);
	ir_graph_free(g.gg);
	ir_graph_free(g.fg);
	drv_engine_free(&g.engine);
	return ok;
}
