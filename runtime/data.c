/* data.c: what every dataset shares: checked allocation against the
 * limits, synthetic data, epoch shuffles and batch gathering.  The file
 * formats live in data_idx.c and data_cifar.c, the streams they read
 * through in data_in.c. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

_Static_assert((RT_DATA_MAX_BYTES & (RT_DATA_MAX_BYTES - 1)) == 0, "messages say RT_DATA_MAX_BYTES as 2^k");

bool rt_dataset_fits(int64_t n, int64_t c, int64_t h, int64_t w, const rt_data_limit *lim,
	const char *name, int64_t *bytes, rt_err *e)
{
	*bytes = 0;
	if (n < 1)
		return rt_errorf(e, "%s: holds no examples", name);
	if (c < 1 || h < 1 || w < 1)
		return rt_errorf(e, "%s: absurd shape %lldx%lldx%lld", name, (long long)c, (long long)h,
			(long long)w);
	int64_t image, b;
	if (!ir_size_mul(c, h, &image) || !ir_size_mul(image, w, &image) || image > INT_MAX)
		return rt_errorf(e, "%s: absurd image size %lldx%lldx%lld", name, (long long)c,
			(long long)h, (long long)w);
	if (!ir_size_mul(n, image + (int64_t)sizeof(int32_t), &b) || b > RT_DATA_MAX_BYTES)
		return rt_errorf(e, "%s: %lld images of %lldx%lldx%lld take more than the 2^%d bytes a "
			"dataset may hold", name, (long long)n, (long long)c, (long long)h, (long long)w,
			__builtin_ctzll((unsigned long long)RT_DATA_MAX_BYTES));
	if (lim && b > lim->bytes) {
		if (lim->what)
			return rt_errorf(e, "%s: %lld images of %lldx%lldx%lld take %lld bytes with their "
				"labels, more than %s", name, (long long)n, (long long)c, (long long)h,
				(long long)w, (long long)b, lim->what);
		return rt_errorf(e, "%s: %lld images of %lldx%lldx%lld take %lld bytes with their labels, "
			"more than the %lld bytes allowed", name, (long long)n, (long long)c, (long long)h,
			(long long)w, (long long)b, (long long)lim->bytes);
	}
	*bytes = b;
	return true;
}

bool rt_dataset_alloc(rt_dataset *d, int64_t n, int64_t c, int64_t h, int64_t w, int classes,
	const char *name, const rt_data_limit *lim, rt_err *e)
{
	memset(d, 0, sizeof *d);
	int64_t bytes;
	if (classes < 1)
		return rt_errorf(e, "%s: absurd number of classes %d", name, classes);
	if (!rt_dataset_fits(n, c, h, w, lim, name, &bytes, e))
		return false;
	size_t pixels = (size_t)(bytes - n * (int64_t)sizeof *d->labels);
	d->pixels = malloc(pixels);
	d->labels = malloc((size_t)n * sizeof *d->labels);
	if (!d->pixels || !d->labels) {
		rt_dataset_free(d);
		char what[160];
		snprintf(what, sizeof what, "the dataset (%lld images of %lldx%lldx%lld with their labels)",
			(long long)n, (long long)c, (long long)h, (long long)w);
		rt_error_oom(e, what, bytes);
		return rt_err_prefixf(e, "%s: ", name);
	}
	d->n = n;
	d->c = (int)c;
	d->h = (int)h;
	d->w = (int)w;
	d->classes = classes;
	return true;
}

int64_t rt_dataset_bytes(const rt_dataset *d)
{
	return d->n * ((int64_t)d->c * d->h * d->w + (int64_t)sizeof *d->labels);
}

void rt_dataset_free(rt_dataset *d)
{
	free(d->pixels);
	free(d->labels);
	memset(d, 0, sizeof *d);
}

/* Integer arithmetic only, so the bytes are the same on every machine.
 * Class k is a stripe pattern along one of four directions (k % 4) with
 * period 3 + k/4 (a distinct pair per class, however many classes); an
 * example shifts it by a random phase, picks random bright and dark levels
 * and adds noise of up to +-24 per pixel.  Stripes are local features, so a
 * small convolutional network learns them within an epoch. */
bool rt_data_synthetic(int64_t n, int64_t c, int64_t h, int64_t w, int classes, uint64_t seed,
	const rt_data_limit *lim, rt_dataset *out, rt_err *e)
{
	static const int dir[4][2] = {{1, 0}, {0, 1}, {1, 1}, {1, -1}};
	if (!rt_dataset_alloc(out, n, c, h, w, classes, "synthetic data", lim, e))
		return false;
	rt_rng r;
	rt_rng_derive(&r, seed, RT_RNG_SYNTHETIC, 0);
	uint8_t *p = out->pixels;
	for (int64_t i = 0; i < n; i++) {
		int k = (int)rt_rng_below(&r, (uint64_t)classes);
		int dy = dir[k % 4][0], dx = dir[k % 4][1];
		int period = 3 + k / 4;
		int phase = (int)rt_rng_below(&r, (uint64_t)period);
		int hi = 160 + (int)rt_rng_below(&r, 96);
		int lo = (int)rt_rng_below(&r, 81);
		out->labels[i] = k;
		for (int ch = 0; ch < c; ch++)
			for (int y = 0; y < h; y++)
				for (int x = 0; x < w; x++) {
					/* dx may be -1: add w * period to keep the sum positive. */
					int64_t t = (int64_t)dy * y + (int64_t)dx * x + phase + (int64_t)w * period;
					int v = t % period < (period + 1) / 2 ? hi : lo;
					v += (int)rt_rng_below(&r, 49) - 24;
					*p++ = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
				}
	}
	return true;
}

void rt_data_epoch_order(int64_t n, uint64_t seed, int64_t epoch, int64_t *perm)
{
	rt_rng r;
	rt_rng_derive(&r, seed, RT_RNG_EPOCH, (uint64_t)epoch);
	for (int64_t i = 0; i < n; i++)
		perm[i] = i;
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = (int64_t)rt_rng_below(&r, (uint64_t)i + 1);
		int64_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

/* An index outside the dataset is a caller's bug, not bad input. */
static const uint8_t *example(const rt_dataset *d, int64_t i, int64_t size)
{
	if (i < 0 || i >= d->n)
		IR_DIE("example %lld of a dataset of %lld", (long long)i, (long long)d->n);
	return d->pixels + i * size;
}

void rt_data_batch_f32(const rt_dataset *d, const int64_t *idx, int64_t bs, float *x, int32_t *y)
{
	int64_t size = (int64_t)d->c * d->h * d->w;
	for (int64_t b = 0; b < bs; b++) {
		const uint8_t *src = example(d, idx[b], size);
		for (int64_t j = 0; j < size; j++)
			x[b * size + j] = (float)src[j] / 255.0f;
		y[b] = d->labels[idx[b]];
	}
}

void rt_data_batch_f64(const rt_dataset *d, const int64_t *idx, int64_t bs, double *x, int32_t *y)
{
	int64_t size = (int64_t)d->c * d->h * d->w;
	for (int64_t b = 0; b < bs; b++) {
		const uint8_t *src = example(d, idx[b], size);
		for (int64_t j = 0; j < size; j++)
			x[b * size + j] = (double)src[j] / 255.0;
		y[b] = d->labels[idx[b]];
	}
}
