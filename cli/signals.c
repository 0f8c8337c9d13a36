/* signals.c: SIGINT and SIGTERM during long work (revc train).  The first
 * one only sets a flag, which the work polls at safe points (rt_train_cfg's
 * stop) so it can end cleanly: the last checkpoint whole, no temporary
 * directory left, one line said.  A second of the same signal ends the
 * process as its default action does. */
#include <signal.h>

#include "cli.h"

static volatile sig_atomic_t caught;

static void on_signal(int sig)
{
	caught = sig;
}

void cli_signal_catch(void)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* Reads and writes in progress go on; the next one of the same signal
	 * gets the default action. */
	sa.sa_flags = SA_RESTART | SA_RESETHAND;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int cli_signal_caught(void)
{
	return caught;
}

const char *cli_signal_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}
