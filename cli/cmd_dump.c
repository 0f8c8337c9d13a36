/* cmd_dump.c: `revc dump` reads an IR file, runs the pipeline as far as
 * asked, and prints the graph as IR text or Graphviz. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rt.h"

static const char usage[] =
	"revc dump FILE [--format ir|dot] [--after PASS] [-o FILE] [pass options]\n"
	"       revc dump SPEC.rev [--set KEY=VALUE ...] [--dtype f32|f64] [--strategy NAME] [...]";
static const char about[] =
	"Reads FILE (revc IR text) or a model spec (.rev), runs the pipeline through\n"
	"PASS, and prints the graph.  IR input is verified, with what its passes(...)\n"
	"list claims, and, without --after, printed in canonical form with no pass run.\n"
	"A spec is lowered to the forward IR and run through --after (default: shape,\n"
	"the typed forward IR).  Errors are\n"
	"'file:line:col: error: ...' with exit status 1; no output file is written then.";

static const cli_opt opts[] = {
	{"format", 0, "ir|dot", "output format (default ir)"},
	{"after", 0, "PASS", "run the pipeline through PASS first"},
	{"output", 'o', "FILE", "write to FILE (atomically) instead of standard output"},
	{"dtype", 0, "f32|f64", "spec input: precision of the graph (default f32)"},
	{"strategy", 0, "NAME", "spec input: store, revnet or checkpoint (default " CLI_STRATEGY_DEFAULT ")"},
	{"eval", 0, NULL, "spec input: the evaluation graph (running statistics, no training)"},
	CLI_SET_OPT,
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_FORMAT, OPT_AFTER, OPT_OUTPUT, OPT_DTYPE, OPT_STRATEGY, OPT_EVAL, OPT_SET, OPT_HELP, OPT_PASS0 };
CLI_OPTS_MATCH(opts, OPT_PASS0 + CLI_PASS_OPT_COUNT);

/* 256 MiB: far above any graph revc produces. */
#define MAX_INPUT ((size_t)256 << 20)

int cmd_dump(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc dump", argc, argv);
	const char *file = NULL, *out = NULL, *val;
	bool dot = false, eval = false;
	ir_dtype dt = IR_F32;
	ps_options popts = {0};
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	cli_model m = {0};
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
		case OPT_AFTER:
			popts.stop_after = val;
			break;
		case OPT_OUTPUT:
			out = val;
			break;
		case OPT_DTYPE:
			if (!cli_parse_dtype(a.cmd, val, &dt))
				return EXIT_USAGE;
			break;
		case OPT_STRATEGY:
			if (!cli_parse_strategy(a.cmd, val, &ctx.strategy))
				return EXIT_USAGE;
			break;
		case OPT_EVAL:
			eval = true;
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
	if (!file)
		return cli_usage_error(a.cmd, "missing FILE");
	bool spec = cli_is_spec(file);
	if (!spec && (m.nsets || eval))
		return cli_usage_error(a.cmd, "--set and --eval apply to specs (.rev files) only");
	int ready = cli_pass_options_ready(a.cmd, &popts);
	if (ready != EXIT_OK)
		return ready;

	char *text = NULL;
	int status = EXIT_USER;
	ir_diags d;
	ir_diags_init(&d);
	ir_graph *g = NULL;
	if (spec) {
		if (!popts.stop_after && !popts.only)
			popts.stop_after = "shape";
		if (eval)
			ctx.optimizer = false;
		if (!cli_model_load(&m, file) ||
		    !(g = cli_model_graph(&m, dt, eval ? FE_LOWER_EVAL : FE_LOWER_TRAIN, &ctx, &popts)))
			goto done;
	} else {
		size_t len;
		rt_err e;
		if (!rt_file_read(file, MAX_INPUT, &text, &len, &e)) {
			cli_error("%s", e.msg);
			goto done;
		}
		cli_source src = {file, text, len};
		g = ir_parse(file, text, len, &d);
		/* ps_run checks the claims of passes(...) itself. */
		bool run = popts.stop_after || popts.only || popts.dump_after;
		if (!g || !ir_verify(g, &d) || (!run && !ps_claims_check(g, &d))) {
			cli_report(&d, &src, 1);
			goto done;
		}
		if (run && ps_run(g, &ctx, &popts) != 0) {
			cli_report(&ctx.diags, &src, 1);
			goto done;
		}
	}
	char *buf = NULL;
	size_t blen = 0;
	FILE *f = open_memstream(&buf, &blen);
	if (!f)
		IR_DIE("open_memstream failed");
	if (dot)
		ir_dot(f, g);
	else
		ir_print(f, g);
	fclose(f);
	if (cli_write_output(out, buf, blen))
		status = EXIT_OK;
	free(buf);
done:
	ir_graph_free(g);
	ps_ctx_free(&ctx);
	ir_diags_free(&d);
	cli_model_free(&m);
	free(text);
	return status;
}
