/* diag.c: user-facing diagnostics ("file:line:col: error: msg" with the
 * source line and a caret) and the abort path for broken invariants. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

void ir_die_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "revc: internal error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

void ir_diags_init(ir_diags *d)
{
	memset(d, 0, sizeof *d);
}

void ir_diags_clear(ir_diags *d)
{
	for (int i = 0; i < d->n; i++) {
		free(d->items[i].msg);
		free((char *)d->items[i].pos.file);
	}
	d->n = 0;
	d->total = 0;
}

void ir_diags_free(ir_diags *d)
{
	ir_diags_clear(d);
	free(d->items);
	memset(d, 0, sizeof *d);
}

void ir_diag_addv(ir_diags *d, ir_pos pos, const char *fmt, va_list ap)
{
	if (d->total++ >= IR_MAX_DIAGS)
		return;
	if (d->n == d->cap) {
		int cap = d->cap ? 2 * d->cap : 8;
		ir_diag_item *items = realloc(d->items, (size_t)cap * sizeof *items);
		if (!items)
			IR_DIE("out of memory");
		d->items = items;
		d->cap = cap;
	}
	char *msg;
	if (vasprintf(&msg, fmt, ap) < 0)
		IR_DIE("out of memory");
	/* The file name is copied: diagnostics outlive the arena it came from. */
	if (pos.file && !(pos.file = strdup(pos.file)))
		IR_DIE("out of memory");
	d->items[d->n].pos = pos;
	d->items[d->n].msg = msg;
	d->n++;
}

void ir_diag_add(ir_diags *d, ir_pos pos, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ir_diag_addv(d, pos, fmt, ap);
	va_end(ap);
}

/* Finds line `line` (1-based) of src; returns its start and length. */
static const char *find_line(const char *src, size_t len, int line, size_t *n)
{
	const char *p = src, *end = src + len;
	for (int l = 1; l < line; l++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return NULL;
		p = nl + 1;
	}
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	*n = (size_t)((nl ? nl : end) - p);
	return p;
}

void ir_diag_print(FILE *out, const ir_diag_item *it, const char *src, size_t srclen)
{
	const ir_pos *p = &it->pos;
	if (p->file && p->line > 0)
		fprintf(out, "%s:%d:%d: error: %s\n", p->file, p->line, p->col, it->msg);
	else if (p->file)
		fprintf(out, "%s: error: %s\n", p->file, it->msg);
	else
		fprintf(out, "revc: error: %s\n", it->msg);
	if (!src || p->line <= 0 || p->col <= 0)
		return;
	size_t n;
	const char *line = find_line(src, srclen, p->line, &n);
	/* Show the line only when it is plain printable text of sane length;
	 * the caret is the helpful part, junk bytes are not. */
	if (!line || n > 200 || (size_t)p->col > n + 1)
		return;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)line[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return;
	}
	fprintf(out, "  %.*s\n  ", (int)n, line);
	for (int i = 1; i < p->col; i++)
		fputc(line[i - 1] == '\t' ? '\t' : ' ', out);
	fputs("^\n", out);
}
