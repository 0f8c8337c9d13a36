/* test_rt_batch.c: what training reads from a dataset: the order of each
 * epoch, synthetic data, and batches in f32 and f64 (runtime/data.c). */
#include <stdlib.h>
#include <string.h>

#include "rt.h"
#include "runtime_suites.h"

static bool is_empty(const rt_dataset *d)
{
	return d->n == 0 && !d->pixels && !d->labels && d->c == 0 && d->classes == 0;
}


START_TEST(test_epoch_order)
{
	/* Frozen values, like the generator's. */
	static const int64_t e0[10] = {5, 3, 1, 7, 9, 8, 2, 0, 6, 4};
	static const int64_t e1[10] = {0, 6, 2, 5, 4, 9, 1, 3, 8, 7};
	int64_t p[10];
	rt_data_epoch_order(10, 42, 0, p);
	ck_assert_mem_eq(p, e0, sizeof p);
	rt_data_epoch_order(10, 42, 1, p);
	ck_assert_mem_eq(p, e1, sizeof p);

	enum { N = 60000 };
	int64_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
	char *seen = calloc(N, 1);
	rt_data_epoch_order(N, 7, 3, a);
	for (int i = 0; i < N; i++) {
		ck_assert(a[i] >= 0 && a[i] < N && !seen[a[i]]);
		seen[a[i]] = 1;
	}
	rt_data_epoch_order(N, 7, 3, b);
	ck_assert_mem_eq(a, b, N * sizeof *a);
	rt_data_epoch_order(N, 7, 4, b);
	ck_assert(memcmp(a, b, N * sizeof *a) != 0);
	rt_data_epoch_order(N, 8, 3, b);
	ck_assert(memcmp(a, b, N * sizeof *a) != 0);
	/* Degenerate sizes. */
	rt_data_epoch_order(1, 7, 0, a);
	ck_assert_int_eq(a[0], 0);
	rt_data_epoch_order(0, 7, 0, a);
	free(a);
	free(b);
	free(seen);
}
END_TEST

/* Distance between x and x shifted by (sy, sx), over the overlap. */
static long shift_distance(const uint8_t *x, int h, int w, int sy, int sx)
{
	long sum = 0;
	for (int y = 0; y < h; y++)
		for (int i = 0; i < w; i++) {
			int y2 = y + sy, i2 = i + sx;
			if (y2 >= 0 && y2 < h && i2 >= 0 && i2 < w)
				sum += labs((long)x[y * w + i] - x[y2 * w + i2]);
		}
	return sum;
}

START_TEST(test_synthetic)
{
	rt_dataset a, b;
	rt_err e;
	ck_assert(rt_data_synthetic(500, 1, 28, 28, 10, 5, NULL, &a, &e));
	ck_assert(rt_data_synthetic(500, 1, 28, 28, 10, 5, NULL, &b, &e));
	ck_assert_int_eq(a.n, 500);
	ck_assert_int_eq(a.c * a.h * a.w, 784);
	ck_assert_int_eq(a.classes, 10);
	ck_assert_mem_eq(a.pixels, b.pixels, 500 * 784);
	ck_assert_mem_eq(a.labels, b.labels, 500 * sizeof *a.labels);
	rt_dataset_free(&b);
	ck_assert(rt_data_synthetic(500, 1, 28, 28, 10, 6, NULL, &b, &e));
	ck_assert(memcmp(a.pixels, b.pixels, 500 * 784) != 0);
	rt_dataset_free(&b);

	/* Learnable: the label can be read off the pixels.  Class k's stripes
	 * run along direction k % 4 with period 3 + k/4, so its image is
	 * (nearly) unchanged by a shift across the stripes' normal and by one
	 * period along it; the class minimising both distances is the label. */
	static const int along[4][2] = {{1, 0}, {0, 1}, {1, 0}, {1, 0}};
	static const int across[4][2] = {{0, 1}, {1, 0}, {1, -1}, {1, 1}};
	int count[10] = {0}, right = 0;
	for (int64_t i = 0; i < a.n; i++) {
		ck_assert(a.labels[i] >= 0 && a.labels[i] < 10);
		count[a.labels[i]]++;
		const uint8_t *x = a.pixels + i * 784;
		int best = -1;
		long best_d = 0;
		for (int k = 0; k < 10; k++) {
			int p = 3 + k / 4;
			long d = shift_distance(x, 28, 28, across[k % 4][0], across[k % 4][1])
				+ shift_distance(x, 28, 28, p * along[k % 4][0], p * along[k % 4][1]);
			if (best < 0 || d < best_d) {
				best = k;
				best_d = d;
			}
		}
		right += best == a.labels[i];
	}
	for (int k = 0; k < 10; k++)
		ck_assert_int_gt(count[k], 20);
	ck_assert_int_ge(right, 495);
	rt_dataset_free(&a);

	/* Several channels, odd sizes. */
	ck_assert(rt_data_synthetic(3, 3, 5, 7, 2, 1, NULL, &a, &e));
	ck_assert_int_eq(a.c, 3);
	ck_assert(a.labels[0] >= 0 && a.labels[0] < 2);
	rt_dataset_free(&a);
}
END_TEST

START_TEST(test_batch)
{
	rt_dataset d;
	rt_err e;
	ck_assert(rt_dataset_alloc(&d, 3, 2, 1, 2, 4, "t", NULL, &e));
	for (int i = 0; i < 12; i++)
		d.pixels[i] = (uint8_t)(i == 11 ? 255 : i * 20);
	for (int i = 0; i < 3; i++)
		d.labels[i] = 3 - i;
	int64_t idx[4] = {2, 0, 2, 1};
	float x[16];
	double x64[16];
	int32_t y[4];
	rt_data_batch_f32(&d, idx, 4, x, y);
	ck_assert_int_eq(y[0], 1);
	ck_assert_int_eq(y[1], 3);
	ck_assert_int_eq(y[3], 2);
	ck_assert(x[0] == 160.0f / 255.0f && x[3] == 1.0f && x[4] == 0.0f && x[15] == 140.0f / 255.0f);
	rt_data_batch_f64(&d, idx, 4, x64, y);
	for (int i = 0; i < 16; i++)
		ck_assert(x64[i] == d.pixels[idx[i / 4] * 4 + i % 4] / 255.0);
	rt_dataset_free(&d);
	ck_assert(is_empty(&d));
	/* Allocation refuses what the loaders would refuse. */
	ck_assert(!rt_dataset_alloc(&d, (int64_t)1 << 31, 3, 64, 64, 10, "big", NULL, &e));
	ck_assert(is_empty(&d));
	ck_assert_str_eq(e.msg, "big: 2147483648 images of 3x64x64 take more than the 2^34 bytes a dataset may hold");
	ck_assert(!rt_dataset_alloc(&d, (int64_t)1 << 33, 1, 1, 1, 10, "labels", NULL, &e));
	ck_assert(is_empty(&d));
	ck_assert(!rt_dataset_alloc(&d, 1, 1, 1 << 20, 1 << 12, 10, "wide", NULL, &e));
	ck_assert_str_eq(e.msg, "wide: absurd image size 1x1048576x4096");
	/* A limit below zero (nothing left of a budget) admits nothing. */
	rt_data_limit spent = {-5, NULL};
	ck_assert(!rt_dataset_alloc(&d, 1, 1, 1, 1, 10, "tiny", &spent, &e));
	ck_assert_str_eq(e.msg, "tiny: 1 images of 1x1x1 take 5 bytes with their labels, more than the -5 bytes allowed");
	ck_assert(is_empty(&d));
	ck_assert(!rt_dataset_alloc(&d, 0, 1, 1, 1, 10, "none", NULL, &e));
	ck_assert_str_eq(e.msg, "none: holds no examples");
	ck_assert(!rt_dataset_alloc(&d, 1, 1, 1, 1, 0, "classless", NULL, &e));
	ck_assert(is_empty(&d));
}
END_TEST
Suite *rt_batch_suite(void)
{
	Suite *s = suite_create("rt_batch");
	TCase *tc = tcase_create("order");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_epoch_order);
	tcase_add_test(tc, test_synthetic);
	tcase_add_test(tc, test_batch);
	suite_add_tcase(s, tc);
	return s;
}
