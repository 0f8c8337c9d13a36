/* cmd_mem.c: `revc mem` plans a training step's memory and reports it: peak
 * bytes by category, the step where the peak falls and the largest tensors
 * live there, under one strategy or all three side by side; --budget turns
 * it into a check, --timeline draws it. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rt.h"

static const char usage[] =
	"revc mem SPEC [--set KEY=VALUE ...] [--strategy store|revnet|checkpoint|all]\n"
	"                [--no-order-edges] [--budget SIZE] [--json] [--timeline FILE.svg]\n"
	"                [--engine interp|jit] [--threads N] [--measure] [pass options]";
static const char about[] =
	"Builds SPEC's training step (f32, momentum SGD), schedules it and plans its\n"
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
	"plan, revc mem dumps and exits without a report.";

static const cli_opt opts[] = {
	{"strategy", 0, "NAME", "store, revnet, checkpoint or all (default " CLI_STRATEGY_DEFAULT ")"},
	{"no-order-edges", 0, NULL, "no ordering edges; a naive as-soon-as-possible order"},
	{"budget", 0, "SIZE", "exit 3 if the planned total exceeds SIZE"},
	{"json", 0, NULL, "print JSON (schema: docs/mem.md)"},
	{"timeline", 0, "FILE.svg", "draw live bytes per schedule step, by category"},
	{"dtype", 0, "f32|f64", "precision (default f32)"},
	{"measure", 0, NULL, "also run one step in tracking mode and report its real high-water mark (--engine interp)"},
	CLI_ENGINE_OPT,
	{"threads", 0, "N", "threads the kernels are planned for (default 2)"},
	CLI_SET_OPT,
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_STRATEGY, OPT_NO_EDGES, OPT_BUDGET, OPT_JSON, OPT_TIMELINE, OPT_DTYPE, OPT_MEASURE, OPT_ENGINE,
	OPT_THREADS, OPT_SET, OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

/* One strategy's plan and its figures. */
typedef struct {
	ps_strategy strategy;
	ir_graph *g;
	ps_memory m;
	const char *schedule;
	int64_t arena;
	int64_t measured; /* tracking mode's high-water mark, or -1 */
} report;

#define TOP 5

bool cli_parse_size(const char *s, int64_t *out)
{
	return drv_parse_size(s, out);
}

void cli_human_bytes(char *buf, size_t n, int64_t bytes)
{
	drv_human_bytes(buf, n, bytes);
}

static int64_t at_peak(const report *r, ps_mem_cat c)
{
	if (c == PS_MEM_PARAMS || c == PS_MEM_OPTSTATE)
		return r->m.persistent[c];
	return r->m.live[(size_t)r->m.peak_step * PS_MEM_CAT_COUNT + c];
}

static int64_t total(const report *r)
{
	return r->m.persistent[PS_MEM_PARAMS] + r->m.persistent[PS_MEM_OPTSTATE] + r->arena;
}

/* The largest buffers live at the peak step, into idx[0..TOP). */
static int largest(const report *r, int *idx)
{
	int n = 0;
	for (int b = 0; b < r->m.nbuf; b++) {
		if (r->m.begin[b] > r->m.peak_step || r->m.end[b] < r->m.peak_step)
			continue;
		int at = n < TOP ? n++ : TOP;
		if (at == TOP && r->m.bytes[b] <= r->m.bytes[idx[TOP - 1]])
			continue;
		if (at == TOP)
			at = TOP - 1;
		while (at > 0 && r->m.bytes[idx[at - 1]] < r->m.bytes[b]) {
			idx[at] = idx[at - 1];
			at--;
		}
		idx[at] = b;
	}
	return n;
}

/* The value buffer b holds at the peak: of the values sharing it (an
 * in-place chain), the last one made by then. */
static const ir_node *holder(const report *r, int b)
{
	const ir_node *v = r->m.first[b];
	for (int t = 0; t <= r->m.peak_step && t < r->g->n; t++)
		if (r->m.buf_of[r->g->nodes[t]->id] == b)
			v = r->g->nodes[t];
	return v;
}

static void describe(const report *r, int b, char *buf, size_t n)
{
	const ir_node *v = holder(r, b);
	char ref[80], type[128], scope[80] = "";
	ir_type_str(&v->type, type, sizeof type);
	if (v->scope)
		snprintf(scope, sizeof scope, " in %s", v->scope);
	snprintf(buf, n, "%s = %s %s : %s%s", ir_node_ref(v, ref, sizeof ref), ir_role_name(v->role),
		ir_op_name(v->op), type, scope);
}

/* Runs one step of r's graph in tracking mode on random data from the
 * spec's seed and records the real high-water mark. */
static bool measure(report *r, const cli_model *m)
{
	rt_store store;
	rt_store_init(&store);
	rt_err e;
	rt_exec *x = NULL;
	bool ok = rt_store_init_from_graph(&store, r->g, (uint64_t)m->spec.seed, &e) &&
		(x = rt_exec_new(r->g, &store, RT_EXEC_TRACK, &e));
	if (ok) {
		const ir_type *t;
		void *in = rt_exec_input(x, "x", &t);
		rt_rng rng;
		rt_rng_derive(&rng, (uint64_t)m->spec.seed, RT_RNG_CHECK_BATCH, 0);
		for (int64_t i = 0; in && i < ir_type_elems(t); i++) {
			double v = rt_rng_uniform(&rng);
			if (t->dtype == IR_F32)
				((float *)in)[i] = (float)v;
			else
				((double *)in)[i] = v;
		}
		int32_t *labels = rt_exec_input(x, "labels", &t);
		for (int64_t i = 0; labels && i < ir_type_elems(t); i++)
			labels[i] = (int32_t)rt_rng_below(&rng, (uint64_t)m->spec.classes);
		ok = rt_exec_run(x, &e);
		r->measured = rt_exec_peak_bytes(x);
	}
	if (!ok)
		cli_error("%s", e.msg);
	rt_exec_free(x);
	rt_store_free(&store);
	return ok;
}

static void print_text(const report *r, int nr, const cli_model *m)
{
	char b1[32];
	printf("revc mem: %s, batch %lld\n\n%-38s", m->spec.name, (long long)m->spec.batch, "");
	for (int i = 0; i < nr; i++)
		printf("%22s", ps_strategy_name(r[i].strategy));
	printf("\n");
	for (int c = 0; c < PS_MEM_CAT_COUNT; c++) {
		printf("%-38s", ps_mem_cat_name((ps_mem_cat)c));
		for (int i = 0; i < nr; i++) {
			cli_human_bytes(b1, sizeof b1, at_peak(&r[i], (ps_mem_cat)c));
			printf("%22s", b1);
		}
		printf("\n");
	}
	const char *rows[] = {"peak of the step (fragmentation-free)", "planned arena", "saved + transient peak",
		"total (params + optimiser + arena)"};
	for (int k = 0; k < 4; k++) {
		printf("%-38s", rows[k]);
		for (int i = 0; i < nr; i++) {
			int64_t v = k == 0 ? r[i].m.peak : k == 1 ? r[i].arena : k == 2 ? r[i].m.saved_transient_peak
				: total(&r[i]);
			cli_human_bytes(b1, sizeof b1, v);
			printf("%22s", b1);
		}
		printf("\n");
	}
	printf("%-38s", "peak at step");
	for (int i = 0; i < nr; i++) {
		char s[40];
		snprintf(s, sizeof s, "%d of %d", r[i].m.peak_step, r[i].m.steps);
		printf("%22s", s);
	}
	printf("\n%-38s", "schedule");
	for (int i = 0; i < nr; i++)
		printf("%22s", r[i].schedule);
	printf("\n");
	if (r[0].measured >= 0) {
		printf("%-38s", "measured high-water mark (tracking)");
		for (int i = 0; i < nr; i++) {
			cli_human_bytes(b1, sizeof b1, r[i].measured);
			printf("%22s", b1);
		}
		printf("\n%-38s", "  equals the peak, to the byte");
		for (int i = 0; i < nr; i++)
			printf("%22s", r[i].measured == r[i].m.peak ? "yes" : "NO");
		printf("\n");
	}
	for (int i = 0; i < nr; i++) {
		int idx[TOP];
		int n = largest(&r[i], idx);
		printf("\nlargest tensors live at the %s peak (step %d):\n", ps_strategy_name(r[i].strategy),
			r[i].m.peak_step);
		for (int k = 0; k < n; k++) {
			char d[256];
			describe(&r[i], idx[k], d, sizeof d);
			cli_human_bytes(b1, sizeof b1, r[i].m.bytes[idx[k]]);
			printf("  %10s  %-20s %s\n", b1, ps_mem_cat_name(r[i].m.cat[idx[k]]), d);
		}
	}
}

static void print_json(const report *r, int nr, const cli_model *m)
{
	printf("{\"model\":\"");
	cli_json_string(stdout, m->spec.name);
	printf("\",\"batch\":%lld,\"strategies\":[", (long long)m->spec.batch);
	for (int i = 0; i < nr; i++) {
		printf("%s{\"strategy\":\"%s\",\"schedule\":\"%s\",\"steps\":%d,\"peak_step\":%d,", i ? "," : "",
			ps_strategy_name(r[i].strategy), r[i].schedule, r[i].m.steps, r[i].m.peak_step);
		printf("\"peak_bytes\":%lld,\"arena_bytes\":%lld,\"saved_transient_peak_bytes\":%lld,"
		       "\"total_bytes\":%lld,",
			(long long)r[i].m.peak, (long long)r[i].arena, (long long)r[i].m.saved_transient_peak,
			(long long)total(&r[i]));
		if (r[i].measured >= 0)
			printf("\"measured_peak_bytes\":%lld,", (long long)r[i].measured);
		printf("\"at_peak\":{");
		for (int c = 0; c < PS_MEM_CAT_COUNT; c++)
			printf("%s\"%s\":%lld", c ? "," : "", ps_mem_cat_key((ps_mem_cat)c),
				(long long)at_peak(&r[i], (ps_mem_cat)c));
		printf("},\"largest\":[");
		int idx[TOP];
		int n = largest(&r[i], idx);
		for (int k = 0; k < n; k++) {
			const ir_node *v = holder(&r[i], idx[k]);
			char ref[80], type[128];
			ir_type_str(&v->type, type, sizeof type);
			printf("%s{\"value\":\"%s\",\"op\":\"%s\",\"role\":\"%s\",\"scope\":\"", k ? "," : "",
				ir_node_ref(v, ref, sizeof ref), ir_op_name(v->op), ir_role_name(v->role));
			cli_json_string(stdout, v->scope ? v->scope : "");
			printf("\",\"type\":\"%s\",\"category\":\"%s\",\"bytes\":%lld}", type,
				ps_mem_cat_key(r[i].m.cat[idx[k]]), (long long)r[i].m.bytes[idx[k]]);
		}
		printf("]}");
	}
	printf("]}\n");
}

int cmd_mem(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc mem", argc, argv);
	const char *spec = NULL, *timeline = NULL, *val;
	bool json = false, all = false, no_edges = false, measuring = false, cut = false;
	int64_t budget = -1, threads = 2;
	ir_dtype dt = IR_F32;
	cli_engine_kind engine_kind = CLI_ENGINE_JIT;
	ps_strategy strategy = PS_STRATEGY_DEFAULT;
	ps_options popts = {0};
	cli_model m = {0};
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
			all = strcmp(val, "all") == 0;
			if (!all && !ps_strategy_lookup(val, &strategy))
				return cli_usage_error(a.cmd, "--strategy must be store, revnet, checkpoint or all, not '%s'", val);
			break;
		case OPT_NO_EDGES: no_edges = true; break;
		case OPT_BUDGET:
			if (!cli_parse_size(val, &budget))
				return cli_usage_error(a.cmd, "--budget must be a size such as 512MiB, 1.5GB or 1000000, not '%s'", val);
			break;
		case OPT_JSON: json = true; break;
		case OPT_TIMELINE: timeline = val; break;
		case OPT_MEASURE: measuring = true; break;
		case OPT_ENGINE:
			if (!cli_engine_parse(a.cmd, val, &engine_kind))
				return EXIT_USAGE;
			break;
		case OPT_THREADS:
			if (!cli_parse_int(a.cmd, "--threads", val, 1, 256, &threads))
				return EXIT_USAGE;
			break;
		case OPT_DTYPE:
			if (!cli_parse_dtype(a.cmd, val, &dt))
				return EXIT_USAGE;
			break;
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
		}
	}
	if (!spec)
		return cli_usage_error(a.cmd, "missing SPEC");
	/* Tracking mode is the interpreter's: it measures what that plan says. */
	if (measuring && engine_kind != CLI_ENGINE_INTERP)
		return cli_usage_error(a.cmd, "--measure runs the interpreter's tracking mode: add --engine interp");
	int ready = cli_pass_options_ready(a.cmd, &popts);
	if (ready != EXIT_OK)
		return ready;
	if (!cli_model_load(&m, spec))
		return EXIT_USER;
	cli_engine engine;
	cli_engine_init(&engine, engine_kind, (int)threads, NULL);

	report r[PS_STRATEGY_COUNT] = {0};
	int nr = 0, status = EXIT_USER;
	for (int s = 0; s < PS_STRATEGY_COUNT; s++) {
		if (!all && s != (int)strategy)
			continue;
		ps_ctx ctx;
		ps_ctx_init(&ctx);
		ctx.strategy = (ps_strategy)s;
		ctx.no_order_edges = no_edges;
		cli_engine_plan(&engine, &ctx);
		report *x = &r[nr];
		x->strategy = (ps_strategy)s;
		ps_options sopts = popts;
		if (all)
			sopts.dump_tag = ps_strategy_name((ps_strategy)s); /* three pipelines, one dump directory */
		x->g = cli_model_graph(&m, dt, FE_LOWER_TRAIN, &ctx, &sopts);
		if (x->g && !ir_graph_has_pass(x->g, "plan")) {
			/* --stop-after or --passes left no plan to report on. */
			ir_graph_free(x->g);
			x->g = NULL;
			ps_ctx_free(&ctx);
			cut = true;
			continue;
		}
		if (!x->g) {
			ps_ctx_free(&ctx);
			goto done;
		}
		nr++;
		x->schedule = ctx.schedule ? ctx.schedule : "given";
		ps_memory_compute(x->g, x->g->nodes, ctx.workspace, ctx.workspace_user, &x->m);
		x->arena = ps_arena_bytes(x->g);
		x->measured = -1;
		ps_ctx_free(&ctx);
		if (measuring && !measure(x, &m))
			goto done;
	}
	if (cut) {
		cli_pipeline_cut(a.cmd, &popts);
		status = EXIT_OK;
		goto done;
	}
	if (json)
		print_json(r, nr, &m);
	else
		print_text(r, nr, &m);
	if (timeline && !cli_timeline_svg(timeline, m.spec.name, m.spec.batch, r[0].strategy, r[0].g,
		&r[0].m))
		goto done;
	status = EXIT_OK;
	for (int i = 0; i < nr; i++)
		if (budget >= 0 && total(&r[i]) > budget) {
			char b1[32], b2[32], d[256];
			int idx[TOP];
			cli_human_bytes(b1, sizeof b1, total(&r[i]));
			cli_human_bytes(b2, sizeof b2, budget);
			int n = largest(&r[i], idx);
			fprintf(stderr, "revc: error: %s needs %s (%lld bytes), over the budget of %s; the peak is at step %d",
				ps_strategy_name(r[i].strategy), b1, (long long)total(&r[i]), b2, r[i].m.peak_step);
			if (n > 0) {
				describe(&r[i], idx[0], d, sizeof d);
				cli_human_bytes(b1, sizeof b1, r[i].m.bytes[idx[0]]);
				fprintf(stderr, ", largest tensor there %s (%s)", d, b1);
				if (n > 1) {
					describe(&r[i], idx[1], d, sizeof d);
					cli_human_bytes(b1, sizeof b1, r[i].m.bytes[idx[1]]);
					fprintf(stderr, ", then %s (%s)", d, b1);
				}
			}
			fputc('\n', stderr);
			status = EXIT_BUDGET;
		}
done:
	for (int i = 0; i < nr; i++) {
		ps_memory_free(&r[i].m);
		ir_graph_free(r[i].g);
	}
	cli_model_free(&m);
	cli_engine_free(&engine);
	return status;
}
