/* test_rt_pool.c: the thread pool's dispatcher (runtime/pool.c): each
 * thread's chunk of [0, n) is called exactly once, with its fixed range;
 * and its profile splits a parallel call's idle time into the time before
 * a thread's first chunk and the time waiting for the slowest chunk, and
 * sums each chunk's time, here against a kernel whose second chunk sleeps
 * 30 ms longer than its first (the caller running both, or a worker the
 * second). */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "rt.h"
#include "runtime_suites.h"

#define MAX_T 4

typedef struct {
	atomic_int calls[MAX_T];
	int64_t lo[MAX_T], hi[MAX_T];
} seen;

static void record(void **args, int64_t lo, int64_t hi, int64_t tid)
{
	seen *s = args[0];
	atomic_fetch_add(&s->calls[tid], 1);
	s->lo[tid] = lo, s->hi[tid] = hi;
}

START_TEST(test_pool_chunks)
{
	for (int threads = 1; threads <= 3; threads++) {
		rt_pool *p = rt_pool_new(threads);
		for (int64_t n = 0; n <= 9; n++) {
			seen s = {0};
			void *args[1] = {&s};
			rt_parallel(p, record, args, n);
			for (int t = 0; t < threads; t++) {
				ck_assert_int_eq(atomic_load(&s.calls[t]), 1);
				ck_assert_int_eq(s.lo[t], n * t / threads);
				ck_assert_int_eq(s.hi[t], n * (t + 1) / threads);
			}
		}
		rt_pool_free(p);
	}
}
END_TEST

static void sleep_ms(int ms)
{
	struct timespec ts = {0, (long)ms * 1000000};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Chunk 1 sleeps 30 ms longer than chunk 0, which sleeps args[0] ms. */
static void lopsided(void **args, int64_t lo, int64_t hi, int64_t tid)
{
	(void)lo, (void)hi;
	int first = *(const int *)args[0];
	sleep_ms(tid == 1 ? first + 30 : first);
}

START_TEST(test_pool_idle_split)
{
	rt_pool *p = rt_pool_new(2);
	rt_pool_profile(p, true);
	/* Call 0: chunk 0 returns at once, so the caller usually runs chunk 1
	 * too and the worker none.  Call 1: chunk 0 sleeps 5 ms, long enough
	 * for the worker to take chunk 1, and the caller waits for it. */
	int first[2] = {0, 5};
	for (int k = 0; k < 2; k++) {
		void *args[1] = {&first[k]};
		rt_parallel(p, NULL, (void **)"lopsided", k); /* the mark before call k */
		rt_parallel(p, lopsided, args, 2);
	}
	rt_parallel(p, NULL, NULL, -1); /* the end of the step */
	rt_pool_profile(p, false);
	int n;
	const rt_pool_call *c = rt_pool_profile_calls(p, &n);
	ck_assert_int_eq(n, 2);
	for (int k = 0; k < 2; k++) {
		ck_assert(c[k].parallel);
		/* One thread slept 30 ms more than the other, which was idle at
		 * least as long: before its first chunk (or all along, having
		 * none) or after its last.  Waking, handing out and collecting
		 * take microseconds on an idle machine, and the rest of the idle
		 * time (the caller yields its core while it waits, and on a
		 * loaded one, under ASan, once took 3.6 ms to see the end). */
		double idle = 2 * c[k].seconds - c[k].busy_seconds;
		ck_assert_msg(idle >= 0.029, "call %d: idle %g s", k, idle);
		ck_assert_msg(c[k].late_seconds >= 0 && c[k].wait_seconds >= 0, "call %d: late %g s, wait %g s", k,
			c[k].late_seconds, c[k].wait_seconds);
		double split = c[k].late_seconds + c[k].wait_seconds;
		ck_assert_msg(split >= 0.029 && split <= idle + 1e-4, "call %d: late %g + wait %g s of %g s idle", k,
			c[k].late_seconds, c[k].wait_seconds, idle);
		/* Each chunk's own time, at least as long as it slept and the
		 * second at least 30 ms longer, together the threads' busy time. */
		const double *chunks = rt_pool_profile_chunks(p, k);
		ck_assert_msg(chunks[0] >= 0.001 * first[k] && chunks[1] - chunks[0] >= 0.029, "call %d: chunks %g and %g s",
			k, chunks[0], chunks[1]);
		ck_assert_msg(fabs(chunks[0] + chunks[1] - c[k].busy_seconds) <= 1e-6, "call %d: chunks %g + %g s, busy %g s",
			k, chunks[0], chunks[1], c[k].busy_seconds);
	}
	rt_pool_free(p);
}
END_TEST

Suite *rt_pool_suite(void)
{
	Suite *s = suite_create("runtime pool");
	TCase *tc = tcase_create("pool");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_pool_chunks);
	tcase_add_test(tc, test_pool_idle_split);
	suite_add_tcase(s, tc);
	return s;
}
