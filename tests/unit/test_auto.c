/* test_auto.c: strategy auto against every assignment on small chains.
 * For small fashion-like models (up to 6 units, via sets) and a
 * user-defined block, every assignment of decisions (each unit stored,
 * recomputed, rerun on its own, or, without a downsample, inverted) is
 * planned by the real planner, with the stem stored or recomputed (the
 * head stays stored: strategy auto does not decide it); then for 8
 * budgets per model (from the
 * lowest total of any assignment to the highest) revc_auto_choose's choice
 * must fit, and cost no more than store's or revnet's decisions where they
 * fit, and be the cheapest of all that fit (each miss is printed as a NOT
 * OPTIMAL line, and fails the model's check).  The oracle is the
 * enumeration, planned as revc mem plans: nothing of the program. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "revc.h"
#include "test_util.h"

typedef struct {
	char d[12];
	int64_t total;
	double cost;
} assignment;

static int total_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int assignments, budgets, suboptimal;

/* Decisions as revc reports them: without segment letters when every
 * segment is stored (S). */
static const char *reported(const char *d, char *buf)
{
	size_t o = 0;
	for (const char *p = d; *p; p++)
		if (*p != 'S' || strchr(d, 'R'))
			buf[o++] = *p;
	buf[o] = '\0';
	return buf;
}

/* Plans every assignment of m's units (letters from the store plan's
 * decisions: its length, and which units revnet may invert). */
static void check_model(const char *spec, const char *const *sets, int nsets)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", root(), spec);
	revc_error *err = NULL;
	revc_model *m = revc_model_from_file(path, sets, nsets, &err);
	ck_assert_msg(m, "%s", revc_error_message(err));
	revc_options o;
	revc_options_init(&o);
	revc_memory r;
	ck_assert_msg(revc_memory_plan(m, REVC_REVNET, &o, &r, &err), "%s", revc_error_message(err));
	char revnet[8];
	int nu = (int)strlen(r.decisions);
	ck_assert_int_le(nu, 6);
	ck_assert_int_ge(nu, 1);
	snprintf(revnet, sizeof revnet, "%s", r.decisions);
	/* The segments and their places, from the minimum-memory decisions
	 * (which spell every segment's letter when they recompute one; else
	 * only the units are decided). */
	revc_auto low;
	ck_assert_msg(revc_auto_minimum(m, &o, &low, &err), "%s", revc_error_message(err));
	int n = (int)strlen(low.decisions);
	ck_assert_int_le(n, 10);
	ck_assert_int_ge(n, nu);
	/* Letters per place: S, R for a segment; s, r, c, and i where revnet
	 * inverts for a unit. */
	const char *alpha[10];
	int na[10], idx[10] = {0}, count = 1;
	for (int k = 0, u = 0; k < n; k++) {
		bool seg = low.decisions[k] == 'S' || low.decisions[k] == 'R';
		/* The head (a segment after the last unit) stays stored. */
		alpha[k] = seg ? (u == nu ? "S" : "SR") : revnet[u++] == 'i' ? "srci" : "src";
		na[k] = (int)strlen(alpha[k]);
		count *= na[k];
	}
	char rb[16];
	assignment *a = calloc((size_t)count, sizeof *a);
	int64_t *totals = malloc((size_t)count * sizeof *totals);
	ck_assert(a && totals);
	for (int i = 0; i < count; i++) {
		for (int k = 0; k < n; k++)
			a[i].d[k] = alpha[k][idx[k]];
		a[i].d[n] = '\0';
		revc_options to = o;
		to.strategy = REVC_AUTO;
		to.decisions = a[i].d;
		ck_assert_msg(revc_memory_plan(m, REVC_AUTO, &to, &r, &err), "%s: %s", a[i].d, revc_error_message(err));
		ck_assert_str_eq(r.decisions, reported(a[i].d, rb));
		a[i].total = totals[i] = r.total_bytes;
		ck_assert_msg(revc_auto_cost(m, &o, a[i].d, &a[i].cost, &err), "%s", revc_error_message(err));
		for (int k = 0; k < n && ++idx[k] == na[k]; k++)
			idx[k] = 0;
	}
	assignments += count;
	/* Budgets: the lowest total, the highest, and between them. */
	qsort(totals, (size_t)count, sizeof *totals, total_cmp);
	int64_t lo = totals[0], hi = totals[count - 1];
	int64_t b[8] = {lo, totals[count / 8], totals[count / 4], totals[count / 2], (lo + hi) / 2,
		totals[3 * count / 4], hi - 1, hi};
	int checked = 0, was_suboptimal = suboptimal;
	for (int j = 0; j < 8; j++) {
		if (b[j] < lo || (j > 0 && b[j] == b[j - 1]))
			continue; /* the distinct budgets, each one some assignment fits */
		double best = -1;
		const char *best_d = NULL;
		for (int i = 0; i < count; i++)
			if (a[i].total <= b[j] && (best < 0 || a[i].cost < best)) {
				best = a[i].cost;
				best_d = a[i].d;
			}
		ck_assert(best_d);
		revc_auto au;
		bool ok = revc_auto_choose(m, &o, b[j], &au, &err);
		ck_assert_msg(ok, "%s, budget %lld (the cheapest that fits: %s): %s", spec, (long long)b[j], best_d,
			revc_error_message(err));
		double cost = -1;
		for (int i = 0; i < count; i++)
			if (strcmp(reported(a[i].d, rb), au.decisions) == 0) {
				cost = a[i].cost;
				ck_assert_int_eq(a[i].total, au.total_bytes);
			}
		ck_assert_msg(cost >= 0, "%s: auto chose %s, not among the assignments", spec, au.decisions);
		ck_assert_msg(au.total_bytes <= b[j], "%s, budget %lld: auto's %s plans %lld", spec, (long long)b[j],
			au.decisions, (long long)au.total_bytes);
		for (int i = 0; i < count; i++)
			if ((strspn(reported(a[i].d, rb), "s") == (size_t)nu || strcmp(rb, revnet) == 0) && a[i].total <= b[j])
				ck_assert_msg(cost <= a[i].cost * (1 + 1e-12),
					"%s, budget %lld: auto's %s costs %.0f FLOPs, more than %s (%.0f), which fits", spec,
					(long long)b[j], au.decisions, cost, a[i].d, a[i].cost);
		if (cost > best * (1 + 1e-12)) {
			printf("NOT OPTIMAL %s, budget %lld: auto's %s costs %.0f FLOPs (+%.1f%%), but %s fits and costs %.0f\n",
			spec, (long long)b[j], au.decisions, cost, 100.0 * (cost - best) / best, best_d, best);
			suboptimal++;
		}
		checked++;
	}
	budgets += checked;
	ck_assert_msg(checked >= 5, "%s: only %d distinct budgets", spec, checked);
	ck_assert_msg(suboptimal == was_suboptimal, "%s: %d budgets where auto is not the cheapest that fits (NOT OPTIMAL above)",
		spec, suboptimal - was_suboptimal);
	printf("%s%s%s: %d units, %d segments, %d assignments planned, %d budgets checked\n", spec, nsets ? " " : "",
		nsets ? sets[0] : "", nu, n - nu, count, checked);
	free(totals);
	free(a);
	revc_model_free(m);
}

START_TEST(fashion_like)
{
	static const char *const configs[][8] = {
		{"batch=4", "input=1,12,12", "init_filters=8", "units=1,1,1", "filters=8,16,32", NULL},
		{"batch=4", "input=1,12,12", "init_filters=8", "units=2,2,2", "filters=8,16,32", NULL},
		{"batch=4", "input=1,12,12", "init_filters=8", "units=3,3", "filters=8,16", "strides=1,2"},
		{"batch=4", "input=1,12,12", "init_filters=8", "units=6", "filters=8", "strides=1"},
		{"batch=4", "input=1,12,12", "init_filters=8", "units=2,2", "filters=8,16", "strides=1,2", NULL},
	};
	for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
		int ns = 0;
		while (ns < 8 && configs[c][ns])
			ns++;
		check_model("models/fashion.rev", configs[c], ns);
	}
}
END_TEST

START_TEST(user_block)
{
	static const char *const sets[] = {"batch=4", "input=1,12,12", "init_filters=8", "filters=8,16,32"};
	check_model("examples/plain.rev", sets, 4);
	printf("in all: %d assignments planned, %d budgets checked, %d not optimal\n", assignments, budgets, suboptimal);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("auto");
	TCase *t = tcase_create("optimal");
	tcase_set_timeout(t, 1200);
	tcase_add_test(t, fashion_like);
	tcase_add_test(t, user_block);
	suite_add_tcase(s, t);
	return test_run(s);
}
