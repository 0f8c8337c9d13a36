/* bench_versus.c: revc bench --versus NAME=VALUE (revc_bench_versus): one
 * step built twice, the second time with an environment variable set, and
 * the two timed side by side in one process.
 *
 * On a shared machine a step's time drifts by tens of percent from one
 * minute to the next, so two separate runs cannot show a change of a few
 * percent.  Here the builds' steps alternate, A B then B A (so that
 * neither is always first), and each pair's B/A ratio is taken: the drift
 * is nearly the same for both steps of a pair and cancels.  The median of
 * the ratios, with its quartiles, is the figure.  Measured on a shared
 * 2-core Zen 3, with the same build on both sides (a variable nothing
 * reads), 200 pairs of fashion's step gave medians of 0.988 to 1.003.
 *
 * B runs on A's thread pool.  With a pool each, three threads shared the
 * two CPUs: the idle build's worker spun and yielded beside the other's
 * steps.  On the same host, same build twice, four runs each way
 * alternated: a pool each gave medians 0.994-1.008 with quartiles about
 * 0.94 and 1.06; one pool 0.991-1.005, quartiles about 0.97 and 1.03
 * (and earlier, with a pool each, three runs of seven at 1.04-1.05). */
#include <stdlib.h>
#include <string.h>

#include "tools.h"

/* Is s "NAME=VALUE", NAME a variable's name? */
static bool setting_ok(const char *s)
{
	const char *eq = strchr(s, '=');
	if (!eq || eq == s || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (const char *c = s; c < eq; c++)
		if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
			return false;
	return true;
}

/* Compiles and prepares b with the setting in the environment (the
 * passes read some variables, code generation others), and puts back what
 * was there; b runs on the threads of engine `on`.  *cut: the pass
 * options stopped the pipeline. */
static rt_exec *build_with(revc_model *b, const char *setting, const revc_options *o, const drv_engine *on,
	bool *cut, revc_error **err)
{
	const char *eq = strchr(setting, '=');
	char name[256];
	snprintf(name, sizeof name, "%.*s", (int)(eq - setting), setting);
	const char *was = getenv(name);
	char *old = was ? strdup(was) : NULL;
	if (was && !old)
		IR_DIE("out of memory");
	setenv(name, eq + 1, 1);
	rt_exec *x = NULL;
	if (drv_bench_compile(b, o, cut, err) && !*cut) {
		if (on->pool)
			drv_engine_share_pool(&b->engine, on);
		x = drv_bench_prepare(b, err);
	}
	if (old)
		setenv(name, old, 1);
	else
		unsetenv(name);
	free(old);
	return x;
}

static bool run(rt_exec *x, double *seconds, revc_error **err)
{
	rt_err e;
	double t0 = drv_bench_now();
	if (!rt_exec_run(x, &e))
		return drv_error_rt(err, &e);
	*seconds = drv_bench_now() - t0;
	return true;
}

/* The median and quartiles of v (n values), which it sorts. */
static void spread(double *v, int64_t n, double *median, double *low, double *high)
{
	drv_sort_values(v, n);
	*median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
	*low = v[n / 4];
	*high = v[(3 * n) / 4 < n ? (3 * n) / 4 : n - 1];
}

bool revc_bench_versus(revc_model *a, revc_model *b, const char *setting, const revc_options *o,
	const revc_bench_options *bo, revc_versus_result *r, revc_error **err)
{
	*r = (revc_versus_result){.pairs = bo->steps};
	if (!setting_ok(setting))
		return drv_errorf(err, REVC_ERR_USAGE, "--versus takes NAME=VALUE, an environment variable and its value, "
			"not '%s'", setting);
	if (bo->steps < 1)
		return drv_errorf(err, REVC_ERR_USAGE, "the benchmark needs at least one timed step");
	bool cut = false;
	rt_exec *x[2] = {NULL, NULL};
	if (!drv_bench_compile(a, o, &cut, err))
		return false;
	if (!cut) {
		if (!(x[0] = drv_bench_prepare(a, err)))
			return false;
		x[1] = build_with(b, setting, o, &a->engine, &cut, err);
		if (!x[1] && !cut)
			return false;
	}
	if (cut)
		return drv_errorf(err, REVC_ERR_USAGE, "--versus times two steps: the pass options must not stop the "
			"pipeline");
	const revc_model *m[2] = {a, b};
	for (int k = 0; k < 2; k++) {
		r->kernels[k] = m[k]->engine.stats.kernels;
		r->calls[k] = m[k]->engine.stats.calls;
	}
	int64_t n = bo->steps;
	double *t[2] = {calloc((size_t)n, sizeof(double)), calloc((size_t)n, sizeof(double))};
	double *ratio = calloc((size_t)n, sizeof *ratio), warm;
	if (!t[0] || !t[1] || !ratio)
		IR_DIE("out of memory");
	bool ok = run(x[0], &warm, err) && run(x[1], &warm, err);
	r->round_trip_ns[0] = rt_probe_round_trip_ns();
	for (int64_t p = 0; ok && p < n; p++) {
		if (bo->on_step)
			bo->on_step(bo->user, p, n);
		int first = (int)(p % 2); /* A B, then B A */
		ok = run(x[first], &t[first][p], err) && run(x[1 - first], &t[1 - first][p], err);
		ratio[p] = t[1][p] / t[0][p];
	}
	r->round_trip_ns[1] = rt_probe_round_trip_ns();
	if (ok) {
		double lo, hi;
		for (int k = 0; k < 2; k++) {
			spread(t[k], n, &r->median_seconds[k], &lo, &hi);
			r->min_seconds[k] = t[k][0];
		}
		spread(ratio, n, &r->ratio_median, &r->ratio_low, &r->ratio_high);
	}
	free(t[0]);
	free(t[1]);
	free(ratio);
	return ok;
}
