/* cmd_check.c: `revc check` compares the gradients revc computes with
 * central finite differences of the loss, in f64, on sampled coordinates of
 * every parameter (driver/check.c says how), or with --drift reports how far
 * the reversible backward pass strays from ordinary backprop
 * (driver/drift.c).  This file parses the options, builds the two graphs
 * the check runs and prints its report. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rt.h"
#include "tools.h"

static const char usage[] =
	"revc check SPEC [--set KEY=VALUE ...] [--samples K] [--seed S] [--tolerance T]\n"
	"                  [--strategy store|revnet|checkpoint] [--engine interp|jit] [--cpu NAME]\n"
	"                  [pass options]\n"
	"       revc check SPEC --drift [--set KEY=VALUE ...] [--seed S] [--json]";
static const char about[] =
	"Initialises SPEC's parameters from the seed, draws a random batch, computes\n"
	"every parameter's gradient in f64, and compares K sampled coordinates of each\n"
	"with central finite differences of the loss.  Prints, per tensor, the error\n"
	"max|analytic - numeric| over its samples divided by the tensor's largest\n"
	"gradient; exits 1 when any exceeds the tolerance.  The gradients come from the\n"
	"engine (native code by default, for --cpu); the finite differences always from\n"
	"the reference interpreter.\n\n"
	"With --drift it measures the reversible backward pass instead: for every\n"
	"invertible unit, the largest absolute and relative error of the reconstructed\n"
	"inputs x1, x2 against the forward values, and per parameter the angle between\n"
	"the revnet and store gradients (worst and median), in f32 and in f64.\n\n"
	"The pass options (not with --drift) apply to the gradient graph's pipeline and\n"
	"to the loss-only graph's, which is the evaluation pipeline (its dumps:\n"
	"eval-NN-PASS.ir); with --stop-after or --passes revc check builds and dumps\n"
	"them and exits without checking.";

static const cli_opt opts[] = {
	{"samples", 0, "K", "coordinates sampled per tensor (default 3)"},
	{"seed", 0, "S", "seed of parameters, batch and samples (default: the spec's)"},
	{"tolerance", 0, "T", "largest relative error accepted (default 1e-6)"},
	{"step", 0, "H", "largest finite-difference step (default 1e-5)"},
	CLI_STRATEGY_OPT,
	CLI_ENGINE_OPT,
	CLI_CPU_OPT,
	{"drift", 0, NULL, "report reconstruction drift and revnet-vs-store gradient angles instead"},
	{"json", 0, NULL, "with --drift: print one JSON object"},
	CLI_SET_OPT,
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_SAMPLES, OPT_SEED, OPT_TOL, OPT_STEP, OPT_STRATEGY, OPT_ENGINE, OPT_CPU, OPT_DRIFT, OPT_JSON, OPT_SET,
	OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

/* What the command line asked for. */
typedef struct {
	const char *spec, *cpu;
	cli_engine_kind engine;
	int64_t samples, seed;
	double tol, h;
	bool drift, json;
	const char *fd_only, *fd_why; /* an option --drift does not take, and why */
	char pass_opt[32];
	ps_strategy strategy;
	ps_options popts;
	cli_model m;
} check_args;

/* The options; -1 when the command goes on, else its exit status. */
static int parse(cli_args *a, check_args *o)
{
	const char *val;
	for (int k; (k = cli_next(a, opts, &val)) != CLI_END;) {
		char *end;
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (o->spec)
				return cli_usage_error(a->cmd, "unexpected argument '%s'", val);
			o->spec = val;
			break;
		case OPT_SAMPLES:
			if (!cli_parse_int(a->cmd, "--samples", val, 1, 1000000, &o->samples))
				return EXIT_USAGE;
			o->fd_only = "--samples", o->fd_why = "it sets the finite-difference check";
			break;
		case OPT_SEED:
			if (!cli_parse_int(a->cmd, "--seed", val, 0, FE_INT_MAX, &o->seed))
				return EXIT_USAGE;
			break;
		case OPT_TOL:
		case OPT_STEP: {
			double v = strtod(val, &end);
			if (!*val || *end || !(v > 0 && v < 1))
				return cli_usage_error(a->cmd, "%s must be a number in (0, 1), not '%s'",
					k == OPT_TOL ? "--tolerance" : "--step", val);
			*(k == OPT_TOL ? &o->tol : &o->h) = v;
			o->fd_only = k == OPT_TOL ? "--tolerance" : "--step";
			o->fd_why = "it sets the finite-difference check";
			break;
		}
		case OPT_STRATEGY:
			if (!cli_parse_strategy(a->cmd, val, &o->strategy))
				return EXIT_USAGE;
			o->fd_only = "--strategy", o->fd_why = "it compares revnet with store";
			break;
		case OPT_ENGINE:
			if (!cli_engine_parse(a->cmd, val, &o->engine))
				return EXIT_USAGE;
			o->fd_only = "--engine", o->fd_why = "it runs its own graphs with the interpreter";
			break;
		case OPT_CPU:
			if (!cli_cpu_parse(a->cmd, val, &o->cpu))
				return EXIT_USAGE;
			o->fd_only = "--cpu", o->fd_why = "it runs its own graphs with the interpreter";
			break;
		case OPT_DRIFT: o->drift = true; break;
		case OPT_JSON: o->json = true; break;
		case OPT_SET:
			if (!cli_model_add_set(&o->m, a->cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (!cli_pass_option(k - OPT_PASS0, val, &o->popts))
				return EXIT_OK;
			snprintf(o->pass_opt, sizeof o->pass_opt, "--%s", opts[k].name);
			o->fd_only = o->pass_opt, o->fd_why = "it runs its own graphs with the interpreter";
		}
	}
	return -1;
}

/* The checks of the options together; -1 when the command goes on. */
static int validate(const char *cmd, const check_args *o)
{
	if (!o->spec)
		return cli_usage_error(cmd, "missing SPEC");
	if (o->drift && o->fd_only)
		return cli_usage_error(cmd, "%s does not apply to --drift (%s)", o->fd_only, o->fd_why);
	if (o->json && !o->drift)
		return cli_usage_error(cmd, "--json goes with --drift");
	int ready = o->drift ? EXIT_OK : cli_engine_check(cmd, o->engine, o->cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(cmd, &o->popts);
	return ready == EXIT_OK ? -1 : ready;
}

static void print_report(const drv_check_report *r, double tol)
{
	for (int i = 0; i < r->n; i++) {
		const drv_check_tensor *t = &r->t[i];
		printf("  %-28s %3d samples %2d on kinks  max|g| %.3e  error %.2e  %s\n", t->name, t->samples,
			t->kinks, t->scale, t->error, t->ok ? "ok" : "FAIL");
	}
	printf("revc check: %d of %d tensors within %g\n", r->n - r->failed, r->n, tol);
}

/* The two graphs the check runs, over one store: the f64 gradient step
 * (*gx, by the engine) and the loss alone (*fx, by the interpreter). */
typedef struct {
	ir_graph *gg, *fg;
	rt_exec *gx, *fx;
	rt_store store;
	cli_engine engine;
} check_graphs;

/* Builds them; EXIT_OK with *gx and *fx set when the check can run, else
 * the exit status (EXIT_OK too when the pipeline was cut short). */
static int build(check_args *o, uint64_t seed, check_graphs *c)
{
	ps_ctx ctx, fctx;
	ps_ctx_init(&ctx);
	ps_ctx_init(&fctx);
	ctx.optimizer = false;
	ctx.strategy = o->strategy;
	cli_engine_plan(&c->engine, &ctx);
	ps_options eopts;
	char eval_only[128];
	int status = EXIT_USER;
	rt_err e;
	c->gg = cli_model_graph(&o->m, IR_F64, FE_LOWER_TRAIN, &ctx, &o->popts);
	c->fg = c->gg ? cli_model_graph(&o->m, IR_F64, FE_LOWER_TRAIN, &fctx,
		cli_eval_options(&o->popts, &eopts, eval_only, sizeof eval_only)) : NULL;
	if (!c->fg)
		goto done;
	if (cli_pipeline_cut("revc check", &o->popts)) {
		status = EXIT_OK;
		goto done;
	}
	if (!rt_store_init_from_graph(&c->store, c->gg, seed, &e) ||
	    !(c->fx = rt_exec_new(c->fg, &c->store, RT_EXEC_AUTO, &e))) {
		cli_error("%s", e.msg);
		goto done;
	}
	if ((c->gx = cli_engine_exec(&c->engine, c->gg, &c->store)))
		status = EXIT_OK;
done:
	ps_ctx_free(&ctx);
	ps_ctx_free(&fctx);
	return status;
}

static int run_check(check_args *o)
{
	check_graphs c = {0};
	rt_store_init(&c.store);
	/* One BLAS thread: the check's products are small and many, and a
	 * second thread's hand-offs cost more than it does (revnet-38 at batch
	 * 8: a third longer, mostly in sched_yield). */
	cli_engine_init(&c.engine, o->engine, 1, o->cpu);
	uint64_t seed = (uint64_t)(o->seed >= 0 ? o->seed : o->m.spec.seed);
	int status = build(o, seed, &c);
	if (status == EXIT_OK && c.gx) {
		drv_check_options co = {(int)o->samples, seed, o->tol, o->h};
		drv_check_report r;
		ir_diags d;
		ir_diags_init(&d);
		char label[96];
		printf("revc check: %s, batch %lld, f64, strategy %s, engine %s, %lld samples per tensor, step %g\n",
			o->m.spec.name, (long long)o->m.spec.batch, ps_strategy_name(o->strategy),
			cli_engine_label(&c.engine, label, sizeof label), (long long)o->samples, o->h);
		if (drv_check_gradients(c.gx, c.fx, &c.store, o->m.spec.classes, &co, &r, &d)) {
			print_report(&r, o->tol);
			status = r.failed ? EXIT_USER : EXIT_OK;
		} else {
			cli_report(&d, NULL, 0);
			status = EXIT_USER;
		}
		drv_check_report_free(&r);
		ir_diags_free(&d);
	}
	rt_exec_free(c.gx);
	rt_exec_free(c.fx);
	rt_store_free(&c.store);
	ir_graph_free(c.gg);
	ir_graph_free(c.fg);
	cli_engine_free(&c.engine);
	return status;
}

int cmd_check(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc check", argc, argv);
	check_args o = {.engine = CLI_ENGINE_JIT, .samples = 3, .seed = -1, .tol = 1e-6, .h = 1e-5,
		.strategy = PS_STRATEGY_DEFAULT};
	int status = parse(&a, &o);
	if (status < 0)
		status = validate(a.cmd, &o);
	if (status >= 0)
		return status;
	if (!cli_model_load(&o.m, o.spec))
		return EXIT_USER;
	if (o.drift)
		status = cli_check_drift(&o.m, (uint64_t)(o.seed >= 0 ? o.seed : o.m.spec.seed), o.json);
	else
		status = run_check(&o);
	cli_model_free(&o.m);
	return status;
}
