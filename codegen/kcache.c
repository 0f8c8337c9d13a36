/* kcache.c: kernels compiled by earlier JIT compiles, by signature, so that
 * a later compile in the same process calls them instead of emitting,
 * optimising and compiling them again (cg_options.kcache).
 *
 * Why: `revc train` compiles the training step and then the evaluation
 * graph; at the same batch most of the forward's kernels (the plain
 * convolutions, pools, pads, the head) are identical in both, and the
 * convolutions are the costly ones to optimise.
 *
 * An entry's key is the kernel cache's (cg_kernel: op, types, attributes,
 * epilogue) prefixed with what else shapes the code: the CPU, the thread
 * count (workspace slices, finish kernels) and libm_math.  The convolution
 * lowering is not in it: it is a function of the node and, with the conv
 * tune (k_conv_tune.c, on unless REVC_CONV_TUNE=0), of the choices kept in
 * its cache file, which a process only adds to; and a kernel found here is
 * called as it was compiled, whatever a later compile would choose, its
 * workspace being planned for every lowering it could have.
 *
 * The addresses are code in the JITs that compiled them: whoever owns the
 * cache (the driver's engine) keeps those JITs until it frees the cache and
 * every JIT that calls into them.  A mutex guards the table. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
	uint64_t hash;
	char *key;
	uint64_t addr;
} entry;

struct cg_kcache {
	pthread_mutex_t mu;
	entry *e;
	int n, cap;
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

cg_kcache *cg_kcache_new(void)
{
	cg_kcache *c = calloc(1, sizeof *c);
	if (!c)
		IR_DIE("out of memory");
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

void cg_kcache_free(cg_kcache *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n; i++)
		free(c->e[i].key);
	free(c->e);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

uint64_t cg_kcache_find(cg_kcache *c, const char *key)
{
	uint64_t h = fnv1a(key), addr = 0;
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < c->n && !addr; i++)
		if (c->e[i].hash == h && strcmp(c->e[i].key, key) == 0)
			addr = c->e[i].addr;
	pthread_mutex_unlock(&c->mu);
	return addr;
}

void cg_kcache_add(cg_kcache *c, const char *key, uint64_t addr)
{
	IR_ASSERT(addr != 0);
	if (cg_kcache_find(c, key))
		return; /* the first compile's code stays the one called */
	char *k = strdup(key);
	if (!k)
		IR_DIE("out of memory");
	pthread_mutex_lock(&c->mu);
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 128;
		c->e = realloc(c->e, (size_t)c->cap * sizeof *c->e);
		if (!c->e)
			IR_DIE("out of memory");
	}
	c->e[c->n++] = (entry){fnv1a(key), k, addr};
	pthread_mutex_unlock(&c->mu);
}

char *cg_kcache_key(const cg_module *m, const char *key)
{
	char *k;
	if (asprintf(&k, "%s\t%s", m->kctx, key) < 0)
		IR_DIE("out of memory");
	return k;
}
