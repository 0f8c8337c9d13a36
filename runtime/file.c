/* file.c: reading whole files and writing files atomically (temporary name,
 * fsync, rename, fsync of the directory). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt.h"

bool rt_errorf(rt_err *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return false;
}

bool rt_err_prefixf(rt_err *e, const char *fmt, ...)
{
	rt_err inner = *e;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof e->msg)
		snprintf(e->msg + n, sizeof e->msg - (size_t)n, "%s", inner.msg);
	return false;
}

bool rt_err_appendf(rt_err *e, const char *fmt, ...)
{
	size_t n = strlen(e->msg);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg + n, sizeof e->msg - n, fmt, ap);
	va_end(ap);
	return false;
}

bool rt_error_oom(rt_err *e, const char *what, int64_t bytes)
{
	return rt_errorf(e, "out of memory: %s takes %lld bytes (%.2f GiB)", what, (long long)bytes,
		(double)bytes / (double)(1 << 30));
}

bool rt_path_join(char *buf, size_t n, const char *dir, const char *name, const char *suffix, rt_err *e)
{
	int k = snprintf(buf, n, "%s/%s%s", dir, name, suffix);
	if (k < 0 || (size_t)k >= n)
		return rt_errorf(e, "path too long (%d bytes, at most %zu): '%s/%s%s'", k, n - 1, dir, name, suffix);
	return true;
}

bool rt_file_open_regular(const char *path, int *fd, int64_t *size, rt_err *e)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer. */
	*fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (*fd < 0)
		return rt_errorf(e, "cannot open '%s': %s", path, strerror(errno));
	struct stat st;
	if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(*fd);
		*fd = -1;
		return rt_errorf(e, "'%s' is not a regular file", path);
	}
	fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
	*size = (int64_t)st.st_size;
	return true;
}

bool rt_file_read_fd(int fd, void *buf, size_t n, size_t *got)
{
	*got = 0;
	while (*got < n) {
		ssize_t r = read(fd, (char *)buf + *got, n - *got);
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

bool rt_file_read(const char *path, size_t max, char **data, size_t *len, rt_err *e)
{
	*data = NULL;
	*len = 0;
	int fd;
	int64_t size;
	if (!rt_file_open_regular(path, &fd, &size, e))
		return false;
	if ((uint64_t)size > max) {
		close(fd);
		return rt_errorf(e, "'%s' is larger than %zu bytes", path, max);
	}
	/* One byte beyond the size tells a file that grew; one more holds the NUL. */
	size_t cap = (size_t)size + 2, n;
	char *buf = malloc(cap);
	if (!buf) {
		close(fd);
		char what[300];
		snprintf(what, sizeof what, "reading '%s'", path);
		return rt_error_oom(e, what, (int64_t)cap);
	}
	if (!rt_file_read_fd(fd, buf, cap - 1, &n)) {
		int err = errno;
		close(fd);
		free(buf);
		return rt_errorf(e, "cannot read '%s': %s", path, strerror(err));
	}
	close(fd);
	if (n == cap - 1) {
		free(buf);
		return rt_errorf(e, "'%s' changed while being read", path);
	}
	buf[n] = 0;
	*data = buf;
	*len = n;
	return true;
}

bool rt_temp_template(char *buf, size_t n, const char *base, size_t len, const char *tag)
{
	size_t t = strlen(tag);
	if (len + t + RT_TMP_SUFFIX + 1 > n)
		return false;
	memcpy(buf, base, len);
	memcpy(buf + len, tag, t);
	memset(buf + len + t, 'X', RT_TMP_SUFFIX);
	buf[len + t + RT_TMP_SUFFIX] = 0;
	return true;
}

bool rt_atomic_open(rt_atomic *a, const char *path, rt_err *e)
{
	memset(a, 0, sizeof *a);
	size_t n = strlen(path) + strlen(RT_TMP_TAG) + RT_TMP_SUFFIX + 1;
	a->path = strdup(path);
	a->tmp = malloc(n);
	if (!a->path || !a->tmp) {
		rt_atomic_abort(a);
		return rt_error_oom(e, "a file name", (int64_t)n);
	}
	rt_temp_template(a->tmp, n, path, strlen(path), RT_TMP_TAG);
	int fd = mkstemp(a->tmp);
	if (fd < 0) {
		int err = errno;
		free(a->tmp);
		a->tmp = NULL;
		rt_atomic_abort(a);
		return rt_errorf(e, "cannot write '%s': %s", path, strerror(err));
	}
	fchmod(fd, rt_umasked(0666));
	a->f = fdopen(fd, "w");
	if (!a->f) {
		close(fd);
		rt_atomic_abort(a);
		return rt_errorf(e, "cannot write '%s': %s", path, strerror(errno));
	}
	return true;
}

unsigned rt_umasked(unsigned mode)
{
	mode_t mask = umask(0); /* (the only way to read it) */
	umask(mask);
	return mode & ~(unsigned)mask;
}

void rt_sync_parent(const char *path)
{
	char *copy = strdup(path);
	if (!copy)
		return;
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(copy);
}

bool rt_atomic_commit(rt_atomic *a, rt_err *e)
{
	bool ok = fflush(a->f) == 0 && !ferror(a->f) && fsync(fileno(a->f)) == 0;
	int err = errno;
	ok = fclose(a->f) == 0 && ok;
	a->f = NULL;
	if (ok && rename(a->tmp, a->path) != 0) {
		err = errno;
		ok = false;
	}
	if (!ok) {
		rt_errorf(e, "cannot write '%s': %s", a->path, strerror(err ? err : EIO));
		rt_atomic_abort(a);
		return false;
	}
	rt_sync_parent(a->path);
	free(a->tmp);
	free(a->path);
	memset(a, 0, sizeof *a);
	return true;
}

void rt_atomic_abort(rt_atomic *a)
{
	if (a->f)
		fclose(a->f);
	if (a->tmp)
		unlink(a->tmp);
	free(a->tmp);
	free(a->path);
	memset(a, 0, sizeof *a);
}

bool rt_file_write_atomic(const char *path, const void *data, size_t len, rt_err *e)
{
	rt_atomic a;
	if (!rt_atomic_open(&a, path, e))
		return false;
	errno = 0;
	if (len && fwrite(data, 1, len, a.f) != len) {
		int err = errno ? errno : EIO; /* (saved before abort's calls) */
		rt_atomic_abort(&a);
		return rt_errorf(e, "cannot write '%s': %s", path, strerror(err));
	}
	return rt_atomic_commit(&a, e);
}
