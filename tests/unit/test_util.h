/* test_util.h: what the unit tests of librevc through revc.h share (the
 * driver's, RevViT's, data parallelism's, auto's): the source root, a spec
 * compiled and its parameters loaded, a tensor's values compared with
 * another's, and a suite run. */
#ifndef REVC_TEST_UTIL_H
#define REVC_TEST_UTIL_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "revc.h"

/* The source tree (meson sets REVC_SOURCE_ROOT; else the working directory). */
static inline const char *root(void)
{
	const char *r = getenv("REVC_SOURCE_ROOT");
	return r ? r : ".";
}

/* The spec file (relative to the root) with sets, compiled under o (NULL:
 * defaults), with the parameters of the directory params (relative to the
 * root) loaded unless params is NULL. */
static inline revc_model *test_model(const char *file, const char *const *sets, int nsets, const revc_options *o,
	const char *params)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", root(), file);
	revc_error *err = NULL;
	revc_model *m = revc_model_from_file(path, sets, nsets, &err);
	ck_assert_msg(m, "%s", revc_error_message(err));
	ck_assert_msg(revc_model_compile(m, o, &err), "%s", revc_error_message(err));
	if (params) {
		snprintf(path, sizeof path, "%s/%s", root(), params);
		ck_assert_msg(revc_load(m, path, NULL, &err), "%s", revc_error_message(err));
	}
	return m;
}

static inline int64_t tensor_elems(const revc_tensor *t)
{
	int64_t n = 1;
	for (int k = 0; k < t->rank; k++)
		n *= t->dim[k];
	return n;
}

static inline double tensor_at(const revc_tensor *t, int64_t i)
{
	return t->dtype == REVC_F64 ? ((const double *)t->data)[i] : (double)((const float *)t->data)[i];
}

/* max|a-b| over the elements of a and b (as many of each), and max|b| into
 * *max_b. */
static inline double tensor_max_diff(const revc_tensor *a, const revc_tensor *b, double *max_b)
{
	int64_t n = tensor_elems(a);
	ck_assert_int_eq(n, tensor_elems(b));
	double mx = 0, diff = 0;
	for (int64_t k = 0; k < n; k++) {
		mx = fmax(mx, fabs(tensor_at(b, k)));
		diff = fmax(diff, fabs(tensor_at(a, k) - tensor_at(b, k)));
	}
	*max_b = mx;
	return diff;
}

/* Runs s's tests in this process (no fork per test): main's exit status. */
static inline int test_run(Suite *s)
{
	SRunner *r = srunner_create(s);
	srunner_set_fork_status(r, CK_NOFORK);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
