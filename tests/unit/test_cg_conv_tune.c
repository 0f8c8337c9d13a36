/* test_cg_conv_tune.c: the measured choice of a convolution's lowering
 * and its cache (codegen/k_conv_tune.c), on by default: a cache written
 * and read back, hand-written entries obeyed (and computing what the
 * interpreter does), a corrupt cache survived; a choice used only once its
 * line is in the file (an unwritable cache: the cost model, nothing timed;
 * a measure whose line could not be written: the cost model, then the
 * line another process wrote); two processes writing at once losing no
 * line; REVC_CONV still forcing, REVC_CONV_TUNE=0 the cost model, and the
 * workspace the same with the tune on and off, the largest of the
 * candidates' and the cost model's choice's; the rule that turns two times
 * into a choice (the cost model's unless 5% slower).  Times are never asserted:
 * the choices checked come from entries written here.  Each test runs in
 * its own process (Check's fork mode) on its own geometry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cg.h"
#include "codegen_suites.h"
#include "internal.h" /* codegen's: cg_conv_lowering_of, cg_conv_env_ok */
#include "test_cpu.h"

static char dir[256];

/* A fresh cache home (XDG_CACHE_HOME) with the tune on (the default),
 * the object cache off (its directory would outlive cleanup). */
static void fresh_home(const char *name)
{
	snprintf(dir, sizeof dir, "/tmp/revc-tune-%d-%s", (int)getpid(), name);
	mkdir(dir, 0755);
	setenv("XDG_CACHE_HOME", dir, 1);
	setenv("REVC_OBJECT_CACHE", "0", 1);
	unsetenv("REVC_CONV_TUNE");
	unsetenv("REVC_CONV");
	unsetenv("REVC_CONV_BLAS");
}

static void cache_path(char *buf, size_t len)
{
	snprintf(buf, len, "%s/revc/conv-tune", dir);
}

static void cleanup(void)
{
	char path[300];
	cache_path(path, sizeof path);
	unlink(path);
	snprintf(path, sizeof path, "%s/revc/conv-tune.lock", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/revc", dir);
	rmdir(path);
	rmdir(dir);
	unsetenv("REVC_CONV_TUNE");
	unsetenv("REVC_CONV");
}

static cg_options options(void)
{
	return (cg_options){.threads = 2, .optimize = true, .cpu = test_cpu()};
}

/* Compiles g (which must succeed) and frees the result. */
static void compile(const ir_graph *g)
{
	cg_options o = options();
	ir_diags d;
	ir_diags_init(&d);
	cg_jit *j = cg_jit_compile(g, &o, NULL, &d);
	ck_assert_msg(j, "compile: %s", d.n ? d.items[0].msg : "");
	ir_diags_free(&d);
	cg_jit_free(j);
}

/* The graph's node of op. */
static const ir_node *node_of(const ir_graph *g, ir_op op)
{
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->op == op)
			return g->nodes[i];
	ck_abort_msg("no %s", ir_op_name(op));
	return NULL;
}

static const ir_op ops[3] = {IR_OP_CONV2D, IR_OP_CONV2D_DX, IR_OP_CONV2D_DW};

/* Each convolution's lowering is l[op] and why begins with how. */
static void expect(const ir_graph *g, const char *const l[3], const char *how)
{
	cg_options o = options();
	for (int k = 0; k < 3; k++) {
		const char *why = NULL, *got = cg_conv_describe(node_of(g, ops[k]), &o, &why);
		ck_assert_msg(!strcmp(got, l[k]), "%s: %s, not %s", ir_op_name(ops[k]), got, l[k]);
		ck_assert_msg(why && !strncmp(why, how, strlen(how)), "%s: why '%s'", ir_op_name(ops[k]), why);
	}
}

/* The cache's lines (its first one in *first), as read back. */
static int cache_lines(char first[256])
{
	char path[300], line[512];
	cache_path(path, sizeof path);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int n = 0;
	first[0] = 0;
	while (fgets(line, sizeof line, f))
		if (n++ == 0)
			snprintf(first, 256, "%.255s", line);
	fclose(f);
	return n;
}

/* The key prefix the tune wrote for this CPU ("TARGET/HOST/HASH t=2"),
 * from the cache's second line. */
static void scope_written(char *buf, size_t len)
{
	char path[300], line[512];
	cache_path(path, sizeof path);
	FILE *f = fopen(path, "r");
	ck_assert(f);
	ck_assert(fgets(line, sizeof line, f) && fgets(line, sizeof line, f));
	fclose(f);
	char *end = strstr(line, " conv2d");
	ck_assert(end);
	*end = 0;
	snprintf(buf, len, "%.199s", line);
}

static const cgt_conv measured_c = {2, 8, 8, 8, 8, 3, 1, {1, 1, 1, 1}};

/* A fresh cache home (fresh_home) and a first compile in it, measured
 * and written, so that the cache has its scope (scope_written). */
static void first_compile(const char *name)
{
	fresh_home(name);
	ir_graph *g = cgt_conv_graph(&measured_c, IR_F32, 2);
	compile(g);
	ir_graph_free(g);
}

/* Each lowering is one of the candidates, measured, each candidate's time
 * given. */
static void expect_measured(const ir_graph *g, const char *how)
{
	cg_options o = options();
	for (int k = 0; k < 3; k++) {
		const char *why = NULL, *got = cg_conv_describe(node_of(g, ops[k]), &o, &why);
		ck_assert(!strcmp(got, "direct") || !strcmp(got, "winograd2") || !strcmp(got, "winograd4"));
		ck_assert_msg(why && !strncmp(why, how, strlen(how)), "why '%s'", why);
		ck_assert_msg(strstr(why, ": direct ") && strstr(why, " ms, winograd2 ") && strstr(why, " ms, winograd4 "),
			"why '%s'", why);
	}
}

/* A first compile measures and writes the cache: its header and a line
 * per convolution; the same process then answers from memory. */
START_TEST(test_tune_writes)
{
	fresh_home("writes");
	ir_graph *g = cgt_conv_graph(&measured_c, IR_F32, 2);
	compile(g);
	char first[256];
	ck_assert_int_eq(cache_lines(first), 4);
	ck_assert_str_eq(first, "revc conv-tune 4\n");
	expect_measured(g, "measured: ");
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* The lowerings of the entries written by hand: a mix. */
static const char *const mixed[3] = {"winograd2", "direct", "winograd4"};

/* Writes the cache (mode "w", header first) or appends to it (mode "a",
 * header NULL): a line per op of geometry geom (as keys spell it)
 * choosing l[op] (none when NULL), the chosen lowering 9 times faster
 * than the other candidates (direct, winograd2, winograd4). */
static void write_choices(const char *mode, const char *header, const char *geom, const char *const l[3])
{
	char sc[200], path[300];
	scope_written(sc, sizeof sc);
	cache_path(path, sizeof path);
	FILE *f = fopen(path, mode);
	ck_assert(f);
	if (header)
		fprintf(f, "%s\n", header);
	for (int k = 0; k < 3; k++)
		if (l[k])
			fprintf(f, "%s %s %s\t%s\t%s\n", sc, ir_op_name(ops[k]), geom, l[k],
				!strcmp(l[k], "direct")	     ? "1.0\t9.0\t9.0"
				: !strcmp(l[k], "winograd2") ? "9.0\t1.0\t9.0"
							     : "9.0\t9.0\t1.0");
	fclose(f);
}

/* Entries written by hand (for a geometry this process has not seen)
 * are obeyed, "cached", and the graph computes what the interpreter
 * does with the mix of lowerings; REVC_CONV still forces over them. */
START_TEST(test_tune_reads)
{
	first_compile("reads");
	ir_graph *g;
	write_choices("a", NULL, "n=3 c=16 h=9 w=9 o=16 k=3x3 s=1 pad=1,1,1,1", mixed);
	static const cgt_conv c = {3, 16, 9, 9, 16, 3, 1, {1, 1, 1, 1}};
	g = cgt_conv_graph(&c, IR_F32, 2);
	double err = cgt_compare(g, 2, 5, 1); /* compiled: the cache read */
	ck_assert_msg(err <= 1e-5, "%g", err);
	expect(g, mixed, "cached: direct ");
	ir_graph_free(g);
	setenv("REVC_CONV", "direct", 1);
	g = cgt_conv_graph(&c, IR_F32, 2);
	static const char *const forced[3] = {"direct", "direct", "direct"};
	expect(g, forced, "REVC_CONV=direct");
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* A cache with another first line is ignored (well-formed lines after
 * it too) and replaced; a malformed line is dropped. */
START_TEST(test_tune_corrupt)
{
	first_compile("corrupt");
	ir_graph *g;
	char path[300], first[256];
	cache_path(path, sizeof path);
	static const char *const direct[3] = {"direct", "direct", "direct"};
	write_choices("w", "revc conv-tune 0", "n=2 c=8 h=7 w=7 o=8 k=3x3 s=1 pad=1,1,1,1", direct);
	static const cgt_conv c = {2, 8, 7, 7, 8, 3, 1, {1, 1, 1, 1}};
	g = cgt_conv_graph(&c, IR_F32, 2);
	compile(g);
	expect_measured(g, "measured: ");
	ck_assert_int_eq(cache_lines(first), 7); /* the first compile's three lines (this process's), three new */
	ck_assert_str_eq(first, "revc conv-tune 4\n");
	ir_graph_free(g);
	/* Now the header is right but some lines are not: they are skipped. */
	FILE *f = fopen(path, "a");
	ck_assert(f);
	fprintf(f, "a key\tdirect\t1.0\t2.0\n" "a key\tblas\t1.0\t2.0\t3.0\n" "a key\tdirect\t-1\t2.0\t3.0\n\x01\x02\n");
	fclose(f);
	static const cgt_conv c2 = {2, 8, 9, 7, 8, 3, 1, {1, 1, 1, 1}};
	g = cgt_conv_graph(&c2, IR_F32, 2);
	compile(g);
	expect_measured(g, "measured: ");
	ck_assert_int_eq(cache_lines(first), 10); /* the four bad lines gone, three new ones */
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* Every convolution of g is on the cost model. */
static void expect_modelled(const ir_graph *g)
{
	cg_options o = options();
	for (int k = 0; k < 3; k++) {
		const char *why = NULL;
		cg_conv_describe(node_of(g, ops[k]), &o, &why);
		ck_assert_msg(why && !strncmp(why, "cost model", 10), "%s: why '%s'", ir_op_name(ops[k]), why);
	}
}

/* A cache home that cannot be made (a file where the directory would
 * be), or no cache home at all: nothing is timed (nothing could be
 * kept), the cost model decides, nothing is written. */
START_TEST(test_tune_unwritable)
{
	fresh_home("unwritable");
	char path[300];
	snprintf(path, sizeof path, "%s/revc", dir);
	FILE *f = fopen(path, "w"); /* a file named like the directory */
	ck_assert(f);
	fclose(f);
	ir_graph *g = cgt_conv_graph(&measured_c, IR_F32, 2);
	compile(g);
	expect_modelled(g);
	ir_graph_free(g);
	struct stat st;
	ck_assert(!stat(path, &st) && S_ISREG(st.st_mode) && st.st_size == 0);
	unlink(path);
	setenv("XDG_CACHE_HOME", "relative/not/used", 1);
	setenv("HOME", "/proc/revc-no-such-home", 1);
	static const cgt_conv c = {2, 8, 9, 9, 8, 3, 1, {1, 1, 1, 1}};
	g = cgt_conv_graph(&c, IR_F32, 2);
	compile(g);
	expect_modelled(g);
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* A cache that can be read but not written (its lock file cannot be
 * made: a directory stands there): its lines are obeyed, the shapes it
 * lacks are not timed but left to the cost model, and it is unchanged. */
START_TEST(test_tune_read_only)
{
	first_compile("readonly");
	ir_graph *g;
	char lock[300];
	static const char *const two[3] = {"direct", NULL, "winograd2"};
	write_choices("w", "revc conv-tune 4", "n=2 c=16 h=8 w=9 o=8 k=3x3 s=1 pad=1,1,1,1", two);
	snprintf(lock, sizeof lock, "%s/revc/conv-tune.lock", dir);
	unlink(lock);
	ck_assert(!mkdir(lock, 0755));
	static const cgt_conv c = {2, 16, 8, 9, 8, 3, 1, {1, 1, 1, 1}};
	g = cgt_conv_graph(&c, IR_F32, 2);
	double err = cgt_compare(g, 2, 7, 1);
	ck_assert_msg(err <= 1e-5, "%g", err);
	cg_options o = options();
	const char *why = NULL, *l = cg_conv_describe(node_of(g, IR_OP_CONV2D), &o, &why);
	ck_assert(!strcmp(l, "direct") && !strncmp(why, "cached: ", 8));
	l = cg_conv_describe(node_of(g, IR_OP_CONV2D_DW), &o, &why);
	ck_assert(!strcmp(l, "winograd2") && !strncmp(why, "cached: ", 8));
	cg_conv_describe(node_of(g, IR_OP_CONV2D_DX), &o, &why);
	ck_assert_msg(!strncmp(why, "cost model", 10), "%s", why);
	char first[256];
	ck_assert_int_eq(cache_lines(first), 3);
	ir_graph_free(g);
	rmdir(lock);
	cleanup();
}
END_TEST

/* A measure whose line could not be written (the temporary file cannot
 * be made) is not used: the cost model decides; when another process has
 * written that shape's line meanwhile, the next compile takes that line
 * (times nothing) and writes the file again with it. */
START_TEST(test_tune_unkept)
{
	first_compile("unkept");
	char tmp[320];
	cache_path(tmp, sizeof tmp);
	size_t at = strlen(tmp);
	snprintf(tmp + at, sizeof tmp - at, ".%d.tmp", (int)getpid());
	ck_assert(!mkdir(tmp, 0755)); /* where the new file would be written */
	static const cgt_conv c = {2, 8, 10, 9, 8, 3, 1, {1, 1, 1, 1}};
	ir_graph *g = cgt_conv_graph(&c, IR_F32, 2);
	compile(g);
	expect_modelled(g);
	char first[256];
	ck_assert_int_eq(cache_lines(first), 4); /* the first compile's */
	ck_assert(!rmdir(tmp));
	write_choices("a", NULL, "n=2 c=8 h=10 w=9 o=8 k=3x3 s=1 pad=1,1,1,1", mixed); /* "another process" */
	compile(g);
	expect(g, mixed, "cached: ");
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* Two processes measuring other shapes into one cache at once: the file
 * ends with every line of both (each write reads the file again under
 * the lock). */
START_TEST(test_tune_concurrent)
{
	fresh_home("concurrent");
	static const cgt_conv cs[2] = {{2, 8, 11, 9, 8, 3, 1, {1, 1, 1, 1}}, {2, 8, 9, 11, 8, 3, 1, {1, 1, 1, 1}}};
	pid_t pid[2];
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		ck_assert(pid[i] >= 0);
		if (pid[i] == 0) {
			ir_graph *g = cgt_conv_graph(&cs[i], IR_F32, 2);
			cg_options o = options();
			ir_diags d;
			ir_diags_init(&d);
			cg_jit *j = cg_jit_compile(g, &o, NULL, &d);
			_exit(j ? 0 : 1);
		}
	}
	for (int i = 0; i < 2; i++) {
		int st;
		ck_assert(waitpid(pid[i], &st, 0) == pid[i]);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	char first[256];
	ck_assert_int_eq(cache_lines(first), 7);
	cleanup();
}
END_TEST

/* The tune is on unset and with REVC_CONV_TUNE=1; REVC_CONV_TUNE=0 is the
 * cost model (nothing written); other values are an error. */
START_TEST(test_tune_controls)
{
	fresh_home("controls");
	setenv("REVC_CONV_TUNE", "0", 1);
	ir_graph *g = cgt_conv_graph(&measured_c, IR_F32, 2);
	compile(g);
	char first[256];
	ck_assert_int_eq(cache_lines(first), -1);
	expect_modelled(g);
	ir_graph_free(g);
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(cg_conv_env_ok(&d));
	setenv("REVC_CONV_TUNE", "yes", 1);
	ck_assert(!cg_conv_env_ok(&d));
	ck_assert(strstr(d.items[0].msg, "REVC_CONV_TUNE must be 0 or 1"));
	ir_diags_free(&d);
	setenv("REVC_CONV_TUNE", "1", 1);
	g = cgt_conv_graph(&measured_c, IR_F32, 2);
	compile(g);
	expect_measured(g, "measured: ");
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* A convolution Winograd fits is planned the largest of the candidates'
 * (direct's, winograd2's, winograd4's) and the cost model's choice's
 * workspaces, whatever gets chosen, and the same with the tune on and off:
 * on layers the cost model puts on each lowering. */
START_TEST(test_tune_workspace)
{
	fresh_home("workspace");
	static const struct {
		cgt_conv c;
		const char *model; /* the cost model's choice */
	} cs[3] = {
		{{4, 16, 14, 14, 16, 3, 1, {1, 1, 1, 1}}, "winograd2"},
		{{4, 4, 14, 14, 16, 3, 1, {1, 1, 1, 1}}, "direct"}, /* under 8 input planes */
		{{2, 64, 8, 8, 64, 3, 1, {1, 1, 1, 1}}, "winograd4"}, /* revnet-110's 8x8 stage */
	};
	static const char *const forced[3] = {"direct", "winograd2", "winograd4"};
	cg_options o = options();
	bool above = false; /* the plan larger than the cost model's own, somewhere */
	for (int i = 0; i < 3; i++) {
		int64_t ws[6][3]; /* REVC_CONV=direct, winograd2, winograd4, the model's; the tune on, off; by op */
		for (int m = 0; m < 6; m++) {
			if (m < 4)
				setenv("REVC_CONV", m < 3 ? forced[m] : cs[i].model, 1);
			else
				unsetenv("REVC_CONV");
			setenv("REVC_CONV_TUNE", m == 5 ? "0" : "1", 1);
			ir_graph *g = cgt_conv_graph(&cs[i].c, IR_F32, 2);
			if (m == 5) {
				const char *l = cg_conv_describe(node_of(g, IR_OP_CONV2D), &o, NULL);
				ck_assert_msg(!strcmp(l, cs[i].model), "%d: the cost model says %s", i, l);
			}
			for (int k = 0; k < 3; k++)
				ws[m][k] = cg_workspace(node_of(g, ops[k]), &o);
			ir_graph_free(g);
		}
		for (int k = 0; k < 3; k++) {
			int64_t most = 0;
			for (int m = 0; m < 4; m++)
				most = ws[m][k] > most ? ws[m][k] : most;
			ck_assert_int_eq(ws[4][k], most);
			ck_assert_int_eq(ws[5][k], most);
			above = above || most != ws[3][k];
		}
	}
	ck_assert(above);
	cleanup();
}
END_TEST

/* The rule that turns minimum times into a choice: the cost model's
 * candidate unless the fastest is more than 5% faster; the fastest where
 * the cost model's choice is not a candidate, the first on a tie. */
START_TEST(test_tune_pick)
{
	const cg_conv_lowering cand[2] = {CG_CONV_DIRECT, CG_CONV_WINOGRAD2};
	static const struct {
		double ms[2];
		cg_conv_lowering model;
		int want;
	} cs[] = {
		{{0.283, 0.290}, CG_CONV_WINOGRAD2, 1}, /* direct 2.4% faster: within the margin */
		{{0.250, 0.290}, CG_CONV_WINOGRAD2, 0}, /* 14% faster */
		{{0.950, 1.000}, CG_CONV_WINOGRAD2, 1}, /* exactly 5%: not more */
		{{0.949, 1.000}, CG_CONV_WINOGRAD2, 0},
		{{0.290, 0.283}, CG_CONV_DIRECT, 0},
		{{0.300, 0.200}, CG_CONV_DIRECT, 1},
		{{0.300, 0.290}, CG_CONV_WINOGRAD4, 1}, /* not a candidate: the fastest */
		{{0.200, 0.200}, CG_CONV_WINOGRAD4, 0},
	};
	for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
		ck_assert_msg(cg_conv_tune_pick(cs[i].ms, cand, 2, cs[i].model) == cs[i].want, "case %zu", i);
	/* The tune's own three: the fastest, if more than 5% faster than the
	 * cost model's choice, F(4x4) like the others. */
	const cg_conv_lowering three[3] = {CG_CONV_DIRECT, CG_CONV_WINOGRAD2, CG_CONV_WINOGRAD4};
	static const struct {
		double ms[3];
		cg_conv_lowering model;
		int want;
	} cs3[] = {
		{{0.235, 0.166, 0.128}, CG_CONV_WINOGRAD2, 2}, /* fashion's 14x14 conv2d on a Zen 4 */
		{{0.266, 0.152, 0.225}, CG_CONV_WINOGRAD2, 1}, /* its 7x7 */
		{{0.237, 0.189, 0.187}, CG_CONV_WINOGRAD2, 1}, /* its 28x28: 1% */
		{{0.247, 0.226, 0.206}, CG_CONV_WINOGRAD2, 2}, /* its 28x28 conv2d_dw: 9% */
		{{0.247, 0.226, 0.216}, CG_CONV_WINOGRAD2, 1}, /* 4.4%: not enough */
		{{0.180, 0.200, 0.185}, CG_CONV_WINOGRAD2, 0},
		{{0.400, 0.310, 0.290}, CG_CONV_WINOGRAD4, 2}, /* F(2x2) 7% slower: F(4x4) stays */
		{{0.400, 0.280, 0.290}, CG_CONV_WINOGRAD4, 2}, /* F(2x2) 3.4% faster: not enough */
		{{0.200, 0.300, 0.220}, CG_CONV_WINOGRAD4, 0},
	};
	for (size_t i = 0; i < sizeof cs3 / sizeof cs3[0]; i++)
		ck_assert_msg(cg_conv_tune_pick(cs3[i].ms, three, 3, cs3[i].model) == cs3[i].want, "case3 %zu", i);
}
END_TEST

Suite *cg_conv_tune_suite(void)
{
	Suite *s = suite_create("codegen conv tune");
	TCase *tc = tcase_create("tune");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_tune_writes);
	tcase_add_test(tc, test_tune_reads);
	tcase_add_test(tc, test_tune_corrupt);
	tcase_add_test(tc, test_tune_unwritable);
	tcase_add_test(tc, test_tune_read_only);
	tcase_add_test(tc, test_tune_unkept);
	tcase_add_test(tc, test_tune_concurrent);
	tcase_add_test(tc, test_tune_controls);
	tcase_add_test(tc, test_tune_workspace);
	tcase_add_test(tc, test_tune_pick);
	suite_add_tcase(s, tc);
	return s;
}
