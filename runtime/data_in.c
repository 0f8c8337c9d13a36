/* data_in.c: the byte streams dataset loaders read files through
 * (data_in.h).  A file is gzip data when it starts with the gzip magic;
 * zlib's inflate decompresses it straight into the caller's buffer.  (Not
 * zlib's gzread: after a read that ends exactly at the end of the data it
 * can report the end without having checked the trailer, so a file cut in
 * its CRC would pass.) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "data_in.h"

typedef struct {
	z_stream z;
	bool eof;          /* the file has no more compressed bytes */
	bool member_end;   /* a gzip member ended: what follows starts another */
	uint8_t buf[1 << 16];
} gz_state;

bool rt_data_in_open(rt_data_in *in, const char *path, rt_err *e)
{
	memset(in, 0, sizeof *in);
	in->name = path;
	in->fd = -1;
	int fd;
	int64_t size;
	if (!rt_file_open_regular(path, &fd, &size, e))
		return false;
	uint8_t magic[2];
	size_t got;
	if (!rt_file_read_fd(fd, magic, 2, &got) || lseek(fd, 0, SEEK_SET) != 0) {
		int err = errno;
		close(fd);
		return rt_errorf(e, "%s: cannot read: %s", path, strerror(err));
	}
	in->fd = fd;
	in->size = size;
	if (got < 2 || magic[0] != 0x1f || magic[1] != 0x8b)
		return true;
	gz_state *g = calloc(1, sizeof *g);
	/* 15 + 16: a 32 KiB window, gzip framing only. */
	if (!g || inflateInit2(&g->z, 15 + 16) != Z_OK) {
		free(g);
		rt_data_in_close(in);
		rt_error_oom(e, "the state of gzip decompression", (int64_t)sizeof *g);
		return rt_err_prefixf(e, "%s: ", path);
	}
	in->z = g;
	in->size = -1;
	return true;
}

void rt_data_in_memory(rt_data_in *in, const void *p, size_t len, const char *name)
{
	memset(in, 0, sizeof *in);
	in->name = name;
	in->mem = p;
	in->fd = -1;
	in->size = (int64_t)len;
}

/* Inflates up to n bytes into buf, reading compressed input as needed. */
static bool gz_read(rt_data_in *in, uint8_t *buf, size_t n, size_t *got, rt_err *e)
{
	gz_state *g = in->z;
	z_stream *z = &g->z;
	*got = 0;
	while (*got < n) {
		if (z->avail_in == 0 && !g->eof) {
			size_t k;
			if (!rt_file_read_fd(in->fd, g->buf, sizeof g->buf, &k))
				return rt_errorf(e, "%s: cannot read: %s", in->name, strerror(errno));
			g->eof = k < sizeof g->buf;
			z->next_in = g->buf;
			z->avail_in = (uInt)k;
		}
		if (g->member_end) {
			if (z->avail_in == 0 && g->eof)
				break;
			if (z->avail_in == 0)
				continue;
			inflateReset(z);
			g->member_end = false;
		}
		if (z->avail_in == 0)
			return rt_errorf(e, "%s: corrupt or truncated gzip data (unexpected end of file)",
				in->name);
		size_t want = n - *got < (1u << 30) ? n - *got : (1u << 30);
		z->next_out = buf + *got;
		z->avail_out = (uInt)want;
		int r = inflate(z, Z_NO_FLUSH);
		*got += want - z->avail_out;
		if (r == Z_STREAM_END)
			g->member_end = true;
		else if (r == Z_MEM_ERROR)
			return rt_error_oom(e, "gzip's 32 KiB window", 1 << 15) || rt_err_prefixf(e, "%s: ", in->name);
		else if (r != Z_OK && r != Z_BUF_ERROR)
			return rt_errorf(e, "%s: corrupt or truncated gzip data (%s)", in->name,
				z->msg ? z->msg : "invalid data");
	}
	return true;
}

bool rt_data_in_read(rt_data_in *in, void *buf, size_t n, size_t *got, rt_err *e)
{
	*got = 0;
	if (in->z) {
		if (!gz_read(in, buf, n, got, e))
			return false;
	} else if (in->fd >= 0) {
		if (!rt_file_read_fd(in->fd, buf, n, got))
			return rt_errorf(e, "%s: cannot read: %s", in->name, strerror(errno));
	} else {
		size_t left = (size_t)(in->size - in->pos);
		*got = n < left ? n : left;
		if (*got)
			memcpy(buf, in->mem + in->pos, *got);
	}
	in->pos += (int64_t)*got;
	return true;
}

bool rt_data_in_more(rt_data_in *in, bool *more, rt_err *e)
{
	uint8_t b;
	size_t got;
	if (!rt_data_in_read(in, &b, 1, &got, e))
		return false;
	*more = got == 1;
	return true;
}

void rt_data_in_close(rt_data_in *in)
{
	if (in->z) {
		inflateEnd(&((gz_state *)in->z)->z);
		free(in->z);
	}
	if (in->fd >= 0)
		close(in->fd);
	memset(in, 0, sizeof *in);
	in->fd = -1;
}
