/* fuzz_manifest.c: libFuzzer target for the manifest reader
 * (runtime/manifest.c), which decides what revc takes for its own
 * directory.
 *
 * The input is a whole revc-manifest.txt.  rt_manifest_parse must either
 * give a manifest or fail with a message and an empty manifest.  A manifest
 * that parses is formatted and parsed again: the second parse must succeed
 * and format to the same text (print -> parse -> print is identical).  Built
 * by scripts/fuzz; nothing is kept between runs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rt_manifest m, again;
	rt_err e;
	e.msg[0] = 0;
	if (!rt_manifest_parse((const char *)data, size, "fuzz", &m, &e)) {
		if (!e.msg[0] || m.n != 0 || m.model || m.t)
			abort();
		return 0;
	}
	for (int i = 0; i < m.n; i++) {
		char s[256];
		rt_manifest_shape_str(&m.t[i], s, sizeof s);
		if (!rt_manifest_find(&m, m.t[i].name))
			abort();
	}
	size_t len, len2;
	char *text = rt_manifest_format(&m, &len, &e);
	if (!text)
		abort();
	if (!rt_manifest_parse(text, len, "again", &again, &e))
		abort();
	char *text2 = rt_manifest_format(&again, &len2, &e);
	if (!text2 || len2 != len || memcmp(text, text2, len) != 0 || again.n != m.n)
		abort();
	free(text);
	free(text2);
	rt_manifest_free(&again);
	rt_manifest_free(&m);
	return 0;
}
