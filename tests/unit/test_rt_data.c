/* test_rt_data.c: the dataset loaders (IDX, CIFAR-10), synthetic data, epoch
 * shuffles and batches.  Uses the real Fashion-MNIST from Debian's
 * dataset-fashion-mnist and files synthesised here; every bad input must
 * give one clean error naming the file, leave the dataset empty and leak
 * nothing (the ASan build checks the last). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "data_in.h"
#include "rt.h"
#include "runtime_suites.h"

#define FASHION RT_FASHION_DIR

/* ---- helpers ---------------------------------------------------------- */

static char *join(const char *dir, const char *name)
{
	char *p;
	ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

static char *make_tmpdir(void)
{
	char *dir = strdup("/tmp/revc-data-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	return dir;
}

/* Removes dir and the plain files in it. */
static void remove_tmpdir(char *dir)
{
	DIR *d = opendir(dir);
	for (struct dirent *ent; d && (ent = readdir(d));) {
		if (ent->d_name[0] == '.')
			continue;
		char *p = join(dir, ent->d_name);
		unlink(p);
		free(p);
	}
	if (d)
		closedir(d);
	ck_assert_int_eq(rmdir(dir), 0);
	free(dir);
}

/* Plain stdio rather than rt_file_write_atomic: hundreds of truncated
 * copies are written, and fsync would make that slow on a real disk. */
static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

static void write_gz(const char *path, const void *data, size_t len)
{
	gzFile gz = gzopen(path, "wb");
	ck_assert_ptr_nonnull(gz);
	ck_assert_int_eq(gzwrite(gz, data, (unsigned)len), (int)len);
	ck_assert_int_eq(gzclose(gz), Z_OK);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	char *data;
	rt_err e;
	ck_assert_msg(rt_file_read(path, (size_t)1 << 30, &data, len, &e), "%s", e.msg);
	return (uint8_t *)data;
}

/* All of a gzip file, inflated (zlib directly: the loaders read no more
 * than a header promises). */
static uint8_t *gunzip(const char *path, size_t *len)
{
	gzFile gz = gzopen(path, "rb");
	ck_assert_ptr_nonnull(gz);
	size_t cap = 1 << 20, n = 0;
	uint8_t *buf = malloc(cap);
	for (int r; (r = gzread(gz, buf + n, (unsigned)(cap - n))) > 0;) {
		n += (size_t)r;
		if (n == cap)
			ck_assert_ptr_nonnull(buf = realloc(buf, cap *= 2));
	}
	ck_assert_int_eq(gzclose(gz), Z_OK);
	*len = n;
	return buf;
}

static bool is_empty(const rt_dataset *d)
{
	return d->n == 0 && !d->pixels && !d->labels && d->c == 0 && d->classes == 0;
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Loading must fail, with a message that starts with `path` and contains
 * `what` (if not NULL), and leave the dataset empty. */
static void expect_idx_error(const char *img, const char *lab, const char *path, const char *what)
{
	rt_dataset d;
	rt_err e = {{0}};
	memset(&d, 0x55, sizeof d);
	ck_assert_msg(!rt_data_load_idx(img, lab, NULL, &d, &e), "%s loaded", path);
	ck_assert_msg(is_empty(&d), "dataset not left empty: %s", e.msg);
	ck_assert_msg(starts_with(e.msg, path), "'%s' does not start with %s", e.msg, path);
	if (what)
		ck_assert_msg(strstr(e.msg, what), "'%s' lacks '%s'", e.msg, what);
}

/* As expect_idx_error, under a limit; the message must end with `tail`. */
static void expect_idx_error_limit(const char *img, const char *lab, const rt_data_limit *lim,
	const char *tail)
{
	rt_dataset d;
	rt_err e = {{0}};
	memset(&d, 0x55, sizeof d);
	ck_assert_msg(!rt_data_load_idx(img, lab, lim, &d, &e), "%s loaded", img);
	ck_assert_msg(is_empty(&d), "dataset not left empty: %s", e.msg);
	ck_assert_msg(starts_with(e.msg, img), "'%s' does not start with %s", e.msg, img);
	size_t n = strlen(e.msg), t = strlen(tail);
	ck_assert_msg(n >= t && !strcmp(e.msg + n - t, tail), "'%s' does not end with '%s'", e.msg, tail);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

enum { SN = 5, SH = 3, SW = 4 };

/* A small IDX pair: SN images of SH x SW with pixel i*31 + j and label
 * (3*i) % 10.  Returns the lengths through *img_len and *lab_len. */
static void small_idx(uint8_t *img, size_t *img_len, uint8_t *lab, size_t *lab_len)
{
	put_be32(img, 0x803);
	put_be32(img + 4, SN);
	put_be32(img + 8, SH);
	put_be32(img + 12, SW);
	for (int i = 0; i < SN; i++)
		for (int j = 0; j < SH * SW; j++)
			img[16 + i * SH * SW + j] = (uint8_t)(i * 31 + j);
	put_be32(lab, 0x801);
	put_be32(lab + 4, SN);
	for (int i = 0; i < SN; i++)
		lab[8 + i] = (uint8_t)(3 * i % 10);
	*img_len = 16 + SN * SH * SW;
	*lab_len = 8 + SN;
}

static void check_small(const rt_dataset *d)
{
	ck_assert_int_eq(d->n, SN);
	ck_assert_int_eq(d->c, 1);
	ck_assert_int_eq(d->h, SH);
	ck_assert_int_eq(d->w, SW);
	ck_assert_int_eq(d->classes, 10);
	for (int i = 0; i < SN; i++) {
		ck_assert_int_eq(d->labels[i], 3 * i % 10);
		for (int j = 0; j < SH * SW; j++)
			ck_assert_int_eq(d->pixels[i * SH * SW + j], i * 31 + j);
	}
}

static const char *source_root(void)
{
	const char *root = getenv("REVC_SOURCE_ROOT");
	ck_assert_msg(root != NULL, "REVC_SOURCE_ROOT is not set (meson test sets it)");
	return root;
}

/* ---- real Fashion-MNIST ----------------------------------------------- */

/* The first four test images against the fixture x.npy (float32 [4,1,28,28],
 * pixels/255, computed by an independent implementation): bitwise equal. */
START_TEST(test_fashion_test_set)
{
	rt_dataset d;
	rt_err e;
	ck_assert_msg(rt_data_load_fashion(NULL, false, NULL, &d, &e), "%s", e.msg);
	ck_assert_int_eq(d.n, 10000);
	ck_assert_int_eq(d.c, 1);
	ck_assert_int_eq(d.h, 28);
	ck_assert_int_eq(d.w, 28);
	ck_assert_int_eq(d.classes, 10);
	int count[10] = {0};
	for (int64_t i = 0; i < d.n; i++) {
		ck_assert(d.labels[i] >= 0 && d.labels[i] < 10);
		count[d.labels[i]]++;
	}
	for (int k = 0; k < 10; k++)
		ck_assert_int_eq(count[k], 1000);

	int64_t idx[4] = {0, 1, 2, 3};
	float x[4 * 784];
	double x64[4 * 784];
	int32_t y[4], y64[4];
	rt_data_batch_f32(&d, idx, 4, x, y);
	rt_data_batch_f64(&d, idx, 4, x64, y64);
	ck_assert_int_eq(y[0], 9);
	ck_assert_int_eq(y[1], 2);
	ck_assert_int_eq(y[2], 1);
	ck_assert_int_eq(y[3], 1);
	ck_assert_mem_eq(y, y64, sizeof y);

	char *npy = join(source_root(), "tests/data/fashion-b4/x.npy");
	size_t len;
	uint8_t *raw = slurp(npy, &len);
	ck_assert_uint_eq(len, 128 + sizeof x);
	ck_assert_mem_eq(raw, "\x93NUMPY", 6);
	ck_assert_ptr_nonnull(memmem(raw, 128, "'descr': '<f4'", 14));
	for (int i = 0; i < 4 * 784; i++) {
		const uint8_t *p = raw + 128 + 4 * i;
		uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
			| (uint32_t)p[3] << 24;
		float want;
		memcpy(&want, &bits, 4);
		ck_assert_msg(x[i] == want, "value %d: %.9g, fixture %.9g", i, (double)x[i],
			(double)want);
		ck_assert_msg(x64[i] == d.pixels[i] / 255.0, "f64 value %d", i);
	}
	free(raw);
	free(npy);
	rt_dataset_free(&d);
	ck_assert(is_empty(&d));
}
END_TEST

START_TEST(test_fashion_train_set)
{
	rt_dataset d;
	rt_err e;
	ck_assert_msg(rt_data_load_fashion(FASHION, true, NULL, &d, &e), "%s", e.msg);
	ck_assert_int_eq(d.n, 60000);
	ck_assert_int_eq(d.h * d.w * d.c, 784);
	int count[10] = {0};
	for (int64_t i = 0; i < d.n; i++) {
		ck_assert(d.labels[i] >= 0 && d.labels[i] < 10);
		count[d.labels[i]]++;
	}
	for (int k = 0; k < 10; k++)
		ck_assert_int_eq(count[k], 6000);
	rt_dataset_free(&d);
}
END_TEST

/* Gunzipped copies load to the same bytes, alone or mixed with .gz. */
START_TEST(test_fashion_plain_copies)
{
	rt_dataset gz, plain;
	rt_err e;
	ck_assert_msg(rt_data_load_fashion(FASHION, false, NULL, &gz, &e), "%s", e.msg);
	char *dir = make_tmpdir();
	static const char *names[] = {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
	for (int i = 0; i < 2; i++) {
		char *src = join(FASHION, names[i]), *srcgz, *dst = join(dir, names[i]);
		ck_assert_int_ge(asprintf(&srcgz, "%s.gz", src), 0);
		size_t len;
		uint8_t *data = gunzip(srcgz, &len);
		write_file(dst, data, len);
		if (i == 0)
			ck_assert_uint_eq(len, 16 + 10000 * 784);
		free(data);
		free(src);
		free(srcgz);
		free(dst);
	}
	ck_assert_msg(rt_data_load_fashion(dir, false, NULL, &plain, &e), "%s", e.msg);
	ck_assert_int_eq(plain.n, gz.n);
	ck_assert_mem_eq(plain.pixels, gz.pixels, (size_t)gz.n * 784);
	ck_assert_mem_eq(plain.labels, gz.labels, (size_t)gz.n * sizeof *gz.labels);
	rt_dataset_free(&plain);

	/* Plain images beside compressed labels. */
	char *labels = join(dir, "t10k-labels-idx1-ubyte");
	char *labels_gz = join(dir, "t10k-labels-idx1-ubyte.gz");
	size_t len;
	uint8_t *data = slurp(labels, &len);
	write_gz(labels_gz, data, len);
	unlink(labels);
	free(data);
	ck_assert_msg(rt_data_load_fashion(dir, false, NULL, &plain, &e), "%s", e.msg);
	ck_assert_mem_eq(plain.labels, gz.labels, (size_t)gz.n * sizeof *gz.labels);
	rt_dataset_free(&plain);

	/* The training files are missing from this directory. */
	memset(&plain, 0x55, sizeof plain);
	ck_assert(!rt_data_load_fashion(dir, true, NULL, &plain, &e));
	ck_assert(is_empty(&plain));
	char *want;
	ck_assert_int_ge(asprintf(&want, "%s/train-images-idx3-ubyte.gz: no such file (nor without "
		".gz); Debian's dataset-fashion-mnist installs it in " FASHION, dir), 0);
	ck_assert_str_eq(e.msg, want);
	free(want);
	free(labels);
	free(labels_gz);
	remove_tmpdir(dir);
	rt_dataset_free(&gz);
}
END_TEST

/* Prefixes of the real test files, compressed and plain, at sampled
 * offsets (the small synthetic pair below gets every offset). */
START_TEST(test_fashion_truncated)
{
	char *dir = make_tmpdir();
	char *img_gz = join(FASHION, "t10k-images-idx3-ubyte.gz");
	char *lab_gz = join(FASHION, "t10k-labels-idx1-ubyte.gz");
	char *cut = join(dir, "cut.gz"), *cut_plain = join(dir, "cut");
	size_t len;
	uint8_t *raw = slurp(img_gz, &len);
	size_t offsets[] = {0, 1, 2, 3, 9, 10, 11, 100, 4096, len / 3, len / 2, len - 9, len - 8,
		len - 5, len - 4, len - 1};
	for (size_t i = 0; i < sizeof offsets / sizeof *offsets; i++) {
		write_file(cut, raw, offsets[i]);
		expect_idx_error(cut, lab_gz, cut, NULL);
	}
	/* A corrupted CRC is noticed too. */
	raw[len - 8] ^= 1;
	write_file(cut, raw, len);
	expect_idx_error(cut, lab_gz, cut, ": corrupt or truncated gzip data (incorrect data check)");
	free(raw);

	rt_err e;
	raw = gunzip(img_gz, &len);
	size_t plain_offsets[] = {0, 1, 3, 4, 5, 15, 16, 17, 784, len / 2, len - 1};
	for (size_t i = 0; i < sizeof plain_offsets / sizeof *plain_offsets; i++) {
		write_file(cut_plain, raw, plain_offsets[i]);
		expect_idx_error(cut_plain, lab_gz, cut_plain, "truncated");
	}
	write_file(cut_plain, raw, len - 1);
	expect_idx_error(cut_plain, lab_gz, cut_plain,
		"truncated: the header promises 7840000 bytes of images, the file has 7839999");
	free(raw);

	/* The labels: a few prefixes through files, each of them in memory
	 * (the plain file is 10008 bytes). */
	size_t img_len;
	uint8_t *img = gunzip(img_gz, &img_len);
	raw = gunzip(lab_gz, &len);
	ck_assert_uint_eq(len, 10008);
	size_t lab_offsets[] = {0, 7, 8, 9, len - 1};
	for (size_t i = 0; i < sizeof lab_offsets / sizeof *lab_offsets; i++) {
		write_file(cut_plain, raw, lab_offsets[i]);
		expect_idx_error(img_gz, cut_plain, cut_plain, NULL);
	}
	int clean = 0;
	for (size_t k = 0; k < len; k++) {
		rt_dataset d;
		clean += !rt_data_parse_idx(img, img_len, raw, k, "img", "lab", &d, &e) && is_empty(&d)
			&& starts_with(e.msg, "lab: ");
	}
	ck_assert_int_eq(clean, (int)len);
	free(img);
	free(raw);
	free(img_gz);
	free(lab_gz);
	free(cut);
	free(cut_plain);
	remove_tmpdir(dir);
}
END_TEST

/* ---- synthetic IDX files ---------------------------------------------- */

START_TEST(test_idx_small_roundtrip)
{
	uint8_t img[256], lab[64];
	size_t img_len, lab_len;
	small_idx(img, &img_len, lab, &lab_len);
	char *dir = make_tmpdir();
	char *ip = join(dir, "i"), *lp = join(dir, "l"), *igz = join(dir, "i.gz"), *lgz = join(dir, "l.gz");
	write_file(ip, img, img_len);
	write_file(lp, lab, lab_len);
	write_gz(igz, img, img_len);
	write_gz(lgz, lab, lab_len);
	const char *pairs[4][2] = {{ip, lp}, {igz, lgz}, {ip, lgz}, {igz, lp}};
	for (int i = 0; i < 4; i++) {
		rt_dataset d;
		rt_err e;
		ck_assert_msg(rt_data_load_idx(pairs[i][0], pairs[i][1], NULL, &d, &e), "%s", e.msg);
		check_small(&d);
		rt_dataset_free(&d);
	}
	rt_dataset d;
	rt_err e;
	ck_assert(rt_data_parse_idx(img, img_len, lab, lab_len, "i", "l", &d, &e));
	check_small(&d);
	rt_dataset_free(&d);
	free(ip);
	free(lp);
	free(igz);
	free(lgz);
	remove_tmpdir(dir);
}
END_TEST

/* Every proper prefix of each of the four files fails cleanly. */
START_TEST(test_idx_small_truncated)
{
	uint8_t img[256], lab[64];
	size_t img_len, lab_len;
	small_idx(img, &img_len, lab, &lab_len);
	char *dir = make_tmpdir();
	char *ip = join(dir, "i"), *lp = join(dir, "l"), *igz = join(dir, "i.gz"), *lgz = join(dir, "l.gz");
	char *cut = join(dir, "cut");
	write_file(ip, img, img_len);
	write_file(lp, lab, lab_len);
	write_gz(igz, img, img_len);
	write_gz(lgz, lab, lab_len);
	const char *files[4] = {ip, igz, lp, lgz};
	for (int f = 0; f < 4; f++) {
		size_t len;
		uint8_t *raw = slurp(files[f], &len);
		for (size_t k = 0; k < len; k++) {
			write_file(cut, raw, k);
			if (f < 2)
				expect_idx_error(cut, lp, cut, NULL);
			else
				expect_idx_error(ip, cut, cut, NULL);
		}
		free(raw);
	}
	/* The in-memory parser, directly. */
	for (size_t k = 0; k < img_len + lab_len; k++) {
		rt_dataset d;
		rt_err e;
		bool cut_img = k < img_len;
		size_t il = cut_img ? k : img_len, ll = cut_img ? lab_len : k - img_len;
		ck_assert(!rt_data_parse_idx(img, il, lab, ll, "img", "lab", &d, &e));
		ck_assert(is_empty(&d));
		ck_assert_msg(starts_with(e.msg, cut_img ? "img: " : "lab: "), "%s", e.msg);
	}
	free(ip);
	free(lp);
	free(igz);
	free(lgz);
	free(cut);
	remove_tmpdir(dir);
}
END_TEST

/* Flipping any byte of a gzip file either changes nothing that matters
 * (the header's time stamp, flags or OS byte) or is an error: never other
 * data, never a crash. */
START_TEST(test_idx_gzip_flips)
{
	uint8_t img[256], lab[64];
	size_t img_len, lab_len;
	small_idx(img, &img_len, lab, &lab_len);
	char *dir = make_tmpdir();
	char *igz = join(dir, "i.gz"), *lp = join(dir, "l");
	write_gz(igz, img, img_len);
	write_file(lp, lab, lab_len);
	size_t len;
	uint8_t *raw = slurp(igz, &len);
	int errors = 0;
	for (size_t k = 0; k < len; k++) {
		raw[k] ^= 0xff;
		write_file(igz, raw, len);
		raw[k] ^= 0xff;
		rt_dataset d;
		rt_err e;
		if (rt_data_load_idx(igz, lp, NULL, &d, &e)) {
			check_small(&d);
			rt_dataset_free(&d);
		} else {
			ck_assert(is_empty(&d));
			ck_assert_msg(starts_with(e.msg, igz), "%s", e.msg);
			errors++;
		}
	}
	ck_assert_int_gt(errors, (int)len - 10);
	free(raw);
	free(igz);
	free(lp);
	remove_tmpdir(dir);
}
END_TEST

START_TEST(test_idx_errors)
{
	uint8_t img[256], lab[64];
	size_t img_len, lab_len;
	small_idx(img, &img_len, lab, &lab_len);
	char *dir = make_tmpdir();
	char *ip = join(dir, "i"), *lp = join(dir, "l"), *bad = join(dir, "bad");
	write_file(ip, img, img_len);
	write_file(lp, lab, lab_len);
	char want[1024];

	/* Missing, not a file, swapped. */
	/* (Said as for every file revc reads: rt_file_open_regular.) */
	expect_idx_error("/nonexistent/i.gz", lp, "cannot open '/nonexistent/i.gz': No such file or directory",
		NULL);
	expect_idx_error(ip, "/nonexistent/l", "cannot open '/nonexistent/l'", NULL);
	snprintf(want, sizeof want, "'%s' is not a regular file", dir);
	expect_idx_error(dir, lp, want, NULL);
	snprintf(want, sizeof want, "%s: has IDX magic 0x00000801, expected 0x00000803 (images)", lp);
	expect_idx_error(lp, ip, lp, want);
	snprintf(want, sizeof want, "%s: has IDX magic 0x00000803, expected 0x00000801 (labels)", ip);
	expect_idx_error(ip, ip, ip, want);

	/* Trailing data. */
	uint8_t more[300];
	memcpy(more, img, img_len);
	memset(more + img_len, 0, 3);
	write_file(bad, more, img_len + 3);
	snprintf(want, sizeof want, "%s: trailing data after the 60 bytes of images (the file is 3 "
		"bytes longer)", bad);
	expect_idx_error(bad, lp, bad, want);
	write_gz(bad, more, img_len + 3);
	expect_idx_error(bad, lp, bad, "trailing data");

	/* Mismatched counts: one label fewer. */
	uint8_t lab4[64];
	memcpy(lab4, lab, lab_len);
	put_be32(lab4 + 4, SN - 1);
	write_file(bad, lab4, lab_len - 1);
	snprintf(want, sizeof want, "%s: 5 images but 4 labels in %s", ip, bad);
	expect_idx_error(ip, bad, ip, want);

	/* A label out of range. */
	memcpy(lab4, lab, lab_len);
	lab4[8 + 3] = 10;
	write_file(bad, lab4, lab_len);
	snprintf(want, sizeof want, "%s: label 10 of example 3 is out of range (10 classes)", bad);
	expect_idx_error(ip, bad, bad, want);

	/* Absurd dimensions, refused before anything is allocated (the data
	 * behind the first two headers is missing); then shapes that are
	 * empty, with exactly their (zero) bytes of data. */
	static const struct {
		uint32_t dim[3];
		const char *msg;
	} absurd[] = {
		{{0xffffffffu, 0xffffffffu, 0xffffffffu}, "img: absurd IDX dimensions"},
		{{1u << 20, 1u << 10, (1u << 4) + 1}, "img: absurd IDX dimensions"}, /* 2^34 + 2^30 */
		{{0, 28, 28}, "img: holds no examples"},
		{{5, 0, 4}, "img: absurd shape 1x0x4"},
		{{5, 3, 0}, "img: absurd shape 1x3x0"},
	};
	for (size_t i = 0; i < sizeof absurd / sizeof *absurd; i++) {
		uint8_t head[16], lh[8 + SN];
		put_be32(head, 0x803);
		for (int k = 0; k < 3; k++)
			put_be32(head + 4 + 4 * k, absurd[i].dim[k]);
		uint32_t n = absurd[i].dim[0] <= SN ? absurd[i].dim[0] : SN;
		put_be32(lh, 0x801);
		put_be32(lh + 4, n);
		memset(lh + 8, 1, SN);
		rt_dataset d;
		rt_err e;
		ck_assert(!rt_data_parse_idx(head, 16, lh, 8 + n, "img", "lab", &d, &e));
		ck_assert(is_empty(&d));
		ck_assert_msg(starts_with(e.msg, absurd[i].msg), "case %zu: %s", i, e.msg);
	}

	/* The largest accepted header whose data is missing is a truncation,
	 * not a 16 GiB allocation. */
	uint8_t head[16];
	put_be32(head, 0x803);
	put_be32(head + 4, 1u << 14);
	put_be32(head + 8, 1u << 10);
	put_be32(head + 12, 1u << 10);
	rt_dataset d;
	rt_err e;
	ck_assert(!rt_data_parse_idx(head, 16, lab, lab_len, "img", "lab", &d, &e));
	ck_assert_str_eq(e.msg, "img: truncated: the header promises 17179869184 bytes of images, "
		"the file has 0");
	ck_assert(is_empty(&d));

	free(ip);
	free(lp);
	free(bad);
	remove_tmpdir(dir);
}
END_TEST

/* ---- limits and hostile gzip data ------------------------------------- */

/* A limit is two-sided to the byte: pixels (one byte each) and labels
 * (four bytes each).  A header that promises more is refused before its
 * data is read: here the data is missing altogether. */
START_TEST(test_idx_limits)
{
	uint8_t img[256], lab[64];
	size_t img_len, lab_len;
	small_idx(img, &img_len, lab, &lab_len);
	char *dir = make_tmpdir();
	char *igz = join(dir, "i.gz"), *lgz = join(dir, "l.gz"), *head = join(dir, "head.gz");
	write_gz(igz, img, img_len);
	write_gz(lgz, lab, lab_len);
	write_gz(head, img, 16);
	const int64_t bytes = SN * (SH * SW + 4);
	rt_dataset d;
	rt_err e;
	rt_data_limit lim = {bytes, NULL};
	ck_assert_msg(rt_data_load_idx(igz, lgz, &lim, &d, &e), "%s", e.msg);
	check_small(&d);
	ck_assert_int_eq(rt_dataset_bytes(&d), bytes);
	rt_dataset_free(&d);

	char want[1024];
	lim.bytes = bytes - 1;
	snprintf(want, sizeof want, "%s: 5 images of 1x3x4 take 80 bytes with their labels, more than "
		"the 79 bytes allowed", igz);
	expect_idx_error_limit(igz, lgz, &lim, want);
	expect_idx_error_limit(head, lgz, &lim, want + strlen(igz));
	lim.what = "what is left";
	expect_idx_error_limit(head, lgz, &lim, "take 80 bytes with their labels, more than what is left");
	/* Without a limit the missing data is a truncation. */
	expect_idx_error(head, lgz, head, "truncated: the header promises 60 bytes of images, the file "
		"has 0");

	/* The absolute cap, pixels and labels together, to the byte. */
	int64_t b;
	ck_assert(rt_dataset_fits((int64_t)1 << 22, 4, 31, 33, NULL, "x", &b, &e));
	ck_assert_int_eq(b, RT_DATA_MAX_BYTES);
	ck_assert(!rt_dataset_fits(((int64_t)1 << 22) + 1, 4, 31, 33, NULL, "x", &b, &e));
	ck_assert_str_eq(e.msg, "x: 4194305 images of 4x31x33 take more than the 2^34 bytes a dataset "
		"may hold");
	/* Synthetic data is held to limits too. */
	lim = (rt_data_limit){10 * (784 + 4) - 1, NULL};
	ck_assert(!rt_data_synthetic(10, 1, 28, 28, 10, 1, &lim, &d, &e));
	ck_assert(is_empty(&d));
	ck_assert_str_eq(e.msg, "synthetic data: 10 images of 1x28x28 take 7880 bytes with their labels, "
		"more than the 7879 bytes allowed");
	lim.bytes++;
	ck_assert(rt_data_synthetic(10, 1, 28, 28, 10, 1, &lim, &d, &e));
	rt_dataset_free(&d);
	free(igz);
	free(lgz);
	free(head);
	remove_tmpdir(dir);
}
END_TEST

/* A gzip bomb: the images the header promises, then hundreds of MiB of
 * zeros in concatenated members (about 1 KiB each per MiB).  Loading stops
 * one byte after the promised data, having read at most two input buffers
 * of the file; concatenated members are otherwise one stream, and anything
 * but a member after a member is corrupt. */
START_TEST(test_idx_gzip_bomb)
{
	enum { MEMBERS = 300 };
	uint8_t img[256], lab[64];
	size_t img_len, lab_len;
	small_idx(img, &img_len, lab, &lab_len);
	char *dir = make_tmpdir();
	char *zeros_gz = join(dir, "zeros.gz"), *bomb = join(dir, "bomb.gz"), *lp = join(dir, "l");
	char *split = join(dir, "split.gz"), *bad = join(dir, "bad.gz");
	write_file(lp, lab, lab_len);
	uint8_t *zeros = calloc(1, 1 << 20);
	write_gz(zeros_gz, zeros, 1 << 20);
	free(zeros);
	size_t zlen, hlen;
	uint8_t *member = slurp(zeros_gz, &zlen);
	write_gz(bomb, img, img_len);
	uint8_t *first = slurp(bomb, &hlen);
	size_t len = hlen + MEMBERS * zlen;
	uint8_t *raw = malloc(len);
	memcpy(raw, first, hlen);
	for (int i = 0; i < MEMBERS; i++)
		memcpy(raw + hlen + i * zlen, member, zlen);
	write_file(bomb, raw, len);
	ck_assert_uint_gt(len, 4 * 65536);
	char want[1024];
	snprintf(want, sizeof want, "%s: trailing data after the 60 bytes of images the header promises "
		"(read no further)", bomb);
	expect_idx_error(bomb, lp, bomb, want);

	/* The stream itself: the file offset after the check. */
	rt_data_in in;
	rt_err e;
	ck_assert(rt_data_in_open(&in, bomb, &e));
	ck_assert(in.z && in.size == -1);
	uint8_t buf[256];
	size_t got;
	bool more;
	ck_assert(rt_data_in_read(&in, buf, img_len, &got, &e) && got == img_len);
	ck_assert_mem_eq(buf, img, img_len);
	ck_assert(rt_data_in_more(&in, &more, &e) && more);
	off_t at = lseek(in.fd, 0, SEEK_CUR);
	ck_assert_msg(at <= 2 * 65536, "read %lld of %zu bytes", (long long)at, len);
	rt_data_in_close(&in);

	/* The header and the data in two members, and an empty member after. */
	write_gz(split, img, 16);
	uint8_t *a = slurp(split, &hlen);
	write_gz(split, img + 16, img_len - 16);
	size_t blen;
	uint8_t *b = slurp(split, &blen);
	memcpy(raw, a, hlen);
	memcpy(raw + hlen, b, blen);
	write_gz(split, img, 0);
	uint8_t *empty = slurp(split, &zlen);
	memcpy(raw + hlen + blen, empty, zlen);
	write_file(split, raw, hlen + blen + zlen);
	rt_dataset d;
	ck_assert_msg(rt_data_load_idx(split, lp, NULL, &d, &e), "%s", e.msg);
	check_small(&d);
	rt_dataset_free(&d);
	/* Junk after the last member. */
	memcpy(raw + hlen + blen, "junk", 4);
	write_file(bad, raw, hlen + blen + 4);
	snprintf(want, sizeof want, "%s: corrupt or truncated gzip data (incorrect header check)", bad);
	expect_idx_error(bad, lp, bad, want);

	free(a);
	free(b);
	free(empty);
	free(raw);
	free(first);
	free(member);
	free(zeros_gz);
	free(bomb);
	free(lp);
	free(split);
	free(bad);
	remove_tmpdir(dir);
}
END_TEST

/* ---- CIFAR-10 --------------------------------------------------------- */

enum { REC = 3073 };

/* Record r of file f: label (f + r) % 10, pixel j = (f*7 + r*3 + j) mod 256. */
static uint8_t *cifar_records(int f, int count)
{
	uint8_t *buf = malloc((size_t)count * REC);
	for (int r = 0; r < count; r++) {
		buf[r * REC] = (uint8_t)((f + r) % 10);
		for (int j = 0; j < REC - 1; j++)
			buf[r * REC + 1 + j] = (uint8_t)(f * 7 + r * 3 + j);
	}
	return buf;
}

static void write_cifar(const char *dir, const char *name, int f, int count)
{
	char *p = join(dir, name);
	uint8_t *buf = cifar_records(f, count);
	write_file(p, buf, (size_t)count * REC);
	free(buf);
	free(p);
}

static void expect_cifar_error(const char *dir, bool train, const rt_data_limit *lim,
	const char *what)
{
	rt_dataset d;
	rt_err e;
	memset(&d, 0x55, sizeof d);
	ck_assert(!rt_data_load_cifar10(dir, train, lim, &d, &e));
	ck_assert(is_empty(&d));
	ck_assert_msg(strstr(e.msg, what), "'%s' lacks '%s'", e.msg, what);
}

START_TEST(test_cifar)
{
	static const int counts[5] = {3, 2, 1, 2, 4};
	char *dir = make_tmpdir();
	char name[64];
	for (int f = 0; f < 5; f++) {
		snprintf(name, sizeof name, "data_batch_%d.bin", f + 1);
		write_cifar(dir, name, f, counts[f]);
	}
	write_cifar(dir, "test_batch.bin", 9, 2);

	rt_dataset d;
	rt_err e;
	ck_assert_msg(rt_data_load_cifar10(dir, true, NULL, &d, &e), "%s", e.msg);
	ck_assert_int_eq(d.n, 12);
	ck_assert_int_eq(d.c, 3);
	ck_assert_int_eq(d.h, 32);
	ck_assert_int_eq(d.w, 32);
	ck_assert_int_eq(d.classes, 10);
	int64_t i = 0;
	for (int f = 0; f < 5; f++)
		for (int r = 0; r < counts[f]; r++, i++) {
			ck_assert_int_eq(d.labels[i], (f + r) % 10);
			/* Red, green and blue planes in CHW order. */
			for (int j = 0; j < REC - 1; j += 97)
				ck_assert_int_eq(d.pixels[i * 3072 + j], (uint8_t)(f * 7 + r * 3 + j));
		}
	int64_t idx[2] = {11, 0};
	float x[2 * 3072];
	int32_t y[2];
	rt_data_batch_f32(&d, idx, 2, x, y);
	ck_assert_int_eq(y[0], d.labels[11]);
	ck_assert(x[3072 + 1024 + 5] == (float)d.pixels[1024 + 5] / 255.0f);
	rt_dataset_free(&d);

	ck_assert_msg(rt_data_load_cifar10(dir, false, NULL, &d, &e), "%s", e.msg);
	ck_assert_int_eq(d.n, 2);
	ck_assert_int_eq(d.labels[1], 0);
	rt_dataset_free(&d);

	/* Limits on the five files together, to the byte, naming the file
	 * that crosses one: 12 records of 3072 pixels and a label. */
	rt_data_limit lim = {12 * 3076, NULL};
	ck_assert_msg(rt_data_load_cifar10(dir, true, &lim, &d, &e), "%s", e.msg);
	ck_assert_int_eq(rt_dataset_bytes(&d), 12 * 3076);
	rt_dataset_free(&d);
	char want[1024];
	lim.bytes--;
	snprintf(want, sizeof want, "%s/data_batch_5.bin: 12 images of 3x32x32 take 36912 bytes with "
		"their labels, more than the 36911 bytes allowed", dir);
	expect_cifar_error(dir, true, &lim, want);
	lim.bytes = 6 * 3076 - 1;
	snprintf(want, sizeof want, "%s/data_batch_3.bin: 6 images of 3x32x32 take", dir);
	expect_cifar_error(dir, true, &lim, want);
	/* A gzip-compressed batch is refused: without a header, only
	 * inflating all of it would tell its size. */
	char *gz = join(dir, "test_batch.bin");
	uint8_t *two = cifar_records(9, 2);
	write_gz(gz, two, 2 * REC);
	snprintf(want, sizeof want, "%s: gzip data; CIFAR-10 batches are read uncompressed", gz);
	expect_cifar_error(dir, false, NULL, want);
	write_file(gz, two, 2 * REC);
	free(two);
	free(gz);

	/* A size that is not a whole number of records, in the third file. */
	char *third = join(dir, "data_batch_3.bin");
	uint8_t *buf = cifar_records(2, 3);
	write_file(third, buf, 2 * REC + 5);
	snprintf(want, sizeof want, "%s: size 6151 is not a multiple of 3073", third);
	expect_cifar_error(dir, true, NULL, want);
	/* A label out of range. */
	buf[REC] = 10;
	write_file(third, buf, 2 * REC);
	snprintf(want, sizeof want, "%s: label 10 of example 1 is out of range (10 classes)", third);
	expect_cifar_error(dir, true, NULL, want);
	/* Empty, missing. */
	write_file(third, buf, 0);
	expect_cifar_error(dir, true, NULL, ": empty");
	unlink(third);
	snprintf(want, sizeof want, "cannot open '%s': No such file or directory", third);
	expect_cifar_error(dir, true, NULL, want);
	expect_cifar_error(NULL, true, NULL, "no directory");
	free(third);

	/* The parser on every prefix of two records. */
	for (size_t k = 0; k < 2 * REC; k++) {
		rt_dataset p;
		bool ok = rt_data_parse_cifar10(buf, k, "x", &p, &e);
		ck_assert_int_eq(ok, k == REC);
		if (ok)
			rt_dataset_free(&p);
		else
			ck_assert(is_empty(&p) && starts_with(e.msg, "x: "));
	}
	free(buf);
	remove_tmpdir(dir);
}
END_TEST

Suite *rt_data_suite(void)
{
	Suite *s = suite_create("rt_data");
	TCase *tc = tcase_create("fashion");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_fashion_test_set);
	tcase_add_test(tc, test_fashion_train_set);
	tcase_add_test(tc, test_fashion_plain_copies);
	tcase_add_test(tc, test_fashion_truncated);
	suite_add_tcase(s, tc);
	tc = tcase_create("idx");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_idx_small_roundtrip);
	tcase_add_test(tc, test_idx_small_truncated);
	tcase_add_test(tc, test_idx_gzip_flips);
	tcase_add_test(tc, test_idx_errors);
	tcase_add_test(tc, test_idx_limits);
	tcase_add_test(tc, test_idx_gzip_bomb);
	suite_add_tcase(s, tc);
	tc = tcase_create("cifar");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_cifar);
	suite_add_tcase(s, tc);
	return s;
}
