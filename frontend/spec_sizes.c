/* spec_sizes.c: the RevNet presets' tensors against IR_MAX_BYTES, checked
 * from the keys before anything is built, so a spec that would make a
 * tensor too large is blamed on the key written last, with a message naming
 * the tensor (docs/spec.md, "Checks on the whole spec").  Networks of the
 * model language get the same check from their lowering (lang_lower.c),
 * which fe_spec_check_sizes runs after this one. */
#include <stdio.h>
#include <string.h>

#include "lang.h"


/* Bit k: spec key k (FE_KEY_*); which keys make a tensor as large as it is. */
#define K(key) (1u << FE_KEY_##key)

typedef struct {
	const fe_spec *s;
	ir_dtype dt;
	ir_diags *d;
	int stage; /* the stage whose filters value to blame, or -1 */
} sizer;

/* The value of key k as written, for messages: a list in full, except
 * filters, where the stage's element is the one to blame. */
static void key_value(const sizer *z, fe_key k, char *buf, size_t n)
{
	const fe_spec *s = z->s;
	if (k == FE_KEY_INPUT)
		snprintf(buf, n, "%lld,%lld,%lld", (long long)s->input[0], (long long)s->input[1],
			(long long)s->input[2]);
	else if (k == FE_KEY_FILTERS)
		snprintf(buf, n, "%lld", (long long)s->filters[z->stage < 0 ? 0 : z->stage]);
	else
		snprintf(buf, n, "%lld", (long long)(k == FE_KEY_BATCH ? s->batch : k == FE_KEY_CLASSES ? s->classes
			: k == FE_KEY_INIT_FILTERS ? s->init_filters : s->init_kernel));
}

/* Checks one tensor the network will hold.  When it is larger than the IR
 * allows, blames the key among `keys` that was written last (an override
 * that breaks a good file is the one to report), at its value. */
static bool fits(const sizer *z, unsigned keys, const char *what, ir_dtype dt, int rank,
	const int64_t *dims)
{
	ir_type t = ir_type_make(dt, rank, dims);
	if (ir_type_size_ok(&t))
		return true;
	const fe_spec *s = z->s;
	int blame = -1;
	for (int k = 0; k < FE_KEY_COUNT; k++)
		if ((keys & (1u << k)) && (blame < 0 || s->seq[k] >= s->seq[blame]))
			blame = k;
	ir_pos pos = blame == FE_KEY_FILTERS && z->stage >= 0 ? s->filters_pos[z->stage] : s->vpos[blame];
	char type[160], value[80];
	ir_type_str(&t, type, sizeof type);
	key_value(z, (fe_key)blame, value, sizeof value);
	ir_diag_add(z->d, pos, "%s %s makes %s %s larger than 2^40 bytes", fe_key_name((fe_key)blame), value, what,
		type);
	return false;
}

/* An activation [N, c, h, w] and a conv weight [cout, cin, k, k]. */
static bool act(const sizer *z, unsigned keys, const char *what, int64_t c, int64_t h, int64_t w)
{
	int64_t dims[4] = {z->s->batch, c, h, w};
	return fits(z, keys | K(BATCH) | K(INPUT), what, z->dt, 4, dims);
}

static bool weight(const sizer *z, unsigned keys, const char *what, int64_t cout, int64_t cin, int64_t k)
{
	int64_t dims[4] = {cout, cin, k, k};
	return fits(z, keys, what, z->dt, 4, dims);
}

static bool revnet_sizes(const fe_spec *s, ir_dtype dt, ir_diags *d)
{
	sizer z = {s, dt, d, -1};
	int64_t n = s->batch, c = s->input[0], h = s->input[1], w = s->input[2], f0 = s->init_filters;
	if (!act(&z, 0, "the input tensor", c, h, w) || !fits(&z, K(BATCH), "the labels", IR_I32, 1, &n))
		return false;
	int64_t h0 = (h + s->init_stride - 1) / s->init_stride, w0 = (w + s->init_stride - 1) / s->init_stride;
	if (!weight(&z, K(INIT_FILTERS) | K(INPUT) | K(INIT_KERNEL), "the weight init.conv.w", f0, c,
		s->init_kernel) || !act(&z, K(INIT_FILTERS), "the output of init.conv", f0, h0, w0))
		return false;
	/* Within a stage the largest tensors are those of its first unit: its
	 * input, F's intermediates at the strided size, and the outputs. */
	bool bottleneck = s->block == FE_BLOCK_BOTTLENECK;
	for (int st = 0; st < s->nstages; st++) {
		int64_t hs, ws, half_in, half = s->filters[st] / 2, inner = bottleneck ? half / 4 : half;
		fe_spec_stage_input(s, st, &hs, &ws, &half_in);
		int64_t ho = hs / s->strides[st], wo = ws / s->strides[st];
		unsigned in_keys = st == 0 ? K(INIT_FILTERS) : K(FILTERS);
		char what[96];
		z.stage = st == 0 ? -1 : st - 1;
		snprintf(what, sizeof what, "the input of stage %d", st);
		if (!act(&z, in_keys, what, half_in, hs, ws))
			return false;
		z.stage = st;
		snprintf(what, sizeof what, "the weight s%d.u0.f.conv0.w", st);
		if (!weight(&z, K(FILTERS) | in_keys, what, inner, half_in, bottleneck ? 1 : 3))
			return false;
		snprintf(what, sizeof what, "the weight s%d.u0.g.conv%d.w", st, bottleneck ? 1 : 0);
		if (!weight(&z, K(FILTERS), what, inner, bottleneck ? inner : half, 3))
			return false;
		snprintf(what, sizeof what, "the output of s%d.u0.f.conv0", st);
		if (!act(&z, K(FILTERS), what, inner, ho, wo))
			return false;
		snprintf(what, sizeof what, "the output of unit s%d.u0", st);
		if (!act(&z, K(FILTERS), what, half, ho, wo))
			return false;
	}
	int64_t hf, wf, half;
	fe_spec_stage_input(s, s->nstages, &hf, &wf, &half);
	int64_t dw[2] = {s->classes, 2 * half}, logits[2] = {n, s->classes};
	z.stage = s->nstages - 1;
	return act(&z, K(FILTERS), "the input of the final block", 2 * half, hf, wf) &&
		fits(&z, K(CLASSES) | K(FILTERS), "the weight final.dense.w", dt, 2, dw) &&
		fits(&z, K(CLASSES) | K(BATCH), "the logits", dt, 2, logits);
}

#undef K

bool fe_spec_check_sizes(const fe_spec *s, ir_dtype dt, ir_diags *d)
{
	if (s->network == FE_NET_REVNET && s->block != FE_BLOCK_DEF && !s->own_network && !revnet_sizes(s, dt, d))
		return false;
	return fe_lang_lower(s, NULL, dt, FE_LOWER_TRAIN, true, d);
}

bool fe_spec_too_large(const fe_spec *s, ir_dtype dt)
{
	ir_diags d;
	ir_diags_init(&d);
	bool ok = fe_lang_lower(s, NULL, dt, FE_LOWER_TRAIN, false, &d);
	ir_diags_free(&d);
	return ok;
}
