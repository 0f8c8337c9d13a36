/* memory.c: the planned memory of a training step as revc mem reports it
 * (docs/mem.md): the fragmentation-free peak by category, the planned
 * arena and the total with parameters and optimiser state, of the compiled
 * model or of a spec planned under another strategy without allocating. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tools.h"

const char *revc_memory_category_key(int c)
{
	return ps_mem_cat_key((ps_mem_cat)c);
}

const char *revc_memory_category_name(int c)
{
	return ps_mem_cat_name((ps_mem_cat)c);
}

_Static_assert(REVC_MEM_CATEGORIES == PS_MEM_CAT_COUNT && PS_MEM_PARAMS == 0 && PS_MEM_GRADS == 1 &&
	PS_MEM_OPTSTATE == 2 && PS_MEM_SAVED == 3 && PS_MEM_TRANSIENT == 4 && PS_MEM_WORKSPACE == 5,
	"at_peak's members are the categories in order");

int64_t revc_memory_at(const revc_memory *r, int c)
{
	const int64_t v[REVC_MEM_CATEGORIES] = {r->at_peak.parameters, r->at_peak.gradients, r->at_peak.optimizer_state,
		r->at_peak.saved, r->at_peak.transient, r->at_peak.workspace};
	return c >= 0 && c < REVC_MEM_CATEGORIES ? v[c] : 0;
}

/* The largest buffers live at the peak step, into idx[0..REVC_MEM_TOP). */
static int largest(const ps_memory *m, int *idx)
{
	enum { TOP = REVC_MEM_TOP };
	int n = 0;
	for (int b = 0; b < m->nbuf; b++) {
		if (m->begin[b] > m->peak_step || m->end[b] < m->peak_step)
			continue;
		int at = n < TOP ? n++ : TOP;
		if (at == TOP && m->bytes[b] <= m->bytes[idx[TOP - 1]])
			continue;
		if (at == TOP)
			at = TOP - 1;
		while (at > 0 && m->bytes[idx[at - 1]] < m->bytes[b]) {
			idx[at] = idx[at - 1];
			at--;
		}
		idx[at] = b;
	}
	return n;
}

/* The value buffer b holds at the peak: of the values sharing it (an
 * in-place chain), the last one made by then. */
static const ir_node *holder(const ir_graph *g, const ps_memory *m, int b)
{
	const ir_node *v = m->first[b];
	for (int t = 0; t <= m->peak_step && t < g->n; t++)
		if (m->buf_of[g->nodes[t]->id] == b)
			v = g->nodes[t];
	return v;
}

/* Runs one step of g in tracking mode on random data from seed; its
 * high-water mark. */
static bool measure(const ir_graph *g, uint64_t seed, int64_t classes, int64_t *out, revc_error **err)
{
	rt_store store;
	rt_store_init(&store);
	rt_err e;
	rt_exec *x = NULL;
	bool ok = rt_store_init_from_graph(&store, g, seed, &e) && (x = rt_exec_new(g, &store, RT_EXEC_TRACK, &e));
	if (ok) {
		drv_check_batch(x, seed, classes);
		ok = rt_exec_run(x, &e);
		*out = rt_exec_peak_bytes(x);
	}
	if (!ok)
		drv_error_rt(err, &e);
	rt_exec_free(x);
	rt_store_free(&store);
	return ok;
}

/* The decisions planned g's units carry, as letters (s where none). */
static void decisions(const ir_graph *g, char *out)
{
	ps_unit *u;
	int nu = ps_units_find(g, &u);
	ps_keep *keep = calloc((size_t)nu + 1, sizeof *keep);
	int *at = malloc(((size_t)nu + 1) * sizeof *at);
	bool *rec = calloc((size_t)nu + 1, sizeof *rec);
	if (!keep || !at || !rec)
		IR_DIE("out of memory");
	ps_keep_read(u, nu, keep);
	for (int k = 0; k < nu; k++)
		if (keep[k].keep == IR_KEEP_NONE)
			keep[k] = (ps_keep){IR_KEEP_STORE, k};
	/* The segments on the planned graph: those a gradient reads (stored)
	 * or whose nodes say recompute. */
	bool *read = calloc((size_t)g->n + 1, sizeof *read);
	if (!read)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->role == IR_ROLE_BWD)
			for (int k = 0; k < g->nodes[i]->nin; k++)
				read[g->nodes[i]->in[k]->id] = true;
	/* A node's segment is the one after the last unit it depends on (its
	 * inputs' units and segments), not its place in the list: the planned
	 * graph is in schedule order, where a recomputed stem may come after
	 * a unit's forward (ids are list positions, inputs before users). */
	int *seg = calloc((size_t)g->n + 1, sizeof *seg);
	if (!seg)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		for (int k = 0; k < n->nin; k++) {
			const ir_node *in = n->in[k];
			int s = in->unit >= 0 ? in->unit + 1 : seg[in->id];
			if (s > seg[n->id])
				seg[n->id] = s;
		}
	}
	bool *present = calloc((size_t)nu + 1, sizeof *present), *recomputed = calloc((size_t)nu + 1, sizeof *recomputed);
	if (!present || !recomputed)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->role != IR_ROLE_FWD || ir_op_has(n->op, IR_OPF_SRC) || ir_op_has(n->op, IR_OPF_FX))
			continue;
		if (n->unit >= 0 || !(read[n->id] || n->keep == IR_KEEP_RECOMPUTE))
			continue;
		present[seg[n->id]] = true;
		recomputed[seg[n->id]] |= n->keep == IR_KEEP_RECOMPUTE;
	}
	int ns = 0;
	for (int j = 0; j <= nu; j++)
		if (present[j]) {
			at[ns] = j;
			rec[ns++] = recomputed[j];
		}
	free(present);
	free(recomputed);
	free(read);
	free(seg);
	if (nu <= REVC_MAX_UNITS)
		ps_decisions_format(keep, nu, at, rec, ns, out);
	else
		out[0] = '\0';
	free(rec);
	free(at);
	free(keep);
	free(u);
}

/* Whether all-reduce r is one of batch norm's: of its statistics, or a sum
 * bn_dx reads. */
static bool bn_sum(const ir_graph *g, const ir_node *r)
{
	if (r->in[0]->op == IR_OP_BN_SHARE)
		return true;
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->op == IR_OP_BN_DX && (g->nodes[i]->in[4] == r || g->nodes[i]->in[5] == r))
			return true;
	return false;
}

/* The sums of gradients (outside batch norm's) and the buckets of g. */
static void buckets(const ir_graph *g, revc_memory *out)
{
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op == IR_OP_BUCKET_PACK) {
			int64_t b = ir_type_bytes(&n->type);
			out->buckets++;
			out->bucket_buffer_bytes += b;
			out->largest_bucket_bytes = b > out->largest_bucket_bytes ? b : out->largest_bucket_bytes;
		}
		if (n->op == IR_OP_ALLREDUCE_START || (n->op == IR_OP_ALLREDUCE && !bn_sum(g, n)))
			out->grad_sums++;
	}
}

static void fill(const ir_graph *g, const ps_memory *pm, revc_strategy s, const char *schedule, revc_memory *out)
{
	memset(out, 0, sizeof *out);
	out->strategy = s;
	out->schedule = schedule;
	out->steps = pm->steps;
	out->peak_step = pm->peak_step;
	out->peak_bytes = pm->peak;
	out->arena_bytes = ps_arena_bytes(g);
	out->saved_transient_peak_bytes = pm->saved_transient_peak;
	out->total_bytes = pm->persistent[PS_MEM_PARAMS] + pm->persistent[PS_MEM_OPTSTATE] + out->arena_bytes;
	const int64_t *live = &pm->live[(size_t)pm->peak_step * PS_MEM_CAT_COUNT];
	out->at_peak.parameters = pm->persistent[PS_MEM_PARAMS];
	out->at_peak.gradients = live[PS_MEM_GRADS];
	out->at_peak.optimizer_state = pm->persistent[PS_MEM_OPTSTATE];
	out->at_peak.saved = live[PS_MEM_SAVED];
	out->at_peak.transient = live[PS_MEM_TRANSIENT];
	out->at_peak.workspace = live[PS_MEM_WORKSPACE];
	out->measured_bytes = -1;
	decisions(g, out->decisions);
	buckets(g, out);
	int idx[REVC_MEM_TOP];
	out->nlargest = largest(pm, idx);
	for (int k = 0; k < out->nlargest; k++) {
		const ir_node *v = holder(g, pm, idx[k]);
		ir_node_ref(v, out->largest[k].value, sizeof out->largest[k].value);
		snprintf(out->largest[k].op, sizeof out->largest[k].op, "%s", ir_op_name(v->op));
		snprintf(out->largest[k].role, sizeof out->largest[k].role, "%s", ir_role_name(v->role));
		snprintf(out->largest[k].scope, sizeof out->largest[k].scope, "%s", v->scope ? v->scope : "");
		ir_type_str(&v->type, out->largest[k].type, sizeof out->largest[k].type);
		out->largest[k].category = (int)pm->cat[idx[k]];
		out->largest[k].bytes = pm->bytes[idx[k]];
	}
}

/* The memory model of planned g under ctx's workspace, and its figures. */
static void compute(const ir_graph *g, const ps_ctx *ctx, revc_strategy s, const char *schedule, revc_memory *out,
	ps_memory *pm)
{
	ps_memory_compute(g, g->nodes, ctx->workspace, ctx->workspace_user, pm);
	fill(g, pm, s, schedule, out);
}

bool revc_model_memory(const revc_model *m, revc_memory *out, revc_error **err)
{
	if (!m->compiled || m->cut)
		return drv_errorf(err, REVC_ERR_USAGE, "%s is not compiled (or its pipeline was cut short)", m->name);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	drv_engine_plan((drv_engine *)&m->engine, &ctx);
	ps_memory pm;
	compute(drv_model_first(m), &ctx, m->opts.strategy, m->schedule, out, &pm);
	ps_memory_free(&pm);
	ps_ctx_free(&ctx);
	return true;
}

/* Plans m's training step under strategy s and o (NULL: defaults): the
 * graph, NULL when the pipeline failed (err) or was cut before plan (*cut).
 * e (initialised for o) is what the workspace of ctx refers to. */
static ir_graph *plan_with(revc_model *m, revc_strategy s, const revc_options *o, drv_engine *e, ps_ctx *ctx,
	bool *cut, revc_error **err)
{
	*cut = false;
	ctx->strategy = (ps_strategy)s;
	ctx->decisions = o->decisions;
	ctx->no_order_edges = o->no_order_edges;
	ctx->ranks = drv_ranks(o);
	ctx->allreduce_overlap = o->allreduce_overlap;
	ctx->bucket_bytes = o->bucket_bytes;
	drv_engine_plan(e, ctx);
	ps_options popts;
	drv_pass_options(o, &popts);
	ir_graph *g = m->is_spec ? drv_model_plan_spec(m, drv_dtype(o->dtype), FE_LOWER_TRAIN, ctx, &popts, err)
				 : drv_model_plan_ir(m, ctx, &popts, err);
	if (g && !ir_graph_has_pass(g, "plan")) {
		*cut = true;
		ir_graph_free(g);
		g = NULL;
	}
	return g;
}

/* What a plan outside the model's compile holds: the options (defaults
 * for NULL), the engine the workspace refers to, the context. */
typedef struct {
	revc_options o;
	drv_engine e;
	ps_ctx ctx;
} planning;

static ir_graph *plan(revc_model *m, revc_strategy s, const revc_options *o, planning *p, bool *cut, revc_error **err)
{
	if (o)
		p->o = *o;
	else
		revc_options_init(&p->o);
	ps_ctx_init(&p->ctx);
	drv_engine_init(&p->e, p->o.engine, p->o.threads, p->o.cpu);
	return plan_with(m, s, &p->o, &p->e, &p->ctx, cut, err);
}

static void planning_free(planning *p)
{
	ps_ctx_free(&p->ctx);
	drv_engine_free(&p->e);
}

/* revc_memory_plan, and whether it failed because the plan pass refused an
 * arena or workspace beyond IR_MAX_BYTES (*too_large). */
static bool memory_plan(revc_model *m, revc_strategy s, const revc_options *o, revc_memory *out, bool *too_large,
	revc_error **err)
{
	planning p;
	bool cut;
	ir_graph *g = plan(m, s, o, &p, &cut, err);
	*too_large = !g && p.ctx.too_large;
	o = &p.o;
	bool ok = g || cut;
	if (cut)
		*out = (revc_memory){.strategy = s, .cut = true, .measured_bytes = -1};
	if (g) {
		ps_memory pm;
		compute(g, &p.ctx, s, p.ctx.schedule ? p.ctx.schedule : "given", out, &pm);
		ps_memory_free(&pm);
		if (o->measure)
			ok = measure(g, (uint64_t)m->spec.spec.seed, m->classes, &out->measured_bytes, err);
	}
	ir_graph_free(g);
	planning_free(&p);
	return ok;
}

bool revc_memory_plan(revc_model *m, revc_strategy s, const revc_options *o, revc_memory *out, revc_error **err)
{
	bool too_large;
	return memory_plan(m, s, o, out, &too_large, err);
}

bool drv_memory_total(revc_model *m, const revc_options *o, int64_t *total, revc_error **err)
{
	revc_memory r;
	bool too_large;
	revc_error *e = NULL;
	if (memory_plan(m, o->strategy, o, &r, &too_large, &e)) {
		*total = r.total_bytes;
		return true;
	}
	if (too_large) {
		revc_error_free(e);
		*total = DRV_TOO_LARGE;
		return true;
	}
	if (err)
		*err = e;
	else
		revc_error_free(e);
	return false;
}

bool drv_memory_phases(revc_model *m, const revc_options *o, int64_t *total, int64_t *fwd_end, int64_t *bwd_peak,
	revc_error **err)
{
	planning p;
	bool cut;
	ir_graph *g = plan(m, o->strategy, o, &p, &cut, err);
	if (g) {
		ps_memory pm;
		ps_memory_compute(g, g->nodes, p.ctx.workspace, p.ctx.workspace_user, &pm);
		int64_t base = pm.persistent[PS_MEM_PARAMS] + pm.persistent[PS_MEM_OPTSTATE] + ps_arena_bytes(g) - pm.peak;
		*total = pm.persistent[PS_MEM_PARAMS] + pm.persistent[PS_MEM_OPTSTATE] + ps_arena_bytes(g);
		int last = 0;
		for (int t = 0; t < g->n; t++)
			if (g->nodes[t]->role == IR_ROLE_FWD)
				last = t;
		*fwd_end = *bwd_peak = 0;
		for (int t = 0; t < pm.steps; t++) {
			int64_t live = 0;
			for (int c = 0; c < PS_MEM_CAT_COUNT; c++)
				live += pm.live[(size_t)t * PS_MEM_CAT_COUNT + c];
			if (t == last)
				*fwd_end = base + live;
			if (t > last && base + live > *bwd_peak)
				*bwd_peak = base + live;
		}
		ps_memory_free(&pm);
	} else if (cut) {
		drv_errorf(err, REVC_ERR_USAGE, "the pass options stop before plan");
	}
	ir_graph_free(g);
	planning_free(&p);
	return g != NULL;
}

char *revc_memory_timeline_svg(revc_model *m, revc_strategy s, const revc_options *o, revc_error **err)
{
	planning p;
	bool cut;
	ir_graph *g = plan(m, s, o, &p, &cut, err);
	o = &p.o;
	char *svg = NULL;
	if (g) {
		ps_memory pm;
		ps_memory_compute(g, g->nodes, p.ctx.workspace, p.ctx.workspace_user, &pm);
		svg = drv_timeline_svg(m->name, m->batch, (ps_strategy)s, g, &pm);
		ps_memory_free(&pm);
	} else if (cut) {
		drv_errorf(err, REVC_ERR_USAGE, "the pass options stop before plan: no timeline");
	}
	ir_graph_free(g);
	planning_free(&p);
	return svg;
}
