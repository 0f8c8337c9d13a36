/* drift.c: `revc check --drift`, how far the reversible backward pass
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
 * the step, so this graph does not save memory; it is a diagnostic). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rt.h"

#define NDT 2 /* f32, f64 */

static const ir_dtype dtypes[NDT] = {IR_F32, IR_F64};

typedef struct {
	char unit[64];
	double abs[NDT][2], rel[NDT][2]; /* [dtype][x1, x2] */
} unit_drift;

typedef struct {
	char *name; /* the parameter's name (malloc'd) */
	double deg[NDT];
} grad_angle;

static void add_output(ir_graph *g, ir_node *v, const char *name)
{
	ir_node *o = ir_node_new(g, IR_OP_OUTPUT, &v, 1);
	ir_node_set_str(g, o, IR_ATTR_NAME, name);
	o->type = v->type;
	o->scope = v->scope;
}

/* The revnet training step of m in dt with the drift outputs; the units
 * with a reconstruction go into u[0..*nu) (malloc'd).  Reports errors. */
static ir_graph *revnet_graph(const cli_model *m, ir_dtype dt, unit_drift **u, int *nu)
{
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.strategy = PS_REVNET;
	ctx.optimizer = false;
	ps_options upto = {.stop_after = "revbwd"}, all = {0};
	ir_graph *g = cli_model_graph(m, dt, FE_LOWER_TRAIN, &ctx, &upto);
	*u = NULL;
	*nu = 0;
	if (!g) {
		ps_ctx_free(&ctx);
		return NULL;
	}
	ps_unit *units;
	int n = ps_units_find(g, &units);
	*u = calloc((size_t)n + 1, sizeof **u);
	if (!*u)
		IR_DIE("out of memory");
	ps_unit_map map;
	ps_unit_map_build(g, units, n, &map);
	ir_node **x = calloc(2 * (size_t)n + 1, sizeof *x);
	if (!x)
		IR_DIE("out of memory");
	ps_reconstructions(g, &map, n, x);
	ps_unit_map_free(&map);
	for (int k = 0; k < n; k++) {
		ir_node *x1 = x[2 * k + 1], *x2 = x[2 * k];
		if (!units[k].invertible || !x1 || !x2)
			continue;
		char name[96];
		const char *s = units[k].scope;
		snprintf(name, sizeof name, "drift:%s.x1", s);
		add_output(g, x1, name);
		snprintf(name, sizeof name, "drift:%s.x1:fwd", s);
		add_output(g, units[k].x1, name);
		snprintf(name, sizeof name, "drift:%s.x2", s);
		add_output(g, x2, name);
		snprintf(name, sizeof name, "drift:%s.x2:fwd", s);
		add_output(g, units[k].x2, name);
		snprintf((*u)[*nu].unit, sizeof (*u)[*nu].unit, "%s", s);
		(*nu)++;
	}
	free(x);
	free(units);
	if (ps_run(g, &ctx, &all) != 0) {
		cli_model_report(m, &ctx.diags);
		ir_graph_free(g);
		g = NULL;
	}
	ps_ctx_free(&ctx);
	return g;
}

/* The same random batch, whatever the dtype: inputs "x" and "labels". */
static void fill_batch(rt_exec *x, const fe_spec *s, uint64_t seed)
{
	const ir_type *tx, *ty;
	void *xs = rt_exec_input(x, "x", &tx);
	int32_t *ys = rt_exec_input(x, "labels", &ty);
	rt_rng r;
	rt_rng_derive(&r, seed, RT_RNG_CHECK_BATCH, 0);
	for (int64_t i = 0; i < ir_type_elems(tx); i++) {
		double v = rt_rng_uniform(&r);
		if (tx->dtype == IR_F32)
			((float *)xs)[i] = (float)v;
		else
			((double *)xs)[i] = v;
	}
	for (int64_t i = 0; i < ir_type_elems(ty); i++)
		ys[i] = (int32_t)rt_rng_below(&r, (uint64_t)s->classes);
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
		err = cli_max_nan(err, fabs(x - y));
		scale = cli_max_nan(scale, fabs(y));
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

/* One dtype: builds both steps, runs them on one batch, fills column d of
 * the units' errors and the gradients' angles. */
static bool run_dtype(const cli_model *m, int d, uint64_t seed, unit_drift **units, int *nu,
	grad_angle **grads, int *ng)
{
	ps_ctx sctx;
	ps_ctx_init(&sctx);
	sctx.strategy = PS_STORE;
	sctx.optimizer = false;
	ps_options all = {0};
	unit_drift *u = NULL;
	int n = 0;
	ir_graph *rg = revnet_graph(m, dtypes[d], &u, &n);
	ir_graph *sg = rg ? cli_model_graph(m, dtypes[d], FE_LOWER_TRAIN, &sctx, &all) : NULL;
	rt_store store;
	rt_store_init(&store);
	rt_exec *rx = NULL, *sx = NULL;
	rt_err e;
	bool ok = false;
	if (!sg)
		goto done;
	if (!rt_store_init_from_graph(&store, rg, seed, &e) || !rt_store_init_from_graph(&store, sg, seed, &e) ||
	    !(rx = rt_exec_new(rg, &store, RT_EXEC_AUTO, &e)) || !(sx = rt_exec_new(sg, &store, RT_EXEC_AUTO, &e))) {
		cli_error("%s", e.msg);
		goto done;
	}
	fill_batch(rx, &m->spec, seed);
	fill_batch(sx, &m->spec, seed);
	/* Running statistics change in the first run; training-mode batch norm
	 * does not read them, so the second run sees the same function. */
	if (!rt_exec_run(rx, &e) || !rt_exec_run(sx, &e)) {
		cli_error("%s", e.msg);
		goto done;
	}
	if (!*units) { /* the first dtype fixes the lists */
		*units = u;
		*nu = n;
		u = NULL;
		*grads = calloc((size_t)store.n + 1, sizeof **grads);
		if (!*grads)
			IR_DIE("out of memory");
		for (int i = 0; i < store.n; i++)
			if (store.t[i].trainable)
				(*grads)[(*ng)++].name = strdup(store.t[i].name);
	}
	for (int k = 0; k < *nu; k++)
		for (int j = 0; j < 2; j++) {
			char rec[96], fwd[100];
			snprintf(rec, sizeof rec, "drift:%s.x%d", (*units)[k].unit, j + 1);
			snprintf(fwd, sizeof fwd, "%s:fwd", rec);
			const ir_type *t;
			const void *a = rt_exec_output(rx, rec, &t), *b = rt_exec_output(rx, fwd, NULL);
			if (!a || !b)
				IR_DIE("drift output %s missing in the %s graph", rec, ir_dtype_name(dtypes[d]));
			compare(a, b, t, &(*units)[k].abs[d][j], &(*units)[k].rel[d][j]);
		}
	for (int i = 0; i < *ng; i++) {
		char name[512];
		ps_grad_output_name(name, sizeof name, (*grads)[i].name);
		const ir_type *t;
		const void *a = rt_exec_output(rx, name, &t), *b = rt_exec_output(sx, name, NULL);
		if (!a || !b)
			IR_DIE("gradient output %s missing", name);
		(*grads)[i].deg[d] = angle_deg(a, b, t);
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
static void angle_stats(const grad_angle *g, int n, int d, double *worst, int *worst_at, double *median)
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
static double worst_unit(const unit_drift *u, int n, int d, int *k_at, int *j_at)
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

static void json_num(double v)
{
	if (isfinite(v))
		printf("%.6g", v);
	else
		printf("null");
}

static void print_json(const cli_model *m, uint64_t seed, const unit_drift *u, int nu, const grad_angle *g,
	int ng)
{
	printf("{\"model\":\"");
	cli_json_string(stdout, m->spec.name);
	printf("\",\"batch\":%lld,\"seed\":%llu,\"units\":[", (long long)m->spec.batch, (unsigned long long)seed);
	for (int k = 0; k < nu; k++) {
		printf("%s{\"unit\":\"%s\"", k ? "," : "", u[k].unit);
		for (int d = 0; d < NDT; d++) {
			printf(",\"%s\":{", ir_dtype_name(dtypes[d]));
			for (int j = 0; j < 2; j++) {
				printf("%s\"x%d_abs\":", j ? "," : "", j + 1);
				json_num(u[k].abs[d][j]);
				printf(",\"x%d_rel\":", j + 1);
				json_num(u[k].rel[d][j]);
			}
			printf("}");
		}
		printf("}");
	}
	printf("],\"gradients\":{");
	for (int d = 0; d < NDT; d++) {
		double worst, median;
		int wi;
		angle_stats(g, ng, d, &worst, &wi, &median);
		printf("\"%s\":{\"worst_degrees\":", ir_dtype_name(dtypes[d]));
		json_num(worst);
		printf(",\"worst_tensor\":\"");
		cli_json_string(stdout, ng ? g[wi].name : "");
		printf("\",\"median_degrees\":");
		json_num(median);
		printf("},");
	}
	printf("\"tensors\":[");
	for (int i = 0; i < ng; i++) {
		printf("%s{\"name\":\"", i ? "," : "");
		cli_json_string(stdout, g[i].name);
		printf("\"");
		for (int d = 0; d < NDT; d++) {
			printf(",\"%s_degrees\":", ir_dtype_name(dtypes[d]));
			json_num(g[i].deg[d]);
		}
		printf("}");
	}
	printf("]}}\n");
}

static void print_text(const cli_model *m, uint64_t seed, const unit_drift *u, int nu, const grad_angle *g,
	int ng)
{
	printf("revc check --drift: %s, batch %lld, seed %llu, revnet against store, %d invertible unit%s\n\n",
		m->spec.name, (long long)m->spec.batch, (unsigned long long)seed, nu, nu == 1 ? "" : "s");
	printf("reconstructed unit inputs against the forward values: max|rec - fwd| (abs) and that over max|fwd| (rel)\n");
	printf("%-8s  %-43s  %s\n", "", "f32", "f64");
	printf("%-8s", "unit");
	for (int d = 0; d < NDT; d++)
		printf("  %10s %10s %10s %10s", "x1 abs", "x1 rel", "x2 abs", "x2 rel");
	printf("\n");
	for (int k = 0; k < nu; k++) {
		printf("%-8s", u[k].unit);
		for (int d = 0; d < NDT; d++)
			printf("  %10.2e %10.2e %10.2e %10.2e", u[k].abs[d][0], u[k].rel[d][0], u[k].abs[d][1],
				u[k].rel[d][1]);
		printf("\n");
	}
	if (nu == 0)
		printf("  (no invertible unit: every unit changes its width or stride)\n");
	printf("\ngradients, revnet against store: angle in degrees over %d tensors\n", ng);
	double worst[NDT], median[NDT];
	int wi[NDT];
	for (int d = 0; d < NDT; d++) {
		angle_stats(g, ng, d, &worst[d], &wi[d], &median[d]);
		printf("  %s  worst %.3e (%s), median %.3e\n", ir_dtype_name(dtypes[d]), worst[d],
			ng ? g[wi[d]].name : "-", median[d]);
	}
	printf("\nsummary\n");
	for (int d = 0; d < NDT; d++) {
		int k, j;
		double w = worst_unit(u, nu, d, &k, &j);
		printf("  %s  ", ir_dtype_name(dtypes[d]));
		if (nu)
			printf("largest relative reconstruction error %.2e (%s.x%d), ", w, u[k].unit, j + 1);
		printf("largest gradient angle %.2e degrees\n", worst[d]);
	}
}

int cli_check_drift(const cli_model *m, uint64_t seed, bool json)
{
	unit_drift *units = NULL;
	grad_angle *grads = NULL;
	int nu = 0, ng = 0, status = EXIT_USER;
	for (int d = 0; d < NDT; d++)
		if (!run_dtype(m, d, seed, &units, &nu, &grads, &ng))
			goto done;
	if (json)
		print_json(m, seed, units, nu, grads, ng);
	else
		print_text(m, seed, units, nu, grads, ng);
	status = EXIT_OK;
done:
	for (int i = 0; i < ng; i++)
		free(grads[i].name);
	free(grads);
	free(units);
	return status;
}
