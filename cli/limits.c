/* limits.c: --max-memory, the limit train, grad, bench and eval put on a
 * plan before they allocate it: parameters + optimiser state + the planned
 * arenas of the graphs the command runs (the same total `revc mem` shows).
 * What is left bounds the data train and eval load (cli/data.c). */
#include "cli.h"

bool cli_parse_max_memory(const char *cmd, const char *val, int64_t *out)
{
	if (cli_parse_size(val, out) && *out > 0)
		return true;
	cli_usage_error(cmd, "--max-memory must be a size such as 512MiB, 1.5GB or 1000000, not '%s'", val);
	return false;
}

/* The plan's total: persistent tensors (those of the first graph, as revc
 * mem counts them) and the arenas; its parts (parameters, optimiser state,
 * arenas) in part when that is not NULL. */
static int64_t plan_bytes(ir_graph *const *graphs, int n, int64_t *part)
{
	int64_t persistent[PS_MEM_CAT_COUNT] = {0}, arena = 0;
	ps_memory_persistent(graphs[0], persistent);
	for (int k = 0; k < n; k++)
		arena += ps_arena_bytes(graphs[k]);
	if (part) {
		part[0] = persistent[PS_MEM_PARAMS];
		part[1] = persistent[PS_MEM_OPTSTATE];
		part[2] = arena;
	}
	return persistent[PS_MEM_PARAMS] + persistent[PS_MEM_OPTSTATE] + arena;
}

cli_budget cli_data_budget(int64_t limit, ir_graph *const *graphs, int n)
{
	cli_budget b = {limit, 0, 0};
	if (limit >= 0 && n >= 1)
		b.plan = plan_bytes(graphs, n, NULL);
	return b;
}

bool cli_check_max_memory(int64_t limit, ir_graph *const *graphs, int n)
{
	if (limit < 0 || n < 1)
		return true;
	int64_t part[3];
	int64_t total = plan_bytes(graphs, n, part);
	if (total <= limit)
		return true;
	char t[32], p[32], o[32], a[32], l[32];
	cli_human_bytes(t, sizeof t, total);
	cli_human_bytes(p, sizeof p, part[0]);
	cli_human_bytes(o, sizeof o, part[1]);
	cli_human_bytes(a, sizeof a, part[2]);
	cli_human_bytes(l, sizeof l, limit);
	cli_error("the plan needs %s (%lld bytes: parameters %s + optimiser state %s + arena%s %s), more "
		"than --max-memory %s (%lld bytes)", t, (long long)total, p, o, n > 1 ? "s" : "", a, l,
		(long long)limit);
	return false;
}
