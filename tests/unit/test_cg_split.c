/* test_cg_split.c: images per parallel index (codegen/split.c), so that
 * the dispatcher's two chunks hold the same images.
 *
 * cg_split_images against a brute-force search over its bounds, on every
 * batch up to 130; cg_split_extent's indices on every batch up to 130;
 * and the extents the convolutions of fashion (batch 50) and revnet-38
 * (batch 100) get, which gave one thread 26 images and the other 24 (or
 * 31 and 19, or 27 and 23) before the split was chosen. */
#include <check.h>
#include <stdlib.h>

#include "codegen_suites.h"
#include "internal.h" /* codegen's: cg_split_images, the convolutions' extents */

static int64_t dist(int64_t a, int64_t b)
{
	return a > b ? a - b : b - a;
}

/* The choice is in bounds, has the fewest images in its fullest chunk of
 * any count in bounds, and no count as good is nearer want (or as near and
 * larger); a balanced want is kept. */
START_TEST(test_split_search)
{
	for (int64_t n = 1; n <= 130; n++)
		for (int64_t want = 1; want <= 24; want++)
			for (int64_t lo = 1; lo <= want; lo += 3)
				for (int64_t hi = want; hi <= want + 30; hi += 7) {
					/* Check's asserts are called only on a failure: a
					 * passing one records its place through a pipe, and
					 * millions of them took over Check's 4 s under ASan */
					int64_t u = cg_split_images(n, want, lo, hi), m = cg_split_most(n, u, 2);
					if (u < lo || u > hi)
						ck_abort_msg("n %lld want %lld: %lld outside [%lld, %lld]", (long long)n,
							(long long)want, (long long)u, (long long)lo, (long long)hi);
					for (int64_t v = lo; v <= hi; v++) {
						int64_t mv = cg_split_most(n, v, 2);
						if (mv < m)
							ck_abort_msg("n %lld want %lld: %lld gives %lld images, %lld gives %lld",
								(long long)n, (long long)want, (long long)u, (long long)m, (long long)v,
								(long long)mv);
						if (mv == m && v != u &&
						    !(dist(v, want) > dist(u, want) || (dist(v, want) == dist(u, want) && v < u)))
							ck_abort_msg("n %lld want %lld: %lld as few images as %lld and nearer want",
								(long long)n, (long long)want, (long long)v, (long long)u);
					}
					if (cg_split_most(n, want, 2) == (n + 1) / 2 && u != want)
						ck_abort_msg("n %lld: a balanced want %lld became %lld", (long long)n, (long long)want,
							(long long)u);
				}
}
END_TEST

/* Index i's images [i·n/E, (i+1)·n/E), as cg_split_first computes them. */
static int64_t first_image(int64_t i, int64_t n, int64_t extent)
{
	return i * n / extent;
}

/* The images of the fuller of the two chunks of `extent` indices. */
static int64_t fuller_chunk(int64_t n, int64_t extent)
{
	int64_t mid = first_image(extent / 2, n, extent);
	return mid > n - mid ? mid : n - mid;
}

/* Every index holds 1 to `per` images; the two chunks differ by at most
 * one image; and no extent with fewer indices has both. */
START_TEST(test_split_extent)
{
	for (int64_t n = 1; n <= 130; n++)
		for (int64_t per = 1; per <= n + 2; per++) {
			int64_t e = cg_split_extent(n, per);
			for (int64_t i = 0; i < e; i++) {
				int64_t c = first_image(i + 1, n, e) - first_image(i, n, e);
				if (c < 1 || c > per)
					ck_abort_msg("n %lld per %lld: index %lld of %lld holds %lld images", (long long)n,
						(long long)per, (long long)i, (long long)e, (long long)c);
			}
			if (fuller_chunk(n, e) != (n + 1) / 2)
				ck_abort_msg("n %lld per %lld: %lld indices give a chunk %lld images", (long long)n,
					(long long)per, (long long)e, (long long)fuller_chunk(n, e));
			if (e > 1 && (e - 1) * per >= n && fuller_chunk(n, e - 1) == (n + 1) / 2)
				ck_abort_msg("n %lld per %lld: %lld indices would do, not %lld", (long long)n, (long long)per,
					(long long)e - 1, (long long)e);
		}
	/* fashion's 28x28 F(4x4) layers: 2 images an index were 25 indices
	 * (24 images against 26), and 3 for the filter gradient 17 (24
	 * against 27, as the old split gave them) */
	ck_assert_int_eq(cg_split_extent(50, 2), 26);
	ck_assert_int_eq(cg_split_extent(50, 3), 18);
	ck_assert_int_eq(cg_split_extent(50, 5), 10);
	ck_assert_int_eq(cg_split_extent(1, 4), 1);
	ck_assert_int_eq(cg_split_extent(3, 1), 3);
}
END_TEST

/* The fullest chunk: 50 images 4 to an index are 13 indices, 6 and 7 of
 * them, the second holding 26 images; 19 to an index, 19 and 31. */
START_TEST(test_split_most)
{
	ck_assert_int_eq(cg_split_most(50, 4, 2), 26);
	ck_assert_int_eq(cg_split_most(50, 5, 2), 25);
	ck_assert_int_eq(cg_split_most(50, 19, 2), 31);
	ck_assert_int_eq(cg_split_most(50, 1, 2), 25);
	ck_assert_int_eq(cg_split_most(100, 4, 2), 52);
	ck_assert_int_eq(cg_split_most(7, 3, 2), 4);
	ck_assert_int_eq(cg_split_most(50, 50, 2), 50);
	ck_assert_int_eq(cg_split_most(50, 4, 1), 50);
}
END_TEST

/* The presets' implicit conv2d_dw: n images at `per` to an index in
 * `extent` indices, the two chunks holding the same images. */
static void even(const char *what, int64_t n, int64_t extent)
{
	int64_t per = (n + extent - 1) / extent;
	ck_assert_msg((n + per - 1) / per == extent, "%s: %lld indices are not of equal images", what, (long long)extent);
	ck_assert_msg(cg_split_most(n, per, 2) == (n + 1) / 2, "%s: %lld indices of %lld images: a chunk of %lld", what,
		(long long)extent, (long long)per, (long long)cg_split_most(n, per, 2));
}

/* The presets' Winograd convolutions, whose index i holds the images
 * [i·n/E, (i+1)·n/E) */
static void even_winograd(const char *what, int64_t n, int64_t extent)
{
	ck_assert_msg(fuller_chunk(n, extent) == (n + 1) / 2, "%s: %lld indices: a chunk of %lld images", what,
		(long long)extent, (long long)fuller_chunk(n, extent));
}

START_TEST(test_split_presets)
{
	/* n, c, h, w, o, kh, kw, ho, wo, s, pt, pb, pl, pr, op */
	static const ir_conv_geom wino[] = {
		{50, 8, 28, 28, 8, 3, 3, 28, 28, 1, 1, 1, 1, 1, IR_OP_CONV2D},
		{50, 16, 14, 14, 16, 3, 3, 14, 14, 1, 1, 1, 1, 1, IR_OP_CONV2D},
		{50, 32, 7, 7, 32, 3, 3, 7, 7, 1, 1, 1, 1, 1, IR_OP_CONV2D},
		{100, 8, 32, 32, 8, 3, 3, 32, 32, 1, 1, 1, 1, 1, IR_OP_CONV2D},
		{100, 16, 16, 16, 16, 3, 3, 16, 16, 1, 1, 1, 1, 1, IR_OP_CONV2D},
		{100, 32, 8, 8, 32, 3, 3, 8, 8, 1, 1, 1, 1, 1, IR_OP_CONV2D},
	};
	static const ir_op ops[] = {IR_OP_CONV2D, IR_OP_CONV2D_DX, IR_OP_CONV2D_DW};
	static const char *tiles[] = {"winograd2", "winograd4"};
	for (int f = 0; f < 2; f++) {
		setenv("REVC_CONV", tiles[f], 1);
		for (int i = 0; i < (int)(sizeof wino / sizeof wino[0]); i++)
			for (int k = 0; k < 3; k++) {
				ir_conv_geom g = wino[i];
				g.op = ops[k];
				ck_assert(cg_conv_winograd(&g, IR_F32));
				even_winograd(ir_op_name(g.op), g.n, cg_conv_winograd_extent(&g, IR_F32));
			}
	}
	/* fashion's 7x7 and 14x14 layers by F(2x2): 5 images to an index, not
	 * 4 and 2 */
	setenv("REVC_CONV", "winograd2", 1);
	ck_assert_int_eq(cg_conv_winograd_extent(&wino[2], IR_F32), 10);
	ck_assert_int_eq(cg_conv_winograd_extent(&wino[1], IR_F32), 10);
	/* its 28x28 layer by F(4x4): 2 images to an index, 26 indices (25
	 * were 24 images against 26) */
	setenv("REVC_CONV", "winograd4", 1);
	ck_assert_int_eq(cg_conv_winograd_extent(&wino[0], IR_F32), 26);
	unsetenv("REVC_CONV");
	/* conv2d_dw without Winograd (k_conv_implicit.c): fashion's 28x28
	 * layer, its stem, and its stride-2 gradients */
	static const ir_conv_geom dw[] = {
		{50, 8, 28, 28, 8, 3, 3, 28, 28, 1, 1, 1, 1, 1, IR_OP_CONV2D_DW},
		{50, 1, 28, 28, 16, 3, 3, 28, 28, 1, 1, 1, 1, 1, IR_OP_CONV2D_DW},
		{50, 16, 14, 14, 32, 3, 3, 7, 7, 2, 0, 1, 0, 1, IR_OP_CONV2D_DW},
		{50, 8, 28, 28, 16, 3, 3, 14, 14, 2, 0, 1, 0, 1, IR_OP_CONV2D_DW},
		{100, 8, 32, 32, 8, 3, 3, 32, 32, 1, 1, 1, 1, 1, IR_OP_CONV2D_DW},
	};
	for (int i = 0; i < (int)(sizeof dw / sizeof dw[0]); i++) {
		ck_assert(cg_conv_implicit(&dw[i]));
		int64_t t = cg_conv_implicit_tile(&dw[i]);
		even("conv2d_dw", dw[i].n, (dw[i].n + t - 1) / t);
	}
}
END_TEST

Suite *cg_split_suite(void)
{
	Suite *s = suite_create("codegen split");
	TCase *tc = tcase_create("split");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_split_search);
	tcase_add_test(tc, test_split_most);
	tcase_add_test(tc, test_split_extent);
	tcase_add_test(tc, test_split_presets);
	suite_add_tcase(s, tc);
	return s;
}
