/* report.c: how the command line shows errors and writes its outputs. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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
