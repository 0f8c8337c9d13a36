/* dir.c: directories revc writes whole (checkpoints, parameters, gradients,
 * running statistics).  A directory D is built under the temporary sibling
 * D.tmp.XXXXXX and swapped into place once complete (renameat2 with
 * RENAME_EXCHANGE when D exists), so D always names a complete directory,
 * old or new, whenever the process dies.
 *
 * What may be replaced: a new name, an empty directory, or a directory that
 * carries revc's manifest (manifest.c) and holds only the manifest and the
 * NAME.npy files it lists.  Anything else -- a directory of the user's, a
 * checkpoint someone added a file to, a file, a symlink, ".", "..", a mount
 * point -- is refused by rt_dir_check with one message, before any work and
 * again just before the swap, and nothing is touched.
 *
 * Temporary directories are marked as revc's from the start (a manifest is
 * their first file, written right after mkdtemp) and flock'ed while they are
 * built.  A killed run leaves its D.tmp.XXXXXX behind; the next rt_dir_begin
 * for D removes every one that is marked, holds only files revc writes and
 * is not locked, and never anything else.  Removal deletes regular files
 * only and then the directory if that emptied it: it never recurses.  (A
 * kill in the few system calls between mkdtemp and the mark leaves an
 * empty, unmarked directory, which is kept: it cannot be told from one of
 * the user's, and it holds nothing.) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manifest.h"

#define TMP_TAG ".tmp."
#define TMP_SUFFIX 6 /* the characters mkdtemp replaces */

/* Splits path into its parent directory and last component, trailing
 * slashes dropped; refuses names that cannot be renamed ("/", ".", ".."). */
static bool split_path(const char *path, char *parent, size_t np, char *base, size_t nb, rt_err *e)
{
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	size_t slash = len;
	while (slash > 0 && path[slash - 1] != '/')
		slash--;
	size_t blen = len - slash;
	if (len == 0)
		return rt_errorf(e, "an empty directory name");
	if (blen == 0 || (blen == 1 && path[slash] == '.') || (blen == 2 && path[slash] == '.' && path[slash + 1] == '.'))
		return rt_errorf(e, "'%s' cannot be replaced as a whole: name the directory itself, "
			"not '/', '.' or '..'", path);
	if (blen + sizeof TMP_TAG + TMP_SUFFIX > nb || len + sizeof TMP_TAG + TMP_SUFFIX > np)
		return rt_errorf(e, "'%s': the name is too long", path);
	memcpy(base, path + slash, blen);
	base[blen] = 0;
	if (slash == 0) {
		strcpy(parent, ".");
	} else {
		size_t plen = slash > 1 ? slash - 1 : 1; /* keep "/" for "/x" */
		memcpy(parent, path, plen);
		parent[plen] = 0;
	}
	return true;
}

/* The path without trailing slashes, in buf (n bytes; split_path checked). */
static void strip(const char *path, char *buf, size_t n)
{
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	snprintf(buf, n, "%.*s", (int)len, path);
}

/* An existing directory may be replaced: empty, or revc's and holding only
 * what its manifest lists. */
static bool replaceable(const char *path, rt_err *e)
{
	DIR *d = opendir(path);
	if (!d)
		return rt_errorf(e, "cannot read '%s': %s", path, strerror(errno));
	bool empty = true;
	for (struct dirent *ent; empty && (ent = readdir(d));)
		empty = strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0;
	if (empty) {
		closedir(d);
		return true;
	}
	rt_manifest m;
	bool found;
	if (!rt_manifest_read(path, &m, &found, e)) {
		closedir(d);
		rt_err inner = *e;
		return rt_errorf(e, "%s; refusing to replace '%s'", inner.msg, path);
	}
	if (!found) {
		closedir(d);
		return rt_errorf(e, "'%s' is not empty and is not a directory revc wrote (it has no %s): "
			"refusing to replace it", path, RT_MANIFEST_NAME);
	}
	bool ok = true;
	rewinddir(d);
	for (struct dirent *ent; ok && (ent = readdir(d));) {
		const char *name = ent->d_name;
		size_t n = strlen(name);
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, RT_MANIFEST_NAME) == 0)
			continue;
		char tensor[256];
		struct stat st;
		bool listed = n > 4 && n - 4 < sizeof tensor && strcmp(name + n - 4, ".npy") == 0;
		if (listed) {
			memcpy(tensor, name, n - 4);
			tensor[n - 4] = 0;
			listed = rt_manifest_find(&m, tensor) && fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				S_ISREG(st.st_mode);
		}
		if (!listed)
			ok = rt_errorf(e, "'%s' holds '%s', which revc did not write there: refusing to replace it",
				path, name);
	}
	closedir(d);
	rt_manifest_free(&m);
	return ok;
}

bool rt_dir_check(const char *path, rt_err *e)
{
	char parent[4096], base[256], p[4096];
	if (!split_path(path, parent, sizeof parent, base, sizeof base, e))
		return false;
	strip(path, p, sizeof p);
	struct stat st, pst;
	if (lstat(p, &st) != 0) {
		if (errno != ENOENT && errno != ENOTDIR) /* (ENOTDIR: said below) */
			return rt_errorf(e, "cannot use '%s': %s", path, strerror(errno));
	} else {
		if (!S_ISDIR(st.st_mode))
			return rt_errorf(e, "'%s' exists and is not a directory", path);
		if (stat(parent, &pst) == 0 && pst.st_dev != st.st_dev)
			return rt_errorf(e, "'%s' is a mount point: revc cannot replace it", path);
		if (access(p, W_OK | X_OK) != 0)
			return rt_errorf(e, "cannot replace '%s': %s", path, strerror(errno));
		if (!replaceable(p, e))
			return false;
	}
	if (access(parent, W_OK | X_OK) != 0)
		return rt_errorf(e, "cannot create a directory beside '%s': %s", path, strerror(errno));
	return true;
}

/* Removes the regular files in the directory `name` under dirfd, then the
 * directory if that emptied it.  Never recurses, never follows a link. */
static void remove_dir(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		DIR *d = fdopendir(fd);
		if (!d) {
			close(fd);
			return;
		}
		for (struct dirent *ent; (ent = readdir(d));) {
			struct stat st;
			if (fstatat(fd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
				unlinkat(fd, ent->d_name, 0);
		}
		closedir(d);
	}
	unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* Is name base.tmp.XXXXXX, as rt_dir_begin makes them? */
static bool temp_name(const char *name, const char *base)
{
	size_t b = strlen(base), t = strlen(TMP_TAG);
	if (strlen(name) != b + t + TMP_SUFFIX || strncmp(name, base, b) != 0 || strncmp(name + b, TMP_TAG, t) != 0)
		return false;
	for (const char *c = name + b + t; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
			return false;
	return true;
}

/* Does the directory open as fd hold only what a temporary of revc's can:
 * its manifest, NAME.npy files and the temporaries of rt_atomic (all
 * regular files), the manifest among them? */
static bool revc_made(int fd)
{
	if (!rt_manifest_is_marked(fd))
		return false;
	int lfd = dup(fd);
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
	if (!d) {
		if (lfd >= 0)
			close(lfd);
		return false;
	}
	bool ok = true;
	for (struct dirent *ent; ok && (ent = readdir(d));) {
		const char *name = ent->d_name;
		size_t n = strlen(name);
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		const char *tag = n > sizeof TMP_TAG + TMP_SUFFIX ? name + n - TMP_SUFFIX - strlen(TMP_TAG) : NULL;
		struct stat st;
		ok = (strcmp(name, RT_MANIFEST_NAME) == 0 || (n > 4 && strcmp(name + n - 4, ".npy") == 0) ||
			(tag && strncmp(tag, TMP_TAG, strlen(TMP_TAG)) == 0)) &&
			fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
	}
	closedir(d);
	return ok;
}

/* Removes the base.tmp.XXXXXX directories in parent that revc made (they
 * carry its manifest and nothing revc does not write) and that no running
 * revc holds (flock). */
static void remove_stale(const char *parent, const char *base)
{
	int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return;
	int lfd = dup(pfd);
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
	if (!d) {
		if (lfd >= 0)
			close(lfd);
		close(pfd);
		return;
	}
	for (struct dirent *ent; (ent = readdir(d));) {
		if (!temp_name(ent->d_name, base))
			continue;
		int fd = openat(pfd, ent->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && revc_made(fd))
			remove_dir(pfd, ent->d_name);
		close(fd);
	}
	closedir(d);
	close(pfd);
}

bool rt_dir_begin(rt_dir *d, const char *path, rt_dir_kind kind, const char *model, rt_err *e)
{
	memset(d, 0, sizeof *d);
	d->fd = -1;
	rt_manifest_init(&d->manifest, kind);
	char parent[4096], base[256];
	if (!rt_dir_check(path, e) || !split_path(path, parent, sizeof parent, base, sizeof base, e))
		return false;
	size_t n = strlen(path) + sizeof TMP_TAG + TMP_SUFFIX;
	d->path = malloc(n);
	d->tmp = malloc(n);
	if (!d->path || !d->tmp) {
		rt_dir_abort(d);
		return rt_errorf(e, "out of memory");
	}
	strip(path, d->path, n);
	remove_stale(parent, base);
	rt_temp_template(d->tmp, n, d->path, strlen(d->path), TMP_TAG);
	if (!mkdtemp(d->tmp)) {
		int err = errno;
		free(d->tmp);
		d->tmp = NULL;
		rt_dir_abort(d);
		return rt_errorf(e, "cannot create a directory beside '%s': %s", path, strerror(err));
	}
	/* Locked before it is marked, so no other revc takes it for stale. */
	d->fd = open(d->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0 || flock(d->fd, LOCK_EX) != 0) {
		rt_errorf(e, "cannot open '%s': %s", d->tmp, strerror(errno));
		rt_dir_abort(d);
		return false;
	}
	/* Marked at once (the window in which a kill leaves an unmarked,
	 * empty temporary is a few system calls wide). */
	if (!rt_manifest_set_model(&d->manifest, model, e) || !rt_manifest_mark(d->fd, &d->manifest, e)) {
		rt_dir_abort(d);
		return false;
	}
	return true;
}

bool rt_dir_write_npy(rt_dir *d, const char *name, rt_npy_dtype dtype, int rank, const int64_t *dim,
	const void *data, rt_err *e)
{
	char path[4096];
	if (!rt_manifest_add(&d->manifest, name, dtype, rank, dim, e))
		return false;
	snprintf(path, sizeof path, "%s/%s.npy", d->tmp, name);
	return rt_npy_write(path, dtype, rank, dim, data, e);
}

/* Makes a rename in path's directory durable. */
static void sync_parent(const char *path)
{
	char parent[4096], base[256];
	rt_err e;
	if (!split_path(path, parent, sizeof parent, base, sizeof base, &e))
		return;
	int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

bool rt_dir_commit(rt_dir *d, rt_err *e)
{
	/* The files were fsync'd as they were written; the manifest, last,
	 * lists them all.  Make the entries durable, look again at what is to
	 * be replaced (hours may have passed since rt_dir_check), then swap. */
	if (!rt_manifest_write(&d->manifest, d->tmp, e)) {
		rt_dir_abort(d);
		return false;
	}
	fsync(d->fd);
	struct stat st;
	bool exists = lstat(d->path, &st) == 0;
	if (exists && !rt_dir_check(d->path, e)) {
		rt_dir_abort(d);
		return false;
	}
	int rc = exists ? renameat2(AT_FDCWD, d->tmp, AT_FDCWD, d->path, RENAME_EXCHANGE)
	                : rename(d->tmp, d->path);
	if (rc != 0) {
		int err = errno;
		rt_errorf(e, "cannot %s '%s': %s", exists ? "replace" : "create", d->path, strerror(err));
		rt_dir_abort(d);
		return false;
	}
	sync_parent(d->path);
	if (exists)
		remove_dir(AT_FDCWD, d->tmp); /* now the previous directory */
	free(d->tmp);
	d->tmp = NULL;
	rt_dir_abort(d); /* frees the rest */
	return true;
}

void rt_dir_abort(rt_dir *d)
{
	if (d->tmp)
		remove_dir(AT_FDCWD, d->tmp);
	if (d->fd >= 0)
		close(d->fd);
	free(d->tmp);
	free(d->path);
	rt_manifest_free(&d->manifest);
	memset(d, 0, sizeof *d);
	d->fd = -1;
}
