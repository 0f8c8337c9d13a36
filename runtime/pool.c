/* pool.c: the thread pool native kernels are divided among.
 *
 * rt_parallel(pool, fn, args, n) splits [0, n) into T contiguous chunks,
 * chunk t being [n·t/T, n·(t+1)/T), and runs fn on every chunk, even an
 * empty one, so that kernels can initialise per-chunk workspace
 * unconditionally: fn(args, lo, hi, t).  The calling thread runs chunk 0
 * and then, like the workers, claims the others from a counter, so a
 * worker that is slow to wake (or preempted by another process) never
 * holds the caller up: the caller runs that chunk itself.  Which OS thread
 * runs chunk t does not matter: chunks and their `t` depend only on n and
 * T, so results never depend on timing.
 *
 * A step makes hundreds of calls of a millisecond or less, so waking a
 * sleeping thread for each (tens of microseconds on a virtual machine)
 * would cost a few percent of the step.  The workers therefore spin on the
 * job counter for a while before they sleep on a condition variable:
 * RT_POOL_SPIN checks (about 0.1 ms), then RT_POOL_YIELDS more that each
 * yield the core, so that on a machine with more runnable threads than
 * cores a waiting worker gives its core to the thread with work (which may
 * be this pool's caller) instead of burning its time slice; the caller wakes sleepers
 * only when there are some.  The caller spins on the count of chunks
 * still running, yielding the core after a while.
 *
 * No lost wake-up: a worker going to sleep counts itself in `sleepers`
 * and then reads `generation`, both under the mutex; the caller bumps
 * `generation` and then reads `sleepers` (all sequentially consistent).
 * Either the worker sees the new job, or the caller sees the sleeper and
 * broadcasts under the mutex, which it cannot take before the worker
 * waits.
 *
 * Profiling (rt_pool_profile): a step compiled with cg_options.profile
 * calls the dispatcher with fn NULL before each kernel call (args its
 * label, n its index) and once after the last (n -1).  The pool then times
 * each call from its mark to the next, and each chunk a thread runs; a
 * call with no chunks between its marks ran serially on the caller.  Of
 * the threads' idle time in a parallel call it tells apart the time each
 * thread spent before its first chunk started (waking; a thread that ran
 * no chunk was idle all along) and after its last chunk ended, waiting
 * for the slowest chunk; the rest is handing the job out and seeing it
 * end.  It also sums each chunk's time per call: a chunk that is slower
 * in every run shows there, where one slower by chance evens out.  Clock
 * reads: two per mark, one when a job is handed out and two per chunk. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"

#define RT_POOL_SPIN 2000
#define RT_POOL_YIELDS 1000

struct rt_pool {
	int threads;
	pthread_t *tid;
	pthread_mutex_t mu;
	pthread_cond_t go;
	/* the current job, written before generation is bumped */
	revc_abi_kernel *fn;
	void **args;
	int64_t n;
	atomic_ulong generation;
	atomic_int next;     /* the next chunk to claim (chunk 0 is the caller's) */
	atomic_int pending;  /* chunks 1.. not finished yet */
	atomic_int sleepers; /* workers waiting on go */
	atomic_bool quit;
	/* profiling: per call index, what rt_pool_profile_calls returns */
	bool profile;
	rt_pool_call *calls;
	int ncalls, cap;
	int cur;                  /* the call being timed, or -1 */
	double cur_start;         /* when its mark came */
	bool cur_parallel;        /* it handed out chunks */
	_Atomic int64_t busy_ns;  /* chunk time of the current job, all threads */
	int64_t handed_ns;        /* when the current job was handed out */
	int64_t *start_ns, *end_ns; /* per chunk: when it started and ended */
	int *ran_by;              /* per chunk: the thread that ran it (0: the caller) */
	double *chunk_seconds;    /* per call index, per chunk: its time, summed over runs */
	atomic_int started;       /* workers started, who number themselves 1.. */
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void run_chunk(rt_pool *p, int64_t t)
{
	int64_t lo = p->n * t / p->threads, hi = p->n * (t + 1) / p->threads;
	if (!p->profile) {
		p->fn(p->args, lo, hi, t);
		return;
	}
	int64_t t0 = now_ns();
	p->fn(p->args, lo, hi, t);
	int64_t t1 = now_ns();
	p->start_ns[t] = t0, p->end_ns[t] = t1;
	atomic_fetch_add_explicit(&p->busy_ns, t1 - t0, memory_order_relaxed);
}

/* Runs chunks of the current job while there are unclaimed ones.  A claim
 * made late, after the job ended, returns T or more and runs nothing; the
 * job's fields are read only under a claim, and the caller cannot change
 * them before every claimed chunk is done. */
static void claim_chunks(rt_pool *p, int self)
{
	for (;;) {
		int t = atomic_fetch_add_explicit(&p->next, 1, memory_order_acq_rel);
		if (t >= p->threads)
			return;
		if (p->profile)
			p->ran_by[t] = self;
		run_chunk(p, t);
		atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
	}
}

/* The whole of [0, n) on the caller, with one thread. */
static void run_chunk_serial(rt_pool *p, revc_abi_kernel *fn, void **args, int64_t n)
{
	p->fn = fn, p->args = args, p->n = n;
	run_chunk(p, 0);
}

/* Waits for a generation other than seen (or quit) and returns it. */
static unsigned long next_job(rt_pool *p, unsigned long seen)
{
	for (int i = 0; i < RT_POOL_SPIN + RT_POOL_YIELDS; i++) {
		unsigned long g = atomic_load_explicit(&p->generation, memory_order_acquire);
		if (g != seen || atomic_load(&p->quit))
			return g;
		if (i < RT_POOL_SPIN)
			cpu_relax();
		else
			sched_yield();
	}
	pthread_mutex_lock(&p->mu);
	atomic_fetch_add(&p->sleepers, 1);
	unsigned long g;
	while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit))
		pthread_cond_wait(&p->go, &p->mu);
	atomic_fetch_sub(&p->sleepers, 1);
	pthread_mutex_unlock(&p->mu);
	return g;
}

static void *worker(void *arg)
{
	rt_pool *p = arg;
	int self = atomic_fetch_add(&p->started, 1) + 1;
	unsigned long seen = 0;
	for (;;) {
		seen = next_job(p, seen);
		if (atomic_load(&p->quit))
			break;
		claim_chunks(p, self);
	}
	return NULL;
}

rt_pool *rt_pool_new(int threads)
{
	rt_pool *p = calloc(1, sizeof *p);
	if (!p)
		IR_DIE("out of memory");
	p->threads = threads < 1 ? 1 : threads;
	p->tid = calloc((size_t)p->threads, sizeof *p->tid);
	p->start_ns = calloc((size_t)p->threads, sizeof *p->start_ns);
	p->end_ns = calloc((size_t)p->threads, sizeof *p->end_ns);
	p->ran_by = calloc((size_t)p->threads, sizeof *p->ran_by);
	if (!p->tid || !p->start_ns || !p->end_ns || !p->ran_by)
		IR_DIE("out of memory");
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->go, NULL);
	atomic_init(&p->generation, 0);
	atomic_init(&p->pending, 0);
	atomic_init(&p->next, p->threads);
	atomic_init(&p->sleepers, 0);
	atomic_init(&p->quit, false);
	atomic_init(&p->started, 0);
	for (int t = 1; t < p->threads; t++) {
		if (pthread_create(&p->tid[t], NULL, worker, p) != 0)
			IR_DIE("cannot start a thread");
	}
	return p;
}

/* Wakes every sleeping worker. */
static void wake(rt_pool *p)
{
	if (atomic_load(&p->sleepers) == 0)
		return;
	pthread_mutex_lock(&p->mu);
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
}

void rt_pool_free(rt_pool *p)
{
	if (!p)
		return;
	atomic_store(&p->quit, true);
	/* A worker between its check and its wait holds the mutex, so taking
	 * it here orders the broadcast after that wait. */
	pthread_mutex_lock(&p->mu);
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	for (int t = 1; t < p->threads; t++)
		pthread_join(p->tid[t], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->go);
	free(p->calls);
	free(p->chunk_seconds);
	free(p->start_ns);
	free(p->end_ns);
	free(p->ran_by);
	free(p->tid);
	free(p);
}

/* ---- profiling ------------------------------------------------------------ */

void rt_pool_profile(rt_pool *p, bool on)
{
	p->profile = on;
	p->cur = -1;
	if (!on)
		return;
	p->ncalls = 0;
	if (p->calls) {
		memset(p->calls, 0, (size_t)p->cap * sizeof *p->calls);
		memset(p->chunk_seconds, 0, (size_t)p->cap * (size_t)p->threads * sizeof *p->chunk_seconds);
	}
}

const rt_pool_call *rt_pool_profile_calls(const rt_pool *p, int *n)
{
	*n = p->ncalls;
	return p->calls;
}

const double *rt_pool_profile_chunks(const rt_pool *p, int k)
{
	IR_ASSERT(k >= 0 && k < p->ncalls);
	return p->chunk_seconds + (size_t)k * (size_t)p->threads;
}

int rt_pool_threads(const rt_pool *p)
{
	return p->threads;
}

/* The mark before call k (label its kernel's), or after the last (k < 0):
 * ends the call being timed. */
static void mark(rt_pool *p, const char *label, int64_t k)
{
	if (!p->profile)
		return;
	double t = 1e-9 * (double)now_ns();
	if (p->cur >= 0) {
		rt_pool_call *c = &p->calls[p->cur];
		double wall = t - p->cur_start;
		c->count++;
		c->seconds += wall;
		c->busy_seconds += p->cur_parallel ? 1e-9 * (double)atomic_load(&p->busy_ns) : wall;
		c->parallel = p->cur_parallel;
	}
	p->cur = -1;
	if (k < 0)
		return;
	if (k >= p->cap) {
		int cap = p->cap ? p->cap : 256;
		while (cap <= k)
			cap *= 2;
		rt_pool_call *c = realloc(p->calls, (size_t)cap * sizeof *c);
		if (!c)
			IR_DIE("out of memory");
		memset(c + p->cap, 0, (size_t)(cap - p->cap) * sizeof *c);
		p->calls = c;
		size_t T = (size_t)p->threads;
		double *cs = realloc(p->chunk_seconds, (size_t)cap * T * sizeof *cs);
		if (!cs)
			IR_DIE("out of memory");
		memset(cs + (size_t)p->cap * T, 0, (size_t)(cap - p->cap) * T * sizeof *cs);
		p->chunk_seconds = cs, p->cap = cap;
	}
	if (k >= p->ncalls)
		p->ncalls = (int)k + 1;
	p->calls[k].label = label;
	p->cur = (int)k;
	p->cur_parallel = false;
	atomic_store(&p->busy_ns, 0);
	p->cur_start = 1e-9 * (double)now_ns();
}

/* After a call, its first `chunks` chunks' times added to its sums. */
static void add_chunk_times(rt_pool *p, int chunks)
{
	double *sum = p->chunk_seconds + (size_t)p->cur * (size_t)p->threads;
	for (int t = 0; t < chunks; t++)
		sum[t] += 1e-9 * (double)(p->end_ns[t] - p->start_ns[t]);
}

/* After a parallel call: each thread's idle time before its first chunk
 * and after its last, and each chunk's time, added to the call's record. */
static void split_idle(rt_pool *p)
{
	if (p->cur < 0)
		return;
	int64_t last = p->end_ns[0], late = 0, wait = 0;
	for (int t = 1; t < p->threads; t++)
		last = p->end_ns[t] > last ? p->end_ns[t] : last;
	for (int h = 0; h < p->threads; h++) {
		int64_t first = -1, end = -1;
		for (int t = 0; t < p->threads; t++)
			if (p->ran_by[t] == h) {
				first = first < 0 || p->start_ns[t] < first ? p->start_ns[t] : first;
				end = p->end_ns[t] > end ? p->end_ns[t] : end;
			}
		if (first < 0) {
			late += last - p->handed_ns;
			continue;
		}
		late += first - p->handed_ns;
		wait += last - end;
	}
	add_chunk_times(p, p->threads);
	p->calls[p->cur].late_seconds += 1e-9 * (double)late;
	p->calls[p->cur].wait_seconds += 1e-9 * (double)wait;
}

void rt_parallel(void *ctx, revc_abi_kernel *fn, void **args, int64_t n)
{
	rt_pool *p = ctx;
	if (!fn) {
		mark(p, (const char *)args, n);
		return;
	}
	p->cur_parallel = true;
	if (p->threads == 1) {
		run_chunk_serial(p, fn, args, n);
		if (p->profile && p->cur >= 0)
			add_chunk_times(p, 1);
		return;
	}
	p->fn = fn;
	p->args = args;
	p->n = n;
	if (p->profile) {
		p->handed_ns = now_ns();
		p->ran_by[0] = 0;
	}
	atomic_store_explicit(&p->pending, p->threads - 1, memory_order_relaxed);
	atomic_store_explicit(&p->next, 1, memory_order_release); /* opens the chunks to claims */
	atomic_fetch_add(&p->generation, 1); /* wakes the spinning workers */
	wake(p);
	run_chunk(p, 0);
	claim_chunks(p, 0);
	for (long i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++) {
		if (i < RT_POOL_SPIN)
			cpu_relax();
		else
			sched_yield();
	}
	if (p->profile)
		split_idle(p);
}
