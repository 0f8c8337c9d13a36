/* mem_sweep.c: the parts of `revc mem` that plan many graphs: --sweep
 * (strategy auto's memory/time frontier, with --plot drawing it and
 * --measure timing each of its schedules) and --max-batch (the largest
 * batch whose best schedule fits a size).  Parsing stays in cmd_mem.c; the
 * work is the library's (revc_sweep_run, revc_auto_choose,
 * revc_memory_plan, revc_bench); this file orders it and prints. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define MIB 1048576.0
/* The plan pass's largest arena (2^40 bytes): a size above is no budget. */
#define MAX_ARENA ((int64_t)1 << 40)

/* ---- progress ----------------------------------------------------------- */

static void show_budget(void *user, int done, int64_t budget)
{
	(void)user;
	char b[32];
	revc_format_bytes(b, sizeof b, budget);
	fprintf(stderr, "\r\033[Krevc mem: sweep: choosing within %s (%d so far)", b, done);
	fflush(stderr);
}

static void clear_line(bool tty)
{
	if (tty)
		fprintf(stderr, "\r\033[K");
}

/* ---- --measure -------------------------------------------------------------- */

/* The fastest of a->steps timed steps of point p, compiled afresh. */
static bool measure_point(const cli_sweep_args *a, const revc_options *o, revc_sweep_point *p, bool tty,
	const char *what)
{
	int status;
	revc_model *m = cli_model_open("revc mem", a->spec, a->sets, &status);
	if (!m)
		return false;
	if (tty) {
		fprintf(stderr, "\r\033[Krevc mem: measure: %s (%.2f MiB): compiling and timing %lld steps", what,
			(double)p->total_bytes / MIB, (long long)a->steps);
		fflush(stderr);
	}
	revc_options q = *o;
	q.strategy = p->strategy;
	q.decisions = p->strategy == REVC_AUTO ? p->decisions : NULL;
	q.budget = q.max_memory = -1;
	q.measure = false;
	q.dump_after = q.dump_dir = q.dump_tag = q.stop_after = q.passes = NULL;
	revc_bench_options b;
	revc_bench_options_init(&b);
	b.steps = a->steps;
	revc_bench_result r;
	revc_error *err = NULL;
	bool ok = revc_bench(m, &q, &b, &r, &err);
	revc_model_free(m);
	if (!ok) {
		clear_line(tty);
		cli_revc_error(err);
		return false;
	}
	p->measured_seconds = r.min_seconds; /* the least disturbed by other load */
	p->measured_cpu_seconds = r.min_cpu_seconds;
	return true;
}

/* How well predicted seconds follow measured ones: the rate through the
 * origin fitted by least squares (t = F / rate) and the largest and RMS
 * relative errors of that fit, over the points measured; of the wall
 * time (cpu false) or the processor time (cpu true) of a step. */
typedef struct {
	int n;
	double rate, max_err, rms_err, raw_max_err;
} fit;

static double measured(const revc_sweep_point *p, bool cpu)
{
	return cpu ? p->measured_cpu_seconds : p->measured_seconds;
}

static fit fit_points(const revc_sweep *s, bool cpu)
{
	fit f = {0};
	double ff = 0, ft = 0;
	for (int i = 0; i < s->npoints + 3; i++) {
		const revc_sweep_point *p = i < s->npoints ? &s->points[i] : &s->fixed[i - s->npoints];
		if (measured(p, cpu) <= 0)
			continue;
		ff += p->flops * p->flops;
		ft += p->flops * measured(p, cpu);
		f.n++;
	}
	if (!f.n || ft <= 0)
		return f;
	f.rate = ff / ft;
	double se = 0;
	for (int i = 0; i < s->npoints + 3; i++) {
		const revc_sweep_point *p = i < s->npoints ? &s->points[i] : &s->fixed[i - s->npoints];
		double t = measured(p, cpu);
		if (t <= 0)
			continue;
		double e = fabs(p->flops / f.rate - t) / t;
		double raw = fabs(p->predicted_seconds - t) / t;
		f.max_err = fmax(f.max_err, e);
		f.raw_max_err = fmax(f.raw_max_err, raw);
		se += e * e;
	}
	f.rms_err = sqrt(se / f.n);
	return f;
}

/* ---- printing --------------------------------------------------------------- */

/* Whether auto's frontier is at least as fast as fixed strategy p within
 * p's own total; *at is the frontier's point there (NULL: none fits). */
static bool dominates(const revc_sweep *s, const revc_sweep_point *p, const revc_sweep_point **at)
{
	*at = revc_sweep_at(s, p->total_bytes);
	return *at && (*at)->flops <= p->flops * (1 + 1e-12);
}

static void text_row(const revc_sweep_point *p, const char *name, double step_flops, bool meas)
{
	char b1[32], b2[32], t[32] = "";
	revc_format_bytes(b1, sizeof b1, p->total_bytes);
	revc_format_bytes(b2, sizeof b2, p->saved_transient_bytes);
	if (meas && p->measured_seconds >= 0)
		snprintf(t, sizeof t, "%12.3f %8.3f", p->measured_seconds, p->measured_cpu_seconds);
	else if (meas)
		snprintf(t, sizeof t, "%12s %8s", "-", "-");
	printf("  %-11s%12s %12s %9.3f %+8.1f%% %11.3f%s  %s\n", name, b1, b2, p->flops / 1e9,
		100.0 * p->recompute_flops / step_flops, p->predicted_seconds, t, p->decisions);
}

static void print_fit(const char *what, const fit *f)
{
	printf("measured %s: %d schedules; FLOPs fit them at %.2f GFLOP/s, within %.1f%% (RMS %.1f%%); "
	       "the fixed rate within %.1f%%\n", what, f->n, f->rate / 1e9, 100 * f->max_err, 100 * f->rms_err,
		100 * f->raw_max_err);
}

/* f: the wall time's fit and the processor time's (NULL: not measured). */
static void print_text(const revc_model *m, const revc_sweep *s, bool meas, const fit *f)
{
	printf("revc mem: %s, batch %lld: the memory/time frontier of strategy auto\n", revc_model_name(m),
		(long long)revc_model_batch(m));
	printf("%d schedules from %d choices (%d plans; %d left off, beaten in both memory and cost)\n\n",
		s->npoints, s->choices, s->plans, s->dominated);
	printf("  %-11s%12s %12s %9s %9s %11s%s  %s\n", "", "total", "saved+trans", "GFLOP", "recomp",
		"predicted s", meas ? "  measured s    cpu s" : "", "decisions");
	for (int i = 0; i < s->npoints; i++) {
		char name[16];
		snprintf(name, sizeof name, "auto %d", i + 1);
		text_row(&s->points[i], name, s->step_flops, meas);
	}
	printf("\n");
	for (int i = 0; i < 3; i++)
		text_row(&s->fixed[i], revc_strategy_name(s->fixed[i].strategy), s->step_flops, meas);
	printf("\npredicted seconds: the cost model's FLOPs at %.1f GFLOP/s (docs/mem.md)\n", REVC_SWEEP_FLOP_RATE / 1e9);
	if (f && f[0].n) {
		print_fit("wall time", &f[0]);
		print_fit("processor time", &f[1]);
	}
	printf("\nat each fixed strategy's own total, auto's frontier:\n");
	for (int i = 0; i < 3; i++) {
		const revc_sweep_point *p = &s->fixed[i], *at;
		bool ok = dominates(s, p, &at);
		char b[32];
		revc_format_bytes(b, sizeof b, p->total_bytes);
		if (!at)
			printf("  %-11s within %s: no schedule of auto's fits\n", revc_strategy_name(p->strategy), b);
		else
			printf("  %-11s within %s: %.3f GFLOP against %.3f (%+.1f%%)%s\n", revc_strategy_name(p->strategy), b,
				at->flops / 1e9, p->flops / 1e9, 100 * (at->flops / p->flops - 1), ok ? "" : "  SLOWER");
	}
}

/* A point's members, without the closing brace. */
static void json_point(const revc_sweep_point *p)
{
	printf("{\"strategy\":\"%s\",\"decisions\":\"%s\",", revc_strategy_name(p->strategy), p->decisions);
	if (p->strategy == REVC_AUTO)
		printf("\"budget_bytes\":%lld,", (long long)p->budget_bytes);
	printf("\"total_bytes\":%lld,\"saved_transient_peak_bytes\":%lld,\"flops\":%.0f,\"recompute_flops\":%.0f,"
	       "\"predicted_seconds\":%.6g",
		(long long)p->total_bytes, (long long)p->saved_transient_bytes, p->flops, p->recompute_flops,
		p->predicted_seconds);
	if (p->measured_seconds >= 0)
		printf(",\"measured_seconds\":%.6g,\"measured_cpu_seconds\":%.6g", p->measured_seconds,
			p->measured_cpu_seconds);
}

static void print_json(const revc_model *m, const revc_sweep *s, const fit *f)
{
	printf("{\"model\":\"");
	cli_json_string(stdout, revc_model_name(m));
	printf("\",\"batch\":%lld,\"step_flops\":%.0f,\"flop_rate\":%.6g,\"minimum_bytes\":%lld,\"choices\":%d,"
	       "\"plans\":%d,\"dominated\":%d,\"frontier\":[",
		(long long)revc_model_batch(m), s->step_flops, REVC_SWEEP_FLOP_RATE, (long long)s->minimum_bytes,
		s->choices, s->plans, s->dominated);
	for (int i = 0; i < s->npoints; i++) {
		printf(i ? "," : "");
		json_point(&s->points[i]);
		printf("}");
	}
	printf("],\"fixed\":[");
	for (int i = 0; i < 3; i++) {
		const revc_sweep_point *at;
		bool ok = dominates(s, &s->fixed[i], &at);
		printf(i ? "," : "");
		json_point(&s->fixed[i]);
		printf(",\"auto_flops\":");
		if (at)
			printf("%.0f,\"auto_dominates\":%s}", at->flops, ok ? "true" : "false");
		else
			printf("null,\"auto_dominates\":false}");
	}
	printf("]");
	for (int k = 0; f && f[0].n && k < 2; k++)
		printf(",\"%s\":{\"points\":%d,\"flop_rate\":%.6g,\"max_rel_error\":%.4f,\"rms_rel_error\":%.4f,"
		       "\"fixed_rate_max_rel_error\":%.4f}", k ? "measured_cpu_fit" : "measured_fit", f[k].n, f[k].rate,
			f[k].max_err, f[k].rms_err, f[k].raw_max_err);
	printf("}\n");
}

/* ---- --sweep ------------------------------------------------------------------ */

int cli_mem_sweep(revc_model *m, const revc_options *o, const cli_sweep_args *a)
{
	bool tty = isatty(STDERR_FILENO);
	revc_sweep_options so;
	revc_sweep_options_init(&so);
	if (a->points > 0)
		so.max_points = a->points;
	if (tty)
		so.on_point = show_budget;
	revc_sweep s;
	revc_error *err = NULL;
	bool ok = revc_sweep_run(m, o, &so, &s, &err);
	clear_line(tty);
	if (!ok)
		return cli_revc_error(err);
	fit f[2] = {{0}};
	if (a->measure) {
		for (int i = 0; i < s.npoints + 3; i++) {
			char what[32];
			if (i < s.npoints)
				snprintf(what, sizeof what, "auto %d of %d", i + 1, s.npoints);
			else
				snprintf(what, sizeof what, "%s", revc_strategy_name(s.fixed[i - s.npoints].strategy));
			if (!measure_point(a, o, i < s.npoints ? &s.points[i] : &s.fixed[i - s.npoints], tty, what)) {
				revc_sweep_free(&s);
				return EXIT_USER;
			}
		}
		clear_line(tty);
		f[0] = fit_points(&s, false);
		f[1] = fit_points(&s, true);
	}
	int status = EXIT_OK;
	if (a->plot) {
		char *svg = revc_sweep_svg(m, &s);
		if (!cli_write_output(a->plot, svg, strlen(svg)))
			status = EXIT_USER;
		free(svg);
	}
	if (status == EXIT_OK) {
		if (a->json)
			print_json(m, &s, a->measure ? f : NULL);
		else
			print_text(m, &s, a->measure, a->measure ? f : NULL);
	}
	revc_sweep_free(&s);
	return status;
}

/* ---- --max-batch ---------------------------------------------------------------- */

bool cli_max_batch_size(const char *cmd, const char *val, int64_t *out)
{
	size_t n = strlen(val);
	if (!revc_parse_size(val, out) || *out <= 0) {
		cli_usage_error(cmd, "--max-batch must be a size such as 1GiB or 512MB, not '%s'", val);
		return false;
	}
	if (*out > MAX_ARENA) {
		cli_usage_error(cmd, "--max-batch must be at most 1TiB, the largest arena revc plans, not '%s'", val);
		return false;
	}
	if (!n || !isalpha((unsigned char)val[n - 1])) {
		cli_usage_error(cmd, "--max-batch takes a size with a unit, such as 1GiB or 512MB, not '%s' (the batch is "
			"what it finds)", val);
		return false;
	}
	return true;
}

/* Whether strategy st (auto: its best decisions, into *au) fits size at
 * batch b; *total is the plan's total.  false with *status set on an error
 * other than not fitting. */
static bool fits_at(revc_model *m, const revc_options *o, revc_strategy st, int64_t b, int64_t size, bool *fits,
	int64_t *total, revc_auto *au, int *status)
{
	revc_error *err = NULL;
	if (!revc_model_set_batch(m, b, &err)) {
		*status = cli_revc_error(err);
		return false;
	}
	revc_options q = *o;
	q.strategy = st;
	q.decisions = NULL;
	q.measure = false;
	bool ok;
	if (st == REVC_AUTO) {
		ok = revc_auto_choose(m, &q, size, au, &err);
		if (ok)
			*total = au->total_bytes;
	} else {
		revc_memory r;
		ok = revc_memory_plan(m, st, &q, &r, &err);
		if (ok)
			*total = r.total_bytes;
	}
	if (!ok) {
		/* Over the budget, or (beyond batch 1) too large for revc to plan
		 * at all: does not fit.  Any other error is the spec's, at this
		 * batch, and ends the search. */
		if (revc_error_kind_of(err) == REVC_ERR_BUDGET || (b > 1 && revc_error_too_large(err))) {
			revc_error_free(err);
			*fits = false;
			return true;
		}
		*status = cli_revc_error(err);
		return false;
	}
	*fits = *total <= size;
	return true;
}

typedef struct {
	int64_t batch, total;  /* 0: not even batch 1 fits */
	revc_auto au;
} max_result;

/* The largest batch at which st fits size: doubling, then bisecting
 * between the largest that fits and the smallest that does not. */
static bool search(revc_model *m, const revc_options *o, revc_strategy st, int64_t size, max_result *out,
	int *status, bool tty)
{
	memset(out, 0, sizeof *out);
	int64_t lo = 0, hi = 0; /* lo fits (0: none yet); hi does not (0: none yet) */
	revc_auto au;
	for (int64_t b = 1;;) {
		if (tty) {
			fprintf(stderr, "\r\033[Krevc mem: max batch: %s at batch %lld", revc_strategy_name(st), (long long)b);
			fflush(stderr);
		}
		bool fits;
		int64_t total = 0;
		if (!fits_at(m, o, st, b, size, &fits, &total, &au, status))
			return false;
		if (fits) {
			lo = b;
			out->batch = b;
			out->total = total;
			if (st == REVC_AUTO)
				out->au = au;
		} else {
			hi = b;
		}
		if (hi == 0) {
			if (b == REVC_INT_MAX)
				break; /* the largest batch a spec takes fits */
			b = b > REVC_INT_MAX / 2 ? REVC_INT_MAX : 2 * b;
		} else {
			if (hi - lo <= 1)
				break;
			b = lo + (hi - lo) / 2;
		}
	}
	return true;
}

int cli_mem_max_batch(revc_model *m, const revc_options *o, int64_t size, const cli_sweep_args *a)
{
	bool tty = isatty(STDERR_FILENO);
	int64_t batch0 = revc_model_batch(m);
	static const revc_strategy which[] = {REVC_AUTO, REVC_STORE, REVC_REVNET};
	max_result r[3];
	int status = EXIT_OK;
	for (int i = 0; i < 3; i++)
		if (!search(m, o, which[i], size, &r[i], &status, tty)) {
			clear_line(tty);
			return status;
		}
	clear_line(tty);
	char sb[32];
	revc_format_bytes(sb, sizeof sb, size);
	if (!r[0].batch) {
		fprintf(stderr, "revc mem: error: not even batch 1 fits within %s (%lld bytes), under any strategy\n", sb,
			(long long)size);
		return EXIT_BUDGET;
	}
	if (a->json) {
		printf("{\"model\":\"");
		cli_json_string(stdout, revc_model_name(m));
		printf("\",\"size_bytes\":%lld,\"spec_batch\":%lld,\"strategies\":[", (long long)size, (long long)batch0);
		for (int i = 0; i < 3; i++) {
			printf("%s{\"strategy\":\"%s\",\"max_batch\":%lld,\"total_bytes\":%lld", i ? "," : "",
				revc_strategy_name(which[i]), (long long)r[i].batch, (long long)r[i].total);
			if (which[i] == REVC_AUTO && r[i].batch)
				printf(",\"decisions\":\"%s\",\"step_flops\":%.0f,\"recompute_flops\":%.0f", r[i].au.decisions,
					r[i].au.step_flops, r[i].au.recompute_flops);
			printf("}");
		}
		printf("]}\n");
	} else {
		printf("revc mem: %s: the largest batch within %s\n\n", revc_model_name(m), sb);
		for (int i = 0; i < 3; i++) {
			char b[32];
			revc_format_bytes(b, sizeof b, r[i].total);
			if (!r[i].batch)
				printf("  %-8s none: batch 1 does not fit\n", revc_strategy_name(which[i]));
			else
				printf("  %-8s batch %lld (total %s)\n", revc_strategy_name(which[i]), (long long)r[i].batch, b);
		}
		if (r[0].batch)
			printf("\nauto at batch %lld: %.3f GFLOP a step, of which recomputation %.3f (+%.1f%%)\n  decisions %s\n",
				(long long)r[0].batch, (r[0].au.step_flops + r[0].au.recompute_flops) / 1e9,
				r[0].au.recompute_flops / 1e9, 100 * r[0].au.recompute_flops / r[0].au.step_flops,
				r[0].au.decisions);
	}
	return EXIT_OK;
}
