/* bench.c: what revc bench measures (revc_bench): the time of a model's
 * training steps on random data, the GEMMs a step runs (convolutions as one
 * product per image, dense layers), their floating-point operations, and
 * how fast cblas_sgemm alone runs them (the machine's ceiling for the
 * step's products). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "conv_geom.h"
#include "cpu.h"
#include "tools.h"

static double clock_seconds(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double drv_bench_now(void)
{
	return clock_seconds(CLOCK_MONOTONIC);
}

/* The GEMMs of convolutions (one per image), dense layers (over tokens
 * too) and batched products (attention's, one per head and image) of g. */
int drv_gemm_shapes(const ir_graph *g, drv_gemm_shape *out, int max)
{
	int n = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *v = g->nodes[i];
		drv_gemm_shape s;
		if (v->op == IR_OP_CONV2D || v->op == IR_OP_CONV2D_DX || v->op == IR_OP_CONV2D_DW) {
			ir_conv_geom c = ir_conv_geom_of(v);
			int64_t kk = c.c * c.kh * c.kw, hw = c.ho * c.wo;
			if (v->op == IR_OP_CONV2D)
				s = (drv_gemm_shape){c.o, hw, kk, c.n};
			else if (v->op == IR_OP_CONV2D_DX)
				s = (drv_gemm_shape){kk, hw, c.o, c.n};
			else
				s = (drv_gemm_shape){c.o, kk, hw, c.n};
		} else if (v->op == IR_OP_MATMUL || v->op == IR_OP_BMATMUL) {
			/* matmul reads tokens [N,T,K] as the matrix [N*T,K]; bmatmul
			 * runs one product per index of its leading dimensions. */
			const ir_attr *ta = ir_node_attr(v, IR_ATTR_TRANS_A);
			const ir_type *a = &v->in[0]->type, *y = &v->type;
			bool trans_a = ta && ta->u.i;
			int64_t cols = y->dim[y->rank - 1], acols = a->dim[a->rank - 1];
			if (v->op == IR_OP_MATMUL)
				s = (drv_gemm_shape){ir_type_elems(y) / cols, cols,
					trans_a ? ir_type_elems(a) / acols : acols, 1};
			else
				s = (drv_gemm_shape){y->dim[y->rank - 2], cols, trans_a ? a->dim[a->rank - 2] : acols,
					ir_type_elems(y) / (y->dim[y->rank - 2] * cols)};
		} else {
			continue;
		}
		int j = 0;
		while (j < n && (out[j].m != s.m || out[j].n != s.n || out[j].k != s.k))
			j++;
		if (j == n && n < max)
			out[n++] = (drv_gemm_shape){s.m, s.n, s.k, 0};
		if (j < max)
			out[j].count += s.count;
	}
	return n;
}

double drv_gemm_flops(const drv_gemm_shape *s, int n)
{
	double f = 0;
	for (int i = 0; i < n; i++)
		f += 2.0 * (double)s[i].m * (double)s[i].n * (double)s[i].k * (double)s[i].count;
	return f;
}

/* Seconds cblas_sgemm (threads BLAS threads) takes for all of the step's
 * GEMMs: each shape timed on its own, best of a few runs. */
double drv_gemm_seconds(const drv_gemm_shape *s, int n, int threads)
{
	rt_set_threads(threads);
	double total = 0;
	for (int i = 0; i < n; i++) {
		size_t a = (size_t)(s[i].m * s[i].k), b = (size_t)(s[i].k * s[i].n), c = (size_t)(s[i].m * s[i].n);
		float *A = calloc(a + 1, sizeof *A), *B = calloc(b + 1, sizeof *B), *C = calloc(c + 1, sizeof *C);
		if (!A || !B || !C)
			IR_DIE("out of memory");
		for (size_t j = 0; j < a; j++)
			A[j] = (float)(j % 7) * 0.1f;
		for (size_t j = 0; j < b; j++)
			B[j] = (float)(j % 5) * 0.1f;
		int reps = (int)fmin(200, fmax(3, 2e8 / (2.0 * (double)a * (double)s[i].n + 1)));
		double best = INFINITY;
		for (int trial = 0; trial < 3; trial++) {
			double t0 = drv_bench_now();
			for (int r = 0; r < reps; r++)
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)s[i].m, (blasint)s[i].n,
					(blasint)s[i].k, 1, A, (blasint)s[i].k, B, (blasint)s[i].n, 0, C, (blasint)s[i].n);
			best = fmin(best, (drv_bench_now() - t0) / reps);
		}
		total += best * (double)s[i].count;
		free(A);
		free(B);
		free(C);
	}
	return total;
}

/* ---- the convolutions' lowerings -------------------------------------------- */

/* The step's convolutions, each distinct one once, and the FLOPs their
 * products perform. */
static void conv_lowerings(const ir_graph *g, const cg_options *o, revc_bench_result *r)
{
	r->performed_flops = r->flops;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		const char *why = NULL, *l = cg_conv_describe(n, o, &why);
		if (!l)
			continue;
		ir_conv_geom c = ir_conv_geom_of(n);
		r->performed_flops += cg_conv_product_flops(n, o) -
			2.0 * (double)c.n * (double)(c.o * c.c * c.kh * c.kw) * (double)(c.ho * c.wo);
		char what[sizeof r->convs[0].what];
		cg_node_signature(n, what, sizeof what);
		int k = 0;
		while (k < r->nconvs && (strcmp(r->convs[k].what, what) || strcmp(r->convs[k].lowering, l)))
			k++;
		if (k == r->nconvs) {
			if (k == (int)(sizeof r->convs / sizeof r->convs[0]))
				continue;
			r->nconvs++;
			snprintf(r->convs[k].what, sizeof r->convs[k].what, "%s", what);
			r->convs[k].lowering = l, r->convs[k].why = why, r->convs[k].count = 0;
		}
		r->convs[k].count++;
	}
}

/* ---- the per-call profile ------------------------------------------------- */

/* A call of the step and its time, for sorting. */
typedef struct {
	int index;
	double seconds;
} timed_call;

/* Longest first; the index breaks ties. */
static int by_call_time(const void *a, const void *b)
{
	const timed_call *x = a, *y = b;
	if (x->seconds != y->seconds)
		return x->seconds < y->seconds ? 1 : -1;
	return x->index - y->index;
}

/* The `want` longest calls (steps steps) into r->top. */
static void profile_top(const rt_pool *pool, int64_t steps, int want, revc_bench_result *r)
{
	int n, m = 0;
	const rt_pool_call *c = rt_pool_profile_calls(pool, &n);
	timed_call *order = malloc(((size_t)n + 1) * sizeof *order);
	if (!order)
		IR_DIE("out of memory");
	for (int i = 0; i < n; i++)
		if (c[i].label && c[i].count)
			order[m++] = (timed_call){i, c[i].seconds};
	qsort(order, (size_t)m, sizeof *order, by_call_time);
	int cap = (int)(sizeof r->top / sizeof r->top[0]);
	r->ntop = want < m ? want : m;
	r->ntop = r->ntop < cap ? r->ntop : cap;
	double per = 1.0 / (double)steps;
	for (int k = 0; k < r->ntop; k++) {
		const rt_pool_call *x = &c[order[k].index];
		/* "KIND\tBYTES\tFLOPS\tNODE" (codegen/step.c) */
		const char *tab = strchr(x->label, '\t'), *node = strrchr(x->label, '\t');
		size_t len = tab ? (size_t)(tab - x->label) : strlen(x->label);
		r->top[k].index = order[k].index;
		snprintf(r->top[k].kind, sizeof r->top[k].kind, "%.*s", (int)len, x->label);
		snprintf(r->top[k].node, sizeof r->top[k].node, "%s", node ? node + 1 : "");
		r->top[k].seconds = x->seconds * per;
		r->top[k].busy_seconds = x->busy_seconds * per;
		r->top[k].late_seconds = x->late_seconds * per;
		r->top[k].wait_seconds = x->wait_seconds * per;
		r->top[k].parallel = x->parallel;
		r->top[k].uneven = 0, r->top[k].slowest = 0;
		if (x->parallel && rt_pool_threads(pool) > 1) {
			const double *chunks = rt_pool_profile_chunks(pool, order[k].index);
			double lo = chunks[0], hi = chunks[0];
			for (int t = 1; t < rt_pool_threads(pool); t++) {
				lo = chunks[t] < lo ? chunks[t] : lo;
				if (chunks[t] > hi)
					hi = chunks[t], r->top[k].slowest = t;
			}
			r->top[k].uneven = hi > 0 ? 1 - lo / hi : 0;
		}
	}
	free(order);
}

/* Each chunk index's time per step, and the waiting that repeats every
 * step (revc_bench_result). */
static void profile_chunks(const rt_pool *pool, int64_t steps, revc_bench_result *r)
{
	int n, T = rt_pool_threads(pool);
	const rt_pool_call *c = rt_pool_profile_calls(pool, &n);
	double per = 1.0 / (double)steps;
	IR_ASSERT(T <= (int)(sizeof r->chunk_seconds / sizeof r->chunk_seconds[0]));
	for (int i = 0; i < n; i++) {
		if (!c[i].label || !c[i].count || !c[i].parallel)
			continue;
		const double *chunks = rt_pool_profile_chunks(pool, i);
		double slowest = 0;
		for (int t = 0; t < T; t++) {
			r->chunk_seconds[t] += chunks[t] * per;
			slowest = chunks[t] > slowest ? chunks[t] : slowest;
		}
		for (int t = 0; t < T; t++)
			r->repeat_wait_seconds += (slowest - chunks[t]) * per;
	}
}

/* Sums the pool's per-call records (steps steps) per kind of kernel. */
static void profile_kinds(const rt_pool *pool, int64_t steps, revc_bench_result *r)
{
	int n;
	const rt_pool_call *c = rt_pool_profile_calls(pool, &n);
	r->profiled = true;
	r->profile_threads = rt_pool_threads(pool);
	double per = 1.0 / (double)steps;
	for (int i = 0; i < n; i++) {
		if (!c[i].label || !c[i].count)
			continue;
		/* "KIND\tBYTES\tFLOPS" (codegen/step.c) */
		const char *tab = strchr(c[i].label, '\t');
		size_t len = tab ? (size_t)(tab - c[i].label) : strlen(c[i].label);
		double bytes = 0, flops = 0;
		if (tab)
			sscanf(tab + 1, "%lf\t%lf", &bytes, &flops);
		int k = 0;
		while (k < r->nkinds && (strlen(r->kinds[k].kind) != len || strncmp(r->kinds[k].kind, c[i].label, len)))
			k++;
		if (k == r->nkinds) {
			if (k == (int)(sizeof r->kinds / sizeof r->kinds[0])) {
				k--; /* the last row takes the rest */
				snprintf(r->kinds[k].kind, sizeof r->kinds[k].kind, "(other kinds)");
			} else {
				r->nkinds++;
				snprintf(r->kinds[k].kind, sizeof r->kinds[k].kind, "%.*s", (int)len, c[i].label);
			}
		}
		double runs = (double)c[i].count * per;
		r->kinds[k].calls += runs;
		r->kinds[k].seconds += c[i].seconds * per;
		r->kinds[k].busy_seconds += c[i].busy_seconds * per;
		r->kinds[k].late_seconds += c[i].late_seconds * per;
		r->kinds[k].wait_seconds += c[i].wait_seconds * per;
		r->kinds[k].bytes += bytes * runs;
		r->kinds[k].flops += flops * runs;
		if (!c[i].parallel)
			r->kinds[k].serial_seconds += c[i].seconds * per;
		r->profile_step_seconds += c[i].seconds * per;
	}
	profile_chunks(pool, steps, r);
	for (int a = 1; a < r->nkinds; a++) /* by time, longest first */
		for (int b = a; b > 0 && r->kinds[b].seconds > r->kinds[b - 1].seconds; b--) {
			__typeof__(r->kinds[0]) t = r->kinds[b];
			r->kinds[b] = r->kinds[b - 1], r->kinds[b - 1] = t;
		}
}

/* ---- revc_bench ----------------------------------------------------------- */

void revc_bench_options_init(revc_bench_options *b)
{
	*b = (revc_bench_options){.steps = 5};
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

void drv_sort_values(double *x, int64_t n)
{
	qsort(x, (size_t)n, sizeof *x, by_value);
}

/* Times b->steps runs of x after a warm-up: their median and minimum, and
 * the least processor time one took.  With a pool, its profile times the
 * calls of the timed steps. */
static bool time_steps(rt_exec *x, const revc_bench_options *b, revc_bench_result *r, rt_pool *pool,
	revc_error **err)
{
	double *times = calloc((size_t)b->steps + 1, sizeof *times);
	if (!times)
		IR_DIE("out of memory");
	rt_err e;
	bool ok = true;
	r->min_cpu_seconds = INFINITY;
	for (int64_t s = -1; ok && s < b->steps; s++) {
		if (b->on_step)
			b->on_step(b->user, s + 1, b->steps);
		if (pool && s == 0)
			rt_pool_profile(pool, true);
		double s0 = drv_bench_now(), c0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
		ok = rt_exec_run(x, &e);
		if (s >= 0) {
			times[s] = drv_bench_now() - s0;
			r->min_cpu_seconds = fmin(r->min_cpu_seconds, clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0);
		}
	}
	if (ok) {
		r->mean_seconds = 0;
		for (int64_t s = 0; s < b->steps; s++)
			r->mean_seconds += times[s] / (double)b->steps;
		drv_sort_values(times, b->steps);
		r->median_seconds = times[b->steps / 2];
		r->min_seconds = times[0];
	}
	free(times);
	return ok ? true : drv_error_rt(err, &e);
}

bool drv_bench_compile(revc_model *m, const revc_options *o, bool *cut, revc_error **err)
{
	revc_options opts;
	if (o)
		opts = *o;
	else
		revc_options_init(&opts);
	*cut = false;
	if (!m->is_spec)
		return drv_errorf(err, REVC_ERR_USAGE, "the benchmark needs a model from a spec; %s is an IR file", m->name);
	opts.graphs = REVC_GRAPH_STEP;
	opts.dtype = REVC_F32;
	opts.no_run = true;
	if (!revc_model_compile(m, &opts, err))
		return false;
	*cut = m->cut;
	return true;
}

rt_exec *drv_bench_prepare(revc_model *m, revc_error **err)
{
	if (!revc_model_prepare(m, err))
		return NULL;
	/* Random data; a tiny learning rate keeps the parameters sane. */
	rt_exec *x = m->x[DRV_STEP];
	drv_check_batch(x, (uint64_t)m->spec.spec.seed, m->classes);
	*(float *)rt_exec_input(x, "lr", NULL) = 1e-4f;
	return x;
}

bool revc_bench(revc_model *m, const revc_options *o, const revc_bench_options *b, revc_bench_result *r,
	revc_error **err)
{
	*r = (revc_bench_result){.blas_core = rt_blas_core()};
	revc_bench_options bo;
	if (b)
		bo = *b;
	else
		revc_bench_options_init(&bo);
	revc_options opts;
	if (o)
		opts = *o;
	else
		revc_options_init(&opts);
	if (bo.steps < 1)
		return drv_errorf(err, REVC_ERR_USAGE, "the benchmark needs at least one timed step");
	if (!drv_bench_compile(m, &opts, &r->cut, err))
		return false;
	if (r->cut)
		return true;
	bool profile = bo.profile && opts.engine == REVC_JIT;
	m->engine.cg.profile = profile;
	double t0 = drv_bench_now();
	rt_exec *x = drv_bench_prepare(m, err);
	if (!x)
		return false;
	r->compile_seconds = drv_bench_now() - t0;
	r->round_trip_ns[0] = rt_probe_round_trip_ns();
	if (!time_steps(x, &bo, r, NULL, err))
		return false;
	/* after the pool's workers have gone to sleep (RT_POOL_YIELDS) */
	nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
	r->round_trip_ns[1] = rt_probe_round_trip_ns();
	if (profile) {
		/* As many steps again, timing each call; the median of these
		 * against the one above is what the timing costs. */
		revc_bench_result again = {0};
		bool ok = time_steps(x, &bo, &again, m->engine.pool, err);
		rt_pool_profile(m->engine.pool, false);
		if (!ok)
			return false;
		r->profile_median_seconds = again.median_seconds;
		r->profile_mean_seconds = again.mean_seconds;
		profile_kinds(m->engine.pool, bo.steps, r);
		if (bo.profile_calls > 0)
			profile_top(m->engine.pool, bo.steps, bo.profile_calls, r);
	}
	drv_gemm_shape shapes[512];
	int ns = drv_gemm_shapes(m->g[DRV_STEP], shapes, 512);
	r->flops = drv_gemm_flops(shapes, ns);
	conv_lowerings(m->g[DRV_STEP], &m->engine.cg, r);
	r->gemm_seconds = bo.gemm ? drv_gemm_seconds(shapes, ns, opts.threads) : 0;
	r->arena_bytes = ps_arena_bytes(m->g[DRV_STEP]);
	r->cpu_native = opts.engine == REVC_JIT && cg_cpu_is_native(opts.cpu);
	const cg_stats *st = &m->engine.stats;
	r->kernels = st->kernels, r->calls = st->calls;
	r->seconds_emit = st->seconds_emit, r->seconds_optimize = st->seconds_optimize, r->seconds_jit = st->seconds_jit;
	r->objects = st->objects, r->objects_cached = st->objects_cached;
	return true;
}
