/* test_rt_npy.c: .npy reading and writing: round trips, byte-exact
 * agreement with files NumPy wrote, the oracle fixtures, every rejection
 * with its message, truncation at every offset and garbage input.
 *
 * Data files live in tests/data/npy/ under $REVC_SOURCE_ROOT (set by meson). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"
#include "runtime_suites.h"

/* The NumPy-written files are in tests/data/npy; x, y and loss are the
 * fashion-b4 oracle fixture's. */
static void data_path(char *out, size_t n, const char *file)
{
	const char *root = getenv("REVC_SOURCE_ROOT");
	const char *dir = "npy";
	if (strcmp(file, "x.npy") == 0 || strcmp(file, "y.npy") == 0)
		dir = "fashion-b4";
	else if (strcmp(file, "loss.npy") == 0)
		dir = "fashion-b4/grad_f64";
	snprintf(out, n, "%s/tests/data/%s/%s", root ? root : ".", dir, file);
}

static unsigned char *slurp(const char *file, size_t *len)
{
	char path[1024];
	data_path(path, sizeof path, file);
	char *buf;
	rt_err e;
	if (!rt_file_read(path, 1 << 20, &buf, len, &e))
		ck_abort_msg("%s", e.msg);
	return (unsigned char *)buf;
}

/* A temporary directory per test and a path inside it. */
typedef struct {
	char dir[64], path[128];
} tmp_file;

static void tmp_open(tmp_file *t, const char *name)
{
	snprintf(t->dir, sizeof t->dir, "/tmp/revc-npy-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	snprintf(t->path, sizeof t->path, "%s/%s", t->dir, name);
}

static void tmp_close(tmp_file *t)
{
	unlink(t->path);
	ck_assert_int_eq(rmdir(t->dir), 0); /* nothing else (no temporary) left */
}

/* Builds a file image: magic, version, header length, header, then
 * data_bytes bytes of 0x5a.  Returns its length. */
static size_t image(unsigned char *buf, size_t cap, int major, int minor, const char *header,
	size_t data_bytes)
{
	size_t hl = strlen(header), prefix = major >= 2 ? 12 : 10;
	ck_assert_uint_le(prefix + hl + data_bytes, cap);
	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = (unsigned char)major;
	buf[7] = (unsigned char)minor;
	for (size_t i = 0; i < prefix - 8; i++)
		buf[8 + i] = (unsigned char)(hl >> (8 * i));
	memcpy(buf + prefix, header, hl);
	memset(buf + prefix + hl, 0x5a, data_bytes);
	return prefix + hl + data_bytes;
}

/* ---- round trips ------------------------------------------------------ */

/* Element i of a test array of type t, as a double (exactly representable
 * in every type: small integers, some negative, some fractional for floats). */
static double value(rt_npy_dtype t, int64_t i)
{
	switch (t) {
	case RT_NPY_F32:
	case RT_NPY_F64: return (double)(i % 17) * 0.5 - 3.0;
	case RT_NPY_I32:
	case RT_NPY_I64: return (double)(i * 37 % 101) - 50.0;
	case RT_NPY_U8: return (double)(i * 29 % 256);
	default: ck_abort();
	}
	return 0;
}

static void fill(rt_npy_dtype t, int64_t n, void *data)
{
	for (int64_t i = 0; i < n; i++) {
		double v = value(t, i);
		switch (t) {
		case RT_NPY_F32: ((float *)data)[i] = (float)v; break;
		case RT_NPY_F64: ((double *)data)[i] = v; break;
		case RT_NPY_I32: ((int32_t *)data)[i] = (int32_t)v; break;
		case RT_NPY_I64: ((int64_t *)data)[i] = (int64_t)v; break;
		case RT_NPY_U8: ((uint8_t *)data)[i] = (uint8_t)v; break;
		default: ck_abort();
		}
	}
}

START_TEST(test_round_trip)
{
	static const int64_t shapes[5][4] = {{0}, {7}, {2, 3}, {2, 1, 3}, {1, 2, 3, 2}};
	tmp_file t;
	tmp_open(&t, "a.npy");
	for (int dt = 0; dt < RT_NPY_DTYPE_COUNT; dt++) {
		for (int rank = 0; rank <= 4; rank++) {
			int64_t n = 1;
			for (int i = 0; i < rank; i++)
				n *= shapes[rank][i];
			int size = rt_npy_dtype_size((rt_npy_dtype)dt);
			void *data = malloc((size_t)(n * size));
			fill((rt_npy_dtype)dt, n, data);
			rt_err e;
			ck_assert_msg(rt_npy_write(t.path, (rt_npy_dtype)dt, rank, shapes[rank], data, &e),
				"%s", e.msg);
			rt_npy a;
			ck_assert_msg(rt_npy_read(t.path, &a, &e), "%s", e.msg);
			ck_assert_int_eq(a.dtype, dt);
			ck_assert_int_eq(a.rank, rank);
			for (int i = 0; i < rank; i++)
				ck_assert_int_eq(a.dim[i], shapes[rank][i]);
			ck_assert_int_eq(a.count, n);
			ck_assert_mem_eq(a.data, data, (size_t)(n * size));

			double *d = malloc((size_t)n * sizeof *d);
			float *f = malloc((size_t)n * sizeof *f);
			rt_npy_to_f64(&a, d);
			rt_npy_to_f32(&a, f);
			for (int64_t i = 0; i < n; i++) {
				ck_assert_double_eq(d[i], value((rt_npy_dtype)dt, i));
				ck_assert_double_eq((double)f[i], (double)(float)value((rt_npy_dtype)dt, i));
			}
			free(d);
			free(f);
			rt_npy_free(&a);
			ck_assert_ptr_null(a.data);
			free(data);
		}
	}
	tmp_close(&t);
}
END_TEST

START_TEST(test_dtype_names)
{
	static const char *const names[] = {"<f4", "<f8", "<i4", "<i8", "|u1"};
	static const int sizes[] = {4, 8, 4, 8, 1};
	for (int dt = 0; dt < RT_NPY_DTYPE_COUNT; dt++) {
		ck_assert_str_eq(rt_npy_dtype_name((rt_npy_dtype)dt), names[dt]);
		ck_assert_int_eq(rt_npy_dtype_size((rt_npy_dtype)dt), sizes[dt]);
	}
}
END_TEST

/* ---- agreement with NumPy --------------------------------------------- */

/* The writer reproduces files np.save wrote, byte for byte, and the reader
 * gets their values back. */
START_TEST(test_matches_numpy)
{
	static const float f4[6] = {0, 0.25f, 0.5f, 0.75f, 1, 1.25f};
	static const double f8[1] = {2.5};
	static const int32_t i4[3] = {-1, 0, 7};
	static const int64_t i8[4] = {-5, (int64_t)1 << 40, 3, -((int64_t)1 << 50)};
	static const uint8_t u1[5] = {0, 1, 2, 254, 255};
	static const struct {
		const char *file;
		rt_npy_dtype dtype;
		int rank;
		int64_t dim[4];
		const void *data;
	} cases[] = {
		{"np_f4_2x3.npy", RT_NPY_F32, 2, {2, 3}, f4},
		{"np_f8_0d.npy", RT_NPY_F64, 0, {0}, f8},
		{"np_i4_3.npy", RT_NPY_I32, 1, {3}, i4},
		{"np_i8_1x2x1x2.npy", RT_NPY_I64, 4, {1, 2, 1, 2}, i8},
		{"np_u1_5.npy", RT_NPY_U8, 1, {5}, u1},
		{"np_f4_empty.npy", RT_NPY_F32, 2, {12345678901, 0}, f4},
	};
	tmp_file t;
	tmp_open(&t, "w.npy");
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		rt_err e;
		ck_assert_msg(rt_npy_write(t.path, cases[c].dtype, cases[c].rank, cases[c].dim,
			cases[c].data, &e), "%s", e.msg);
		size_t mine_len, np_len;
		char *mine;
		ck_assert(rt_file_read(t.path, 1 << 20, &mine, &mine_len, &e));
		unsigned char *np = slurp(cases[c].file, &np_len);
		ck_assert_msg(mine_len == np_len && !memcmp(mine, np, np_len), "%s differs",
			cases[c].file);

		rt_npy a;
		ck_assert_msg(rt_npy_parse(np, np_len, cases[c].file, &a, &e), "%s", e.msg);
		ck_assert_int_eq(a.dtype, cases[c].dtype);
		ck_assert_int_eq(a.rank, cases[c].rank);
		int64_t n = 1;
		for (int i = 0; i < a.rank; i++) {
			ck_assert_int_eq(a.dim[i], cases[c].dim[i]);
			n *= cases[c].dim[i];
		}
		ck_assert_int_eq(a.count, n);
		ck_assert_ptr_nonnull(a.data);
		ck_assert_mem_eq(a.data, cases[c].data, (size_t)(n * rt_npy_dtype_size(a.dtype)));
		rt_npy_free(&a);
		free(mine);
		free(np);
	}
	tmp_close(&t);
}
END_TEST

START_TEST(test_numpy_v2_v3)
{
	rt_err e;
	rt_npy a;
	char path[1024];
	data_path(path, sizeof path, "np_v2_f8_2x2.npy");
	ck_assert_msg(rt_npy_read(path, &a, &e), "%s", e.msg);
	ck_assert_int_eq(a.dtype, RT_NPY_F64);
	ck_assert_int_eq(a.rank, 2);
	ck_assert_int_eq(a.dim[0], 2);
	ck_assert_int_eq(a.dim[1], 2);
	const double *d = a.data;
	ck_assert_double_eq(d[0], 1.5);
	ck_assert_double_eq(d[1], -2);
	ck_assert_double_eq(d[2], 3);
	ck_assert_double_eq(d[3], 4e300);
	rt_npy_free(&a);

	data_path(path, sizeof path, "np_v3_i4_2.npy");
	ck_assert_msg(rt_npy_read(path, &a, &e), "%s", e.msg);
	ck_assert_int_eq(a.dtype, RT_NPY_I32);
	ck_assert_int_eq(a.rank, 1);
	ck_assert_int_eq(a.dim[0], 2);
	ck_assert_int_eq(((int32_t *)a.data)[0], 7);
	ck_assert_int_eq(((int32_t *)a.data)[1], -8);
	rt_npy_free(&a);
}
END_TEST

/* ---- the oracle fixtures ---------------------------------------------- */

START_TEST(test_fixtures)
{
	char path[1024];
	rt_err e;
	rt_npy a;

	data_path(path, sizeof path, "x.npy");
	ck_assert_msg(rt_npy_read(path, &a, &e), "%s", e.msg);
	ck_assert_int_eq(a.dtype, RT_NPY_F32);
	ck_assert_int_eq(a.rank, 4);
	ck_assert_int_eq(a.dim[0], 4);
	ck_assert_int_eq(a.dim[1], 1);
	ck_assert_int_eq(a.dim[2], 28);
	ck_assert_int_eq(a.dim[3], 28);
	ck_assert_int_eq(a.count, 4 * 28 * 28);
	const float *x = a.data;
	double sum = 0, lo = 1, hi = 0;
	int nonzero = 0;
	for (int64_t i = 0; i < a.count; i++) {
		sum += (double)x[i];
		lo = fmin(lo, (double)x[i]);
		hi = fmax(hi, (double)x[i]);
		nonzero += x[i] > 0;
	}
	ck_assert_double_eq(lo, 0);
	ck_assert_double_eq(hi, 1);
	ck_assert_int_eq(nonzero, 1281);
	ck_assert_double_eq_tol(sum, 868.0274615157396, 1e-9);
	/* x[0,0,14,14] as NumPy prints it. */
	ck_assert_double_eq((double)x[14 * 28 + 14], 0.4313725531101227);
	double *xd = malloc((size_t)a.count * sizeof *xd);
	rt_npy_to_f64(&a, xd);
	ck_assert_double_eq(xd[14 * 28 + 14], 0.4313725531101227);
	free(xd);
	rt_npy_free(&a);

	data_path(path, sizeof path, "y.npy");
	ck_assert_msg(rt_npy_read(path, &a, &e), "%s", e.msg);
	ck_assert_int_eq(a.dtype, RT_NPY_I64);
	ck_assert_int_eq(a.rank, 1);
	ck_assert_int_eq(a.dim[0], 4);
	static const int64_t labels[4] = {9, 2, 1, 1};
	ck_assert_mem_eq(a.data, labels, sizeof labels);
	float yf[4];
	rt_npy_to_f32(&a, yf);
	ck_assert_double_eq((double)yf[0], 9);
	ck_assert_double_eq((double)yf[3], 1);
	rt_npy_free(&a);

	data_path(path, sizeof path, "loss.npy");
	ck_assert_msg(rt_npy_read(path, &a, &e), "%s", e.msg);
	ck_assert_int_eq(a.dtype, RT_NPY_F64);
	ck_assert_int_eq(a.rank, 0);
	ck_assert_int_eq(a.count, 1);
	ck_assert_double_eq(*(double *)a.data, 2.389552251322171);
	rt_npy_free(&a);
}
END_TEST

/* ---- hand-built files ------------------------------------------------- */

/* Headers NumPy never writes but the format (a Python dict literal) allows. */
START_TEST(test_hand_built)
{
	static const struct {
		int major;
		const char *header;
		rt_npy_dtype dtype;
		int rank;
		int64_t dim[3];
	} cases[] = {
		/* Old 16-byte alignment, no trailing comma, no growth padding. */
		{1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}    \n", RT_NPY_F32, 1, {3}},
		/* Keys in another order, double quotes, whitespace and newlines anywhere. */
		{1, "{ \"shape\" :( 2 ,3 , ) ,\n'fortran_order':False,\t'descr':'=f8' , }\n", RT_NPY_F64, 2,
			{2, 3}},
		{1, "{'shape': (), 'descr': '|u1', 'fortran_order': False}\n", RT_NPY_U8, 0, {0}},
		/* Python 2's long suffix, native and byte-order-free spellings. */
		{1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 1L), }\n", RT_NPY_I64, 2, {2, 1}},
		{1, "{'descr': '=i4', 'fortran_order': False, 'shape': (1, 1, 2)}", RT_NPY_I32, 3, {1, 1, 2}},
		{1, "{'descr': '<u1', 'fortran_order': False, 'shape': (0,)}\n", RT_NPY_U8, 1, {0}},
		{1, "{'descr': 'f4', 'fortran_order': False, 'shape': (+2,)}\n", RT_NPY_F32, 1, {2}},
		/* Format 2.0 and 3.0: a 4-byte header length. */
		{2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }         \n", RT_NPY_F32, 2,
			{2, 2}},
		{2, "{'descr':'<i8','fortran_order':False,'shape':(3,)}\n", RT_NPY_I64, 1, {3}},
		{3, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }\n", RT_NPY_F64, 0, {0}},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		int64_t n = 1;
		for (int i = 0; i < cases[c].rank; i++)
			n *= cases[c].dim[i];
		size_t bytes = (size_t)(n * rt_npy_dtype_size(cases[c].dtype));
		unsigned char buf[512];
		size_t len = image(buf, sizeof buf, cases[c].major, 0, cases[c].header, bytes);
		rt_err e;
		rt_npy a;
		ck_assert_msg(rt_npy_parse(buf, len, "h.npy", &a, &e), "case %zu: %s", c, e.msg);
		ck_assert_int_eq(a.dtype, cases[c].dtype);
		ck_assert_int_eq(a.rank, cases[c].rank);
		for (int i = 0; i < a.rank; i++)
			ck_assert_int_eq(a.dim[i], cases[c].dim[i]);
		ck_assert_int_eq(a.count, n);
		ck_assert_ptr_nonnull(a.data);
		for (size_t i = 0; i < bytes; i++)
			ck_assert_int_eq(((unsigned char *)a.data)[i], 0x5a);
		rt_npy_free(&a);
	}
}
END_TEST

/* ---- rejections ------------------------------------------------------- */

#define HDR(descr, fortran, shape) \
	"{'descr': '" descr "', 'fortran_order': " fortran ", 'shape': " shape ", }\n"

START_TEST(test_rejections)
{
	static const struct {
		int major, minor;
		const char *header;
		size_t data;
		const char *msg; /* after "r.npy: " */
	} cases[] = {
		{4, 0, HDR("<f4", "False", "(1,)"), 4,
			"unsupported .npy format version 4.0 (supported: 1.0, 2.0, 3.0)"},
		{1, 1, HDR("<f4", "False", "(1,)"), 4,
			"unsupported .npy format version 1.1 (supported: 1.0, 2.0, 3.0)"},
		{0, 0, HDR("<f4", "False", "(1,)"), 4,
			"unsupported .npy format version 0.0 (supported: 1.0, 2.0, 3.0)"},
		{1, 0, HDR("<f4", "True", "(2, 3)"), 24,
			"Fortran-ordered arrays are not supported; save with np.ascontiguousarray"},
		{1, 0, HDR(">f4", "False", "(1,)"), 4,
			"big-endian arrays are not supported ('>f4'); save with arr.astype('<f4')"},
		{1, 0, HDR(">i8", "False", "(1,)"), 8,
			"big-endian arrays are not supported ('>i8'); save with arr.astype('<i8')"},
		{1, 0, HDR("|O", "False", "(1,)"), 8, "object arrays are not supported ('|O')"},
		{1, 0, HDR("<U5", "False", "(1,)"), 20, "string arrays are not supported ('<U5')"},
		{1, 0, HDR("|S3", "False", "(1,)"), 3, "string arrays are not supported ('|S3')"},
		{1, 0, HDR("|V8", "False", "(1,)"), 8,
			"structured and void arrays are not supported ('|V8')"},
		{1, 0, "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,), }\n",
			8, "structured arrays are not supported"},
		{1, 0, HDR("<i2", "False", "(1,)"), 2,
			"unsupported dtype '<i2' (supported: <f4, <f8, <i4, <i8, |u1)"},
		{1, 0, HDR("|i1", "False", "(1,)"), 1,
			"unsupported dtype '|i1' (supported: <f4, <f8, <i4, <i8, |u1)"},
		{1, 0, HDR("<u4", "False", "(1,)"), 4,
			"unsupported dtype '<u4' (supported: <f4, <f8, <i4, <i8, |u1)"},
		{1, 0, HDR("|f4", "False", "(1,)"), 4,
			"unsupported dtype '|f4' (supported: <f4, <f8, <i4, <i8, |u1)"},
		{1, 0, HDR("<f4", "False", "(2, -3)"), 0, "shape has a negative dimension"},
		{1, 0, HDR("<f4", "False", "(99999999999999999999999999,)"), 0,
			"shape has an absurd dimension (more than 2^40)"},
		{1, 0, HDR("<f4", "False", "(1099511627777,)"), 0,
			"shape has an absurd dimension (more than 2^40)"},
		{1, 0, HDR("<f4", "False", "(1099511627776, 1099511627776)"), 0,
			"array is too large: its element count overflows"},
		{1, 0, HDR("<f8", "False", "(1048576, 1048576)"), 0,
			"array is too large: 1099511627776 elements of 8 bytes exceed 2^40 bytes"},
		{1, 0, HDR("<f4", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 4,
			"arrays of rank above 8 are not supported"},
		{1, 0, HDR("<f4", "False", "(2, 3)"), 23, "file is truncated: 23 bytes of data, expected 24"},
		{1, 0, HDR("<f4", "False", "(2, 3)"), 25, "1 trailing bytes after the 24 bytes of data"},
		{1, 0, HDR("<f4", "False", "()"), 0, "file is truncated: 0 bytes of data, expected 4"},
		/* Malformed headers. */
		{1, 0, "", 0, "malformed header: expected '{' (at byte 0 of the header)"},
		{1, 0, "[1, 2]\n", 0, "malformed header: expected '{' (at byte 0 of the header)"},
		{1, 0, HDR("<f4", "False", "(3)"), 12,
			"malformed header: 'shape' must be a tuple; a 1-tuple is written (3,) (at byte 53 of the header)"},
		{1, 0, HDR("<f4", "False", "3"), 12,
			"malformed header: 'shape' must be a tuple of integers (at byte 50 of the header)"},
		{1, 0, HDR("<f4", "False", "(3.0,)"), 12,
			"malformed header: expected ',' or ')' in 'shape' (at byte 52 of the header)"},
		{1, 0, HDR("<f4", "False", "(3 4)"), 48,
			"malformed header: expected ',' or ')' in 'shape' (at byte 53 of the header)"},
		{1, 0, HDR("<f4", "False", "(,)"), 0,
			"malformed header: 'shape' must be a tuple of integers (at byte 51 of the header)"},
		{1, 0, HDR("<f4", "False", "(0x10,)"), 0,
			"malformed header: 'shape' must be a tuple of integers (at byte 52 of the header)"},
		{1, 0, HDR("<f4", "0", "(1,)"), 4,
			"malformed header: 'fortran_order' must be True or False (at byte 34 of the header)"},
		{1, 0, "{'descr': '<f4', 'fortran_order': False}\n", 4, "malformed header: missing key 'shape'"},
		{1, 0, "{'descr': '<f4', 'shape': (1,)}\n", 4,
			"malformed header: missing key 'fortran_order'"},
		{1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}\n", 4,
			"malformed header: unknown key 'extra'"},
		{1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\n", 4,
			"malformed header: duplicate key 'descr'"},
		{1, 0, "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}\n", 4,
			"malformed header: expected ',' or '}' after a value (at byte 16 of the header)"},
		{1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), \n", 4,
			"malformed header: expected a quoted string (at byte 57 of the header)"},
		{1, 0, "{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}\n", 4,
			"malformed header: expected ',' or '}' after a value (at byte 17 of the header)"},
		{1, 0, "{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}\n", 4,
			"malformed header: expected ':' after a key (at byte 9 of the header)"},
		{1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x\n", 4,
			"malformed header: unexpected text after the dict (at byte 56 of the header)"},
		{1, 0, "{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': (1,)}\n", 4,
			"malformed header: escape sequences in strings are not supported (at byte 12 of the header)"},
		{1, 0, "{'descr': '<f4\n', 'fortran_order': False, 'shape': (1,)}\n", 4,
			"malformed header: unterminated string (at byte 14 of the header)"},
		{1, 0, "{'descr': '<f4", 4, "malformed header: unterminated string (at byte 14 of the header)"},
		{1, 0, "{'descr': 5, 'fortran_order': False, 'shape': (1,)}\n", 4,
			"malformed header: expected a quoted string (at byte 10 of the header)"},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		unsigned char buf[512];
		size_t len = image(buf, sizeof buf, cases[c].major, cases[c].minor, cases[c].header,
			cases[c].data);
		rt_err e;
		rt_npy a;
		a.data = &a; /* must be cleared on failure */
		ck_assert_msg(!rt_npy_parse(buf, len, "r.npy", &a, &e), "case %zu parsed", c);
		char want[600];
		snprintf(want, sizeof want, "r.npy: %s", cases[c].msg);
		ck_assert_msg(!strcmp(e.msg, want), "case %zu:\n got  %s\n want %s", c, e.msg, want);
		ck_assert_ptr_null(a.data);
		rt_npy_free(&a);
	}
}
END_TEST

/* A header with an embedded NUL: strlen-based image() cannot build it. */
START_TEST(test_nul_in_header)
{
	static const char h[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\n\0   \n";
	unsigned char buf[128];
	size_t hl = sizeof h - 1;
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (unsigned char)hl;
	buf[9] = 0;
	memcpy(buf + 10, h, hl);
	memset(buf + 10 + hl, 0, 4);
	rt_err e;
	rt_npy a;
	ck_assert(!rt_npy_parse(buf, 10 + hl + 4, "n.npy", &a, &e));
	ck_assert_str_eq(e.msg,
		"n.npy: malformed header: unexpected text after the dict (at byte 56 of the header)");
}
END_TEST

START_TEST(test_bad_magic_and_short_files)
{
	rt_err e;
	rt_npy a;
	ck_assert(!rt_npy_parse("", 0, "m.npy", &a, &e));
	ck_assert_str_eq(e.msg, "m.npy: not a .npy file");
	ck_assert(!rt_npy_parse("PK\3\4 a zip file, say", 20, "m.npy", &a, &e));
	ck_assert_str_eq(e.msg, "m.npy: not a .npy file");
	ck_assert(!rt_npy_parse("\x93NUMPX\1\0", 8, "m.npy", &a, &e));
	ck_assert_str_eq(e.msg, "m.npy: not a .npy file");
	ck_assert(!rt_npy_parse("\x93NU", 3, "m.npy", &a, &e));
	ck_assert_str_eq(e.msg, "m.npy: file is truncated: 3 bytes");
	ck_assert(!rt_npy_parse("\x93NUMPY\1", 7, "m.npy", &a, &e));
	ck_assert_str_eq(e.msg, "m.npy: file is truncated: 7 bytes");
	ck_assert(!rt_npy_parse("\x93NUMPY\2\0\1\0\0", 11, "m.npy", &a, &e));
	ck_assert_str_eq(e.msg, "m.npy: file is truncated: 11 bytes");
	ck_assert(!rt_npy_parse("\x93NUMPY\1\0\x76\0{'descr'", 17, "m.npy", &a, &e));
	ck_assert_str_eq(e.msg, "m.npy: file is truncated: header of 118 bytes, only 7 present");
	/* Through the file reader, the path is the name. */
	char path[1024];
	data_path(path, sizeof path, "README.md");
	ck_assert(!rt_npy_read(path, &a, &e));
	char want[1100];
	snprintf(want, sizeof want, "%s: not a .npy file", path);
	ck_assert_str_eq(e.msg, want);
	ck_assert(!rt_npy_read("/nonexistent/x.npy", &a, &e));
	ck_assert_str_eq(e.msg, "cannot open '/nonexistent/x.npy': No such file or directory");
}
END_TEST

/* The message the task names, on the real fixture. */
START_TEST(test_truncated_fixture_message)
{
	size_t len;
	unsigned char *x = slurp("x.npy", &len);
	rt_err e;
	rt_npy a;
	ck_assert(!rt_npy_parse(x, 128 + 1234, "x.npy", &a, &e));
	ck_assert_str_eq(e.msg, "x.npy: file is truncated: 1234 bytes of data, expected 12544");
	free(x);
}
END_TEST

/* Every proper prefix of a valid file fails with a message; one byte more
 * fails as trailing data. */
START_TEST(test_truncation_everywhere)
{
	static const char *const files[] = {"x.npy", "y.npy", "loss.npy", "np_v2_f8_2x2.npy",
		"np_v3_i4_2.npy"};
	for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
		size_t len;
		unsigned char *buf = slurp(files[f], &len);
		rt_err e;
		rt_npy a;
		for (size_t n = 0; n < len; n++) {
			/* A copy of exactly n bytes, so ASan sees any read past it. */
			unsigned char *cut = malloc(n ? n : 1);
			memcpy(cut, buf, n);
			e.msg[0] = 0;
			ck_assert_msg(!rt_npy_parse(cut, n, files[f], &a, &e), "%s at %zu parsed", files[f], n);
			ck_assert_msg(strncmp(e.msg, files[f], strlen(files[f])) == 0 && strlen(e.msg) > 10,
				"%s at %zu: '%s'", files[f], n, e.msg);
			ck_assert_ptr_null(a.data);
			free(cut);
		}
		unsigned char *more = malloc(len + 1);
		memcpy(more, buf, len);
		more[len] = 0;
		ck_assert(!rt_npy_parse(more, len + 1, files[f], &a, &e));
		ck_assert_ptr_nonnull(strstr(e.msg, "1 trailing bytes after the"));
		ck_assert(rt_npy_parse(more, len, files[f], &a, &e));
		rt_npy_free(&a);
		free(more);
		free(buf);
	}
}
END_TEST

/* ---- garbage ---------------------------------------------------------- */

static uint64_t next(uint64_t *s)
{
	*s = *s * 6364136223846793005u + 1442695040888963407u;
	return *s >> 33;
}

/* Parses buf[0..len) from an exact-size copy; success must yield a
 * consistent array, failure a message. */
static void parse_any(const unsigned char *buf, size_t len)
{
	unsigned char *copy = malloc(len ? len : 1);
	memcpy(copy, buf, len);
	rt_err e;
	rt_npy a;
	e.msg[0] = 0;
	if (rt_npy_parse(copy, len, "g.npy", &a, &e)) {
		int64_t n = 1;
		for (int i = 0; i < a.rank; i++)
			n *= a.dim[i];
		ck_assert_int_eq(n, a.count);
		ck_assert_ptr_nonnull(a.data);
		rt_npy_free(&a);
	} else {
		ck_assert(strncmp(e.msg, "g.npy: ", 7) == 0);
		ck_assert_ptr_null(a.data);
	}
	free(copy);
}

START_TEST(test_garbage)
{
	uint64_t s = 12345;
	unsigned char buf[300];
	/* Pure noise, with and without a valid magic and version. */
	for (int it = 0; it < 20000; it++) {
		size_t len = next(&s) % sizeof buf;
		for (size_t i = 0; i < len; i++)
			buf[i] = (unsigned char)next(&s);
		if (it % 2 && len >= 12) {
			memcpy(buf, "\x93NUMPY", 6);
			buf[6] = (unsigned char)(1 + next(&s) % 3);
			buf[7] = 0;
			buf[8] = (unsigned char)(next(&s) % (len - 9));
			buf[9] = buf[10] = buf[11] = 0;
		}
		parse_any(buf, len);
	}
	/* Headers of dict-literal characters: the parser's paths, not its first
	 * check. */
	static const char alphabet[] = "{}()[],:'\" \n0123456789-+Ldescrfortan_shapeTrueFalse<>=|f4i8u1";
	for (int it = 0; it < 50000; it++) {
		size_t hl = next(&s) % 120, data = next(&s) % 40;
		memcpy(buf, "\x93NUMPY\x01\x00", 8);
		buf[8] = (unsigned char)hl;
		buf[9] = 0;
		for (size_t i = 0; i < hl; i++)
			buf[10 + i] = (unsigned char)alphabet[next(&s) % (sizeof alphabet - 1)];
		parse_any(buf, 10 + hl + data);
	}
}
END_TEST

/* Valid files with a few bytes changed: mostly near-valid headers. */
START_TEST(test_mutations)
{
	static const char *const files[] = {"y.npy", "loss.npy", "np_i8_1x2x1x2.npy", "np_v2_f8_2x2.npy"};
	uint64_t s = 99;
	static const char interesting[] = "(),:'{} -0123456789\n\0\xff";
	for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
		size_t len;
		unsigned char *orig = slurp(files[f], &len);
		unsigned char *buf = malloc(len);
		for (int it = 0; it < 20000; it++) {
			memcpy(buf, orig, len);
			int edits = 1 + (int)(next(&s) % 4);
			for (int k = 0; k < edits; k++) {
				size_t at = next(&s) % (len < 128 ? len : 128);
				buf[at] = next(&s) % 2 ? (unsigned char)next(&s)
					: (unsigned char)interesting[next(&s) % (sizeof interesting - 1)];
			}
			parse_any(buf, next(&s) % 4 ? len : next(&s) % (len + 1));
		}
		free(buf);
		free(orig);
	}
}
END_TEST

/* ---- writer errors ---------------------------------------------------- */

START_TEST(test_write_errors)
{
	tmp_file t;
	tmp_open(&t, "bad.npy");
	rt_err e;
	float x = 1;
	int64_t dims[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
	ck_assert(!rt_npy_write(t.path, RT_NPY_F32, 9, dims, &x, &e));
	ck_assert_ptr_nonnull(strstr(e.msg, "cannot write an array of rank 9 (0 to 8 are supported)"));
	int64_t neg[2] = {2, -1};
	ck_assert(!rt_npy_write(t.path, RT_NPY_F32, 2, neg, &x, &e));
	ck_assert_ptr_nonnull(strstr(e.msg, "cannot write an array with shape dimension -1"));
	int64_t huge[2] = {(int64_t)1 << 30, (int64_t)1 << 30};
	ck_assert(!rt_npy_write(t.path, RT_NPY_F32, 2, huge, &x, &e));
	ck_assert_ptr_nonnull(strstr(e.msg, "cannot write an array of more than 2^40 bytes"));
	ck_assert_int_eq(access(t.path, F_OK), -1); /* nothing was created */
	ck_assert(!rt_npy_write("/nonexistent/dir/a.npy", RT_NPY_F32, 0, NULL, &x, &e));
	ck_assert_ptr_nonnull(strstr(e.msg, "cannot write '/nonexistent/dir/a.npy'"));
	/* A failed write leaves an existing file alone. */
	ck_assert(rt_npy_write(t.path, RT_NPY_F32, 0, NULL, &x, &e));
	ck_assert(!rt_npy_write(t.path, RT_NPY_F32, 2, neg, &x, &e));
	rt_npy a;
	ck_assert(rt_npy_read(t.path, &a, &e));
	ck_assert_int_eq(a.rank, 0);
	ck_assert_double_eq((double)*(float *)a.data, 1);
	rt_npy_free(&a);
	tmp_close(&t);
}
END_TEST

Suite *rt_npy_suite(void)
{
	Suite *s = suite_create("rt_npy");
	TCase *tc = tcase_create("npy");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_dtype_names);
	tcase_add_test(tc, test_matches_numpy);
	tcase_add_test(tc, test_numpy_v2_v3);
	tcase_add_test(tc, test_fixtures);
	tcase_add_test(tc, test_hand_built);
	tcase_add_test(tc, test_rejections);
	tcase_add_test(tc, test_nul_in_header);
	tcase_add_test(tc, test_bad_magic_and_short_files);
	tcase_add_test(tc, test_truncated_fixture_message);
	tcase_add_test(tc, test_truncation_everywhere);
	tcase_add_test(tc, test_garbage);
	tcase_add_test(tc, test_mutations);
	tcase_add_test(tc, test_write_errors);
	suite_add_tcase(s, tc);
	return s;
}
