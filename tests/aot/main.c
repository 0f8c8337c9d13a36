/* main.c: a program built against nothing but a revc-compiled model's
 * header, its library and OpenBLAS.  It trains the model a few steps on one
 * batch, saves it, and checks it against the same training done by revc's
 * JIT (revc grad --train-steps), loaded back through the library: the
 * losses printed by both, and the logits of both models, must agree.
 * Usage: main STEPS JIT_DIR OUT_DIR   (writes x.npy, y.npy in the cwd first
 * when JIT_DIR is "-"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiny.h"

#define N (TINY_BATCH * TINY_C * TINY_H * TINY_W)

/* Writes a little-endian .npy (format 1.0) the way NumPy does. */
static void save_npy(const char *path, const char *descr, const char *shape, const void *data, size_t bytes)
{
	char header[128];
	int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
	int total = (10 + len + 1 + 63) / 64 * 64;
	FILE *f = fopen(path, "wb");
	fwrite("\x93NUMPY\x01\x00", 1, 8, f);
	unsigned short hl = (unsigned short)(total - 10);
	fwrite(&hl, 2, 1, f);
	fwrite(header, 1, (size_t)len, f);
	for (int i = 10 + len; i < total - 1; i++)
		fputc(' ', f);
	fputc('\n', f);
	fwrite(data, 1, bytes, f);
	fclose(f);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int steps = atoi(argv[1]);
	static float x[N];
	int32_t y[TINY_BATCH];
	for (int i = 0; i < N; i++)
		x[i] = (float)((i * 37) % 101) / 100.0f;
	for (int i = 0; i < TINY_BATCH; i++)
		y[i] = (i * 3) % TINY_CLASSES;
	if (strcmp(argv[2], "-") == 0) {
		char shape[64];
		snprintf(shape, sizeof shape, "(%d, %d, %d, %d)", TINY_BATCH, TINY_C, TINY_H, TINY_W);
		save_npy("x.npy", "<f4", shape, x, sizeof x);
		snprintf(shape, sizeof shape, "(%d,)", TINY_BATCH);
		save_npy("y.npy", "<i4", shape, y, sizeof y);
		return 0;
	}
	tiny_model *a = tiny_new(3);
	if (!a)
		return 1;
	for (int s = 0; s < steps; s++)
		printf("step %d loss %.9g\n", s + 1, (double)tiny_train_step(a, x, y, 0.1f));
	if (tiny_save(a, argv[3]) != 0) {
		fprintf(stderr, "save: %s\n", tiny_error(a));
		return 1;
	}
	tiny_model *b = tiny_new(0);
	if (tiny_load(b, argv[2]) != 0) {
		fprintf(stderr, "load: %s\n", tiny_error(b));
		return 1;
	}
	static float la[TINY_BATCH * TINY_CLASSES], lb[TINY_BATCH * TINY_CLASSES];
	tiny_forward(a, x, la);
	tiny_forward(b, x, lb);
	double diff = 0, scale = 1e-30;
	for (int i = 0; i < TINY_BATCH * TINY_CLASSES; i++) {
		diff = fmax(diff, fabs((double)la[i] - (double)lb[i]));
		scale = fmax(scale, fabs((double)lb[i]));
	}
	fprintf(stderr, "logits: library vs JIT, max|a-b|/max|b| = %.3g\n", diff / scale);
	tiny_free(a);
	tiny_free(b);
	return diff / scale <= 1e-4 ? 0 : 1;
}
