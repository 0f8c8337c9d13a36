/* args.c: a small option parser shared by the subcommands (it accepts
 * --name=value, --name value, -x value, and "--" to end options), and the
 * options they share: the model's (--set, --engine, --cpu, --strategy, ...)
 * into revc.h's options, and the pass options. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

void cli_args_init(cli_args *a, const char *cmd, int argc, char **argv)
{
	*a = (cli_args){cmd, argc, argv, 0, false};
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: error: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see '%s --help')\n", cmd);
	return EXIT_USAGE;
}

int cli_next(cli_args *a, const cli_opt *opts, const char **val)
{
	*val = NULL;
	if (a->i >= a->argc)
		return CLI_END;
	char *arg = a->argv[a->i++];
	if (a->only_positional || arg[0] != '-' || arg[1] == 0) {
		*val = arg;
		return CLI_POSITIONAL;
	}
	if (strcmp(arg, "--") == 0) {
		a->only_positional = true;
		return cli_next(a, opts, val);
	}
	const char *name = arg + 1, *inline_val = NULL;
	size_t len;
	bool is_long = arg[1] == '-';
	if (is_long) {
		name = arg + 2;
		const char *eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		inline_val = eq ? eq + 1 : NULL;
	} else {
		len = 1;
		inline_val = arg[2] ? arg + 2 : NULL;
	}
	for (int k = 0; opts[k].name; k++) {
		bool match = is_long ? strlen(opts[k].name) == len && memcmp(opts[k].name, name, len) == 0
		                     : opts[k].short_name && opts[k].short_name == name[0];
		if (!match)
			continue;
		if (!opts[k].arg) {
			if (inline_val) {
				cli_usage_error(a->cmd, "option '--%s' takes no value", opts[k].name);
				return CLI_ERROR;
			}
			return k;
		}
		if (inline_val) {
			*val = inline_val;
		} else if (a->i < a->argc) {
			*val = a->argv[a->i++];
		} else {
			cli_usage_error(a->cmd, "option '%s' needs a value (%s)", arg, opts[k].arg);
			return CLI_ERROR;
		}
		return k;
	}
	cli_usage_error(a->cmd, "unknown option '%.*s'", (int)(len + (is_long ? 2 : 1)), arg);
	return CLI_ERROR;
}

/* The names --strategy takes, the library's list (revc_strategy_option_at,
 * which the Python module takes too): "store, revnet, checkpoint, auto or
 * min", or with also after them ("..., auto, min or all"). */
static const char *strategy_names(char *buf, size_t size, const char *also)
{
	size_t n = 0;
	int nnames = 0;
	while (revc_strategy_option_at(nnames))
		nnames++;
	int count = nnames + (also != NULL);
	buf[0] = 0;
	for (int i = 0; i < count && n < size; i++) {
		const char *name = i < nnames ? revc_strategy_option_at(i) : also;
		const char *sep = i == 0 ? "" : i == count - 1 ? " or " : ", ";
		n += (size_t)snprintf(buf + n, size - n, "%s%s", sep, name);
	}
	return buf;
}

void cli_print_help(FILE *out, const char *usage, const char *about, const cli_opt *opts)
{
	fprintf(out, "usage: %s\n\n%s\n", usage, about);
	if (!opts[0].name)
		return;
	fputs("\noptions:\n", out);
	for (int k = 0; opts[k].name; k++) {
		char left[64];
		if (opts[k].short_name)
			snprintf(left, sizeof left, "-%c, --%s%s%s", opts[k].short_name, opts[k].name,
				opts[k].arg ? " " : "", opts[k].arg ? opts[k].arg : "");
		else
			snprintf(left, sizeof left, "    --%s%s%s", opts[k].name, opts[k].arg ? " " : "",
				opts[k].arg ? opts[k].arg : "");
		const char *help = opts[k].help, *mark = strstr(help, CLI_STRATEGIES);
		char names[128];
		if (mark)
			fprintf(out, "  %-28s %.*s%s%s\n", left, (int)(mark - help), help,
				strategy_names(names, sizeof names, NULL), mark + strlen(CLI_STRATEGIES));
		else
			fprintf(out, "  %-28s %s\n", left, help);
	}
}

bool cli_pass_option(int k, const char *val, revc_options *o)
{
	switch (k) {
	case 0: o->dump_after = val; break;
	case 1: o->dump_dir = val; break;
	case 2: o->verify_each = true; break;
	case 3: o->stop_after = val; break;
	case 4: o->passes = val; break;
	case 5: {
		revc_pass p;
		for (int i = 0; revc_pass_at(i, &p); i++)
			printf("%-10s %s%s%s\n", p.name, p.why, p.requires ? "; requires " : "", p.requires ? p.requires : "");
		return false;
	}
	}
	return true;
}

bool cli_parse_int(const char *cmd, const char *opt, const char *val, int64_t lo, int64_t hi,
	int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(val, &end, 10);
	if (!*val || *end || errno || v < lo || v > hi) {
		cli_usage_error(cmd, "%s must be an integer from %lld to %lld, not '%s'", opt,
			(long long)lo, (long long)hi, val);
		return false;
	}
	*out = v;
	return true;
}

bool cli_is_spec(const char *path)
{
	size_t n = strlen(path);
	return n > 4 && strcmp(path + n - 4, ".rev") == 0;
}

bool cli_sets_add(cli_sets *s, const char *cmd, const char *assignment)
{
	if (s->nsets == CLI_MAX_SETS) {
		cli_usage_error(cmd, "more than %d --set options", CLI_MAX_SETS);
		return false;
	}
	s->sets[s->nsets++] = assignment;
	return true;
}

/* The --dtype of this command line (revc runs one command), which an IR
 * file's graph must have: cli_model_open refuses another rather than
 * ignore it. */
static const char *dtype_given;

revc_model *cli_model_open(const char *cmd, const char *path, const cli_sets *s, int *status)
{
	bool spec = cli_is_spec(path);
	if (!spec && s->nsets) {
		*status = cli_usage_error(cmd, "--set overrides a spec's keys; %s is an IR file", path);
		return NULL;
	}
	revc_error *err = NULL;
	revc_model *m = spec ? revc_model_from_file(path, s->sets, s->nsets, &err) : revc_model_from_ir(path, &err);
	if (!m) {
		*status = cli_revc_error(err);
		return NULL;
	}
	const char *has = revc_model_dtype(m) == REVC_F64 ? "f64" : "f32";
	if (!spec && dtype_given && strcmp(dtype_given, has) != 0) {
		*status = cli_usage_error(cmd, "--dtype %s does not match %s, whose graph is %s (an IR file's precision is its graph's)",
			dtype_given, path, has);
		revc_model_free(m);
		return NULL;
	}
	return m;
}

static bool parse_engine(const char *cmd, const char *val, revc_engine *out)
{
	if (strcmp(val, "interp") == 0)
		*out = REVC_INTERP;
	else if (strcmp(val, "jit") == 0)
		*out = REVC_JIT;
	else {
		cli_usage_error(cmd, "--engine must be interp or jit, not '%s'", val);
		return false;
	}
	return true;
}

bool cli_cpu_parse(const char *cmd, const char *val, const char **out)
{
	if (!revc_cpu_known(val)) {
		cli_usage_error(cmd, "--cpu must be native or an LLVM CPU name such as x86-64-v3 or znver3, not '%s'", val);
		return false;
	}
	*out = val;
	return true;
}

int cli_engine_check(const char *cmd, revc_engine kind, const char *cpu)
{
	if (!cpu)
		return EXIT_OK;
	if (kind != REVC_JIT)
		return cli_usage_error(cmd, "--cpu applies to --engine jit (the interpreter is plain C)");
	revc_options o;
	revc_options_init(&o);
	o.engine = kind;
	o.cpu = cpu;
	revc_error *err = NULL;
	return revc_options_check(&o, &err) ? EXIT_OK : cli_revc_error(err);
}

static bool parse_dtype(const char *cmd, const char *val, revc_dtype *out)
{
	if (strcmp(val, "f32") == 0)
		*out = REVC_F32;
	else if (strcmp(val, "f64") == 0)
		*out = REVC_F64;
	else {
		cli_usage_error(cmd, "--dtype must be f32 or f64, not '%s'", val);
		return false;
	}
	return true;
}

bool cli_parse_strategy(const char *cmd, const char *val, const char *also, revc_strategy *out, bool *minimum)
{
	if (revc_strategy_option(val, out, minimum))
		return true;
	char names[128];
	cli_usage_error(cmd, "--strategy must be %s, not '%s'", strategy_names(names, sizeof names, also), val);
	return false;
}

int cli_revc_option(const char *cmd, const char *name, const char *val, revc_options *o)
{
	int64_t n;
	if (strcmp(name, "engine") == 0)
		return parse_engine(cmd, val, &o->engine) ? 1 : -1;
	if (strcmp(name, "cpu") == 0)
		return cli_cpu_parse(cmd, val, &o->cpu) ? 1 : -1;
	if (strcmp(name, "threads") == 0) {
		if (!cli_parse_int(cmd, "--threads", val, 1, 256, &n))
			return -1;
		o->threads = (int)n;
		return 1;
	}
	if (strcmp(name, "max-memory") == 0)
		return cli_parse_limit(cmd, "--max-memory", val, &o->max_memory) ? 1 : -1;
	if (strcmp(name, "budget") == 0) /* strategy auto's */
		return cli_parse_limit(cmd, "--budget", val, &o->budget) ? 1 : -1;
	if (strcmp(name, "decisions") == 0) { /* strategy auto's, given */
		o->decisions = val;
		return 1;
	}
	if (strcmp(name, "check-numerics") == 0) {
		o->check_numerics = true;
		return 1;
	}
	if (strcmp(name, "strategy") == 0)
		return cli_parse_strategy(cmd, val, NULL, &o->strategy, &o->minimum) ? 1 : -1;
	if (strcmp(name, "dtype") == 0) {
		dtype_given = val;
		return parse_dtype(cmd, val, &o->dtype) ? 1 : -1;
	}
	/* ---- data parallelism (issue 15) */
	if (strcmp(name, "ranks") == 0) {
		if (!cli_parse_int(cmd, "--ranks", val, 1, 1 << 20, &n))
			return -1;
		o->ranks = (int)n;
		return 1;
	}
	if (strcmp(name, "bucket") == 0) {
		if (!revc_parse_size(val, &o->bucket_bytes) || o->bucket_bytes < 0) {
			cli_usage_error(cmd, "--bucket must be a size such as 25MiB, 1MB or 0 (one tensor a sum), not '%s'", val);
			return -1;
		}
		return 1;
	}
	if (strcmp(name, "overlap") == 0) {
		if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0) {
			cli_usage_error(cmd, "--overlap must be on or off, not '%s'", val);
			return -1;
		}
		o->allreduce_overlap = strcmp(val, "on") == 0;
		return 1;
	}
	return 0;
}

int cli_model_option(const char *cmd, const char *name, const char *val, revc_options *o, cli_sets *sets)
{
	if (strcmp(name, "set") == 0)
		return cli_sets_add(sets, cmd, val) ? 1 : -1;
	return cli_revc_option(cmd, name, val, o);
}

void cli_print_dumps(const revc_model *m)
{
	const char *d = revc_model_dump(m, NULL);
	if (d)
		fputs(d, stderr);
}

bool cli_make_dir(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return true;
		cli_error("'%s' is not a directory", path);
		return false;
	}
	if (mkdir(path, 0777) != 0) {
		cli_error("cannot create directory '%s': %s", path, strerror(errno));
		return false;
	}
	return true;
}

bool cli_pass_options_check(const char *cmd, const revc_options *o)
{
	char bad[128];
	if (revc_pass_names_ok(o, bad, sizeof bad))
		return true;
	cli_usage_error(cmd, "unknown pass '%s'; 'revc dump --print-passes' lists them", bad);
	return false;
}

int cli_pass_options_ready(const char *cmd, const revc_options *o)
{
	if (!cli_pass_options_check(cmd, o))
		return EXIT_USAGE;
	if (o->dump_dir && !cli_make_dir(o->dump_dir))
		return EXIT_USER;
	return EXIT_OK;
}

bool cli_pipeline_cut(const char *cmd, const revc_options *o)
{
	if (o->stop_after)
		fprintf(stderr, "%s: stopped after pass '%s' (--stop-after); nothing run\n", cmd, o->stop_after);
	else if (o->passes)
		fprintf(stderr, "%s: ran passes %s only (--passes); nothing run\n", cmd, o->passes);
	return o->stop_after || o->passes;
}
