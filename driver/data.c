/* data.c: datasets for a model: which one ("fashion-mnist[:DIR]",
 * "cifar10:DIR", "synthetic"), loaded within what max_memory leaves after
 * the plan and the datasets loaded before, and checked against the spec's
 * input shape and classes; and the evaluation over a whole one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Examples in the synthetic train and test sets. */
#define SYNTHETIC_TRAIN 6000
#define SYNTHETIC_TEST 1000

/* The limit max_memory leaves, named for messages in buf. */
static const rt_data_limit *budget_limit(const revc_model *m, rt_data_limit *lim, char *buf, size_t n)
{
	int64_t limit = m->opts.max_memory;
	if (limit < 0)
		return NULL;
	ir_graph *graphs[DRV_GRAPHS];
	int ng = 0;
	for (int k = 0; k < DRV_GRAPHS; k++)
		if (m->g[k])
			graphs[ng++] = m->g[k];
	int64_t plan = ng ? drv_plan_bytes(graphs, ng, NULL) : 0, data = m->data_bytes;
	char left[32], lim_s[32], plan_s[32], data_s[32];
	/* (Never below 0: what is spent admits no more data, not any.) */
	lim->bytes = limit - plan - data > 0 ? limit - plan - data : 0;
	revc_format_bytes(left, sizeof left, lim->bytes);
	revc_format_bytes(lim_s, sizeof lim_s, limit);
	revc_format_bytes(plan_s, sizeof plan_s, plan);
	revc_format_bytes(data_s, sizeof data_s, data);
	snprintf(buf, n, "the %s left of --max-memory %s after the plan (%s)%s%s%s", left, lim_s, plan_s,
		data ? " and the training set (" : "", data ? data_s : "", data ? ")" : "");
	lim->what = buf;
	return lim;
}

static bool load(const revc_model *m, const char *which, bool train, rt_dataset *d, revc_error **err)
{
	const fe_spec *s = &m->spec.spec;
	rt_err e;
	bool ok;
	char what[256];
	rt_data_limit limit;
	const rt_data_limit *lim = budget_limit(m, &limit, what, sizeof what);
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
		return drv_errorf(err, REVC_ERR_USER, "unknown data '%s': use fashion-mnist[:DIR], cifar10:DIR or synthetic",
			which);
	}
	if (!ok)
		return drv_error_rt(err, &e);
	if (d->c != s->input[0] || d->h != s->input[1] || d->w != s->input[2] || d->classes > s->classes) {
		drv_errorf(err, REVC_ERR_USER, "%s has %dx%dx%d images in %d classes, but the model takes %lldx%lldx%lld in %lld",
			which, d->c, d->h, d->w, d->classes, (long long)s->input[0], (long long)s->input[1],
			(long long)s->input[2], (long long)s->classes);
		rt_dataset_free(d);
		return false;
	}
	return true;
}

revc_dataset *revc_dataset_load(revc_model *m, const char *which, bool train, revc_error **err)
{
	if (!drv_model_settings(m) && !which) {
		drv_no_settings(m, "the default dataset", err);
		return NULL;
	}
	revc_dataset *d = calloc(1, sizeof *d);
	if (!d)
		IR_DIE("out of memory");
	which = which ? which : m->spec.spec.dataset;
	snprintf(d->name, sizeof d->name, "%s", which);
	if (!load(m, which, train, &d->d, err)) {
		free(d);
		return NULL;
	}
	m->data_bytes += rt_dataset_bytes(&d->d);
	return d;
}

int64_t revc_dataset_count(const revc_dataset *d)
{
	return d->d.n;
}

const char *revc_dataset_name(const revc_dataset *d)
{
	return d->name;
}

void revc_dataset_free(revc_dataset *d)
{
	if (!d)
		return;
	rt_dataset_free(&d->d);
	free(d);
}

bool revc_evaluate(revc_model *m, const revc_dataset *d, double *loss, double *accuracy, revc_error **err)
{
	if (!revc_model_prepare(m, err))
		return false;
	if (!m->x[DRV_EVAL])
		return drv_errorf(err, REVC_ERR_USAGE, "%s has no compiled evaluation graph", m->name);
	rt_err e;
	int64_t bad;
	if (!rt_evaluate(m->x[DRV_EVAL], &d->d, loss, accuracy, &bad, &e))
		return drv_error_rt(err, &e);
	if (bad > 0) { /* no plausible accuracy from broken outputs */
		rt_err why;
		rt_error_nonfinite_logits(&e, "the loss", *loss, bad, d->d.n);
		if (!rt_store_check_finite(&m->store, m->loaded[0] ? m->loaded : NULL, &why))
			rt_err_appendf(&e, "; %s", why.msg);
		return drv_error_rt(err, &e);
	}
	return true;
}
