/* cpu.h: the CPU code is generated for (codegen/cpu.cpp, one of revc's two C++
 * files, which includes nothing else of ours).  cg.h includes it for the
 * public part; the rest is for codegen/.
 *
 * A CPU is NULL or "native" (this host's CPU with the features it reports)
 * or a name LLVM's native target knows (an -mcpu name: x86-64-v3, znver3,
 * skylake-avx512, ...) with that CPU's own features, so code for a
 * deployment machine, or the AVX2 code on an AVX-512 host, can be built
 * anywhere. */
#ifndef REVC_CG_CPU_H
#define REVC_CG_CPU_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether LLVM knows cpu (and it can take this host's 64-bit code). */
bool cg_cpu_known(const char *cpu);
/* Whether this host can run code made for cpu; if not, names the first
 * instruction-set feature the code may use and the host lacks ("avx512f")
 * in missing.  cg_jit_compile refuses such a CPU; cg_emit_object does not. */
bool cg_cpu_runs_here(const char *cpu, char *missing, size_t len);
/* This host's CPU as LLVM names it ("znver4"). */
void cg_host_cpu(char *buf, size_t len);

/* ---- for codegen/ ---------------------------------------------------------- */

/* NULL or "native". */
bool cg_cpu_is_native(const char *cpu);
/* What LLVM is given for cpu: the host's CPU name and features when
 * native, else the name and no features (a named CPU brings its own).
 * The caller disposes of both with LLVMDisposeMessage. */
void cg_cpu_target(const char *cpu, char **name, char **features);
/* The width of cpu's vector registers in bytes: 64 with AVX-512, 32 with
 * AVX, else 16. */
int cg_cpu_vector_bytes(const char *cpu);
/* Initialises LLVM's native target once (codegen/module.c). */
void cg_init_native(void);

#ifdef __cplusplus
}
#endif

#endif
