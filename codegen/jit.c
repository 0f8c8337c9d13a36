/* jit.c: compiling a planned graph with ORC LLJIT.
 *
 * Ownership (LLVM 19 C API, llvm-c/LLJIT.h and Orc.h):
 * - LLVMOrcCreateLLJIT consumes the builder, even on failure.
 * - The process-symbol generator (so kernels can call cblas_sgemm and libm)
 *   is consumed by LLVMOrcJITDylibAddGenerator.
 * - LLVMOrcCreateNewThreadSafeModule takes the module; the thread-safe module
 *   is consumed by LLVMOrcLLJITAddLLVMIRModule even when that fails, so it
 *   is never disposed of here after the call.  The thread-safe context is
 *   reference-counted: cg_module_free drops ours, the JIT keeps its own.
 * - The target machine for optimisation is ours and disposed of here.
 * - The LLJIT owns the compiled code; disposing of it (cg_jit_free) frees the
 *   step function, so the step must not be called after that.
 * - Error messages from LLVMGetErrorMessage are disposed of with
 *   LLVMDisposeErrorMessage. */
#include <stdlib.h>
#include <time.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/LLJIT.h>

#include "internal.h"

struct cg_jit {
	LLVMOrcLLJITRef jit;
	cg_step_fn step;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool llvm_error(ir_diags *d, const char *what, LLVMErrorRef e)
{
	char *msg = LLVMGetErrorMessage(e);
	ir_diag_add(d, (ir_pos){0}, "codegen: %s: %s", what, msg);
	LLVMDisposeErrorMessage(msg);
	return false;
}

/* Emits, verifies, dumps and optimises g's module; the module stays in m. */
bool cg_build_module(cg_module *m, const ir_graph *g, const cg_options *o, ir_diags *d)
{
	double t0 = now();
	const char *name = o->name ? o->name : "revc";
	if (!cg_emit_step(m, g, name, d))
		return false;
	char *err = NULL;
	if (LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &err)) {
		ir_diag_add(d, (ir_pos){0}, "codegen: the generated module is invalid: %s", err);
		LLVMDisposeMessage(err);
		return false;
	}
	LLVMDisposeMessage(err);
	if (o->dump_llvm && !cg_dump_module(m->mod, o->dump_llvm, name, d))
		return false;
	double t1 = now();
	if (m->stats)
		m->stats->seconds_emit += t1 - t0;
	if (o->optimize) {
		LLVMTargetMachineRef tm = cg_host_machine(LLVMCodeGenLevelAggressive, LLVMRelocDefault, &err);
		if (!tm) {
			ir_diag_add(d, (ir_pos){0}, "codegen: no target for this host: %s", err ? err : "?");
			LLVMDisposeMessage(err);
			return false;
		}
		bool ok = cg_optimize(m->mod, tm, &err);
		LLVMDisposeTargetMachine(tm);
		if (!ok) {
			ir_diag_add(d, (ir_pos){0}, "codegen: optimisation failed: %s", err);
			LLVMDisposeErrorMessage(err);
			return false;
		}
		char opt[256];
		snprintf(opt, sizeof opt, "%s.opt", name);
		if (o->dump_llvm && !cg_dump_module(m->mod, o->dump_llvm, opt, d))
			return false;
	}
	if (m->stats)
		m->stats->seconds_optimize += now() - t1;
	return true;
}

cg_jit *cg_jit_compile(const ir_graph *g, const cg_options *o, cg_stats *stats, ir_diags *d)
{
	cg_init_native();
	cg_module m;
	cg_module_init(&m, o->name ? o->name : "revc", o->threads, stats);
	if (!cg_build_module(&m, g, o, d)) {
		cg_module_free(&m);
		return NULL;
	}
	double t0 = now();
	cg_jit *j = calloc(1, sizeof *j);
	if (!j)
		IR_DIE("out of memory");
	LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
	LLVMOrcJITTargetMachineBuilderRef jtmb;
	LLVMErrorRef e = LLVMOrcJITTargetMachineBuilderDetectHost(&jtmb);
	if (e) {
		LLVMOrcDisposeLLJITBuilder(builder);
		goto fail_e;
	}
	LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(builder, jtmb); /* takes jtmb */
	if ((e = LLVMOrcCreateLLJIT(&j->jit, builder)))              /* takes builder */
		goto fail_e;
	LLVMOrcDefinitionGeneratorRef gen;
	if ((e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(j->jit),
		NULL, NULL)))
		goto fail_e;
	LLVMOrcJITDylibRef main = LLVMOrcLLJITGetMainJITDylib(j->jit);
	LLVMOrcJITDylibAddGenerator(main, gen); /* takes gen */
	LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(cg_module_take(&m), m.tsctx);
	if ((e = LLVMOrcLLJITAddLLVMIRModule(j->jit, main, tsm))) /* takes tsm, even on failure */
		goto fail_e;
	char sym[128];
	snprintf(sym, sizeof sym, "%s_step", o->name ? o->name : "revc");
	LLVMOrcExecutorAddress addr;
	if ((e = LLVMOrcLLJITLookup(j->jit, &addr, sym)))
		goto fail_e;
	j->step = (cg_step_fn)(uintptr_t)addr;
	cg_module_free(&m);
	if (stats)
		stats->seconds_jit += now() - t0;
	return j;
fail_e:
	llvm_error(d, "the JIT failed", e);
	cg_module_free(&m);
	cg_jit_free(j);
	return NULL;
}

cg_step_fn cg_jit_step(const cg_jit *j)
{
	return j->step;
}

void cg_jit_free(cg_jit *j)
{
	if (!j)
		return;
	if (j->jit) {
		LLVMErrorRef e = LLVMOrcDisposeLLJIT(j->jit);
		if (e)
			LLVMConsumeError(e);
	}
	free(j);
}
