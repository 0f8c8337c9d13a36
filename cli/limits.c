/* limits.c: --max-memory, the limit train, grad, bench and eval put on a
 * plan before they allocate it: parameters + optimiser state + the planned
 * arenas of the graphs the command runs (the same total `revc mem` shows;
 * the driver checks it, driver/pipeline.c). */
#include "cli.h"

bool cli_parse_max_memory(const char *cmd, const char *val, int64_t *out)
{
	if (revc_parse_size(val, out) && *out > 0)
		return true;
	cli_usage_error(cmd, "--max-memory must be a size such as 512MiB, 1.5GB or 1000000, not '%s'", val);
	return false;
}
