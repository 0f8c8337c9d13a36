/* test_cg_objcache.c: compiled objects kept on disk (codegen/objcache.c):
 * a warm compile loads every object from the cache and its step computes
 * the cold one's bits; damaged files (truncated, garbage, a wrong hash)
 * are not used but replaced; an unwritable cache still compiles;
 * REVC_OBJECT_CACHE=0 writes nothing and another value is an error; another
 * CPU or another graph is another key; past REVC_OBJECT_CACHE_MAX the
 * least recently used objects go.  Each test runs in its own process
 * (Check's fork mode) with its own cache home; the conv tune is off, so
 * that nothing is timed. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cg.h"
#include "codegen_suites.h"
#include "rt.h"
#include "test_cpu.h"

static char dir[256];

static const cgt_conv conv = {2, 8, 9, 9, 8, 3, 1, {1, 1, 1, 1}};

/* A fresh cache home (XDG_CACHE_HOME), the object cache on. */
static void fresh_home(const char *name)
{
	snprintf(dir, sizeof dir, "/tmp/revc-objcache-%d-%s", (int)getpid(), name);
	mkdir(dir, 0755);
	setenv("XDG_CACHE_HOME", dir, 1);
	setenv("REVC_CONV_TUNE", "0", 1);
	unsetenv("REVC_OBJECT_CACHE");
	unsetenv("REVC_CONV");
	unsetenv("REVC_CONV_BLAS");
}

static void objects_dir(char *buf, size_t len)
{
	snprintf(buf, len, "%s/revc/objects", dir);
}

/* The cache's files (none when there is no directory), their paths in
 * paths[0..max) when given. */
static int cached_files(char paths[][600], int max)
{
	char od[300];
	objects_dir(od, sizeof od);
	DIR *d = opendir(od);
	if (!d)
		return 0;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		if (paths && n < max)
			snprintf(paths[n], 600, "%s/%s", od, e->d_name);
		n++;
	}
	closedir(d);
	return n;
}

static void cleanup(void)
{
	char paths[16][600], path[300];
	int n = cached_files(paths, 16);
	for (int i = 0; i < n && i < 16; i++)
		unlink(paths[i]);
	objects_dir(path, sizeof path);
	rmdir(path);
	snprintf(path, sizeof path, "%s/revc", dir);
	rmdir(path);
	rmdir(dir);
}

/* The outputs of one step of g compiled for cpu (random inputs from one
 * seed), their bytes concatenated into out (*len of them); the compile's
 * statistics in *st. */
static void run(const ir_graph *g, const char *cpu, cg_stats *st, unsigned char *out, size_t cap, size_t *len)
{
	cg_options o = {.threads = 2, .optimize = true, .cpu = cpu};
	*st = (cg_stats){0};
	ir_diags d;
	ir_diags_init(&d);
	cg_jit *j = cg_jit_compile(g, &o, st, &d);
	ck_assert_msg(j, "compile: %s", d.n ? d.items[0].msg : "");
	ir_diags_free(&d);
	rt_err e;
	rt_store s;
	rt_store_init(&s);
	ck_assert_msg(rt_store_init_from_graph(&s, g, 5, &e), "%s", e.msg);
	rt_pool *pool = rt_pool_new(2);
	rt_exec *x = rt_exec_new_native(g, &s, cg_jit_step(j), pool, &e);
	ck_assert_msg(x, "%s", e.msg);
	rt_rng r;
	rt_rng_seed(&r, 11);
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_INPUT)
			continue;
		const ir_type *t;
		float *p = rt_exec_input(x, ir_node_str(n, IR_ATTR_NAME), &t);
		ck_assert(t->dtype == IR_F32);
		for (int64_t k = 0; k < ir_type_elems(t); k++)
			p[k] = (float)(2 * rt_rng_uniform(&r) - 1);
	}
	ck_assert_msg(rt_exec_run(x, &e), "%s", e.msg);
	*len = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_OUTPUT)
			continue;
		const ir_type *t;
		const void *p = rt_exec_output(x, ir_node_str(n, IR_ATTR_NAME), &t);
		size_t b = (size_t)ir_type_elems(t) * sizeof(float);
		ck_assert(*len + b <= cap);
		memcpy(out + *len, p, b);
		*len += b;
	}
	rt_exec_free(x);
	rt_pool_free(pool);
	rt_store_free(&s);
	cg_jit_free(j);
}

enum { CAP = 1 << 16 };
static unsigned char cold[CAP], warm[CAP];

/* The cold compile: nothing cached, every object written. */
static int cold_compile(const ir_graph *g, size_t *len)
{
	cg_stats st;
	run(g, test_cpu(), &st, cold, CAP, len);
	ck_assert_int_ge(st.objects, 2); /* the step and a part at least */
	ck_assert_int_eq(st.objects_cached, 0);
	ck_assert_int_eq(cached_files(NULL, 0), st.objects);
	return st.objects;
}

/* A warm compile: `cached` of its objects from the cache, and the cold
 * compile's bits. */
static void warm_compile(const ir_graph *g, size_t len, int objects, int cached)
{
	cg_stats st;
	size_t wlen;
	run(g, test_cpu(), &st, warm, CAP, &wlen);
	ck_assert_int_eq(st.objects, objects);
	ck_assert_int_eq(st.objects_cached, cached);
	ck_assert(wlen == len && !memcmp(cold, warm, len));
}

START_TEST(test_objcache_warm)
{
	fresh_home("warm");
	ir_graph *g = cgt_conv_graph(&conv, IR_F32, 2);
	size_t len;
	int n = cold_compile(g, &len);
	warm_compile(g, len, n, n);
	ck_assert_int_eq(cached_files(NULL, 0), n); /* nothing written again */
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* Damages file path: 0 cut to a few bytes, 1 cut in the object, 2 garbage
 * of the same length, 3 one byte of the object changed (a wrong hash). */
static void damage(const char *path, int how)
{
	struct stat st;
	ck_assert(!stat(path, &st) && st.st_size > 64);
	if (how <= 1) {
		ck_assert(!truncate(path, how == 0 ? 5 : st.st_size - 7));
		return;
	}
	FILE *f = fopen(path, "r+b");
	ck_assert(f);
	if (how == 2)
		for (off_t i = 0; i < st.st_size; i++)
			fputc((int)((i * 131 + 7) & 0xff), f);
	else {
		fseek(f, st.st_size / 2, SEEK_SET);
		int c = fgetc(f);
		fseek(f, st.st_size / 2, SEEK_SET);
		fputc(c ^ 0x5a, f);
	}
	ck_assert(!fclose(f));
}

START_TEST(test_objcache_damaged)
{
	fresh_home("damaged");
	ir_graph *g = cgt_conv_graph(&conv, IR_F32, 2);
	size_t len;
	int n = cold_compile(g, &len);
	for (int how = 0; how < 4; how++) {
		char paths[16][600];
		ck_assert_int_eq(cached_files(paths, 16), n);
		for (int i = 0; i < n; i++)
			damage(paths[i], how);
		warm_compile(g, len, n, 0); /* not used ... */
		warm_compile(g, len, n, n); /* ... but replaced */
		ck_assert_int_eq(cached_files(NULL, 0), n);
	}
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* revc/ is a file: nothing can be written, yet it compiles. */
START_TEST(test_objcache_unwritable)
{
	fresh_home("unwritable");
	char path[300];
	snprintf(path, sizeof path, "%s/revc", dir);
	FILE *f = fopen(path, "w");
	ck_assert(f && !fclose(f));
	ir_graph *g = cgt_conv_graph(&conv, IR_F32, 2);
	cg_stats st;
	size_t len, wlen;
	run(g, test_cpu(), &st, cold, CAP, &len);
	ck_assert_int_eq(st.objects_cached, 0);
	run(g, test_cpu(), &st, warm, CAP, &wlen);
	ck_assert_int_eq(st.objects_cached, 0);
	ck_assert(wlen == len && !memcmp(cold, warm, len));
	struct stat s;
	ck_assert(!stat(path, &s) && S_ISREG(s.st_mode) && s.st_size == 0);
	unlink(path);
	/* No cache home at all. */
	setenv("XDG_CACHE_HOME", "relative/not/used", 1);
	setenv("HOME", "relative/too", 1);
	run(g, test_cpu(), &st, warm, CAP, &wlen);
	ck_assert_int_eq(st.objects_cached, 0);
	ck_assert(wlen == len && !memcmp(cold, warm, len));
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* REVC_OBJECT_CACHE=0: nothing read or written; 1 is on; another value
 * is an error. */
START_TEST(test_objcache_off)
{
	fresh_home("off");
	setenv("REVC_OBJECT_CACHE", "0", 1);
	ir_graph *g = cgt_conv_graph(&conv, IR_F32, 2);
	cg_stats st;
	size_t len;
	run(g, test_cpu(), &st, cold, CAP, &len);
	ck_assert_int_eq(st.objects_cached, 0);
	char path[300];
	snprintf(path, sizeof path, "%s/revc", dir);
	ck_assert(access(path, F_OK) != 0);
	setenv("REVC_OBJECT_CACHE", "1", 1);
	int n = cold_compile(g, &len);
	setenv("REVC_OBJECT_CACHE", "0", 1);
	warm_compile(g, len, n, 0);
	setenv("REVC_OBJECT_CACHE", "yes", 1);
	cg_options o = {.threads = 2, .optimize = true, .cpu = test_cpu()};
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(!cg_jit_compile(g, &o, NULL, &d));
	ck_assert_msg(d.n && strstr(d.items[0].msg, "REVC_OBJECT_CACHE must be 0 or 1"), "%s",
		d.n ? d.items[0].msg : "");
	ir_diags_free(&d);
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* Another CPU, or another graph, is another key: nothing from the cache. */
START_TEST(test_objcache_keys)
{
	fresh_home("keys");
	ir_graph *g = cgt_conv_graph(&conv, IR_F32, 2);
	size_t len;
	int n = cold_compile(g, &len);
	const char *other = test_cpu() ? NULL : "x86-64-v3";
	char missing[64];
	ck_assert(cg_cpu_runs_here(other, missing, sizeof missing));
	cg_stats st;
	run(g, other, &st, warm, CAP, &len);
	ck_assert_int_eq(st.objects_cached, 0);
	ck_assert_int_eq(cached_files(NULL, 0), 2 * n);
	static const cgt_conv wider = {2, 8, 9, 10, 8, 3, 1, {1, 1, 1, 1}};
	ir_graph *h = cgt_conv_graph(&wider, IR_F32, 2);
	run(h, test_cpu(), &st, warm, CAP, &len);
	ck_assert_int_eq(st.objects_cached, 0);
	ck_assert_int_eq(cached_files(NULL, 0), 3 * n);
	ir_graph_free(h);
	ir_graph_free(g);
	cleanup();
}
END_TEST

/* file `name` in the objects' directory: its path in buf; made of `bytes`
 * bytes (when bytes >= 0) last used `age` seconds ago. */
static const char *object_file(char *buf, size_t len, const char *name, long bytes, long age)
{
	char od[300];
	objects_dir(od, sizeof od);
	snprintf(buf, len, "%s/%s", od, name);
	if (bytes >= 0) {
		FILE *f = fopen(buf, "wb");
		ck_assert(f);
		for (long i = 0; i < bytes; i++)
			fputc(0, f);
		ck_assert(!fclose(f));
	}
	struct timespec t[2];
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= age;
	t[1] = t[0];
	ck_assert(!utimensat(AT_FDCWD, buf, t, 0));
	return buf;
}

static bool exists(const char *path)
{
	struct stat st;
	return !stat(path, &st);
}

/* Past REVC_OBJECT_CACHE_MAX (3 MiB here), a store removes the least
 * recently used objects until under 3/4 of it, and temporary files over
 * an hour old; it keeps the newer, the fresh temporary file, and what it
 * stored; a hit renews a file's time.  A bad limit is an error. */
START_TEST(test_objcache_trim)
{
	fresh_home("trim");
	char od[300], path[700], fake[5][700], stale[700], fresh[700];
	snprintf(path, sizeof path, "%s/revc", dir);
	objects_dir(od, sizeof od);
	ck_assert(!mkdir(path, 0755) && !mkdir(od, 0755));
	for (int i = 0; i < 5; i++) { /* 1 MiB each, fake[i] used i + 1 hours ago */
		char name[64];
		snprintf(name, sizeof name, "%032x.o", i + 1);
		object_file(fake[i], sizeof fake[i], name, 1 << 20, 3600L * (i + 1));
	}
	object_file(stale, sizeof stale, "00000000000000000000000000000009.o.Ab12Cd", 10, 7200);
	object_file(fresh, sizeof fresh, "0000000000000000000000000000000a.o.Ef34Gh", 10, 60);
	setenv("REVC_OBJECT_CACHE_MAX", "3", 1);
	ir_graph *g = cgt_conv_graph(&conv, IR_F32, 2);
	cg_stats st;
	size_t len;
	run(g, test_cpu(), &st, cold, CAP, &len);
	ck_assert_int_eq(st.objects_cached, 0);
	/* 5 MiB and more: the three oldest go, 2 MiB and the new objects stay */
	ck_assert(exists(fake[0]) && exists(fake[1]));
	ck_assert(!exists(fake[2]) && !exists(fake[3]) && !exists(fake[4]));
	ck_assert(!exists(stale) && exists(fresh));
	ck_assert_int_eq(cached_files(NULL, 0), 2 + 1 + st.objects);
	/* the new objects made older than every fake: a hit renews them */
	char paths[16][600];
	int n = cached_files(paths, 16);
	for (int i = 0; i < n; i++)
		if (strcmp(paths[i], fake[0]) && strcmp(paths[i], fake[1]) && strcmp(paths[i], fresh))
			object_file(paths[i], sizeof paths[i], strrchr(paths[i], '/') + 1, -1, 36000);
	warm_compile(g, len, st.objects, st.objects);
	struct stat a, b;
	for (int i = 0; i < n; i++)
		if (strcmp(paths[i], fake[0]) && strcmp(paths[i], fake[1]) && strcmp(paths[i], fresh)) {
			ck_assert(!stat(paths[i], &a) && !stat(fake[0], &b));
			ck_assert_msg(a.st_mtime >= b.st_mtime, "%s was not renewed", paths[i]);
		}
	static const char *const bad[] = {"0", "-1", "3M", "x"};
	cg_options o = {.threads = 2, .optimize = true, .cpu = test_cpu()};
	for (int i = 0; i < 4; i++) {
		setenv("REVC_OBJECT_CACHE_MAX", bad[i], 1);
		ir_diags d;
		ir_diags_init(&d);
		ck_assert(!cg_jit_compile(g, &o, NULL, &d));
		ck_assert_msg(d.n && strstr(d.items[0].msg, "REVC_OBJECT_CACHE_MAX must be a whole number"),
			"REVC_OBJECT_CACHE_MAX=%s: %s", bad[i], d.n ? d.items[0].msg : "");
		ir_diags_free(&d);
	}
	unsetenv("REVC_OBJECT_CACHE_MAX");
	unlink(fresh);
	ir_graph_free(g);
	cleanup();
}
END_TEST

Suite *cg_objcache_suite(void)
{
	Suite *s = suite_create("objcache");
	TCase *tc = tcase_create("objcache");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_objcache_warm);
	tcase_add_test(tc, test_objcache_damaged);
	tcase_add_test(tc, test_objcache_unwritable);
	tcase_add_test(tc, test_objcache_off);
	tcase_add_test(tc, test_objcache_keys);
	tcase_add_test(tc, test_objcache_trim);
	suite_add_tcase(s, tc);
	return s;
}
