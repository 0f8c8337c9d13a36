/* cmd_init.c: `revc init` writes a model's initial parameters and batch-norm
 * state as a directory of .npy files named per docs/model.md. */
#include "cli.h"

static const char usage[] = "revc init SPEC --out DIR [--seed S] [--set KEY=VALUE ...]";
static const char about[] =
	"Initialises every parameter of SPEC per docs/model.md (Glorot-uniform weights from\n"
	"the seed, gamma 1, beta and biases 0, running mean 0 and variance 1) and\n"
	"writes each as DIR/NAME.npy in float32, with revc-manifest.txt listing them.\n"
	"DIR is written completely or not at all.  An existing DIR is replaced only\n"
	"when it is empty or revc wrote it (it holds a manifest and only the files it\n"
	"lists); any other directory is refused and left as it is.";

static const cli_opt opts[] = {
	{"out", 'o', "DIR", "directory to write (required)"},
	{"seed", 0, "S", "initialisation seed (default: the spec's seed)"},
	CLI_SET_OPT,
	{"help", 'h', NULL, "show this help"},
	{NULL, 0, NULL, NULL},
};
enum { OPT_OUT, OPT_SEED, OPT_SET, OPT_HELP };
CLI_OPTS_MATCH(opts, OPT_HELP + 1);

int cmd_init(int argc, char **argv)
{
	cli_args a;
	cli_args_init(&a, "revc init", argc, argv);
	const char *spec = NULL, *out = NULL, *val;
	int64_t seed = -1;
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
		case OPT_OUT:
			out = val;
			break;
		case OPT_SEED:
			if (!cli_parse_int(a.cmd, "--seed", val, 0, REVC_INT_MAX, &seed))
				return EXIT_USAGE;
			break;
		case OPT_SET:
			if (!cli_sets_add(&m, a.cmd, val))
				return EXIT_USAGE;
			break;
		case OPT_HELP:
			cli_print_help(stdout, usage, about, opts);
			return EXIT_OK;
		}
	}
	if (!spec)
		return cli_usage_error(a.cmd, "missing SPEC");
	if (!out)
		return cli_usage_error(a.cmd, "missing --out DIR");
	/* The seed as the last override: parameters come from the spec's seed. */
	char seed_set[40];
	snprintf(seed_set, sizeof seed_set, "seed=%lld", (long long)seed);
	if (seed >= 0 && !cli_sets_add(&m, a.cmd, seed_set))
		return EXIT_USAGE;
	revc_error *err = NULL;
	revc_model *model = revc_model_from_file(spec, m.sets, m.nsets, &err);
	if (!model)
		return cli_revc_error(err);
	if (!revc_dir_check(out, REVC_DIR_PARAMS, "--out", &err)) {
		revc_model_free(model);
		return cli_revc_error(err);
	}
	/* Through shape: the parameters' types, no plan. */
	revc_options o;
	revc_options_init(&o);
	o.engine = REVC_INTERP;
	o.stop_after = "shape";
	int status = EXIT_OK;
	if (revc_model_compile(model, &o, &err) && revc_save(model, out, 0, &err))
		fprintf(stderr, "revc init: wrote %d tensors to %s\n", revc_param_count(model), out);
	else
		status = cli_revc_error(err);
	revc_model_free(model);
	return status;
}
