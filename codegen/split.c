/* split.c: images per parallel index, chosen so that the dispatcher's
 * chunks give the threads the same number of images.
 *
 * The dispatcher (runtime/pool.c) cuts an extent of E indices into T
 * contiguous chunks, chunk t being [E·t/T, E·(t+1)/T), and a kernel that
 * takes `per` images an index gives its last index what is left.  So n
 * images at `per` an index split evenly only for some `per`: fashion's 50
 * images, 4 an index, are 13 indices, 6 of them (24 images) for one thread
 * and 7 (26) for the other, which waits; 5 an index are 10 indices, 25
 * images each.  A kernel chooses the images per index it wants (the
 * columns its products need, what fits in cache) and cg_split_images
 * moves it, within bounds the kernel gives, to the nearest count whose
 * slowest chunk has the fewest images.
 *
 * The split is balanced for CG_SPLIT_THREADS threads whatever the step's
 * thread count: a kernel's per-index results (conv2d_dw's partial sums)
 * must not depend on the thread count, so its images per index must not
 * either.  Two is revc's default and the host's core count; one thread
 * runs any split, and an even split of the indices is an even split for
 * four threads too when their count is a multiple of four.
 *
 * Some counts split no n evenly: 50 images at 2 an index are 25 indices,
 * at 3 17, and more would not fit the kernel's cache.  Winograd's kernels
 * therefore give index i the images [i·n/E, (i+1)·n/E) of an extent E
 * that is a multiple of the threads (cg_split_extent): 26 indices of 1 or
 * 2 images, the first 13 of them 25 images.  A chunk [E·t/T, E·(t+1)/T)
 * then starts at image n·t/T. */
#include "internal.h"

int64_t cg_split_most(int64_t n, int64_t per, int threads)
{
	if (per < 1 || threads < 1)
		return n;
	int64_t idx = (n + per - 1) / per, most = 0;
	for (int t = 0; t < threads; t++) {
		int64_t lo = idx * t / threads * per, hi = idx * (t + 1) / threads * per;
		lo = lo < n ? lo : n;
		hi = hi < n ? hi : n;
		most = hi - lo > most ? hi - lo : most;
	}
	return most;
}

int64_t cg_split_images(int64_t n, int64_t want, int64_t lo, int64_t hi)
{
	hi = hi < 1 ? 1 : hi;
	lo = lo < 1 ? 1 : lo > hi ? hi : lo;
	want = want < lo ? lo : want > hi ? hi : want;
	int64_t best = want, most = cg_split_most(n, want, CG_SPLIT_THREADS);
	for (int64_t d = 1; want - d >= lo || want + d <= hi; d++) {
		/* the larger first: at the same distance it wins the tie */
		int64_t cand[2] = {want + d, want - d};
		for (int c = 0; c < 2; c++) {
			if (cand[c] < lo || cand[c] > hi)
				continue;
			int64_t m = cg_split_most(n, cand[c], CG_SPLIT_THREADS);
			if (m < most)
				best = cand[c], most = m;
		}
	}
	return best;
}

int64_t cg_split_extent(int64_t n, int64_t per)
{
	per = per < 1 ? 1 : per;
	int64_t e = (n + per - 1) / per;
	if (e % CG_SPLIT_THREADS != 0 && e < n)
		e += CG_SPLIT_THREADS - e % CG_SPLIT_THREADS;
	e = e < n ? e : n;
	return e < 1 ? 1 : e;
}

static LLVMValueRef first_of(cg_kb *k, LLVMValueRef i, int64_t n, int64_t extent)
{
	return LLVMBuildUDiv(k->b, cg_imul(k, i, cg_i64(k, n)), cg_i64(k, extent), "");
}

LLVMValueRef cg_split_first(cg_kb *k, LLVMValueRef i, int64_t n, int64_t extent, LLVMValueRef *count)
{
	LLVMValueRef first = first_of(k, i, n, extent);
	*count = cg_isub(k, first_of(k, cg_iadd(k, i, cg_i64(k, 1)), n, extent), first);
	return first;
}
