/* model.c: the model handle: made from a spec file, spec text or an IR
 * file, freed with everything it compiled; and the options it compiles
 * under, with their defaults. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "revc_config.h"

/* 256 MiB: far above any graph revc produces. */
#define MAX_IR_FILE ((size_t)256 << 20)

const char *revc_version(void)
{
	return REVC_VERSION;
}

const char *revc_llvm_version(void)
{
	return cg_llvm_version();
}

const char *revc_blas_version(void)
{
	return rt_blas_version();
}

const char *revc_blas_core(void)
{
	return rt_blas_core();
}

void revc_options_init(revc_options *o)
{
	memset(o, 0, sizeof *o);
	o->strategy = REVC_REVNET;
	o->dtype = REVC_F32;
	o->engine = REVC_JIT;
	o->threads = 2;
	o->max_memory = -1;
	o->budget = -1;
	o->bucket_bytes = REVC_BUCKET_DEFAULT;
	o->allreduce_overlap = true;
}

_Static_assert(REVC_INT_MAX == FE_INT_MAX, "revc.h's largest spec integer is the frontend's");
_Static_assert((int)REVC_STORE == (int)PS_STORE && (int)REVC_REVNET == (int)PS_REVNET &&
	(int)REVC_CHECKPOINT == (int)PS_CHECKPOINT && (int)REVC_AUTO == (int)PS_AUTO && PS_STRATEGY_COUNT == 4, "revc_strategy is ps_strategy");
_Static_assert(PS_STRATEGY_DEFAULT == PS_REVNET, "revc_options_init's default strategy is the passes'");

const char *revc_strategy_name(revc_strategy s)
{
	return ps_strategy_name((ps_strategy)s);
}

bool revc_strategy_parse(const char *name, revc_strategy *out)
{
	ps_strategy s;
	if (!ps_strategy_lookup(name, &s))
		return false;
	*out = (revc_strategy)s;
	return true;
}

static const struct {
	revc_strategy strategy;
	bool minimum;
	const char *name; /* NULL: revc_strategy_name's */
} strategy_options[] = {
	{REVC_STORE, false, NULL},
	{REVC_REVNET, false, NULL},
	{REVC_CHECKPOINT, false, NULL},
	{REVC_AUTO, false, NULL},
	{REVC_AUTO, true, "min"},
};
#define NSTRATEGY_OPTIONS (int)(sizeof strategy_options / sizeof strategy_options[0])

const char *revc_strategy_option_at(int i)
{
	if (i < 0 || i >= NSTRATEGY_OPTIONS)
		return NULL;
	return strategy_options[i].name ? strategy_options[i].name : revc_strategy_name(strategy_options[i].strategy);
}

bool revc_strategy_option(const char *name, revc_strategy *s, bool *minimum)
{
	for (int i = 0; i < NSTRATEGY_OPTIONS; i++)
		if (strcmp(revc_strategy_option_at(i), name) == 0) {
			*s = strategy_options[i].strategy;
			*minimum = strategy_options[i].minimum;
			return true;
		}
	return false;
}

ir_dtype drv_dtype(revc_dtype d)
{
	return d == REVC_F64 ? IR_F64 : IR_F32;
}

static revc_model *model_new(void)
{
	revc_model *m = calloc(1, sizeof *m);
	if (!m)
		IR_DIE("out of memory");
	rt_store_init(&m->store);
	return m;
}

static revc_model *from_spec(revc_model *m, bool ok)
{
	if (!ok) {
		free(m);
		return NULL;
	}
	m->is_spec = true;
	snprintf(m->name, sizeof m->name, "%s", m->spec.spec.name);
	m->batch = m->spec.spec.batch;
	m->classes = m->spec.spec.classes;
	return m;
}

revc_model *revc_model_from_file(const char *path, const char *const *sets, int nsets, revc_error **err)
{
	revc_model *m = model_new();
	return from_spec(m, drv_spec_load(&m->spec, path, sets, nsets, err));
}

revc_model *revc_model_from_string(const char *name, const char *text, size_t len, const char *const *sets,
	int nsets, revc_error **err)
{
	revc_model *m = model_new();
	return from_spec(m, drv_spec_parse(&m->spec, name, text, len, sets, nsets, err));
}

/* An IR graph's input x (before or after compiling), or NULL. */
static const ir_node *ir_input_x(const revc_model *m)
{
	const ir_graph *g = m->ir ? m->ir : m->g[DRV_STEP];
	for (int i = 0; g && i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op == IR_OP_INPUT && strcmp(ir_node_str(n, IR_ATTR_NAME), "x") == 0)
			return n;
	}
	return NULL;
}

/* The settings an IR file carries (or, without them, the zeros a dataset
 * given by name reads beside the graph's) made whole from its graph: the
 * name, input, classes and batch are the graph's (a batch written must be
 * it). */
static bool graph_settings(revc_model *m, ir_diags *d)
{
	fe_spec *s = &m->spec.spec;
	snprintf(s->name, sizeof s->name, "%s", m->name);
	s->classes = m->classes;
	revc_model_input(m, s->input);
	if (m->settings && s->seq[FE_KEY_BATCH] && s->batch != m->batch) {
		ir_diag_add(d, s->vpos[FE_KEY_BATCH], "batch %lld, but the graph's input x has batch %lld",
			(long long)s->batch, (long long)m->batch);
		return false;
	}
	s->batch = m->batch;
	return true;
}

/* Reads the settings block, if any, then the graph. */
static bool read_ir(revc_model *m, ir_diags *d)
{
	drv_ir_settings st;
	if (!drv_ir_settings_find(m->ir_path, m->ir_text, m->ir_len, &st, d))
		return false;
	m->graph_pos = st.graph;
	if (st.found && !fe_settings_parse(&m->spec.spec, m->ir_path, m->ir_text + st.body, st.body_len, st.body_line,
		d))
		return false;
	m->settings = st.found;
	m->ir_graph_text = drv_ir_settings_blank(m->ir_text, m->ir_len, &st);
	m->ir = ir_parse(m->ir_path, m->ir_graph_text, m->ir_len, d);
	if (!m->ir || !ir_verify(m->ir, d))
		return false;
	snprintf(m->name, sizeof m->name, "%s", m->ir->name);
	const ir_node *x = ir_input_x(m);
	if (x && x->type.rank > 0)
		m->batch = x->type.dim[0];
	/* The classes are the width of the logits the loss reads. */
	for (int i = 0; i < m->ir->n && !m->classes; i++) {
		const ir_node *n = m->ir->nodes[i];
		if (n->op == IR_OP_SOFTMAX_XENT && n->in[0]->type.rank == 2)
			m->classes = n->in[0]->type.dim[1];
	}
	return graph_settings(m, d);
}

revc_model *revc_model_from_ir(const char *path, revc_error **err)
{
	revc_model *m = model_new();
	rt_err e;
	if (!rt_file_read(path, MAX_IR_FILE, &m->ir_text, &m->ir_len, &e)) {
		free(m);
		drv_error_rt(err, &e);
		return NULL;
	}
	m->ir_path = strdup(path);
	if (!m->ir_path)
		IR_DIE("out of memory");
	ir_diags d;
	ir_diags_init(&d);
	bool ok = read_ir(m, &d);
	if (!ok) {
		drv_model_error(m, &d, err);
		revc_model_free(m);
	}
	ir_diags_free(&d);
	return ok ? m : NULL;
}

const fe_spec *drv_model_settings(const revc_model *m)
{
	return m->is_spec || m->settings ? &m->spec.spec : NULL;
}

void drv_model_options(const revc_model *m, const revc_options *o, revc_options *out)
{
	if (o)
		*out = *o;
	else if (m->compiled)
		*out = m->opts;
	else
		revc_options_init(out);
}

bool drv_no_settings(const revc_model *m, const char *what, revc_error **err)
{
	ir_diags d;
	ir_diags_init(&d);
	ir_diag_add(&d, m->graph_pos, "%s needs the training settings, but %s has none: a `train { ... }` block "
		"before the graph (docs/ir.md; `revc dump SPEC` writes one)", what, m->ir_path);
	drv_model_error(m, &d, err);
	ir_diags_free(&d);
	return false;
}

bool revc_model_has_settings(const revc_model *m, revc_error **err)
{
	return drv_model_settings(m) ? true : drv_no_settings(m, "training", err);
}

revc_dtype revc_model_dtype(const revc_model *m)
{
	return drv_model_dtype(m, m->compiled ? m->opts.dtype : REVC_F32);
}

revc_dtype drv_model_dtype(const revc_model *m, revc_dtype asked)
{
	const ir_node *x = m->is_spec ? NULL : ir_input_x(m);
	return !x ? asked : x->type.dtype == IR_F64 ? REVC_F64 : REVC_F32;
}

bool drv_model_error(const revc_model *m, const ir_diags *d, revc_error **err)
{
	if (m->is_spec)
		return drv_spec_error(&m->spec, d, err);
	drv_source src = {m->ir_path, m->ir_text, m->ir_len};
	return drv_error_diags(err, REVC_ERR_USER, d, &src, 1);
}

bool drv_plan_error(const revc_model *m, const ps_ctx *ctx, revc_error **err)
{
	drv_model_error(m, &ctx->diags, err);
	if (err && *err)
		(*err)->too_large = ctx->too_large;
	return false;
}

void revc_model_free(revc_model *m)
{
	if (!m)
		return;
	for (int k = 0; k < DRV_GRAPHS; k++) {
		rt_exec_free(m->x[k]);
		ir_graph_free(m->g[k]);
	}
	rt_store_free(&m->store);
	ir_graph_free(m->ir);
	if (m->engine_on)
		drv_engine_free(&m->engine);
	drv_spec_free(&m->spec);
	free(m->ir_path);
	free(m->ir_text);
	free(m->ir_graph_text);
	free(m->dumps);
	free(m);
}

const char *revc_model_name(const revc_model *m)
{
	return m->name;
}

int64_t revc_model_batch(const revc_model *m)
{
	return m->batch;
}

int64_t revc_model_classes(const revc_model *m)
{
	return m->classes;
}

void drv_model_add_dumps(revc_model *m, const char *text, size_t len)
{
	char *d = realloc(m->dumps, m->dumps_len + len + 1);
	if (!d)
		IR_DIE("out of memory");
	memcpy(d + m->dumps_len, text, len);
	m->dumps_len += len;
	d[m->dumps_len] = 0;
	m->dumps = d;
}

void revc_model_input(const revc_model *m, int64_t chw[3])
{
	const ir_node *x = m->is_spec ? NULL : ir_input_x(m);
	for (int k = 0; k < 3; k++)
		chw[k] = m->is_spec ? m->spec.spec.input[k] : x && x->type.rank == 4 ? x->type.dim[k + 1] : 0;
}

double revc_model_lr(const revc_model *m)
{
	const fe_spec *s = drv_model_settings(m);
	return s ? s->lr_list[0] : 0;
}

int64_t revc_model_seed(const revc_model *m)
{
	const fe_spec *s = drv_model_settings(m);
	return s ? s->seed : 0;
}

bool revc_model_set_batch(revc_model *m, int64_t batch, revc_error **err)
{
	if (!m->is_spec && batch != m->batch)
		return drv_errorf(err, REVC_ERR_USER, "%s's graph takes batches of %lld, not %lld (an IR file's batch is "
			"its input x's first dimension)", m->ir_path, (long long)m->batch, (long long)batch);
	if (!m->is_spec)
		return true;
	if (m->engine_on)
		return drv_errorf(err, REVC_ERR_USAGE, "%s: the batch of a spec model is set before it compiles", m->name);
	if (batch < 1 || batch > FE_INT_MAX)
		return drv_errorf(err, REVC_ERR_USAGE, "batch size %lld out of range", (long long)batch);
	m->spec.spec.batch = m->batch = batch;
	return true;
}
