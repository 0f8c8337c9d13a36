/* fuzz_idx.c: libFuzzer target for the IDX (MNIST family) parser
 * (runtime/data_idx.c).
 *
 * The input is two files in one: its first two bytes, big-endian, give the
 * length of the images file (cut to what is there), which follows; the labels
 * file is the rest.  Each part is copied into a buffer of its own, exactly
 * sized, so that a read past the end of either is caught.  On success every
 * pixel and label is read.  Built by scripts/fuzz; nothing is kept between
 * runs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Where the pixel sums go, so that the reads are not optimised away. */
static volatile unsigned sink;

static uint8_t *copy(const uint8_t *p, size_t n)
{
	uint8_t *b = malloc(n ? n : 1);
	if (!b)
		abort();
	if (n)
		memcpy(b, p, n);
	return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t img_len = (size_t)data[0] << 8 | data[1];
	if (img_len > size - 2)
		img_len = size - 2;
	size_t lab_len = size - 2 - img_len;
	uint8_t *img = copy(data + 2, img_len);
	uint8_t *lab = copy(data + 2 + img_len, lab_len);

	rt_dataset ds;
	rt_err e;
	e.msg[0] = 0;
	if (rt_data_parse_idx(img, img_len, lab, lab_len, "images.idx", "labels.idx", &ds, &e)) {
		if (ds.n < 1 || ds.c != 1 || ds.h < 1 || ds.w < 1)
			abort();
		unsigned sum = 0;
		size_t pixels = (size_t)ds.n * (size_t)ds.c * (size_t)ds.h * (size_t)ds.w;
		for (size_t i = 0; i < pixels; i++)
			sum += ds.pixels[i];
		for (int64_t i = 0; i < ds.n; i++)
			if (ds.labels[i] < 0 || ds.labels[i] >= ds.classes)
				abort();
		sink = sum;
		rt_dataset_free(&ds);
	} else {
		static const rt_dataset zero;
		if (!e.msg[0] || memcmp(&ds, &zero, sizeof ds))
			abort();
	}
	free(lab);
	free(img);
	return 0;
}
