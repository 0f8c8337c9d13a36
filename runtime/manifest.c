/* manifest.c: revc-manifest.txt, the file that marks a directory as one revc
 * wrote (a checkpoint, parameters, gradients, running statistics) and lists
 * what is in it.  rt_dir (dir.c) replaces an existing directory only when it
 * carries a manifest and nothing the manifest does not list; loading uses it
 * to name a missing or mis-shaped tensor before reading any data.
 *
 * The format is line-oriented text, one entry per line:
 *     revc-manifest 1
 *     kind checkpoint
 *     model fashion
 *     step 30
 *     seed 1
 *     tensor init.conv.w f32[16,1,3,3]
 *     tensor step i64[]
 * The first line is the magic and the format version; then kind (always),
 * model, step and seed (each optional, at most once), and one line per
 * NAME.npy file of the directory.  Input is untrusted: any bytes give a
 * manifest or an error naming the line. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt.h"

#define MAGIC "revc-manifest"
#define VERSION 1
/* Largest manifest read: far more than any model's tensor list. */
#define MAX_BYTES ((size_t)16 << 20)

static const char *const kind_names[] = {
	[RT_DIR_CHECKPOINT] = "checkpoint",
	[RT_DIR_PARAMS] = "params",
	[RT_DIR_GRADIENTS] = "gradients",
	[RT_DIR_STATE] = "state",
};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == RT_DIR_KIND_COUNT, "kind_names[] must cover rt_dir_kind");

/* The element types as the manifest spells them. */
static const char *const dtype_names[] = {
	[RT_NPY_F32] = "f32",
	[RT_NPY_F64] = "f64",
	[RT_NPY_I32] = "i32",
	[RT_NPY_I64] = "i64",
	[RT_NPY_U8] = "u8",
};
_Static_assert(sizeof dtype_names / sizeof dtype_names[0] == RT_NPY_DTYPE_COUNT, "dtype_names[] must cover rt_npy_dtype");

const char *rt_dir_kind_name(rt_dir_kind k)
{
	IR_ASSERT((unsigned)k < RT_DIR_KIND_COUNT);
	return kind_names[k];
}

void rt_manifest_init(rt_manifest *m, rt_dir_kind kind)
{
	memset(m, 0, sizeof *m);
	m->kind = kind;
	m->step = m->seed = -1;
}

void rt_manifest_free(rt_manifest *m)
{
	for (int i = 0; i < m->n; i++)
		free(m->t[i].name);
	free(m->t);
	free(m->model);
	memset(m, 0, sizeof *m);
}

const rt_manifest_tensor *rt_manifest_find(const rt_manifest *m, const char *name)
{
	for (int i = 0; i < m->n; i++)
		if (strcmp(m->t[i].name, name) == 0)
			return &m->t[i];
	return NULL;
}

/* A name that is safe as a file name and as one word of a line. */
static bool good_name(const char *s, size_t n)
{
	if (n == 0 || n > 255 || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == '/' || s[i] == 0x7f)
			return false;
	return true;
}

/* A model name: one word of printable ASCII. */
static bool good_word(const char *s, size_t n)
{
	if (n == 0 || n > 255)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

bool rt_manifest_set_model(rt_manifest *m, const char *model, rt_err *e)
{
	free(m->model);
	m->model = NULL;
	if (!model || !*model)
		return true;
	/* The name only informs: one that is not a word is made one, so that
	 * it can never stop a save. */
	size_t n = strlen(model) < 255 ? strlen(model) : 255;
	if (!(m->model = strndup(model, n)))
		return rt_errorf(e, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (!good_word(m->model + i, 1))
			m->model[i] = '_';
	return true;
}

bool rt_manifest_add(rt_manifest *m, const char *name, rt_npy_dtype dtype, int rank, const int64_t *dim,
	rt_err *e)
{
	if (!good_name(name, strlen(name)))
		return rt_errorf(e, "cannot write a tensor named '%.64s' (names are one word, without '/')", name);
	if (rank < 0 || rank > RT_NPY_MAX_RANK || (unsigned)dtype >= RT_NPY_DTYPE_COUNT)
		return rt_errorf(e, "'%s': no .npy type of rank %d", name, rank);
	if (rt_manifest_find(m, name))
		return rt_errorf(e, "two tensors named '%s'", name);
	if (m->n == m->cap) {
		int cap = m->cap ? 2 * m->cap : 64;
		rt_manifest_tensor *t = realloc(m->t, (size_t)cap * sizeof *t);
		if (!t)
			return rt_errorf(e, "out of memory");
		m->t = t;
		m->cap = cap;
	}
	rt_manifest_tensor *t = &m->t[m->n];
	memset(t, 0, sizeof *t);
	if (!(t->name = strdup(name)))
		return rt_errorf(e, "out of memory");
	t->dtype = dtype;
	t->rank = rank;
	for (int i = 0; i < rank; i++)
		t->dim[i] = dim[i];
	m->n++;
	return true;
}

int rt_manifest_shape_str(const rt_manifest_tensor *t, char *buf, size_t n)
{
	int k = snprintf(buf, n, "%s[", dtype_names[t->dtype]);
	for (int i = 0; i < t->rank; i++)
		k += snprintf(buf + ((size_t)k < n ? (size_t)k : n), (size_t)k < n ? n - (size_t)k : 0, "%s%lld",
			i ? "," : "", (long long)t->dim[i]);
	k += snprintf(buf + ((size_t)k < n ? (size_t)k : n), (size_t)k < n ? n - (size_t)k : 0, "]");
	return k;
}

/* ---- writing ---------------------------------------------------------------- */

/* A growing text buffer; a failed allocation sticks. */
typedef struct {
	char *p;
	size_t len, cap;
	bool oom;
} text;

static void put(text *t, const char *s)
{
	size_t n = strlen(s);
	if (t->oom)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		while (cap < t->len + n + 1)
			cap *= 2;
		char *p = realloc(t->p, cap);
		if (!p) {
			t->oom = true;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n + 1);
	t->len += n;
}

char *rt_manifest_format(const rt_manifest *m, size_t *len)
{
	text t = {0};
	char line[512];
	snprintf(line, sizeof line, MAGIC " %d\nkind %s\n", VERSION, kind_names[m->kind]);
	put(&t, line);
	if (m->model) {
		snprintf(line, sizeof line, "model %s\n", m->model);
		put(&t, line);
	}
	if (m->step >= 0) {
		snprintf(line, sizeof line, "step %lld\n", (long long)m->step);
		put(&t, line);
	}
	if (m->seed >= 0) {
		snprintf(line, sizeof line, "seed %lld\n", (long long)m->seed);
		put(&t, line);
	}
	for (int i = 0; i < m->n; i++) {
		char shape[256];
		rt_manifest_shape_str(&m->t[i], shape, sizeof shape);
		snprintf(line, sizeof line, "tensor %s %s\n", m->t[i].name, shape);
		put(&t, line);
	}
	if (t.oom) {
		free(t.p);
		return NULL;
	}
	*len = t.len;
	return t.p;
}

bool rt_manifest_write(const rt_manifest *m, const char *dir, rt_err *e)
{
	size_t len;
	char *buf = rt_manifest_format(m, &len);
	if (!buf)
		return rt_errorf(e, "out of memory");
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, RT_MANIFEST_NAME);
	bool ok = rt_file_write_atomic(path, buf, len, e);
	free(buf);
	return ok;
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct {
	const char *p, *end; /* the rest of the current line */
	const char *name;
	int line;
	rt_err *e;
} cursor;

static bool bad(cursor *c, const char *what)
{
	return rt_errorf(c->e, "%s:%d: %s", c->name, c->line, what);
}

/* The next space-separated word of the line. */
static bool word(cursor *c, const char **w, size_t *n)
{
	while (c->p < c->end && *c->p == ' ')
		c->p++;
	*w = c->p;
	while (c->p < c->end && *c->p != ' ')
		c->p++;
	*n = (size_t)(c->p - *w);
	return *n > 0;
}

static bool is(const char *w, size_t n, const char *s)
{
	return strlen(s) == n && memcmp(w, s, n) == 0;
}

/* A decimal integer from 0 to max, the whole word. */
static bool number(const char *w, size_t n, int64_t max, int64_t *out)
{
	if (n == 0 || n > 19) /* 19 digits fit in a uint64_t */
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (w[i] < '0' || w[i] > '9' || (n > 1 && w[0] == '0'))
			return false;
		v = v * 10 + (uint64_t)(w[i] - '0');
	}
	if (v > (uint64_t)max)
		return false;
	*out = (int64_t)v;
	return true;
}

/* "f32[16,1,3,3]" into t. */
static bool shape(const char *w, size_t n, rt_manifest_tensor *t)
{
	const char *open = memchr(w, '[', n);
	if (!open || w[n - 1] != ']')
		return false;
	int dt = -1;
	for (int i = 0; i < RT_NPY_DTYPE_COUNT; i++)
		if (is(w, (size_t)(open - w), dtype_names[i]))
			dt = i;
	if (dt < 0)
		return false;
	t->dtype = (rt_npy_dtype)dt;
	t->rank = 0;
	const char *p = open + 1, *end = w + n - 1;
	int64_t bytes = rt_npy_dtype_size(t->dtype);
	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma ? comma : end;
		if (t->rank == RT_NPY_MAX_RANK || !number(p, (size_t)(stop - p), IR_MAX_BYTES, &t->dim[t->rank]) ||
		    !ir_size_mul(bytes, t->dim[t->rank], &bytes) || bytes > IR_MAX_BYTES)
			return false;
		t->rank++;
		p = comma ? comma + 1 : end;
		if (comma && p == end)
			return false;
	}
	return true;
}

static bool parse_line(cursor *c, rt_manifest *m, bool *kind_seen)
{
	const char *w;
	size_t n;
	if (!word(c, &w, &n))
		return bad(c, "empty line");
	if (is(w, n, "tensor")) {
		const char *name, *sh;
		size_t nn, ns;
		rt_manifest_tensor t;
		if (!word(c, &name, &nn) || !good_name(name, nn))
			return bad(c, "expected a tensor name (one word, without '/')");
		if (!word(c, &sh, &ns) || !shape(sh, ns, &t))
			return bad(c, "expected a type and shape such as f32[16,1,3,3]");
		char key[256];
		memcpy(key, name, nn);
		key[nn] = 0;
		if (rt_manifest_find(m, key))
			return bad(c, "a second entry for the same tensor");
		if (!rt_manifest_add(m, key, t.dtype, t.rank, t.dim, c->e))
			return false;
	} else if (is(w, n, "kind")) {
		const char *k;
		size_t nk;
		int found = -1;
		if (*kind_seen)
			return bad(c, "a second kind");
		if (word(c, &k, &nk))
			for (int i = 0; i < RT_DIR_KIND_COUNT; i++)
				if (is(k, nk, kind_names[i]))
					found = i;
		if (found < 0)
			return bad(c, "kind must be checkpoint, params, gradients or state");
		m->kind = (rt_dir_kind)found;
		*kind_seen = true;
	} else if (is(w, n, "model")) {
		const char *k;
		size_t nk;
		if (m->model)
			return bad(c, "a second model");
		if (!word(c, &k, &nk) || !good_word(k, nk))
			return bad(c, "expected a model name (one word, at most 255 bytes)");
		if (!(m->model = strndup(k, nk)))
			return rt_errorf(c->e, "out of memory");
	} else if (is(w, n, "step") || is(w, n, "seed")) {
		int64_t *v = w[1] == 't' ? &m->step : &m->seed;
		const char *k;
		size_t nk;
		if (*v >= 0)
			return bad(c, w[1] == 't' ? "a second step" : "a second seed");
		if (!word(c, &k, &nk) || !number(k, nk, INT64_MAX, v))
			return bad(c, "expected a non-negative integer");
	} else {
		return bad(c, "unknown entry (expected tensor, kind, model, step or seed)");
	}
	const char *rest;
	size_t nr;
	if (word(c, &rest, &nr))
		return bad(c, "unexpected text at the end of the line");
	return true;
}

bool rt_manifest_parse(const char *buf, size_t len, const char *name, rt_manifest *out, rt_err *e)
{
	rt_manifest_init(out, RT_DIR_CHECKPOINT);
	cursor c = {.p = buf, .end = buf, .name = name, .line = 0, .e = e};
	const char *end = buf + len;
	bool kind_seen = false;
	if (len == 0 || end[-1] != '\n')
		return rt_errorf(e, "%s: truncated (it does not end with a newline)", name);
	for (const char *p = buf; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		c.p = p;
		c.end = nl;
		c.line++;
		if (memchr(p, 0, (size_t)(nl - p)) || memchr(p, '\r', (size_t)(nl - p))) {
			bad(&c, "a NUL or carriage return");
			goto fail;
		}
		if (c.line == 1) {
			const char *w;
			size_t n;
			int64_t v;
			if (!word(&c, &w, &n) || !is(w, n, MAGIC) || !word(&c, &w, &n) || !number(w, n, 1000, &v) ||
			    c.p != c.end) {
				rt_errorf(e, "%s: not a revc manifest (the first line must be '" MAGIC " %d')", name,
					VERSION);
				goto fail;
			}
			if (v != VERSION) {
				rt_errorf(e, "%s: format version %lld; this revc reads version %d", name, (long long)v,
					VERSION);
				goto fail;
			}
		} else if (!parse_line(&c, out, &kind_seen)) {
			goto fail;
		}
		p = nl + 1;
	}
	if (!kind_seen) {
		rt_errorf(e, "%s: no kind line", name);
		goto fail;
	}
	return true;
fail:
	rt_manifest_free(out);
	return false;
}

bool rt_manifest_read(const char *dir, rt_manifest *out, bool *found, rt_err *e)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, RT_MANIFEST_NAME);
	*found = false;
	rt_manifest_init(out, RT_DIR_CHECKPOINT);
	struct stat st;
	if (lstat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
		return true; /* (dir itself is the caller's to check) */
	char *buf;
	size_t len;
	if (!rt_file_read(path, MAX_BYTES, &buf, &len, e))
		return false;
	bool ok = rt_manifest_parse(buf, len, path, out, e);
	free(buf);
	*found = ok;
	return ok;
}

bool rt_manifest_mark(int dirfd, const rt_manifest *m, rt_err *e)
{
	size_t len;
	char *buf = rt_manifest_format(m, &len);
	if (!buf)
		return rt_errorf(e, "out of memory");
	int fd = openat(dirfd, RT_MANIFEST_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	bool ok = fd >= 0 && write(fd, buf, len) == (ssize_t)len;
	int err = errno;
	if (fd >= 0)
		ok = close(fd) == 0 && ok;
	free(buf);
	return ok ? true : rt_errorf(e, "cannot write %s: %s", RT_MANIFEST_NAME, strerror(err));
}

bool rt_manifest_is_marked(int dirfd)
{
	char head[64];
	int fd = openat(dirfd, RT_MANIFEST_NAME, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, head, sizeof head - 1) : -1;
	close(fd);
	if (n == 0)
		return true; /* rt_manifest_mark was stopped between open and write */
	if (n < 0)
		return false;
	head[n] = 0;
	/* Any version: a newer revc's directory is still revc's. */
	return strncmp(head, MAGIC " ", strlen(MAGIC) + 1) == 0;
}
