/* revc.c: the Python module revc, over librevc (revc.h) and nothing else.
 *
 *   m = revc.Model("models/fashion.rev", set={"batch": 32}, strategy="revnet")
 *   m.memory().peak_bytes            the figures of revc mem --json
 *   loss = m.train_step(x, y, lr)    x float [batch, C, H, W], y int [batch]
 *   m.params["s0.u0.f.conv0.w"]      a NumPy view of revc's memory
 *   m.grad(x, y)                     {name: gradient}, docs/model.md order
 *   m.check_gradients(samples=3)     revc check's report as a dict
 *
 * Parameters cross without copies: each array is a view whose base object
 * is the model, which therefore lives as long as any view of it.  Inputs
 * are converted (copied) only when their dtype or layout differs from what
 * revc reads.  Gradients are copies: revc reuses their memory on the next
 * run.  A model's C state is freed when the object is collected.
 *
 * Errors raise revc.Error subclasses whose message is revc's diagnostic
 * text: UserError (bad input), UsageError (a bad argument; also a
 * ValueError) and BudgetError (over a memory limit).  Long calls release
 * the GIL; a model runs one call at a time, and a call on a model that is
 * busy in another thread raises UsageError rather than racing it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "revc.h"

/* Until AOT emission moves into the driver, a librevc may lack it:
 * compile() then raises. */
#pragma weak revc_emit

static PyObject *Error, *UserError, *UsageError, *BudgetError;

/* ---- errors ------------------------------------------------------------------- */

/* Raises e (freed) as its class; NULL. */
static PyObject *raise_error(revc_error *e)
{
	if (!e) {
		PyErr_SetString(Error, "revc: error: failed without a diagnostic");
		return NULL;
	}
	revc_error_kind k = revc_error_kind_of(e);
	PyObject *cls = k == REVC_ERR_USAGE ? UsageError : k == REVC_ERR_BUDGET ? BudgetError : UserError;
	const char *msg = revc_error_message(e);
	size_t n = strlen(msg);
	while (n > 0 && msg[n - 1] == '\n')
		n--;
	PyObject *s = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)n, "replace");
	if (s) {
		PyErr_SetObject(cls, s);
		Py_DECREF(s);
	}
	revc_error_free(e);
	return NULL;
}

static PyObject *usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	PyObject *s = PyUnicode_FromFormatV(fmt, ap);
	va_end(ap);
	if (s) {
		PyErr_SetObject(UsageError, s);
		Py_DECREF(s);
	}
	return NULL;
}

/* ---- options ------------------------------------------------------------------ */

/* A str, bytes or os.PathLike as a file-system path (a bytes object the
 * caller releases), or NULL with the error raised. */
static PyObject *fs_path(PyObject *o)
{
	PyObject *b = NULL;
	return PyUnicode_FSConverter(o, &b) ? b : NULL;
}

/* set={"batch": 32, "units": (1, 1, 1)} as "KEY=VALUE" strings, which live
 * in *keep (a list the caller releases). */
static bool sets_of(PyObject *set, PyObject **keep, const char ***out, int *n)
{
	*keep = PyList_New(0);
	*out = NULL;
	*n = 0;
	if (!*keep)
		return false;
	if (!set || set == Py_None)
		return true;
	if (!PyDict_Check(set)) {
		usage_error("set must be a dict of KEY: VALUE, not %s", Py_TYPE(set)->tp_name);
		return false;
	}
	PyObject *k, *v;
	Py_ssize_t pos = 0;
	while (PyDict_Next(set, &pos, &k, &v)) {
		PyObject *val;
		if (PyList_Check(v) || PyTuple_Check(v)) {
			PyObject *parts = PyList_New(0), *comma = PyUnicode_FromString(",");
			bool ok = parts && comma;
			PyObject *seq = ok ? PySequence_Fast(v, "") : NULL;
			for (Py_ssize_t i = 0; seq && ok && i < PySequence_Fast_GET_SIZE(seq); i++) {
				PyObject *s = PyObject_Str(PySequence_Fast_GET_ITEM(seq, i));
				ok = s && PyList_Append(parts, s) == 0;
				Py_XDECREF(s);
			}
			val = seq && ok ? PyUnicode_Join(comma, parts) : NULL;
			Py_XDECREF(seq);
			Py_XDECREF(parts);
			Py_XDECREF(comma);
		} else if (PyBool_Check(v)) {
			val = PyUnicode_FromString(v == Py_True ? "true" : "false");
		} else {
			val = PyObject_Str(v);
		}
		PyObject *line = val ? PyUnicode_FromFormat("%S=%U", k, val) : NULL;
		Py_XDECREF(val);
		if (!line || PyList_Append(*keep, line) != 0) {
			Py_XDECREF(line);
			return false;
		}
		Py_DECREF(line);
	}
	*n = (int)PyList_GET_SIZE(*keep);
	*out = PyMem_Calloc((size_t)*n + 1, sizeof **out);
	if (!*out) {
		PyErr_NoMemory();
		return false;
	}
	for (int i = 0; i < *n; i++)
		if (!((*out)[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(*keep, i))))
			return false;
	return true;
}

/* strategy=: the names revc's --strategy takes (revc_strategy_option),
 * into *s and *minimum. */
static bool strategy_of(PyObject *o, revc_strategy *s, bool *minimum)
{
	if (!o || o == Py_None)
		return true;
	const char *name = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
	if (!name || !revc_strategy_option(name, s, minimum)) {
		PyErr_Clear();
		char names[128];
		size_t n = 0;
		names[0] = 0;
		for (int i = 0; revc_strategy_option_at(i) && n < sizeof names; i++)
			n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", revc_strategy_option_at(i));
		usage_error("unknown strategy %R (%s)", o, names);
		return false;
	}
	return true;
}

/* revc_memory_plan of m under strategy s (o's other options), where
 * strategy auto first chooses its decisions as compiling does: min the
 * minimum-memory ones, auto the fastest within o's budget, else its
 * max_memory (neither: store's).  Runs without the GIL. */
static bool memory_under(revc_model *m, revc_strategy s, bool minimum, const revc_options *o, revc_memory *r,
	revc_error **e)
{
	revc_options q = *o;
	q.strategy = s;
	q.minimum = minimum;
	q.decisions = NULL;
	return revc_auto_plan(m, s, &q, -1, NULL, r, e);
}

/* "float32", "f64", np.float64, np.dtype(...). */
static bool dtype_of(PyObject *o, revc_dtype *d)
{
	if (!o || o == Py_None)
		return true;
	PyArray_Descr *descr = NULL;
	if (!PyArray_DescrConverter2(o, &descr) || !descr ||
	    (descr->type_num != NPY_FLOAT32 && descr->type_num != NPY_FLOAT64)) {
		Py_XDECREF(descr);
		PyErr_Clear();
		usage_error("dtype must be float32 or float64, not %R", o);
		return false;
	}
	*d = descr->type_num == NPY_FLOAT64 ? REVC_F64 : REVC_F32;
	Py_DECREF(descr);
	return true;
}

static bool engine_of(PyObject *o, revc_engine *e)
{
	if (!o || o == Py_None)
		return true;
	const char *name = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
	if (name && strcmp(name, "jit") == 0)
		*e = REVC_JIT;
	else if (name && strcmp(name, "interp") == 0)
		*e = REVC_INTERP;
	else {
		PyErr_Clear();
		usage_error("unknown engine %R (jit, interp)", o);
		return false;
	}
	return true;
}

/* The keyword options of Model() and compile() into o; cpu, when given,
 * lives in *cpu_keep (released by the caller). */
static bool options_of(PyObject *strategy, PyObject *dtype, PyObject *engine, PyObject *cpu, int threads,
	PyObject *max_memory, int check_numerics, revc_options *o, PyObject **cpu_keep)
{
	revc_options_init(o);
	*cpu_keep = NULL;
	if (!strategy_of(strategy, &o->strategy, &o->minimum) || !dtype_of(dtype, &o->dtype) || !engine_of(engine, &o->engine))
		return false;
	if (cpu && cpu != Py_None) {
		if (!PyUnicode_Check(cpu)) {
			usage_error("cpu must be a str such as \"native\" or \"x86-64-v3\"");
			return false;
		}
		Py_INCREF(cpu);
		*cpu_keep = cpu;
		if (!(o->cpu = PyUnicode_AsUTF8(cpu)))
			return false;
	}
	if (threads < 1) {
		usage_error("threads must be at least 1, not %d", threads);
		return false;
	}
	o->threads = threads;
	if (max_memory && max_memory != Py_None) {
		long long v = PyLong_AsLongLong(max_memory);
		if (v == -1 && PyErr_Occurred())
			return false;
		if (v < 0) {
			usage_error("max_memory must be a number of bytes >= 0, not %lld", v);
			return false;
		}
		o->max_memory = v;
	}
	o->check_numerics = check_numerics;
	return true;
}

/* A spec file (or, ending in ".ir", an IR file) with its overrides; NULL
 * with the error raised. */
static revc_model *model_open(PyObject *path, PyObject *set)
{
	PyObject *p = fs_path(path), *keep = NULL;
	if (!p)
		return NULL;
	const char *file = PyBytes_AS_STRING(p), **sets = NULL;
	size_t len = strlen(file);
	bool is_ir = len > 3 && strcmp(file + len - 3, ".ir") == 0;
	revc_model *m = NULL;
	revc_error *e = NULL;
	int n = 0;
	if (!sets_of(set, &keep, &sets, &n))
		goto done;
	if (is_ir && n > 0) {
		usage_error("set= applies to spec files, not to the IR file %s", file);
		goto done;
	}
	Py_BEGIN_ALLOW_THREADS
	m = is_ir ? revc_model_from_ir(file, &e) : revc_model_from_file(file, sets, n, &e);
	Py_END_ALLOW_THREADS
	if (!m)
		raise_error(e);
done:
	PyMem_Free(sets);
	Py_XDECREF(keep);
	Py_DECREF(p);
	return m;
}

/* ---- models -------------------------------------------------------------------- */

typedef struct {
	PyObject_HEAD
	revc_model *m;
	revc_options opts; /* compiled under */
	PyObject *cpu;     /* holds opts.cpu */
	bool busy;   /* a call runs with the GIL released */
	double loss; /* of the last train_step or grad */
} Model;

static PyTypeObject ModelType;

/* Marks m busy for a call that releases the GIL; false (raised) if it is. */
static bool enter(Model *self)
{
	if (self->busy) {
		usage_error("this model is running a call in another thread");
		return false;
	}
	self->busy = true;
	return true;
}

static PyObject *Model_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *names[] = {"path", "set", "strategy", "dtype", "engine", "cpu", "threads", "max_memory",
		"check_numerics", NULL};
	PyObject *path, *set = NULL, *strategy = NULL, *dtype = NULL, *engine = NULL, *cpu = NULL, *max_memory = NULL;
	int threads = 2, check_numerics = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOOOOiOp:Model", names, &path, &set, &strategy, &dtype, &engine,
		&cpu, &threads, &max_memory, &check_numerics))
		return NULL;
	revc_options o;
	PyObject *cpu_keep;
	if (!options_of(strategy, dtype, engine, cpu, threads, max_memory, check_numerics, &o, &cpu_keep)) {
		Py_XDECREF(cpu_keep);
		return NULL;
	}
	Model *self = (Model *)type->tp_alloc(type, 0);
	if (!self || !(self->m = model_open(path, set))) {
		Py_XDECREF(self);
		Py_XDECREF(cpu_keep);
		return NULL;
	}
	revc_error *e = NULL;
	bool ok;
	Py_BEGIN_ALLOW_THREADS
	ok = revc_model_compile(self->m, &o, &e);
	Py_END_ALLOW_THREADS
	self->opts = o;
	self->opts.dtype = revc_model_dtype(self->m); /* (an IR file's is its graph's) */
	self->cpu = cpu_keep;
	if (!ok) {
		Py_DECREF(self);
		return raise_error(e);
	}
	self->loss = NAN;
	return (PyObject *)self;
}

static void Model_dealloc(Model *self)
{
	revc_model_free(self->m);
	Py_XDECREF(self->cpu);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Model_repr(Model *self)
{
	return PyUnicode_FromFormat("<revc.Model %s, batch %lld, %s>", revc_model_name(self->m),
		(long long)revc_model_batch(self->m), revc_model_engine_label(self->m));
}

/* ---- memory ---------------------------------------------------------------------- */

static PyObject *namespace_type, *empty_tuple;

static PyObject *namespace_of(PyObject *kw)
{
	PyObject *ns = kw ? PyObject_Call(namespace_type, empty_tuple, kw) : NULL;
	Py_XDECREF(kw);
	return ns;
}

/* The figures of revc mem --json, as a types.SimpleNamespace with the JSON's
 * member names (vars() gives the dict); the largest tensors as a list of
 * dicts. */
static PyObject *memory_object(const revc_memory *r)
{
	PyObject *at = namespace_of(Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L}", "parameters",
		(long long)r->at_peak.parameters, "gradients", (long long)r->at_peak.gradients, "optimizer_state",
		(long long)r->at_peak.optimizer_state, "saved", (long long)r->at_peak.saved, "transient",
		(long long)r->at_peak.transient, "workspace", (long long)r->at_peak.workspace));
	PyObject *largest = at ? PyList_New(0) : NULL;
	for (int i = 0; largest && i < r->nlargest; i++) {
		PyObject *t = Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:s,s:L}", "value", r->largest[i].value, "op",
			r->largest[i].op, "role", r->largest[i].role, "scope", r->largest[i].scope, "type", r->largest[i].type,
			"category", revc_memory_category_key(r->largest[i].category), "bytes", (long long)r->largest[i].bytes);
		if (!t || PyList_Append(largest, t) != 0)
			Py_CLEAR(largest);
		Py_XDECREF(t);
	}
	if (!largest) {
		Py_XDECREF(at);
		return NULL;
	}
	return namespace_of(Py_BuildValue("{s:s,s:s,s:L,s:L,s:L,s:L,s:L,s:L,s:N,s:N}", "strategy",
		revc_strategy_name(r->strategy), "schedule", r->schedule ? r->schedule : "given", "steps", (long long)r->steps, "peak_step", (long long)r->peak_step,
		"peak_bytes", (long long)r->peak_bytes, "arena_bytes", (long long)r->arena_bytes,
		"saved_transient_peak_bytes", (long long)r->saved_transient_peak_bytes, "total_bytes",
		(long long)r->total_bytes, "at_peak", at, "largest", largest));
}

static PyObject *Model_memory(Model *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"strategy", NULL};
	PyObject *strategy = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:memory", names, &strategy))
		return NULL;
	revc_memory r;
	revc_error *e = NULL;
	bool ok;
	if (!strategy || strategy == Py_None) {
		ok = revc_model_memory(self->m, &r, &e);
	} else {
		revc_strategy s;
		bool minimum = false;
		if (!strategy_of(strategy, &s, &minimum) || !enter(self))
			return NULL;
		Py_BEGIN_ALLOW_THREADS
		ok = memory_under(self->m, s, minimum, &self->opts, &r, &e);
		Py_END_ALLOW_THREADS
		self->busy = false;
	}
	return ok ? memory_object(&r) : raise_error(e);
}

/* ---- tensors ------------------------------------------------------------------------ */

static int npy_type(revc_dtype d)
{
	return d == REVC_F64 ? NPY_FLOAT64 : NPY_FLOAT32;
}

/* t as a writable NumPy view of revc's memory, kept alive by owner. */
static PyObject *view_of(const revc_tensor *t, PyObject *owner)
{
	npy_intp dim[REVC_MAX_RANK];
	for (int i = 0; i < t->rank; i++)
		dim[i] = (npy_intp)t->dim[i];
	PyObject *a = PyArray_New(&PyArray_Type, t->rank, dim, npy_type(t->dtype), NULL, t->data, 0, NPY_ARRAY_CARRAY,
		NULL);
	if (!a)
		return NULL;
	Py_INCREF(owner);
	if (PyArray_SetBaseObject((PyArrayObject *)a, owner) != 0) {
		Py_DECREF(a);
		return NULL;
	}
	return a;
}

/* {name: view} of the model's persistent tensors that are (trainable) or
 * are not parameters, in docs/model.md order. */
static PyObject *tensor_dict(Model *self, bool trainable)
{
	PyObject *d = PyDict_New();
	for (int i = 0; d && i < revc_param_count(self->m); i++) {
		revc_tensor t;
		if (!revc_param_at(self->m, i, &t) || t.trainable != trainable)
			continue;
		PyObject *a = view_of(&t, (PyObject *)self);
		if (!a || PyDict_SetItemString(d, t.name, a) != 0) {
			Py_XDECREF(a);
			Py_CLEAR(d);
			break;
		}
		Py_DECREF(a);
	}
	return d;
}

static PyObject *Model_params(Model *self, void *closure)
{
	return tensor_dict(self, true);
}

static PyObject *Model_state(Model *self, void *closure)
{
	return tensor_dict(self, false);
}

/* ---- running ------------------------------------------------------------------------ */

/* [batch, C, H, W] of the model's input x: 4; 0 for an IR model whose x is
 * not of that shape. */
static int input_shape(const revc_model *m, int64_t dim[4])
{
	dim[0] = revc_model_batch(m);
	revc_model_input(m, dim + 1);
	return dim[1] > 0 ? 4 : 0;
}

/* x and y as the arrays revc reads (converted only when they differ) into
 * b; n examples, the model's batch unless any_n.  The caller releases *xa
 * and *ya. */
static bool batch_of(Model *self, PyObject *x, PyObject *y, bool any_n, PyArrayObject **xa, PyArrayObject **ya,
	revc_batch *b)
{
	*xa = *ya = NULL;
	int64_t dim[4];
	int rank = input_shape(self->m, dim);
	if (rank == 0) {
		usage_error("%s is an IR model without an input x of shape [N, C, H, W]: it takes no batch",
			revc_model_name(self->m));
		return false;
	}
	if (PyArray_Check(y) && !PyArray_ISINTEGER((PyArrayObject *)y)) {
		usage_error("labels must be integers, not %R", (PyObject *)PyArray_DESCR((PyArrayObject *)y));
		return false;
	}
	*xa = (PyArrayObject *)PyArray_FROMANY(x, npy_type(self->opts.dtype), 0, 0, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
	*ya = *xa ? (PyArrayObject *)PyArray_FROMANY(y, NPY_INT32, 0, 0, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST) : NULL;
	if (!*xa || !*ya)
		return false;
	int64_t n = PyArray_NDIM(*xa) > 0 ? (int64_t)PyArray_DIM(*xa, 0) : 0;
	bool ok = PyArray_NDIM(*xa) == rank && (any_n ? n > 0 : n == dim[0]);
	for (int i = 1; ok && i < rank; i++)
		ok = PyArray_DIM(*xa, i) == dim[i];
	if (!ok) {
		PyObject *shape = PyObject_GetAttrString((PyObject *)*xa, "shape");
		char want[160];
		int k = snprintf(want, sizeof want, "(%s", any_n ? "N" : "");
		for (int i = 0; i < rank; i++)
			k += snprintf(want + k, sizeof want - (size_t)k, i == 0 && any_n ? "" : "%s%lld", i ? ", " : "",
				(long long)dim[i]);
		snprintf(want + k, sizeof want - (size_t)k, ")");
		usage_error("x has shape %R, but %s takes %s", shape ? shape : Py_None, revc_model_name(self->m), want);
		Py_XDECREF(shape);
		return false;
	}
	if (PyArray_NDIM(*ya) != 1 || (int64_t)PyArray_DIM(*ya, 0) != n) {
		PyObject *shape = PyObject_GetAttrString((PyObject *)*ya, "shape");
		usage_error("labels have shape %R, but x holds %lld examples", shape ? shape : Py_None, (long long)n);
		Py_XDECREF(shape);
		return false;
	}
	*b = (revc_batch){.x = PyArray_DATA(*xa), .labels = PyArray_DATA(*ya), .n = n};
	return true;
}

/* Runs one of the calls below on a batch, with the GIL released. */
typedef enum { RUN_TRAIN, RUN_GRAD, RUN_EVAL } run_kind;

static bool run_batch(Model *self, run_kind kind, PyObject *x, PyObject *y, double lr, double *loss, double *acc,
	void *logits)
{
	PyArrayObject *xa, *ya;
	revc_batch b;
	if (!batch_of(self, x, y, kind == RUN_EVAL, &xa, &ya, &b) || !enter(self)) {
		Py_XDECREF(xa);
		Py_XDECREF(ya);
		return false;
	}
	revc_error *e = NULL;
	bool ok;
	Py_BEGIN_ALLOW_THREADS
	ok = kind == RUN_TRAIN ? revc_train_step(self->m, &b, lr, loss, &e)
	   : kind == RUN_GRAD  ? revc_grad(self->m, &b, loss, &e)
	                       : revc_eval(self->m, &b, loss, acc, logits, &e);
	Py_END_ALLOW_THREADS
	self->busy = false;
	Py_DECREF(xa);
	Py_DECREF(ya);
	if (!ok)
		raise_error(e);
	return ok;
}

static PyObject *Model_train_step(Model *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"x", "y", "lr", NULL};
	PyObject *x, *y;
	double lr = 0.1, loss;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|d:train_step", names, &x, &y, &lr) ||
	    !run_batch(self, RUN_TRAIN, x, y, lr, &loss, NULL, NULL))
		return NULL;
	self->loss = loss;
	return PyFloat_FromDouble(loss);
}

static PyObject *Model_grad(Model *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"x", "y", NULL};
	PyObject *x, *y;
	double loss;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:grad", names, &x, &y) ||
	    !run_batch(self, RUN_GRAD, x, y, 0, &loss, NULL, NULL))
		return NULL;
	self->loss = loss;
	PyObject *d = PyDict_New();
	for (int i = 0; d && i < revc_param_count(self->m); i++) {
		revc_tensor p, g;
		if (!revc_param_at(self->m, i, &p) || !p.trainable || !revc_grad_at(self->m, i, &g))
			continue;
		PyObject *v = view_of(&g, (PyObject *)self), *a = v ? PyArray_NewCopy((PyArrayObject *)v, NPY_CORDER) : NULL;
		Py_XDECREF(v);
		if (!a || PyDict_SetItemString(d, p.name, a) != 0)
			Py_CLEAR(d);
		Py_XDECREF(a);
	}
	return d;
}

static PyObject *Model_eval(Model *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"x", "y", "logits", NULL};
	PyObject *x, *y;
	int want_logits = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$p:eval", names, &x, &y, &want_logits))
		return NULL;
	PyArrayObject *logits = NULL;
	if (want_logits) {
		PyArrayObject *xa = (PyArrayObject *)PyArray_FROMANY(x, NPY_NOTYPE, 1, 0, 0);
		if (!xa)
			return NULL;
		npy_intp dim[2] = {PyArray_DIM(xa, 0), (npy_intp)revc_model_classes(self->m)};
		Py_DECREF(xa);
		if (!(logits = (PyArrayObject *)PyArray_SimpleNew(2, dim, npy_type(self->opts.dtype))))
			return NULL;
	}
	double loss, acc;
	if (!run_batch(self, RUN_EVAL, x, y, 0, &loss, &acc, logits ? PyArray_DATA(logits) : NULL)) {
		Py_XDECREF(logits);
		return NULL;
	}
	return logits ? Py_BuildValue("ddN", loss, acc, logits) : Py_BuildValue("dd", loss, acc);
}

/* ---- checkpoints --------------------------------------------------------------------- */

/* Saves into (save) or loads from dir, with the GIL released; a load reads
 * a checkpoint (and its step) when step is not NULL, else parameters. */
static bool dir_call(Model *self, PyObject *dir, bool save, int64_t *step)
{
	PyObject *p = fs_path(dir);
	if (!p || !enter(self)) {
		Py_XDECREF(p);
		return false;
	}
	revc_error *e = NULL;
	bool ok;
	Py_BEGIN_ALLOW_THREADS
	ok = save ? revc_save(self->m, PyBytes_AS_STRING(p), *step, &e) : revc_load(self->m, PyBytes_AS_STRING(p), step, &e);
	Py_END_ALLOW_THREADS
	self->busy = false;
	Py_DECREF(p);
	if (!ok)
		raise_error(e);
	return ok;
}

static PyObject *Model_save(Model *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"dir", "step", NULL};
	PyObject *dir;
	long long step = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|L:save", names, &dir, &step))
		return NULL;
	int64_t s = step;
	if (!dir_call(self, dir, true, &s))
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *Model_load(Model *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"dir", "checkpoint", NULL};
	PyObject *dir;
	int checkpoint = 0;
	int64_t step = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$p:load", names, &dir, &checkpoint) ||
	    !dir_call(self, dir, false, checkpoint ? &step : NULL))
		return NULL;
	if (checkpoint)
		return PyLong_FromLongLong(step);
	Py_RETURN_NONE;
}

/* ---- the gradient check -------------------------------------------------------------- */

/* The report as a dict: {"ok", "failed", "worst", "engine", "seed",
 * "tensors": {name: {"samples", "kinks", "scale", "error", "ok"}}}. */
static PyObject *check_dict(const revc_check_report *r)
{
	PyObject *tensors = PyDict_New();
	for (int i = 0; tensors && i < r->n; i++) {
		const revc_check_tensor *t = &r->tensors[i];
		PyObject *d = Py_BuildValue("{s:i,s:i,s:d,s:d,s:O}", "samples", t->samples, "kinks", t->kinks, "scale",
			t->scale, "error", t->error, "ok", t->ok ? Py_True : Py_False);
		if (!d || PyDict_SetItemString(tensors, t->name, d) != 0)
			Py_CLEAR(tensors);
		Py_XDECREF(d);
	}
	if (!tensors)
		return NULL;
	return Py_BuildValue("{s:O,s:i,s:d,s:s,s:K,s:N}", "ok", r->failed == 0 && r->n > 0 ? Py_True : Py_False,
		"failed", r->failed, "worst", r->worst, "engine", r->engine, "seed", (unsigned long long)r->seed, "tensors",
		tensors);
}

static PyObject *Model_check_gradients(Model *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"samples", "seed", "tolerance", "step", NULL};
	revc_check_options c;
	revc_check_options_init(&c);
	long long seed = -1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|$iLdd:check_gradients", names, &c.samples, &seed, &c.tolerance,
		&c.step))
		return NULL;
	if (seed < -1 || seed > INT32_MAX) {
		usage_error("seed must be from 0 to %d (or -1: the spec's), not %lld", INT32_MAX, seed);
		return NULL;
	}
	c.seed = seed;
	if (!enter(self))
		return NULL;
	revc_check_report r;
	revc_error *e = NULL;
	bool ok;
	Py_BEGIN_ALLOW_THREADS
	ok = revc_check_gradients(self->m, &self->opts, &c, &r, &e);
	Py_END_ALLOW_THREADS
	self->busy = false;
	PyObject *d = ok ? check_dict(&r) : raise_error(e);
	revc_check_report_free(&r);
	return d;
}

/* ---- attributes ------------------------------------------------------------------------ */

static PyObject *Model_name(Model *self, void *closure)
{
	return PyUnicode_FromString(revc_model_name(self->m));
}

static PyObject *Model_batch(Model *self, void *closure)
{
	return PyLong_FromLongLong(revc_model_batch(self->m));
}

static PyObject *Model_classes(Model *self, void *closure)
{
	return PyLong_FromLongLong(revc_model_classes(self->m));
}

static PyObject *Model_input_shape(Model *self, void *closure)
{
	int64_t dim[4];
	int rank = input_shape(self->m, dim);
	PyObject *t = PyTuple_New(rank > 0 ? rank : 0);
	for (int i = 0; t && i < rank; i++)
		PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(dim[i]));
	return t;
}

static PyObject *Model_engine(Model *self, void *closure)
{
	return PyUnicode_FromString(revc_model_engine_label(self->m));
}

static PyObject *Model_strategy(Model *self, void *closure)
{
	return PyUnicode_FromString(self->opts.minimum && self->opts.strategy == REVC_AUTO ? "min"
										    : revc_strategy_name(self->opts.strategy));
}

static PyObject *Model_dtype(Model *self, void *closure)
{
	return (PyObject *)PyArray_DescrFromType(npy_type(self->opts.dtype));
}

static PyObject *Model_loss(Model *self, void *closure)
{
	return PyFloat_FromDouble(self->loss);
}

static PyMethodDef Model_methods[] = {
	{"memory", (PyCFunction)(void (*)(void))Model_memory, METH_VARARGS | METH_KEYWORDS,
		"memory(strategy=None): the planned memory (revc mem --json's figures), of this model or as planned under "
		"another strategy"},
	{"train_step", (PyCFunction)(void (*)(void))Model_train_step, METH_VARARGS | METH_KEYWORDS,
		"train_step(x, y, lr=0.1): one momentum-SGD step on a batch; the batch's mean loss before the update"},
	{"grad", (PyCFunction)(void (*)(void))Model_grad, METH_VARARGS | METH_KEYWORDS,
		"grad(x, y): {name: gradient} of the batch's loss for every parameter, without updating (copies)"},
	{"eval", (PyCFunction)(void (*)(void))Model_eval, METH_VARARGS | METH_KEYWORDS,
		"eval(x, y, *, logits=False): (mean loss, accuracy[, logits]) in evaluation mode, over any number of "
		"examples"},
	{"check_gradients", (PyCFunction)(void (*)(void))Model_check_gradients, METH_VARARGS | METH_KEYWORDS,
		"check_gradients(*, samples=3, seed=-1, tolerance=1e-6, step=1e-5): revc check: the gradients in f64\n"
		"against central differences of the loss on sampled coordinates of every parameter, under this model's\n"
		"strategy and engine (its own graphs: the model is not changed); a dict with \"ok\", \"failed\", \"worst\"\n"
		"and \"tensors\" {name: {\"samples\", \"kinks\", \"scale\", \"error\", \"ok\"}}; seed -1: the spec's"},
	{"save", (PyCFunction)(void (*)(void))Model_save, METH_VARARGS | METH_KEYWORDS,
		"save(dir, step=0): writes the parameters atomically, and with step > 0 a checkpoint with the optimiser\n"
		"state and step (docs/checkpoints.md)"},
	{"load", (PyCFunction)(void (*)(void))Model_load, METH_VARARGS | METH_KEYWORDS,
		"load(dir, *, checkpoint=False): reads parameters and running statistics from dir (NAME.npy files;\n"
		"momentum starts at zero), or with checkpoint a checkpoint revc wrote, returning its step"},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef Model_getset[] = {
	{"params", (getter)Model_params, NULL, "{name: NumPy view} of the trainable parameters, in model order", NULL},
	{"state", (getter)Model_state, NULL,
		"{name: NumPy view} of the other persistent tensors (running statistics, momentum)", NULL},
	{"name", (getter)Model_name, NULL, "the spec's name", NULL},
	{"batch", (getter)Model_batch, NULL, "examples per training step", NULL},
	{"classes", (getter)Model_classes, NULL, "number of classes", NULL},
	{"input_shape", (getter)Model_input_shape, NULL, "shape of a batch's x: (batch, C, H, W); () for an IR model without such an x", NULL},
	{"engine", (getter)Model_engine, NULL, "what runs the model: \"jit (znver4)\", \"interp\"", NULL},
	{"strategy", (getter)Model_strategy, NULL, "the memory strategy it was planned with", NULL},
	{"dtype", (getter)Model_dtype, NULL, "float32 or float64", NULL},
	{"loss", (getter)Model_loss, NULL, "the loss of the last train_step or grad (nan before)", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ModelType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "revc.Model",
	.tp_basicsize = sizeof(Model),
	.tp_dealloc = (destructor)Model_dealloc,
	.tp_repr = (reprfunc)Model_repr,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Model(path, *, set=None, strategy='revnet', dtype='float32', engine='jit', cpu=None, threads=2,\n"
	          "      max_memory=None, check_numerics=False)\n\n"
	          "A model read from a spec file (or an IR file, for path ending in .ir) with KEY: VALUE overrides,\n"
	          "compiled and with its parameters initialised from its seed (the spec's seed key, or the seed\n"
	          "setting of an IR file's train block; 0 without one).  strategy takes the names revc's --strategy\n"
	          "takes: store, revnet, checkpoint, auto (within max_memory) or min (the least memory).",
	.tp_methods = Model_methods,
	.tp_getset = Model_getset,
	.tp_new = Model_new,
};

/* ---- module functions ---------------------------------------------------------------- */

static PyObject *revc_py_version(PyObject *mod, PyObject *unused)
{
	return PyUnicode_FromString(revc_version());
}

static PyObject *revc_py_compile(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *names[] = {"spec", "out", "header", "name", "set", "strategy", "cpu", NULL};
	PyObject *spec, *out, *header = NULL, *set = NULL, *strategy = NULL, *cpu = NULL;
	const char *prefix = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$OzOOO:compile", names, &spec, &out, &header, &prefix, &set,
		&strategy, &cpu))
		return NULL;
	revc_options o;
	PyObject *cpu_keep, *op = NULL, *hp = NULL;
	revc_model *m = NULL;
	PyObject *ret = NULL;
	if (!options_of(strategy, NULL, NULL, cpu, 1, NULL, 0, &o, &cpu_keep) || !(op = fs_path(out)) ||
	    (header && header != Py_None && !(hp = fs_path(header))) || !(m = model_open(spec, set)))
		goto done;
	if (!revc_emit) {
		PyErr_SetString(Error, "revc: error: this librevc has no revc_emit (ahead-of-time compilation)");
		goto done;
	}
	revc_error *e = NULL;
	bool ok;
	Py_BEGIN_ALLOW_THREADS
	ok = revc_model_compile(m, &o, &e) &&
	     revc_emit(m, PyBytes_AS_STRING(op), hp ? PyBytes_AS_STRING(hp) : NULL, prefix, &e);
	Py_END_ALLOW_THREADS
	if (!ok)
		raise_error(e);
	else
		ret = Py_NewRef(Py_None);
done:
	revc_model_free(m);
	Py_XDECREF(cpu_keep);
	Py_XDECREF(op);
	Py_XDECREF(hp);
	return ret;
}

/* What revc mem does: the plan of a spec under a strategy, without
 * compiling or allocating the model. */
static PyObject *revc_py_memory(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *names[] = {"spec", "set", "strategy", "dtype", "engine", "threads", NULL};
	PyObject *spec, *set = NULL, *strategy = NULL, *dtype = NULL, *engine = NULL, *cpu_keep;
	int threads = 2;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOOOi:memory", names, &spec, &set, &strategy, &dtype, &engine,
		&threads))
		return NULL;
	revc_options o;
	revc_model *m = NULL;
	if (!options_of(strategy, dtype, engine, NULL, threads, NULL, 0, &o, &cpu_keep) || !(m = model_open(spec, set)))
		return NULL;
	revc_memory r;
	revc_error *e = NULL;
	bool ok;
	Py_BEGIN_ALLOW_THREADS
	ok = memory_under(m, o.strategy, o.minimum, &o, &r, &e);
	Py_END_ALLOW_THREADS
	revc_model_free(m);
	return ok ? memory_object(&r) : raise_error(e);
}

static PyMethodDef module_methods[] = {
	{"version", revc_py_version, METH_NOARGS, "version(): librevc's version, \"0.3.0\""},
	{"memory", (PyCFunction)(void (*)(void))revc_py_memory, METH_VARARGS | METH_KEYWORDS,
		"memory(spec, *, set=None, strategy=None, dtype=None, engine=None, threads=2): the planned memory of a\n"
		"spec's training step (revc mem --json's figures), without compiling it"},
	{"compile", (PyCFunction)(void (*)(void))revc_py_compile, METH_VARARGS | METH_KEYWORDS,
		"compile(spec, out, *, header=None, name=None, set=None, strategy=None, cpu=None): writes the model as\n"
		"native code ahead of time, a shared library (out ends in .so) or an object (.o), as revc compile does"},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "revc",
	.m_doc = "revc: compile, plan and train reversible residual networks (librevc's Python interface).",
	.m_size = -1,
	.m_methods = module_methods,
};

static PyObject *add_error(PyObject *mod, const char *name, PyObject *bases, const char *doc)
{
	char full[64];
	snprintf(full, sizeof full, "revc.%s", name);
	PyObject *cls = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
	if (cls && PyModule_AddObjectRef(mod, name, cls) != 0)
		Py_CLEAR(cls);
	return cls;
}

PyMODINIT_FUNC PyInit_revc(void);

PyMODINIT_FUNC PyInit_revc(void)
{
	import_array();
	if (PyType_Ready(&ModelType) < 0)
		return NULL;
	PyObject *mod = PyModule_Create(&module), *types = PyImport_ImportModule("types");
	if (!mod || !types)
		goto fail;
	namespace_type = PyObject_GetAttrString(types, "SimpleNamespace");
	empty_tuple = PyTuple_New(0);
	if (!namespace_type || !empty_tuple)
		goto fail;
	PyObject *usage_bases = NULL;
	if (!(Error = add_error(mod, "Error", NULL, "An error revc reports; the message is its diagnostic.")) ||
	    !(UserError = add_error(mod, "UserError", Error, "Bad input: a spec, IR, data or checkpoint file.")) ||
	    !(usage_bases = PyTuple_Pack(2, Error, PyExc_ValueError)) ||
	    !(UsageError = add_error(mod, "UsageError", usage_bases, "A bad argument or option value.")) ||
	    !(BudgetError = add_error(mod, "BudgetError", Error, "A plan over a memory budget.")) ||
	    PyModule_AddObjectRef(mod, "Model", (PyObject *)&ModelType) != 0 ||
	    PyModule_AddStringConstant(mod, "__version__", revc_version()) != 0) {
		Py_XDECREF(usage_bases);
		goto fail;
	}
	Py_DECREF(usage_bases);
	Py_DECREF(types);
	return mod;
fail:
	Py_XDECREF(types);
	Py_XDECREF(mod);
	return NULL;
}
