/* cmd_dump.c: `revc dump` reads an IR file, runs the pipeline as far as
 * asked, and prints the graph as IR text or Graphviz. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rt.h"

static const char usage[] = "revc dump FILE [--format ir|dot] [--after PASS] [-o FILE] [pass options]";
static const char about[] =
	"Reads FILE (revc IR text), verifies it, runs the pipeline through PASS when\n"
	"--after is given, and prints the result.  Without --after nothing runs: the\n"
	"output is the input in canonical form.  Errors are 'file:line:col: error: ...'\n"
	"with exit status 1; no output file is written then.";

static const cli_opt opts[] = {
	{"format", 0, "ir|dot", "output format (default ir)"},
	{"after", 0, "PASS", "run the pipeline through PASS first"},
	{"output", 'o', "FILE", "write to FILE (atomically) instead of standard output"},
	{"help", 'h', NULL, "show this help"},
	CLI_PASS_OPTS,
	{NULL, 0, NULL, NULL},
};
enum { OPT_FORMAT, OPT_AFTER, OPT_OUTPUT, OPT_HELP, OPT_PASS0 };

/* 256 MiB: far above any graph revc produces. */
#define MAX_INPUT ((size_t)256 << 20)

int cmd_dump(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc dump", argc, argv);
	const char *file = NULL, *out = NULL, *val;
	bool dot = false;
	ps_options popts = {0};
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
	if (!cli_pass_options_check(a.cmd, &popts))
		return EXIT_USAGE;

	char *text;
	size_t len;
	rt_err e;
	if (!rt_file_read(file, MAX_INPUT, &text, &len, &e))
		return cli_error("%s", e.msg);
	cli_source src = {file, text, len};
	int status = EXIT_USER;
	ir_diags d;
	ir_diags_init(&d);
	ps_ctx ctx;
	ps_ctx_init(&ctx);
	ir_graph *g = ir_parse(file, text, len, &d);
	if (!g || !ir_verify(g, &d)) {
		cli_report(&d, &src, 1);
		goto done;
	}
	bool run = popts.stop_after || popts.only || popts.dump_after;
	if (run && ps_run(g, &ctx, &popts) != 0) {
		cli_report(&ctx.diags, &src, 1);
		goto done;
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
	free(text);
	return status;
}
