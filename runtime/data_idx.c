/* data_idx.c: the IDX format of the MNIST family (MNIST, Fashion-MNIST).
 *
 * An IDX file is a big-endian header, magic 0x0000TTRR (TT = 0x08 for
 * unsigned bytes, RR = rank) and RR 32-bit dimensions, followed by exactly
 * the promised data.  Images are rank 3 [n, h, w], labels rank 1 [n].  The
 * files are untrusted: every length is checked before it is used, and sizes
 * before anything is allocated. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rt.h"

#define IDX_IMAGES 0x00000803u
#define IDX_LABELS 0x00000801u
#define IDX_CLASSES 10

/* Large enough for any file rt_dataset_alloc accepts. */
#define IDX_MAX_FILE ((size_t)RT_DATA_MAX_BYTES + 64)

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Checks the header of one IDX file: its magic, that it holds the header,
 * and that the data after it is exactly `elems` bytes long, where elems is
 * the product of the dimensions.  dim receives the dimensions. */
static bool idx_header(const uint8_t *p, size_t len, uint32_t magic, const char *what,
	const char *name, uint32_t *dim, rt_err *e)
{
	int rank = (int)(magic & 0xff);
	if (len < 4)
		return rt_errorf(e, "%s: truncated: a %zu-byte file is too short for an IDX header",
			name, len);
	if (be32(p) != magic)
		return rt_errorf(e, "%s: has IDX magic 0x%08x, expected 0x%08x (%s)", name,
			be32(p), magic, what);
	size_t head = 4 + 4 * (size_t)rank;
	if (len < head)
		return rt_errorf(e, "%s: truncated: the IDX header takes %zu bytes, the file has %zu",
			name, head, len);
	int64_t elems = 1;
	for (int i = 0; i < rank; i++) {
		dim[i] = be32(p + 4 + 4 * i);
		if (!ir_size_mul(elems, dim[i], &elems) || elems > RT_DATA_MAX_BYTES)
			return rt_errorf(e, "%s: absurd IDX dimensions (more than 2^34 bytes of %s)",
				name, what);
	}
	if ((uint64_t)(len - head) < (uint64_t)elems)
		return rt_errorf(e, "%s: truncated: the header promises %lld bytes of %s, the file has %zu",
			name, (long long)elems, what, len - head);
	if ((uint64_t)(len - head) > (uint64_t)elems)
		return rt_errorf(e, "%s: trailing data after the %lld bytes of %s (the file is %zu "
			"bytes longer)", name, (long long)elems, what, len - head - (size_t)elems);
	return true;
}

bool rt_data_parse_idx(const uint8_t *img, size_t img_len, const uint8_t *lab, size_t lab_len,
	const char *img_name, const char *lab_name, rt_dataset *out, rt_err *e)
{
	memset(out, 0, sizeof *out);
	uint32_t idim[3], ldim[1];
	if (!idx_header(img, img_len, IDX_IMAGES, "images", img_name, idim, e)
		|| !idx_header(lab, lab_len, IDX_LABELS, "labels", lab_name, ldim, e))
		return false;
	if (idim[0] != ldim[0])
		return rt_errorf(e, "%s: %u images but %u labels in %s", img_name, idim[0], ldim[0],
			lab_name);
	if (idim[1] > INT32_MAX || idim[2] > INT32_MAX)
		return rt_errorf(e, "%s: absurd image size %ux%u", img_name, idim[1], idim[2]);
	if (!rt_dataset_alloc(out, idim[0], 1, (int)idim[1], (int)idim[2], IDX_CLASSES, img_name, e))
		return false;
	const uint8_t *labels = lab + 8;
	for (int64_t i = 0; i < out->n; i++) {
		if (labels[i] >= IDX_CLASSES) {
			rt_dataset_free(out);
			return rt_errorf(e, "%s: label %d of example %lld is out of range (%d classes)",
				lab_name, labels[i], (long long)i, IDX_CLASSES);
		}
		out->labels[i] = labels[i];
	}
	memcpy(out->pixels, img + 16, (size_t)out->n * (size_t)idim[1] * idim[2]);
	return true;
}

bool rt_data_load_idx(const char *images_path, const char *labels_path, rt_dataset *out, rt_err *e)
{
	memset(out, 0, sizeof *out);
	uint8_t *img, *lab;
	size_t img_len, lab_len;
	if (!rt_data_read_file(images_path, IDX_MAX_FILE, &img, &img_len, e))
		return false;
	if (!rt_data_read_file(labels_path, IDX_MAX_FILE, &lab, &lab_len, e)) {
		free(img);
		return false;
	}
	bool ok = rt_data_parse_idx(img, img_len, lab, lab_len, images_path, labels_path, out, e);
	free(img);
	free(lab);
	return ok;
}

/* dir/base.gz if it exists, else dir/base if that exists; NULL (with the
 * message) when neither does. */
static char *find_file(const char *dir, const char *base, rt_err *e)
{
	char *gz = NULL, *plain = NULL;
	struct stat st;
	if (asprintf(&gz, "%s/%s.gz", dir, base) < 0) {
		rt_errorf(e, "%s: out of memory", dir);
		return NULL;
	}
	if (stat(gz, &st) == 0 || errno != ENOENT)
		return gz;
	if (asprintf(&plain, "%s/%s", dir, base) < 0) {
		free(gz);
		rt_errorf(e, "%s: out of memory", dir);
		return NULL;
	}
	if (stat(plain, &st) == 0 || errno != ENOENT) {
		free(gz);
		return plain;
	}
	rt_errorf(e, "%s: no such file (nor without .gz); Debian's dataset-fashion-mnist installs "
		"it in " RT_FASHION_DIR, gz);
	free(gz);
	free(plain);
	return NULL;
}

bool rt_data_load_fashion(const char *dir, bool train, rt_dataset *out, rt_err *e)
{
	memset(out, 0, sizeof *out);
	if (!dir)
		dir = RT_FASHION_DIR;
	const char *prefix = train ? "train" : "t10k";
	char images_base[64], labels_base[64];
	snprintf(images_base, sizeof images_base, "%s-images-idx3-ubyte", prefix);
	snprintf(labels_base, sizeof labels_base, "%s-labels-idx1-ubyte", prefix);
	char *images = find_file(dir, images_base, e);
	if (!images)
		return false;
	char *labels = find_file(dir, labels_base, e);
	if (!labels) {
		free(images);
		return false;
	}
	bool ok = rt_data_load_idx(images, labels, out, e);
	free(images);
	free(labels);
	return ok;
}
