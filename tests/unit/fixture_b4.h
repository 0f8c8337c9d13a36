/* fixture_b4.h: reading a batch-4 fixture of tests/data (fashion-b4,
 * revvit-b4: an independent implementation's parameters, batch and expected
 * tensors) in the unit tests that compare with one.  The includer defines
 * FIXTURE_DIR, the fixture's directory under the source root, first. */
#ifndef REVC_TEST_FIXTURE_B4_H
#define REVC_TEST_FIXTURE_B4_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "revc.h"
#include "rt.h"
#include "test_util.h"

#ifndef FIXTURE_DIR
#error "define FIXTURE_DIR before including fixture_b4.h"
#endif

/* DIR/NAME.npy of the fixture (DIR "." for its batch). */
static rt_npy read_npy(const char *dir, const char *name)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/" FIXTURE_DIR "/%s/%s.npy", root(), dir, name);
	rt_npy a;
	rt_err e;
	ck_assert_msg(rt_npy_read(path, &a, &e), "%s", e.msg);
	return a;
}

/* The fixture's batch in the model's dtype. */
typedef struct {
	double xd[4 * 28 * 28];
	float xf[4 * 28 * 28];
	int32_t y[4];
} fixture;

static revc_batch fixture_batch(fixture *f, revc_dtype dt)
{
	rt_npy xs = read_npy(".", "x"), ys = read_npy(".", "y");
	ck_assert_int_eq(xs.count, 4 * 28 * 28);
	ck_assert_int_eq(ys.count, 4);
	rt_npy_to_f64(&xs, f->xd);
	rt_npy_to_f32(&xs, f->xf);
	for (int i = 0; i < 4; i++)
		f->y[i] = (int32_t)((int64_t *)ys.data)[i];
	rt_npy_free(&xs);
	rt_npy_free(&ys);
	return (revc_batch){.x = dt == REVC_F64 ? (const void *)f->xd : (const void *)f->xf, .labels = f->y, .n = 4};
}

#endif
