/* replay.c: runs a libFuzzer target's entry point on every file of the
 * directories (or files) given, without libFuzzer, so that `meson test`
 * (and its ASan+UBSan build) replays the seed corpora of tests/fuzz/corpus.
 * A target signals a broken promise by aborting, which fails the test. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Feeds one file of size bytes to the target in an exactly sized buffer
 * (so that ASan sees a read past it); false when it cannot be read. */
static int replay_file(const char *path, size_t size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf)
		abort();
	int ok = fread(buf, 1, size, f) == size;
	fclose(f);
	if (ok)
		LLVMFuzzerTestOneInput(buf, size);
	free(buf);
	return ok;
}

int main(int argc, char **argv)
{
	int n = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: cannot open '%s'\n", argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (!replay_file(argv[i], (size_t)st.st_size)) {
				fprintf(stderr, "replay: cannot read '%s'\n", argv[i]);
				return 1;
			}
			n++;
			continue;
		}
		struct dirent **names;
		int k = scandir(argv[i], &names, NULL, alphasort);
		if (k < 0) {
			fprintf(stderr, "replay: cannot list '%s'\n", argv[i]);
			return 1;
		}
		for (int j = 0; j < k; j++) {
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", argv[i], names[j]->d_name);
			struct stat fs;
			if (names[j]->d_name[0] != '.' && stat(path, &fs) == 0 && S_ISREG(fs.st_mode)) {
				if (!replay_file(path, (size_t)fs.st_size)) {
					fprintf(stderr, "replay: cannot read '%s'\n", path);
					return 1;
				}
				n++;
			}
			free(names[j]);
		}
		free(names);
	}
	printf("replay: %d inputs, no broken promise\n", n);
	return n > 0 ? 0 : 1;
}
