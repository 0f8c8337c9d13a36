/* embed.c: revc used from a C program through revc.h alone.  It reads a
 * spec, plans and compiles it, prints the planned memory, then trains 3
 * steps on a synthetic batch and prints the loss of each.
 * Build against an installed revc, run from the source tree:
 *   cc examples/embed.c $(pkg-config --cflags --libs revc) -o embed
 *   ./embed models/fashion.rev units=1,1,1 batch=8
 * Usage: embed SPEC [KEY=VALUE ...] */
#include <stdio.h>
#include <stdlib.h>

#include <revc.h>

static int fail(revc_error *e)
{
	fputs(revc_error_message(e), stderr);
	int status = (int)revc_error_kind_of(e);
	revc_error_free(e);
	return status;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: embed SPEC [KEY=VALUE ...]\n");
		return 2;
	}
	printf("librevc %s\n", revc_version());
	revc_error *e = NULL;
	revc_model *m = revc_model_from_file(argv[1], (const char *const *)argv + 2, argc - 2, &e);
	if (!m)
		return fail(e);
	revc_options o;
	revc_options_init(&o); /* revnet, f32, the JIT for this CPU */
	revc_memory mem;
	if (!revc_model_compile(m, &o, &e) || !revc_model_memory(m, &mem, &e)) {
		revc_model_free(m);
		return fail(e);
	}
	printf("%s: batch %lld, %s, peak %lld bytes, arena %lld bytes\n", revc_model_name(m),
		(long long)revc_model_batch(m), revc_strategy_name(mem.strategy), (long long)mem.peak_bytes,
		(long long)mem.arena_bytes);

	/* A synthetic batch: pixels in [0, 1), labels cycling through the classes. */
	int64_t chw[3], batch = revc_model_batch(m);
	revc_model_input(m, chw);
	int64_t n = batch * chw[0] * chw[1] * chw[2];
	float *x = malloc((size_t)n * sizeof *x);
	int32_t *labels = malloc((size_t)batch * sizeof *labels);
	if (!x || !labels) {
		fprintf(stderr, "embed: out of memory\n");
		return 1;
	}
	srand(1);
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)rand() / ((float)RAND_MAX + 1.0f);
	for (int64_t i = 0; i < batch; i++)
		labels[i] = (int32_t)(i % revc_model_classes(m));
	revc_batch b = {.x = x, .labels = labels, .n = batch};
	int status = 0;
	for (int step = 1; step <= 3; step++) {
		double loss;
		if (!revc_train_step(m, &b, 0.1, &loss, &e)) {
			status = fail(e);
			break;
		}
		printf("step %d: loss %.6f\n", step, loss);
	}
	free(x);
	free(labels);
	revc_model_free(m);
	return status;
}
