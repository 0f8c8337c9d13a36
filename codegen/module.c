/* module.c: the LLVM module being built, its kernel cache, and the target
 * machine and optimisation pipeline.
 *
 * Ownership (LLVM C API): the module's context belongs to an ORC
 * thread-safe context, which cg_module holds one reference to and disposes
 * of in cg_module_free.  The module and the builder are cg_module's.
 * Target machines made by cg_target_machine belong to the caller. */
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "internal.h"

void cg_module_init(cg_module *m, const char *name, const char *cpu, int threads, cg_stats *stats)
{
	memset(m, 0, sizeof *m);
	m->tsctx = LLVMOrcCreateNewThreadSafeContext();
	m->ctx = LLVMOrcThreadSafeContextGetContext(m->tsctx);
	m->mod = LLVMModuleCreateWithNameInContext(name, m->ctx);
	m->b = LLVMCreateBuilderInContext(m->ctx);
	m->ptr = LLVMPointerTypeInContext(m->ctx, 0);
	m->i1 = LLVMInt1TypeInContext(m->ctx);
	m->i32 = LLVMInt32TypeInContext(m->ctx);
	m->i64 = LLVMInt64TypeInContext(m->ctx);
	m->f32 = LLVMFloatTypeInContext(m->ctx);
	m->f64 = LLVMDoubleTypeInContext(m->ctx);
	m->vd = LLVMVoidTypeInContext(m->ctx);
	LLVMTypeRef kp[4] = {m->ptr, m->i64, m->i64, m->i64};
	m->kernel_ty = LLVMFunctionType(m->vd, kp, 4, 0);
	LLVMTypeRef pp[4] = {m->ptr, m->ptr, m->ptr, m->i64};
	m->par_ty = LLVMFunctionType(m->vd, pp, 4, 0);
	m->threads = threads > 0 ? threads : 1;
	m->stats = stats;
	snprintf(m->prefix, sizeof m->prefix, "%s", name);
	m->cpu = cpu;
	m->vec_bytes = cg_cpu_vector_bytes(cpu);
}

int cg_module_parts_for(int threads)
{
	return threads > 1 ? (threads < CG_MAX_PARTS ? threads : CG_MAX_PARTS) : 1;
}

void cg_module_add_parts(cg_module *m, int n)
{
	IR_ASSERT(n >= 0 && n <= CG_MAX_PARTS);
	for (int i = 0; i < n; i++) {
		cg_module *p = malloc(sizeof *p);
		if (!p)
			IR_DIE("out of memory");
		char name[80];
		snprintf(name, sizeof name, "%s.part%d", m->prefix, i);
		cg_module_init(p, name, m->cpu, m->threads, m->stats);
		p->libm_math = m->libm_math;
		m->part[m->nparts++] = p;
	}
}

void cg_module_free(cg_module *m)
{
	for (int i = 0; i < m->nparts; i++) {
		cg_module_free(m->part[i]);
		free(m->part[i]);
	}
	for (int i = 0; i < m->ncache; i++)
		free(m->cache[i].key);
	free(m->cache);
	free(m->reused);
	if (m->b)
		LLVMDisposeBuilder(m->b);
	if (m->mod)
		LLVMDisposeModule(m->mod);
	if (m->tsctx)
		LLVMOrcDisposeThreadSafeContext(m->tsctx);
	memset(m, 0, sizeof *m);
}

LLVMValueRef cg_extern(cg_module *m, const char *name, LLVMTypeRef ty)
{
	LLVMValueRef f = LLVMGetNamedFunction(m->mod, name);
	return f ? f : LLVMAddFunction(m->mod, name, ty);
}

/* About how long the kernel with signature key takes to optimise and
 * compile, in tenths of the typical elementwise group's time (~15 ms on a
 * Zen 3 core), from fashion's kernels timed alone: a forward convolution
 * (direct or Winograd) 7 to 15 times a group's,
 * more with an epilogue; its input and weight gradients about 5 and 4
 * times; the rest, finish kernels among them, one or two.  Only the parts'
 * balance depends on it, never the code. */
static int compile_cost(const char *key)
{
	if (strstr(key, " finish/"))
		return 15;
	if (!strncmp(key, "conv2d_dx ", 10))
		return 55;
	if (!strncmp(key, "conv2d_dw ", 10))
		return 40;
	if (!strncmp(key, "conv2d ", 7))
		return strstr(key, " +") ? 120 : 75;
	return 10;
}

LLVMValueRef cg_kernel(cg_module *m, const char *key, bool *fresh, cg_home *home)
{
	for (int i = 0; i < m->ncache; i++)
		if (strcmp(m->cache[i].key, key) == 0) {
			*fresh = false;
			*home = m->cache[i].home;
			return m->cache[i].fn;
		}
	if (m->ncache == m->capcache) {
		m->capcache = m->capcache ? 2 * m->capcache : 64;
		m->cache = realloc(m->cache, (size_t)m->capcache * sizeof *m->cache);
		if (!m->cache)
			IR_DIE("out of memory");
	}
	char name[96];
	snprintf(name, sizeof name, "%s_k%d", m->prefix, m->ncache);
	LLVMValueRef fn = LLVMAddFunction(m->mod, name, m->kernel_ty);
	uint64_t addr = 0;
	if (m->kcache) {
		char *k = cg_kcache_key(m, key);
		addr = cg_kcache_find(m->kcache, k);
		free(k);
	}
	if (addr) {
		/* Compiled before: the JIT defines name at that address. */
		if (m->nreused == m->capreused) {
			m->capreused = m->capreused ? 2 * m->capreused : 32;
			m->reused = realloc(m->reused, (size_t)m->capreused * sizeof *m->reused);
			if (!m->reused)
				IR_DIE("out of memory");
		}
		m->reused[m->nreused] = (cg_reused){.addr = addr};
		snprintf(m->reused[m->nreused].name, sizeof m->reused[m->nreused].name, "%s", name);
		m->nreused++;
		*home = (cg_home){NULL, NULL};
		if (m->stats)
			m->stats->reused++;
	} else if (m->nparts == 0) {
		LLVMSetLinkage(fn, LLVMInternalLinkage);
		*home = (cg_home){m, fn};
	} else {
		/* The body goes to the part with the least work so far; the step
		 * calls it by name. */
		int best = 0;
		for (int i = 1; i < m->nparts; i++)
			if (m->part_cost[i] < m->part_cost[best])
				best = i;
		m->part_cost[best] += compile_cost(key);
		cg_module *p = m->part[best];
		*home = (cg_home){p, LLVMAddFunction(p->mod, name, p->kernel_ty)};
	}
	m->cache[m->ncache].key = strdup(key);
	m->cache[m->ncache].fn = fn;
	m->cache[m->ncache].home = *home;
	if (!m->cache[m->ncache].key)
		IR_DIE("out of memory");
	m->ncache++;
	if (m->stats)
		m->stats->kernels++;
	*fresh = addr == 0;
	return fn;
}

/* ---- the target ---------------------------------------------------------- */

void cg_init_native(void)
{
	static bool done;
	if (done)
		return;
	LLVMInitializeNativeTarget();
	LLVMInitializeNativeAsmPrinter();
	done = true;
}

LLVMTargetMachineRef cg_target_machine(const char *cpu, LLVMCodeGenOptLevel level, LLVMRelocMode reloc,
	char **err)
{
	cg_init_native();
	char *triple = LLVMGetDefaultTargetTriple();
	LLVMTargetRef target;
	if (LLVMGetTargetFromTriple(triple, &target, err)) {
		LLVMDisposeMessage(triple);
		return NULL;
	}
	char *name, *features;
	cg_cpu_target(cpu, &name, &features);
	LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, name, features, level, reloc,
		LLVMCodeModelDefault);
	LLVMDisposeMessage(triple);
	LLVMDisposeMessage(name);
	LLVMDisposeMessage(features);
	return tm;
}

bool cg_optimize(LLVMModuleRef mod, LLVMTargetMachineRef tm, char **err)
{
	/* The target machine matters: without it the vectorisers do nothing. */
	char *triple = LLVMGetTargetMachineTriple(tm);
	LLVMSetTarget(mod, triple);
	LLVMDisposeMessage(triple);
	LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
	LLVMSetModuleDataLayout(mod, layout);
	LLVMDisposeTargetData(layout);
	LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
	LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
	LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
	/* Unrolling multiplies code and compile time; the loops here are
	 * memory-bound or call BLAS, and gain little from it. */
	LLVMPassBuilderOptionsSetLoopUnrolling(opts, 0);
	LLVMErrorRef e = LLVMRunPasses(mod, "default<O3>", tm, opts);
	LLVMDisposePassBuilderOptions(opts);
	if (e) {
		*err = LLVMGetErrorMessage(e);
		return false;
	}
	return true;
}

bool cg_check_module(LLVMModuleRef mod, const char *dump_dir, const char *name, ir_diags *d)
{
	if (dump_dir && !cg_dump_module(mod, dump_dir, name, d))
		return false;
	char *err = NULL;
	if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &err)) {
		ir_diag_add(d, (ir_pos){0}, "codegen: the generated module %s is invalid: %s", name, err);
		LLVMDisposeMessage(err);
		return false;
	}
	LLVMDisposeMessage(err);
	return true;
}

bool cg_dump_module(LLVMModuleRef mod, const char *dir, const char *name, ir_diags *d)
{
	char path[4096], *err = NULL;
	snprintf(path, sizeof path, "%s/%s.ll", dir, name);
	if (LLVMPrintModuleToFile(mod, path, &err)) {
		ir_diag_add(d, (ir_pos){0}, "cannot write '%s': %s", path, err ? err : "?");
		LLVMDisposeMessage(err);
		return false;
	}
	return true;
}
