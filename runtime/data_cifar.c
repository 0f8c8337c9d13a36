/* data_cifar.c: the binary version of CIFAR-10.
 *
 * A file is a sequence of 3073-byte records: one label byte (0..9), then a
 * 32x32 image as 1024 red, 1024 green and 1024 blue bytes, each plane
 * row-major, which is already the CHW layout of rt_dataset.  There is no
 * header, so a file's size must be a whole number of records.  The training
 * set is data_batch_1.bin .. data_batch_5.bin in order, the test set
 * test_batch.bin.  Files are untrusted. */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define CIFAR_C 3
#define CIFAR_HW 32
#define CIFAR_IMAGE (CIFAR_C * CIFAR_HW * CIFAR_HW)
#define CIFAR_RECORD (1 + CIFAR_IMAGE)
#define CIFAR_CLASSES 10
#define CIFAR_TRAIN_FILES 5

/* Whole records only, and no more than a dataset may hold. */
#define CIFAR_MAX_FILE ((size_t)(RT_DATA_MAX_BYTES / CIFAR_IMAGE) * CIFAR_RECORD)

bool rt_data_parse_cifar10(const uint8_t *buf, size_t len, const char *name, rt_dataset *out, rt_err *e)
{
	memset(out, 0, sizeof *out);
	if (len == 0)
		return rt_errorf(e, "%s: empty, expected records of %d bytes", name, CIFAR_RECORD);
	if (len % CIFAR_RECORD)
		return rt_errorf(e, "%s: size %zu is not a multiple of %d (1 label byte + %d pixel bytes "
			"per record); truncated or not CIFAR-10", name, len, CIFAR_RECORD, CIFAR_IMAGE);
	int64_t n = (int64_t)(len / CIFAR_RECORD);
	if (!rt_dataset_alloc(out, n, CIFAR_C, CIFAR_HW, CIFAR_HW, CIFAR_CLASSES, name, e))
		return false;
	for (int64_t i = 0; i < n; i++) {
		const uint8_t *rec = buf + i * CIFAR_RECORD;
		if (rec[0] >= CIFAR_CLASSES) {
			rt_dataset_free(out);
			return rt_errorf(e, "%s: label %d of example %lld is out of range (%d classes)",
				name, rec[0], (long long)i, CIFAR_CLASSES);
		}
		out->labels[i] = rec[0];
		memcpy(out->pixels + i * CIFAR_IMAGE, rec + 1, CIFAR_IMAGE);
	}
	return true;
}

/* Appends src's examples to dst (which may be empty); frees src. */
static bool append(rt_dataset *dst, rt_dataset *src, const char *name, rt_err *e)
{
	if (!dst->n) {
		*dst = *src;
		memset(src, 0, sizeof *src);
		return true;
	}
	int64_t n, bytes;
	if (!ir_size_add(dst->n, src->n, &n) || !ir_size_mul(n, CIFAR_IMAGE, &bytes)
		|| bytes > RT_DATA_MAX_BYTES) {
		rt_dataset_free(src);
		return rt_errorf(e, "%s: the files together exceed the limit of 2^34 bytes", name);
	}
	uint8_t *pixels = realloc(dst->pixels, (size_t)bytes);
	if (pixels)
		dst->pixels = pixels;
	int32_t *labels = realloc(dst->labels, (size_t)n * sizeof *labels);
	if (labels)
		dst->labels = labels;
	if (!pixels || !labels) {
		rt_dataset_free(src);
		return rt_errorf(e, "%s: out of memory", name);
	}
	memcpy(dst->pixels + dst->n * CIFAR_IMAGE, src->pixels, (size_t)src->n * CIFAR_IMAGE);
	memcpy(dst->labels + dst->n, src->labels, (size_t)src->n * sizeof *labels);
	dst->n = n;
	rt_dataset_free(src);
	return true;
}

bool rt_data_load_cifar10(const char *dir, bool train, rt_dataset *out, rt_err *e)
{
	memset(out, 0, sizeof *out);
	if (!dir)
		return rt_errorf(e, "CIFAR-10: no directory given");
	int files = train ? CIFAR_TRAIN_FILES : 1;
	for (int i = 0; i < files; i++) {
		char *path;
		int r = train ? asprintf(&path, "%s/data_batch_%d.bin", dir, i + 1)
			: asprintf(&path, "%s/test_batch.bin", dir);
		if (r < 0) {
			rt_dataset_free(out);
			return rt_errorf(e, "%s: out of memory", dir);
		}
		uint8_t *buf = NULL;
		size_t len;
		rt_dataset part;
		bool ok = rt_data_read_file(path, CIFAR_MAX_FILE, &buf, &len, e)
			&& rt_data_parse_cifar10(buf, len, path, &part, e);
		free(buf);
		ok = ok && append(out, &part, path, e);
		free(path);
		if (!ok) {
			rt_dataset_free(out);
			return false;
		}
	}
	return true;
}
