/* main.c: the revc command: dispatch to subcommands, --help, --version. */
#include <string.h>

#include "cli.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{"dump", cmd_dump, "print a graph as IR text or Graphviz, after any pass"},
	{"init", cmd_init, "write a model's initial parameters as .npy files"},
	{"grad", cmd_grad, "compute the loss and parameter gradients for one batch"},
	{"check", cmd_check, "check gradients against finite differences"},
	{"train", cmd_train, "train a model, with progress, evaluation and checkpoints"},
	{"eval", cmd_eval, "report loss and accuracy on the test split"},
	{"mem", cmd_mem, "plan a training step's memory and report peak bytes by category"},
	{"bench", cmd_bench, "time training steps: step time, images/s, GFLOP/s, memory"},
	{"compile", cmd_compile, "compile a model ahead of time into a library with a C API"},
};

static void help(FILE *out)
{
	fputs("usage: revc COMMAND [options]\n"
	      "       revc --help | --version\n\n"
	      "revc compiles reversible residual networks (RevNets) to training steps whose\n"
	      "memory does not grow with depth.\n\ncommands:\n", out);
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fputs("\n'revc COMMAND --help' describes a command.\n"
	      "Exit status: 0 success, 1 user error, 2 bad usage, 3 memory budget exceeded,\n"
	      "130 or 143 training stopped by SIGINT or SIGTERM.\n", out);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		help(stderr);
		return EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		help(stdout);
		return EXIT_OK;
	}
	if (strcmp(cmd, "--version") == 0) {
		printf("revc %s (LLVM %s, %s with %s kernels)\n", revc_version(), revc_llvm_version(), revc_blas_version(),
			revc_blas_core());
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(cmd, commands[i].name) == 0) {
			cli_set_command(commands[i].name);
			int status = cli_world_begin();
			if (status == EXIT_OK)
				status = commands[i].run(argc - 2, argv + 2);
			return cli_world_end(status);
		}
	fprintf(stderr, "revc: error: unknown command '%s' (see 'revc --help')\n", cmd);
	return EXIT_USAGE;
}
