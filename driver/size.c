/* size.c: byte counts as people write them ("512MiB", "1.5GB", "2e9") and
 * as revc shows them ("1.50 MiB"), for limits and reports. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool revc_parse_size(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || !(v >= 0))
		return false;
	static const struct {
		const char *unit;
		double scale;
	} units[] = {
		{"", 1}, {"B", 1}, {"K", 1e3}, {"KB", 1e3}, {"KiB", 1024}, {"M", 1e6}, {"MB", 1e6},
		{"MiB", 1048576}, {"G", 1e9}, {"GB", 1e9}, {"GiB", 1073741824.0}, {"T", 1e12},
		{"TB", 1e12}, {"TiB", 1099511627776.0},
	};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (strcmp(end, units[i].unit) == 0) {
			double bytes = v * units[i].scale;
			if (bytes > 9e18)
				return false;
			*out = (int64_t)bytes;
			return true;
		}
	return false;
}

void revc_format_bytes(char *buf, size_t n, int64_t bytes)
{
	if (bytes >= (int64_t)1 << 30)
		snprintf(buf, n, "%.2f GiB", (double)bytes / (1 << 30));
	else if (bytes >= 1 << 20)
		snprintf(buf, n, "%.2f MiB", (double)bytes / (1 << 20));
	else if (bytes >= 1 << 10)
		snprintf(buf, n, "%.1f KiB", (double)bytes / (1 << 10));
	else
		snprintf(buf, n, "%lld B", (long long)bytes);
}
