/* spec_print.c: writes a spec in the spec language, every key in keys.def
 * order, so that it parses back to an fe_spec_equal spec.  Numbers are
 * printed in their shortest form that reads back exactly. */
#include <stdlib.h>
#include <string.h>

#include "lang.h"

static void print_real(FILE *out, double v)
{
	char buf[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, out);
}

static void print_ints(FILE *out, const int64_t *v, int n)
{
	for (int i = 0; i < n; i++)
		fprintf(out, "%s%lld", i ? "," : "", (long long)v[i]);
}

static void print_reals(FILE *out, const double *v, int n)
{
	for (int i = 0; i < n; i++) {
		if (i)
			fputc(',', out);
		print_real(out, v[i]);
	}
}

/* Whether key k has a line of its own: not lr (lr_list and lr_steps cover
 * it) and not an empty list (the default; the language has no empty value). */
static bool has_line(const fe_spec *s, fe_key k)
{
	if (fe_key_required(k) && !fe_spec_needs_key(s, k) && !s->seq[k])
		return false; /* a RevNet key a revvit spec leaves unset */
	switch (k) {
	case FE_KEY_LR:
		return false;
	case FE_KEY_UNITS:
		return s->nstages > 0;
	case FE_KEY_FILTERS:
		return s->nfilters > 0;
	case FE_KEY_STRIDES:
		return s->nstrides > 0;
	case FE_KEY_LR_STEPS:
		return s->nlr_steps > 0;
	case FE_KEY_LR_LIST:
		return s->nlr > 0;
	case FE_KEY_NETWORK:
	case FE_KEY_PATCH:
	case FE_KEY_WIDTH:
	case FE_KEY_HEADS:
	case FE_KEY_MLP_RATIO:
		return s->network == FE_NET_REVVIT || s->seq[k]; /* a RevNet spec's file needs none */
	default:
		return true;
	}
}

static void print_value(FILE *out, const fe_spec *s, fe_key k)
{
	switch (k) {
	case FE_KEY_INPUT:
		print_ints(out, s->input, 3);
		break;
	case FE_KEY_CLASSES:
		fprintf(out, "%lld", (long long)s->classes);
		break;
	case FE_KEY_INIT_FILTERS:
		fprintf(out, "%lld", (long long)s->init_filters);
		break;
	case FE_KEY_INIT_KERNEL:
		fprintf(out, "%lld", (long long)s->init_kernel);
		break;
	case FE_KEY_INIT_STRIDE:
		fprintf(out, "%lld", (long long)s->init_stride);
		break;
	case FE_KEY_INIT_MAX_POOL:
		fputs(s->init_max_pool ? "true" : "false", out);
		break;
	case FE_KEY_UNITS:
		print_ints(out, s->units, s->nstages);
		break;
	case FE_KEY_FILTERS:
		print_ints(out, s->filters, s->nfilters);
		break;
	case FE_KEY_STRIDES:
		print_ints(out, s->strides, s->nstrides);
		break;
	case FE_KEY_BLOCK:
		fputs(s->block_name, out);
		break;
	case FE_KEY_BATCH:
		fprintf(out, "%lld", (long long)s->batch);
		break;
	case FE_KEY_LR_STEPS:
		print_ints(out, s->lr_steps, s->nlr_steps);
		break;
	case FE_KEY_LR_LIST:
		print_reals(out, s->lr_list, s->nlr);
		break;
	case FE_KEY_MOMENTUM:
		print_real(out, s->momentum);
		break;
	case FE_KEY_WEIGHT_DECAY:
		print_real(out, s->weight_decay);
		break;
	case FE_KEY_STEPS:
		fprintf(out, "%lld", (long long)s->steps);
		break;
	case FE_KEY_EPOCHS:
		fprintf(out, "%lld", (long long)s->epochs);
		break;
	case FE_KEY_SEED:
		fprintf(out, "%lld", (long long)s->seed);
		break;
	case FE_KEY_DATASET:
		fputs(s->dataset, out);
		break;
	case FE_KEY_OPTIMIZER:
		fputs(fe_optimizer_name(s->optimizer), out);
		break;
	case FE_KEY_BETA1:
		print_real(out, s->beta1);
		break;
	case FE_KEY_BETA2:
		print_real(out, s->beta2);
		break;
	case FE_KEY_EPS:
		print_real(out, s->eps);
		break;
	case FE_KEY_NETWORK:
		fputs(fe_network_name(s->network), out);
		break;
	case FE_KEY_PATCH:
		fprintf(out, "%lld", (long long)s->patch);
		break;
	case FE_KEY_WIDTH:
		fprintf(out, "%lld", (long long)s->width);
		break;
	case FE_KEY_HEADS:
		fprintf(out, "%lld", (long long)s->heads);
		break;
	case FE_KEY_MLP_RATIO:
		fprintf(out, "%lld", (long long)s->mlp_ratio);
		break;
	case FE_KEY_LR:
	case FE_KEY_COUNT:
		IR_DIE("no value to print for key %d", (int)k);
	}
}

/* The file's definitions, as written (fe_spec_parse read them). */
static void print_defs(FILE *out, const fe_spec *s)
{
	const char *p = s->src, *from;
	int line = 1;
	while (s->src && fe_lang_next_def(s, &p, &line, &from)) {
		fputc('\n', out);
		fwrite(from, 1, (size_t)(p - from), out);
		if (p[-1] != '\n')
			fputc('\n', out);
	}
}

void fe_spec_print(FILE *out, const fe_spec *s)
{
	fprintf(out, "model %s\n", s->name);
	/* A constant rate reads best as the shorthand. */
	bool constant = s->nlr == 1 && s->nlr_steps == 0;
	for (int k = 0; k < FE_KEY_COUNT; k++) {
		if (k == FE_KEY_LR_STEPS && constant)
			continue;
		if (k == FE_KEY_LR_LIST && constant) {
			fputs("lr = ", out);
			print_real(out, s->lr_list[0]);
			fputc('\n', out);
			continue;
		}
		if (!has_line(s, (fe_key)k))
			continue;
		fprintf(out, "%s = ", fe_key_name((fe_key)k));
		print_value(out, s, (fe_key)k);
		fputc('\n', out);
	}
	print_defs(out, s);
}

void fe_settings_print(FILE *out, const fe_spec *s)
{
	fputs("train {\n", out);
	for (int k = 0; k < FE_KEY_COUNT; k++) {
		if (!fe_key_is_setting((fe_key)k) || !has_line(s, (fe_key)k))
			continue;
		fprintf(out, "  %s = ", fe_key_name((fe_key)k));
		print_value(out, s, (fe_key)k);
		fputc('\n', out);
	}
	fputs("}\n", out);
}
