/* object.c: ahead-of-time compilation: one object file holding a model's
 * training step NAME_step, its evaluation forward NAME_forward_step (both
 * with the step ABI of runtime/revc_abi.h) and NAME_serial, a dispatcher that runs a
 * kernel on the calling thread (a library has no thread pool of its own;
 * BLAS still uses every core).  The kernels are shared between the two steps
 * through the cache.  driver/aot.c adds the C API around it.
 *
 * Ownership: the target machine is ours; LLVMTargetMachineEmitToFile does
 * not take the module, which cg_module_free disposes of.  Emitting changes
 * the module, so it is never also handed to a JIT. */
#include <stdio.h>
#include <string.h>
#include <time.h>


#include "internal.h"

/* void NAME_serial(void *ctx, kernel fn, void **args, int64_t n): fn(args, 0, n, 0) */
static void emit_serial(cg_module *m, const char *name)
{
	char sym[160];
	snprintf(sym, sizeof sym, "%s_serial", name);
	LLVMValueRef f = LLVMAddFunction(m->mod, sym, m->par_ty);
	LLVMPositionBuilderAtEnd(m->b, LLVMAppendBasicBlockInContext(m->ctx, f, "entry"));
	LLVMValueRef a[4] = {LLVMGetParam(f, 2), LLVMConstInt(m->i64, 0, 0), LLVMGetParam(f, 3),
		LLVMConstInt(m->i64, 0, 0)};
	LLVMBuildCall2(m->b, m->kernel_ty, LLVMGetParam(f, 1), a, 4, "");
	LLVMBuildRetVoid(m->b);
}

bool cg_emit_object(const ir_graph *step, const ir_graph *eval, const cg_options *o, const char *path,
	ir_diags *d)
{
	cg_init_native();
	if (!cg_cpu_known(o->cpu)) {
		ir_diag_add(d, (ir_pos){0}, "codegen: LLVM knows no CPU '%s'", o->cpu);
		return false;
	}
	const char *name = o->name ? o->name : "revc";
	cg_module m;
	cg_module_init(&m, name, o->cpu, 1, NULL);
	m.libm_math = o->libm_math;
	char fwd[160];
	snprintf(fwd, sizeof fwd, "%s_forward", name);
	bool ok = cg_emit_step(&m, step, name, d) != NULL && (!eval || cg_emit_step(&m, eval, fwd, d) != NULL);
	if (ok) {
		emit_serial(&m, name);
		ok = cg_check_module(m.mod, o->dump_llvm, name, d);
	}
	char *err = NULL;
	LLVMTargetMachineRef tm = ok ? cg_target_machine(o->cpu, LLVMCodeGenLevelAggressive, LLVMRelocPIC, &err) : NULL;
	if (ok && !tm) {
		ir_diag_add(d, (ir_pos){0}, "codegen: no target machine for CPU %s: %s", o->cpu ? o->cpu : "native",
			err ? err : "?");
		LLVMDisposeMessage(err);
		ok = false;
	}
	if (ok && o->optimize && !cg_optimize(m.mod, tm, &err)) {
		ir_diag_add(d, (ir_pos){0}, "codegen: optimisation failed: %s", err);
		LLVMDisposeErrorMessage(err);
		ok = false;
	}
	if (ok && o->dump_llvm) {
		char opt[200];
		snprintf(opt, sizeof opt, "%s.opt", name);
		ok = cg_dump_module(m.mod, o->dump_llvm, opt, d);
	}
	if (ok && LLVMTargetMachineEmitToFile(tm, m.mod, (char *)path, LLVMObjectFile, &err)) {
		ir_diag_add(d, (ir_pos){0}, "codegen: cannot write '%s': %s", path, err ? err : "?");
		LLVMDisposeMessage(err);
		ok = false;
	}
	if (tm)
		LLVMDisposeTargetMachine(tm);
	cg_module_free(&m);
	return ok;
}
