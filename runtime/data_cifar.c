/* data_cifar.c: the binary version of CIFAR-10.
 *
 * A file is a sequence of 3073-byte records: one label byte (0..9), then a
 * 32x32 image as 1024 red, 1024 green and 1024 blue bytes, each plane
 * row-major, which is already the CHW layout of rt_dataset.  There is no
 * header, so a file's size must be a whole number of records.  The training
 * set is data_batch_1.bin .. data_batch_5.bin in order, the test set
 * test_batch.bin.  Files are untrusted: their sizes, known before anything
 * is read, give the dataset's, and the records are read straight into it. */
#include <stdlib.h>
#include <string.h>

#include "data_in.h"

#define CIFAR_C 3
#define CIFAR_HW 32
#define CIFAR_IMAGE (CIFAR_C * CIFAR_HW * CIFAR_HW)
#define CIFAR_RECORD (1 + CIFAR_IMAGE)
#define CIFAR_CLASSES 10
#define CIFAR_TRAIN_FILES 5

/* How many records in holds: its size must be a whole, non-zero number of
 * them.  A gzip file is refused: without a header, nothing but inflating
 * all of it would tell how much it holds. */
static bool cifar_count(const rt_data_in *in, int64_t *n, rt_err *e)
{
	if (in->z) /* gzip data */
		return rt_errorf(e, "%s: gzip data; CIFAR-10 batches are read uncompressed (gunzip it "
			"first)", in->name);
	if (in->size == 0)
		return rt_errorf(e, "%s: empty, expected records of %d bytes", in->name, CIFAR_RECORD);
	if (in->size % CIFAR_RECORD)
		return rt_errorf(e, "%s: size %lld is not a multiple of %d (1 label byte + %d pixel bytes "
			"per record); truncated or not CIFAR-10", in->name, (long long)in->size,
			CIFAR_RECORD, CIFAR_IMAGE);
	*n = in->size / CIFAR_RECORD;
	return true;
}

/* Reads n records from in into d's examples first.. (d is allocated). */
static bool cifar_read(rt_data_in *in, int64_t n, rt_dataset *d, int64_t first, rt_err *e)
{
	for (int64_t i = 0; i < n; i++) {
		uint8_t label;
		size_t got, got_pixels = 0;
		if (!rt_data_in_read(in, &label, 1, &got, e)
			|| (got && !rt_data_in_read(in, d->pixels + (first + i) * CIFAR_IMAGE, CIFAR_IMAGE,
				&got_pixels, e)))
			return false;
		if (!got || got_pixels < CIFAR_IMAGE)
			return rt_errorf(e, "%s: truncated in record %lld (the file shrank while being read)",
				in->name, (long long)i);
		if (label >= CIFAR_CLASSES)
			return rt_errorf(e, "%s: label %d of example %lld is out of range (%d classes)",
				in->name, label, (long long)i, CIFAR_CLASSES);
		d->labels[first + i] = label;
	}
	bool more;
	if (!rt_data_in_more(in, &more, e))
		return false;
	if (more)
		return rt_errorf(e, "%s: trailing data after %lld records (the file grew while being "
			"read)", in->name, (long long)n);
	return true;
}

bool rt_data_parse_cifar10(const uint8_t *buf, size_t len, const char *name, rt_dataset *out, rt_err *e)
{
	memset(out, 0, sizeof *out);
	rt_data_in in;
	rt_data_in_memory(&in, buf, len, name);
	int64_t n = 0;
	if (!cifar_count(&in, &n, e)
		|| !rt_dataset_alloc(out, n, CIFAR_C, CIFAR_HW, CIFAR_HW, CIFAR_CLASSES, name, NULL, e))
		return false;
	if (!cifar_read(&in, n, out, 0, e)) {
		rt_dataset_free(out);
		return false;
	}
	return true;
}

/* Every file is opened and sized first, so that the dataset is allocated
 * once, exactly, and the limits are checked against the files together
 * before anything is read. */
bool rt_data_load_cifar10(const char *dir, bool train, const rt_data_limit *lim, rt_dataset *out,
	rt_err *e)
{
	memset(out, 0, sizeof *out);
	if (!dir)
		return rt_errorf(e, "CIFAR-10: no directory given");
	int files = train ? CIFAR_TRAIN_FILES : 1, opened = 0;
	char *path[CIFAR_TRAIN_FILES] = {0};
	rt_data_in in[CIFAR_TRAIN_FILES];
	int64_t count[CIFAR_TRAIN_FILES], n = 0, bytes;
	bool ok = true;
	for (int i = 0; ok && i < files; i++) {
		int r = train ? asprintf(&path[i], "%s/data_batch_%d.bin", dir, i + 1)
			: asprintf(&path[i], "%s/test_batch.bin", dir);
		if (r < 0) {
			path[i] = NULL;
			ok = rt_error_oom(e, "a file name", (int64_t)strlen(dir) + 64) || rt_err_prefixf(e, "%s: ", dir);
			continue;
		}
		ok = rt_data_in_open(&in[i], path[i], e);
		opened += ok;
		/* The running total names the file that takes it over a limit. */
		ok = ok && cifar_count(&in[i], &count[i], e)
			&& rt_dataset_fits(n + count[i], CIFAR_C, CIFAR_HW, CIFAR_HW, lim, path[i], &bytes, e);
		n += ok ? count[i] : 0;
	}
	ok = ok && rt_dataset_alloc(out, n, CIFAR_C, CIFAR_HW, CIFAR_HW, CIFAR_CLASSES,
		path[files - 1], lim, e);
	int64_t first = 0;
	for (int i = 0; ok && i < files; first += count[i], i++)
		ok = cifar_read(&in[i], count[i], out, first, e);
	for (int i = 0; i < files; i++) {
		if (i < opened)
			rt_data_in_close(&in[i]);
		free(path[i]);
	}
	if (!ok)
		rt_dataset_free(out);
	return ok;
}
