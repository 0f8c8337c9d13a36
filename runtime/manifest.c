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
 *     ranks 2
 *     batch 50
 *     tensor init.conv.w f32[16,1,3,3]
 *     tensor step i64[]
 * The first line is the magic and the format version; then kind (always),
 * model, step and seed (each optional, at most once), ranks and batch
 * (optional: a checkpoint of K > 1 processes, each at that batch:
 * docs/distributed.md), and one line per
 * NAME.npy file of the directory.  Input is untrusted: any bytes give a
 * manifest or an error naming the line, in time O(n log n) for n bytes (the
 * names are sorted once; lookups are binary searches), and a manifest is
 * at most MAX_BYTES long and RT_MANIFEST_MAX_TENSORS entries. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manifest.h"

#define MAGIC "revc-manifest"
#define VERSION 1
/* The longest manifest read or written: RT_MANIFEST_MAX_TENSORS entries
 * with names of 50 bytes (a model's are 10 to 30). */
#define MAX_BYTES ((size_t)4 << 20)

static const struct {
	const char *name; /* in the manifest */
	const char *what; /* in messages: "'ck' holds WHAT" */
} kinds[] = {
	[RT_DIR_CHECKPOINT] = {"checkpoint", "a checkpoint (revc train --save)"},
	[RT_DIR_PARAMS] = {"params", "parameters"},
	[RT_DIR_GRADIENTS] = {"gradients", "gradients (revc grad --out)"},
	[RT_DIR_STATE] = {"state", "running statistics (revc grad --state-out)"},
};
_Static_assert(sizeof kinds / sizeof kinds[0] == RT_DIR_KIND_COUNT, "kinds[] must cover rt_dir_kind");

const char *rt_dir_kind_name(rt_dir_kind k)
{
	IR_ASSERT((unsigned)k < RT_DIR_KIND_COUNT);
	return kinds[k].name;
}

const char *rt_dir_kind_what(rt_dir_kind k)
{
	IR_ASSERT((unsigned)k < RT_DIR_KIND_COUNT);
	return kinds[k].what;
}

void rt_manifest_init(rt_manifest *m, rt_dir_kind kind)
{
	memset(m, 0, sizeof *m);
	m->kind = kind;
	m->step = m->seed = -1;
	m->ranks = m->batch = -1;
}

void rt_manifest_free(rt_manifest *m)
{
	for (int i = 0; i < m->n; i++)
		free(m->t[i].name);
	free(m->t);
	free(m->index);
	free(m->model);
	memset(m, 0, sizeof *m);
}

static int by_name(const void *a, const void *b)
{
	const rt_manifest_tensor *x = *(const rt_manifest_tensor *const *)a, *y = *(const rt_manifest_tensor *const *)b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x > y) - (x < y); /* equal names in list order */
}

/* Builds m->index; *dup is the first entry (in list order) whose name an
 * earlier one has, or NULL.  False only without memory. */
static bool sort_index(rt_manifest *m, const rt_manifest_tensor **dup, rt_err *e)
{
	*dup = NULL;
	free(m->index);
	m->index = malloc(((size_t)m->n + 1) * sizeof *m->index);
	if (!m->index)
		return rt_error_oom(e, "the manifest's index", ((int64_t)m->n + 1) * (int64_t)sizeof *m->index);
	for (int i = 0; i < m->n; i++)
		m->index[i] = &m->t[i];
	qsort(m->index, (size_t)m->n, sizeof *m->index, by_name);
	for (int i = 1; i < m->n; i++)
		if (strcmp(m->index[i - 1]->name, m->index[i]->name) == 0 && (!*dup || m->index[i] < *dup))
			*dup = m->index[i];
	return true;
}

bool rt_manifest_seal(rt_manifest *m, rt_err *e)
{
	const rt_manifest_tensor *dup;
	if (!sort_index(m, &dup, e))
		return false;
	return dup ? rt_errorf(e, "two tensors named '%s'", dup->name) : true;
}

static int find_key(const void *key, const void *t)
{
	return strcmp(key, (*(const rt_manifest_tensor *const *)t)->name);
}

const rt_manifest_tensor *rt_manifest_find(const rt_manifest *m, const char *name)
{
	IR_ASSERT(m->index || m->n == 0); /* sealed */
	const rt_manifest_tensor *const *t = m->n ? bsearch(name, m->index, (size_t)m->n, sizeof *m->index, find_key) : NULL;
	return t ? *t : NULL;
}

/* A name that is safe as a file name and as one word of a line. */
static bool good_name(const char *s, size_t n)
{
	if (n == 0 || n > RT_MANIFEST_MAX_NAME || s[0] == '.')
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
		return rt_error_oom(e, "the model's name", (int64_t)n + 1);
	for (size_t i = 0; i < n; i++)
		if (!good_word(m->model + i, 1))
			m->model[i] = '_';
	return true;
}

/* Appends a tensor whose name (n bytes at name) and type are checked. */
static rt_manifest_tensor *push(rt_manifest *m, const char *name, size_t n, rt_npy_dtype dtype, int rank,
	const int64_t *dim, rt_err *e)
{
	if (m->n == RT_MANIFEST_MAX_TENSORS) {
		rt_errorf(e, "more than %d tensors in one directory", RT_MANIFEST_MAX_TENSORS);
		return NULL;
	}
	if (m->n == m->cap) {
		int cap = m->cap ? 2 * m->cap : 64;
		rt_manifest_tensor *t = realloc(m->t, (size_t)cap * sizeof *t);
		if (!t) {
			rt_error_oom(e, "the manifest", (int64_t)cap * (int64_t)sizeof *t);
			return NULL;
		}
		m->t = t;
		m->cap = cap;
	}
	free(m->index); /* its pointers may be stale now */
	m->index = NULL;
	rt_manifest_tensor *t = &m->t[m->n];
	memset(t, 0, sizeof *t);
	if (!(t->name = strndup(name, n))) {
		rt_error_oom(e, "the manifest", (int64_t)n + 1);
		return NULL;
	}
	t->dtype = dtype;
	t->rank = rank;
	for (int i = 0; i < rank; i++)
		t->dim[i] = dim[i];
	m->n++;
	return t;
}

bool rt_manifest_add(rt_manifest *m, const char *name, rt_npy_dtype dtype, int rank, const int64_t *dim,
	rt_err *e)
{
	size_t n = strlen(name);
	if (!good_name(name, n))
		return rt_errorf(e, "cannot write a tensor named '%.64s%s' (names are one word without '/', "
			"at most %d bytes)", name, n > 64 ? "..." : "", RT_MANIFEST_MAX_NAME);
	if ((unsigned)dtype >= RT_NPY_DTYPE_COUNT)
		return rt_errorf(e, "'%s': no .npy element type %d", name, (int)dtype);
	if (rank < 0 || rank > RT_NPY_MAX_RANK)
		return rt_errorf(e, "'%s': rank %d (a .npy file has rank 0 to %d)", name, rank, RT_NPY_MAX_RANK);
	return push(m, name, n, dtype, rank, dim, e) != NULL;
}

int rt_manifest_shape_str(const rt_manifest_tensor *t, char *buf, size_t n)
{
	int k = snprintf(buf, n, "%s", rt_npy_dtype_word(t->dtype));
	size_t at = (size_t)k < n ? (size_t)k : n;
	return k + rt_npy_dims_str(t->rank, t->dim, buf + at, n - at);
}

/* ---- writing ---------------------------------------------------------------- */

/* A growing text buffer, at most MAX_BYTES; a failure sticks. */
typedef struct {
	char *p;
	size_t len, cap;
	bool oom, full;
} text;

static void putf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void putf(text *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (t->oom || t->full || n < 0)
		return;
	if (t->len + (size_t)n > MAX_BYTES) {
		t->full = true;
		return;
	}
	if (t->len + (size_t)n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		while (cap < t->len + (size_t)n + 1)
			cap *= 2;
		char *p = realloc(t->p, cap);
		if (!p) {
			t->oom = true;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	t->len += (size_t)n;
}

char *rt_manifest_format(const rt_manifest *m, size_t *len, rt_err *e)
{
	text t = {0};
	putf(&t, MAGIC " %d\nkind %s\n", VERSION, kinds[m->kind].name);
	if (m->model)
		putf(&t, "model %s\n", m->model);
	if (m->step >= 0)
		putf(&t, "step %lld\n", (long long)m->step);
	if (m->seed >= 0)
		putf(&t, "seed %lld\n", (long long)m->seed);
	if (m->ranks >= 0)
		putf(&t, "ranks %lld\n", (long long)m->ranks);
	if (m->batch >= 0)
		putf(&t, "batch %lld\n", (long long)m->batch);
	for (int i = 0; i < m->n; i++) {
		char dims[RT_NPY_MAX_RANK * 21 + 3];
		rt_npy_dims_str(m->t[i].rank, m->t[i].dim, dims, sizeof dims);
		putf(&t, "tensor %s %s%s\n", m->t[i].name, rt_npy_dtype_word(m->t[i].dtype), dims);
	}
	if (t.oom || t.full) {
		free(t.p);
		if (t.oom)
			rt_error_oom(e, "the manifest", (int64_t)t.cap * 2);
		else
			rt_errorf(e, "the manifest of %d tensors would take more than the %zu bytes one may", m->n,
				MAX_BYTES);
		return NULL;
	}
	*len = t.len;
	return t.p;
}

bool rt_manifest_write(rt_manifest *m, const char *dir, rt_err *e)
{
	size_t len;
	char *buf, path[RT_PATH_MAX];
	if (!rt_path_join(path, sizeof path, dir, RT_MANIFEST_NAME, "", e) || !rt_manifest_seal(m, e) ||
	    !(buf = rt_manifest_format(m, &len, e)))
		return false;
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
		if (is(w, (size_t)(open - w), rt_npy_dtype_word((rt_npy_dtype)i)))
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
		rt_manifest_tensor t, *added;
		if (!word(c, &name, &nn) || !good_name(name, nn))
			return rt_errorf(c->e, "%s:%d: expected a tensor name (one word without '/', at most %d bytes)",
				c->name, c->line, RT_MANIFEST_MAX_NAME);
		if (!word(c, &sh, &ns) || !shape(sh, ns, &t))
			return bad(c, "expected a type and shape such as f32[16,1,3,3]");
		/* (A name given twice is found once all are read: rt_manifest_parse.) */
		if (!(added = push(m, name, nn, t.dtype, t.rank, t.dim, c->e)))
			return rt_err_prefixf(c->e, "%s:%d: ", c->name, c->line);
		added->line = c->line;
	} else if (is(w, n, "kind")) {
		const char *k;
		size_t nk;
		int found = -1;
		if (*kind_seen)
			return bad(c, "a second kind");
		if (word(c, &k, &nk))
			for (int i = 0; i < RT_DIR_KIND_COUNT; i++)
				if (is(k, nk, kinds[i].name))
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
			return rt_error_oom(c->e, "the model's name", (int64_t)nk + 1);
	} else if (is(w, n, "step") || is(w, n, "seed") || is(w, n, "ranks") || is(w, n, "batch")) {
		int64_t *v = is(w, n, "step") ? &m->step : is(w, n, "seed") ? &m->seed : is(w, n, "ranks") ? &m->ranks :
			&m->batch;
		const char *k;
		size_t nk;
		if (*v >= 0)
			return rt_errorf(c->e, "%s:%d: a second %.*s", c->name, c->line, (int)n, w);
		if (!word(c, &k, &nk) || !number(k, nk, INT64_MAX, v))
			return bad(c, "expected a non-negative integer");
	} else {
		return bad(c, "unknown entry (expected tensor, kind, model, step, seed, ranks or batch)");
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
	if (len > MAX_BYTES)
		return rt_errorf(e, "%s: larger than the %zu bytes a manifest may take", name, MAX_BYTES);
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
	const rt_manifest_tensor *dup;
	if (!sort_index(out, &dup, e))
		goto fail;
	if (dup) {
		rt_errorf(e, "%s:%d: a second entry for the same tensor", name, dup->line);
		goto fail;
	}
	return true;
fail:
	rt_manifest_free(out);
	return false;
}

bool rt_manifest_read(const char *dir, rt_manifest *out, bool *found, rt_err *e)
{
	char path[RT_PATH_MAX];
	*found = false;
	rt_manifest_init(out, RT_DIR_CHECKPOINT);
	if (!rt_path_join(path, sizeof path, dir, RT_MANIFEST_NAME, "", e))
		return false;
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
	char *buf = rt_manifest_format(m, &len, e);
	if (!buf)
		return false;
	int fd = openat(dirfd, RT_MANIFEST_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	int err = fd < 0 ? errno : 0;
	if (fd >= 0) {
		/* A short write sets no errno: say EIO, not whatever came before. */
		ssize_t w = write(fd, buf, len);
		err = w < 0 ? errno : (size_t)w != len ? EIO : 0;
		if (close(fd) != 0 && !err)
			err = errno;
	}
	free(buf);
	return err ? rt_errorf(e, "cannot write %s: %s", RT_MANIFEST_NAME, strerror(err)) : true;
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
