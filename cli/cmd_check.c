/* cmd_check.c: `revc check` compares the gradients revc computes with
 * central finite differences of the loss, in f64, on sampled coordinates of
 * every parameter.
 *
 * The step is a compromise: rounding noise grows as the step shrinks, and a
 * ReLU whose input crosses zero inside the step puts a kink in the loss that
 * spoils the estimate (early layers move many activations, so large steps
 * cross kinks almost surely).  So each coordinate tries steps h, h/2,
 * h/4, ... down to h/1000 and takes the first at which D(step) and D(step/2) agree
 * within a quarter of the tolerance and the losses' rounding cannot move
 * D(step/2) by half the tolerance: a smooth stretch, measured as finely as
 * needed and no finer.  The rounding test stops steps so small that the
 * two differences are a few ulps each and agree by chance.  Among usable
 * steps, the first that changes the sign of no ReLU input (the
 * interpreter's kink digest) is preferred: a kink very near the coordinate
 * spoils D(step) and D(step/2) alike and so passes the agreement test.  A
 * coordinate where no step is usable is counted as on a kink and replaced
 * by another.  A wrong gradient gives differences that
 * agree with each other and not with it, so it is never excused. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rt.h"

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

typedef struct {
	rt_exec *fwd;   /* the loss alone */
	double h, tol;
} fd_ctx;

static bool loss_at(fd_ctx *c, double *loss, rt_err *e)
{
	if (!rt_exec_run(c->fwd, e))
		return false;
	*loss = *(const double *)rt_exec_output(c->fwd, "loss", NULL);
	return true;
}

/* One central difference of the loss. */
typedef struct {
	double d;     /* (L(w + h) - L(w - h)) / 2h */
	double noise; /* what rounding of the two losses can do to d: 4 ulps of each */
	bool kink;    /* some ReLU input changed sign between w - h and w + h */
} difference;

static bool central(fd_ctx *c, double *w, double h, difference *out, rt_err *e)
{
	double w0 = *w, lp = 0, lm = 0;
	*w = w0 + h;
	bool ok = loss_at(c, &lp, e);
	uint64_t sides = rt_exec_kinks(c->fwd);
	*w = w0 - h;
	ok = ok && loss_at(c, &lm, e);
	out->kink = rt_exec_kinks(c->fwd) != sides;
	*w = w0;
	out->d = (lp - lm) / (2 * h);
	out->noise = 4 * DBL_EPSILON * fmax(fabs(lp), fabs(lm)) / h;
	return ok;
}

static void fill_batch(rt_exec *x, const fe_spec *s, uint64_t seed)
{
	const ir_type *tx, *ty;
	double *xs = rt_exec_input(x, "x", &tx);
	int32_t *ys = rt_exec_input(x, "labels", &ty);
	if (!xs || !ys)
		return;
	rt_rng r;
	rt_rng_derive(&r, seed, RT_RNG_CHECK_BATCH, 0);
	for (int64_t i = 0; i < ir_type_elems(tx); i++)
		xs[i] = rt_rng_uniform(&r);
	for (int64_t i = 0; i < ir_type_elems(ty); i++)
		ys[i] = (int32_t)rt_rng_below(&r, (uint64_t)s->classes);
}

/* Checks one tensor; prints its line.  Returns false on a run error. */
static bool check_tensor(fd_ctx *c, rt_tensor *t, const double *grad, int samples, uint64_t seed,
	int index, bool *passed, rt_err *e)
{
	int64_t n = ir_type_elems(&t->type);
	double *w = t->data, max_err = 0, scale = 0;
	int done = 0, kinks = 0;
	for (int64_t i = 0; i < n; i++)
		scale = cli_max_nan(scale, fabs(grad[i]));
	rt_rng r;
	rt_rng_derive(&r, seed, RT_RNG_CHECK_PICK, (uint64_t)index);
	for (int tries = 0; done < samples && done < n && tries < 4 * samples; tries++) {
		int64_t i = (int64_t)rt_rng_below(&r, (uint64_t)n);
		/* The first usable step that crosses no kink, else the first usable
		 * one: in a deep net nearly every step flips some ReLU somewhere,
		 * mostly to no visible effect. */
		bool smooth = false, usable = false;
		double fd = 0;
		difference d1, d2;
		if (!central(c, &w[i], c->h, &d1, e))
			return false;
		for (double h = c->h; h / 2 >= c->h / 1000 && !smooth; h /= 2, d1 = d2) {
			if (!central(c, &w[i], h / 2, &d2, e))
				return false;
			if (fabs(d1.d - d2.d) > c->tol * scale / 4 || d2.noise > c->tol * scale / 2)
				continue;
			smooth = !d1.kink && !d2.kink;
			if (smooth || !usable)
				fd = d2.d;
			usable = true;
		}
		if (!usable) {
			kinks++;
			continue;
		}
		max_err = cli_max_nan(max_err, fabs(grad[i] - fd));
		done++;
	}
	double rel = scale > 0 ? max_err / scale : max_err;
	bool ok = done > 0 && rel <= c->tol;
	*passed = ok;
	printf("  %-28s %3d samples %2d on kinks  max|g| %.3e  error %.2e  %s\n", t->name, done,
		kinks, scale, rel, ok ? "ok" : "FAIL");
	return true;
}

int cmd_check(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc check", argc, argv);
	const char *spec = NULL, *cpu = NULL, *val;
	cli_engine_kind engine_kind = CLI_ENGINE_JIT;
	int64_t samples = 3, seed = -1;
	double tol = 1e-6, h = 1e-5;
	bool drift = false, json = false;
	const char *fd_only = NULL, *fd_why = NULL; /* an option --drift does not take, and why */
	char pass_opt[32];
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ctx.optimizer = false;
	ps_options popts = {0};
	cli_model m = {0};
	for (int k; (k = cli_next(&a, opts, &val)) != CLI_END;) {
		char *end;
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (spec)
				return cli_usage_error(a.cmd, "unexpected argument '%s'", val);
			spec = val;
			break;
		case OPT_SAMPLES:
			if (!cli_parse_int(a.cmd, "--samples", val, 1, 1000000, &samples))
				return EXIT_USAGE;
			fd_only = "--samples";
			fd_why = "it sets the finite-difference check";
			break;
		case OPT_SEED:
			if (!cli_parse_int(a.cmd, "--seed", val, 0, FE_INT_MAX, &seed))
				return EXIT_USAGE;
			break;
		case OPT_TOL:
		case OPT_STEP: {
			double v = strtod(val, &end);
			if (!*val || *end || !(v > 0 && v < 1))
				return cli_usage_error(a.cmd, "%s must be a number in (0, 1), not '%s'",
					k == OPT_TOL ? "--tolerance" : "--step", val);
			*(k == OPT_TOL ? &tol : &h) = v;
			fd_only = k == OPT_TOL ? "--tolerance" : "--step";
			fd_why = "it sets the finite-difference check";
			break;
		}
		case OPT_STRATEGY:
			if (!cli_parse_strategy(a.cmd, val, &ctx.strategy))
				return EXIT_USAGE;
			fd_only = "--strategy";
			fd_why = "it compares revnet with store";
			break;
		case OPT_ENGINE:
			if (!cli_engine_parse(a.cmd, val, &engine_kind))
				return EXIT_USAGE;
			fd_only = "--engine";
			fd_why = "it runs its own graphs with the interpreter";
			break;
		case OPT_CPU:
			if (!cli_cpu_parse(a.cmd, val, &cpu))
				return EXIT_USAGE;
			fd_only = "--cpu";
			fd_why = "it runs its own graphs with the interpreter";
			break;
		case OPT_DRIFT: drift = true; break;
		case OPT_JSON: json = true; break;
		case OPT_SET:
			if (!cli_model_add_set(&m, a.cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (!cli_pass_option(k - OPT_PASS0, val, &popts))
				return EXIT_OK;
			snprintf(pass_opt, sizeof pass_opt, "--%s", opts[k].name);
			fd_only = pass_opt;
			fd_why = "it runs its own graphs with the interpreter";
		}
	}
	if (!spec)
		return cli_usage_error(a.cmd, "missing SPEC");
	if (drift && fd_only)
		return cli_usage_error(a.cmd, "%s does not apply to --drift (%s)", fd_only, fd_why);
	if (json && !drift)
		return cli_usage_error(a.cmd, "--json goes with --drift");
	int ready = drift ? EXIT_OK : cli_engine_check(a.cmd, engine_kind, cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(a.cmd, &popts);
	if (ready != EXIT_OK)
		return ready;
	if (drift) {
		int st = EXIT_USER;
		if (cli_model_load(&m, spec))
			st = cli_check_drift(&m, (uint64_t)(seed >= 0 ? seed : m.spec.seed), json);
		ps_ctx_free(&ctx);
		cli_model_free(&m);
		return st;
	}

	/* One BLAS thread: the check's products are small and many, and a
	 * second thread's hand-offs cost more than it does (revnet-38 at batch
	 * 8: a third longer, mostly in sched_yield). */
	cli_engine engine;
	cli_engine_init(&engine, engine_kind, 1, cpu);
	cli_engine_plan(&engine, &ctx);
	int status = EXIT_USER;
	ir_graph *gg = NULL, *fg = NULL;
	rt_exec *gx = NULL, *fx = NULL;
	rt_store store;
	rt_store_init(&store);
	rt_err e;
	ps_options eopts;
	char eval_only[128];
	ps_ctx fctx;
	ps_ctx_init(&fctx);
	if (!cli_model_load(&m, spec))
		goto done;
	uint64_t s = (uint64_t)(seed >= 0 ? seed : m.spec.seed);
	gg = cli_model_graph(&m, IR_F64, FE_LOWER_TRAIN, &ctx, &popts);
	fg = gg ? cli_model_graph(&m, IR_F64, FE_LOWER_TRAIN, &fctx,
		cli_eval_options(&popts, &eopts, eval_only, sizeof eval_only)) : NULL;
	if (!fg)
		goto done;
	if (cli_pipeline_cut(a.cmd, &popts)) {
		status = EXIT_OK;
		goto done;
	}
	if (!rt_store_init_from_graph(&store, gg, s, &e) || !(fx = rt_exec_new(fg, &store, RT_EXEC_AUTO, &e))) {
		cli_error("%s", e.msg);
		goto done;
	}
	if (!(gx = cli_engine_exec(&engine, gg, &store)))
		goto done;
	fill_batch(gx, &m.spec, s);
	fill_batch(fx, &m.spec, s);
	rt_exec_kink_digest(fx, true);
	if (!rt_exec_run(gx, &e)) {
		cli_error("%s", e.msg);
		goto done;
	}
	char label[96];
	printf("revc check: %s, batch %lld, f64, strategy %s, engine %s, %lld samples per tensor, step %g\n",
		m.spec.name, (long long)m.spec.batch, ps_strategy_name(ctx.strategy),
		cli_engine_label(&engine, label, sizeof label), (long long)samples, h);
	fd_ctx c = {fx, h, tol};
	int failed = 0, checked = 0;
	for (int i = 0; i < store.n; i++) {
		rt_tensor *t = &store.t[i];
		if (!t->trainable)
			continue;
		char name[512];
		const double *grad = rt_exec_output(gx, ps_grad_output_name(name, sizeof name, t->name), NULL);
		bool ok;
		if (!grad || !check_tensor(&c, t, grad, (int)samples, s, i, &ok, &e)) {
			cli_error("%s", grad ? e.msg : "no gradient output");
			goto done;
		}
		failed += !ok;
		checked++;
	}
	printf("revc check: %d of %d tensors within %g\n", checked - failed, checked, tol);
	status = failed ? EXIT_USER : EXIT_OK;
done:
	rt_exec_free(gx);
	rt_exec_free(fx);
	rt_store_free(&store);
	ir_graph_free(gg);
	ir_graph_free(fg);
	ps_ctx_free(&ctx);
	ps_ctx_free(&fctx);
	cli_model_free(&m);
	cli_engine_free(&engine);
	return status;
}
