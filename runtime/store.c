/* store.c: the persistent tensors of a model (parameters, batch-norm running
 * statistics, momentum buffers), by name: initialisation per docs/model.md, and
 * loading and saving as directories of NAME.npy files. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rt.h"

void rt_store_init(rt_store *s)
{
	memset(s, 0, sizeof *s);
}

void rt_store_free(rt_store *s)
{
	for (int i = 0; i < s->n; i++) {
		free(s->t[i].name);
		free(s->t[i].data);
	}
	free(s->t);
	memset(s, 0, sizeof *s);
}

rt_tensor *rt_store_find(const rt_store *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->t[i].name, name) == 0)
			return &s->t[i];
	return NULL;
}

bool rt_all_finite(const void *data, const ir_type *t)
{
	int64_t n = ir_type_elems(t);
	if (t->dtype == IR_F32) {
		const float *p = data;
		for (int64_t i = 0; i < n; i++)
			if (!isfinite(p[i]))
				return false;
	} else if (t->dtype == IR_F64) {
		const double *p = data;
		for (int64_t i = 0; i < n; i++)
			if (!isfinite(p[i]))
				return false;
	}
	return true;
}

bool rt_store_check_finite(const rt_store *s, const char *where, rt_err *e)
{
	int count = 0;
	const rt_tensor *first = NULL;
	for (int i = 0; i < s->n; i++)
		if (!rt_all_finite(s->t[i].data, &s->t[i].type) && count++ == 0)
			first = &s->t[i];
	if (count == 0)
		return true;
	char in[300] = "";
	if (where)
		snprintf(in, sizeof in, " in %s", where);
	if (count == 1)
		return rt_errorf(e, "%s%s holds NaN or Inf", first->name, in);
	return rt_errorf(e, "%d of %d tensors%s hold NaN or Inf, %s first", count, s->n, in, first->name);
}

rt_tensor *rt_store_add(rt_store *s, const char *name, const ir_type *type, bool trainable, rt_err *e)
{
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 64;
		rt_tensor *t = realloc(s->t, (size_t)cap * sizeof *t);
		if (!t) {
			rt_error_oom(e, "the store's list of tensors", (int64_t)cap * (int64_t)sizeof *t);
			return NULL;
		}
		s->t = t;
		s->cap = cap;
	}
	/* The size comes from the user's spec: a failed allocation is theirs. */
	int64_t bytes = ir_type_bytes(type);
	char *nm = strdup(name);
	void *data = calloc(1, (size_t)bytes + 1);
	if (!nm || !data) {
		free(nm);
		free(data);
		char what[512], ty[128];
		ir_type_str(type, ty, sizeof ty);
		snprintf(what, sizeof what, "'%s' %s", name, ty);
		rt_error_oom(e, what, bytes);
		return NULL;
	}
	rt_tensor *t = &s->t[s->n++];
	t->name = nm;
	t->type = *type;
	t->trainable = trainable;
	t->data = data;
	return t;
}

bool rt_store_add_copy(rt_store *s, const rt_tensor *t, rt_err *e)
{
	rt_tensor *c = rt_store_add(s, t->name, &t->type, t->trainable, e);
	if (c)
		memcpy(c->data, t->data, (size_t)ir_type_bytes(&t->type));
	return c != NULL;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* FNV-1a: a stable index for a tensor's random stream. */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3u;
	return h;
}

static void fill(rt_tensor *t, double v)
{
	int64_t n = ir_type_elems(&t->type);
	for (int64_t i = 0; i < n; i++) {
		if (t->type.dtype == IR_F32)
			((float *)t->data)[i] = (float)v;
		else
			((double *)t->data)[i] = v;
	}
}

/* Uniform in [-limit, limit]: the positional embedding ".pos" (RevViT's
 * embed.pos, +-0.02). */
static void uniform(rt_tensor *t, uint64_t seed, double limit)
{
	rt_rng r;
	rt_rng_derive(&r, seed, RT_RNG_INIT, name_hash(t->name));
	int64_t n = ir_type_elems(&t->type);
	for (int64_t i = 0; i < n; i++) {
		double v = (2 * rt_rng_uniform(&r) - 1) * limit;
		if (t->type.dtype == IR_F32)
			((float *)t->data)[i] = (float)v;
		else
			((double *)t->data)[i] = v;
	}
}

/* Glorot-uniform: limit sqrt(6/(fan_in+fan_out)), fans counting the kernel
 * window for convolutions ([O,C,KH,KW]) and [out,in] for dense weights. */
static bool glorot(rt_tensor *t, uint64_t seed, rt_err *e)
{
	const ir_type *ty = &t->type;
	int64_t fan_in, fan_out;
	if (ty->rank == 4) {
		int64_t window = ty->dim[2] * ty->dim[3];
		fan_in = ty->dim[1] * window;
		fan_out = ty->dim[0] * window;
	} else if (ty->rank == 2) {
		fan_in = ty->dim[1];
		fan_out = ty->dim[0];
	} else {
		return rt_errorf(e, "cannot Glorot-initialise '%s' of rank %d", t->name, ty->rank);
	}
	uniform(t, seed, sqrt(6.0 / (double)(fan_in + fan_out)));
	return true;
}

/* Is state n optimiser state, by name (passes/optim.c names it): momentum
 * ".mom", AdamW's moments ".m", ".v" and its step count "adamw.t". */
static bool optimizer_state(const char *n)
{
	return ends_with(n, ".mom") || ends_with(n, ".m") || ends_with(n, ".v") || strcmp(n, "adamw.t") == 0;
}

/* Initial value by name (docs/model.md): weights ".w" Glorot, ".gamma" 1,
 * ".beta" and ".b" 0, the positional embedding ".pos" uniform +-0.02; state ".mean" 0, ".var" 1, optimiser state 0. */
bool rt_store_init_tensor(rt_tensor *t, uint64_t seed, rt_err *e)
{
	const char *n = t->name;
	if (t->trainable) {
		if (ends_with(n, ".w"))
			return glorot(t, seed, e);
		if (ends_with(n, ".gamma"))
			fill(t, 1);
		else if (ends_with(n, ".beta") || ends_with(n, ".b"))
			fill(t, 0);
		else if (ends_with(n, ".pos"))
			uniform(t, seed, 0.02);
		else
			return rt_errorf(e, "no initialiser for parameter '%s' (names end in .w, .gamma, .beta, .b or .pos)",
				n);
	} else {
		if (ends_with(n, ".var"))
			fill(t, 1);
		else if (ends_with(n, ".mean") || optimizer_state(n))
			fill(t, 0);
		else
			return rt_errorf(e, "no initialiser for state '%s' (names end in .mean, .var, .mom, .m or .v)", n);
	}
	return true;
}

/* Checks that an existing tensor matches the graph's node. */
static bool same_tensor(const rt_tensor *t, const ir_node *n, rt_err *e)
{
	if (ir_type_eq(&t->type, &n->type))
		return true;
	char a[128], b[128];
	ir_type_str(&t->type, a, sizeof a);
	ir_type_str(&n->type, b, sizeof b);
	return rt_errorf(e, "'%s' is %s here but the model needs %s", t->name, a, b);
}

bool rt_store_init_from_graph(rt_store *s, const ir_graph *g, uint64_t seed, rt_err *e)
{
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (!ir_op_is_persistent(n->op))
			continue;
		rt_tensor *t = rt_store_find(s, n->name);
		if (t) {
			if (!same_tensor(t, n, e))
				return false;
			continue;
		}
		t = rt_store_add(s, n->name, &n->type, n->op == IR_OP_PARAM, e);
		if (!t || !rt_store_init_tensor(t, seed, e))
			return false;
	}
	return true;
}

typedef struct {
	int canon, own; /* canon's index of the tensor or the one it is named after; its own index */
	bool after;     /* named after canon's tensor, not it */
} store_rank;

static int by_rank(const void *pa, const void *pb)
{
	const store_rank *a = pa, *b = pb;
	if (a->canon != b->canon)
		return a->canon < b->canon ? -1 : 1;
	if (a->after != b->after)
		return a->after ? 1 : -1;
	return a->own < b->own ? -1 : a->own > b->own;
}

void rt_store_order_like(rt_store *s, const ir_graph *canon)
{
	store_rank *r = malloc(((size_t)s->n + 1) * sizeof *r);
	rt_tensor *t = malloc(((size_t)s->n + 1) * sizeof *t);
	if (!r || !t)
		IR_DIE("out of memory");
	for (int i = 0; i < s->n; i++) {
		const char *name = s->t[i].name;
		r[i] = (store_rank){.canon = canon->n, .own = i};
		for (int k = 0; k < canon->n; k++) {
			const ir_node *nd = canon->nodes[k];
			size_t len = nd->name ? strlen(nd->name) : 0;
			if (!ir_op_is_persistent(nd->op) || !len || strncmp(name, nd->name, len) != 0 ||
			    (name[len] && name[len] != '.'))
				continue;
			r[i].canon = k;
			r[i].after = name[len] != 0;
			if (!r[i].after)
				break;
		}
	}
	qsort(r, (size_t)s->n, sizeof *r, by_rank);
	for (int i = 0; i < s->n; i++)
		t[i] = s->t[r[i].own];
	memcpy(s->t, t, (size_t)s->n * sizeof *t);
	free(t);
	free(r);
}

/* A file's dtype and shape against the tensor the model needs. */
static bool same_shape(const rt_tensor *t, const char *path, rt_npy_dtype dtype, int rank, const int64_t *dim,
	rt_err *e)
{
	bool ok = rank == t->type.rank;
	for (int i = 0; ok && i < rank; i++)
		ok = dim[i] == t->type.dim[i];
	if (!ok) {
		char want[128], got[160];
		ir_type_str(&t->type, want, sizeof want);
		rt_npy_dims_str(rank, dim, got, sizeof got);
		return rt_errorf(e, "%s: shape %s does not match the model's %s for '%s'", path, got, want, t->name);
	}
	if (dtype != RT_NPY_F32 && dtype != RT_NPY_F64)
		return rt_errorf(e, "%s: '%s' must be float32 or float64", path, t->name);
	return true;
}

/* Reads DIR/NAME.npy into t, converting to t's dtype. */
bool rt_store_load_tensor(rt_tensor *t, const char *dir, rt_err *e)
{
	char path[RT_PATH_MAX];
	if (!rt_path_join(path, sizeof path, dir, t->name, ".npy", e))
		return false;
	struct stat st;
	if (lstat(path, &st) != 0 && errno == ENOENT)
		return rt_errorf(e, "%s: no such file: the model needs the tensor '%s'", path, t->name);
	rt_npy a;
	if (!rt_npy_read(path, &a, e))
		return false;
	bool ok = same_shape(t, path, a.dtype, a.rank, a.dim, e);
	if (ok && t->type.dtype == IR_F32)
		rt_npy_to_f32(&a, t->data);
	else if (ok)
		rt_npy_to_f64(&a, t->data);
	rt_npy_free(&a);
	return ok;
}

/* Loads s->t[want[0..n)] from dir, whose manifest is m (NULL: it has none).
 * With a manifest, every tensor wanted is checked against its list first,
 * so the first one missing or mis-shaped is named before any data is read;
 * without one, the files are read one by one. */
static bool load_listed(rt_store *s, const int *want, int n, const char *dir, const rt_manifest *m, rt_err *e)
{
	struct stat st;
	if (stat(dir, &st) != 0)
		return rt_errorf(e, "cannot open '%s': %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return rt_errorf(e, "'%s' is not a directory", dir);
	if (m && m->kind != RT_DIR_PARAMS && m->kind != RT_DIR_CHECKPOINT)
		return rt_errorf(e, "'%s' holds %s, not parameters", dir, rt_dir_kind_what(m->kind));
	for (int i = 0; m && i < n; i++) {
		const rt_tensor *t = &s->t[want[i]];
		const rt_manifest_tensor *mt = rt_manifest_find(m, t->name);
		char path[RT_PATH_MAX];
		if (!mt)
			return rt_errorf(e, "'%s' has no tensor '%s', which the model needs (its %s lists %d tensors)",
				dir, t->name, RT_MANIFEST_NAME, m->n);
		if (!rt_path_join(path, sizeof path, dir, t->name, ".npy", e) ||
		    !same_shape(t, path, mt->dtype, mt->rank, mt->dim, e))
			return false;
	}
	for (int i = 0; i < n; i++)
		if (!rt_store_load_tensor(&s->t[want[i]], dir, e))
			return false;
	return true;
}

bool rt_store_load_with(rt_store *s, const ir_graph *g, const char *dir, const rt_manifest *m, bool params_only,
	rt_err *e)
{
	int *want = malloc(((size_t)g->n + 1) * sizeof *want), n = 0;
	if (!want)
		return rt_error_oom(e, "the list of tensors to load", ((int64_t)g->n + 1) * (int64_t)sizeof *want);
	bool ok = true;
	for (int i = 0; ok && i < g->n; i++) {
		const ir_node *nd = g->nodes[i];
		if (!ir_op_is_persistent(nd->op))
			continue;
		rt_tensor *t = rt_store_find(s, nd->name);
		if (t && !same_tensor(t, nd, e))
			ok = false;
		else if (!t && !(t = rt_store_add(s, nd->name, &nd->type, nd->op == IR_OP_PARAM, e)))
			ok = false;
		else if (params_only && nd->op == IR_OP_STATE && optimizer_state(nd->name))
			ok = rt_store_init_tensor(t, 0, e);
		else
			want[n++] = (int)(t - s->t);
	}
	ok = ok && load_listed(s, want, n, dir, m, e);
	free(want);
	return ok;
}

bool rt_store_load(rt_store *s, const ir_graph *g, const char *dir, bool params_only, rt_err *e)
{
	/* A directory revc wrote lists its tensors; one from NumPy need not. */
	rt_manifest m;
	bool found;
	if (!rt_manifest_read(dir, &m, &found, e))
		return false;
	bool ok = rt_store_load_with(s, g, dir, found ? &m : NULL, params_only, e);
	rt_manifest_free(&m);
	return ok;
}

bool rt_store_load_all(rt_store *s, const char *dir, rt_err *e)
{
	rt_manifest m;
	bool found;
	int *want = malloc(((size_t)s->n + 1) * sizeof *want);
	if (!want)
		return rt_error_oom(e, "the list of tensors to load", ((int64_t)s->n + 1) * (int64_t)sizeof *want);
	for (int i = 0; i < s->n; i++)
		want[i] = i;
	bool ok = rt_manifest_read(dir, &m, &found, e) && load_listed(s, want, s->n, dir, found ? &m : NULL, e);
	rt_manifest_free(&m);
	free(want);
	return ok;
}

bool rt_store_save(const rt_store *s, rt_dir *d, rt_err *e)
{
	for (int i = 0; i < s->n; i++) {
		const rt_tensor *t = &s->t[i];
		if (!rt_dir_write_npy(d, t->name, t->type.dtype == IR_F32 ? RT_NPY_F32 : RT_NPY_F64, t->type.rank,
			t->type.dim, t->data, e))
			return false;
	}
	return true;
}

bool rt_store_save_dir(const rt_store *s, const char *dir, rt_dir_kind kind, const char *model, rt_err *e)
{
	rt_dir d;
	if (!rt_dir_begin(&d, dir, kind, model, e))
		return false;
	if (!rt_store_save(s, &d, e)) {
		rt_dir_abort(&d);
		return false;
	}
	return rt_dir_commit(&d, e);
}
