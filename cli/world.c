/* world.c: the command in a world of processes (mpirun -np K revc ...).
 *
 * Rank 0 speaks for the job: its stdout and stderr are the command's.  The
 * other ranks' stdout goes nowhere and their stderr is kept aside; when one
 * of them fails it waits a moment, so that a failure every rank shares (a
 * bad option, a missing file) is said once, by rank 0, whose exit ends the
 * job; otherwise it says its own error, naming its rank ("revc train:
 * error: rank 1: ..."), and ends the job on every rank. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static struct {
	int rank, size;
	int err_fd;   /* the real stderr of a rank > 0, else -1 */
	FILE *kept;   /* its stderr meanwhile */
} w = {.err_fd = -1};

/* A collective failed: say so on the real stderr at once. */
static void fatal(const char *msg)
{
	int fd = w.err_fd >= 0 ? w.err_fd : STDERR_FILENO;
	char line[1024];
	int n = snprintf(line, sizeof line, "revc: error: %s\n", msg);
	if (n > 0 && write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
		return;
}

int cli_world_begin(void)
{
	revc_error *err = NULL;
	if (!revc_world_init(fatal, &err)) {
		/* (Every rank fails alike: the first says it.) */
		const char *r = getenv("OMPI_COMM_WORLD_RANK");
		if (r && strcmp(r, "0") != 0) {
			revc_error_free(err);
			return EXIT_USER;
		}
		return cli_revc_error(err);
	}
	w.rank = revc_world_rank();
	w.size = revc_world_size();
	if (w.rank == 0)
		return EXIT_OK;
	fflush(stdout);
	fflush(stderr);
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	w.kept = tmpfile();
	w.err_fd = dup(STDERR_FILENO);
	if (null < 0 || !w.kept || w.err_fd < 0 || dup2(null, STDOUT_FILENO) < 0 ||
	    dup2(fileno(w.kept), STDERR_FILENO) < 0)
		return cli_error("rank %d: cannot set aside its output", w.rank);
	close(null);
	return EXIT_OK;
}

/* Copies what the rank said from its first error on (not its progress)
 * to its real stderr, its rank after each "error: ". */
static void replay(void)
{
	fflush(stderr);
	FILE *out = fdopen(w.err_fd, "w");
	if (!out)
		return;
	rewind(w.kept);
	char line[4096];
	bool said = false;
	while (fgets(line, sizeof line, w.kept)) {
		char *at = strstr(line, "error: ");
		said = said || at;
		if (!said)
			continue;
		if (at) {
			at += strlen("error: ");
			fprintf(out, "%.*srank %d: %s", (int)(at - line), line, w.rank, at);
		} else {
			fputs(line, out);
		}
	}
	fflush(out);
}

int cli_world_end(int status)
{
	if (w.size > 1 && w.rank > 0 && status != 0) {
		/* (The job's end comes as SIGTERM: it must end this wait, not
		 * be caught by the command's handler.) */
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		struct timespec pause = {.tv_sec = 3};
		nanosleep(&pause, NULL);
		replay();
	}
	fflush(stdout);
	fflush(stderr);
	revc_world_end(status);
	return status;
}
