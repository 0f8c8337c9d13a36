/* manager.c: runs the pipeline.  The only place that dumps, verifies
 * between passes, and stops early; passes themselves never print.
 *
 * Dumps go to ps_options.dump_out, or, with a dump directory, to numbered
 * files NN-pass.ir (NN counts the passes that ran, from 01; TAG-NN-pass.ir
 * with a dump tag), each written to a temporary name and renamed so no
 * half-written dump is left behind. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

void ps_ctx_init(ps_ctx *ctx)
{
	memset(ctx, 0, sizeof *ctx);
	ir_diags_init(&ctx->diags);
	ctx->strategy = PS_STRATEGY_DEFAULT;
	ctx->optimizer = true;
	ctx->momentum = 0.9;
	ctx->weight_decay = 2e-4;
	ctx->beta1 = 0.9;
	ctx->beta2 = 0.999;
	ctx->eps = 1e-8;
}

static const char *const strategies[] = {
	[PS_STORE] = "store",
	[PS_REVNET] = "revnet",
	[PS_CHECKPOINT] = "checkpoint",
	[PS_AUTO] = "auto",
};
_Static_assert(sizeof strategies / sizeof strategies[0] == PS_STRATEGY_COUNT, "strategy names");

const char *ps_strategy_name(ps_strategy s)
{
	return strategies[s];
}

bool ps_strategy_lookup(const char *name, ps_strategy *out)
{
	for (int i = 0; i < PS_STRATEGY_COUNT; i++)
		if (strcmp(strategies[i], name) == 0) {
			*out = (ps_strategy)i;
			return true;
		}
	return false;
}

void ps_ctx_free(ps_ctx *ctx)
{
	ir_diags_free(&ctx->diags);
}

bool ps_list_next(const char **p, const char **item, size_t *len)
{
	const char *s = *p;
	if (!s || !*s)
		return false;
	const char *comma = strchr(s, ',');
	*item = s;
	*len = comma ? (size_t)(comma - s) : strlen(s);
	*p = comma ? comma + 1 : NULL;
	return true;
}

bool ps_list_has(const char *list, const char *name, size_t n)
{
	const char *item;
	size_t len;
	while (ps_list_next(&list, &item, &len))
		if (len == n && memcmp(item, name, n) == 0)
			return true;
	return false;
}

static bool known(const char *name)
{
	return ps_pass_lookup(name) != NULL;
}

bool ps_options_check(const ps_options *opts, char *bad, size_t badlen)
{
	if (opts->dump_after && strcmp(opts->dump_after, "all") != 0 && !known(opts->dump_after)) {
		snprintf(bad, badlen, "%s", opts->dump_after);
		return false;
	}
	if (opts->stop_after && !known(opts->stop_after)) {
		snprintf(bad, badlen, "%s", opts->stop_after);
		return false;
	}
	const char *p = opts->only, *item;
	size_t len;
	while (ps_list_next(&p, &item, &len)) {
		snprintf(bad, badlen, "%.*s", (int)len, item);
		if (!known(bad))
			return false;
	}
	return true;
}

static int dump(const ps_options *opts, int seq, const char *pass, const ir_graph *g, ps_ctx *ctx)
{
	const char *tag = opts->dump_tag ? opts->dump_tag : "";
	const char *sep = opts->dump_tag ? "-" : "";
	if (!opts->dump_dir) {
		FILE *out = opts->dump_out ? opts->dump_out : stderr;
		fprintf(out, "# ---- %s%safter %s ----\n", tag, opts->dump_tag ? ": " : "", pass);
		ir_print(out, g);
		return 0;
	}
	char path[4096], tmp[4200];
	snprintf(path, sizeof path, "%s/%s%s%02d-%s.ir", opts->dump_dir, tag, sep, seq, pass);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f) {
		ir_diag_add(&ctx->diags, (ir_pos){0}, "cannot write dump '%s': %s", path, strerror(errno));
		return 1;
	}
	ir_print(f, g);
	bool ok = !ferror(f);
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) != 0) {
		ir_diag_add(&ctx->diags, (ir_pos){0}, "cannot write dump '%s': %s", path, strerror(errno));
		remove(tmp);
		return 1;
	}
	return 0;
}

static int verify(const char *pass, ir_graph *g, ps_ctx *ctx)
{
	int before = ctx->diags.n;
	if (ir_verify(g, &ctx->diags))
		return 0;
	/* A pass produced a broken graph: say which. */
	for (int i = before; i < ctx->diags.n; i++) {
		char *msg = ctx->diags.items[i].msg;
		size_t len = strlen(msg) + strlen(pass) + 32;
		char *with = malloc(len);
		if (!with)
			IR_DIE("out of memory");
		snprintf(with, len, "after pass '%s': %s", pass, msg);
		free(msg);
		ctx->diags.items[i].msg = with;
	}
	return 1;
}

/* The first pass after table[i] that g lists as applied, or -1; *at is
 * where it is listed. */
static int listed_later(const ps_pass *table, int n, int i, const ir_graph *g, ir_pos *at)
{
	for (int j = 0; j < g->npasses; j++)
		for (int k = i + 1; k < n; k++)
			if (strcmp(g->passes[j], table[k].name) == 0) {
				*at = g->pass_pos[j];
				return k;
			}
	return -1;
}

/* What a graph that lists passes of the table could still go through:
 * "--passes P1,P2 runs what can follow", the passes after the last one it
 * lists. */
static void can_follow(const ps_pass *table, int n, const ir_graph *g, char *buf, size_t len)
{
	int last = -1;
	for (int k = 0; k < n; k++)
		if (ir_graph_has_pass(g, table[k].name))
			last = k;
	if (last == n - 1) {
		snprintf(buf, len, "no pass comes after '%s'", table[last].name);
		return;
	}
	size_t used = (size_t)snprintf(buf, len, "--passes ");
	for (int k = last + 1; k < n && used < len; k++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", k > last + 1 ? "," : "", table[k].name);
	if (used < len)
		snprintf(buf + used, len - used, " runs what can follow");
}

int ps_run_table(const ps_pass *table, int n, ir_graph *g, ps_ctx *ctx, const ps_options *opts)
{
	int seq = 0;
	const char *last = NULL;
	for (int i = 0; i < n; i++) {
		const ps_pass *p = &table[i];
		bool wanted = !opts->only || ps_list_has(opts->only, p->name, strlen(p->name));
		if (!ps_pass_applies(p, ctx))
			goto next;
		if (wanted && !ir_graph_has_pass(g, p->name)) {
			ir_pos at;
			int later = listed_later(table, n, i, g, &at);
			if (later >= 0) {
				char next[256];
				can_follow(table, n, g, next, sizeof next);
				ir_diag_add(&ctx->diags, at,
					"pass '%s' cannot run on @%s: it lists '%s', which comes after '%s' and would be left stale; %s",
					p->name, g->name, table[later].name, p->name, next);
				return 1;
			}
			if (p->requires && !ir_graph_has_pass(g, p->requires)) {
				ir_diag_add(&ctx->diags, (ir_pos){0},
					"pass '%s' requires pass '%s', which has not run on this graph", p->name,
					p->requires);
				return 1;
			}
			int rc = p->run(g, ctx);
			if (rc == PS_NOT_APPLIED)
				goto next;
			if (rc != 0)
				return 1;
			ir_graph_mark_pass(g, p->name);
			last = p->name;
			seq++;
			if (opts->verify_each && verify(p->name, g, ctx) != 0)
				return 1;
			if (opts->dump_after && (strcmp(opts->dump_after, "all") == 0 ||
				strcmp(opts->dump_after, p->name) == 0) && dump(opts, seq, p->name, g, ctx) != 0)
				return 1;
		}
	next:
		if (opts->stop_after && strcmp(opts->stop_after, p->name) == 0)
			break;
	}
	if (last && !opts->verify_each && verify(last, g, ctx) != 0)
		return 1;
	return 0;
}

int ps_run(ir_graph *g, ps_ctx *ctx, const ps_options *opts)
{
	if (!ps_claims_check(g, &ctx->diags))
		return 1;
	int n;
	const ps_pass *table = ps_pipeline(&n);
	return ps_run_table(table, n, g, ctx, opts);
}
