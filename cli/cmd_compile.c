/* cmd_compile.c: `revc compile` writes a model as native code ahead of time
 * (driver/aot.c does it): a shared library (libNAME.so) or a relocatable
 * object (NAME.o) holding the training step and the forward pass, with a C
 * header declaring its API: revc_emit_with does it, this file parses the
 * options. */
#include <string.h>

#include "cli.h"

static const char usage[] =
	"revc compile SPEC|FILE.ir -o libNAME.so|NAME.o [--header NAME.h] [--name PREFIX]\n"
	"                    [--strategy NAME] [--budget SIZE] [--cpu NAME] [--set KEY=VALUE ...] [--dump-llvm DIR]";
static const char about[] =
	"Compiles SPEC's training step (the spec's optimiser and batch) and its forward\n"
	"pass to native code for this machine (or the CPU --cpu names) and writes a\n"
	"shared library or an object file, plus a header declaring its C API:\n"
	"  PREFIX_model *PREFIX_new(uint64_t seed);   parameters per docs/model.md from seed\n"
	"  int PREFIX_load(PREFIX_model *, const char *dir);  NAME.npy files, as revc writes\n"
	"  int PREFIX_save(PREFIX_model *, const char *dir);\n"
	"  float PREFIX_train_step(PREFIX_model *, const float *x, const int32_t *labels, float lr);\n"
	"  void PREFIX_forward(PREFIX_model *, const float *x, float *logits);\n"
	"  const char *PREFIX_error(const PREFIX_model *);  void PREFIX_free(PREFIX_model *);\n"
	"with PREFIX_ARENA_BYTES and the shapes as compile-time constants.  Link a\n"
	"library with -lNAME -lopenblas; an object with -lopenblas -lm.\n"
	"\n"
	"FILE.ir is an f32 forward graph in revc's IR with its couplings marked and\n"
	"its training settings (a train { ... } block: docs/ir.md), such as\n"
	"`revc dump SPEC` prints: it compiles as the spec it came from.";

static const cli_opt opts[] = {
	{"output", 'o', "FILE", "libNAME.so or NAME.o (required)"},
	{"header", 0, "FILE.h", "also write the C header"},
	{"name", 0, "PREFIX", "prefix of the API's symbols (default: NAME from the output)"},
	CLI_STRATEGY_OPT,
	{"dump-llvm", 0, "DIR", "write the module's .ll before and after optimisation"},
	CLI_CPU_OPT,
	CLI_SET_OPT,
	{"budget", 0, "SIZE", "--strategy auto: the fastest decisions whose planned total fits SIZE"},
	{"help", 'h', NULL, "show this help"},
	{NULL, 0, NULL, NULL},
};
enum { OPT_OUTPUT, OPT_HEADER, OPT_NAME, OPT_STRATEGY, OPT_DUMP, OPT_CPU, OPT_SET, OPT_BUDGET, OPT_HELP };
CLI_OPTS_MATCH(opts, OPT_HELP + 1);

/* What the command line asked for. */
typedef struct {
	const char *spec, *out;
	revc_emit_options e;
	char prefix[64];
	cli_sets sets;
} compile_args;

/* The options; -1 when the command goes on, else its exit status. */
static int parse(cli_args *a, compile_args *c)
{
	const char *val, *name = NULL;
	for (int k; (k = cli_next(a, opts, &val)) != CLI_END;) {
		switch (k) {
		case CLI_ERROR:
			return EXIT_USAGE;
		case CLI_POSITIONAL:
			if (c->spec)
				return cli_usage_error(a->cmd, "unexpected argument '%s'", val);
			c->spec = val;
			break;
		case OPT_OUTPUT: c->out = val; break;
		case OPT_HEADER: c->e.header = val; break;
		case OPT_NAME: name = val; break;
		case OPT_STRATEGY:
			if (!cli_parse_strategy(a->cmd, val, NULL, &c->e.strategy, &c->e.minimum))
				return EXIT_USAGE;
			break;
		case OPT_BUDGET:
			if (!cli_parse_limit(a->cmd, "--budget", val, &c->e.budget))
				return EXIT_USAGE;
			break;
		case OPT_DUMP: c->e.dump_llvm = val; break;
		case OPT_CPU:
			if (!cli_cpu_parse(a->cmd, val, &c->e.cpu))
				return EXIT_USAGE;
			break;
		case OPT_SET:
			if (!cli_sets_add(&c->sets, a->cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		}
	}
	if (!c->spec)
		return cli_usage_error(a->cmd, "missing SPEC or FILE.ir");
	if (c->e.budget >= 0 && c->e.strategy != REVC_AUTO)
		return cli_usage_error(a->cmd, "--budget goes with --strategy auto");
	if (!c->out || !revc_emit_default_prefix(c->out, c->prefix, sizeof c->prefix))
		return cli_usage_error(a->cmd, "-o must name a libNAME.so or NAME.o file");
	if (name)
		snprintf(c->prefix, sizeof c->prefix, "%s", name);
	if (!revc_emit_prefix_ok(c->prefix))
		return cli_usage_error(a->cmd, "'%s' is not a C identifier (use --name)", c->prefix);
	if (c->e.dump_llvm && !cli_make_dir(c->e.dump_llvm))
		return EXIT_USER;
	c->e.prefix = c->prefix;
	return -1;
}

int cmd_compile(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc compile", argc, argv);
	compile_args c = {0};
	revc_emit_options_init(&c.e);
	int status = parse(&a, &c);
	if (status >= 0)
		return status;
	revc_model *m = cli_model_open("revc compile", c.spec, &c.sets, &status);
	if (!m)
		return status;
	revc_error *err = NULL;
	if (revc_emit_with(m, c.out, &c.e, &err))
		fprintf(stderr, "revc compile: wrote %s%s%s (arena %lld bytes)\n", c.out, c.e.header ? " and " : "",
			c.e.header ? c.e.header : "", (long long)c.e.arena_bytes);
	else
		status = cli_revc_error(err);
	revc_model_free(m);
	return status < 0 ? EXIT_OK : status;
}
