/* step.c: the step function, generated over the schedule.
 *
 *     void NAME_step(uint8_t *arena, void **persist, void **inputs,
 *                    revc_abi_parallel *par, void *par_ctx)
 *
 * runs the graph's nodes in list order: an input is copied into its arena
 * slot; a fusion group (nodes sharing a group number, contiguous in the
 * schedule) or a lone elementwise node becomes one elementwise kernel; any
 * other node its op's kernel.  Each kernel gets its buffers in an args array
 * (arena slots at planned offsets, param and state storage from persist, an
 * in-place update's and an output's storage being its operand 0's) and is
 * handed to the parallel dispatcher with its extent, or called directly when
 * it is serial, or small (SMALL_BYTES of operands and result or less) and
 * its result does not depend on the split (an elementwise group, a kernel
 * with neither workspace nor finish: each element or channel is computed
 * by one thread either way).  Handing a few kilobytes to the other thread
 * costs more than it saves: fashion's 25 momentum updates took 2.4 µs
 * each on one thread and 270 µs split over two (a loaded 2-core AMD EPYC,
 * Zen 4).  Sources and outputs need no code.
 *
 * With cg_options.profile each call is preceded by a mark, the dispatcher
 * called with no kernel: par(par_ctx, NULL, label, k) for the step's k-th
 * call, and par(par_ctx, NULL, NULL, -1) ends the step (runtime/pool.c
 * times calls from mark to mark).  The label is "KIND\tBYTES\tFLOPS\tNODE":
 * the kernel's kind ("conv2d winograd2", "bn_stats", "group bn_norm+relu"),
 * the bytes of its operands and result, for convolutions their direct
 * FLOP count, and the node it runs (a group's first member) as the dump
 * after plan names it, with its scope: "%245 s2.u0.g". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Kernels moving no more than this many bytes run on the calling thread
 * (when their split does not matter). */
#define SMALL_BYTES (128 * 1024)

/* A finish with an extent is divided among the threads when its result
 * has this many bytes or more.  conv2d_dw's F(4x4) finish, G^T S G in
 * f64, took 16 µs a call on one thread for fashion's 7x7 filter
 * gradients (32x32x3x3, 36 KiB); its 28x28 ones (8x8x3x3) take a
 * microsecond, less than handing them out. */
#define FINISH_SPLIT_BYTES (16 * 1024)

typedef struct {
	cg_module *m;
	const ir_graph *g;
	LLVMBuilderRef b;
	LLVMValueRef fn, arena, persist, inputs, par, par_ctx, args;
	int *persist_index; /* by node id */
	int *input_index;   /* by node id */
	ir_users users;     /* the readers of each node */
	int nargs;
	int ncalls;         /* calls emitted so far */
} stepper;

/* Where value v lives at run time. */
static LLVMValueRef value_ptr(stepper *s, const ir_node *v)
{
	while (v->op == IR_OP_OUTPUT || ir_op_has(v->op, IR_OPF_UPD))
		v = v->in[0];
	LLVMValueRef idx;
	if (v->op == IR_OP_PARAM || v->op == IR_OP_STATE) {
		idx = LLVMConstInt(s->m->i64, (unsigned)s->persist_index[v->id], 0);
		LLVMValueRef slot = LLVMBuildGEP2(s->b, s->m->ptr, s->persist, &idx, 1, "");
		return LLVMBuildLoad2(s->b, s->m->ptr, slot, v->name);
	}
	IR_ASSERT(v->offset >= 0);
	idx = LLVMConstInt(s->m->i64, (unsigned long long)v->offset, 0);
	return LLVMBuildGEP2(s->b, LLVMInt8TypeInContext(s->m->ctx), s->arena, &idx, 1, "");
}

static void set_arg(stepper *s, int i, LLVMValueRef p)
{
	IR_ASSERT(i < s->nargs);
	LLVMValueRef idx = LLVMConstInt(s->m->i64, (unsigned)i, 0);
	LLVMBuildStore(s->b, p, LLVMBuildGEP2(s->b, s->m->ptr, s->args, &idx, 1, ""));
}

/* With profiling, the mark before the next call (label NULL: the end of
 * the step). */
static void emit_mark(stepper *s, const char *label)
{
	cg_module *m = s->m;
	if (!m->profile)
		return;
	LLVMValueRef l = label ? LLVMBuildGlobalStringPtr(s->b, label, "") : LLVMConstNull(m->ptr);
	LLVMValueRef a[4] = {s->par_ctx, LLVMConstNull(m->ptr), l,
		LLVMConstInt(m->i64, label ? (unsigned long long)s->ncalls : ~0ull, 1)};
	LLVMBuildCall2(s->b, m->par_ty, s->par, a, 4, "");
}

/* The bytes of n's operands and result. */
static int64_t node_bytes(const ir_node *n)
{
	int64_t bytes = ir_type_bytes(&n->type);
	for (int k = 0; k < n->nin; k++)
		bytes += ir_type_bytes(&n->in[k]->type);
	return bytes;
}

/* "%12 s0.u1.f": the node as the IR dump names it (ids are current after
 * plan), and its scope if it has one. */
static const char *node_where(const ir_node *n, char *buf, size_t len)
{
	snprintf(buf, len, "%%%d%s%s", n->id, n->scope ? " " : "", n->scope ? n->scope : "");
	return buf;
}

/* The profile label of a node's kernel (suffix: " finish" or ""). */
static void node_label(const ir_node *n, const char *suffix, char *buf, size_t len)
{
	int64_t bytes = node_bytes(n);
	const char *lowering = cg_conv_describe(n, NULL, NULL);
	double flops = 0;
	if (lowering && !*suffix) {
		ir_conv_geom c = ir_conv_geom_of(n);
		flops = 2.0 * (double)c.n * (double)(c.o * c.c * c.kh * c.kw) * (double)(c.ho * c.wo);
	}
	if (cg_bn_opens_dbeta(n))
		lowering = "+reduce_sum";
	char where[96];
	snprintf(buf, len, "%s%s%s%s\t%lld\t%.0f\t%s", ir_op_name(n->op), lowering && *lowering != '+' ? " " : "",
		lowering ? lowering : "", suffix, (long long)bytes, flops, node_where(n, where, sizeof where));
}

static void call_kernel(stepper *s, LLVMValueRef fn, int64_t extent, bool serial)
{
	cg_module *m = s->m;
	s->ncalls++;
	if (serial || m->threads == 1 || extent <= 1) {
		LLVMValueRef a[4] = {s->args, LLVMConstInt(m->i64, 0, 0),
			LLVMConstInt(m->i64, (unsigned long long)extent, 0), LLVMConstInt(m->i64, 0, 0)};
		LLVMBuildCall2(s->b, m->kernel_ty, fn, a, 4, "");
	} else {
		LLVMValueRef a[4] = {s->par_ctx, fn, s->args, LLVMConstInt(m->i64, (unsigned long long)extent, 0)};
		LLVMBuildCall2(s->b, m->par_ty, s->par, a, 4, "");
	}
	if (m->stats)
		m->stats->calls++;
	/* A block per call keeps instruction selection's blocks small. */
	LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(m->ctx, s->fn, "");
	LLVMBuildBr(s->b, next);
	LLVMPositionBuilderAtEnd(s->b, next);
}

/* The workspace slot of node n: its planned place. */
static LLVMValueRef workspace_ptr(stepper *s, const ir_node *n)
{
	IR_ASSERT(n->ws_offset >= 0);
	LLVMValueRef idx = LLVMConstInt(s->m->i64, (unsigned long long)n->ws_offset, 0);
	return LLVMBuildGEP2(s->b, LLVMInt8TypeInContext(s->m->ctx), s->arena, &idx, 1, "");
}

/* What a node's kernel computes besides the node: a convolution's
 * epilogue (cg_conv_epilogue_of) and prologue (cg_conv_opens_prologue),
 * or a bn_dgamma's dbeta; the nodes whose buffers the epilogue (or the
 * dbeta) adds, args[0 .. nargs). */
typedef struct {
	const cg_conv_epi *epi;
	const ir_node *args[CG_EPI_ARGS];
	int nargs;
	const cg_conv_pro *pro;
	const ir_node *norm; /* the prologue's bn_norm */
} fused;

/* n's kernel, with what f adds (f may be NULL). */
static void emit_node(stepper *s, const ir_node *n, const cg_op_impl *impl, const fused *f)
{
	static const fused none = {0};
	f = f ? f : &none;
	const cg_conv_epi *epi = f->epi;
	char key[1024];
	cg_node_signature(n, key, sizeof key);
	if (epi)
		cg_conv_epilogue_key(epi, key, sizeof key);
	if (f->pro)
		cg_conv_prologue_key(f->pro, key, sizeof key);
	if (cg_bn_opens_dbeta(n))
		snprintf(key + strlen(key), sizeof key - strlen(key), " +dbeta");
	bool fresh;
	cg_home home;
	LLVMValueRef fn = cg_kernel(s->m, key, &fresh, &home);
	if (fresh) {
		LLVMBasicBlockRef at = LLVMGetInsertBlock(s->b);
		cg_kb k;
		cg_kb_begin(&k, home.m, home.fn, n->type.dtype);
		k.epi = epi;
		k.pro = f->pro;
		impl->emit(&k, n);
		cg_kb_end(&k);
		LLVMPositionBuilderAtEnd(s->b, at);
	}
	set_arg(s, 0, value_ptr(s, n));
	for (int k = 0; k < n->nin; k++) /* a prologue's conv2d reads the bn_norm's x */
		set_arg(s, k + 1, value_ptr(s, k == 0 && f->pro ? f->norm->in[0] : n->in[k]));
	if (impl->workspace && impl->workspace(n) > 0)
		set_arg(s, n->nin + 1, workspace_ptr(s, n));
	for (int a = 0; a < f->nargs; a++)
		set_arg(s, n->nin + 2 + a, value_ptr(s, f->args[a]));
	if (f->pro) {
		IR_ASSERT(n->nin + 2 + CG_EPI_ARGS == CG_PRO_ARG);
		for (int a = 0; a < 3; a++) /* stats, gamma, beta */
			set_arg(s, CG_PRO_ARG + a, value_ptr(s, f->norm->in[a + 1]));
	}
	char label[256];
	if (s->m->profile) {
		node_label(n, "", label, sizeof label);
		emit_mark(s, label);
	}
	void (*finish)(cg_kb *, const ir_node *, int) = epi && epi->stats ? cg_conv_stats_finish
	                                              : epi && epi->dgamma ? cg_conv_dgamma_finish
	                                                                   : impl->finish;
	bool small = !finish && !(impl->workspace && impl->workspace(n) > 0) && node_bytes(n) <= SMALL_BYTES;
	int64_t extent = impl->extent(n);
	call_kernel(s, fn, extent, impl->serial || small);
	if (!finish)
		return;
	/* The threads whose partials the finish adds: an extent of 1 ran on
	 * thread 0 alone (call_kernel), the others' workspace unwritten (at
	 * batch 1 on two threads, conv2d_dw's finish once added it, and
	 * training went NaN). */
	int ran = extent <= 1 ? 1 : s->m->threads;
	char fkey[1100];
	snprintf(fkey, sizeof fkey, "%s finish/%d", key, ran);
	LLVMValueRef fin = cg_kernel(s->m, fkey, &fresh, &home);
	if (fresh) {
		LLVMBasicBlockRef at = LLVMGetInsertBlock(s->b);
		cg_kb k;
		cg_kb_begin(&k, home.m, home.fn, n->type.dtype);
		k.epi = epi;
		k.pro = f->pro;
		finish(&k, n, ran);
		cg_kb_end(&k);
		LLVMPositionBuilderAtEnd(s->b, at);
	}
	if (s->m->profile) {
		node_label(n, " finish", label, sizeof label);
		emit_mark(s, label);
	}
	int64_t fext = impl->finish == finish && impl->finish_extent ? impl->finish_extent(n) : 1;
	call_kernel(s, fin, fext, ir_type_bytes(&n->type) < FINISH_SPLIT_BYTES);
}

/* Is member n of the group read by a node outside it (or an output)? */
typedef struct {
	const ir_users *users;
	int first, last; /* the group's list positions */
} group_span;

static bool needed_outside(const ir_node *n, void *user)
{
	const group_span *gs = user;
	for (int k = gs->users->start[n->id]; k < gs->users->start[n->id + 1]; k++)
		if (gs->users->user[k]->id < gs->first || gs->users->user[k]->id > gs->last)
			return true;
	return false;
}

static void emit_group(stepper *s, int first, int last)
{
	cg_group grp = {0};
	for (int i = first; i <= last; i++) {
		IR_ASSERT(grp.n < CG_MAX_GROUP);
		grp.member[grp.n++] = s->g->nodes[i];
	}
	group_span gs = {&s->users, first, last};
	cg_group_bind(&grp, needed_outside, &gs);
	LLVMBasicBlockRef at = LLVMGetInsertBlock(s->b);
	LLVMValueRef fn = cg_group_kernel(s->m, &grp);
	LLVMPositionBuilderAtEnd(s->b, at);
	for (int b = 0; b < grp.nbuf; b++)
		set_arg(s, b, value_ptr(s, grp.buf[b]));
	int64_t bytes = 0;
	for (int b = 0; b < grp.nbuf; b++)
		bytes += ir_type_bytes(&grp.buf[b]->type);
	if (s->m->profile) {
		/* "group " and the members' distinct ops in order */
		char label[384] = "group";
		size_t end = strlen(label);
		for (int i = 0; i < grp.n; i++) {
			const char *op = ir_op_name(grp.member[i]->op);
			bool seen = false;
			for (int j = 0; j < i && !seen; j++)
				seen = grp.member[j]->op == grp.member[i]->op;
			if (!seen && end + strlen(op) + 2 < sizeof label - 140)
				end += (size_t)snprintf(label + end, sizeof label - end, "%c%s", end == 5 ? ' ' : '+', op);
		}
		char where[96];
		snprintf(label + end, sizeof label - end, "\t%lld\t0\t%s", (long long)bytes,
			node_where(grp.member[0], where, sizeof where));
		emit_mark(s, label);
	}
	call_kernel(s, fn, cg_group_extent(&grp), bytes <= SMALL_BYTES);
}

static void emit_input(stepper *s, const ir_node *n)
{
	LLVMValueRef idx = LLVMConstInt(s->m->i64, (unsigned)s->input_index[n->id], 0);
	LLVMValueRef src = LLVMBuildLoad2(s->b, s->m->ptr, LLVMBuildGEP2(s->b, s->m->ptr, s->inputs, &idx, 1, ""), "");
	LLVMBuildMemCpy(s->b, value_ptr(s, n), 1, src, 1,
		LLVMConstInt(s->m->i64, (unsigned long long)ir_type_bytes(&n->type), 0));
}

LLVMValueRef cg_emit_step(cg_module *m, const ir_graph *g, const char *name, ir_diags *d)
{
	stepper s = {.m = m, .g = g, .b = m->b};
	ir_users_build((ir_graph *)g, &s.users); /* renumbers: ids are list positions */
	s.persist_index = calloc((size_t)g->n + 1, sizeof(int));
	s.input_index = calloc((size_t)g->n + 1, sizeof(int));
	if (!s.persist_index || !s.input_index)
		IR_DIE("out of memory");
	ir_persist_slots(g, s.persist_index);
	ir_input_slots(g, s.input_index);
	s.nargs = 8;
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->nin + 2 > s.nargs)
			s.nargs = g->nodes[i]->nin + 2;
	s.nargs = s.nargs < CG_MAX_GROUP_ARGS ? CG_MAX_GROUP_ARGS : s.nargs;
	s.nargs = s.nargs < CG_PRO_ARG + 3 ? CG_PRO_ARG + 3 : s.nargs;

	LLVMTypeRef pt[5] = {m->ptr, m->ptr, m->ptr, m->ptr, m->ptr};
	LLVMTypeRef fty = LLVMFunctionType(m->vd, pt, 5, 0);
	char fname[128];
	snprintf(fname, sizeof fname, "%s_step", name);
	s.fn = LLVMAddFunction(m->mod, fname, fty);
	/* The step is a long list of calls with nothing to optimise: compile it
	 * as it is (optnone needs noinline), which keeps compile time linear. */
	static const char *const attrs[] = {"optnone", "noinline"};
	for (int k = 0; k < 2; k++) {
		unsigned kind = LLVMGetEnumAttributeKindForName(attrs[k], strlen(attrs[k]));
		LLVMAddAttributeAtIndex(s.fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(m->ctx, kind, 0));
	}
	s.arena = LLVMGetParam(s.fn, 0);
	s.persist = LLVMGetParam(s.fn, 1);
	s.inputs = LLVMGetParam(s.fn, 2);
	s.par = LLVMGetParam(s.fn, 3);
	s.par_ctx = LLVMGetParam(s.fn, 4);
	LLVMPositionBuilderAtEnd(s.b, LLVMAppendBasicBlockInContext(m->ctx, s.fn, "entry"));
	s.args = LLVMBuildArrayAlloca(s.b, m->ptr, LLVMConstInt(m->i64, (unsigned)s.nargs, 0), "args");

	bool ok = true;
	for (int i = 0; i < g->n && ok; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op == IR_OP_INPUT) {
			emit_input(&s, n);
			continue;
		}
		if (ir_op_has(n->op, IR_OPF_SRC) && n->op != IR_OP_CONST)
			continue;
		if (n->op == IR_OP_OUTPUT)
			continue;
		cg_conv_epi epi;
		cg_conv_pro pro;
		if (cg_conv_opens_epilogue(n)) { /* one kernel for the group */
			fused f = {.epi = &epi};
			int last = cg_conv_epilogue_of(g, i, &epi, f.args, &f.nargs);
			emit_node(&s, n, cg_op_impl_get(n), &f);
			i = last;
			continue;
		}
		if (cg_conv_opens_prologue(g, i, &pro)) { /* bn_norm, relu, conv2d and its epilogue: one kernel */
			const ir_node *c = g->nodes[i + 2];
			fused f = {.pro = &pro, .norm = n};
			int last = i + 2;
			if (last + 1 < g->n && g->nodes[last + 1]->group == c->group) {
				last = cg_conv_epilogue_of(g, i + 2, &epi, f.args, &f.nargs);
				f.epi = &epi;
			}
			emit_node(&s, c, cg_op_impl_get(c), &f);
			i = last;
			continue;
		}
		if (cg_bn_opens_dbeta(n)) { /* the reduce_sum after it, in its kernel */
			fused f = {.args = {g->nodes[i + 1]}, .nargs = 1};
			emit_node(&s, n, cg_op_impl_get(n), &f);
			i++;
			continue;
		}
		if (n->group >= 0 || cg_elementwise(n)) {
			int last = i;
			while (n->group >= 0 && last + 1 < g->n && g->nodes[last + 1]->group == n->group)
				last++;
			emit_group(&s, i, last);
			i = last;
			continue;
		}
		const cg_op_impl *impl = cg_op_impl_get(n);
		if (!impl) {
			char ref[80];
			ir_diag_add(d, n->pos, "codegen: %s (%s) has no native kernel", ir_node_ref(n, ref, sizeof ref),
				ir_op_name(n->op));
			ok = false;
			break;
		}
		emit_node(&s, n, impl, NULL);
	}
	emit_mark(&s, NULL);
	LLVMBuildRetVoid(s.b);
	free(s.persist_index);
	free(s.input_index);
	ir_users_free(&s.users);
	return ok ? s.fn : NULL;
}
