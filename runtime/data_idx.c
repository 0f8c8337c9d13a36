/* data_idx.c: the IDX format of the MNIST family (MNIST, Fashion-MNIST).
 *
 * An IDX file is a big-endian header, magic 0x0000TTRR (TT = 0x08 for
 * unsigned bytes, RR = rank) and RR 32-bit dimensions, followed by exactly
 * the promised data.  Images are rank 3 [n, h, w], labels rank 1 [n].  The
 * files are untrusted: every length is checked before it is used, and sizes
 * before anything is allocated.  The data is read straight into the
 * dataset, and no further than the headers promise (plus one byte, to see
 * that nothing follows), so a compressed file's true length never
 * matters. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data_in.h"

#define IDX_IMAGES 0x00000803u
#define IDX_LABELS 0x00000801u
#define IDX_CLASSES 10
/* Labels are checked and widened this many at a time. */
#define IDX_LABEL_CHUNK 4096

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool idx_truncated(const rt_data_in *in, int64_t elems, const char *what, int64_t have,
	rt_err *e)
{
	return rt_errorf(e, "%s: truncated: the header promises %lld bytes of %s, the file has %lld",
		in->name, (long long)elems, what, (long long)have);
}

/* extra: how many bytes too many, when the stream knows (else 0). */
static bool idx_trailing(const rt_data_in *in, int64_t elems, const char *what, int64_t extra,
	rt_err *e)
{
	if (extra > 0)
		return rt_errorf(e, "%s: trailing data after the %lld bytes of %s (the file is %lld "
			"bytes longer)", in->name, (long long)elems, what, (long long)extra);
	return rt_errorf(e, "%s: trailing data after the %lld bytes of %s the header promises (read "
		"no further)", in->name, (long long)elems, what);
}

/* Reads one IDX header from in: its magic, and its dimensions into dim;
 * *elems is the bytes of data they promise (their product).  When the
 * stream knows its size (a plain file, memory), that the data after the
 * header is exactly that long is checked here, before anything is
 * allocated; compressed data is checked as it is read. */
static bool idx_header(rt_data_in *in, uint32_t magic, const char *what, uint32_t *dim,
	int64_t *elems, rt_err *e)
{
	int rank = (int)(magic & 0xff);
	uint8_t h[4 + 4 * 3];
	size_t head = 4 + 4 * (size_t)rank, got;
	if (!rt_data_in_read(in, h, 4, &got, e))
		return false;
	if (got < 4)
		return rt_errorf(e, "%s: truncated: a %zu-byte file is too short for an IDX header",
			in->name, got);
	if (be32(h) != magic)
		return rt_errorf(e, "%s: has IDX magic 0x%08x, expected 0x%08x (%s)", in->name, be32(h),
			magic, what);
	if (!rt_data_in_read(in, h + 4, head - 4, &got, e))
		return false;
	if (4 + got < head)
		return rt_errorf(e, "%s: truncated: the IDX header takes %zu bytes, the file has %zu",
			in->name, head, 4 + got);
	*elems = 1;
	for (int i = 0; i < rank; i++) {
		dim[i] = be32(h + 4 + 4 * i);
		if (!ir_size_mul(*elems, dim[i], elems) || *elems > RT_DATA_MAX_BYTES)
			return rt_errorf(e, "%s: absurd IDX dimensions (more than 2^%d bytes of %s)",
				in->name, __builtin_ctzll((unsigned long long)RT_DATA_MAX_BYTES), what);
	}
	if (in->size >= 0 && in->size - in->pos < *elems)
		return idx_truncated(in, *elems, what, in->size - in->pos, e);
	if (in->size >= 0 && in->size - in->pos > *elems)
		return idx_trailing(in, *elems, what, in->size - in->pos - *elems, e);
	return true;
}

/* After the data a header promised: nothing may follow. */
static bool idx_end(rt_data_in *in, int64_t elems, const char *what, rt_err *e)
{
	bool more;
	if (!rt_data_in_more(in, &more, e))
		return false;
	return !more || idx_trailing(in, elems, what, 0, e);
}

/* The labels' n bytes, each checked and widened into out->labels. */
static bool idx_labels(rt_data_in *in, int64_t n, rt_dataset *out, rt_err *e)
{
	uint8_t buf[IDX_LABEL_CHUNK];
	for (int64_t i = 0; i < n;) {
		size_t want = n - i < IDX_LABEL_CHUNK ? (size_t)(n - i) : IDX_LABEL_CHUNK, got;
		if (!rt_data_in_read(in, buf, want, &got, e))
			return false;
		if (got < want)
			return idx_truncated(in, n, "labels", i + (int64_t)got, e);
		for (size_t k = 0; k < got; k++, i++) {
			if (buf[k] >= IDX_CLASSES)
				return rt_errorf(e, "%s: label %d of example %lld is out of range (%d classes)",
					in->name, buf[k], (long long)i, IDX_CLASSES);
			out->labels[i] = buf[k];
		}
	}
	return idx_end(in, n, "labels", e);
}

/* Both headers first, so that the dataset is allocated once, as large as
 * they promise and the limits allow; then the data, straight into it. */
static bool idx_load(rt_data_in *img, rt_data_in *lab, const rt_data_limit *lim, rt_dataset *out,
	rt_err *e)
{
	uint32_t idim[3], ldim[1];
	int64_t pixels, labels;
	if (!idx_header(img, IDX_IMAGES, "images", idim, &pixels, e)
		|| !idx_header(lab, IDX_LABELS, "labels", ldim, &labels, e))
		return false;
	if (idim[0] != ldim[0])
		return rt_errorf(e, "%s: %u images but %u labels in %s", img->name, idim[0], ldim[0],
			lab->name);
	if (!rt_dataset_alloc(out, idim[0], 1, idim[1], idim[2], IDX_CLASSES, img->name, lim, e))
		return false;
	size_t got;
	bool ok = rt_data_in_read(img, out->pixels, (size_t)pixels, &got, e)
		&& ((int64_t)got == pixels || idx_truncated(img, pixels, "images", (int64_t)got, e))
		&& idx_end(img, pixels, "images", e)
		&& idx_labels(lab, labels, out, e);
	if (!ok)
		rt_dataset_free(out);
	return ok;
}

bool rt_data_parse_idx(const uint8_t *img, size_t img_len, const uint8_t *lab, size_t lab_len,
	const char *img_name, const char *lab_name, rt_dataset *out, rt_err *e)
{
	memset(out, 0, sizeof *out);
	rt_data_in i, l;
	rt_data_in_memory(&i, img, img_len, img_name);
	rt_data_in_memory(&l, lab, lab_len, lab_name);
	return idx_load(&i, &l, NULL, out, e);
}

bool rt_data_load_idx(const char *images_path, const char *labels_path, const rt_data_limit *lim,
	rt_dataset *out, rt_err *e)
{
	memset(out, 0, sizeof *out);
	rt_data_in img, lab;
	if (!rt_data_in_open(&img, images_path, e))
		return false;
	if (!rt_data_in_open(&lab, labels_path, e)) {
		rt_data_in_close(&img);
		return false;
	}
	bool ok = idx_load(&img, &lab, lim, out, e);
	rt_data_in_close(&img);
	rt_data_in_close(&lab);
	return ok;
}

/* dir/base.gz if it exists, else dir/base if that exists; NULL (with the
 * message) when neither does. */
static char *find_file(const char *dir, const char *base, rt_err *e)
{
	char *gz = NULL, *plain = NULL;
	struct stat st;
	if (asprintf(&gz, "%s/%s.gz", dir, base) < 0) {
		rt_error_oom(e, "a file name", (int64_t)strlen(dir) + 64);
		rt_err_prefixf(e, "%s: ", dir);
		return NULL;
	}
	if (stat(gz, &st) == 0 || errno != ENOENT)
		return gz;
	if (asprintf(&plain, "%s/%s", dir, base) < 0) {
		free(gz);
		rt_error_oom(e, "a file name", (int64_t)strlen(dir) + 64);
		rt_err_prefixf(e, "%s: ", dir);
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

bool rt_data_load_fashion(const char *dir, bool train, const rt_data_limit *lim, rt_dataset *out,
	rt_err *e)
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
	bool ok = rt_data_load_idx(images, labels, lim, out, e);
	free(images);
	free(labels);
	return ok;
}
