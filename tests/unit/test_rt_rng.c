/* test_rt_rng.c: the random number generator.  Its output is frozen (seeds in
 * checkpoints must reproduce the same streams forever), so the expected
 * values below were computed once, by an independent Python transcription
 * of splitmix64 and xoshiro256**, and must never be regenerated. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"
#include "runtime_suites.h"

/* Blackman and Vigna's reference outputs for the state {1, 2, 3, 4}. */
START_TEST(test_xoshiro_reference)
{
	static const uint64_t want[] = {
		UINT64_C(11520), UINT64_C(0), UINT64_C(1509978240), UINT64_C(1215971899390074240),
		UINT64_C(1216172134540287360), UINT64_C(607988272756665600),
		UINT64_C(16172922978634559625), UINT64_C(8476171486693032832),
		UINT64_C(10595114339597558777), UINT64_C(2904607092377533576),
	};
	rt_rng r = {{1, 2, 3, 4}};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		ck_assert_uint_eq(rt_rng_next(&r), want[i]);
}
END_TEST

static const struct {
	uint64_t seed, out[3];
} seeded[] = {
	{0, {UINT64_C(0x99ec5f36cb75f2b4), UINT64_C(0xbf6e1f784956452a), UINT64_C(0x1a5f849d4933e6e0)}},
	/* Also what other splitmix64-seeded xoshiro256** implementations give. */
	{42, {UINT64_C(1546998764402558742), UINT64_C(6990951692964543102),
		UINT64_C(12544586762248559009)}},
	{12345, {UINT64_C(0xbe6a36374160d49b), UINT64_C(0x214aaa0637a688c6),
		UINT64_C(0xf69d16de9954d388)}},
};

START_TEST(test_seeded_values)
{
	rt_rng r;
	rt_rng_seed(&r, seeded[_i].seed);
	for (int k = 0; k < 3; k++)
		ck_assert_uint_eq(rt_rng_next(&r), seeded[_i].out[k]);
}
END_TEST

START_TEST(test_uniform)
{
	rt_rng r;
	rt_rng_seed(&r, 7);
	ck_assert(rt_rng_uniform(&r) == 6310231968177966.0 * 0x1.0p-53);
	ck_assert(rt_rng_uniform(&r) == 2510767866374405.0 * 0x1.0p-53);
	double sum = 0;
	for (int i = 0; i < 100000; i++) {
		double u = rt_rng_uniform(&r);
		ck_assert(u >= 0 && u < 1);
		sum += u;
	}
	ck_assert(fabs(sum / 100000 - 0.5) < 0.005);
}
END_TEST

START_TEST(test_below_values)
{
	static const uint64_t ten[] = {4, 4, 8, 4, 4, 1, 6, 6}, three[] = {1, 1, 2, 1};
	rt_rng r;
	rt_rng_seed(&r, 7);
	for (int i = 0; i < 8; i++)
		ck_assert_uint_eq(rt_rng_below(&r, 10), ten[i]);
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(rt_rng_below(&r, 3), three[i]);
	/* Nearly half of all words are rejected for this bound. */
	ck_assert_uint_eq(rt_rng_below(&r, (UINT64_C(1) << 63) | 1), UINT64_C(8097486056669415888));
	ck_assert_uint_eq(rt_rng_below(&r, UINT64_MAX), UINT64_C(16248828569861257751));
	for (int i = 0; i < 100; i++)
		ck_assert_uint_eq(rt_rng_below(&r, 1), 0);
}
END_TEST

/* A chi-square test with 5 degrees of freedom; 20.5 is its 0.1% quantile,
 * and the fixed seed makes the outcome deterministic anyway. */
START_TEST(test_below_uniform)
{
	rt_rng r;
	rt_rng_seed(&r, 99);
	long count[6] = {0};
	const long draws = 60000;
	for (long i = 0; i < draws; i++) {
		uint64_t v = rt_rng_below(&r, 6);
		ck_assert_uint_lt(v, 6);
		count[v]++;
	}
	double chi2 = 0;
	for (int k = 0; k < 6; k++)
		chi2 += (count[k] - draws / 6.0) * (count[k] - draws / 6.0) / (draws / 6.0);
	ck_assert_msg(chi2 < 20.5, "chi2 = %g", chi2);
}
END_TEST

START_TEST(test_derive)
{
	rt_rng a, b;
	rt_rng_derive(&a, 1, 2, 3);
	ck_assert_uint_eq(rt_rng_next(&a), UINT64_C(0x294537e67c72984a));
	ck_assert_uint_eq(rt_rng_next(&a), UINT64_C(0x6e573f79d7c22da3));
	rt_rng_derive(&a, 42, RT_RNG_EPOCH, 0);
	ck_assert_uint_eq(rt_rng_next(&a), UINT64_C(0x330848183aa88280));
	/* Changing any one word, or swapping two, gives another stream. */
	static const uint64_t other[][3] = {{1, 2, 3}, {0, 2, 3}, {1, 3, 3}, {1, 2, 4}, {2, 1, 3},
		{1, 3, 2}, {3, 2, 1}};
	uint64_t first[7];
	for (int i = 0; i < 7; i++) {
		rt_rng_derive(&a, other[i][0], other[i][1], other[i][2]);
		rt_rng_derive(&b, other[i][0], other[i][1], other[i][2]);
		first[i] = rt_rng_next(&a);
		ck_assert_uint_eq(first[i], rt_rng_next(&b));
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(first[i], first[j]);
	}
	/* A derived stream is not the plain seed's stream. */
	rt_rng_seed(&b, 1);
	rt_rng_derive(&a, 1, 0, 0);
	ck_assert_uint_ne(rt_rng_next(&a), rt_rng_next(&b));
}
END_TEST

/* An empty range is a caller's bug: it aborts rather than return anything. */
START_TEST(test_below_zero_aborts)
{
	rt_rng r;
	rt_rng_seed(&r, 1);
	rt_rng_below(&r, 0);
}
END_TEST

Suite *rt_rng_suite(void)
{
	Suite *s = suite_create("rt_rng");
	TCase *tc = tcase_create("rng");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_xoshiro_reference);
	tcase_add_loop_test(tc, test_seeded_values, 0, (int)(sizeof seeded / sizeof *seeded));
	tcase_add_test(tc, test_uniform);
	tcase_add_test(tc, test_below_values);
	tcase_add_test(tc, test_below_uniform);
	tcase_add_test(tc, test_derive);
	/* Without fork (CK_FORK=no, as under valgrind) the abort would end the
	 * whole run instead of this test. */
	const char *fork = getenv("CK_FORK");
	if (!fork || strcmp(fork, "no") != 0)
		tcase_add_test_raise_signal(tc, test_below_zero_aborts, SIGABRT);
	suite_add_tcase(s, tc);
	return s;
}
