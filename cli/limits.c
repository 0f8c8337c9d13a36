/* limits.c: --max-memory, the limit train, grad, bench and eval put on a
 * plan before they allocate it: parameters + optimiser state + the planned
 * arenas of the graphs the command runs (the same total `revc mem` shows),
 * for the commands not yet moved onto revc.h (driver/pipeline.c checks it). */
#include "cli.h"

bool cli_parse_max_memory(const char *cmd, const char *val, int64_t *out)
{
	if (cli_parse_size(val, out) && *out > 0)
		return true;
	cli_usage_error(cmd, "--max-memory must be a size such as 512MiB, 1.5GB or 1000000, not '%s'", val);
	return false;
}

bool cli_check_max_memory(int64_t limit, ir_graph *const *graphs, int n)
{
	revc_error *err = NULL;
	if (drv_check_max_memory(limit, graphs, n, &err))
		return true;
	fputs(revc_error_message(err), stderr);
	revc_error_free(err);
	return false;
}
