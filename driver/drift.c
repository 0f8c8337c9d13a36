/* drift.c: the drift report (revc check --drift), how far the reversible backward pass
 * strays from ordinary backprop in finite precision.
 *
 * The revnet strategy does not store a unit's inputs: it reconstructs them,
 * x2 = y2 - G(y1) and x1 = y1 - F(x2), from outputs that were themselves
 * reconstructed by the unit after it, so rounding errors accumulate from a
 * stage's last unit back to its first.  For each invertible unit this
 * reports the largest absolute error of the reconstructed x1 and x2 (the
 * recompute subtractions revbwd makes) against the forward values they
 * stand for, and that error over the largest forward magnitude; and, per
 * parameter, the angle between the gradient the revnet step computes and
 * the one ordinary backprop (store) computes.  Both in f32 and in f64, on
 * one batch with the same random parameters and data.
 *
 * To see both sides in one run, the revnet graph is built up to revbwd,
 * every reconstruction and its forward value are made visible as extra
 * outputs ("drift:sS.uU.x1" and "drift:sS.uU.x1:fwd"), and the pipeline
 * then finishes as usual (the outputs keep those values live to the end of
 * the step, so this graph does not save memory; it is a diagnostic).
 *
 * The graphs run on the engine the caller gives: the interpreter, or the
 * JIT's native code for a CPU, whose convolutions are the kernels training
 * uses (Winograd's in f32 where k_conv_choice.c picks it or REVC_CONV
 * forces it), so their rounding is part of the drift; the report counts
 * each step's convolution lowerings.  It is a struct; drv_drift_json
 * formats it (the command prints its text form itself). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"

#define NDT DRV_DRIFT_NDT

const ir_dtype drv_drift_dtypes[NDT] = {IR_F32, IR_F64};

static void add_output(ir_graph *g, ir_node *v, const char *name)
{
	ir_node *o = ir_node_new(g, IR_OP_OUTPUT, &v, 1);
	ir_node_set_str(g, o, IR_ATTR_NAME, name);
	o->type = v->type;
	o->scope = v->scope;
}

/* The revnet training step of s in dt with the drift outputs; the units
 * with a reconstruction go into u[0..*nu) (malloc'd).  NULL with errors in
 * d. */
static ir_graph *revnet_graph(const fe_spec *s, ir_dtype dt, drv_engine *e, drv_drift_unit **u, int *nu,
	ir_diags *d)
{
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.strategy = PS_REVNET;
	ctx.optimizer = false;
	drv_engine_plan(e, &ctx);
	ps_options upto = {.stop_after = "revbwd"}, all = {0};
	ir_graph *g = drv_spec_plan(s, dt, FE_LOWER_TRAIN, &ctx, &upto);
	*u = NULL;
	*nu = 0;
	if (!g) {
		drv_diags_append(d, &ctx.diags);
		ps_ctx_free(&ctx);
		return NULL;
	}
	ps_unit *units;
	int n = ps_units_find(g, &units);
	*u = calloc((size_t)n + 1, sizeof **u);
	if (!*u)
		IR_DIE("out of memory");
	ps_unit_map map;
	ps_unit_map_build(g, n, &map);
	ir_node **x = calloc(2 * (size_t)n + 1, sizeof *x);
	if (!x)
		IR_DIE("out of memory");
	ps_reconstructions(g, &map, n, x);
	ps_unit_map_free(&map);
	for (int k = 0; k < n; k++) {
		ir_node *x1 = x[2 * k + 1], *x2 = x[2 * k];
		if (!units[k].invertible || !x1 || !x2)
			continue;
		/* The unit's name for the report: the scope of its y1 ("s0.u1"),
		 * naming only, or its number. */
		char name[96], number[24];
		snprintf(number, sizeof number, "u%d", k);
		const char *sc = units[k].y1->scope ? units[k].y1->scope : number;
		snprintf(name, sizeof name, "drift:%s.x1", sc);
		add_output(g, x1, name);
		snprintf(name, sizeof name, "drift:%s.x1:fwd", sc);
		add_output(g, units[k].x1, name);
		snprintf(name, sizeof name, "drift:%s.x2", sc);
		add_output(g, x2, name);
		snprintf(name, sizeof name, "drift:%s.x2:fwd", sc);
		add_output(g, units[k].x2, name);
		snprintf((*u)[*nu].unit, sizeof (*u)[*nu].unit, "%s", sc);
		(*nu)++;
	}
	free(x);
	free(units);
	if (ps_run(g, &ctx, &all) != 0) {
		drv_diags_append(d, &ctx.diags);
		ir_graph_free(g);
		g = NULL;
	}
	ps_ctx_free(&ctx);
	return g;
}

static double at(const void *p, ir_dtype dt, int64_t i)
{
	return dt == IR_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* max |a - b| and that over max |b|. */
static void compare(const void *a, const void *b, const ir_type *t, double *abs_err, double *rel_err)
{
	double err = 0, scale = 0;
	for (int64_t i = 0; i < ir_type_elems(t); i++) {
		double x = at(a, t->dtype, i), y = at(b, t->dtype, i);
		err = drv_max_nan(err, fabs(x - y));
		scale = drv_max_nan(scale, fabs(y));
	}
	*abs_err = err;
	*rel_err = scale > 0 ? err / scale : err;
}

/* The angle between a and b in degrees, by Kahan's formula
 * 2 atan(|a/|a| - b/|b|| / |a/|a| + b/|b||), exact for nearly equal vectors
 * where acos of the cosine loses half the digits. */
static double angle_deg(const void *a, const void *b, const ir_type *t)
{
	int64_t n = ir_type_elems(t);
	double na = 0, nb = 0;
	for (int64_t i = 0; i < n; i++) {
		na += at(a, t->dtype, i) * at(a, t->dtype, i);
		nb += at(b, t->dtype, i) * at(b, t->dtype, i);
	}
	na = sqrt(na);
	nb = sqrt(nb);
	if (na == 0 || nb == 0)
		return na == nb ? 0 : 90;
	double dm = 0, dp = 0;
	for (int64_t i = 0; i < n; i++) {
		double x = at(a, t->dtype, i) / na, y = at(b, t->dtype, i) / nb;
		dm += (x - y) * (x - y);
		dp += (x + y) * (x + y);
	}
	return 2 * atan2(sqrt(dm), sqrt(dp)) * 180 / M_PI;
}

/* Counts the lowering of each convolution node of planned g, compiled
 * with o, into c. */
static void count_convs(const ir_graph *g, const cg_options *o, drv_drift_convs *c)
{
	for (int i = 0; i < g->n; i++) {
		const char *l = cg_conv_describe(g->nodes[i], o, NULL);
		if (!l)
			continue;
		int k = 0;
		while (k < c->n && strcmp(c->lowering[k], l))
			k++;
		if (k == c->n) {
			if (k == REVC_DRIFT_LOWERINGS)
				IR_DIE("convolution lowering %s is not one of the %d the drift report counts", l,
					REVC_DRIFT_LOWERINGS);
			c->lowering[c->n++] = l;
		}
		c->count[k]++;
	}
}

/* One dtype: builds both steps, runs them with e on one batch, fills
 * column d of the units' errors, the gradients' angles and the
 * convolutions' lowerings. */
static bool run_dtype(const fe_spec *s, drv_engine *eng, int d, uint64_t seed, drv_drift_report *r,
	ir_diags *diags)
{
	ps_ctx sctx;
	ps_ctx_init(&sctx);
	sctx.strategy = PS_STORE;
	sctx.optimizer = false;
	drv_engine_plan(eng, &sctx);
	ps_options all = {0};
	drv_drift_unit *u = NULL;
	int n = 0;
	ir_graph *rg = revnet_graph(s, drv_drift_dtypes[d], eng, &u, &n, diags);
	ir_graph *sg = rg ? drv_spec_plan(s, drv_drift_dtypes[d], FE_LOWER_TRAIN, &sctx, &all) : NULL;
	rt_store store;
	rt_store_init(&store);
	rt_exec *rx = NULL, *sx = NULL;
	rt_err e;
	bool ok = false;
	if (!sg) {
		drv_diags_append(diags, &sctx.diags);
		goto done;
	}
	if (!rt_store_init_from_graph(&store, rg, seed, &e) || !rt_store_init_from_graph(&store, sg, seed, &e)) {
		drv_diag_rt(diags, &e);
		goto done;
	}
	if (!(rx = drv_engine_exec_diags(eng, rg, &store, diags)) || !(sx = drv_engine_exec_diags(eng, sg, &store, diags)))
		goto done;
	if (eng->kind == REVC_JIT) {
		count_convs(rg, &eng->cg, &r->convs[d][0]);
		count_convs(sg, &eng->cg, &r->convs[d][1]);
	}
	drv_check_batch(rx, seed, s->classes);
	drv_check_batch(sx, seed, s->classes);
	/* Running statistics change in the first run; training-mode batch norm
	 * does not read them, so the second run sees the same function. */
	if (!rt_exec_run(rx, &e) || !rt_exec_run(sx, &e)) {
		drv_diag_rt(diags, &e);
		goto done;
	}
	if (!r->units) { /* the first dtype fixes the lists */
		r->units = u;
		r->nunits = n;
		u = NULL;
		r->grads = calloc((size_t)store.n + 1, sizeof *r->grads);
		if (!r->grads)
			IR_DIE("out of memory");
		for (int i = 0; i < store.n; i++)
			if (store.t[i].trainable && !(r->grads[r->ngrads++].name = strdup(store.t[i].name)))
				IR_DIE("out of memory");
	}
	for (int k = 0; k < r->nunits; k++)
		for (int j = 0; j < 2; j++) {
			char rec[96], fwd[100];
			snprintf(rec, sizeof rec, "drift:%s.x%d", r->units[k].unit, j + 1);
			snprintf(fwd, sizeof fwd, "%s:fwd", rec);
			const ir_type *t;
			const void *a = rt_exec_output(rx, rec, &t), *b = rt_exec_output(rx, fwd, NULL);
			if (!a || !b)
				IR_DIE("drift output %s missing in the %s graph", rec, ir_dtype_name(drv_drift_dtypes[d]));
			compare(a, b, t, &r->units[k].abs[d][j], &r->units[k].rel[d][j]);
		}
	for (int i = 0; i < r->ngrads; i++) {
		char name[512];
		ps_grad_output_name(name, sizeof name, r->grads[i].name);
		const ir_type *t;
		const void *a = rt_exec_output(rx, name, &t), *b = rt_exec_output(sx, name, NULL);
		if (!a || !b)
			IR_DIE("gradient output %s missing", name);
		r->grads[i].deg[d] = angle_deg(a, b, t);
	}
	ok = true;
done:
	free(u);
	rt_exec_free(rx);
	rt_exec_free(sx);
	rt_store_free(&store);
	ir_graph_free(rg);
	ir_graph_free(sg);
	ps_ctx_free(&sctx);
	return ok;
}

static int by_angle(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Worst and median angle of dtype d; *worst_at the worst tensor's index. */
static void angle_stats(const drv_drift_grad *g, int n, int d, double *worst, int *worst_at, double *median)
{
	double *v = calloc((size_t)n + 1, sizeof *v);
	if (!v)
		IR_DIE("out of memory");
	*worst = 0;
	*worst_at = 0;
	for (int i = 0; i < n; i++) {
		v[i] = g[i].deg[d];
		if (!(v[i] <= *worst)) {
			*worst = v[i];
			*worst_at = i;
		}
	}
	qsort(v, (size_t)n, sizeof *v, by_angle);
	*median = n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	free(v);
}

/* The unit and input with the largest relative error in dtype d. */
static double worst_unit(const drv_drift_unit *u, int n, int d, int *k_at, int *j_at)
{
	double w = -1;
	*k_at = *j_at = 0;
	for (int k = 0; k < n; k++)
		for (int j = 0; j < 2; j++)
			if (!(u[k].rel[d][j] <= w)) {
				w = u[k].rel[d][j];
				*k_at = k;
				*j_at = j;
			}
	return w < 0 ? 0 : w;
}

void revc_drift_report_free(drv_drift_report *r)
{
	for (int i = 0; i < r->ngrads; i++)
		free(r->grads[i].name);
	free(r->grads);
	free(r->units);
	free(r->model);
	memset(r, 0, sizeof *r);
}

bool drv_drift(const fe_spec *s, drv_engine *e, uint64_t seed, drv_drift_report *r, ir_diags *d)
{
	memset(r, 0, sizeof *r);
	if (!(r->model = strdup(s->name)))
		IR_DIE("out of memory");
	r->batch = s->batch;
	r->seed = seed;
	drv_engine_label(e, r->engine, sizeof r->engine);
	r->jit = e->kind == REVC_JIT;
	for (int k = 0; k < NDT; k++)
		if (!run_dtype(s, e, k, seed, r, d)) {
			revc_drift_report_free(r);
			return false;
		}
	for (int k = 0; k < NDT; k++) {
		drv_drift_summary *m = &r->sum[k];
		angle_stats(r->grads, r->ngrads, k, &m->worst_degrees, &m->worst_grad, &m->median_degrees);
		m->worst_rel = worst_unit(r->units, r->nunits, k, &m->worst_unit, &m->worst_x);
	}
	return true;
}

static void json_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fprintf(f, "null");
}

/* s as a JSON string, quotes and all. */
static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	drv_json_string(f, s);
	fputc('"', f);
}

char *drv_drift_json(const drv_drift_report *r)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		IR_DIE("out of memory");
	fprintf(f, "{\"model\":");
	json_string(f, r->model);
	fprintf(f, ",\"batch\":%lld,\"seed\":%llu,\"engine\":", (long long)r->batch, (unsigned long long)r->seed);
	json_string(f, r->engine);
	fprintf(f, ",\"jit\":%s,\"convolutions\":{", r->jit ? "true" : "false");
	for (int d = 0; d < NDT; d++) {
		static const char *const steps[2] = {"revnet", "store"};
		fprintf(f, "%s\"%s\":{", d ? "," : "", ir_dtype_name(drv_drift_dtypes[d]));
		for (int k = 0; k < 2; k++) {
			const drv_drift_convs *c = &r->convs[d][k];
			fprintf(f, "%s\"%s\":{", k ? "," : "", steps[k]);
			for (int i = 0; i < c->n; i++)
				fprintf(f, "%s\"%s\":%d", i ? "," : "", c->lowering[i], c->count[i]);
			fprintf(f, "}");
		}
		fprintf(f, "}");
	}
	fprintf(f, "},\"units\":[");
	for (int k = 0; k < r->nunits; k++) {
		const drv_drift_unit *u = &r->units[k];
		fprintf(f, "%s{\"unit\":", k ? "," : "");
		json_string(f, u->unit);
		for (int d = 0; d < NDT; d++) {
			fprintf(f, ",\"%s\":{", ir_dtype_name(drv_drift_dtypes[d]));
			for (int j = 0; j < 2; j++) {
				fprintf(f, "%s\"x%d_abs\":", j ? "," : "", j + 1);
				json_num(f, u->abs[d][j]);
				fprintf(f, ",\"x%d_rel\":", j + 1);
				json_num(f, u->rel[d][j]);
			}
			fprintf(f, "}");
		}
		fprintf(f, "}");
	}
	fprintf(f, "],\"gradients\":{");
	for (int d = 0; d < NDT; d++) {
		const drv_drift_summary *m = &r->sum[d];
		fprintf(f, "\"%s\":{\"worst_degrees\":", ir_dtype_name(drv_drift_dtypes[d]));
		json_num(f, m->worst_degrees);
		fprintf(f, ",\"worst_tensor\":");
		json_string(f, r->ngrads ? r->grads[m->worst_grad].name : "");
		fprintf(f, ",\"median_degrees\":");
		json_num(f, m->median_degrees);
		fprintf(f, "},");
	}
	fprintf(f, "\"tensors\":[");
	for (int i = 0; i < r->ngrads; i++) {
		fprintf(f, "%s{\"name\":", i ? "," : "");
		json_string(f, r->grads[i].name);
		for (int d = 0; d < NDT; d++) {
			fprintf(f, ",\"%s_degrees\":", ir_dtype_name(drv_drift_dtypes[d]));
			json_num(f, r->grads[i].deg[d]);
		}
		fprintf(f, "}");
	}
	fprintf(f, "]}}\n");
	if (fclose(f) != 0)
		IR_DIE("out of memory");
	return text;
}
