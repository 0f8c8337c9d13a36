/* report.c: how the command line shows errors and writes its outputs. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

_Static_assert((int)REVC_ERR_USER == EXIT_USER && (int)REVC_ERR_USAGE == EXIT_USAGE &&
	(int)REVC_ERR_BUDGET == EXIT_BUDGET, "an error's kind is its exit status");

static const char *command;

void cli_set_command(const char *name)
{
	command = name;
}

/* "revc train: error: ", or "revc: error: " before a command is known. */
static void error_prefix(void)
{
	if (command)
		fprintf(stderr, "revc %s: error: ", command);
	else
		fputs("revc: error: ", stderr);
}

int cli_revc_error(revc_error *err)
{
	static const char lib_prefix[] = "revc: error: ";
	const char *msg = revc_error_message(err);
	if (strncmp(msg, lib_prefix, sizeof lib_prefix - 1) == 0) {
		error_prefix();
		msg += sizeof lib_prefix - 1;
	}
	fputs(msg, stderr);
	int status = (int)revc_error_kind_of(err);
	revc_error_free(err);
	return status;
}

int cli_error(const char *fmt, ...)
{
	va_list ap;
	error_prefix();
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_USER;
}

bool cli_write_output(const char *path, const char *text, size_t len)
{
	if (!path || strcmp(path, "-") == 0) {
		if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
			cli_error("cannot write to standard output");
			return false;
		}
		return true;
	}
	revc_error *err = NULL;
	if (!revc_write_file(path, text, len, &err)) {
		cli_revc_error(err);
		return false;
	}
	return true;
}

void cli_model_engine_json(const revc_model *m)
{
	printf("\"engine\":\"%s\",", revc_model_engine(m));
	if (revc_model_cpu(m))
		printf("\"cpu\":\"%s\",", revc_model_cpu(m));
	else
		printf("\"cpu\":null,");
}

bool cli_output_writable(const char *path)
{
	if (!path || strcmp(path, "-") == 0)
		return true;
	char dir[4096];
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else
		snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	struct stat st;
	if (slash && !slash[1]) {
		cli_error("cannot write %s: it names a directory", path);
		return false;
	}
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		cli_error("cannot write %s: %s is not a directory", path, dir);
		return false;
	}
	if (access(dir, W_OK) != 0) {
		cli_error("cannot write %s: directory %s is not writable", path, dir);
		return false;
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		cli_error("cannot write %s: it is a directory", path);
		return false;
	}
	return true;
}
