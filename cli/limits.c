/* limits.c: the sizes of --max-memory, the limit train, grad, bench and
 * eval put on a plan before they allocate it (parameters + optimiser state
 * + the planned arenas of the graphs the command runs: the same total
 * `revc mem` shows; the driver checks it, driver/pipeline.c), and of
 * --budget, the total strategy auto's decisions (and revc mem's check)
 * must fit. */
#include "cli.h"

bool cli_parse_limit(const char *cmd, const char *opt, const char *val, int64_t *out)
{
	if (revc_parse_size(val, out) && *out > 0)
		return true;
	cli_usage_error(cmd, "%s must be a size such as 512MiB, 1.5GB or 1000000, not '%s'", opt, val);
	return false;
}
