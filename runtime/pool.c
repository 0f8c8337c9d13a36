/* pool.c: the thread pool native kernels are divided among.
 *
 * rt_parallel(pool, fn, args, n) splits [0, n) into one contiguous chunk
 * per thread, thread t getting [n·t/T, n·(t+1)/T), and runs fn on every
 * thread, even one whose chunk is empty, so that kernels can initialise
 * per-thread workspace unconditionally.  The calling thread is thread 0;
 * the others wait on a condition variable between calls.  Chunks depend
 * only on n and T, so results never depend on timing. */
#include <pthread.h>
#include <stdlib.h>

#include "rt.h"

struct rt_pool {
	int threads;
	pthread_t *tid;
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	/* the current job */
	rt_kernel_abi fn;
	void **args;
	int64_t n;
	unsigned long generation;
	int pending;
	bool quit;
};

typedef struct {
	rt_pool *p;
	int t;
} worker_arg;

static void run_chunk(rt_pool *p, int t)
{
	int64_t lo = p->n * t / p->threads, hi = p->n * (t + 1) / p->threads;
	p->fn(p->args, lo, hi, t);
}

static void *worker(void *arg)
{
	worker_arg *w = arg;
	rt_pool *p = w->p;
	int t = w->t;
	free(w);
	unsigned long seen = 0;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->quit && p->generation == seen)
			pthread_cond_wait(&p->go, &p->mu);
		if (p->quit)
			break;
		seen = p->generation;
		pthread_mutex_unlock(&p->mu);
		run_chunk(p, t);
		pthread_mutex_lock(&p->mu);
		if (--p->pending == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
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
	pthread_cond_init(&p->done, NULL);
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

void rt_pool_free(rt_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->quit = true;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	for (int t = 1; t < p->threads; t++)
		pthread_join(p->tid[t], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->go);
	pthread_cond_destroy(&p->done);
	free(p->tid);
	free(p);
}

int rt_pool_threads(const rt_pool *p)
{
	return p->threads;
}

void rt_parallel(void *ctx, rt_kernel_abi fn, void **args, int64_t n)
{
	rt_pool *p = ctx;
	if (p->threads == 1) {
		fn(args, 0, n, 0);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->args = args;
	p->n = n;
	p->pending = p->threads - 1;
	p->generation++;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	run_chunk(p, 0);
	pthread_mutex_lock(&p->mu);
	while (p->pending > 0)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
