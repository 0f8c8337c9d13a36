/* aot.c: ahead-of-time emission, what `revc compile` does: a model as
 * native code in a shared library (libNAME.so) or a relocatable object
 * (NAME.o) holding the training step and the forward pass, with a C header
 * declaring its API.
 *
 * codegen emits the two steps into one object file; this file generates
 * the C description of the model (its persistent tensors, arena sizes,
 * where inputs and outputs live, in the step ABI's order of ir/slots.c) and
 * the NAME_* wrappers around runtime/revc_aot.h, compiles them with the
 * system C compiler, and links everything with revc's AOT runtime.  Only
 * NAME_* is exported from a library.  Outputs appear atomically, or not at
 * all.  Nothing here prints; the compiler and linker run as child
 * processes, whose messages go to the process's stderr. */
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools.h"

extern char **environ;

/* The prefix from "dir/libfoo.so" or "dir/foo.o": "foo". */
bool drv_aot_default_name(const char *out, char *name, size_t n, bool *shared)
{
	const char *base = strrchr(out, '/');
	base = base ? base + 1 : out;
	size_t len = strlen(base);
	if (len > 3 && strcmp(base + len - 3, ".so") == 0) {
		*shared = true;
		if (strncmp(base, "lib", 3) == 0)
			base += 3, len -= 3;
		len -= 3;
	} else if (len > 2 && strcmp(base + len - 2, ".o") == 0) {
		*shared = false;
		len -= 2;
	} else {
		return false;
	}
	snprintf(name, n, "%.*s", (int)len, base);
	return len > 0;
}

bool drv_aot_valid_prefix(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

/* Runs argv (no shell); its output goes to the process's stderr. */
static bool run(char *const *argv, ir_diags *d)
{
	pid_t pid;
	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0) {
		ir_diag_add(d, (ir_pos){0}, "cannot run %s: %s", argv[0], strerror(errno));
		return false;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		ir_diag_add(d, (ir_pos){0}, "%s failed (status %d)", argv[0], WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return false;
	}
	return true;
}

static int input_slot(const ir_graph *g, const int *slot, const char *name)
{
	for (int i = 0; i < g->n; i++)
		if (slot[i] >= 0 && strcmp(ir_node_str(g->nodes[i], IR_ATTR_NAME), name) == 0)
			return slot[i];
	return -1;
}

static int64_t output_offset(const ir_graph *g, const char *name)
{
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->op == IR_OP_OUTPUT && strcmp(ir_node_str(g->nodes[i], IR_ATTR_NAME), name) == 0)
			return g->nodes[i]->in[0]->offset;
	return -1;
}

/* The persistent tensors of the step, in persist order. */
static int write_tensors(FILE *f, const ir_graph *step, const int *slot)
{
	fprintf(f, "static const revc_aot_tensor tensors[] = {\n");
	int nt = 0;
	for (int i = 0; i < step->n; i++) {
		const ir_node *n = step->nodes[i];
		if (slot[i] < 0)
			continue;
		fprintf(f, "\t{\"%s\", %d, {", n->name, n->type.rank);
		for (int d = 0; d < n->type.rank; d++)
			fprintf(f, "%s%lld", d ? ", " : "", (long long)n->type.dim[d]);
		fprintf(f, "}, %d},\n", n->op == IR_OP_PARAM);
		nt++;
	}
	fprintf(f, "};\n\n");
	return nt;
}

/* For each of the forward pass's persistent tensors, in its persist order,
 * the index of the same tensor in the step's. */
static int write_forward_persist(FILE *f, const ir_graph *step, const int *slot, const ir_graph *fwd,
	const int *fslot)
{
	fprintf(f, "static const int forward_persist[] = {");
	int nf = 0;
	for (int i = 0; i < fwd->n; i++) {
		if (fslot[i] < 0)
			continue;
		int idx = -1;
		for (int j = 0; j < step->n && idx < 0; j++)
			if (slot[j] >= 0 && strcmp(step->nodes[j]->name, fwd->nodes[i]->name) == 0)
				idx = slot[j];
		IR_ASSERT(idx >= 0);
		fprintf(f, "%s%d", nf++ ? ", " : "", idx);
	}
	fprintf(f, "};\n\n");
	return nf;
}

static void write_wrappers(FILE *f, const char *p)
{
	fprintf(f, "typedef struct %s_model %s_model;\n\n", p, p);
	fprintf(f, "API %s_model *%s_new(uint64_t seed) { return (%s_model *)revc_aot_new(&model, seed); }\n", p, p, p);
	fprintf(f, "API int %s_load(%s_model *m, const char *dir) { return revc_aot_load((revc_aot_state *)m, dir); }\n", p, p);
	fprintf(f, "API int %s_save(%s_model *m, const char *dir) { return revc_aot_save((revc_aot_state *)m, dir); }\n", p, p);
	fprintf(f, "API float %s_train_step(%s_model *m, const float *x, const int32_t *labels, float lr)\n"
	           "{\n\treturn (float)revc_aot_train_step((revc_aot_state *)m, x, labels, lr);\n}\n", p, p);
	fprintf(f, "API void %s_forward(%s_model *m, const float *x, float *logits)\n"
	           "{\n\trevc_aot_forward((revc_aot_state *)m, x, logits);\n}\n", p, p);
	fprintf(f, "API const char *%s_error(const %s_model *m) { return revc_aot_error((const revc_aot_state *)m); }\n", p, p);
	fprintf(f, "API void %s_free(%s_model *m) { revc_aot_free((revc_aot_state *)m); }\n", p, p);
}

/* The C description of the model and the PREFIX_* wrappers. */
static void write_api(FILE *f, const char *p, const ir_graph *step, const ir_graph *fwd, const fe_spec *s)
{
	int *slot = calloc((size_t)step->n + 1, sizeof *slot), *fslot = calloc((size_t)fwd->n + 1, sizeof *fslot);
	int *in = calloc((size_t)step->n + 1, sizeof *in), *fin = calloc((size_t)fwd->n + 1, sizeof *fin);
	if (!slot || !fslot || !in || !fin)
		IR_DIE("out of memory");
	ir_persist_slots(step, slot);
	ir_persist_slots(fwd, fslot);
	ir_input_slots(step, in);
	ir_input_slots(fwd, fin);
	fprintf(f, "/* %s_api.c: generated by revc compile; do not edit. */\n#include <stdint.h>\n\n"
	           "#include \"revc_aot.h\"\n\n#define API __attribute__((visibility(\"default\")))\n\n", p);
	fprintf(f, "revc_abi_step %s_step, %s_forward_step;\nrevc_abi_parallel %s_serial;\n\n", p, p, p);
	int nt = write_tensors(f, step, slot);
	int nf = write_forward_persist(f, step, slot, fwd, fslot);
	fprintf(f, "static const revc_aot_model model = {\n\t\"%s\", 0, %d, tensors, %s_step, %s_forward_step, %s_serial,\n"
	           "\t%lldLL, %lldLL, %d, forward_persist, %lld, %lld, %lld,\n\t%d, %d, %d, %d, %d, %lldLL, %lldLL, %lldLL,\n};\n\n",
		p, nt, p, p, p, (long long)ps_arena_bytes(step), (long long)ps_arena_bytes(fwd), nf,
		(long long)s->batch, (long long)(s->input[0] * s->input[1] * s->input[2]), (long long)s->classes,
		input_slot(step, in, "x"), input_slot(step, in, "labels"), input_slot(step, in, "lr"),
		input_slot(fwd, fin, "x"), input_slot(fwd, fin, "labels"), (long long)output_offset(step, "loss"),
		(long long)output_offset(step, "logits"), (long long)output_offset(fwd, "logits"));
	write_wrappers(f, p);
	free(slot);
	free(fslot);
	free(in);
	free(fin);
}

static void write_header(FILE *f, const char *p, const ir_graph *step, const ir_graph *fwd, const fe_spec *s,
	const char *spec, const char *cpu)
{
	char guard[96];
	snprintf(guard, sizeof guard, "%s", p);
	for (char *c = guard; *c; c++)
		if (*c >= 'a' && *c <= 'z')
			*c = (char)(*c - 'a' + 'A');
	fprintf(f, "/* %s.h: the C API of a RevNet compiled by revc compile from %s.\n"
	           " * Link with the library (-l%s) and OpenBLAS (-lopenblas).  Tensors are NCHW\n"
	           " * float32; parameters are named and laid out as docs/model.md says. */\n", p, spec, p);
	char host[64];
	cg_host_cpu(host, sizeof host);
	if (!cg_cpu_is_native(cpu))
		fprintf(f, "/* Native code for CPU %s: it runs on machines with that CPU's instruction set. */\n", cpu);
	else
		fprintf(f, "/* Native code for the CPU it was compiled on (%s) and its features. */\n", host);
	fprintf(f, "#ifndef REVC_%s_API_H\n#define REVC_%s_API_H\n\n#include <stdint.h>\n\n", guard, guard);
	fprintf(f, "/* Bytes of working memory a training step / a forward pass uses. */\n");
	fprintf(f, "#define %s_ARENA_BYTES %lldLL\n#define %s_FORWARD_ARENA_BYTES %lldLL\n", guard,
		(long long)ps_arena_bytes(step), guard, (long long)ps_arena_bytes(fwd));
	fprintf(f, "/* Shapes: x is [BATCH, C, H, W], labels [BATCH], logits [BATCH, CLASSES]. */\n");
	fprintf(f, "#define %s_BATCH %lld\n#define %s_C %lld\n#define %s_H %lld\n#define %s_W %lld\n#define %s_CLASSES %lld\n\n",
		guard, (long long)s->batch, guard, (long long)s->input[0], guard, (long long)s->input[1], guard,
		(long long)s->input[2], guard, (long long)s->classes);
	fprintf(f, "typedef struct %s_model %s_model;\n\n", p, p);
	fprintf(f, "/* A model with parameters initialised from seed per docs/model.md (as revc init\n"
	           " * does); NULL when out of memory. */\n%s_model *%s_new(uint64_t seed);\n", p, p);
	fprintf(f, "/* Loads / saves every parameter, running statistic and momentum buffer as\n"
	           " * DIR/NAME.npy (a revc train checkpoint reads back); 0, or -1 with\n"
	           " * %s_error() saying why.  Saving replaces DIR atomically. */\n", p);
	fprintf(f, "int %s_load(%s_model *m, const char *dir);\nint %s_save(%s_model *m, const char *dir);\n", p, p, p, p);
	fprintf(f, "/* One momentum-SGD step on a batch (pixels in [0,1], labels 0..CLASSES-1);\n"
	           " * returns the batch's mean cross-entropy before the update. */\n");
	fprintf(f, "float %s_train_step(%s_model *m, const float *x, const int32_t *labels, float lr);\n", p, p);
	fprintf(f, "/* Logits of a batch, batch norm using the running statistics. */\n");
	fprintf(f, "void %s_forward(%s_model *m, const float *x, float *logits);\n", p, p);
	fprintf(f, "const char *%s_error(const %s_model *m);\nvoid %s_free(%s_model *m);\n\n#endif\n", p, p, p, p);
}

bool drv_aot_begin(drv_aot *a, const drv_aot_options *o, ir_diags *d)
{
	memset(a, 0, sizeof *a);
	a->o = *o;
	char name[64];
	if (!drv_aot_default_name(o->out, name, sizeof name, &a->shared))
		IR_DIE("drv_aot_begin: '%s' is not a libNAME.so or NAME.o", o->out);
	a->cg = (cg_options){.threads = 1, .optimize = true, .cpu = o->cpu, .dump_llvm = o->dump_llvm, .name = o->prefix};
	rt_temp_template(a->dir, sizeof a->dir, "/tmp/revc-compile", strlen("/tmp/revc-compile"), "-");
	snprintf(a->tmp_out, sizeof a->tmp_out, "%s.tmp.%d", o->out, (int)getpid());
	FILE *probe = fopen(a->tmp_out, "w");
	if (!probe) {
		ir_diag_add(d, (ir_pos){0}, "cannot write '%s': %s", o->out, strerror(errno));
		a->tmp_out[0] = 0;
		return false;
	}
	fclose(probe);
	rt_err e;
	if (o->header && !rt_atomic_open(&a->hdr, o->header, &e)) {
		drv_diag_rt(d, &e);
		return false;
	}
	return true;
}

/* Compiles the API source and links it with the object and the AOT
 * runtime into a->tmp_out. */
static bool link_output(drv_aot *a, ir_diags *d)
{
	/* The AOT runtime model libraries link: found from the prefix revc
	 * runs from, or the build tree (runtime/aot_path.c). */
	rt_aot_paths aot;
	rt_err e;
	if (!rt_aot_find(&aot, &e)) {
		drv_diag_rt(d, &e);
		return false;
	}
	const char *lib = aot.lib;
	char inc[RT_PATH_MAX + 2];
	snprintf(inc, sizeof inc, "-I%s", aot.include);
	char *cc[] = {"cc", "-O2", "-fPIC", "-std=c11", inc, "-c", a->api, "-o", a->api_o, NULL};
	if (!run(cc, d))
		return false;
	if (a->shared) {
		char vs[300];
		snprintf(vs, sizeof vs, "-Wl,--version-script=%s", a->map);
		char *ld[] = {"cc", "-shared", "-o", a->tmp_out, a->obj, a->api_o, (char *)lib, "-lopenblas", "-lm", vs, NULL};
		return run(ld, d);
	}
	char *ld[] = {"ld", "-r", "-o", a->tmp_out, a->obj, a->api_o, "--whole-archive", (char *)lib, "--no-whole-archive",
		NULL};
	return run(ld, d);
}

/* The object, the API source and the export map in a->dir, then the link. */
static bool build(drv_aot *a, const fe_spec *s, const ir_graph *step, const ir_graph *fwd, ir_diags *d)
{
	if (!mkdtemp(a->dir)) {
		ir_diag_add(d, (ir_pos){0}, "cannot make a temporary directory: %s", strerror(errno));
		return false;
	}
	a->made = true;
	snprintf(a->obj, sizeof a->obj, "%s/model.o", a->dir);
	snprintf(a->api, sizeof a->api, "%s/api.c", a->dir);
	snprintf(a->api_o, sizeof a->api_o, "%s/api.o", a->dir);
	snprintf(a->map, sizeof a->map, "%s/exports.map", a->dir);
	if (!cg_emit_object(step, fwd, &a->cg, a->obj, d))
		return false;
	FILE *f = fopen(a->api, "w"), *mf = fopen(a->map, "w");
	if (!f || !mf) {
		if (f)
			fclose(f);
		if (mf)
			fclose(mf);
		ir_diag_add(d, (ir_pos){0}, "cannot write in %s", a->dir);
		return false;
	}
	const char *p = a->o.prefix;
	write_api(f, p, step, fwd, s);
	fprintf(mf, "{ global: %s_new; %s_load; %s_save; %s_train_step; %s_forward; %s_error; %s_free; local: *; };\n",
		p, p, p, p, p, p, p);
	fclose(f);
	fclose(mf);
	return link_output(a, d);
}

/* Whether g sums over processes (passes/allreduce.c): a model library has
 * no world to call (codegen/k_comm.c), so such a step is refused. */
static bool distributed(const ir_graph *g, ir_diags *d)
{
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->op == IR_OP_ALLREDUCE || g->nodes[i]->op == IR_OP_ALLREDUCE_START) {
			const ir_node *n = g->nodes[i];
			ir_diag_add(d, n->pos, "a data-parallel step (allreduce, as under mpirun or --ranks) cannot be compiled "
				"into a model library: it runs on one process; train it with revc train");
			return true;
		}
	return false;
}

/* Plans the step and the forward pass for the code generator's
 * workspace; NULL in *step or *fwd with errors in d. */
static void plan(drv_aot *a, const revc_model *m, ir_graph **step, ir_graph **fwd, ir_diags *d)
{
	ps_ctx ctx, fctx;
	ps_ctx_init(&ctx);
	ps_ctx_init(&fctx);
	ctx.strategy = a->o.strategy;
	ctx.decisions = a->o.decisions;
	fctx.optimizer = false;
	ctx.workspace = fctx.workspace = cg_workspace;
	ctx.workspace_user = fctx.workspace_user = &a->cg;
	ps_options eval = drv_eval_passes;
	*fwd = NULL;
	const fe_spec *s = &m->spec.spec;
	if (!(*step = m->is_spec ? drv_spec_plan(s, IR_F32, FE_LOWER_TRAIN, &ctx, &(ps_options){0})
				 : drv_ir_plan(m, DRV_STEP, &ctx, &(ps_options){0})))
		drv_diags_append(d, &ctx.diags);
	else if (!(*fwd = m->is_spec ? drv_spec_plan(s, IR_F32, FE_LOWER_EVAL, &fctx, &eval)
				     : drv_ir_plan(m, DRV_EVAL, &fctx, &eval)))
		drv_diags_append(d, &fctx.diags);
	if (*step && distributed(*step, d))
		*fwd = NULL;
	ps_ctx_free(&ctx);
	ps_ctx_free(&fctx);
}

bool drv_aot_emit(drv_aot *a, const revc_model *m, ir_diags *d)
{
	const fe_spec *s = &m->spec.spec;
	ir_graph *step, *fwd;
	plan(a, m, &step, &fwd, d);
	bool ok = fwd && build(a, s, step, fwd, d);
	if (ok && rename(a->tmp_out, a->o.out) != 0) {
		ir_diag_add(d, (ir_pos){0}, "cannot write '%s': %s", a->o.out, strerror(errno));
		ok = false;
	}
	if (ok)
		a->tmp_out[0] = 0; /* it is the output now */
	if (ok && a->o.header) {
		rt_err e;
		write_header(a->hdr.f, a->o.prefix, step, fwd, s, a->o.source, a->o.cpu);
		if (!rt_atomic_commit(&a->hdr, &e)) {
			drv_diag_rt(d, &e);
			unlink(a->o.out);
			ok = false;
		}
	}
	if (ok)
		a->arena_bytes = ps_arena_bytes(step);
	ir_graph_free(step);
	ir_graph_free(fwd);
	return ok;
}

void drv_aot_end(drv_aot *a)
{
	if (a->tmp_out[0])
		unlink(a->tmp_out);
	rt_atomic_abort(&a->hdr); /* nothing left to do after a commit */
	if (a->made) {
		unlink(a->obj);
		unlink(a->api);
		unlink(a->api_o);
		unlink(a->map);
		rmdir(a->dir);
	}
	memset(a, 0, sizeof *a);
}
