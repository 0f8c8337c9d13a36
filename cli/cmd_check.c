/* cmd_check.c: `revc check` compares the gradients revc computes with
 * central finite differences of the loss, in f64, on sampled coordinates of
 * every parameter (revc_check_gradients; driver/check.c says how), or with
 * --drift reports how far the reversible backward pass strays from
 * ordinary backprop (revc_drift).  This file parses the options and prints
 * the reports. */
#include <stdlib.h>

#include "cli.h"

static const char usage[] =
	"revc check SPEC|FILE.ir [--set KEY=VALUE ...] [--samples K] [--seed S] [--tolerance T]\n"
	"                  [--strategy NAME] [--budget SIZE] [--engine interp|jit] [--cpu NAME]\n"
	"                  [pass options]\n"
	"       revc check SPEC --drift [--set KEY=VALUE ...] [--seed S] [--engine interp|jit] [--cpu NAME]\n"
	"                  [--json]";
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
	"the revnet and store gradients (worst and median), in f32 and in f64.  Both\n"
	"steps run on the engine: under the JIT (the default) with the kernels training\n"
	"uses, Winograd's in f32 where chosen (REVC_CONV=direct|winograd2|winograd4|blas\n"
	"forces one; Winograd is f32 only), and the report counts each step's\n"
	"convolution lowerings.\n\n"
	"The pass options (not with --drift) apply to the gradient graph's pipeline and\n"
	"to the loss-only graph's, which is the evaluation pipeline (its dumps:\n"
	"eval-NN-PASS.ir); with --stop-after or --passes revc check builds and dumps\n"
	"them and exits without checking.\n\n"
	"FILE.ir is an f64 forward graph in revc's IR with its couplings marked, such\n"
	"as `revc dump SPEC --dtype f64` prints: it checks as the spec does (the seed\n"
	"of its training settings, 0 without them).  --drift needs a spec.";

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
	CLI_BUDGET_OPT,
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_SAMPLES, OPT_SEED, OPT_TOL, OPT_STEP, OPT_STRATEGY, OPT_ENGINE, OPT_CPU, OPT_DRIFT, OPT_JSON, OPT_SET,
	OPT_BUDGET, OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

/* What the command line asked for. */
typedef struct {
	const char *spec;
	bool drift, json;
	const char *fd_only, *fd_why; /* an option --drift does not take, and why */
	char fd_opt[32];
	revc_options o;
	revc_check_options c;
	cli_sets sets;
} check_args;

/* Notes an option that --drift does not take. */
static void fd_only(check_args *o, const char *name, const char *why)
{
	snprintf(o->fd_opt, sizeof o->fd_opt, "--%s", name);
	o->fd_only = o->fd_opt, o->fd_why = why;
}

/* --tolerance and --step. */
static bool parse_fraction(const char *cmd, const char *opt, const char *val, double *out)
{
	char *end;
	double v = strtod(val, &end);
	if (!*val || *end || !(v > 0 && v < 1)) {
		cli_usage_error(cmd, "%s must be a number in (0, 1), not '%s'", opt, val);
		return false;
	}
	*out = v;
	return true;
}

/* The options; -1 when the command goes on, else its exit status. */
static int parse(cli_args *a, check_args *o)
{
	const char *val;
	int64_t n;
	for (int k; (k = cli_next(a, opts, &val)) != CLI_END;) {
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (o->spec)
				return cli_usage_error(a->cmd, "unexpected argument '%s'", val);
			o->spec = val;
			break;
		case OPT_SAMPLES:
			if (!cli_parse_int(a->cmd, "--samples", val, 1, 1000000, &n))
				return EXIT_USAGE;
			o->c.samples = (int)n;
			fd_only(o, "samples", "it sets the finite-difference check");
			break;
		case OPT_SEED:
			if (!cli_parse_int(a->cmd, "--seed", val, 0, REVC_INT_MAX, &o->c.seed))
				return EXIT_USAGE;
			break;
		case OPT_TOL:
		case OPT_STEP:
			if (!parse_fraction(a->cmd, k == OPT_TOL ? "--tolerance" : "--step", val,
				k == OPT_TOL ? &o->c.tolerance : &o->c.step))
				return EXIT_USAGE;
			fd_only(o, opts[k].name, "it sets the finite-difference check");
			break;
		case OPT_DRIFT: o->drift = true; break;
		case OPT_JSON: o->json = true; break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (k >= OPT_PASS0 && !cli_pass_option(k - OPT_PASS0, val, &o->o))
				return EXIT_OK;
			if (k < OPT_PASS0 && cli_model_option(a->cmd, opts[k].name, val, &o->o, &o->sets) < 0)
				return EXIT_USAGE;
			if (k != OPT_SET && k != OPT_ENGINE && k != OPT_CPU)
				fd_only(o, opts[k].name, k == OPT_STRATEGY ? "it compares revnet with store"
					: "it builds its own graphs");
		}
	}
	return -1;
}

/* The checks of the options together; -1 when the command goes on. */
static int validate(const char *cmd, check_args *o)
{
	if (!o->spec)
		return cli_usage_error(cmd, "missing SPEC or FILE.ir");
	if (o->drift && o->fd_only)
		return cli_usage_error(cmd, "%s does not apply to --drift (%s)", o->fd_only, o->fd_why);
	if (o->json && !o->drift)
		return cli_usage_error(cmd, "--json goes with --drift");
	int ready = cli_engine_check(cmd, o->o.engine, o->o.cpu);
	if (ready == EXIT_OK)
		ready = cli_pass_options_ready(cmd, &o->o);
	return ready == EXIT_OK ? -1 : ready;
}

static void print_report(const revc_check_report *r, double tol)
{
	for (int i = 0; i < r->n; i++) {
		const revc_check_tensor *t = &r->tensors[i];
		printf("  %-28s %3d samples %2d on kinks  max|g| %.3e  error %.2e  %s\n", t->name, t->samples,
			t->kinks, t->scale, t->error, t->ok ? "ok" : "FAIL");
	}
	printf("revc check: %d of %d tensors within %g\n", r->n - r->failed, r->n, tol);
}

static int run_check(revc_model *m, const check_args *o)
{
	revc_check_report r;
	revc_error *err = NULL;
	bool ok = revc_check_gradients(m, &o->o, &o->c, &r, &err);
	cli_print_dumps(m);
	if (r.engine[0]) /* the graphs were built and ran (a run may have failed) */
		printf("revc check: %s, batch %lld, f64, strategy %s, engine %s, %d samples per tensor, step %g\n",
			revc_model_name(m), (long long)revc_model_batch(m), revc_strategy_name(o->o.strategy), r.engine,
			o->c.samples, o->c.step);
	int status = EXIT_OK;
	if (!ok) {
		status = cli_revc_error(err);
	} else if (r.cut) {
		cli_pipeline_cut("revc check", &o->o);
	} else {
		print_report(&r, o->c.tolerance);
		status = r.failed ? EXIT_USER : EXIT_OK;
	}
	revc_check_report_free(&r);
	return status;
}

/* ---- --drift ------------------------------------------------------------ */

#define NDT REVC_DRIFT_DTYPES
static const char *const dtype_names[NDT] = {"f32", "f64"};

static void print_units(const revc_drift_report *r)
{
	printf("reconstructed unit inputs against the forward values: max|rec - fwd| (abs) and that over max|fwd| (rel)\n");
	printf("%-8s  %-43s  %s\n", "", dtype_names[0], dtype_names[1]);
	printf("%-8s", "unit");
	for (int d = 0; d < NDT; d++)
		printf("  %10s %10s %10s %10s", "x1 abs", "x1 rel", "x2 abs", "x2 rel");
	printf("\n");
	for (int k = 0; k < r->nunits; k++) {
		const revc_drift_unit *u = &r->units[k];
		printf("%-8s", u->unit);
		for (int d = 0; d < NDT; d++)
			printf("  %10.2e %10.2e %10.2e %10.2e", u->abs[d][0], u->rel[d][0], u->abs[d][1], u->rel[d][1]);
		printf("\n");
	}
	if (r->nunits == 0)
		printf("  (no invertible unit: every unit changes its width or stride)\n");
}

/* "winograd2 x39, direct x5". */
static void print_convs(const revc_drift_convs *c)
{
	for (int i = 0; i < c->n; i++)
		printf("%s%s x%d", i ? ", " : "", c->lowering[i], c->count[i]);
	if (c->n == 0)
		printf("none");
}

static void print_drift(const revc_drift_report *r)
{
	int nu = r->nunits, ng = r->ngrads;
	printf("revc check --drift: %s, batch %lld, seed %llu, revnet against store, %d invertible unit%s, engine %s\n",
		r->model, (long long)r->batch, (unsigned long long)r->seed, nu, nu == 1 ? "" : "s", r->engine);
	for (int d = 0; d < NDT && r->jit; d++) {
		printf("  %s convolutions: revnet step ", dtype_names[d]);
		print_convs(&r->convs[d][0]);
		printf("; store step ");
		print_convs(&r->convs[d][1]);
		printf("%s\n", d == 1 ? " (Winograd is f32 only)" : "");
	}
	printf("\n");
	print_units(r);
	printf("\ngradients, revnet against store: angle in degrees over %d tensors\n", ng);
	for (int d = 0; d < NDT; d++) {
		const revc_drift_summary *m = &r->sum[d];
		printf("  %s  worst %.3e (%s), median %.3e\n", dtype_names[d], m->worst_degrees,
			ng ? r->grads[m->worst_grad].name : "-", m->median_degrees);
	}
	printf("\nsummary\n");
	for (int d = 0; d < NDT; d++) {
		const revc_drift_summary *m = &r->sum[d];
		printf("  %s  ", dtype_names[d]);
		if (nu)
			printf("largest relative reconstruction error %.2e (%s.x%d), ", m->worst_rel,
				r->units[m->worst_unit].unit, m->worst_x + 1);
		printf("largest gradient angle %.2e degrees\n", m->worst_degrees);
	}
}

static int run_drift(const revc_model *m, const revc_options *o, uint64_t seed, bool json)
{
	revc_error *err = NULL;
	if (json) {
		char *text = revc_drift_json(m, o, seed, &err);
		if (!text)
			return cli_revc_error(err);
		fputs(text, stdout);
		free(text);
		return EXIT_OK;
	}
	revc_drift_report r;
	if (!revc_drift(m, o, seed, &r, &err))
		return cli_revc_error(err);
	print_drift(&r);
	revc_drift_report_free(&r);
	return EXIT_OK;
}

int cmd_check(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc check", argc, argv);
	check_args o = {0};
	revc_options_init(&o.o);
	revc_check_options_init(&o.c);
	int status = parse(&a, &o);
	if (status < 0)
		status = validate(a.cmd, &o);
	if (status >= 0)
		return status;
	revc_model *m = cli_model_open("revc check", o.spec, &o.sets, &status);
	if (!m)
		return status;
	if (o.drift)
		status = run_drift(m, &o.o, (uint64_t)(o.c.seed >= 0 ? o.c.seed : revc_model_seed(m)), o.json);
	else
		status = run_check(m, &o);
	revc_model_free(m);
	return status;
}
