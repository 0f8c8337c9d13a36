/* data_in.c: the byte streams dataset loaders read files through
 * (data_in.h).  A file is gzip data when it starts with the gzip magic;
 * zlib's inflate decompresses it straight into the caller's buffer.  (Not
 * zlib's gzread: after a read that ends exactly at the end of the data it
 * can report the end without having checked the trailer, so a file cut in
 * its CRC would pass.) */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	/* O_NONBLOCK: opening a FIFO must not wait for a writer. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return rt_errorf(e, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return rt_errorf(e, "%s: not a regular file", path);
	}
	uint8_t magic[2];
	ssize_t r;
	while ((r = pread(fd, magic, 2, 0)) < 0 && errno == EINTR)
		;
	if (r < 0) {
		int err = errno;
		close(fd);
		return rt_errorf(e, "%s: cannot read: %s", path, strerror(err));
	}
	in->fd = fd;
	in->size = st.st_size;
	if (r < 2 || magic[0] != 0x1f || magic[1] != 0x8b)
		return true;
	gz_state *g = calloc(1, sizeof *g);
	/* 15 + 16: a 32 KiB window, gzip framing only. */
	if (!g || inflateInit2(&g->z, 15 + 16) != Z_OK) {
		free(g);
		rt_data_in_close(in);
		return rt_errorf(e, "%s: out of memory", path);
	}
	in->z = g;
	in->gzip = true;
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

/* read(2) until n bytes or the end; false with errno on an error. */
static bool read_fd(int fd, uint8_t *buf, size_t n, size_t *got)
{
	*got = 0;
	while (*got < n) {
		ssize_t r = read(fd, buf + *got, n - *got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return false;
		if (r == 0)
			break;
		*got += (size_t)r;
	}
	return true;
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
			if (!read_fd(in->fd, g->buf, sizeof g->buf, &k))
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
			return rt_errorf(e, "%s: out of memory", in->name);
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
		if (!read_fd(in->fd, buf, n, got))
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
