/* fuzz_npy.c: libFuzzer target for the .npy reader (runtime/npy.c).
 *
 * The input is a whole .npy file image.  rt_npy_parse must either give an
 * array whose data holds exactly count elements, or fail with a message and
 * a zeroed array.  On success every element is converted with
 * rt_npy_to_f64 and rt_npy_to_f32, which reads all of the data.  Built by
 * scripts/fuzz; nothing is kept between runs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rt_npy a;
	rt_err e;
	e.msg[0] = 0;
	if (!rt_npy_parse(data, size, "fuzz.npy", &a, &e)) {
		static const rt_npy zero;
		if (!e.msg[0] || memcmp(&a, &zero, sizeof a))
			abort();
		rt_npy_free(&a);
		return 0;
	}
	/* The data came from the input, so it cannot be larger than it. */
	if (a.count < 0 || (uint64_t)a.count * (uint64_t)rt_npy_dtype_size(a.dtype) > size)
		abort();
	size_t n = a.count ? (size_t)a.count : 1;
	double *f64 = malloc(n * sizeof *f64);
	float *f32 = malloc(n * sizeof *f32);
	if (!f64 || !f32)
		abort();
	rt_npy_to_f64(&a, f64);
	rt_npy_to_f32(&a, f32);
	free(f32);
	free(f64);
	(void)rt_npy_dtype_name(a.dtype);
	rt_npy_free(&a);
	return 0;
}
