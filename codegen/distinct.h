/* distinct.h: the one piece of LLVM metadata the C API cannot make, a
 * distinct node (codegen/distinct.cpp; C and C++ alike, like cpu.h). */
#ifndef REVC_CG_DISTINCT_H
#define REVC_CG_DISTINCT_H

#include <llvm-c/Core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A new distinct empty node of ctx, owned by ctx: an access group, for a
 * loop's llvm.loop.parallel_accesses (builder.c's cg_parallel_loop). */
LLVMMetadataRef cg_distinct_node(LLVMContextRef ctx);

#ifdef __cplusplus
}
#endif

#endif
