/* jit.c: compiling a planned graph with ORC LLJIT.
 *
 * Ownership (LLVM 19 C API, llvm-c/LLJIT.h and Orc.h):
 * - LLVMOrcCreateLLJIT consumes the builder, even on failure.
 * - The process-symbol generator (so kernels can call cblas_sgemm and libm)
 *   is consumed by LLVMOrcJITDylibAddGenerator.  BLAS is also defined
 *   outright (blas_symbols): the generator sees only the global scope, which
 *   lacks OpenBLAS when librevc was loaded RTLD_LOCAL (as Python loads an
 *   extension module).  LLVMOrcAbsoluteSymbols takes the interned names;
 *   LLVMOrcJITDylibDefine takes the unit on success only.
 * - Modules are compiled to objects here (LLVMTargetMachineEmitToMemoryBuffer
 *   does not take the module; cg_module_free disposes of every module and
 *   context), or found in the object cache (objcache.c: a buffer of their
 *   own all the same); LLVMOrcLLJITAddObjectFile takes the object buffer, even on
 *   failure, so a buffer is disposed of here only when it was never added.
 * - Each compile thread makes and disposes of its own target machine: they
 *   are not shared between threads.  Each module has its own context, so
 *   optimising two modules at once is safe.
 * - The LLJIT owns the compiled code; disposing of it (cg_jit_free) frees the
 *   step function, so the step must not be called after that.
 * - Error messages from LLVMGetErrorMessage are disposed of with
 *   LLVMDisposeErrorMessage.
 * - The execution session reports errors it cannot return (a symbol that
 *   fails to materialise) to a reporter, by default printing "JIT session
 *   error" on stderr.  Library code never prints: session_error keeps the
 *   first message for the diagnostic of the lookup that then fails.  The
 *   reporter takes ownership of the error. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#include <llvm-c/LLJIT.h>

#include "comm.h" /* revc_comm_allreduce_sum, which kernels call */
#include "internal.h"

struct cg_jit {
	LLVMOrcLLJITRef jit;
	revc_abi_step *step;
	char session_error[512]; /* the first error the session reported, or "" */
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

/* One module to optimise and turn into an object file. */
typedef struct {
	LLVMModuleRef mod;
	char name[96];
	const char *cpu;
	bool optimize;
	bool step; /* the step's module, never optimised */
	const char *dump_dir;
	bool cache;              /* look for the object in the object cache, and keep it there */
	bool cached;             /* it came from there */
	LLVMMemoryBufferRef obj; /* the result, or NULL */
	char *err;               /* else why (malloc'd) */
} job;

typedef struct {
	job *jobs;
	int n;
	int next;
	pthread_mutex_t mu;
} queue;

static void compile(job *j)
{
	char *err = NULL;
	/* The step module only fills argument arrays and calls kernels (no
	 * arithmetic on reals): the fast instruction selector is enough for it,
	 * and takes half the time on its thousands of blocks. */
	LLVMCodeGenOptLevel level = j->step ? LLVMCodeGenLevelNone : LLVMCodeGenLevelAggressive;
	char key[CG_OBJCACHE_KEY];
	bool keyed = j->cache && cg_objcache_key(j->mod, j->cpu, (int)level, j->optimize, key);
	if (keyed && (j->obj = cg_objcache_load(key))) {
		j->cached = true;
		return;
	}
	LLVMTargetMachineRef tm = cg_target_machine(j->cpu, level, LLVMRelocDefault, &err);
	if (!tm) {
		if (asprintf(&j->err, "no target machine for CPU %s: %s", j->cpu ? j->cpu : "native", err ? err : "?") < 0)
			IR_DIE("out of memory");
		LLVMDisposeMessage(err);
		return;
	}
	if (j->optimize) {
		if (!cg_optimize(j->mod, tm, &err)) {
			j->err = strdup(err);
			LLVMDisposeErrorMessage(err);
			LLVMDisposeTargetMachine(tm);
			return;
		}
		if (j->dump_dir) {
			char path[4200];
			snprintf(path, sizeof path, "%s/%s.opt.ll", j->dump_dir, j->name);
			if (LLVMPrintModuleToFile(j->mod, path, &err)) {
				j->err = strdup(err ? err : path);
				LLVMDisposeMessage(err);
				LLVMDisposeTargetMachine(tm);
				return;
			}
		}
	} else {
		/* Not optimised, but for the CPU all the same. */
		char *triple = LLVMGetTargetMachineTriple(tm);
		LLVMSetTarget(j->mod, triple);
		LLVMDisposeMessage(triple);
		LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
		LLVMSetModuleDataLayout(j->mod, layout);
		LLVMDisposeTargetData(layout);
	}
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, j->mod, LLVMObjectFile, &err, &j->obj)) {
		j->err = strdup(err ? err : "cannot emit an object");
		LLVMDisposeMessage(err);
		j->obj = NULL;
	} else if (keyed)
		cg_objcache_store(key, j->obj);
	LLVMDisposeTargetMachine(tm);
}

static void *worker(void *arg)
{
	queue *q = arg;
	for (;;) {
		pthread_mutex_lock(&q->mu);
		int i = q->next++;
		pthread_mutex_unlock(&q->mu);
		if (i >= q->n)
			return NULL;
		compile(&q->jobs[i]);
	}
}

/* Optimises and compiles the jobs on `threads` threads (each module in its
 * own context, each thread with its own target machine). */
static void compile_all(job *jobs, int n, int threads)
{
	queue q = {jobs, n, 0, PTHREAD_MUTEX_INITIALIZER};
	pthread_t tid[CG_MAX_PARTS];
	int started = 0;
	for (int t = 1; t < threads && t < CG_MAX_PARTS; t++)
		if (pthread_create(&tid[started], NULL, worker, &q) == 0)
			started++;
	worker(&q);
	for (int t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
}

/* With REVC_PERF_MAP set, tells perf(1) where each kernel is, through
 * /tmp/perf-PID.map: "START SIZE NAME" per line, the name being the kernel's
 * signature.  Sizes are the distance to the next symbol. */
typedef struct {
	uint64_t addr;
	const char *key;
} map_entry;

static int by_addr(const void *a, const void *b)
{
	const map_entry *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void perf_map(LLVMOrcLLJITRef jit, const cg_module *m)
{
	if (!getenv("REVC_PERF_MAP") || m->ncache == 0)
		return;
	map_entry *s = calloc((size_t)m->ncache, sizeof *s);
	if (!s)
		return;
	int n = 0;
	for (int i = 0; i < m->ncache; i++) {
		LLVMOrcExecutorAddress addr;
		LLVMErrorRef e = LLVMOrcLLJITLookup(jit, &addr, LLVMGetValueName(m->cache[i].fn));
		if (e) {
			LLVMConsumeError(e);
			continue;
		}
		s[n++] = (map_entry){addr, m->cache[i].key};
	}
	qsort(s, (size_t)n, sizeof *s, by_addr);
	char path[64];
	snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "a");
	for (int i = 0; f && i < n; i++)
		fprintf(f, "%llx %llx %.200s\n", (unsigned long long)s[i].addr,
			(unsigned long long)(i + 1 < n ? s[i + 1].addr - s[i].addr : 4096), s[i].key);
	if (f)
		fclose(f);
	free(s);
}

static void report_session_error(void *ctx, LLVMErrorRef e)
{
	cg_jit *j = ctx;
	char *msg = LLVMGetErrorMessage(e); /* consumes e */
	if (!j->session_error[0])
		snprintf(j->session_error, sizeof j->session_error, "%s", msg);
	LLVMDisposeErrorMessage(msg);
}

/* Defines n symbols at absolute addresses in dylib (the interned names
 * are the unit's, taken by the define on success). */
static LLVMErrorRef define_absolute(LLVMOrcJITDylibRef dylib, LLVMOrcCSymbolMapPairs pairs, size_t n)
{
	LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(pairs, n);
	LLVMErrorRef e = LLVMOrcJITDylibDefine(dylib, mu);
	if (e)
		LLVMOrcDisposeMaterializationUnit(mu);
	return e;
}

/* Defines the BLAS functions kernels call (codegen/k_conv.c) and the
 * world's all-reduce (k_comm.c) at their
 * addresses in this process. */
static LLVMErrorRef blas_symbols(LLVMOrcLLJITRef jit, LLVMOrcJITDylibRef dylib)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} blas[] = {
		{"cblas_sgemm", (void (*)(void))cblas_sgemm},
		{"cblas_dgemm", (void (*)(void))cblas_dgemm},
		/* the world's sum (k_comm.c) */
		{"revc_comm_allreduce_sum", (void (*)(void))revc_comm_allreduce_sum},
		{"revc_comm_allreduce_begin", (void (*)(void))revc_comm_allreduce_begin},
		{"revc_comm_allreduce_end", (void (*)(void))revc_comm_allreduce_end},
	};
	enum { N = sizeof blas / sizeof blas[0] };
	LLVMOrcCSymbolMapPair pairs[N];
	for (int i = 0; i < N; i++)
		pairs[i] = (LLVMOrcCSymbolMapPair){LLVMOrcLLJITMangleAndIntern(jit, blas[i].name),
			{(LLVMOrcExecutorAddress)(uintptr_t)blas[i].fn,
				{LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0}}};
	return define_absolute(dylib, pairs, N);
}

/* Defines the kernels m calls from the kcache at their addresses. */
static LLVMErrorRef reused_symbols(LLVMOrcLLJITRef jit, LLVMOrcJITDylibRef dylib, const cg_module *m)
{
	if (m->nreused == 0)
		return NULL;
	LLVMOrcCSymbolMapPair *pairs = calloc((size_t)m->nreused, sizeof *pairs);
	if (!pairs)
		IR_DIE("out of memory");
	for (int i = 0; i < m->nreused; i++)
		pairs[i] = (LLVMOrcCSymbolMapPair){LLVMOrcLLJITMangleAndIntern(jit, m->reused[i].name),
			{(LLVMOrcExecutorAddress)m->reused[i].addr,
				{LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0}}};
	LLVMErrorRef e = define_absolute(dylib, pairs, (size_t)m->nreused);
	free(pairs);
	return e;
}

/* Adds the kernels this JIT compiled (those in m's parts) to o->kcache. */
static void add_to_kcache(cg_jit *j, const cg_module *m, cg_kcache *c)
{
	for (int i = 0; i < m->ncache; i++) {
		const cg_home *h = &m->cache[i].home;
		if (!h->m || h->m == m) /* reused, or internal to the step's module */
			continue;
		LLVMOrcExecutorAddress addr;
		LLVMErrorRef e = LLVMOrcLLJITLookup(j->jit, &addr, LLVMGetValueName(m->cache[i].fn));
		if (e) {
			LLVMConsumeError(e);
			continue;
		}
		char *k = cg_kcache_key(m, m->cache[i].key);
		cg_kcache_add(c, k, addr);
		free(k);
	}
}

bool cg_jit_cpu_ok(const char *cpu, ir_diags *d)
{
	char missing[64], host[64];
	if (!cg_cpu_known(cpu)) {
		ir_diag_add(d, (ir_pos){0}, "codegen: LLVM knows no CPU '%s'", cpu);
		return false;
	}
	if (!cg_cpu_runs_here(cpu, missing, sizeof missing)) {
		cg_host_cpu(host, sizeof host);
		ir_diag_add(d, (ir_pos){0}, "this host (%s) cannot run code for CPU %s: it lacks %s", host, cpu, missing);
		return false;
	}
	return true;
}

/* Compiles m (the step's module and its parts) for o->cpu on `threads`
 * threads, the objects from the object cache when `cache` (and not
 * dumping), and loads them into a new LLJIT in j (on failure, false
 * with diagnostics; cg_module_free(m) is the caller's either way). */
static bool load(cg_jit *j, cg_module *m, const cg_options *o, int threads, bool cache, cg_stats *stats,
	ir_diags *d)
{
	const char *name = m->prefix;
	job jobs[CG_MAX_PARTS + 1] = {0};
	int nj = 0;
	cache = cache && !o->dump_llvm && cg_objcache_on();
	jobs[nj++] = (job){.mod = m->mod, .cpu = o->cpu, .optimize = false, .step = m->nparts > 0, .dump_dir = o->dump_llvm,
		.cache = cache};
	snprintf(jobs[0].name, sizeof jobs[0].name, "%s", name);
	for (int i = 0; i < m->nparts; i++) {
		jobs[nj] = (job){.mod = m->part[i]->mod, .cpu = o->cpu, .optimize = o->optimize, .dump_dir = o->dump_llvm,
			.cache = cache};
		snprintf(jobs[nj].name, sizeof jobs[nj].name, "%s.part%d", name, i);
		nj++;
	}
	for (int i = 0; i < nj; i++)
		if (!cg_check_module(jobs[i].mod, o->dump_llvm, jobs[i].name, d))
			return false;
	double t1 = now();
	compile_all(jobs, nj, threads);
	if (stats) {
		stats->seconds_optimize += now() - t1;
		stats->objects += nj;
		for (int i = 0; i < nj; i++)
			stats->objects_cached += jobs[i].cached;
	}
	bool ok = true;
	for (int i = 0; i < nj; i++)
		if (!jobs[i].obj && ok) {
			ir_diag_add(d, (ir_pos){0}, "codegen: compiling %s failed: %s", jobs[i].name,
				jobs[i].err ? jobs[i].err : "?");
			ok = false;
		}
	LLVMErrorRef e = NULL;
	if (ok) {
		LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
		LLVMOrcJITTargetMachineBuilderRef jtmb;
		if ((e = LLVMOrcJITTargetMachineBuilderDetectHost(&jtmb))) {
			LLVMOrcDisposeLLJITBuilder(builder);
		} else {
			LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(builder, jtmb); /* takes jtmb */
			e = LLVMOrcCreateLLJIT(&j->jit, builder);                   /* takes builder */
		}
		if (!e)
			LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(j->jit),
				report_session_error, j);
	}
	LLVMOrcJITDylibRef main = NULL;
	if (ok && !e) {
		LLVMOrcDefinitionGeneratorRef gen;
		e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(j->jit),
			NULL, NULL);
		if (!e) {
			main = LLVMOrcLLJITGetMainJITDylib(j->jit);
			LLVMOrcJITDylibAddGenerator(main, gen); /* takes gen */
			e = blas_symbols(j->jit, main);
		}
		if (!e)
			e = reused_symbols(j->jit, main, m);
	}
	for (int i = 0; i < nj; i++) {
		if (ok && !e) {
			e = LLVMOrcLLJITAddObjectFile(j->jit, main, jobs[i].obj); /* takes the buffer */
			jobs[i].obj = NULL;
		}
		if (jobs[i].obj)
			LLVMDisposeMemoryBuffer(jobs[i].obj);
		free(jobs[i].err);
	}
	if (e)
		ok = llvm_error(d, "the JIT failed", e);
	if (!ok && j->session_error[0])
		ir_diag_add(d, (ir_pos){0}, "codegen: %s", j->session_error);
	return ok;
}

static cg_jit *new_jit(void)
{
	cg_jit *j = calloc(1, sizeof *j);
	if (!j)
		IR_DIE("out of memory");
	return j;
}

/* The address of symbol sym in j, or 0 with a diagnostic. */
static LLVMOrcExecutorAddress lookup(cg_jit *j, const char *sym, ir_diags *d)
{
	LLVMOrcExecutorAddress addr = 0;
	LLVMErrorRef e = LLVMOrcLLJITLookup(j->jit, &addr, sym);
	if (e) {
		llvm_error(d, "the JIT failed", e);
		if (j->session_error[0])
			ir_diag_add(d, (ir_pos){0}, "codegen: %s", j->session_error);
		return 0;
	}
	return addr;
}

cg_jit *cg_jit_kernels(cg_module *m, const cg_options *o, ir_diags *d)
{
	cg_jit *j = new_jit();
	/* The conv tune's candidates (k_conv_tune.c) are compiled once per
	 * shape, their times then kept in its own cache: not worth keeping. */
	if (!load(j, m, o, m->nparts > 0 ? m->nparts : 1, false, NULL, d)) {
		cg_jit_free(j);
		return NULL;
	}
	return j;
}

revc_abi_kernel *cg_jit_kernel(cg_jit *j, LLVMValueRef fn, ir_diags *d)
{
	return (revc_abi_kernel *)(uintptr_t)lookup(j, LLVMGetValueName(fn), d);
}

cg_jit *cg_jit_compile(const ir_graph *g, const cg_options *o, cg_stats *stats, ir_diags *d)
{
	cg_init_native();
	if (!cg_jit_cpu_ok(o->cpu, d) || !cg_conv_env_ok(d) || !cg_objcache_env_ok(d))
		return NULL;
	const char *name = o->name ? o->name : "revc";
	double t1 = now();
	cg_conv_tune_begin(g, o); /* timing kernels: counted as emitting */
	cg_module m;
	cg_module_init(&m, name, o->cpu, o->threads, stats);
	m.libm_math = o->libm_math;
	m.profile = o->profile;
	m.kcache = o->kcache;
	snprintf(m.kctx, sizeof m.kctx, "cpu=%s threads=%d libm=%d", o->cpu ? o->cpu : "native", m.threads,
		(int)o->libm_math);
	/* Kernels go to one module per compile thread; the step stays alone. */
	int threads = cg_module_parts_for(o->threads);
	cg_module_add_parts(&m, threads);
	bool ok = cg_emit_step(&m, g, name, d);
	cg_conv_tune_end();
	if (stats)
		stats->seconds_emit += now() - t1;
	cg_jit *j = new_jit();
	ok = ok && load(j, &m, o, threads, true, stats, d);
	double t2 = now();
	char sym[128];
	snprintf(sym, sizeof sym, "%s_step", name);
	LLVMOrcExecutorAddress addr = ok ? lookup(j, sym, d) : 0;
	if (addr)
		perf_map(j->jit, &m);
	if (addr && o->kcache)
		add_to_kcache(j, &m, o->kcache);
	cg_module_free(&m);
	if (!addr) {
		cg_jit_free(j);
		return NULL;
	}
	j->step = (revc_abi_step *)(uintptr_t)addr;
	if (stats)
		stats->seconds_jit += now() - t2;
	return j;
}

revc_abi_step *cg_jit_step(const cg_jit *j)
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
