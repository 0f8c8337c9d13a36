/* test_auto_plan.c: revc_auto_plan, auto's decisions chosen and then
 * planned in one call, against the two steps it replaces: revc_auto_choose
 * (or revc_auto_minimum) and then revc_memory_plan under the decisions they
 * gave.  On a small fashion: a budget that fits, one below the minimum
 * (REVC_ERR_BUDGET, as revc_auto_choose's), the minimum, the options' own
 * budget, decisions given (nothing chosen), a fixed strategy, and choosing
 * alone (no plan).  The oracle is the old path's figures, not the new
 * function's. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "revc.h"
#include "test_util.h"

static const char *const sets[] = {"batch=4", "input=1,12,12", "init_filters=8", "units=2,2,2", "filters=8,16,32"};

static revc_model *model(void)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/models/fashion.rev", root());
	revc_error *err = NULL;
	revc_model *m = revc_model_from_file(path, sets, 5, &err);
	ck_assert_msg(m, "%s", revc_error_message(err));
	return m;
}

/* The figures revc mem prints, equal. */
static void same_plan(const revc_memory *a, const revc_memory *b)
{
	ck_assert_int_eq(a->strategy, b->strategy);
	ck_assert_str_eq(a->decisions, b->decisions);
	ck_assert_int_eq(a->total_bytes, b->total_bytes);
	ck_assert_int_eq(a->arena_bytes, b->arena_bytes);
	ck_assert_int_eq(a->peak_bytes, b->peak_bytes);
	ck_assert_int_eq(a->peak_step, b->peak_step);
	ck_assert_int_eq(a->steps, b->steps);
	for (int c = 0; c < REVC_MEM_CATEGORIES; c++)
		ck_assert_int_eq(revc_memory_at(a, c), revc_memory_at(b, c));
}

/* The old path: choose (minimum, or within budget), then plan under o with
 * those decisions. */
static void old_path(revc_model *m, const revc_options *o, bool minimum, int64_t budget, revc_auto *au,
	revc_memory *r)
{
	revc_error *err = NULL;
	ck_assert_msg(minimum ? revc_auto_minimum(m, o, au, &err) : revc_auto_choose(m, o, budget, au, &err), "%s",
		revc_error_message(err));
	revc_options q = *o;
	q.strategy = REVC_AUTO;
	q.decisions = au->decisions;
	ck_assert_msg(revc_memory_plan(m, REVC_AUTO, &q, r, &err), "%s", revc_error_message(err));
}

static void same_choice(const revc_auto *a, const revc_auto *b)
{
	ck_assert_str_eq(a->decisions, b->decisions);
	ck_assert_int_eq(a->units, b->units);
	ck_assert_int_eq(a->total_bytes, b->total_bytes);
	ck_assert_int_eq(a->minimum_bytes, b->minimum_bytes);
	ck_assert_int_eq(a->minimum, b->minimum);
}

START_TEST(budgets)
{
	revc_model *m = model();
	revc_error *err = NULL;
	revc_options o;
	revc_options_init(&o);
	o.strategy = REVC_AUTO;
	revc_memory store, low_r, r, want;
	revc_auto low, au, want_au;
	ck_assert_msg(revc_memory_plan(m, REVC_STORE, &o, &store, &err), "%s", revc_error_message(err));
	old_path(m, &o, true, -1, &low, &low_r);
	ck_assert_int_lt(low_r.total_bytes, store.total_bytes); /* room for budgets between */

	/* The minimum. */
	o.minimum = true;
	ck_assert_msg(revc_auto_plan(m, REVC_AUTO, &o, -1, &au, &r, &err), "%s", revc_error_message(err));
	same_choice(&au, &low);
	same_plan(&r, &low_r);
	ck_assert(au.minimum);
	ck_assert_int_eq(r.total_bytes, au.minimum_bytes);
	o.minimum = false;

	/* Budgets that fit: the minimum's total, between, store's; and none. */
	int64_t fit[] = {low_r.total_bytes, (low_r.total_bytes + store.total_bytes) / 2, store.total_bytes, -1};
	for (int i = 0; i < 4; i++) {
		ck_assert_msg(revc_auto_plan(m, REVC_AUTO, &o, fit[i], &au, &r, &err), "budget %lld: %s",
			(long long)fit[i], revc_error_message(err));
		old_path(m, &o, false, fit[i], &want_au, &want);
		same_choice(&au, &want_au);
		same_plan(&r, &want);
		ck_assert_int_gt(au.units, 0);
		if (fit[i] >= 0)
			ck_assert_int_le(r.total_bytes, fit[i]);
		else
			ck_assert_int_eq(r.total_bytes, store.total_bytes); /* no budget: the fastest, store */
	}

	/* budget -1 takes the options': o.budget, else o.max_memory. */
	int64_t mid = fit[1];
	old_path(m, &o, false, mid, &want_au, &want);
	o.budget = mid;
	ck_assert_msg(revc_auto_plan(m, REVC_AUTO, &o, -1, &au, &r, &err), "%s", revc_error_message(err));
	same_choice(&au, &want_au);
	same_plan(&r, &want);
	o.budget = -1;
	o.max_memory = mid;
	ck_assert_msg(revc_auto_plan(m, REVC_AUTO, &o, -1, &au, &r, &err), "%s", revc_error_message(err));
	same_choice(&au, &want_au);
	same_plan(&r, &want);
	o.max_memory = -1;

	/* Choosing alone: the same decisions, nothing planned (out NULL). */
	ck_assert_msg(revc_auto_plan(m, REVC_AUTO, &o, mid, &au, NULL, &err), "%s", revc_error_message(err));
	same_choice(&au, &want_au);

	/* Below the minimum: a budget error, as revc_auto_choose gives. */
	int64_t under = low_r.total_bytes - 1;
	ck_assert(!revc_auto_plan(m, REVC_AUTO, &o, under, &au, &r, &err));
	ck_assert_int_eq(revc_error_kind_of(err), REVC_ERR_BUDGET);
	revc_error *old = NULL;
	ck_assert(!revc_auto_choose(m, &o, under, &want_au, &old));
	ck_assert_str_eq(revc_error_message(err), revc_error_message(old));
	revc_error_free(err);
	revc_error_free(old);
	err = NULL;
	revc_model_free(m);
}
END_TEST

START_TEST(nothing_chosen)
{
	revc_model *m = model();
	revc_error *err = NULL;
	revc_options o;
	revc_options_init(&o);
	revc_memory r, want;
	revc_auto au;
	/* A fixed strategy: revc_memory_plan's plan, au all zero. */
	for (int s = REVC_STORE; s < REVC_AUTO; s++) {
		ck_assert_msg(revc_memory_plan(m, (revc_strategy)s, &o, &want, &err), "%s", revc_error_message(err));
		memset(&au, 0x55, sizeof au);
		ck_assert_msg(revc_auto_plan(m, (revc_strategy)s, &o, -1, &au, &r, &err), "%s", revc_error_message(err));
		same_plan(&r, &want);
		ck_assert_int_eq(au.units, 0);
		ck_assert_str_eq(au.decisions, "");
	}
	/* Auto with decisions given: those, nothing chosen (even at a budget
	 * they would not fit: the budget is the chooser's). */
	o.strategy = REVC_AUTO;
	o.decisions = "ssssss";
	ck_assert_msg(revc_memory_plan(m, REVC_AUTO, &o, &want, &err), "%s", revc_error_message(err));
	ck_assert_msg(revc_auto_plan(m, REVC_AUTO, &o, 1, &au, &r, &err), "%s", revc_error_message(err));
	same_plan(&r, &want);
	ck_assert_int_eq(au.units, 0);
	/* au NULL: not wanted. */
	ck_assert_msg(revc_auto_plan(m, REVC_AUTO, &o, -1, NULL, &r, &err), "%s", revc_error_message(err));
	same_plan(&r, &want);
	revc_model_free(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("auto_plan");
	TCase *t = tcase_create("plan");
	tcase_set_timeout(t, 600);
	tcase_add_test(t, budgets);
	tcase_add_test(t, nothing_chosen);
	suite_add_tcase(s, t);
	return test_run(s);
}
