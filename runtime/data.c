/* data.c: what every dataset shares: reading (possibly gzipped) files,
 * checked allocation, synthetic data, epoch shuffles and batch gathering.
 * The file formats live in data_idx.c and data_cifar.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "rt.h"

/* zlib reads plain files transparently, so one path serves both.  The
 * buffer starts at the file's size (exact for a plain file) and doubles for
 * compressed ones; it is capped at max + 1 bytes so that one byte too many
 * is seen. */
bool rt_data_read_file(const char *path, size_t max, uint8_t **data, size_t *len, rt_err *e)
{
	*data = NULL;
	*len = 0;
	/* O_NONBLOCK: opening a FIFO must not wait for a writer. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return rt_errorf(e, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return rt_errorf(e, "%s: not a regular file", path);
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	gzFile gz = gzdopen(fd, "rb");
	if (!gz) {
		close(fd);
		return rt_errorf(e, "%s: out of memory", path);
	}
	gzbuffer(gz, 1 << 17);
	if (max > SIZE_MAX / 2)
		max = SIZE_MAX / 2;
	size_t cap = (uintmax_t)st.st_size < max ? (size_t)st.st_size + 1 : max + 1;
	if (cap < 4096)
		cap = max + 1 < 4096 ? max + 1 : 4096;
	size_t n = 0;
	uint8_t *buf = malloc(cap);
	if (!buf)
		goto oom;
	for (;;) {
		if (n == cap) {
			if (cap > max) {
				rt_errorf(e, "%s: larger than %zu bytes", path, max);
				goto fail;
			}
			size_t ncap = cap > (max + 1) / 2 ? max + 1 : cap * 2;
			uint8_t *nbuf = realloc(buf, ncap);
			if (!nbuf)
				goto oom;
			buf = nbuf;
			cap = ncap;
		}
		size_t want = cap - n < (1u << 30) ? cap - n : (1u << 30);
		int r = gzread(gz, buf + n, (unsigned)want);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	int err;
	const char *msg = gzerror(gz, &err);
	if (err == Z_ERRNO) {
		rt_errorf(e, "%s: cannot read: %s", path, strerror(errno));
		goto fail;
	}
	if (err == Z_MEM_ERROR)
		goto oom;
	if (err != Z_OK) {
		/* zlib names a descriptor "<fd:3>" and prefixes that to its messages. */
		const char *colon = strstr(msg, ": ");
		if (!strncmp(msg, "<fd:", 4) && colon)
			msg = colon + 2;
		rt_errorf(e, "%s: corrupt or truncated gzip data (%s)", path, msg);
		goto fail;
	}
	/* gzclose_r reports a stream cut inside a gzip member. */
	err = gzclose_r(gz);
	if (err != Z_OK) {
		free(buf);
		return rt_errorf(e, "%s: corrupt or truncated gzip data", path);
	}
	*data = buf;
	*len = n;
	return true;
oom:
	rt_errorf(e, "%s: out of memory", path);
fail:
	gzclose_r(gz);
	free(buf);
	return false;
}

bool rt_dataset_alloc(rt_dataset *d, int64_t n, int c, int h, int w, int classes,
	const char *name, rt_err *e)
{
	memset(d, 0, sizeof *d);
	if (n < 1)
		return rt_errorf(e, "%s: holds no examples", name);
	if (c < 1 || h < 1 || w < 1 || classes < 1)
		return rt_errorf(e, "%s: absurd shape %dx%dx%d, %d classes", name, c, h, w, classes);
	int64_t image, bytes, label_bytes;
	if (!ir_size_mul(c, h, &image) || !ir_size_mul(image, w, &image) || image > INT_MAX)
		return rt_errorf(e, "%s: absurd image size %dx%dx%d", name, c, h, w);
	if (!ir_size_mul(n, image, &bytes) || bytes > RT_DATA_MAX_BYTES
		|| !ir_size_mul(n, (int64_t)sizeof *d->labels, &label_bytes)
		|| label_bytes > RT_DATA_MAX_BYTES)
		return rt_errorf(e, "%s: %lld images of %dx%dx%d exceed the limit of 2^34 bytes",
			name, (long long)n, c, h, w);
	d->pixels = malloc((size_t)bytes);
	d->labels = malloc((size_t)label_bytes);
	if (!d->pixels || !d->labels) {
		rt_dataset_free(d);
		return rt_errorf(e, "%s: out of memory (%lld bytes of pixels)", name, (long long)bytes);
	}
	d->n = n;
	d->c = c;
	d->h = h;
	d->w = w;
	d->classes = classes;
	return true;
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
bool rt_data_synthetic(int64_t n, int c, int h, int w, int classes, uint64_t seed, rt_dataset *out,
	rt_err *e)
{
	static const int dir[4][2] = {{1, 0}, {0, 1}, {1, 1}, {1, -1}};
	if (!rt_dataset_alloc(out, n, c, h, w, classes, "synthetic data", e))
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
