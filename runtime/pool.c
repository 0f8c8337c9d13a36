/* pool.c: the thread pool native kernels are divided among.
 *
 * rt_parallel(pool, fn, args, n) splits [0, n) into one contiguous chunk
 * per thread, thread t getting [n·t/T, n·(t+1)/T), and runs fn on every
 * thread, even one whose chunk is empty, so that kernels can initialise
 * per-thread workspace unconditionally.  The calling thread is thread 0.
 * Chunks depend only on n and T, so results never depend on timing.
 *
 * A step makes hundreds of calls of a millisecond or less, so waking a
 * sleeping thread for each (tens of microseconds on a virtual machine)
 * would cost a few percent of the step.  The workers therefore spin on the
 * job counter for a while (RT_POOL_SPIN checks, about a millisecond)
 * before they sleep on a condition variable; the caller wakes sleepers
 * only when there are some.  The caller spins on the count of workers
 * still running, yielding the core after a while.
 *
 * No lost wake-up: a worker going to sleep counts itself in `sleepers`
 * and then reads `generation`, both under the mutex; the caller bumps
 * `generation` and then reads `sleepers` (all sequentially consistent).
 * Either the worker sees the new job, or the caller sees the sleeper and
 * broadcasts under the mutex, which it cannot take before the worker
 * waits. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "rt.h"

#define RT_POOL_SPIN 20000

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
	atomic_int pending;  /* workers still running the current job */
	atomic_int sleepers; /* workers waiting on go */
	atomic_bool quit;
};

typedef struct {
	rt_pool *p;
	int t;
} worker_arg;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void run_chunk(rt_pool *p, int t)
{
	int64_t lo = p->n * t / p->threads, hi = p->n * (t + 1) / p->threads;
	p->fn(p->args, lo, hi, t);
}

/* Waits for a generation other than seen (or quit) and returns it. */
static unsigned long next_job(rt_pool *p, unsigned long seen)
{
	for (int i = 0; i < RT_POOL_SPIN; i++) {
		unsigned long g = atomic_load_explicit(&p->generation, memory_order_acquire);
		if (g != seen || atomic_load(&p->quit))
			return g;
		cpu_relax();
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
	worker_arg *w = arg;
	rt_pool *p = w->p;
	int t = w->t;
	free(w);
	unsigned long seen = 0;
	for (;;) {
		seen = next_job(p, seen);
		if (atomic_load(&p->quit))
			break;
		run_chunk(p, t);
		atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
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
	if (!p->tid)
		IR_DIE("out of memory");
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->go, NULL);
	atomic_init(&p->generation, 0);
	atomic_init(&p->pending, 0);
	atomic_init(&p->sleepers, 0);
	atomic_init(&p->quit, false);
	for (int t = 1; t < p->threads; t++) {
		worker_arg *w = malloc(sizeof *w);
		if (!w)
			IR_DIE("out of memory");
		*w = (worker_arg){p, t};
		if (pthread_create(&p->tid[t], NULL, worker, w) != 0)
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
	free(p->tid);
	free(p);
}

void rt_parallel(void *ctx, revc_abi_kernel *fn, void **args, int64_t n)
{
	rt_pool *p = ctx;
	if (p->threads == 1) {
		fn(args, 0, n, 0);
		return;
	}
	p->fn = fn;
	p->args = args;
	p->n = n;
	atomic_store_explicit(&p->pending, p->threads - 1, memory_order_relaxed);
	atomic_fetch_add(&p->generation, 1); /* publishes the job */
	wake(p);
	run_chunk(p, 0);
	for (long i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++) {
		if (i < RT_POOL_SPIN)
			cpu_relax();
		else
			sched_yield();
	}
}
