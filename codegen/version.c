/* version.c: which LLVM this build links. */
#include <stdio.h>

#include <llvm-c/Core.h>

#include "cg.h"

const char *cg_llvm_version(void)
{
	static char buf[32];
	unsigned major, minor, patch;
	LLVMGetVersion(&major, &minor, &patch);
	snprintf(buf, sizeof buf, "%u.%u.%u", major, minor, patch);
	return buf;
}
