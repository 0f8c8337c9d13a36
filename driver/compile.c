/* compile.c: revc_model_compile: a spec's training step and evaluation
 * graph (or an IR file's graph) through the pipeline under the options,
 * planned for the engine that will run them, checked against the memory
 * limit, the parameters initialised from the spec's seed, and the graphs
 * prepared to run (compiled, for the JIT).  The dumps the pass options ask
 * for are kept as text (revc_model_dump) unless they go to a directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "cpu.h"
#include "internal.h"

void drv_pass_options(const revc_options *o, ps_options *out)
{
	*out = (ps_options){.dump_after = o->dump_after, .dump_dir = o->dump_dir, .dump_tag = o->dump_tag,
		.verify_each = o->verify_each,
		.stop_after = o->stop_after, .only = o->passes};
}

bool revc_pass_at(int i, revc_pass *out)
{
	int n;
	const ps_pass *t = ps_pipeline(&n);
	if (i < 0 || i >= n)
		return false;
	*out = (revc_pass){t[i].name, t[i].why, t[i].requires};
	return true;
}

bool revc_pass_names_ok(const revc_options *o, char *bad, size_t n)
{
	ps_options popts;
	drv_pass_options(o, &popts);
	return ps_options_check(&popts, bad, n);
}

bool revc_cpu_known(const char *name)
{
	return cg_cpu_known(name);
}

bool revc_options_check(const revc_options *o, revc_error **err)
{
	const char *cpu = o->cpu;
	if (o->budget >= 0 && o->strategy != REVC_AUTO)
		return drv_errorf(err, REVC_ERR_USAGE, "--budget goes with --strategy auto (--max-memory refuses a plan)");
	if (cpu && o->engine != REVC_JIT)
		return drv_errorf(err, REVC_ERR_USAGE, "--cpu applies to --engine jit (the interpreter is plain C)");
	if (cpu && !cg_cpu_known(cpu))
		return drv_errorf(err, REVC_ERR_USAGE,
			"--cpu must be native or an LLVM CPU name such as x86-64-v3 or znver3, not '%s'", cpu);
	int world = rt_comm_world()->size;
	if (o->ranks < 0 || (o->ranks > 1 && world > 1 && o->ranks != world))
		return drv_errorf(err, REVC_ERR_USAGE, "--ranks must be the number of processes (%d), not %d", world, o->ranks);
	char bad[64];
	if (!revc_pass_names_ok(o, bad, sizeof bad))
		return drv_errorf(err, REVC_ERR_USAGE, "unknown pass '%s'; 'revc dump --print-passes' lists them", bad);
	return drv_engine_check(o->engine, cpu, err);
}

/* The dumps pass options ask for without a directory, written into
 * memory and then added to the model's. */
typedef struct {
	FILE *f;
	char *text;
	size_t len;
} capture;

static void capture_begin(capture *c, ps_options *o)
{
	*c = (capture){0};
	if (!o->dump_after || o->dump_dir)
		return;
	if (!(c->f = open_memstream(&c->text, &c->len)))
		IR_DIE("out of memory");
	o->dump_out = c->f;
}

static void capture_end(capture *c, revc_model *m)
{
	if (!c->f)
		return;
	if (fclose(c->f) != 0)
		IR_DIE("out of memory");
	drv_model_add_dumps(m, c->text, c->len);
	free(c->text);
}

ir_graph *drv_model_plan_spec(revc_model *m, ir_dtype dt, fe_lower_mode mode, ps_ctx *ctx, const ps_options *popts,
	revc_error **err)
{
	if (!m->is_spec && drv_dtype(drv_model_dtype(m, REVC_F32)) != dt) {
		drv_errorf(err, REVC_ERR_USAGE, "this needs an %s graph, and %s is %s: dump the spec with --dtype %s",
			ir_dtype_name(dt), m->ir_path, ir_dtype_name(drv_dtype(drv_model_dtype(m, REVC_F32))),
			ir_dtype_name(dt));
		return NULL;
	}
	ps_options o = *popts;
	capture c;
	capture_begin(&c, &o);
	ir_graph *g = m->is_spec ? drv_spec_plan(&m->spec.spec, dt, mode, ctx, &o)
				 : drv_ir_plan(m, mode == FE_LOWER_EVAL ? DRV_EVAL : DRV_GRAD, ctx, &o);
	capture_end(&c, m);
	if (!g)
		drv_plan_error(m, ctx, err);
	return g;
}

/* A fresh copy of an IR model's graph (its text parsed and verified
 * before). */
static ir_graph *ir_copy(const revc_model *m)
{
	ir_diags d;
	ir_diags_init(&d);
	ir_graph *g = ir_parse(m->ir_path, m->ir_graph_text, m->ir_len, &d);
	IR_ASSERT(g && d.n == 0);
	ir_diags_free(&d);
	return g;
}

ir_graph *drv_ir_plan(const revc_model *m, int k, ps_ctx *ctx, const ps_options *opts)
{
	ir_graph *g = ir_copy(m);
	if (k == DRV_EVAL)
		drv_ir_eval(g);
	const fe_spec *s = drv_model_settings(m);
	if (s)
		drv_ctx_settings(ctx, s);
	else if (!ctx->workspace)
		ctx->workspace = rt_workspace_fn;
	if (ps_run(g, ctx, opts) != 0) {
		ir_graph_free(g);
		return NULL;
	}
	return g;
}

ir_graph *drv_model_plan_ir(revc_model *m, ps_ctx *ctx, const ps_options *popts, revc_error **err)
{
	if (ir_graph_has_pass(m->ir, "autodiff")) {
		drv_errorf(err, REVC_ERR_USAGE, "%s: planning another strategy needs the forward graph, but %s has "
			"been through autodiff", m->name, m->ir_path);
		return NULL;
	}
	ps_options o = *popts;
	capture c;
	capture_begin(&c, &o);
	ir_graph *g = drv_ir_plan(m, DRV_STEP, ctx, &o);
	capture_end(&c, m);
	if (!g)
		drv_plan_error(m, ctx, err);
	return g;
}

int drv_ranks(const revc_options *o)
{
	int world = rt_comm_world()->size;
	return o->ranks ? o->ranks : world > 1 ? world : 0;
}

/* The context graph k of a spec plans in. */
static void context(revc_model *m, int k, ps_ctx *ctx)
{
	ps_ctx_init(ctx);
	ctx->strategy = (ps_strategy)m->opts.strategy;
	ctx->decisions = m->opts.decisions;
	ctx->no_order_edges = m->opts.no_order_edges;
	ctx->optimizer = k == DRV_STEP;
	if (k != DRV_EVAL)
		ctx->ranks = drv_ranks(&m->opts);
	ctx->allreduce_overlap = m->opts.allreduce_overlap;
	ctx->bucket_bytes = m->opts.bucket_bytes;
	drv_engine_plan(&m->engine, ctx);
}

bool drv_model_plan(revc_model *m, int k, const ps_options *popts, revc_error **err)
{
	static const fe_lower_mode modes[DRV_GRAPHS] = {FE_LOWER_TRAIN, FE_LOWER_EVAL, FE_LOWER_TRAIN};
	ps_ctx ctx;
	context(m, k, &ctx);
	ps_options eopts;
	char only[128];
	if (k == DRV_EVAL)
		popts = drv_eval_options(popts, &eopts, only, sizeof only);
	m->g[k] = m->is_spec ? drv_spec_plan(&m->spec.spec, m->dt, modes[k], &ctx, popts) : drv_ir_plan(m, k, &ctx, popts);
	if (!m->g[k])
		drv_model_error(m, &ctx.diags, err);
	if (!m->schedule)
		m->schedule = ctx.schedule ? ctx.schedule : "given";
	ps_ctx_free(&ctx);
	return m->g[k] != NULL;
}

/* Runs the pipelines of the graphs o->graphs asks for. */
static bool plan(revc_model *m, const ps_options *popts, revc_error **err)
{
	for (int k = 0; k < DRV_GRAPHS; k++)
		if ((m->opts.graphs & (1 << k)) && !drv_model_plan(m, k, popts, err))
			return false;
	return true;
}

ir_graph *drv_model_first(const revc_model *m)
{
	for (int k = 0; k < DRV_GRAPHS; k++)
		if (m->g[k])
			return m->g[k];
	return NULL;
}

bool drv_model_exec(revc_model *m, int k, revc_error **err)
{
	if (!(m->x[k] = drv_engine_exec(&m->engine, m->g[k], &m->store, err)))
		return false;
	rt_exec_check_numerics(m->x[k], m->opts.check_numerics);
	return true;
}

static bool init_store(revc_model *m, revc_error **err)
{
	rt_err e;
	const fe_spec *s = drv_model_settings(m);
	uint64_t seed = s ? (uint64_t)s->seed : 0;
	if (!rt_store_init_from_graph(&m->store, drv_model_first(m), seed, &e))
		return drv_error_rt(err, &e);
	/* The scheduled step uses them in an order of its own, which differs
	 * between engines and options (an overlapped all-reduce moves them):
	 * revc_param_at's is docs/model.md's, the order the frontend lowers. */
	if (m->is_spec) {
		ir_graph *canon = fe_lower(&m->spec.spec, IR_F32, FE_LOWER_EVAL);
		if (canon)
			rt_store_order_like(&m->store, canon);
		ir_graph_free(canon);
	}
	return true;
}

bool revc_model_prepare(revc_model *m, revc_error **err)
{
	if (!m->compiled || m->cut)
		return drv_errorf(err, REVC_ERR_USAGE, "%s is not compiled (or its pipeline was cut short): nothing to run",
			m->name);
	if (m->store.n == 0 && !init_store(m, err))
		return false;
	for (int k = 0; k < DRV_GRAPHS; k++)
		if (m->g[k] && !m->x[k] && !drv_model_exec(m, k, err))
			return false;
	return true;
}

bool revc_model_compile(revc_model *m, const revc_options *o, revc_error **err)
{
	if (m->compiled || m->engine_on)
		return drv_errorf(err, REVC_ERR_USAGE, "%s is compiled already: a model compiles once", m->name);
	if (o)
		m->opts = *o;
	else
		revc_options_init(&m->opts);
	if (!m->opts.graphs)
		m->opts.graphs = REVC_GRAPH_STEP | REVC_GRAPH_EVAL;
	/* An IR file's graph through autodiff is a step as it stands; a forward
	 * graph through more than shape has no evaluation graph. */
	if (!m->is_spec && ir_graph_has_pass(m->ir, "autodiff"))
		m->opts.graphs = REVC_GRAPH_STEP;
	if (!m->is_spec && !drv_ir_evaluable(m->ir))
		m->opts.graphs &= ~REVC_GRAPH_EVAL;
	const char *cpu = m->opts.cpu;
	if (!revc_options_check(&m->opts, err))
		return false;
	if (m->opts.strategy == REVC_AUTO && !m->opts.decisions) {
		revc_auto au;
		if (m->opts.minimum ? !revc_auto_minimum(m, &m->opts, &au, err)
				    : !revc_auto_choose(m, &m->opts, m->opts.budget >= 0 ? m->opts.budget : m->opts.max_memory,
					      &au, err))
			return false;
		memcpy(m->decisions, au.decisions, sizeof m->decisions);
		m->opts.decisions = m->decisions;
	}
	ps_options popts;
	drv_pass_options(&m->opts, &popts);
	m->opts.dtype = drv_model_dtype(m, m->opts.dtype);
	m->dt = drv_dtype(m->opts.dtype);
	drv_engine_init(&m->engine, m->opts.engine, m->opts.threads, cpu);
	m->engine.cg.dump_llvm = m->opts.dump_llvm;
	m->engine_on = true;
	drv_engine_label(&m->engine, m->label, sizeof m->label);
	bool native;
	drv_engine_cpu(&m->engine, m->cpu, sizeof m->cpu, &native);

	capture c;
	capture_begin(&c, &popts);
	bool ok = plan(m, &popts, err);
	capture_end(&c, m);
	if (!ok)
		return false;
	m->cut = popts.stop_after || popts.only;
	ir_graph *graphs[DRV_GRAPHS];
	int n = 0;
	for (int k = 0; k < DRV_GRAPHS; k++)
		if (m->g[k])
			graphs[n++] = m->g[k];
	if (!m->cut && !drv_check_max_memory(m->opts.max_memory, graphs, n, err))
		return false;
	/* A spec's parameters have their types once shape has run, cut short
	 * or not; an IR model's are made when it is prepared. */
	if (m->is_spec && ir_graph_has_pass(graphs[0], "shape") && !init_store(m, err))
		return false;
	m->compiled = true;
	return m->cut || m->opts.no_run || revc_model_prepare(m, err);
}

bool revc_model_cut(const revc_model *m)
{
	return m->cut;
}

const char *revc_model_dump(const revc_model *m, const char *pass)
{
	if (!m->dumps)
		return NULL;
	if (!pass)
		return m->dumps;
	/* The manager heads each dump "# ---- [TAG: ]after PASS ----". */
	char head[96];
	snprintf(head, sizeof head, "after %s ----\n", pass);
	const char *p = strstr(m->dumps, head);
	if (!p)
		return NULL;
	p = strchr(p, '\n');
	return p ? p + 1 : NULL;
}

const char *revc_model_engine_label(const revc_model *m)
{
	return m->label;
}

const char *revc_model_engine(const revc_model *m)
{
	return drv_engine_name(&m->engine);
}

const char *revc_model_cpu(const revc_model *m)
{
	return m->engine.kind == REVC_JIT ? m->cpu : NULL;
}

char *revc_model_print(const revc_model *m, revc_graph which, bool dot, revc_error **err)
{
	int k = which == REVC_GRAPH_EVAL ? DRV_EVAL : which == REVC_GRAPH_GRAD ? DRV_GRAD : DRV_STEP;
	if (!m->g[k]) {
		drv_errorf(err, REVC_ERR_USAGE, "%s has no such graph compiled", m->name);
		return NULL;
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		IR_DIE("out of memory");
	const fe_spec *s = drv_model_settings(m);
	if (dot)
		ir_dot(f, m->g[k]);
	else if (s)
		fe_settings_print(f, s);
	if (!dot)
		ir_print(f, m->g[k]);
	if (fclose(f) != 0)
		IR_DIE("out of memory");
	return buf;
}
