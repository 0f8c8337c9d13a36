/* spec_check.c: the checks that need the whole spec, run once after the
 * file and every --set (the values are already valid one by one:
 * spec_parse.c).  Afterwards the network of docs/model.md can be built from the
 * spec without further checks.
 *
 * Each error points at a value: the list element to blame where there is
 * one; where two keys conflict as equals (init_filters and the first stage's
 * filters, lr_list and lr_steps), the one written later (seq), so that an
 * override that breaks a good file is the one blamed. */
#include <string.h>

#include "lang.h"

static bool fail_at(ir_diags *d, ir_pos pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail_at(ir_diags *d, ir_pos pos, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ir_diag_addv(d, pos, fmt, ap);
	va_end(ap);
	return false;
}

/* apos (a value of key a) unless key b was written after a; then bpos. */
static ir_pos later(const fe_spec *s, fe_key a, ir_pos apos, fe_key b, ir_pos bpos)
{
	return s->seq[b] > s->seq[a] ? bpos : apos;
}

static int list_len(const fe_spec *s, fe_key k)
{
	return k == FE_KEY_UNITS ? s->nstages : k == FE_KEY_FILTERS ? s->nfilters : s->nstrides;
}

/* units, filters and strides give one value per stage.  When two agree, the
 * third is wrong; when all differ, the one written last. */
static bool check_stage_lists(const fe_spec *s, ir_diags *d)
{
	static const fe_key lists[] = {FE_KEY_UNITS, FE_KEY_FILTERS, FE_KEY_STRIDES};
	int n[3];
	for (int i = 0; i < 3; i++)
		n[i] = list_len(s, lists[i]);
	if (n[0] == n[1] && n[1] == n[2])
		return true;
	int bad = n[1] == n[2] ? 0 : n[0] == n[2] ? 1 : n[0] == n[1] ? 2 : -1;
	if (bad < 0) {
		bad = 0;
		for (int i = 1; i < 3; i++)
			if (s->seq[lists[i]] > s->seq[lists[bad]])
				bad = i;
	}
	int other = bad == 0 ? 1 : 0;
	return fail_at(d, s->vpos[lists[bad]], "'%s' has %d value%s but '%s' has %d (one per stage)",
		fe_key_name(lists[bad]), n[bad], n[bad] == 1 ? "" : "s", fe_key_name(lists[other]), n[other]);
}

/* Widths: every half width is filters/2, and the downsample D can only
 * zero-pad channels, so halves never shrink; a bottleneck's inner width is
 * filters/2/4. */
static bool check_widths(const fe_spec *s, ir_diags *d)
{
	if (s->init_filters % 2)
		return fail_at(d, s->vpos[FE_KEY_INIT_FILTERS], "init_filters must be even: %lld",
			(long long)s->init_filters);
	for (int i = 0; i < s->nstages; i++)
		if (s->filters[i] % 2)
			return fail_at(d, s->filters_pos[i], "filters must be even: %lld", (long long)s->filters[i]);
	for (int i = 0; i < s->nstages; i++) {
		int64_t in = (i == 0 ? s->init_filters : s->filters[i - 1]) / 2, out = s->filters[i] / 2;
		if (out < in) {
			ir_pos pos = s->filters_pos[i];
			if (i == 0)
				pos = later(s, FE_KEY_FILTERS, pos, FE_KEY_INIT_FILTERS, s->vpos[FE_KEY_INIT_FILTERS]);
			return fail_at(d, pos, "stage %d cannot pad %lld channels down to %lld", i, (long long)in,
				(long long)out);
		}
		if (s->block == FE_BLOCK_BOTTLENECK && out % 4)
			return fail_at(d, s->filters_pos[i],
				"stage %d: a bottleneck block needs filters/2 divisible by 4, but %lld/2 = %lld", i,
				(long long)s->filters[i], (long long)out);
	}
	return true;
}

/* The first unit of stage i average-pools with window = stride, VALID; for
 * its size to match F's SAME conv (ceil) the stride must divide it. */
static bool check_strides(const fe_spec *s, ir_diags *d)
{
	for (int i = 0; i < s->nstages; i++) {
		int64_t h, w, st = s->strides[i];
		fe_spec_stage_input(s, i, &h, &w, NULL);
		if (h % st == 0 && w % st == 0)
			continue;
		char size[64];
		if (h == w)
			snprintf(size, sizeof size, "%lld", (long long)h);
		else
			snprintf(size, sizeof size, "%lldx%lld", (long long)h, (long long)w);
		return fail_at(d, s->strides_pos[i], "stride %lld does not divide the spatial size %s entering stage %d",
			(long long)st, size, i);
	}
	return true;
}

static bool check_schedule(const fe_spec *s, ir_diags *d)
{
	if (s->nlr != s->nlr_steps + 1)
		return fail_at(d, later(s, FE_KEY_LR_LIST, s->vpos[FE_KEY_LR_LIST], FE_KEY_LR_STEPS, s->vpos[FE_KEY_LR_STEPS]),
			"lr_list has %d value%s and lr_steps has %d; lr_list needs exactly one more", s->nlr,
			s->nlr == 1 ? "" : "s", s->nlr_steps);
	for (int i = 1; i < s->nlr_steps; i++)
		if (s->lr_steps[i] <= s->lr_steps[i - 1])
			return fail_at(d, s->lr_steps_pos[i], "lr_steps must increase: %lld after %lld",
				(long long)s->lr_steps[i], (long long)s->lr_steps[i - 1]);
	if (!(s->momentum >= 0 && s->momentum < 1))
		return fail_at(d, s->vpos[FE_KEY_MOMENTUM], "momentum must be in [0, 1), found %g", s->momentum);
	if (s->weight_decay < 0)
		return fail_at(d, s->vpos[FE_KEY_WEIGHT_DECAY], "weight_decay must not be negative, found %g",
			s->weight_decay);
	if (!(s->beta1 >= 0 && s->beta1 < 1))
		return fail_at(d, s->vpos[FE_KEY_BETA1], "beta1 must be in [0, 1), found %g", s->beta1);
	if (!(s->beta2 >= 0 && s->beta2 < 1))
		return fail_at(d, s->vpos[FE_KEY_BETA2], "beta2 must be in [0, 1), found %g", s->beta2);
	return true;
}

/* What the IR and the passes take: kernels, strides and windows of at most
 * FE_MAX_WINDOW, and at most FE_MAX_UNITS units (the passes' work grows
 * faster than the graph; a typo of a few zeros must not run for hours).
 * Tensor sizes depend on the dtype: fe_spec_check_sizes. */
static bool check_limits(const fe_spec *s, ir_diags *d)
{
	if (s->init_kernel > FE_MAX_WINDOW)
		return fail_at(d, s->vpos[FE_KEY_INIT_KERNEL], "init_kernel must be at most %d, found %lld",
			FE_MAX_WINDOW, (long long)s->init_kernel);
	if (s->init_stride > FE_MAX_WINDOW)
		return fail_at(d, s->vpos[FE_KEY_INIT_STRIDE], "init_stride must be at most %d, found %lld",
			FE_MAX_WINDOW, (long long)s->init_stride);
	int64_t units = 0;
	for (int i = 0; i < s->nstages; i++) {
		if (s->strides[i] > FE_MAX_WINDOW)
			return fail_at(d, s->strides_pos[i], "strides must be at most %d, found %lld", FE_MAX_WINDOW,
				(long long)s->strides[i]);
		units += s->units[i];
	}
	if (units > FE_MAX_UNITS)
		return fail_at(d, s->vpos[FE_KEY_UNITS], "%lld units in all, more than the %d revc builds",
			(long long)units, FE_MAX_UNITS);
	return true;
}

/* The RevViT network (docs/model.md): one stage, so units is one integer;
 * patches tile the image; the heads divide the width. */
static bool check_revvit(const fe_spec *s, ir_diags *d)
{
	if (s->nstages != 1)
		return fail_at(d, s->vpos[FE_KEY_UNITS], "network revvit has one stage: units is one integer, found %d "
			"values", s->nstages);
	if (s->patch > FE_MAX_WINDOW)
		return fail_at(d, s->vpos[FE_KEY_PATCH], "patch must be at most %d, found %lld", FE_MAX_WINDOW,
			(long long)s->patch);
	for (int i = 1; i < 3; i++)
		if (s->input[i] % s->patch)
			return fail_at(d, later(s, FE_KEY_INPUT, s->input_pos[i], FE_KEY_PATCH, s->vpos[FE_KEY_PATCH]),
				"patch %lld does not divide the input %s %lld", (long long)s->patch, i == 1 ? "height" : "width",
				(long long)s->input[i]);
	if (s->width % s->heads)
		return fail_at(d, later(s, FE_KEY_WIDTH, s->vpos[FE_KEY_WIDTH], FE_KEY_HEADS, s->vpos[FE_KEY_HEADS]),
			"width %lld is not a multiple of heads %lld", (long long)s->width, (long long)s->heads);
	return true;
}

bool fe_spec_check(const fe_spec *s, ir_diags *d)
{
	/* A spec from fe_spec_parse has them all; one built in code may not. */
	for (int k = 0; k < FE_KEY_COUNT; k++)
		if (fe_spec_needs_key(s, (fe_key)k) && s->seq[k] == 0)
			return fail_at(d, (ir_pos){NULL, 0, 0}, "missing required key '%s'", fe_key_name((fe_key)k));
	if (s->classes < 2)
		return fail_at(d, s->vpos[FE_KEY_CLASSES], "classes must be at least 2, found %lld",
			(long long)s->classes);
	if (s->network == FE_NET_REVVIT)
		return check_revvit(s, d) && check_limits(s, d) && check_schedule(s, d) &&
			fe_lang_lower(s, NULL, IR_F32, FE_LOWER_TRAIN, false, d);
	return check_stage_lists(s, d) && check_limits(s, d) && check_widths(s, d) && check_strides(s, d) &&
		check_schedule(s, d) && fe_lang_lower(s, NULL, IR_F32, FE_LOWER_TRAIN, false, d);
}

bool fe_settings_check(const fe_spec *s, ir_diags *d)
{
	return check_schedule(s, d);
}
