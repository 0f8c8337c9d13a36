/* spec.c: the key table, defaults, storing an assignment into a spec, and
 * the sizes and schedule derived from a checked spec. */
#include <stdio.h>
#include <string.h>

#include "lang.h"

const fe_key_info fe_keys[FE_KEY_COUNT] = {
#define FE_KEY(name, ENUM, kind, nmin, nmax, def, req, help) \
	[FE_KEY_##ENUM] = {#name, FE_VK_##kind, nmin, nmax, def, FE_REQ_##req, help},
#include "keys.def"
#undef FE_KEY
};

/* fe_value holds any key's list; the element position arrays hold theirs. */
#define FE_KEY(name, ENUM, kind, nmin, nmax, def, req, help) \
	_Static_assert((nmin) >= 1 && (nmin) <= (nmax) && (nmax) <= FE_MAX_VALUES, #name ": list bounds");
#include "keys.def"
#undef FE_KEY
_Static_assert(FE_KEY_COUNT == sizeof fe_keys / sizeof fe_keys[0], "key table");

static const char *const block_names[] = {"basic", "bottleneck"};
_Static_assert(sizeof block_names / sizeof block_names[0] == FE_BLOCK_COUNT, "block names");
static const char *const dataset_names[] = {"synthetic", "fashion-mnist", "cifar10"};
_Static_assert(sizeof dataset_names / sizeof dataset_names[0] == FE_DATA_COUNT, "dataset names");

static const char *const optimizer_names[] = {"momentum", "adamw"};
_Static_assert(sizeof optimizer_names / sizeof optimizer_names[0] == FE_OPT_COUNT, "optimizer names");

const char *fe_optimizer_name(fe_optimizer o)
{
	IR_ASSERT(o >= 0 && o < FE_OPT_COUNT);
	return optimizer_names[o];
}

static const char *const network_names[] = {"revnet", "revvit"};
_Static_assert(sizeof network_names / sizeof network_names[0] == FE_NET_COUNT, "network names");

const char *fe_network_name(fe_network n)
{
	IR_ASSERT(n >= 0 && n < FE_NET_COUNT);
	return network_names[n];
}

const char *fe_block_name(fe_block b)
{
	IR_ASSERT(b >= 0 && b < FE_BLOCK_COUNT);
	return block_names[b];
}

const char *fe_dataset_name(fe_dataset k)
{
	IR_ASSERT(k >= 0 && k < FE_DATA_COUNT);
	return dataset_names[k];
}

const char *fe_key_name(fe_key k)
{
	IR_ASSERT(k >= 0 && k < FE_KEY_COUNT);
	return fe_keys[k].name;
}

const char *fe_key_help(fe_key k)
{
	IR_ASSERT(k >= 0 && k < FE_KEY_COUNT);
	return fe_keys[k].help;
}

const char *fe_key_default(fe_key k)
{
	IR_ASSERT(k >= 0 && k < FE_KEY_COUNT);
	return fe_keys[k].def;
}

bool fe_key_required(fe_key k)
{
	IR_ASSERT(k >= 0 && k < FE_KEY_COUNT);
	return fe_keys[k].req != 0;
}

bool fe_spec_needs_key(const fe_spec *s, fe_key k)
{
	IR_ASSERT(k >= 0 && k < FE_KEY_COUNT && s->network >= 0 && s->network < FE_NET_COUNT);
	return fe_keys[k].req >> s->network & 1;
}

/* The keys an IR file's training settings may hold: how to train, not
 * what the network is (the graph says that). */
bool fe_key_is_setting(fe_key k)
{
	switch (k) {
	case FE_KEY_BATCH:
	case FE_KEY_LR:
	case FE_KEY_LR_STEPS:
	case FE_KEY_LR_LIST:
	case FE_KEY_MOMENTUM:
	case FE_KEY_WEIGHT_DECAY:
	case FE_KEY_STEPS:
	case FE_KEY_EPOCHS:
	case FE_KEY_SEED:
	case FE_KEY_DATASET:
	case FE_KEY_OPTIMIZER:
	case FE_KEY_BETA1:
	case FE_KEY_BETA2:
	case FE_KEY_EPS:
		return true;
	default:
		return false;
	}
}

bool fe_key_lookup(const char *s, size_t n, fe_key *out)
{
	for (int k = 0; k < FE_KEY_COUNT; k++) {
		if (strlen(fe_keys[k].name) == n && memcmp(fe_keys[k].name, s, n) == 0) {
			*out = (fe_key)k;
			return true;
		}
	}
	return false;
}

/* The defaults go through the same parser as a --set, so keys.def's text is
 * the only place they are written; then every position is reset to
 * "default" (file NULL, seq 0). */
void fe_spec_init(fe_spec *s)
{
	memset(s, 0, sizeof *s);
	strcpy(s->name, "model");
	ir_diags d;
	ir_diags_init(&d);
	for (int k = 0; k < FE_KEY_COUNT; k++) {
		const char *def = fe_keys[k].def;
		if (!def || !*def)
			continue; /* required, lr, or an empty list (all zero already) */
		char buf[128];
		int n = snprintf(buf, sizeof buf, "%s=%s", fe_keys[k].name, def);
		IR_ASSERT(n > 0 && (size_t)n < sizeof buf);
		if (!fe_spec_set(s, buf, 0, &d))
			IR_DIE("bad default in keys.def: %s", d.items[0].msg);
	}
	ir_diags_free(&d);
	memset(s->pos, 0, sizeof s->pos);
	memset(s->vpos, 0, sizeof s->vpos);
	memset(s->seq, 0, sizeof s->seq);
	s->nseq = 0;
	memset(s->input_pos, 0, sizeof s->input_pos);
	memset(s->units_pos, 0, sizeof s->units_pos);
	memset(s->filters_pos, 0, sizeof s->filters_pos);
	memset(s->strides_pos, 0, sizeof s->strides_pos);
	memset(s->lr_list_pos, 0, sizeof s->lr_list_pos);
	memset(s->lr_steps_pos, 0, sizeof s->lr_steps_pos);
}

static int copy_ints(int64_t *dst, ir_pos *dpos, const fe_value *v)
{
	for (int i = 0; i < v->n; i++) {
		dst[i] = v->i[i];
		dpos[i] = v->pos[i];
	}
	return v->n;
}

static void mark(fe_spec *s, fe_key k, ir_pos kpos, ir_pos vpos, int seq)
{
	s->pos[k] = kpos;
	s->vpos[k] = vpos;
	s->seq[k] = seq;
}

void fe_spec_store(fe_spec *s, fe_key k, const fe_value *v, ir_pos kpos)
{
	IR_ASSERT(v->n >= fe_keys[k].nmin && v->n <= fe_keys[k].nmax);
	int seq = ++s->nseq;
	mark(s, k, kpos, v->pos[0], seq);
	switch (k) {
	case FE_KEY_INPUT:
		copy_ints(s->input, s->input_pos, v);
		break;
	case FE_KEY_CLASSES:
		s->classes = v->i[0];
		break;
	case FE_KEY_INIT_FILTERS:
		s->init_filters = v->i[0];
		break;
	case FE_KEY_INIT_KERNEL:
		s->init_kernel = v->i[0];
		break;
	case FE_KEY_INIT_STRIDE:
		s->init_stride = v->i[0];
		break;
	case FE_KEY_INIT_MAX_POOL:
		s->init_max_pool = v->i[0] != 0;
		break;
	case FE_KEY_UNITS:
		s->nstages = copy_ints(s->units, s->units_pos, v);
		break;
	case FE_KEY_FILTERS:
		s->nfilters = copy_ints(s->filters, s->filters_pos, v);
		break;
	case FE_KEY_STRIDES:
		s->nstrides = copy_ints(s->strides, s->strides_pos, v);
		break;
	case FE_KEY_BLOCK:
		s->block = (fe_block)v->i[0];
		snprintf(s->block_name, sizeof s->block_name, "%.*s", FE_MAX_NAME - 1, v->text);
		break;
	case FE_KEY_BATCH:
		s->batch = v->i[0];
		break;
	case FE_KEY_LR:
		/* Shorthand for lr_list=X with lr_steps empty: both count as
		 * written here. */
		s->nlr = 1;
		s->lr_list[0] = v->f[0];
		s->lr_list_pos[0] = v->pos[0];
		s->nlr_steps = 0;
		mark(s, FE_KEY_LR_LIST, kpos, v->pos[0], seq);
		mark(s, FE_KEY_LR_STEPS, kpos, v->pos[0], seq);
		break;
	case FE_KEY_LR_STEPS:
		s->nlr_steps = copy_ints(s->lr_steps, s->lr_steps_pos, v);
		break;
	case FE_KEY_LR_LIST:
		s->nlr = v->n;
		for (int i = 0; i < v->n; i++) {
			s->lr_list[i] = v->f[i];
			s->lr_list_pos[i] = v->pos[i];
		}
		break;
	case FE_KEY_MOMENTUM:
		s->momentum = v->f[0];
		break;
	case FE_KEY_WEIGHT_DECAY:
		s->weight_decay = v->f[0];
		break;
	case FE_KEY_STEPS:
		s->steps = v->i[0];
		break;
	case FE_KEY_EPOCHS:
		s->epochs = v->i[0];
		break;
	case FE_KEY_SEED:
		s->seed = v->i[0];
		break;
	case FE_KEY_DATASET:
		IR_ASSERT(strlen(v->text) < sizeof s->dataset);
		strcpy(s->dataset, v->text);
		s->dataset_kind = (fe_dataset)v->i[0];
		break;
	case FE_KEY_OPTIMIZER:
		s->optimizer = (fe_optimizer)v->i[0];
		break;
	case FE_KEY_BETA1:
		s->beta1 = v->f[0];
		break;
	case FE_KEY_BETA2:
		s->beta2 = v->f[0];
		break;
	case FE_KEY_EPS:
		s->eps = v->f[0];
		break;
	case FE_KEY_NETWORK:
		s->network = (fe_network)v->i[0];
		break;
	case FE_KEY_PATCH:
		s->patch = v->i[0];
		break;
	case FE_KEY_WIDTH:
		s->width = v->i[0];
		break;
	case FE_KEY_HEADS:
		s->heads = v->i[0];
		break;
	case FE_KEY_MLP_RATIO:
		s->mlp_ratio = v->i[0];
		break;
	case FE_KEY_COUNT:
		IR_DIE("bad key");
	}
}

bool fe_spec_equal(const fe_spec *a, const fe_spec *b)
{
	if (strcmp(a->name, b->name) != 0 || strcmp(a->dataset, b->dataset) != 0 || !fe_lang_defs_equal(a, b))
		return false;
	if (a->nstages != b->nstages || a->nfilters != b->nfilters || a->nstrides != b->nstrides ||
		a->nlr != b->nlr || a->nlr_steps != b->nlr_steps)
		return false;
	for (int i = 0; i < 3; i++)
		if (a->input[i] != b->input[i])
			return false;
	for (int i = 0; i < a->nstages; i++)
		if (a->units[i] != b->units[i])
			return false;
	for (int i = 0; i < a->nfilters; i++)
		if (a->filters[i] != b->filters[i])
			return false;
	for (int i = 0; i < a->nstrides; i++)
		if (a->strides[i] != b->strides[i])
			return false;
	for (int i = 0; i < a->nlr; i++)
		if (a->lr_list[i] != b->lr_list[i])
			return false;
	for (int i = 0; i < a->nlr_steps; i++)
		if (a->lr_steps[i] != b->lr_steps[i])
			return false;
	return a->classes == b->classes && a->init_filters == b->init_filters &&
		a->init_kernel == b->init_kernel && a->init_stride == b->init_stride &&
		a->init_max_pool == b->init_max_pool && a->block == b->block &&
		strcmp(a->block_name, b->block_name) == 0 && a->batch == b->batch &&
		a->momentum == b->momentum && a->weight_decay == b->weight_decay &&
		a->steps == b->steps && a->epochs == b->epochs && a->seed == b->seed &&
		a->dataset_kind == b->dataset_kind && a->optimizer == b->optimizer && a->beta1 == b->beta1 &&
		a->beta2 == b->beta2 && a->eps == b->eps && a->network == b->network && a->patch == b->patch &&
		a->width == b->width && a->heads == b->heads && a->mlp_ratio == b->mlp_ratio;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* docs/model.md: the init conv is SAME (ceil(H/stride)), the optional max pool
 * 3x3/2 SAME (ceil(H/2)); each stage's first unit divides by its stride
 * exactly (fe_spec_check guarantees it) and sets the half width to
 * filters/2. */
void fe_spec_stage_input(const fe_spec *s, int stage, int64_t *h, int64_t *w, int64_t *half)
{
	IR_ASSERT(stage >= 0 && stage <= s->nstages && s->nstages <= FE_MAX_STAGES);
	IR_ASSERT(s->init_stride > 0);
	int64_t hh = ceil_div(s->input[1], s->init_stride), ww = ceil_div(s->input[2], s->init_stride);
	if (s->init_max_pool) {
		hh = ceil_div(hh, 2);
		ww = ceil_div(ww, 2);
	}
	int64_t c = s->init_filters / 2;
	for (int i = 0; i < stage; i++) {
		IR_ASSERT(s->strides[i] > 0);
		hh /= s->strides[i];
		ww /= s->strides[i];
		c = s->filters[i] / 2;
	}
	if (h)
		*h = hh;
	if (w)
		*w = ww;
	if (half)
		*half = c;
}

double fe_spec_lr_at(const fe_spec *s, int64_t step)
{
	IR_ASSERT(s->nlr >= 1);
	int i = 0;
	while (i < s->nlr - 1 && i < s->nlr_steps && step >= s->lr_steps[i])
		i++;
	return s->lr_list[i];
}

const char *fe_spec_dataset_dir(const fe_spec *s)
{
	const char *colon = strchr(s->dataset, ':');
	return colon ? colon + 1 : NULL;
}
