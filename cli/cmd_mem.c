/* cmd_mem.c: `revc mem` plans a training step's memory and reports it: peak
 * bytes by category, the step where the peak falls and the largest tensors
 * live there, under one strategy or all three side by side; --budget turns
 * it into a check, --timeline draws it. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"revc mem SPEC|FILE.ir [--set KEY=VALUE ...] [--strategy NAME|all]\n"
	"                [--no-order-edges] [--budget SIZE] [--decisions LETTERS] [--json] [--timeline FILE.svg]\n"
	"                [--engine interp|jit] [--threads N] [--measure] [pass options]\n"
	"       revc mem SPEC|FILE.ir --sweep [--plot FILE.svg] [--points N] [--measure [--steps K]] [--json] [...]\n"
	"       revc mem SPEC --max-batch SIZE [--json] [...]";
static const char about[] =
	"Builds SPEC's training step (f32, the spec's optimiser), schedules it and plans its\n"
	"arena, then prints the peak bytes by category (parameters, parameter gradients,\n"
	"optimiser state, saved activations, transient activations and gradients,\n"
	"workspace), the fragmentation-free peak and the planned arena, the schedule\n"
	"step of the peak and the largest tensors live there.  Exit status 3 when the\n"
	"total (parameters + optimiser state + planned arena) exceeds --budget, which\n"
	"takes bytes or units: 512MiB, 1.5GB, 2e9.  The workspace planned is the one\n"
	"--engine's kernels need with --threads threads, as revc train plans it (so\n"
	"--budget judges the arena train --max-memory does).  The JSON schema is in\n"
	"docs/mem.md.  The pass options apply to every strategy's pipeline (with\n"
	"--strategy all, dumps are STRATEGY-NN-PASS.ir); when they stop it before\n"
	"plan, revc mem dumps and exits without a report.\n"
	"\n"
	"FILE.ir is a forward graph in revc's IR with its couplings marked\n"
	"(unit(K, PART), docs/ir.md), such as `revc dump SPEC` prints: it is planned\n"
	"as the spec it came from would be, with the optimiser of its training\n"
	"settings (a train { ... } block), the defaults without one.\n"
	"\n"
	"--strategy auto decides for each reversible unit whether its backward reads\n"
	"stored values, inverts it or recomputes it: the fewest FLOPs whose planned\n"
	"total fits --budget (none: store everything), found by a dynamic program\n"
	"the planner confirms; or the decisions --decisions spells, one letter a\n"
	"unit: s store, i invert, r recompute, c rerun from here, + rerun with the\n"
	"unit before (docs/ir.md); S or R among them stores or recomputes a segment\n"
	"outside the units (the stem, the head).  A budget below the minimum exits 3\n"
	"naming it.  --strategy min takes the minimum-memory decisions (auto at its\n"
	"lower end).\n"
	"\n"
	"--sweep prints the memory/time frontier: strategy auto's choices for the\n"
	"budgets from the minimum-memory decisions' total up to store's (at most\n"
	"--points budgets, besides the three strategies' totals), each with its\n"
	"planned total, saved + transient peak, FLOPs and predicted step time, and\n"
	"store, revnet and checkpoint on the same axes; --plot draws it, --measure\n"
	"also compiles each schedule and times --steps steps of it (revc bench).\n"
	"--max-batch SIZE (with a unit: 1GiB) finds the largest batch whose best\n"
	"schedule fits SIZE, and the largest store and revnet alone allow.\n"
	"\n"
	"--ranks K plans the step of one of K processes of `mpirun -np K revc train`,\n"
	"each at the spec's batch (the global batch is K times it), and adds what\n"
	"each step sums over the processes: the parameter gradients and the\n"
	"batch-norm statistics, and what a ring all-reduce sends per process\n"
	"(docs/distributed.md).";

static const cli_opt opts[] = {
	{"strategy", 0, "NAME", CLI_STRATEGIES "; all: store, revnet and checkpoint side by side (default " CLI_STRATEGY_DEFAULT ")"},
	{"no-order-edges", 0, NULL, "no ordering edges; a naive as-soon-as-possible order"},
	{"budget", 0, "SIZE", "exit 3 if the planned total exceeds SIZE"},
	{"json", 0, NULL, "print JSON (schema: docs/mem.md)"},
	{"timeline", 0, "FILE.svg", "draw live bytes per schedule step, by category"},
	{"dtype", 0, "f32|f64", "precision (default f32)"},
	{"measure", 0, NULL, "also run one step in tracking mode and report its real high-water mark (--engine interp); "
		"with --sweep, time each schedule's steps"},
	CLI_ENGINE_OPT,
	{"threads", 0, "N", "threads the kernels are planned for (default 2)"},
	CLI_SET_OPT,
	{"decisions", 0, "LETTERS", "strategy auto: these decisions, one letter a unit (s, i, r, c, +) or segment (S, R)"},
	/* the frontier and the largest batch (mem_sweep.c) */
	{"sweep", 0, NULL, "print strategy auto's memory/time frontier, with the fixed strategies"},
	{"plot", 0, "FILE.svg", "--sweep: draw the frontier"},
	{"points", 0, "N", "--sweep: budgets walked at most (default 40)"},
	{"steps", 0, "K", "--sweep --measure: timed steps of each schedule (default 2)"},
	{"max-batch", 0, "SIZE", "the largest batch whose best schedule fits SIZE (and store's, revnet's)"},
	/* mpi */
	{"ranks", 0, "K", "the step of one of K data-parallel processes, and what it sums each step"},
	CLI_DP_OPTS, /* (bucket) */
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_STRATEGY, OPT_NO_EDGES, OPT_BUDGET, OPT_JSON, OPT_TIMELINE, OPT_DTYPE, OPT_MEASURE, OPT_ENGINE,
	OPT_THREADS, OPT_SET, OPT_DECISIONS, OPT_SWEEP, OPT_PLOT, OPT_POINTS, OPT_STEPS, OPT_MAX_BATCH, OPT_RANKS,
	OPT_BUCKET, OPT_OVERLAP, OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

static void describe(const revc_memory *r, int k, char *buf, size_t n)
{
	char scope[90] = "";
	if (r->largest[k].scope[0])
		snprintf(scope, sizeof scope, " in %s", r->largest[k].scope);
	snprintf(buf, n, "%s = %s %s : %s%s", r->largest[k].value, r->largest[k].role, r->largest[k].op,
		r->largest[k].type, scope);
}

/* A row of figures, one column per strategy. */
static void row(const char *name, const revc_memory *r, int nr, int64_t (*get)(const revc_memory *, int), int arg)
{
	char b[32];
	printf("%-38s", name);
	for (int i = 0; i < nr; i++) {
		revc_format_bytes(b, sizeof b, get(&r[i], arg));
		printf("%22s", b);
	}
	printf("\n");
}

static int64_t figure(const revc_memory *r, int k)
{
	return k == 0 ? r->peak_bytes : k == 1 ? r->arena_bytes : k == 2 ? r->saved_transient_peak_bytes
		: k == 3 ? r->total_bytes : r->measured_bytes;
}

/* What strategy auto chose and how. */
static void print_auto(const revc_auto *au, int64_t budget)
{
	char b1[32], b2[32], b3[32];
	revc_format_bytes(b1, sizeof b1, au->total_bytes);
	revc_format_bytes(b2, sizeof b2, au->model_bytes);
	revc_format_bytes(b3, sizeof b3, au->minimum_bytes);
	if (au->minimum) {
		printf("\nmin: the minimum-memory decisions plan %s (the model said %s)\n", b1, b2);
	} else if (budget >= 0) {
		char b4[32];
		revc_format_bytes(b4, sizeof b4, budget);
		printf("\nauto: within %s, the fastest decisions plan %s (the model said %s; minimum %s)\n", b4, b1, b2, b3);
	} else {
		printf("\nauto: no budget, so the fastest: store (%s planned; minimum %s)\n", b1, b3);
	}
	printf("auto: %.3f GFLOP a step, of which recomputation %.3f (+%.1f%%); %d plans, %s\n",
		(au->step_flops + au->recompute_flops) / 1e9, au->recompute_flops / 1e9,
		100.0 * au->recompute_flops / au->step_flops, au->plans,
		au->retries ? "the planner disagreed with the model and the program chose again" : "the planner agreed");
	if (au->retries)
		printf("auto: %d retries\n", au->retries);
}

static void print_text(const revc_memory *r, int nr, const revc_model *m, const revc_auto *au, int64_t budget)
{
	char b1[32];
	printf("revc mem: %s, batch %lld\n\n%-38s", revc_model_name(m), (long long)revc_model_batch(m), "");
	for (int i = 0; i < nr; i++)
		printf("%22s", revc_strategy_name(r[i].strategy));
	printf("\n");
	for (int c = 0; c < REVC_MEM_CATEGORIES; c++)
		row(revc_memory_category_name(c), r, nr, revc_memory_at, c);
	const char *rows[] = {"peak of the step (fragmentation-free)", "planned arena", "saved + transient peak",
		"total (params + optimiser + arena)"};
	for (int k = 0; k < 4; k++)
		row(rows[k], r, nr, figure, k);
	printf("%-38s", "peak at step");
	for (int i = 0; i < nr; i++) {
		char s[40];
		snprintf(s, sizeof s, "%lld of %lld", (long long)r[i].peak_step, (long long)r[i].steps);
		printf("%22s", s);
	}
	printf("\n%-38s", "schedule");
	for (int i = 0; i < nr; i++)
		printf("%22s", r[i].schedule);
	printf("\n");
	if (r[0].measured_bytes >= 0) {
		row("measured high-water mark (tracking)", r, nr, figure, 4);
		printf("%-38s", "  equals the peak, to the byte");
		for (int i = 0; i < nr; i++)
			printf("%22s", r[i].measured_bytes == r[i].peak_bytes ? "yes" : "NO");
		printf("\n");
	}
	printf("\ndecisions (a letter a unit: s store, i invert, r recompute, c rerun from here, + with the one before):\n");
	for (int i = 0; i < nr; i++)
		printf("  %-12s%s\n", revc_strategy_name(r[i].strategy), r[i].decisions);
	if (au)
		print_auto(au, budget);
	for (int i = 0; i < nr; i++) {
		printf("\nlargest tensors live at the %s peak (step %lld):\n", revc_strategy_name(r[i].strategy),
			(long long)r[i].peak_step);
		for (int k = 0; k < r[i].nlargest; k++) {
			char d[512];
			describe(&r[i], k, d, sizeof d);
			revc_format_bytes(b1, sizeof b1, r[i].largest[k].bytes);
			printf("  %10s  %-20s %s\n", b1, revc_memory_category_name(r[i].largest[k].category), d);
		}
	}
}

/* mpi: --ranks K: what one of K processes sums each step, and what a ring
 * all-reduce of it sends (2(K-1)/K of it; docs/distributed.md). */
typedef struct {
	int64_t grads, bn, ring;
} comm_bytes;

static comm_bytes comm_of(const revc_model *m, int64_t ranks)
{
	comm_bytes c;
	c.grads = revc_model_comm_bytes(m, &c.bn);
	c.ring = c.grads < 0 ? -1 : (int64_t)((double)(c.grads + c.bn) * 2 * (double)(ranks - 1) / (double)ranks);
	return c;
}

static void print_ranks(const revc_model *m, int64_t ranks, const revc_memory *r)
{
	comm_bytes c = comm_of(m, ranks);
	char g[32], bn[32], ring[32];
	revc_format_bytes(g, sizeof g, c.grads);
	revc_format_bytes(bn, sizeof bn, c.bn);
	revc_format_bytes(ring, sizeof ring, c.ring);
	printf("\nprocesses: the figures above are each of %lld, at batch %lld (global batch %lld)\n", (long long)ranks,
		(long long)revc_model_batch(m), (long long)(ranks * revc_model_batch(m)));
	printf("  summed each step        %s of parameter gradients (in place), %s of batch-norm statistics\n", g, bn);
	printf("  ring all-reduce         %s sent and received by each process a step\n", ring);
	char bb[32], lb[32];
	revc_format_bytes(bb, sizeof bb, r->bucket_buffer_bytes);
	revc_format_bytes(lb, sizeof lb, r->largest_bucket_bytes);
	if (r->buckets)
		printf("  gradients' sums         %d a step, %d of them of buckets: %s of bucket buffers, the largest %s\n",
			r->grad_sums, r->buckets, bb, lb);
	else
		printf("  gradients' sums         %d a step, one tensor each (no buckets)\n", r->grad_sums);
}

static void print_json(const revc_memory *r, int nr, const revc_model *m, const revc_auto *au, int64_t budget,
	int64_t ranks)
{
	printf("{\"model\":\"");
	cli_json_string(stdout, revc_model_name(m));
	printf("\",\"batch\":%lld,\"strategies\":[", (long long)revc_model_batch(m));
	for (int i = 0; i < nr; i++) {
		printf("%s{\"strategy\":\"%s\",\"schedule\":\"%s\",\"steps\":%lld,\"peak_step\":%lld,", i ? "," : "",
			revc_strategy_name(r[i].strategy), r[i].schedule, (long long)r[i].steps, (long long)r[i].peak_step);
		printf("\"peak_bytes\":%lld,\"arena_bytes\":%lld,\"saved_transient_peak_bytes\":%lld,"
		       "\"total_bytes\":%lld,",
			(long long)r[i].peak_bytes, (long long)r[i].arena_bytes, (long long)r[i].saved_transient_peak_bytes,
			(long long)r[i].total_bytes);
		if (r[i].measured_bytes >= 0)
			printf("\"measured_peak_bytes\":%lld,", (long long)r[i].measured_bytes);
		printf("\"decisions\":\"%s\",", r[i].decisions);
		if (au)
			printf("\"auto\":{\"budget_bytes\":%lld,\"model_bytes\":%lld,\"minimum_bytes\":%lld,\"plans\":%d,"
			       "\"retries\":%d,\"step_flops\":%.0f,\"recompute_flops\":%.0f},",
				(long long)budget, (long long)au->model_bytes, (long long)au->minimum_bytes, au->plans, au->retries,
				au->step_flops, au->recompute_flops);
		printf("\"at_peak\":{");
		for (int c = 0; c < REVC_MEM_CATEGORIES; c++)
			printf("%s\"%s\":%lld", c ? "," : "", revc_memory_category_key(c), (long long)revc_memory_at(&r[i], c));
		printf("},\"largest\":[");
		for (int k = 0; k < r[i].nlargest; k++) {
			printf("%s{\"value\":\"%s\",\"op\":\"%s\",\"role\":\"%s\",\"scope\":\"", k ? "," : "",
				r[i].largest[k].value, r[i].largest[k].op, r[i].largest[k].role);
			cli_json_string(stdout, r[i].largest[k].scope);
			printf("\",\"type\":\"%s\",\"category\":\"%s\",\"bytes\":%lld}", r[i].largest[k].type,
				revc_memory_category_key(r[i].largest[k].category), (long long)r[i].largest[k].bytes);
		}
		printf("]}");
	}
	printf("]");
	if (ranks > 0) {
		comm_bytes c = comm_of(m, ranks);
		printf(",\"ranks\":{\"processes\":%lld,\"global_batch\":%lld,\"gradient_bytes\":%lld,"
		       "\"batch_norm_bytes\":%lld,\"ring_bytes\":%lld,\"gradient_sums\":%d,\"buckets\":%d,"
		       "\"bucket_buffer_bytes\":%lld}", (long long)ranks,
			(long long)(ranks * revc_model_batch(m)), (long long)c.grads, (long long)c.bn, (long long)c.ring,
			nr ? r[0].grad_sums : 0, nr ? r[0].buckets : 0, (long long)(nr ? r[0].bucket_buffer_bytes : 0));
	}
	printf("}\n");
}

/* The line for a plan over --budget. */
static void over_budget(const revc_memory *r, int64_t budget)
{
	char b1[32], b2[32], d[512];
	revc_format_bytes(b1, sizeof b1, r->total_bytes);
	revc_format_bytes(b2, sizeof b2, budget);
	fprintf(stderr, "revc mem: error: %s needs %s (%lld bytes), over the budget of %s; the peak is at step %lld",
		revc_strategy_name(r->strategy), b1, (long long)r->total_bytes, b2, (long long)r->peak_step);
	for (int k = 0; k < r->nlargest && k < 2; k++) {
		describe(r, k, d, sizeof d);
		revc_format_bytes(b1, sizeof b1, r->largest[k].bytes);
		fprintf(stderr, k ? ", then %s (%s)" : ", largest tensor there %s (%s)", d, b1);
	}
	fputc('\n', stderr);
}

/* Writes the timeline of r's strategy: planned again, without dumps. */
static bool timeline_svg(revc_model *m, const revc_memory *r, const revc_options *o, const char *path)
{
	revc_options to = *o;
	to.dump_after = to.dump_dir = NULL;
	to.verify_each = to.measure = false;
	revc_error *err = NULL;
	char *svg = revc_memory_timeline_svg(m, r->strategy, &to, &err);
	if (!svg)
		return cli_revc_error(err) == EXIT_OK;
	bool ok = cli_write_output(path, svg, strlen(svg));
	free(svg);
	return ok;
}

/* The plans of the strategies asked for (all, or o's), reported. */
static int report(revc_model *m, bool all, revc_options *o, bool json, const char *timeline, int64_t budget,
	int64_t ranks)
{
	revc_memory r[3];
	int nr = 0;
	bool cut = false;
	revc_error *err = NULL;
	revc_auto au;
	bool chose = !all && o->strategy == REVC_AUTO && !o->decisions;
	if (chose) {
		if (o->minimum ? !revc_auto_minimum(m, o, &au, &err) : !revc_auto_choose(m, o, budget, &au, &err))
			return cli_revc_error(err);
		o->decisions = au.decisions;
	}
	for (int s = 0; s <= REVC_AUTO; s++) {
		if (all ? s == REVC_AUTO : s != (int)o->strategy)
			continue;
		/* Three pipelines, one dump directory. */
		o->dump_tag = all ? revc_strategy_name((revc_strategy)s) : NULL;
		if (!revc_memory_plan(m, (revc_strategy)s, o, &r[nr], &err)) {
			cli_print_dumps(m);
			return cli_revc_error(err);
		}
		cut = cut || r[nr].cut;
		nr += !r[nr].cut;
	}
	cli_print_dumps(m);
	if (cut) {
		cli_pipeline_cut("revc mem", o);
		return EXIT_OK;
	}
	if (json)
		print_json(r, nr, m, chose ? &au : NULL, budget, ranks);
	else
		print_text(r, nr, m, chose ? &au : NULL, budget);
	if (!json && ranks > 0)
		print_ranks(m, ranks, &r[0]);
	if (timeline && !timeline_svg(m, &r[0], o, timeline))
		return EXIT_USER;
	int status = EXIT_OK;
	for (int i = 0; i < nr; i++)
		if (budget >= 0 && r[i].total_bytes > budget) {
			over_budget(&r[i], budget);
			status = EXIT_BUDGET;
		}
	return status;
}

/* What --sweep and --max-batch go with, checked before anything is
 * planned; EXIT_OK or a usage (or, for --plot, user) error. */
static int sweep_usage(const char *cmd, const char *spec, bool sweep, int64_t max_batch, bool strategy_given,
	int64_t budget, const char *timeline, const char *plot, int64_t points, int64_t steps, const revc_options *o)
{
	if (sweep && max_batch > 0)
		return cli_usage_error(cmd, "--sweep and --max-batch are two reports: give one");
	const char *what = sweep ? "--sweep" : "--max-batch";
	if (sweep || max_batch > 0) {
		if (strategy_given)
			return cli_usage_error(cmd, "%s chooses the strategies itself: leave out --strategy", what);
		if (budget >= 0)
			return cli_usage_error(cmd, "%s takes no --budget (%s)", what,
				sweep ? "it sweeps every budget" : "SIZE is the budget");
		if (timeline)
			return cli_usage_error(cmd, "%s plans many graphs: --timeline draws one (with --strategy)", what);
		if (o->dump_after || o->dump_dir || o->stop_after || o->passes || o->verify_each)
			return cli_usage_error(cmd, "%s plans many graphs: the pass options go with one strategy", what);
	}
	if (max_batch > 0 && !cli_is_spec(spec))
		return cli_usage_error(cmd, "--max-batch needs a spec (a .rev file): the batch of %s is its input x's first "
			"dimension, fixed by the graph", spec);
	if (max_batch > 0 && o->measure)
		return cli_usage_error(cmd, "--measure goes with --sweep or a strategy, not --max-batch");
	if (!sweep && (plot || points))
		return cli_usage_error(cmd, "--%s goes with --sweep", plot ? "plot" : "points");
	if (steps > 0 && !(sweep && o->measure))
		return cli_usage_error(cmd, "--steps goes with --sweep --measure");
	return plot && !cli_output_writable(plot) ? EXIT_USER : EXIT_OK;
}

int cmd_mem(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc mem", argc, argv);
	const char *spec = NULL, *timeline = NULL, *val;
	bool json = false, all = false;
	int64_t budget = -1, max_batch = -1, points = 0, steps = -1, ranks = 0;
	bool sweep = false, strategy_given = false;
	const char *plot = NULL;
	revc_options o;
	revc_options_init(&o);
	o.threads = 2;
	cli_sets m = {0};
	for (int k; (k = cli_next(&a, opts, &val)) != CLI_END;) {
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (spec)
				return cli_usage_error(a.cmd, "unexpected argument '%s'", val);
			spec = val;
			break;
		case OPT_STRATEGY:
			strategy_given = true;
			all = strcmp(val, "all") == 0;
			if (!all && !cli_parse_strategy(a.cmd, val, "all", &o.strategy, &o.minimum))
				return EXIT_USAGE;
			break;
		case OPT_NO_EDGES: o.no_order_edges = true; break;
		case OPT_BUDGET:
			if (!cli_parse_limit(a.cmd, "--budget", val, &budget))
				return EXIT_USAGE;
			break;
		case OPT_DECISIONS: o.decisions = val; break;
		case OPT_SWEEP: sweep = true; break;
		case OPT_PLOT: plot = val; break;
		case OPT_POINTS:
			if (!cli_parse_int(a.cmd, "--points", val, 2, 1000, &points))
				return EXIT_USAGE;
			break;
		case OPT_STEPS:
			if (!cli_parse_int(a.cmd, "--steps", val, 1, 100, &steps))
				return EXIT_USAGE;
			break;
		case OPT_MAX_BATCH:
			if (!cli_max_batch_size(a.cmd, val, &max_batch))
				return EXIT_USAGE;
			break;
		case OPT_RANKS:
			if (!cli_parse_int(a.cmd, "--ranks", val, 1, 1 << 20, &ranks))
				return EXIT_USAGE;
			o.ranks = (int)ranks; /* the step with its all-reduces, planned */
			break;
		case OPT_JSON: json = true; break;
		case OPT_TIMELINE: timeline = val; break;
		case OPT_MEASURE: o.measure = true; break;
		case OPT_SET:
			if (!cli_sets_add(&m, a.cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		default:
			if (k < OPT_PASS0 && cli_revc_option(a.cmd, opts[k].name, val, &o) < 0)
				return EXIT_USAGE;
			if (k >= OPT_PASS0 && !cli_pass_option(k - OPT_PASS0, val, &o))
				return EXIT_OK;
		}
	}
	if (!spec)
		return cli_usage_error(a.cmd, "missing SPEC");
	int many = sweep_usage(a.cmd, spec, sweep, max_batch, strategy_given, budget, timeline, plot, points, steps, &o);
	if (many != EXIT_OK)
		return many;
	if (o.decisions && (all || o.strategy != REVC_AUTO))
		return cli_usage_error(a.cmd, "--decisions goes with --strategy auto");
	/* Tracking mode is the interpreter's: it measures what that plan says. */
	if (o.measure && !sweep && o.engine != REVC_INTERP)
		return cli_usage_error(a.cmd, "--measure runs the interpreter's tracking mode: add --engine interp");
	int ready = cli_pass_options_ready(a.cmd, &o);
	if (ready != EXIT_OK)
		return ready;
	revc_error *err = NULL;
	revc_model *model = cli_is_spec(spec) ? revc_model_from_file(spec, m.sets, m.nsets, &err)
					      : revc_model_from_ir(spec, &err);
	if (!model)
		return cli_revc_error(err);
	cli_sweep_args sa = {spec, &m, json, o.measure, plot, steps > 0 ? steps : 2, (int)points};
	int status = sweep ? cli_mem_sweep(model, &o, &sa)
		: max_batch > 0 ? cli_mem_max_batch(model, &o, max_batch, &sa)
		: report(model, all, &o, json, timeline, budget, ranks);
	revc_model_free(model);
	return status;
}
