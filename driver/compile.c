/* compile.c: revc_model_compile: a spec's training step and evaluation
 * graph (or an IR file's graph) through the pipeline under the options,
 * planned for the engine that will run them, checked against the memory
 * limit, the parameters initialised from the spec's seed, and the graphs
 * prepared to run (compiled, for the JIT).  The dumps the pass options ask
 * for are kept as text (revc_model_dump) unless they go to a directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "internal.h"

void drv_pass_options(const revc_options *o, ps_options *out)
{
	*out = (ps_options){.dump_after = o->dump_after, .dump_dir = o->dump_dir, .verify_each = o->verify_each,
		.stop_after = o->stop_after, .only = o->passes};
}

/* Runs the pipelines for m; false with the error in err. */
static bool plan(revc_model *m, const ps_options *popts, revc_error **err)
{
	ps_ctx ctx, ectx;
	ps_ctx_init(&ctx);
	ps_ctx_init(&ectx);
	ctx.strategy = (ps_strategy)m->opts.strategy;
	ctx.no_order_edges = m->opts.no_order_edges;
	ectx.optimizer = false;
	drv_engine_plan(&m->engine, &ctx);
	drv_engine_plan(&m->engine, &ectx);
	bool ok;
	if (m->is_spec) {
		ps_options eopts;
		char only[128];
		m->step = drv_spec_plan(&m->spec.spec, m->dt, FE_LOWER_TRAIN, &ctx, popts);
		m->eval = m->step ? drv_spec_plan(&m->spec.spec, m->dt, FE_LOWER_EVAL, &ectx,
			drv_eval_options(popts, &eopts, only, sizeof only)) : NULL;
		ok = m->eval != NULL;
		if (!ok)
			drv_model_error(m, m->step ? &ectx.diags : &ctx.diags, err);
	} else {
		m->step = m->ir;
		m->ir = NULL;
		ok = ps_run(m->step, &ctx, popts) == 0;
		if (!ok)
			drv_model_error(m, &ctx.diags, err);
	}
	m->schedule = ctx.schedule ? ctx.schedule : "given";
	ps_ctx_free(&ctx);
	ps_ctx_free(&ectx);
	return ok;
}

static bool prepare(revc_model *m, revc_error **err)
{
	ir_graph *graphs[2] = {m->step, m->eval};
	if (!drv_check_max_memory(m->opts.max_memory, graphs, m->eval ? 2 : 1, err))
		return false;
	rt_err e;
	uint64_t seed = m->is_spec ? (uint64_t)m->spec.spec.seed : 0;
	if (!rt_store_init_from_graph(&m->store, m->step, seed, &e))
		return drv_error_rt(err, &e);
	if (!(m->step_x = drv_engine_exec(&m->engine, m->step, &m->store, err)))
		return false;
	if (m->eval && !(m->eval_x = drv_engine_exec(&m->engine, m->eval, &m->store, err)))
		return false;
	rt_exec_check_numerics(m->step_x, m->opts.check_numerics);
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
	const char *cpu = m->opts.cpu;
	if (cpu && m->opts.engine != REVC_JIT)
		return drv_errorf(err, REVC_ERR_USAGE, "--cpu applies to --engine jit (the interpreter is plain C)");
	if (cpu && !cg_cpu_known(cpu))
		return drv_errorf(err, REVC_ERR_USAGE,
			"--cpu must be native or an LLVM CPU name such as x86-64-v3 or znver3, not '%s'", cpu);
	ps_options popts;
	drv_pass_options(&m->opts, &popts);
	char bad[64];
	if (!ps_options_check(&popts, bad, sizeof bad))
		return drv_errorf(err, REVC_ERR_USAGE, "unknown pass '%s'; 'revc dump --print-passes' lists them", bad);
	if (!drv_engine_check(m->opts.engine, cpu, err))
		return false;
	m->dt = drv_dtype(m->opts.dtype);
	drv_engine_init(&m->engine, m->opts.engine, m->opts.threads, cpu);
	m->engine_on = true;
	drv_engine_label(&m->engine, m->label, sizeof m->label);

	FILE *dumps = NULL;
	char *text = NULL;
	size_t len = 0;
	if (popts.dump_after && !popts.dump_dir) {
		if (!(dumps = open_memstream(&text, &len)))
			IR_DIE("out of memory");
		popts.dump_out = dumps;
	}
	bool ok = plan(m, &popts, err);
	if (dumps) {
		if (fclose(dumps) != 0)
			IR_DIE("out of memory");
		drv_model_add_dumps(m, text, len);
		free(text);
	}
	if (!ok)
		return false;
	m->cut = popts.stop_after || popts.only;
	if (!m->cut && !prepare(m, err))
		return false;
	/* Cut short after shape, the parameters still have their types. */
	rt_err e;
	if (m->cut && ir_graph_has_pass(m->step, "shape") &&
	    !rt_store_init_from_graph(&m->store, m->step, m->is_spec ? (uint64_t)m->spec.spec.seed : 0, &e))
		return drv_error_rt(err, &e);
	m->compiled = true;
	return true;
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
