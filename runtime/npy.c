/* npy.c: reading and writing NumPy .npy files (format versions 1.0, 2.0 and
 * 3.0), the format revc exchanges parameters, gradients, inputs and labels in.
 *
 * A file is the magic "\x93NUMPY", a major and minor version byte, a header
 * length (2 bytes little-endian in 1.0, 4 bytes in 2.0 and 3.0), a header
 * that is a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (4, 1, 28, 28), }
 * padded with spaces and a newline, and then the raw elements in C order.
 *
 * Input is untrusted (a fuzzer runs rt_npy_parse): every read is bounds
 * checked against the buffer, and the header is parsed as the small subset
 * of Python literal syntax that NumPy writes (keys in any order, whitespace
 * anywhere, trailing commas, 1-tuples, 0-tuples), not matched as a string.
 * Sizes go through ir_size_mul and are capped at IR_MAX_BYTES before any
 * allocation. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* Elements are stored little-endian; on a little-endian host they are
 * native values and are copied as they are. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.c assumes a little-endian host");

static const struct {
	const char *descr; /* what the writer puts in the header */
	char kind;         /* NumPy's type character: f, i, u */
	int size;
	const char *word;  /* revc's name (manifests, messages) */
} dtypes[] = {
	[RT_NPY_F32] = {"<f4", 'f', 4, "f32"},
	[RT_NPY_F64] = {"<f8", 'f', 8, "f64"},
	[RT_NPY_I32] = {"<i4", 'i', 4, "i32"},
	[RT_NPY_I64] = {"<i8", 'i', 8, "i64"},
	[RT_NPY_U8] = {"|u1", 'u', 1, "u8"},
};
_Static_assert(sizeof dtypes / sizeof dtypes[0] == RT_NPY_DTYPE_COUNT, "dtypes[] must cover rt_npy_dtype");

static const char magic[6] = "\x93NUMPY";

const char *rt_npy_dtype_name(rt_npy_dtype t)
{
	IR_ASSERT((unsigned)t < RT_NPY_DTYPE_COUNT);
	return dtypes[t].descr;
}

int rt_npy_dtype_size(rt_npy_dtype t)
{
	IR_ASSERT((unsigned)t < RT_NPY_DTYPE_COUNT);
	return dtypes[t].size;
}

const char *rt_npy_dtype_word(rt_npy_dtype t)
{
	IR_ASSERT((unsigned)t < RT_NPY_DTYPE_COUNT);
	return dtypes[t].word;
}

int rt_npy_dims_str(int rank, const int64_t *dim, char *buf, size_t n)
{
	int len = snprintf(buf, n, "[");
	for (int i = 0; i < rank; i++) {
		size_t at = (size_t)len < n ? (size_t)len : n;
		len += snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)dim[i]);
	}
	size_t at = (size_t)len < n ? (size_t)len : n;
	return len + snprintf(buf + at, n - at, "]");
}

void rt_npy_free(rt_npy *a)
{
	free(a->data);
	memset(a, 0, sizeof *a);
}

/* ---- header parsing --------------------------------------------------- */

typedef struct {
	const unsigned char *p, *start, *end;
	const char *name;
	rt_err *e;
} hdr;

static bool malformed(hdr *h, const char *what)
{
	return rt_errorf(h->e, "%s: malformed header: %s (at byte %td of the header)", h->name, what,
		h->p - h->start);
}

/* Copies a header string into out for a message: at most 24 bytes, with
 * anything unprintable or a quote shown as '?'. */
static void printable(const unsigned char *s, size_t n, char out[32])
{
	size_t i, k = 0;
	for (i = 0; i < n && k < 24; i++)
		out[k++] = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\'' ? (char)s[i] : '?';
	if (i < n) {
		memcpy(out + k, "...", 3);
		k += 3;
	}
	out[k] = 0;
}

/* Python's whitespace between tokens; inside brackets newlines are too. */
static void skip_ws(hdr *h)
{
	while (h->p < h->end && *h->p && strchr(" \t\r\n\f\v", *h->p))
		h->p++;
}

/* Skips whitespace and consumes c if it comes next. */
static bool accept(hdr *h, char c)
{
	skip_ws(h);
	if (h->p < h->end && *h->p == c) {
		h->p++;
		return true;
	}
	return false;
}

/* A quoted string without escapes ('...' or "..."); *s and *n get its
 * contents. */
static bool parse_string(hdr *h, const unsigned char **s, size_t *n)
{
	skip_ws(h);
	if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
		return malformed(h, "expected a quoted string");
	unsigned char q = *h->p++;
	const unsigned char *b = h->p;
	while (h->p < h->end && *h->p != q) {
		if (*h->p == '\\')
			return malformed(h, "escape sequences in strings are not supported");
		if (*h->p == '\n')
			return malformed(h, "unterminated string");
		h->p++;
	}
	if (h->p >= h->end)
		return malformed(h, "unterminated string");
	*s = b;
	*n = (size_t)(h->p - b);
	h->p++;
	return true;
}

static bool is_ident(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* True or False. */
static bool parse_bool(hdr *h, bool *v)
{
	skip_ws(h);
	const unsigned char *b = h->p;
	while (h->p < h->end && is_ident(*h->p))
		h->p++;
	size_t n = (size_t)(h->p - b);
	if (n == 4 && !memcmp(b, "True", 4))
		*v = true;
	else if (n == 5 && !memcmp(b, "False", 5))
		*v = false;
	else {
		h->p = b;
		return malformed(h, "'fortran_order' must be True or False");
	}
	return true;
}

/* A non-negative decimal integer, optionally signed, optionally with the 'L'
 * suffix of files written by Python 2.  Dimensions beyond IR_MAX_BYTES are
 * refused here, so the value never overflows. */
static bool parse_dim(hdr *h, int64_t *v)
{
	skip_ws(h);
	bool neg = false;
	if (h->p < h->end && (*h->p == '-' || *h->p == '+')) {
		neg = *h->p++ == '-';
		skip_ws(h);
	}
	if (h->p >= h->end || *h->p < '0' || *h->p > '9')
		return malformed(h, "'shape' must be a tuple of integers");
	int64_t x = 0;
	bool big = false;
	while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
		if (!big)
			x = x * 10 + (*h->p - '0');
		big = big || x > IR_MAX_BYTES;
		h->p++;
	}
	if (h->p < h->end && (*h->p == 'L' || *h->p == 'l'))
		h->p++;
	if (h->p < h->end && is_ident(*h->p))
		return malformed(h, "'shape' must be a tuple of integers");
	if (neg && x != 0)
		return rt_errorf(h->e, "%s: shape has a negative dimension", h->name);
	if (big)
		return rt_errorf(h->e, "%s: shape has an absurd dimension (more than 2^40)", h->name);
	*v = x;
	return true;
}

/* A tuple of integers: (), (3,), (3, 4), (3, 4,). */
static bool parse_shape(hdr *h, rt_npy *out)
{
	if (!accept(h, '('))
		return malformed(h, "'shape' must be a tuple of integers");
	out->rank = 0;
	if (accept(h, ')'))
		return true;
	for (;;) {
		if (out->rank == RT_NPY_MAX_RANK)
			return rt_errorf(h->e, "%s: arrays of rank above %d are not supported", h->name,
				RT_NPY_MAX_RANK);
		if (!parse_dim(h, &out->dim[out->rank]))
			return false;
		out->rank++;
		bool comma = accept(h, ',');
		if (accept(h, ')')) {
			/* (3) is an integer in parentheses, not a tuple. */
			if (out->rank == 1 && !comma)
				return malformed(h, "'shape' must be a tuple; a 1-tuple is written (3,)");
			return true;
		}
		if (!comma)
			return malformed(h, "expected ',' or ')' in 'shape'");
	}
}

/* Maps a descr string to a dtype, or explains why it is not supported. */
static bool parse_descr(hdr *h, const unsigned char *s, size_t n, rt_npy_dtype *t)
{
	char shown[32];
	printable(s, n, shown);
	char order = 0;
	if (n > 0 && s[0] && strchr("<>=|", s[0])) {
		order = (char)s[0];
		s++;
		n--;
	}
	if (n > 0 && s[0] == 'O')
		return rt_errorf(h->e, "%s: object arrays are not supported ('%s')", h->name, shown);
	if (n > 0 && (s[0] == 'U' || s[0] == 'S' || s[0] == 'a'))
		return rt_errorf(h->e, "%s: string arrays are not supported ('%s')", h->name, shown);
	if (n > 0 && s[0] == 'V')
		return rt_errorf(h->e, "%s: structured and void arrays are not supported ('%s')", h->name,
			shown);
	for (int i = 0; i < RT_NPY_DTYPE_COUNT; i++) {
		if (n != 2 || s[0] != dtypes[i].kind || s[1] != '0' + dtypes[i].size)
			continue;
		if (dtypes[i].size > 1 && order == '>')
			return rt_errorf(h->e,
				"%s: big-endian arrays are not supported ('%s'); save with arr.astype('%s')",
				h->name, shown, dtypes[i].descr);
		/* '|' (byte order irrelevant) only makes sense for single bytes. */
		if (dtypes[i].size > 1 && order == '|')
			break;
		*t = (rt_npy_dtype)i;
		return true;
	}
	return rt_errorf(h->e, "%s: unsupported dtype '%s' (supported: <f4, <f8, <i4, <i8, |u1)", h->name,
		shown);
}

enum { KEY_DESCR, KEY_FORTRAN, KEY_SHAPE, KEY_COUNT };

/* Parses the header dict into out->dtype, out->rank and out->dim. */
static bool parse_header(hdr *h, rt_npy *out)
{
	static const char *const keys[] = {"descr", "fortran_order", "shape"};
	_Static_assert(sizeof keys / sizeof keys[0] == KEY_COUNT, "keys[] must cover KEY_*");
	bool seen[KEY_COUNT] = {false};
	const unsigned char *descr = NULL;
	size_t descr_len = 0;
	bool fortran = false;

	if (!accept(h, '{'))
		return malformed(h, "expected '{'");
	while (!accept(h, '}')) {
		const unsigned char *k;
		size_t n;
		if (!parse_string(h, &k, &n))
			return false;
		int key = 0;
		while (key < KEY_COUNT && !(strlen(keys[key]) == n && !memcmp(keys[key], k, n)))
			key++;
		if (key == KEY_COUNT) {
			char shown[32];
			printable(k, n, shown);
			return rt_errorf(h->e, "%s: malformed header: unknown key '%s'", h->name, shown);
		}
		if (seen[key])
			return rt_errorf(h->e, "%s: malformed header: duplicate key '%s'", h->name, keys[key]);
		seen[key] = true;
		if (!accept(h, ':'))
			return malformed(h, "expected ':' after a key");
		switch (key) {
		case KEY_DESCR:
			skip_ws(h);
			if (h->p < h->end && *h->p == '[')
				return rt_errorf(h->e, "%s: structured arrays are not supported", h->name);
			if (!parse_string(h, &descr, &descr_len))
				return false;
			break;
		case KEY_FORTRAN:
			if (!parse_bool(h, &fortran))
				return false;
			break;
		case KEY_SHAPE:
			if (!parse_shape(h, out))
				return false;
			break;
		}
		if (accept(h, '}'))
			break;
		if (!accept(h, ','))
			return malformed(h, "expected ',' or '}' after a value");
	}
	/* Only the padding may follow the dict. */
	skip_ws(h);
	if (h->p != h->end)
		return malformed(h, "unexpected text after the dict");
	for (int key = 0; key < KEY_COUNT; key++)
		if (!seen[key])
			return rt_errorf(h->e, "%s: malformed header: missing key '%s'", h->name, keys[key]);
	if (!parse_descr(h, descr, descr_len, &out->dtype))
		return false;
	if (fortran)
		return rt_errorf(h->e,
			"%s: Fortran-ordered arrays are not supported; save with np.ascontiguousarray",
			h->name);
	return true;
}

/* Validates a whole file image and fills in everything of out but data;
 * *data_off is where the elements start.  The data after the header must be
 * exactly count * size bytes. */
static bool parse_image(const unsigned char *b, size_t len, const char *name, rt_npy *out,
	size_t *data_off, rt_err *e)
{
	memset(out, 0, sizeof *out);
	if (len < sizeof magic) {
		if (len > 0 && !memcmp(b, magic, len))
			return rt_errorf(e, "%s: file is truncated: %zu bytes", name, len);
		return rt_errorf(e, "%s: not a .npy file", name);
	}
	if (memcmp(b, magic, sizeof magic))
		return rt_errorf(e, "%s: not a .npy file", name);
	if (len < 8)
		return rt_errorf(e, "%s: file is truncated: %zu bytes", name, len);
	int major = b[6], minor = b[7];
	if (minor != 0 || major < 1 || major > 3)
		return rt_errorf(e, "%s: unsupported .npy format version %d.%d (supported: 1.0, 2.0, 3.0)",
			name, major, minor);
	size_t prefix = major == 1 ? 10 : 12;
	if (len < prefix)
		return rt_errorf(e, "%s: file is truncated: %zu bytes", name, len);
	uint32_t hlen = (uint32_t)b[8] | (uint32_t)b[9] << 8;
	if (major > 1)
		hlen |= (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
	if (hlen > len - prefix)
		return rt_errorf(e, "%s: file is truncated: header of %u bytes, only %zu present", name,
			(unsigned)hlen, len - prefix);

	hdr h = {b + prefix, b + prefix, b + prefix + hlen, name, e};
	if (!parse_header(&h, out))
		return false;

	int64_t count = 1, bytes;
	for (int i = 0; i < out->rank; i++)
		if (!ir_size_mul(count, out->dim[i], &count))
			return rt_errorf(e, "%s: array is too large: its element count overflows", name);
	if (!ir_size_mul(count, dtypes[out->dtype].size, &bytes) || bytes > IR_MAX_BYTES)
		return rt_errorf(e, "%s: array is too large: %lld elements of %d bytes exceed 2^40 bytes",
			name, (long long)count, dtypes[out->dtype].size);
	out->count = count;

	size_t off = prefix + hlen, avail = len - off;
	if ((uint64_t)avail < (uint64_t)bytes)
		return rt_errorf(e, "%s: file is truncated: %zu bytes of data, expected %lld", name, avail,
			(long long)bytes);
	if ((uint64_t)avail > (uint64_t)bytes)
		return rt_errorf(e, "%s: %zu trailing bytes after the %lld bytes of data", name,
			avail - (size_t)bytes, (long long)bytes);
	*data_off = off;
	return true;
}

bool rt_npy_parse(const void *buf, size_t len, const char *name, rt_npy *out, rt_err *e)
{
	size_t off;
	if (!parse_image(buf, len, name, out, &off, e)) {
		memset(out, 0, sizeof *out);
		return false;
	}
	size_t bytes = len - off;
	/* malloc(0) may return NULL; an empty array still gets a pointer. */
	out->data = malloc(bytes ? bytes : 1);
	if (!out->data) {
		memset(out, 0, sizeof *out);
		return rt_errorf(e, "%s: out of memory for %zu bytes of data", name, bytes);
	}
	if (bytes)
		memcpy(out->data, (const unsigned char *)buf + off, bytes);
	return true;
}

bool rt_npy_read(const char *path, rt_npy *out, rt_err *e)
{
	memset(out, 0, sizeof *out);
	char *buf;
	size_t len, off;
	/* The data limit plus room for any reasonable header. */
	if (!rt_file_read(path, (size_t)IR_MAX_BYTES + ((size_t)1 << 20), &buf, &len, e))
		return false;
	if (!parse_image((unsigned char *)buf, len, path, out, &off, e)) {
		memset(out, 0, sizeof *out);
		free(buf);
		return false;
	}
	/* Reuse the file buffer for the data rather than holding two copies:
	 * slide the elements to its start and give back the rest. */
	size_t bytes = len - off;
	memmove(buf, buf + off, bytes);
	char *shrunk = realloc(buf, bytes ? bytes : 1);
	out->data = shrunk ? shrunk : buf;
	return true;
}

/* ---- writing ---------------------------------------------------------- */

/* Builds the header exactly as NumPy 1.24's np.save does: the dict with keys
 * sorted, shape as Python's tuple repr, spare spaces so the first dimension
 * can grow to 21 digits in place, then spaces and a newline so that the data
 * start on a 64-byte boundary.  Version 1.0 unless the header does not fit
 * its 16-bit length (never, with rank <= 8, but the rule is NumPy's).
 * Returns the total length of magic, version, length and header. */
static size_t build_header(char *out, size_t cap, rt_npy_dtype dtype, int rank, const int64_t *dim)
{
	char dict[256];
	int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
		dtypes[dtype].descr);
	for (int i = 0; i < rank; i++)
		n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "",
			(long long)dim[i]);
	n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", rank == 1 ? "," : "");
	if (rank > 0) {
		int digits = snprintf(NULL, 0, "%lld", (long long)dim[0]);
		for (int i = digits; i < 21; i++)
			dict[n++] = ' ';
	}
	IR_ASSERT((size_t)n < sizeof dict);

	size_t hlen = (size_t)n + 1; /* with the final newline */
	int major = 1;
	size_t prefix = 10;
	size_t pad = 64 - (prefix + hlen) % 64;
	if (hlen + pad > 0xffff) {
		major = 2;
		prefix = 12;
		pad = 64 - (prefix + hlen) % 64;
	}
	size_t total = prefix + hlen + pad;
	IR_ASSERT(total <= cap);
	uint32_t stored = (uint32_t)(hlen + pad);
	memcpy(out, magic, sizeof magic);
	out[6] = (char)major;
	out[7] = 0;
	for (size_t i = 0; i < prefix - 8; i++)
		out[8 + i] = (char)(stored >> (8 * i) & 0xff);
	memcpy(out + prefix, dict, (size_t)n);
	memset(out + prefix + n, ' ', pad);
	out[total - 1] = '\n';
	return total;
}

bool rt_npy_write(const char *path, rt_npy_dtype dtype, int rank, const int64_t *dim,
	const void *data, rt_err *e)
{
	IR_ASSERT((unsigned)dtype < RT_NPY_DTYPE_COUNT);
	if (rank < 0 || rank > RT_NPY_MAX_RANK)
		return rt_errorf(e, "%s: cannot write an array of rank %d (0 to %d are supported)", path,
			rank, RT_NPY_MAX_RANK);
	int64_t count = 1, bytes;
	for (int i = 0; i < rank; i++)
		if (dim[i] < 0 || dim[i] > IR_MAX_BYTES || !ir_size_mul(count, dim[i], &count))
			return rt_errorf(e, "%s: cannot write an array with shape dimension %lld", path,
				(long long)dim[i]);
	if (!ir_size_mul(count, dtypes[dtype].size, &bytes) || bytes > IR_MAX_BYTES)
		return rt_errorf(e, "%s: cannot write an array of more than 2^40 bytes", path);

	char head[512];
	size_t hn = build_header(head, sizeof head, dtype, rank, dim);
	rt_atomic a;
	if (!rt_atomic_open(&a, path, e))
		return false;
	errno = 0;
	if (fwrite(head, 1, hn, a.f) != hn
		|| (bytes && fwrite(data, 1, (size_t)bytes, a.f) != (size_t)bytes)) {
		int err = errno;
		rt_atomic_abort(&a);
		return rt_errorf(e, "cannot write '%s': %s", path, strerror(err ? err : EIO));
	}
	return rt_atomic_commit(&a, e);
}

/* ---- conversion ------------------------------------------------------- */

/* Elements are read with memcpy so that the conversions do not depend on
 * the alignment of a->data. */
#define CONVERT(T, DST)                                                     \
	do {                                                                    \
		const unsigned char *s = a->data;                                   \
		for (int64_t i = 0; i < a->count; i++) {                            \
			T v;                                                            \
			memcpy(&v, s + i * (int64_t)sizeof v, sizeof v);                \
			dst[i] = (DST)v;                                                \
		}                                                                   \
	} while (0)

void rt_npy_to_f64(const rt_npy *a, double *dst)
{
	switch (a->dtype) {
	case RT_NPY_F32: CONVERT(float, double); break;
	case RT_NPY_F64: CONVERT(double, double); break;
	case RT_NPY_I32: CONVERT(int32_t, double); break;
	case RT_NPY_I64: CONVERT(int64_t, double); break;
	case RT_NPY_U8: CONVERT(uint8_t, double); break;
	default: IR_DIE("bad rt_npy_dtype %d", (int)a->dtype);
	}
}

void rt_npy_to_f32(const rt_npy *a, float *dst)
{
	switch (a->dtype) {
	case RT_NPY_F32: CONVERT(float, float); break;
	case RT_NPY_F64: CONVERT(double, float); break;
	case RT_NPY_I32: CONVERT(int32_t, float); break;
	case RT_NPY_I64: CONVERT(int64_t, float); break;
	case RT_NPY_U8: CONVERT(uint8_t, float); break;
	default: IR_DIE("bad rt_npy_dtype %d", (int)a->dtype);
	}
}
