/* fuzz_cifar.c: libFuzzer target for the CIFAR-10 binary parser
 * (runtime/data_cifar.c).
 *
 * The input is one batch file.  On success every pixel and label is read
 * and the record count checked against the size; on failure the dataset
 * must be left empty with a message.  Built by scripts/fuzz; nothing is
 * kept between runs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Where the pixel sums go, so that the reads are not optimised away. */
static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rt_dataset ds;
	rt_err e;
	e.msg[0] = 0;
	if (rt_data_parse_cifar10(data, size, "fuzz.bin", &ds, &e)) {
		if (ds.n < 1 || (size_t)ds.n * 3073 != size || ds.c != 3 || ds.h != 32 || ds.w != 32)
			abort();
		unsigned sum = 0;
		for (size_t i = 0; i < (size_t)ds.n * 3072; i++)
			sum += ds.pixels[i];
		for (int64_t i = 0; i < ds.n; i++)
			if (ds.labels[i] < 0 || ds.labels[i] >= ds.classes)
				abort();
		sink = sum;
		rt_dataset_free(&ds);
	} else {
		static const rt_dataset zero;
		if (!e.msg[0] || memcmp(&ds, &zero, sizeof ds))
			abort();
	}
	return 0;
}
