/* probe.c: how long a cache line takes to travel from one core to another
 * and back, measured by two threads passing a counter between them.
 *
 * On a shared virtual machine the same two vCPUs can sit on one L3 for a
 * while and on two the next (AMD's CCDs): a parallel step then waits for
 * every byte one thread hands the other, and runs a third slower with the
 * same code (docs/codegen.md, "Benchmarks").  The round trip tells those
 * states apart, so revc bench prints it beside its timings: about 30-130 ns
 * within one L3, 300-550 ns across two on the EPYC hosts we measured.
 *
 * The two threads are pinned to the first two CPUs the caller may run on
 * (and the caller's own set restored after): unpinned, the kernel now and
 * then put both on one CPU, where each pass of the counter waits for a
 * time slice.  The measure is the median of a few batches of round trips,
 * and gives up after PROBE_BUDGET_NS, so a partner that does not get its
 * CPU never holds the caller longer than that. */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "rt.h"

enum { BATCHES = 9, TRIPS = 500 };
#define PROBE_BUDGET_NS 50000000.0

typedef struct {
	_Alignas(64) atomic_long ball; /* odd: with the partner; even: back */
	_Alignas(64) atomic_bool quit;
} court;

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Returns every odd ball as the next even one until told to quit. */
static void *partner(void *arg)
{
	court *c = arg;
	while (!atomic_load_explicit(&c->quit, memory_order_relaxed)) {
		long b = atomic_load_explicit(&c->ball, memory_order_acquire);
		if (b & 1)
			atomic_store_explicit(&c->ball, b + 1, memory_order_release);
		else
			cpu_relax();
	}
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The first two CPUs in *own, or false. */
static bool two_cpus(const cpu_set_t *own, int cpu[2])
{
	int found = 0;
	for (int i = 0; i < CPU_SETSIZE && found < 2; i++)
		if (CPU_ISSET(i, own))
			cpu[found++] = i;
	return found == 2;
}

double rt_probe_round_trip_ns(void)
{
	cpu_set_t own, one;
	int cpu[2];
	if (pthread_getaffinity_np(pthread_self(), sizeof own, &own) != 0 || !two_cpus(&own, cpu))
		return -1;
	court *c = aligned_alloc(64, sizeof *c);
	if (!c)
		return -1;
	atomic_init(&c->ball, 0);
	atomic_init(&c->quit, false);
	pthread_attr_t attr;
	pthread_t t;
	CPU_ZERO(&one);
	CPU_SET(cpu[1], &one);
	bool started = pthread_attr_init(&attr) == 0;
	if (started) {
		started = pthread_attr_setaffinity_np(&attr, sizeof one, &one) == 0 &&
		          pthread_create(&t, &attr, partner, c) == 0;
		pthread_attr_destroy(&attr);
	}
	if (!started) {
		free(c);
		return -1;
	}
	CPU_ZERO(&one);
	CPU_SET(cpu[0], &one);
	pthread_setaffinity_np(pthread_self(), sizeof one, &one);
	double batch[BATCHES];
	int done = 0;
	double end = now_ns() + PROBE_BUDGET_NS;
	long b = 0;
	bool late = false;
	for (; done < BATCHES && !late; done++) {
		double t0 = now_ns();
		for (int trip = 0; trip < TRIPS && !late; trip++) {
			atomic_store_explicit(&c->ball, b + 1, memory_order_release);
			/* a clock read per 4096 spins: rare against a trip */
			for (long spin = 1; atomic_load_explicit(&c->ball, memory_order_acquire) != b + 2; spin++) {
				cpu_relax();
				if ((spin & 4095) == 0 && now_ns() > end) {
					late = true;
					break;
				}
			}
			b += 2;
		}
		if (late)
			break;
		batch[done] = (now_ns() - t0) / TRIPS;
	}
	atomic_store(&c->quit, true);
	pthread_join(t, NULL);
	pthread_setaffinity_np(pthread_self(), sizeof own, &own);
	free(c);
	if (done == 0)
		return -1;
	qsort(batch, (size_t)done, sizeof batch[0], by_value);
	return batch[done / 2];
}
