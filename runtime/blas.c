/* blas.c: OpenBLAS glue. */
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "rt.h"

const char *rt_blas_version(void)
{
	/* openblas_get_config() starts with "OpenBLAS 0.3.21 ..."; keep the
	 * first two words. */
	static char buf[64];
	const char *cfg = openblas_get_config();
	snprintf(buf, sizeof buf, "%s", cfg ? cfg : "BLAS");
	char *sp = strchr(buf, ' ');
	if (sp && (sp = strchr(sp + 1, ' ')))
		*sp = 0;
	return buf;
}

const char *rt_blas_core(void)
{
	const char *core = openblas_get_corename();
	return core ? core : "unknown";
}

void rt_set_threads(int n)
{
	openblas_set_num_threads(n);
}
