/* cmd_dump.c: `revc dump` reads an IR file, runs the pipeline as far as
 * asked, and prints the graph as IR text or Graphviz. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"revc dump FILE.ir [--format ir|dot] [--after PASS] [-o FILE] [pass options]\n"
	"       revc dump SPEC.rev [--set KEY=VALUE ...] [--dtype f32|f64] [--strategy NAME] [...]";
static const char about[] =
	"Reads FILE.ir (revc IR text) or a model spec (.rev), runs the pipeline through\n"
	"PASS, and prints the graph.  IR input is verified, with what its passes(...)\n"
	"list claims, and, without --after, printed in canonical form with no pass run.\n"
	"A spec is lowered to the forward IR and run through --after (default: shape,\n"
	"the typed forward IR), with its training settings in a train { ... } block\n"
	"ahead of the graph (docs/ir.md); an IR file with one prints it back.  The\n"
	"forward IR of a spec, through --after, dumps as the spec does.  Errors are\n"
	"'file:line:col: error: ...' with exit status 1; no output file is written then.";

static const cli_opt opts[] = {
	{"format", 0, "ir|dot", "output format (default ir)"},
	{"after", 0, "PASS", "run the pipeline through PASS first"},
	{"output", 'o', "FILE", "write to FILE (atomically) instead of standard output"},
	{"dtype", 0, "f32|f64", "spec input: precision of the graph (default f32)"},
	{"strategy", 0, "NAME", "spec input: " CLI_STRATEGIES " (default " CLI_STRATEGY_DEFAULT ")"},
	{"eval", 0, NULL, "spec input: the evaluation graph (running statistics, no training)"},
	CLI_SET_OPT,
	CLI_RANKS_OPT,
	CLI_DP_OPTS, /* (bucket) */
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_FORMAT, OPT_AFTER, OPT_OUTPUT, OPT_DTYPE, OPT_STRATEGY, OPT_EVAL, OPT_SET, OPT_RANKS, OPT_BUCKET, OPT_OVERLAP, OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

int cmd_dump(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc dump", argc, argv);
	const char *file = NULL, *out = NULL, *val;
	bool dot = false, eval = false;
	revc_options o;
	revc_options_init(&o);
	cli_sets m = {0};
	for (int k; (k = cli_next(&a, opts, &val)) != CLI_END;) {
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (file)
				return cli_usage_error(a.cmd, "unexpected argument '%s'", val);
			file = val;
			break;
		case OPT_FORMAT:
			if (strcmp(val, "ir") != 0 && strcmp(val, "dot") != 0)
				return cli_usage_error(a.cmd, "--format must be ir or dot, not '%s'", val);
			dot = strcmp(val, "dot") == 0;
			break;
		case OPT_AFTER: o.stop_after = val; break;
		case OPT_OUTPUT: out = val; break;
		case OPT_EVAL: eval = true; break;
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
	if (!file)
		return cli_usage_error(a.cmd, "missing FILE");
	bool spec = cli_is_spec(file);
	if (!spec && (m.nsets || eval))
		return cli_usage_error(a.cmd, "--set and --eval apply to specs (.rev files) only");
	int ready = cli_pass_options_ready(a.cmd, &o);
	if (ready != EXIT_OK)
		return ready;
	/* A spec goes through --after (default shape); IR, verified with what
	 * its passes(...) list claims, through the passes asked for, if any.
	 * Either plans for the interpreter and runs nothing. */
	if (spec && !o.stop_after && !o.passes)
		o.stop_after = "shape";
	if (!spec && !o.stop_after && !o.passes && !o.dump_after)
		o.passes = "";
	o.graphs = eval ? REVC_GRAPH_EVAL : REVC_GRAPH_STEP;
	o.engine = REVC_INTERP;
	o.no_run = true;
	revc_error *err = NULL;
	char *text = NULL;
	int status;
	revc_model *model = cli_model_open(a.cmd, file, &m, &status);
	if (!model)
		return status;
	bool ok = revc_model_compile(model, &o, &err);
	cli_print_dumps(model);
	ok = ok && (text = revc_model_print(model, o.graphs, dot, &err));
	status = !ok ? cli_revc_error(err) : cli_write_output(out, text, strlen(text)) ? EXIT_OK : EXIT_USER;
	free(text);
	revc_model_free(model);
	return status;
}
