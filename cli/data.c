/* data.c: the --data option of train and eval: which dataset, loaded
 * within what --max-memory leaves after the plan, and checked against the
 * spec's input shape and classes. */
#include <string.h>

#include "cli.h"

/* Examples in the synthetic train and test sets. */
#define SYNTHETIC_TRAIN 6000
#define SYNTHETIC_TEST 1000

/* The limit b leaves, named for messages in buf. */
static const rt_data_limit *budget_limit(const cli_budget *b, rt_data_limit *lim, char *buf, size_t n)
{
	if (!b || b->limit < 0)
		return NULL;
	char left[32], limit[32], plan[32], data[32];
	/* (Never below 0: what is spent admits no more data, not any.) */
	lim->bytes = b->limit - b->plan - b->data > 0 ? b->limit - b->plan - b->data : 0;
	cli_human_bytes(left, sizeof left, lim->bytes);
	cli_human_bytes(limit, sizeof limit, b->limit);
	cli_human_bytes(plan, sizeof plan, b->plan);
	cli_human_bytes(data, sizeof data, b->data);
	snprintf(buf, n, "the %s left of --max-memory %s after the plan (%s)%s%s%s", left, limit, plan,
		b->data ? " and the training set (" : "", b->data ? data : "", b->data ? ")" : "");
	lim->what = buf;
	return lim;
}

bool cli_data_load(const char *which, const fe_spec *s, bool train, cli_budget *b, rt_dataset *d)
{
	rt_err e;
	bool ok;
	char what[256];
	rt_data_limit limit;
	const rt_data_limit *lim = budget_limit(b, &limit, what, sizeof what);
	const char *colon = strchr(which, ':');
	size_t kind = colon ? (size_t)(colon - which) : strlen(which);
	const char *dir = colon ? colon + 1 : NULL;
	if (kind == 9 && strncmp(which, "synthetic", 9) == 0 && !dir) {
		ok = rt_data_synthetic(train ? SYNTHETIC_TRAIN : SYNTHETIC_TEST, s->input[0], s->input[1],
			s->input[2], (int)s->classes, (uint64_t)s->seed + !train, lim, d, &e);
	} else if (kind == 13 && strncmp(which, "fashion-mnist", 13) == 0) {
		ok = rt_data_load_fashion(dir && *dir ? dir : NULL, train, lim, d, &e);
	} else if (kind == 7 && strncmp(which, "cifar10", 7) == 0 && dir && *dir) {
		ok = rt_data_load_cifar10(dir, train, lim, d, &e);
	} else {
		cli_error("unknown data '%s': use fashion-mnist[:DIR], cifar10:DIR or synthetic", which);
		return false;
	}
	if (!ok) {
		cli_error("%s", e.msg);
		return false;
	}
	if (d->c != s->input[0] || d->h != s->input[1] || d->w != s->input[2] || d->classes > s->classes) {
		cli_error("%s has %dx%dx%d images in %d classes, but the model takes %lldx%lldx%lld in %lld",
			which, d->c, d->h, d->w, d->classes, (long long)s->input[0], (long long)s->input[1],
			(long long)s->input[2], (long long)s->classes);
		rt_dataset_free(d);
		return false;
	}
	if (b)
		b->data += rt_dataset_bytes(d);
	return true;
}
