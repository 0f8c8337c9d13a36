/* test_rt_dir.c: manifests (runtime/manifest.c) and directories written
 * whole (runtime/dir.c): what may be replaced, what is refused, which
 * stale temporaries are removed, modes, long paths, and the swap on a
 * filesystem without RENAME_EXCHANGE. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "manifest.h"
#include "runtime_suites.h"

/* A scratch directory, removed (two levels deep) at the end of a test. */
static char scratch[64];

static void make_scratch(void)
{
	strcpy(scratch, "/tmp/revc-dir-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(scratch));
}

static void remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	for (struct dirent *ent; (ent = readdir(d));) {
		if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
			continue;
		char p[512];
		snprintf(p, sizeof p, "%s/%s", dir, ent->d_name);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			remove_tree(p);
		else
			unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

static void put_file(const char *dir, const char *name, const char *text)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static bool exists(const char *dir, const char *name)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return lstat(p, &st) == 0;
}

/* The number of entries of dir whose names start with prefix. */
static int count_prefix(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *ent; (ent = readdir(d));)
		n += strncmp(ent->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

/* Writes a small directory of kind params with tensors a and b into path. */
static bool write_dir(const char *path, rt_err *e)
{
	rt_dir d;
	float a[6] = {1, 2, 3, 4, 5, 6}, b = 7;
	if (!rt_dir_begin(&d, path, RT_DIR_PARAMS, "tiny", e))
		return false;
	if (!rt_dir_write_npy(&d, "a", RT_NPY_F32, 2, (int64_t[]){2, 3}, a, e) ||
	    !rt_dir_write_npy(&d, "b", RT_NPY_F32, 0, NULL, &b, e)) {
		rt_dir_abort(&d);
		return false;
	}
	return rt_dir_commit(&d, e);
}

START_TEST(test_manifest_round_trip)
{
	make_scratch();
	rt_err e;
	rt_manifest m, r;
	rt_manifest_init(&m, RT_DIR_CHECKPOINT);
	ck_assert(rt_manifest_set_model(&m, "fashion", &e));
	m.step = 30;
	m.seed = 1;
	ck_assert(rt_manifest_add(&m, "init.conv.w", RT_NPY_F32, 4, (int64_t[]){16, 1, 3, 3}, &e));
	ck_assert(rt_manifest_add(&m, "step", RT_NPY_I64, 0, NULL, &e));
	ck_assert(!rt_manifest_add(&m, "a/b", RT_NPY_F32, 0, NULL, &e));
	ck_assert(!rt_manifest_add(&m, "a b", RT_NPY_F32, 0, NULL, &e));
	/* NAME.npy.tmp.XXXXXX must be a file name (255 bytes). */
	char name[300];
	memset(name, 'n', sizeof name);
	name[RT_MANIFEST_MAX_NAME + 1] = 0;
	ck_assert(!rt_manifest_add(&m, name, RT_NPY_F32, 0, NULL, &e));
	ck_assert_msg(strstr(e.msg, "at most 240 bytes"), "%s", e.msg);
	ck_assert(!rt_manifest_add(&m, "r", RT_NPY_F32, RT_NPY_MAX_RANK + 1, NULL, &e));
	ck_assert_str_eq(e.msg, "'r': rank 9 (a .npy file has rank 0 to 8)");
	ck_assert(!rt_manifest_add(&m, "d", RT_NPY_DTYPE_COUNT, 0, NULL, &e));
	ck_assert_str_eq(e.msg, "'d': no .npy element type 5");
	ck_assert(rt_manifest_write(&m, scratch, &e));
	bool found;
	ck_assert_msg(rt_manifest_read(scratch, &r, &found, &e), "%s", e.msg);
	ck_assert(found);
	ck_assert_int_eq(r.kind, RT_DIR_CHECKPOINT);
	ck_assert_str_eq(r.model, "fashion");
	ck_assert_int_eq(r.step, 30);
	ck_assert_int_eq(r.seed, 1);
	ck_assert_int_eq(r.n, 2);
	const rt_manifest_tensor *t = rt_manifest_find(&r, "init.conv.w");
	ck_assert_ptr_nonnull(t);
	char s[64];
	rt_manifest_shape_str(t, s, sizeof s);
	ck_assert_str_eq(s, "f32[16,1,3,3]");
	rt_manifest_shape_str(rt_manifest_find(&r, "step"), s, sizeof s);
	ck_assert_str_eq(s, "i64[]");
	rt_manifest_free(&r);
	/* A name given twice: refused when the manifest is sealed, before it
	 * is written (names longer than 240 bytes never make a file). */
	name[RT_MANIFEST_MAX_NAME] = 0;
	ck_assert(rt_manifest_add(&m, name, RT_NPY_F32, 0, NULL, &e));
	ck_assert(rt_manifest_add(&m, "step", RT_NPY_I64, 0, NULL, &e));
	ck_assert(!rt_manifest_write(&m, scratch, &e));
	ck_assert_str_eq(e.msg, "two tensors named 'step'");
	rt_manifest_free(&m);
	/* A model name that is not one word is made one: it never stops a save. */
	rt_manifest_init(&m, RT_DIR_PARAMS);
	ck_assert(rt_manifest_set_model(&m, "my model\n", &e));
	ck_assert_str_eq(m.model, "my_model_");
	rt_manifest_free(&m);
	/* No manifest: found is false, and that is no error. */
	ck_assert(rt_manifest_read("/tmp", &r, &found, &e));
	ck_assert(!found);
	rt_manifest_free(&r);
	remove_tree(scratch);
}
END_TEST

START_TEST(test_manifest_errors)
{
	static const struct {
		const char *text, *msg;
	} cases[] = {
		{"", "m: truncated (it does not end with a newline)"},
		{"revc-manifest 1\nkind params", "m: truncated (it does not end with a newline)"},
		{"numpy 1\nkind params\n", "m: not a revc manifest (the first line must be 'revc-manifest 1')"},
		{"revc-manifest 2\nkind params\n", "m: format version 2; this revc reads version 1"},
		{"revc-manifest 1\n", "m: no kind line"},
		{"revc-manifest 1\nkind params\nkind params\n", "m:3: a second kind"},
		{"revc-manifest 1\nkind weights\n", "m:2: kind must be checkpoint, params, gradients or state"},
		{"revc-manifest 1\nkind params\ncolour blue\n", "m:3: unknown entry (expected tensor, kind, model, step, seed, ranks or batch)"},
		{"revc-manifest 1\nkind params\n\n", "m:3: empty line"},
		{"revc-manifest 1\nkind params\nstep -1\n", "m:3: expected a non-negative integer"},
		{"revc-manifest 1\nkind params\nstep 1 2\n", "m:3: unexpected text at the end of the line"},
		{"revc-manifest 1\nkind params\ntensor a f16[2]\n", "m:3: expected a type and shape such as f32[16,1,3,3]"},
		{"revc-manifest 1\nkind params\ntensor a f32[2,]\n", "m:3: expected a type and shape such as f32[16,1,3,3]"},
		{"revc-manifest 1\nkind params\ntensor a f32[1099511627776,2]\n", "m:3: expected a type and shape such as f32[16,1,3,3]"},
		{"revc-manifest 1\nkind params\ntensor a/b f32[2]\n", "m:3: expected a tensor name (one word without '/', at most 240 bytes)"},
		{"revc-manifest 1\nkind params\ntensor a f32[2]\ntensor a f32[2]\n", "m:4: a second entry for the same tensor"},
		{"revc-manifest 1\r\nkind params\n", "m:1: a NUL or carriage return"},
		/* mpi: a checkpoint of K processes */
		{"revc-manifest 1\nkind checkpoint\nranks 2\nranks 2\n", "m:4: a second ranks"},
		{"revc-manifest 1\nkind checkpoint\nbatch ten\n", "m:3: expected a non-negative integer"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		rt_manifest m;
		rt_err e;
		ck_assert_msg(!rt_manifest_parse(cases[i].text, strlen(cases[i].text), "m", &m, &e), "case %zu", i);
		ck_assert_str_eq(e.msg, cases[i].msg);
		ck_assert_int_eq(m.n, 0);
		ck_assert_ptr_null(m.model);
	}
}
END_TEST

/* mpi: ranks and batch round-trip, and are absent (-1) unless given. */
START_TEST(test_manifest_ranks)
{
	rt_manifest m, r;
	rt_err e;
	size_t len;
	rt_manifest_init(&m, RT_DIR_CHECKPOINT);
	char *text = rt_manifest_format(&m, &len, &e);
	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_null(strstr(text, "ranks"));
	ck_assert(rt_manifest_parse(text, len, "m", &r, &e));
	ck_assert(r.ranks == -1 && r.batch == -1);
	free(text);
	rt_manifest_free(&r);
	m.step = 30;
	m.seed = 1;
	m.ranks = 2;
	m.batch = 50;
	ck_assert_ptr_nonnull(text = rt_manifest_format(&m, &len, &e));
	ck_assert_ptr_nonnull(strstr(text, "step 30\nseed 1\nranks 2\nbatch 50\n"));
	ck_assert(rt_manifest_parse(text, len, "m", &r, &e));
	ck_assert(r.ranks == 2 && r.batch == 50 && r.step == 30);
	free(text);
	rt_manifest_free(&r);
	rt_manifest_free(&m);
}
END_TEST

/* The largest manifest parses in O(n log n) (the tcase's timeout is the
 * bound: the old reader took O(n^2) string compares); one entry or one
 * byte more is refused, and so is a writer's list that would not fit. */
START_TEST(test_manifest_big)
{
	enum { N = RT_MANIFEST_MAX_TENSORS };
	size_t cap = (size_t)5 << 20, len = 0;
	char *buf = malloc(cap), key[64];
	ck_assert_ptr_nonnull(buf);
	len += (size_t)sprintf(buf, "revc-manifest 1\nkind params\n");
	for (int i = 0; i < N; i++)
		len += (size_t)sprintf(buf + len, "tensor s%d.u%d.f.conv0.w f32[16,16,3,3]\n", i % 97, i);
	rt_manifest m;
	rt_err e;
	ck_assert_msg(rt_manifest_parse(buf, len, "m", &m, &e), "%s", e.msg);
	ck_assert_int_eq(m.n, N);
	for (int i = 0; i < N; i += 997) {
		snprintf(key, sizeof key, "s%d.u%d.f.conv0.w", i % 97, i);
		ck_assert_ptr_eq(rt_manifest_find(&m, key), &m.t[i]);
	}
	ck_assert_ptr_null(rt_manifest_find(&m, "s0.u1.f.conv0.w"));
	rt_manifest_free(&m);
	/* One more entry. */
	size_t more = len + (size_t)sprintf(buf + len, "tensor extra f32[1]\n");
	ck_assert(!rt_manifest_parse(buf, more, "m", &m, &e));
	ck_assert_str_eq(e.msg, "m:65539: more than 65536 tensors in one directory");
	/* The first entry again in place of the last: found by the sort. */
	size_t cut = (size_t)((const char *)memrchr(buf, '\n', len - 1) + 1 - buf);
	cut += (size_t)sprintf(buf + cut, "tensor s0.u0.f.conv0.w f32[16,16,3,3]\n");
	ck_assert(!rt_manifest_parse(buf, cut, "m", &m, &e));
	ck_assert_str_eq(e.msg, "m:65538: a second entry for the same tensor");
	/* More bytes than a manifest may have. */
	memset(buf, 'x', cap);
	buf[(4 << 20)] = '\n';
	ck_assert(!rt_manifest_parse(buf, (4 << 20) + 1, "m", &m, &e));
	ck_assert_str_eq(e.msg, "m: larger than the 4194304 bytes a manifest may take");
	free(buf);
	/* A writer's list that would format to more than that. */
	rt_manifest_init(&m, RT_DIR_PARAMS);
	char name[RT_MANIFEST_MAX_NAME + 1];
	memset(name, 'n', sizeof name);
	name[RT_MANIFEST_MAX_NAME] = 0;
	for (int i = 0; i < N; i++) {
		int k = snprintf(name, sizeof name, "%d", i);
		name[k] = 'n';
		ck_assert(rt_manifest_add(&m, name, RT_NPY_F32, 0, NULL, &e));
	}
	ck_assert(!rt_manifest_add(&m, "one.more", RT_NPY_F32, 0, NULL, &e));
	ck_assert_str_eq(e.msg, "more than 65536 tensors in one directory");
	size_t flen;
	ck_assert_ptr_null(rt_manifest_format(&m, &flen, &e));
	ck_assert_str_eq(e.msg, "the manifest of 65536 tensors would take more than the 4194304 bytes one may");
	rt_manifest_free(&m);
}
END_TEST

START_TEST(test_dir_replace_rules)
{
	make_scratch();
	rt_err e;
	char p[256];
	/* A new name, then its own output again. */
	snprintf(p, sizeof p, "%s/out", scratch);
	ck_assert(rt_dir_check(p, RT_DIR_PARAMS, &e));
	ck_assert_msg(write_dir(p, &e), "%s", e.msg);
	ck_assert(exists(p, "a.npy") && exists(p, "b.npy") && exists(p, RT_MANIFEST_NAME));
	ck_assert(rt_dir_check(p, RT_DIR_PARAMS, &e));
	ck_assert_msg(write_dir(p, &e), "%s", e.msg);
	ck_assert_int_eq(count_prefix(scratch, "out.tmp."), 0);
	/* One file revc did not write: refused, and kept. */
	put_file(p, "notes.txt", "mine");
	ck_assert(!write_dir(p, &e));
	ck_assert_msg(strstr(e.msg, "holds 'notes.txt', which revc did not write there"), "%s", e.msg);
	ck_assert(exists(p, "notes.txt") && exists(p, "a.npy"));
	ck_assert_int_eq(count_prefix(scratch, "out.tmp."), 0);
	/* A directory of the user's. */
	snprintf(p, sizeof p, "%s/user", scratch);
	mkdir(p, 0777);
	ck_assert(rt_dir_check(p, RT_DIR_PARAMS, &e)); /* empty: nothing to lose */
	put_file(p, "thesis.txt", "x");
	ck_assert(!rt_dir_check(p, RT_DIR_PARAMS, &e));
	ck_assert_msg(strstr(e.msg, "is not empty and is not a directory revc wrote (it has no revc-manifest.txt)"),
		"%s", e.msg);
	ck_assert(!write_dir(p, &e));
	ck_assert(exists(p, "thesis.txt") && !exists(p, "a.npy"));
	ck_assert_int_eq(count_prefix(scratch, "user.tmp."), 0);
	/* Names that cannot be renamed, a file. */
	ck_assert(!rt_dir_check(".", RT_DIR_PARAMS, &e));
	ck_assert_str_eq(e.msg, "'.' cannot be replaced as a whole: name the directory itself, not '/', '.' or '..'");
	ck_assert(!rt_dir_check("/", RT_DIR_PARAMS, &e));
	ck_assert(!rt_dir_check("a/..", RT_DIR_PARAMS, &e));
	ck_assert(!rt_dir_check("a/./", RT_DIR_PARAMS, &e));
	ck_assert(!rt_dir_check("", RT_DIR_PARAMS, &e));
	snprintf(p, sizeof p, "%s/user/thesis.txt", scratch);
	ck_assert(!rt_dir_check(p, RT_DIR_PARAMS, &e));
	ck_assert_msg(strstr(e.msg, "exists and is not a directory"), "%s", e.msg);
	snprintf(p, sizeof p, "%s/user/thesis.txt/x", scratch);
	ck_assert(!rt_dir_check(p, RT_DIR_PARAMS, &e));
	ck_assert_msg(strstr(e.msg, "cannot create a directory beside"), "%s", e.msg);
	/* Trailing slashes name the same directory. */
	snprintf(p, sizeof p, "%s/out//", scratch);
	ck_assert(!write_dir(p, &e)); /* out still holds notes.txt */
	remove_tree(scratch);
}
END_TEST

/* A directory scratch/name, with revc's marker if marked, and a file. */
static void temporary(const char *name, bool marked, const char *file)
{
	char t[256];
	snprintf(t, sizeof t, "%s/%s", scratch, name);
	ck_assert_int_eq(mkdir(t, 0777), 0);
	if (marked)
		put_file(t, RT_MANIFEST_NAME, "revc-manifest 1\nkind params\n");
	if (file)
		put_file(t, file, "x");
}

/* This executable's renameat2 stands in for libc's (the runtime is linked
 * in statically): with no_exchange set, RENAME_EXCHANGE fails as it does
 * on filesystems that lack it (some network and FUSE ones). */
static bool no_exchange;

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)
{
	if (no_exchange && (flags & RENAME_EXCHANGE)) {
		errno = EINVAL;
		return -1;
	}
	return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}

/* What else is refused, the modes a directory gets, a path too long for
 * a tensor's file, and the swap without RENAME_EXCHANGE. */
START_TEST(test_dir_kinds_modes_paths)
{
	make_scratch();
	rt_err e;
	char p[256], q[256];
	snprintf(p, sizeof p, "%s/out", scratch);
	ck_assert_msg(write_dir(p, &e), "%s", e.msg);
	/* A directory of another kind: a write of gradients or a checkpoint
	 * does not replace parameters. */
	ck_assert(!rt_dir_check(p, RT_DIR_GRADIENTS, &e));
	ck_assert_msg(strstr(e.msg, "holds parameters: refusing to replace it with gradients (revc grad --out)"),
		"%s", e.msg);
	rt_dir d;
	ck_assert(!rt_dir_begin(&d, p, RT_DIR_CHECKPOINT, NULL, &e));
	ck_assert_msg(strstr(e.msg, "refusing to replace it with a checkpoint (revc train --save)"), "%s", e.msg);
	ck_assert(exists(p, "a.npy"));
	/* A symbolic link, even to a directory revc may replace. */
	snprintf(q, sizeof q, "%s/link", scratch);
	ck_assert_int_eq(symlink("out", q), 0);
	ck_assert(!rt_dir_check(q, RT_DIR_PARAMS, &e));
	ck_assert_msg(strstr(e.msg, "link' is a symbolic link"), "%s", e.msg);
	/* Modes: a new directory's is 0777 less the umask (mkdtemp's is 0700),
	 * a replaced one keeps its own. */
	mode_t old = umask(022);
	snprintf(q, sizeof q, "%s/fresh", scratch);
	ck_assert_msg(write_dir(q, &e), "%s", e.msg);
	struct stat st;
	ck_assert_int_eq(lstat(q, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0755);
	ck_assert_int_eq(chmod(q, 0750), 0);
	ck_assert_msg(write_dir(q, &e), "%s", e.msg);
	ck_assert_int_eq(lstat(q, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0750);
	umask(old);
	/* Without RENAME_EXCHANGE: aside, in, removed; nothing left over. */
	no_exchange = true;
	put_file(scratch, "marker", "");
	ck_assert_int_eq(lstat(p, &st), 0);
	ino_t before = st.st_ino;
	bool ok = write_dir(p, &e);
	no_exchange = false;
	ck_assert_msg(ok, "%s", e.msg);
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert(st.st_ino != before && exists(p, "a.npy") && exists(p, RT_MANIFEST_NAME));
	ck_assert_int_eq(count_prefix(scratch, "out.old."), 0);
	ck_assert_int_eq(count_prefix(scratch, "out.tmp."), 0);
	/* A tensor's path longer than PATH_MAX: an error, not a name cut short
	 * (the directory's own name fits). */
	char deep[RT_PATH_MAX], part[201];
	memset(part, 'd', 200);
	part[200] = 0;
	int levels = 0, k = snprintf(deep, sizeof deep, "%s", scratch);
	while (k + 201 + 3 + 11 < RT_PATH_MAX) { /* until DIR/ck.tmp.XXXXXX/PART.npy cannot fit */
		k += snprintf(deep + k, sizeof deep - (size_t)k, "/%s", part);
		ck_assert_int_eq(mkdir(deep, 0777), 0);
		levels++;
	}
	snprintf(deep + k, sizeof deep - (size_t)k, "/ck");
	float v = 1;
	ck_assert_msg(rt_dir_begin(&d, deep, RT_DIR_PARAMS, NULL, &e), "%s", e.msg);
	ck_assert(!rt_dir_write_npy(&d, part, RT_NPY_F32, 0, NULL, &v, &e));
	ck_assert_msg(strncmp(e.msg, "path too long", 13) == 0, "%s", e.msg);
	rt_dir_abort(&d);
	for (; levels > 0; levels--) {
		deep[k] = 0;
		ck_assert_int_eq(rmdir(deep), 0);
		k -= 201;
	}
	remove_tree(scratch);
}
END_TEST

START_TEST(test_dir_stale_temporaries)
{
	make_scratch();
	rt_err e;
	char p[256], t[256];
	snprintf(p, sizeof p, "%s/ck", scratch);
	ck_assert(write_dir(p, &e));
	/* One being built right now (locked): kept while it is. */
	rt_dir busy;
	ck_assert(rt_dir_begin(&busy, p, RT_DIR_PARAMS, NULL, &e));
	/* Left by killed runs: a copy of a finished directory (the old one of a
	 * swap) and a temporary with only its marker and a half-written file. */
	snprintf(t, sizeof t, "%s/ck.tmp.Old123", scratch);
	ck_assert(write_dir(t, &e));
	temporary("ck.tmp.New456", true, "a.npy.tmp.Qw12er");
	temporary("ck.tmp.Cut000", false, NULL); /* killed inside rt_manifest_mark */
	snprintf(t, sizeof t, "%s/ck.tmp.Cut000", scratch);
	put_file(t, RT_MANIFEST_NAME, "");
	/* Not revc's: no marker, a file revc does not write, a directory
	 * inside, another name, a file. */
	temporary("ck.tmp.foobar", false, "notes.txt");
	temporary("ck.tmp.Txt789", true, "notes.txt");
	temporary("ck.tmp.Sub789", true, NULL);
	snprintf(t, sizeof t, "%s/ck.tmp.Sub789/keep", scratch);
	mkdir(t, 0777);
	temporary("ck.tmp.long1234", true, NULL);
	put_file(scratch, "ck.tmp.File12", "a file");
	ck_assert_int_eq(count_prefix(scratch, "ck.tmp."), 9);
	ck_assert(write_dir(p, &e));
	ck_assert(!exists(scratch, "ck.tmp.Old123") && !exists(scratch, "ck.tmp.New456") &&
		!exists(scratch, "ck.tmp.Cut000"));
	ck_assert(exists(scratch, "ck.tmp.foobar/notes.txt") && exists(scratch, "ck.tmp.Sub789/" RT_MANIFEST_NAME) &&
		exists(scratch, "ck.tmp.Txt789/notes.txt") && exists(scratch, "ck.tmp.long1234") &&
		exists(scratch, "ck.tmp.File12"));
	ck_assert(exists(scratch, busy.tmp + strlen(scratch) + 1));
	/* The busy one still commits, over the directory written meanwhile. */
	float v = 1;
	ck_assert(rt_dir_write_npy(&busy, "v", RT_NPY_F32, 0, NULL, &v, &e));
	ck_assert_msg(rt_dir_commit(&busy, &e), "%s", e.msg);
	ck_assert(exists(p, "v.npy") && !exists(p, "a.npy"));
	ck_assert_int_eq(count_prefix(scratch, "ck.tmp."), 5);
	remove_tree(scratch);
}
END_TEST

Suite *rt_dir_suite(void)
{
	Suite *s = suite_create("rt_dir");
	TCase *tc = tcase_create("dir");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_manifest_round_trip);
	tcase_add_test(tc, test_manifest_errors);
	tcase_add_test(tc, test_manifest_ranks);
	tcase_add_test(tc, test_manifest_big);
	tcase_add_test(tc, test_dir_replace_rules);
	tcase_add_test(tc, test_dir_stale_temporaries);
	tcase_add_test(tc, test_dir_kinds_modes_paths);
	suite_add_tcase(s, tc);
	return s;
}
