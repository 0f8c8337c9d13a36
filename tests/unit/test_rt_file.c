/* test_rt_file.c: whole-file reads and atomic writes. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt.h"
#include "runtime_suites.h"

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

START_TEST(test_write_then_read)
{
	char dir[] = "/tmp/revc-file-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/out.txt", dir);
	rt_err e;
	ck_assert(rt_file_write_atomic(path, "hello\n", 6, &e));
	char *data;
	size_t len;
	ck_assert(rt_file_read(path, 100, &data, &len, &e));
	ck_assert_int_eq(len, 6);
	ck_assert_str_eq(data, "hello\n");
	free(data);
	/* Too large for the limit. */
	ck_assert(!rt_file_read(path, 5, &data, &len, &e));
	ck_assert_ptr_nonnull(strstr(e.msg, "larger than 5 bytes"));
	ck_assert_int_eq(count_entries(dir), 1);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_abort_leaves_nothing)
{
	char dir[] = "/tmp/revc-file-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/out.txt", dir);
	rt_err e;
	ck_assert(rt_file_write_atomic(path, "old", 3, &e));
	rt_atomic a;
	ck_assert(rt_atomic_open(&a, path, &e));
	fputs("half of something new", a.f);
	rt_atomic_abort(&a);
	/* The old content survives and no temporary is left. */
	char *data;
	size_t len;
	ck_assert(rt_file_read(path, 100, &data, &len, &e));
	ck_assert_str_eq(data, "old");
	free(data);
	ck_assert_int_eq(count_entries(dir), 1);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_errors)
{
	rt_err e;
	char *data;
	size_t len;
	ck_assert(!rt_file_read("/nonexistent/x", 100, &data, &len, &e));
	ck_assert_str_eq(e.msg, "cannot open '/nonexistent/x': No such file or directory");
	ck_assert(!rt_file_read("/tmp", 100, &data, &len, &e));
	ck_assert_str_eq(e.msg, "'/tmp' is not a regular file");
	ck_assert(!rt_file_write_atomic("/nonexistent/dir/x", "a", 1, &e));
	ck_assert_ptr_nonnull(strstr(e.msg, "cannot write '/nonexistent/dir/x'"));
}
END_TEST

Suite *rt_file_suite(void)
{
	Suite *s = suite_create("rt_file");
	TCase *tc = tcase_create("file");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_write_then_read);
	tcase_add_test(tc, test_abort_leaves_nothing);
	tcase_add_test(tc, test_errors);
	suite_add_tcase(s, tc);
	return s;
}
