/* arena.c: the bump allocator that holds one compilation's IR, and the one
 * place where size arithmetic is overflow-checked.
 *
 * Chunks are malloc'd and chained; ir_arena_free releases them all at once.
 * Requests larger than a chunk get a chunk of their own. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define CHUNK_SIZE (64 * 1024)

typedef struct chunk {
	struct chunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
} chunk;

struct ir_arena {
	chunk *head;
};

ir_arena *ir_arena_new(void)
{
	ir_arena *a = calloc(1, sizeof *a);
	if (!a)
		IR_DIE("out of memory");
	return a;
}

void ir_arena_free(ir_arena *a)
{
	if (!a)
		return;
	for (chunk *c = a->head, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	free(a);
}

void *ir_arena_alloc(ir_arena *a, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	if (size == 0)
		size = 16;
	chunk *c = a->head;
	if (!c || c->cap - c->used < size) {
		size_t cap = size > CHUNK_SIZE ? size : CHUNK_SIZE;
		c = malloc(sizeof *c + cap);
		if (!c)
			IR_DIE("out of memory (arena chunk of %zu bytes)", cap);
		c->used = 0;
		c->cap = cap;
		/* A big private chunk goes behind the current one so the current
		 * chunk's free space is not abandoned. */
		if (a->head && cap > CHUNK_SIZE) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = a->head;
			a->head = c;
		}
	}
	void *p = c->data + c->used;
	c->used += size;
	memset(p, 0, size);
	return p;
}

void *ir_arena_array(ir_arena *a, size_t count, size_t elem)
{
	if (elem && count > SIZE_MAX / elem)
		IR_DIE("arena array of %zu x %zu bytes overflows", count, elem);
	return ir_arena_alloc(a, count * elem);
}

char *ir_arena_strndup(ir_arena *a, const char *s, size_t n)
{
	char *p = ir_arena_alloc(a, n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

char *ir_arena_strdup(ir_arena *a, const char *s)
{
	return ir_arena_strndup(a, s, strlen(s));
}

bool ir_size_mul(int64_t a, int64_t b, int64_t *out)
{
	if (a < 0 || b < 0)
		return false;
	return !__builtin_mul_overflow(a, b, out);
}

bool ir_size_add(int64_t a, int64_t b, int64_t *out)
{
	if (a < 0 || b < 0)
		return false;
	return !__builtin_add_overflow(a, b, out);
}
