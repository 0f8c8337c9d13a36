/* fuzz_ir.c: libFuzzer target for the IR text format (ir/parse.c, ir/lex.c)
 * and what runs on any graph it accepts.
 *
 * The input is IR text.  A graph that parses is verified (ir_verify, which
 * runs the shape rules and, for planned graphs, ir_verify_plan), drawn
 * (ir_dot) and printed.  The printed text must parse again and print to the
 * very same text: print.c promises that ir_parse reads everything it
 * writes, and printing numbers values canonically, so one print is a fixed
 * point, and the graph read back verifies exactly when the original did.
 * Anything else is a round-trip bug and aborts.  A failed parse must
 * leave exactly one diagnostic.  Built by scripts/fuzz; nothing is kept
 * between runs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void dot_discard(const ir_graph *g)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		abort();
	ir_dot(f, g);
	fclose(f);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ir_diags d;
	ir_diags_init(&d);
	ir_graph *g = ir_parse("fuzz.ir", (const char *)data, size, &d);
	if (!g) {
		if (d.n != 1)
			abort();
		ir_diags_free(&d);
		return 0;
	}
	if (d.n != 0)
		abort();
	bool ok = ir_verify(g, &d);
	if (ok != (d.n == 0))
		abort();
	ir_diags_clear(&d);
	dot_discard(g);

	char *once = ir_print_str(g);
	ir_graph *back = ir_parse("printed.ir", once, strlen(once), &d);
	if (!back) {
		fprintf(stderr, "fuzz_ir: printed IR does not parse back: %d:%d: %s\n%s",
			d.items[0].pos.line, d.items[0].pos.col, d.items[0].msg, once);
		abort();
	}
	/* The printed graph means the same: it verifies exactly when g did. */
	if (ir_verify(back, &d) != ok) {
		fprintf(stderr, "fuzz_ir: the printed graph %s verify, the original %s:\n%s",
			ok ? "does not" : "does", ok ? "does" : "does not", once);
		abort();
	}
	ir_diags_clear(&d);
	char *twice = ir_print_str(back);
	if (strcmp(once, twice) != 0) {
		fprintf(stderr, "fuzz_ir: print(parse(print(g))) differs from print(g):\n"
			"--- once\n%s--- twice\n%s", once, twice);
		abort();
	}
	free(twice);
	free(once);
	ir_graph_free(back);
	ir_graph_free(g);
	ir_diags_free(&d);
	return 0;
}
