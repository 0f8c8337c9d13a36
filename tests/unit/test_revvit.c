/* test_revvit.c: the RevViT of the model language (models/revvit-fashion.rev,
 * the prelude models/lib/revvit.rev) through revc.h, against oracles that are
 * not revc's own code:
 * - the revvit-b4 fixture (tests/data/revvit-b4/README.md, an independent
 *   PyTorch implementation of docs/model.md): the loss and all 55
 *   gradients in f64 with both engines (max|a-b| <= 1e-9 max|b| per
 *   tensor), in f32 with both engines (angle <= 1 degree per tensor; the key
 *   part of each qkv.b, whose exact gradient is 0, checked near 0 instead),
 *   and one AdamW step in f64 against step_f64 and adam_f64;
 * - ordinary backprop (store) for the reversible rewrite: revnet and
 *   checkpoint give store's gradients to 1e-10 in f64, for RevViT and for
 *   docs/spec.md's user-defined block (examples/gelu-net.rev, a coupling of
 *   conv -> GELU -> conv). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "revc.h"
#include "rt.h"

#define FIXTURE_DIR "tests/data/revvit-b4"
#include "fixture_b4.h"

#define NPARAMS 55 /* the fixture's tensors: docs/model.md's RevViT names */
#define WIDTH 64   /* revvit-fashion's D: qkv.b's key part is D..2D-1 */

static revc_model *model(const char *file, const char *const *sets, int nsets, revc_dtype dt, revc_engine engine,
	revc_strategy strategy, const char *params)
{
	revc_options o;
	revc_options_init(&o);
	o.dtype = dt;
	o.engine = engine;
	o.strategy = strategy;
	return test_model(file, sets, nsets, &o, params);
}

static const char *b4_sets[] = {"batch=4"};

/* revvit-fashion at batch 4 with the fixture's parameters. */
static revc_model *revvit_b4(revc_dtype dt, revc_engine engine, revc_strategy strategy)
{
	return model("models/revvit-fashion.rev", b4_sets, 1, dt, engine, strategy, FIXTURE_DIR "/params");
}


static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The key part of qkv.b: exactly zero gradient (the fixture README). */
static bool key_bias(const char *name, int64_t i)
{
	return ends_with(name, ".qkv.b") && i >= WIDTH && i < 2 * WIDTH;
}

/* Tensor a against the fixture's float64 values: max|a-b| <= tol * max|b|. */
static void expect_close(const revc_tensor *a, const char *dir, const char *name, double tol)
{
	rt_npy want = read_npy(dir, name);
	int64_t n = tensor_elems(a);
	ck_assert_msg(n == want.count, "%s: %lld values, the fixture has %lld", name, (long long)n,
		(long long)want.count);
	double mx = 0, diff = 0;
	for (int64_t k = 0; k < n; k++) {
		double w = ((double *)want.data)[k];
		mx = fmax(mx, fabs(w));
		diff = fmax(diff, fabs(tensor_at(a, k) - w));
	}
	ck_assert_msg(diff <= tol * mx, "%s/%s: max|a-b| %g of max|b| %g", dir, name, diff, mx);
	rt_npy_free(&want);
}

/* The loss and the 55 gradients against grad_f64: f64 to 1e-9 of each
 * tensor's largest value; f32 by angle (<= 1 degree), with qkv.b's key part
 * left out of the angle and checked near zero (the fixture's own values
 * there are ~1e-18 of rounding). */
static void check_grads(revc_dtype dt, revc_engine engine)
{
	revc_model *m = revvit_b4(dt, engine, REVC_REVNET);
	fixture f;
	revc_batch b = fixture_batch(&f, dt);
	revc_error *err = NULL;
	double loss;
	ck_assert_msg(revc_grad(m, &b, &loss, &err), "%s", revc_error_message(err));
	rt_npy want_loss = read_npy("grad_f64", "loss");
	double wl = *(double *)want_loss.data;
	rt_npy_free(&want_loss);
	double ltol = dt == REVC_F64 ? 1e-12 : 1e-5;
	ck_assert_msg(fabs(loss - wl) <= ltol * fabs(wl), "loss %.17g vs %.17g", loss, wl);
	int checked = 0;
	double worst = 0;
	for (int i = 0; i < revc_param_count(m); i++) {
		revc_tensor p, g;
		ck_assert(revc_param_at(m, i, &p));
		if (!p.trainable)
			continue;
		ck_assert_msg(revc_grad_at(m, i, &g), "no gradient for %s", p.name);
		checked++;
		if (dt == REVC_F64) {
			expect_close(&g, "grad_f64", p.name, 1e-9);
			continue;
		}
		rt_npy want = read_npy("grad_f64", p.name);
		ck_assert_int_eq(tensor_elems(&g), want.count);
		double dot = 0, na = 0, nb = 0, key = 0;
		for (int64_t k = 0; k < want.count; k++) {
			double w = ((double *)want.data)[k], a = tensor_at(&g, k);
			if (key_bias(p.name, k)) {
				key = fmax(key, fabs(a));
				continue;
			}
			dot += a * w;
			na += a * a;
			nb += w * w;
		}
		rt_npy_free(&want);
		double angle = acos(fmin(1, dot / sqrt(na * nb))) * 180 / M_PI;
		worst = fmax(worst, angle);
		ck_assert_msg(angle <= 1, "%s: angle %g degrees", p.name, angle);
		ck_assert_msg(key <= 1e-6, "%s: the key bias has gradient %g, not ~0", p.name, key);
	}
	ck_assert_int_eq(checked, NPARAMS);
	revc_model_free(m);
}

START_TEST(test_grad_f64_interp)
{
	check_grads(REVC_F64, REVC_INTERP);
}
END_TEST

START_TEST(test_grad_f64_jit)
{
	check_grads(REVC_F64, REVC_JIT);
}
END_TEST

START_TEST(test_grad_f32_interp)
{
	check_grads(REVC_F32, REVC_INTERP);
}
END_TEST

START_TEST(test_grad_f32_jit)
{
	check_grads(REVC_F32, REVC_JIT);
}
END_TEST

/* One AdamW step (the preset's lr 1e-3 and weight decay 0.05, from m = v =
 * t = 0) against step_f64 and adam_f64, f64, to 1e-9 of each tensor's
 * largest value (the README: correct implementations agree to ~2e-12). */
START_TEST(test_adamw_step_f64)
{
	revc_model *m = revvit_b4(REVC_F64, _i ? REVC_INTERP : REVC_JIT, REVC_REVNET);
	fixture f;
	revc_batch b = fixture_batch(&f, REVC_F64);
	revc_error *err = NULL;
	double loss;
	ck_assert(revc_model_lr(m) == 1e-3);
	ck_assert_msg(revc_train_step(m, &b, 1e-3, &loss, &err), "%s", revc_error_message(err));
	int checked = 0;
	for (int i = 0; i < revc_param_count(m); i++) {
		revc_tensor p, s;
		ck_assert(revc_param_at(m, i, &p));
		if (!p.trainable)
			continue;
		expect_close(&p, "step_f64", p.name, 1e-9);
		char name[256];
		snprintf(name, sizeof name, "%s.m", p.name);
		ck_assert_msg(revc_param(m, name, &s), "no state %s", name);
		expect_close(&s, "adam_f64", name, 1e-9);
		snprintf(name, sizeof name, "%s.v", p.name);
		ck_assert_msg(revc_param(m, name, &s), "no state %s", name);
		expect_close(&s, "adam_f64", name, 1e-9);
		checked++;
	}
	ck_assert_int_eq(checked, NPARAMS);
	revc_model_free(m);
}
END_TEST

/* Gradients of every trainable tensor of a and b agree to tol of the
 * tensor's largest value; returns how many tensors. */
static int same_grads(const revc_model *a, const revc_model *b, double tol, const char *what)
{
	ck_assert_int_eq(revc_param_count(a), revc_param_count(b));
	int n = 0;
	for (int i = 0; i < revc_param_count(a); i++) {
		revc_tensor pa, ga, gb;
		ck_assert(revc_param_at(a, i, &pa));
		if (!pa.trainable)
			continue;
		ck_assert(revc_grad_at(a, i, &ga) && revc_grad_at(b, i, &gb));
		ck_assert_str_eq(ga.name, gb.name);
		double mx, diff = tensor_max_diff(&ga, &gb, &mx);
		ck_assert_msg(diff <= tol * mx, "%s, %s: max|a-b| %g of max|b| %g", what, ga.name, diff, mx);
		n++;
	}
	return n;
}

/* revnet and checkpoint against store, RevViT with the fixture's weights. */
START_TEST(test_strategies_revvit)
{
	fixture f;
	revc_batch b = fixture_batch(&f, REVC_F64);
	revc_model *store = revvit_b4(REVC_F64, REVC_JIT, REVC_STORE);
	revc_error *err = NULL;
	double ls, l;
	ck_assert_msg(revc_grad(store, &b, &ls, &err), "%s", revc_error_message(err));
	const revc_strategy other[] = {REVC_REVNET, REVC_CHECKPOINT};
	for (int s = 0; s < 2; s++) {
		revc_model *m = revvit_b4(REVC_F64, REVC_JIT, other[s]);
		ck_assert_msg(revc_grad(m, &b, &l, &err), "%s", revc_error_message(err));
		ck_assert_msg(fabs(l - ls) <= 1e-12 * fabs(ls), "loss %.17g vs store's %.17g", l, ls);
		ck_assert_int_eq(same_grads(m, store, 1e-10, revc_strategy_name(other[s])), NPARAMS);
		revc_model_free(m);
	}
	revc_model_free(store);
}
END_TEST

/* The same for docs/spec.md's user-defined block: RevNet's network with
 * F and G conv -> GELU -> conv (examples/gelu-net.rev), its own init. */
START_TEST(test_strategies_gelu_block)
{
	static const char *sets[] = {"batch=2", "units=2,1,1"};
	enum { N = 2, PIXELS = 28 * 28 };
	static double x[N * PIXELS];
	int32_t y[N] = {3, 7};
	uint64_t r = 12345;
	for (int i = 0; i < N * PIXELS; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (double)(r >> 11) / 9007199254740992.0;
	}
	revc_batch b = {.x = x, .labels = y, .n = N};
	revc_model *store = model("examples/gelu-net.rev", sets, 2, REVC_F64, REVC_JIT, REVC_STORE, NULL);
	revc_error *err = NULL;
	double ls, l;
	ck_assert_msg(revc_grad(store, &b, &ls, &err), "%s", revc_error_message(err));
	const revc_strategy other[] = {REVC_REVNET, REVC_CHECKPOINT};
	for (int s = 0; s < 2; s++) {
		revc_model *m = model("examples/gelu-net.rev", sets, 2, REVC_F64, REVC_JIT, other[s], NULL);
		ck_assert_msg(revc_grad(m, &b, &l, &err), "%s", revc_error_message(err));
		ck_assert_msg(fabs(l - ls) <= 1e-12 * fabs(ls), "loss %.17g vs store's %.17g", l, ls);
		ck_assert_int_gt(same_grads(m, store, 1e-10, revc_strategy_name(other[s])), 10);
		revc_model_free(m);
	}
	revc_model_free(store);
}
END_TEST

static Suite *revvit_suite(void)
{
	Suite *s = suite_create("revvit");
	TCase *tc = tcase_create("fixture");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_grad_f64_interp);
	tcase_add_test(tc, test_grad_f64_jit);
	tcase_add_test(tc, test_grad_f32_interp);
	tcase_add_test(tc, test_grad_f32_jit);
	tcase_add_loop_test(tc, test_adamw_step_f64, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("strategies");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_strategies_revvit);
	tcase_add_test(tc, test_strategies_gelu_block);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(revvit_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
