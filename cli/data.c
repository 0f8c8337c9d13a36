/* data.c: the --data option of train and eval: which dataset, loaded and
 * checked against the spec's input shape and classes. */
#include <string.h>

#include "cli.h"

/* Examples in the synthetic train and test sets. */
#define SYNTHETIC_TRAIN 6000
#define SYNTHETIC_TEST 1000

bool cli_data_load(const char *which, const fe_spec *s, bool train, rt_dataset *d)
{
	rt_err e;
	bool ok;
	const char *colon = strchr(which, ':');
	size_t kind = colon ? (size_t)(colon - which) : strlen(which);
	const char *dir = colon ? colon + 1 : NULL;
	if (kind == 9 && strncmp(which, "synthetic", 9) == 0 && !dir) {
		/* rt_data_synthetic takes only shapes rt_dataset_alloc accepts. */
		int64_t n = train ? SYNTHETIC_TRAIN : SYNTHETIC_TEST, image, bytes;
		if (!ir_size_mul(s->input[0], s->input[1], &image) || !ir_size_mul(image, s->input[2], &image) ||
		    image > INT32_MAX || !ir_size_mul(n, image, &bytes) || bytes > RT_DATA_MAX_BYTES) {
			cli_error("synthetic data: %lld images of %lldx%lldx%lld take more than the 2^34 bytes a "
				"dataset may hold", (long long)n, (long long)s->input[0], (long long)s->input[1],
				(long long)s->input[2]);
			return false;
		}
		ok = rt_data_synthetic(n, (int)s->input[0], (int)s->input[1], (int)s->input[2], (int)s->classes,
			(uint64_t)s->seed + !train, d, &e);
	} else if (kind == 13 && strncmp(which, "fashion-mnist", 13) == 0) {
		ok = rt_data_load_fashion(dir && *dir ? dir : NULL, train, d, &e);
	} else if (kind == 7 && strncmp(which, "cifar10", 7) == 0 && dir && *dir) {
		ok = rt_data_load_cifar10(dir, train, d, &e);
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
	return true;
}
