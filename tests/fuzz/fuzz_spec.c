/* fuzz_spec.c: libFuzzer target for the model-spec language (frontend/).
 *
 * The input's first line is a --set override (KEY=VALUE), the rest is a
 * spec file.  fe_spec_parse reads the file; when it succeeds the override is
 * applied with fe_spec_set, the result checked with fe_spec_check and
 * printed with fe_spec_print.  fe_spec_print promises text that parses back
 * to an fe_spec_equal spec, so that is checked too: a spec that does not
 * survive print -> parse is a bug and aborts.  A checked spec also goes
 * through fe_spec_check_sizes in both dtypes.  When the file does not parse,
 * the override is still applied to a default spec, so fe_spec_set sees every
 * input.  Built by scripts/fuzz; nothing is kept between runs. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const file = "fuzz.rev";

/* Prints s into a malloc'd string (caller frees); *len gets its length. */
static char *print_spec(const fe_spec *s, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	if (!f)
		abort();
	fe_spec_print(f, s);
	fclose(f);
	return buf;
}

/* print -> parse must give the same spec back. */
static void check_roundtrip(const fe_spec *s)
{
	size_t len;
	char *text = print_spec(s, &len);
	fe_spec *back = malloc(sizeof *back);
	ir_diags d;
	ir_diags_init(&d);
	if (!back)
		abort();
	if (!fe_spec_parse(back, file, text, len, &d)) {
		fprintf(stderr, "fuzz_spec: printed spec does not parse back: %d:%d: %s\n%s",
			d.items[0].pos.line, d.items[0].pos.col, d.items[0].msg, text);
		abort();
	}
	if (!fe_spec_equal(s, back)) {
		fprintf(stderr, "fuzz_spec: printed spec parses back to a different spec:\n%s", text);
		abort();
	}
	ir_diags_free(&d);
	free(back);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t set_len = nl ? (size_t)(nl - data) : size;
	/* Own, exactly sized buffers, so that ASan sees a read past either. */
	char *set = malloc(set_len + 1);
	size_t rest_len = nl ? size - set_len - 1 : 0;
	char *rest = malloc(rest_len ? rest_len : 1);
	fe_spec *s = malloc(sizeof *s);
	if (!set || !rest || !s)
		abort();
	memcpy(set, data, set_len);
	set[set_len] = 0;
	if (rest_len)
		memcpy(rest, nl + 1, rest_len);

	ir_diags d;
	ir_diags_init(&d);
	fe_spec *before = malloc(sizeof *before);
	if (!before)
		abort();
	bool parsed = fe_spec_parse(s, file, rest, rest_len, &d);
	/* Exactly one diagnostic on failure, none on success. */
	if (d.n != !parsed)
		abort();
	ir_diags_clear(&d);
	if (!parsed)
		fe_spec_init(s); /* the override on its own, against the defaults */
	memcpy(before, s, sizeof *s);
	if (!fe_spec_set(s, set, 1, &d) && (d.n != 1 || memcmp(before, s, sizeof *s)))
		abort(); /* a failed --set must leave the spec unchanged */
	ir_diags_clear(&d);
	if (parsed) {
		check_roundtrip(s);
		if (fe_spec_check(s, &d)) {
			for (int i = 0; s->network == FE_NET_REVNET && i <= s->nstages; i++)
				fe_spec_stage_input(s, i, NULL, NULL, NULL);
			(void)fe_spec_lr_at(s, 0);
			(void)fe_spec_dataset_dir(s);
			/* The size limits: one diagnostic when a tensor is too large. */
			for (int dt = 0; dt < 2; dt++) {
				if (!fe_spec_check_sizes(s, dt ? IR_F64 : IR_F32, &d) && d.n != 1)
					abort();
				ir_diags_clear(&d);
			}
		} else if (d.n != 1) {
			abort();
		}
	}
	free(before);
	ir_diags_free(&d);
	free(s);
	free(rest);
	free(set);
	return 0;
}
