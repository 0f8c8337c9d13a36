/* args.c: a small option parser shared by the subcommands.  Accepts
 * --name=value, --name value, -x value, and "--" to end options. */
#include <errno.h>
#include <stdarg.h>
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
		fprintf(out, "  %-28s %s\n", left, opts[k].help);
	}
}

bool cli_pass_option(int k, const char *val, ps_options *opts)
{
	switch (k) {
	case 0: opts->dump_after = val; break;
	case 1: opts->dump_dir = val; break;
	case 2: opts->verify_each = true; break;
	case 3: opts->stop_after = val; break;
	case 4: opts->only = val; break;
	case 5: {
		int n;
		const ps_pass *table = ps_pipeline(&n);
		for (int i = 0; i < n; i++)
			printf("%-10s %s%s%s\n", table[i].name, table[i].why,
				table[i].requires ? "; requires " : "", table[i].requires ? table[i].requires : "");
		return false;
	}
	}
	return true;
}

int cli_revc_option(const char *cmd, const char *name, const char *val, revc_options *o)
{
	int64_t n;
	if (strcmp(name, "engine") == 0)
		return cli_engine_parse(cmd, val, &o->engine) ? 1 : -1;
	if (strcmp(name, "cpu") == 0)
		return cli_cpu_parse(cmd, val, &o->cpu) ? 1 : -1;
	if (strcmp(name, "threads") == 0) {
		if (!cli_parse_int(cmd, "--threads", val, 1, 256, &n))
			return -1;
		o->threads = (int)n;
		return 1;
	}
	if (strcmp(name, "max-memory") == 0)
		return cli_parse_max_memory(cmd, val, &o->max_memory) ? 1 : -1;
	if (strcmp(name, "check-numerics") == 0) {
		o->check_numerics = true;
		return 1;
	}
	if (strcmp(name, "strategy") == 0) {
		ps_strategy s;
		if (!cli_parse_strategy(cmd, val, &s))
			return -1;
		o->strategy = (revc_strategy)s;
		return 1;
	}
	if (strcmp(name, "dtype") == 0) {
		ir_dtype dt;
		if (!cli_parse_dtype(cmd, val, &dt))
			return -1;
		o->dtype = dt == IR_F64 ? REVC_F64 : REVC_F32;
		return 1;
	}
	return 0;
}

void cli_revc_pass_options(const ps_options *p, revc_options *o)
{
	o->dump_after = p->dump_after;
	o->dump_dir = p->dump_dir;
	o->verify_each = p->verify_each;
	o->stop_after = p->stop_after;
	o->passes = p->only;
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

bool cli_pass_options_check(const char *cmd, const ps_options *opts)
{
	char bad[128];
	if (ps_options_check(opts, bad, sizeof bad))
		return true;
	cli_usage_error(cmd, "unknown pass '%s'; 'revc dump --print-passes' lists them", bad);
	return false;
}

int cli_pass_options_ready(const char *cmd, const ps_options *opts)
{
	if (!cli_pass_options_check(cmd, opts))
		return EXIT_USAGE;
	if (opts->dump_dir && !cli_make_dir(opts->dump_dir))
		return EXIT_USER;
	return EXIT_OK;
}

bool cli_pipeline_cut(const char *cmd, const ps_options *opts)
{
	if (opts->stop_after)
		fprintf(stderr, "%s: stopped after pass '%s' (--stop-after); nothing run\n", cmd, opts->stop_after);
	else if (opts->only)
		fprintf(stderr, "%s: ran passes %s only (--passes); nothing run\n", cmd, opts->only);
	return opts->stop_after || opts->only;
}
