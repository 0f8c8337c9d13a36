/* error.c: errors as values.  A revc_error holds the text the revc command
 * prints for it: diagnostics with their source lines and carets, or one
 * "revc: error: ..." line for an error without a position. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *revc_error_message(const revc_error *e)
{
	return e ? e->msg : "";
}

revc_error_kind revc_error_kind_of(const revc_error *e)
{
	return e ? e->kind : REVC_ERR_USER;
}

bool revc_error_too_large(const revc_error *e)
{
	return e && e->too_large;
}

void revc_error_free(revc_error *e)
{
	if (!e)
		return;
	free(e->msg);
	free(e);
}

char *drv_diags_format(const ir_diags *d, const drv_source *srcs, int nsrcs)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	if (!out)
		IR_DIE("out of memory");
	for (int i = 0; i < d->n && i < DRV_MAX_DIAGS; i++) {
		const ir_diag_item *it = &d->items[i];
		const drv_source *src = NULL;
		for (int k = 0; k < nsrcs; k++)
			if (it->pos.file && srcs[k].path && strcmp(it->pos.file, srcs[k].path) == 0)
				src = &srcs[k];
		ir_diag_print(out, it, src ? src->text : NULL, src ? src->len : 0);
	}
	if (d->total > DRV_MAX_DIAGS)
		fprintf(out, "... and %lld more error%s\n", (long long)(d->total - DRV_MAX_DIAGS),
			d->total - DRV_MAX_DIAGS == 1 ? "" : "s");
	if (fclose(out) != 0)
		IR_DIE("out of memory");
	return buf;
}

static bool set(revc_error **err, revc_error_kind kind, char *msg)
{
	if (!err) {
		free(msg);
		return false;
	}
	revc_error *e = malloc(sizeof *e);
	if (!e)
		IR_DIE("out of memory");
	e->kind = kind;
	e->msg = msg;
	e->too_large = false;
	*err = e;
	return false;
}

bool drv_error_diags(revc_error **err, revc_error_kind kind, const ir_diags *d, const drv_source *srcs,
	int nsrcs)
{
	return set(err, kind, drv_diags_format(d, srcs, nsrcs));
}

bool drv_errorf(revc_error **err, revc_error_kind kind, const char *fmt, ...)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	if (!out)
		IR_DIE("out of memory");
	va_list ap;
	va_start(ap, fmt);
	fputs("revc: error: ", out);
	vfprintf(out, fmt, ap);
	fputc('\n', out);
	va_end(ap);
	if (fclose(out) != 0)
		IR_DIE("out of memory");
	return set(err, kind, buf);
}

bool drv_error_rt(revc_error **err, const rt_err *e)
{
	return drv_errorf(err, REVC_ERR_USER, "%s", e->msg);
}
