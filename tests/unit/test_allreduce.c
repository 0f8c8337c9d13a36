/* test_allreduce.c: data parallelism inside the step (passes/allreduce.c,
 * the allreduce, bn_share and bn_merge ops), without MPI.
 *
 * The oracle: a world of K identical replicas (every all-reduce multiplies
 * its buffer by K, as the sum of K equal buffers would be), each training
 * at batch b on the same b images, must take the step of ONE process at
 * batch K·b given those images repeated K times: the same mean loss, the
 * same gradients (summed over ranks, divided by K), the same synchronised
 * batch statistics and running statistics (whose unbiased count is K·b's).
 * Checked in f64 to 1e-10 relative per tensor after two steps, for store,
 * revnet and checkpoint, on the interpreter and the JIT, with the
 * gradients' sums blocking and as start/wait pairs, one tensor a sum and in
 * buckets (bucket_pack, bucket_unpack).  And in the singleton
 * world the pass forced on (ranks 1; blocking sums of one tensor, or
 * start/wait pairs of 64 KiB buckets) changes no bit.
 *
 * Linked against the static libraries, so rt_comm_set_world sets the world
 * the step runs on (librevc.so keeps its own copy private). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "revc.h"

#define FIXTURE_DIR "tests/data/fashion-b4"
#include "fixture_b4.h"

#define K_RANKS 2
#define B_LOCAL 2
/* fashion's 371 KB of gradients in several buckets of several tensors */
#define BUCKET ((int64_t)64 << 10)

/* ---- the world of K identical replicas ----------------------------------- */

static void times_k(rt_comm *c, void *buf, int64_t count, ir_dtype dt)
{
	for (int64_t i = 0; i < count; i++)
		if (dt == IR_F64)
			((double *)buf)[i] *= c->size;
		else
			((float *)buf)[i] *= (float)c->size;
}

static int64_t times_k_start(rt_comm *c, void *buf, int64_t count, ir_dtype dt)
{
	times_k(c, buf, count, dt);
	return 0;
}

static void no_wait(rt_comm *c, int64_t ticket) { (void)c, (void)ticket; }
static void no_bcast(rt_comm *c, void *buf, int64_t bytes, int root) { (void)c, (void)buf, (void)bytes, (void)root; }
static void no_barrier(rt_comm *c) { (void)c; }

static rt_comm replicas = {
	.rank = 0,
	.size = K_RANKS,
	.backend = "replicas",
	.allreduce_sum = times_k,
	.allreduce_start = times_k_start,
	.wait = no_wait,
	.bcast = no_bcast,
	.barrier = no_barrier,
};

/* ---- models -------------------------------------------------------------- */

static revc_model *fashion(int batch, int ranks, bool overlap, int64_t bucket, revc_strategy s, revc_dtype dt,
	revc_engine engine)
{
	char set[32];
	snprintf(set, sizeof set, "batch=%d", batch);
	const char *sets[1] = {set};
	revc_options o;
	revc_options_init(&o);
	o.dtype = dt;
	o.engine = engine;
	o.strategy = s;
	o.threads = 1;
	o.ranks = ranks;
	o.allreduce_overlap = overlap;
	o.bucket_bytes = bucket;
	return test_model("models/fashion.rev", sets, 1, &o, FIXTURE_DIR "/params");
}

/* Images 0 .. B_LOCAL-1 of the fixture, repeated `times` times. */
typedef struct {
	double xd[K_RANKS * B_LOCAL * 28 * 28];
	float xf[K_RANKS * B_LOCAL * 28 * 28];
	int32_t y[K_RANKS * B_LOCAL];
} batch_buf;

static revc_batch repeated(batch_buf *bb, const fixture *f, int times, revc_dtype dt)
{
	const int64_t img = 28 * 28;
	for (int t = 0; t < times; t++)
		for (int i = 0; i < B_LOCAL; i++) {
			memcpy(bb->xd + (t * B_LOCAL + i) * img, f->xd + i * img, (size_t)img * sizeof(double));
			memcpy(bb->xf + (t * B_LOCAL + i) * img, f->xf + i * img, (size_t)img * sizeof(float));
			bb->y[t * B_LOCAL + i] = f->y[i];
		}
	return (revc_batch){.x = dt == REVC_F64 ? (const void *)bb->xd : (const void *)bb->xf, .labels = bb->y,
		.n = times * B_LOCAL};
}

static void steps(revc_model *m, const revc_batch *b, int n, double *loss)
{
	revc_error *err = NULL;
	for (int k = 0; k < n; k++)
		ck_assert_msg(revc_train_step(m, b, 0.1, loss, &err), "%s", revc_error_message(err));
}

/* Every parameter and running statistic of a (f64) within rel of b's,
 * relative to b's largest element; returns how many tensors. */
static int compare(const revc_model *a, const revc_model *b, double rel, const char *what)
{
	ck_assert_int_eq(revc_param_count(a), revc_param_count(b));
	for (int i = 0; i < revc_param_count(a); i++) {
		revc_tensor p, q;
		ck_assert(revc_param_at(a, i, &p) && revc_param_at(b, i, &q));
		ck_assert_str_eq(p.name, q.name);
		double mx, diff = tensor_max_diff(&p, &q, &mx);
		ck_assert_msg(diff <= rel * mx, "%s: %s differs by %g of max %g", what, p.name, diff, mx);
	}
	return revc_param_count(a);
}

static const revc_strategy strategies[3] = {REVC_STORE, REVC_REVNET, REVC_CHECKPOINT};

/* _i: strategy (i % 3) on engine ((i / 3) % 2: interpreter, JIT), the
 * gradients' sums blocking ((i / 6) % 2 == 0) or as start/wait pairs, one
 * tensor a sum (i < 12) or in buckets of BUCKET bytes */
START_TEST(test_replicas_equal_one_process)
{
	revc_strategy s = strategies[_i % 3];
	revc_engine engine = (_i / 3) % 2 ? REVC_JIT : REVC_INTERP;
	bool overlap = (_i / 6) % 2;
	int64_t bucket = _i >= 12 ? BUCKET : 0;
	char what[64];
	snprintf(what, sizeof what, "%s on %s%s%s", revc_strategy_name(s), engine == REVC_JIT ? "jit" : "interp",
		overlap ? ", overlapped" : "", bucket ? ", bucketed" : "");
	fixture f;
	fixture_batch(&f, REVC_F64);
	batch_buf local, global;
	revc_batch bl = repeated(&local, &f, 1, REVC_F64), bg = repeated(&global, &f, K_RANKS, REVC_F64);

	rt_comm_set_world(NULL);
	revc_model *one = fashion(K_RANKS * B_LOCAL, 0, false, 0, s, REVC_F64, engine);
	double loss_one;
	steps(one, &bg, 2, &loss_one);

	rt_comm_set_world(&replicas);
	revc_model *rank = fashion(B_LOCAL, 0, overlap, bucket, s, REVC_F64, engine); /* ranks: the world's */
	double loss_rank;
	steps(rank, &bl, 2, &loss_rank);
	rt_comm_set_world(NULL);

	ck_assert_msg(fabs(loss_rank - loss_one) <= 1e-10 * fabs(loss_one), "%s: loss %.17g vs %.17g", what,
		loss_rank, loss_one);
	ck_assert_int_gt(compare(rank, one, 1e-10, what), 80);

	revc_model_free(rank);
	revc_model_free(one);
}
END_TEST

/* The singleton world: the pass forced on (ranks 1) gives the bits of the
 * step without it, f32 and f64 (_i / 6 % 2), the gradients' sums blocking
 * one tensor a sum (_i < 12) or as start/wait pairs of buckets. */
START_TEST(test_one_rank_bitwise)
{
	revc_strategy s = strategies[_i % 3];
	revc_engine engine = (_i / 3) % 2 ? REVC_JIT : REVC_INTERP;
	revc_dtype dt = (_i / 6) % 2 ? REVC_F64 : REVC_F32;
	bool overlap = _i >= 12;
	fixture f;
	fixture_batch(&f, dt);
	batch_buf bb;
	revc_batch b = repeated(&bb, &f, 1, dt);
	rt_comm_set_world(NULL);
	revc_model *off = fashion(B_LOCAL, 0, false, 0, s, dt, engine),
		   *on = fashion(B_LOCAL, 1, overlap, overlap ? BUCKET : 0, s, dt, engine);
	double l_off, l_on;
	steps(off, &b, 2, &l_off);
	steps(on, &b, 2, &l_on);
	ck_assert(l_off == l_on);
	for (int i = 0; i < revc_param_count(off); i++) {
		revc_tensor p, q;
		ck_assert(revc_param_at(off, i, &p) && revc_param_at(on, i, &q));
		/* (the store's order is docs/model.md's, not the schedule's) */
		ck_assert_str_eq(p.name, q.name);
		size_t bytes = (size_t)tensor_elems(&p) * (dt == REVC_F64 ? 8 : 4);
		ck_assert_msg(memcmp(p.data, q.data, bytes) == 0, "%s (%s, %s, %s%s) differs with the pass on", p.name,
			revc_strategy_name(s), engine == REVC_JIT ? "jit" : "interp", dt == REVC_F64 ? "f64" : "f32",
			overlap ? ", overlapped" : "");
	}
	revc_model_free(on);
	revc_model_free(off);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("allreduce");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 0);
	tcase_add_loop_test(tc, test_replicas_equal_one_process, 0, 24);
	tcase_add_loop_test(tc, test_one_rank_bitwise, 0, 24);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
