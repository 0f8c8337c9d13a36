/* test_cpu.h: the CPU the unit tests' native code is for.  REVC_CPU names
 * it (meson's codegen-x86-64-v3 and model-x86-64-v3 set it, with
 * OPENBLAS_CORETYPE=Haswell, so an AVX-512 host also tests the AVX2 code
 * most users run); unset, it is the host's.  A test executable calls
 * test_cpu_check first and exits with its status unless it is -1. */
#ifndef REVC_TEST_CPU_H
#define REVC_TEST_CPU_H

#include <stdio.h>
#include <stdlib.h>

#include "cg.h"
#include "rt.h"

static inline const char *test_cpu(void)
{
	return getenv("REVC_CPU");
}

/* -1 to go on; 77 (meson's "skipped") when this host cannot run code for
 * REVC_CPU; 1 when LLVM does not know it.  Says on stderr what the tests
 * run on, since their figures depend on it. */
static inline int test_cpu_check(void)
{
	const char *cpu = test_cpu();
	char missing[64], host[64];
	cg_host_cpu(host, sizeof host);
	if (!cg_cpu_known(cpu)) {
		fprintf(stderr, "REVC_CPU=%s: LLVM knows no such CPU\n", cpu);
		return 1;
	}
	if (!cg_cpu_runs_here(cpu, missing, sizeof missing)) {
		fprintf(stderr, "skipped: this host (%s) cannot run code for %s: it lacks %s\n", host, cpu, missing);
		return 77;
	}
	fprintf(stderr, "native code for %s (host %s), OpenBLAS %s kernels\n", cpu ? cpu : "native", host,
		rt_blas_core());
	return -1;
}

#endif
