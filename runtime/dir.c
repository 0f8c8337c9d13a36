/* dir.c: directories revc writes whole (checkpoints, parameters, gradients,
 * running statistics).  A directory D is built under the temporary sibling
 * D.tmp.<random> and swapped into place once complete (renameat2 with
 * RENAME_EXCHANGE when D exists), so D always names a complete directory,
 * old or new, whenever the process dies.  On a filesystem without
 * RENAME_EXCHANGE the old D is first renamed aside to D.old.<random> and
 * removed once the new one is in place: a crash between the two renames
 * leaves no D, and the old directory whole as D.old.<random>, which revc
 * never removes.
 *
 * What may be replaced: a new name, an empty directory, or a directory that
 * carries revc's manifest (manifest.c) of the same kind and holds only the
 * manifest and the NAME.npy files it lists.  Anything else -- a directory
 * of the user's, a checkpoint someone added a file to, a checkpoint that a
 * write of gradients would replace, a file, a symlink, ".", "..", a mount
 * point -- is refused by rt_dir_check with one message, before any work and
 * again just before the swap, and nothing is touched.
 *
 * Temporary directories are marked as revc's from the start (a manifest is
 * their first file, written right after mkdtemp) and flock'ed while they are
 * built.  A killed run leaves its D.tmp.<random> behind; the next rt_dir_begin
 * for D removes every one that is marked, holds only files revc writes and
 * is not locked, and never anything else.  Removal deletes regular files
 * only, the manifest last, and then the directory if that emptied it: it
 * never recurses.  (A kill in the few system calls between mkdtemp and the
 * mark leaves an empty, unmarked directory, which is kept: it cannot be
 * told from one of the user's, and it holds nothing.)  A temporary is
 * private (0700) while it is built; at the swap it takes the mode of the
 * directory it replaces, else 0777 less the umask, as mkdir(2) would give
 * it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manifest.h"

/* Where a directory to replace is: its path without trailing slashes, its
 * parent ("." for a bare name) and its last component. */
typedef struct {
	char path[RT_PATH_MAX], parent[RT_PATH_MAX], base[NAME_MAX + 1];
} place;

/* Splits path into w; refuses names that cannot be renamed ("/", ".",
 * "..") and names too long to carry the temporary suffix. */
static bool split_path(const char *path, place *w, rt_err *e)
{
	size_t len = strlen(path), extra = strlen(RT_TMP_TAG) + RT_TMP_SUFFIX;
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
	if (blen + extra > NAME_MAX || len + extra >= sizeof w->path)
		return rt_errorf(e, "'%s': the name is too long", path);
	memcpy(w->path, path, len);
	w->path[len] = 0;
	memcpy(w->base, path + slash, blen);
	w->base[blen] = 0;
	if (slash == 0) {
		strcpy(w->parent, ".");
	} else {
		size_t plen = slash > 1 ? slash - 1 : 1; /* keep "/" for "/x" */
		memcpy(w->parent, path, plen);
		w->parent[plen] = 0;
	}
	return true;
}

/* The entries of the directory open as fd, read through a descriptor of
 * their own (fd stays the caller's), from the start; NULL on failure. */
static DIR *entries(int fd)
{
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d && dfd >= 0)
		close(dfd);
	if (d)
		rewinddir(d); /* the duplicate shares fd's offset */
	return d;
}

/* The next entry other than "." and "..", or NULL. */
static struct dirent *next(DIR *d)
{
	struct dirent *ent;
	while ((ent = readdir(d)) && (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0))
		;
	return ent;
}

/* Is the entry name of the directory open as fd a regular file (not a link)? */
static bool regular(int fd, const char *name)
{
	struct stat st;
	return fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* The length of NAME in "NAME.npy", or 0 when name is not such a name. */
static size_t npy_stem(const char *name)
{
	size_t n = strlen(name);
	return n > 4 && strcmp(name + n - 4, ".npy") == 0 ? n - 4 : 0;
}

/* Is name base + RT_TMP_TAG + RT_TMP_SUFFIX letters and digits, as
 * mkstemp and mkdtemp make them?  base NULL: any non-empty base. */
static bool temp_name(const char *name, const char *base)
{
	size_t n = strlen(name), t = strlen(RT_TMP_TAG);
	if (n < t + RT_TMP_SUFFIX + 1)
		return false;
	size_t b = n - t - RT_TMP_SUFFIX;
	if ((base && (strlen(base) != b || strncmp(name, base, b) != 0)) || strncmp(name + b, RT_TMP_TAG, t) != 0)
		return false;
	for (const char *c = name + b + t; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
			return false;
	return true;
}

/* An existing directory may be replaced by one of kind: empty, or revc's,
 * of that kind and holding only what its manifest lists. */
static bool replaceable(const char *path, rt_dir_kind kind, rt_err *e)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? entries(fd) : NULL;
	int err = errno;
	if (fd >= 0)
		close(fd);
	if (!d)
		return rt_errorf(e, "cannot read '%s': %s", path, strerror(err));
	if (!next(d)) {
		closedir(d);
		return true;
	}
	rt_manifest m;
	bool found, ok = true;
	if (!rt_manifest_read(path, &m, &found, e))
		ok = rt_err_appendf(e, "; refusing to replace '%s'", path);
	else if (!found)
		ok = rt_errorf(e, "'%s' is not empty and is not a directory revc wrote (it has no %s): "
			"refusing to replace it", path, RT_MANIFEST_NAME);
	else if (m.kind != kind)
		ok = rt_errorf(e, "'%s' holds %s: refusing to replace it with %s", path, rt_dir_kind_what(m.kind),
			rt_dir_kind_what(kind));
	rewinddir(d);
	for (struct dirent *ent; ok && (ent = next(d));) {
		const char *name = ent->d_name;
		if (strcmp(name, RT_MANIFEST_NAME) == 0)
			continue;
		char tensor[NAME_MAX + 1];
		size_t stem = npy_stem(name);
		memcpy(tensor, name, stem);
		tensor[stem] = 0;
		if (!stem || !rt_manifest_find(&m, tensor) || !regular(dirfd(d), name))
			ok = rt_errorf(e, "'%s' holds '%s', which revc did not write there: refusing to replace it",
				path, name);
	}
	closedir(d);
	rt_manifest_free(&m);
	return ok;
}

static bool check(const place *w, rt_dir_kind kind, rt_err *e)
{
	struct stat st, pst;
	if (lstat(w->path, &st) != 0) {
		if (errno != ENOENT && errno != ENOTDIR) /* (ENOTDIR: said below) */
			return rt_errorf(e, "cannot use '%s': %s", w->path, strerror(errno));
	} else {
		if (S_ISLNK(st.st_mode))
			return rt_errorf(e, "'%s' is a symbolic link: name the directory itself", w->path);
		if (!S_ISDIR(st.st_mode))
			return rt_errorf(e, "'%s' exists and is not a directory", w->path);
		if (stat(w->parent, &pst) == 0 && pst.st_dev != st.st_dev)
			return rt_errorf(e, "'%s' is a mount point: revc cannot replace it", w->path);
		if (access(w->path, W_OK | X_OK) != 0)
			return rt_errorf(e, "cannot replace '%s': %s", w->path, strerror(errno));
		if (!replaceable(w->path, kind, e))
			return false;
	}
	if (access(w->parent, W_OK | X_OK) != 0)
		return rt_errorf(e, "cannot create a directory beside '%s': %s", w->path, strerror(errno));
	return true;
}

bool rt_dir_check(const char *path, rt_dir_kind kind, rt_err *e)
{
	place w;
	return split_path(path, &w, e) && check(&w, kind, e);
}

bool rt_dir_same(const char *a, const char *b)
{
	place *w = malloc(2 * sizeof *w);
	char *ra = NULL, *rb = NULL;
	rt_err e;
	bool same = false;
	if (w && split_path(a, &w[0], &e) && split_path(b, &w[1], &e)) {
		ra = realpath(w[0].parent, NULL);
		rb = realpath(w[1].parent, NULL);
		same = strcmp(w[0].base, w[1].base) == 0 && (ra && rb ? strcmp(ra, rb) == 0 : strcmp(w[0].path, w[1].path) == 0);
	}
	free(ra);
	free(rb);
	free(w);
	return same;
}

/* Removes the regular files of the directory open as fd (never following a
 * link, never recursing), the manifest last: a kill part way through leaves
 * a directory still marked as revc's, which the next rt_dir_begin removes
 * (with the manifest gone first, the rest would be kept for ever). */
static void empty_dir(int fd)
{
	DIR *d = entries(fd);
	if (!d)
		return;
	for (struct dirent *ent; (ent = next(d));)
		if (strcmp(ent->d_name, RT_MANIFEST_NAME) != 0 && regular(fd, ent->d_name))
			unlinkat(fd, ent->d_name, 0);
	closedir(d);
	if (regular(fd, RT_MANIFEST_NAME))
		unlinkat(fd, RT_MANIFEST_NAME, 0);
}

/* empty_dir on the directory `name` under dirfd, then removes it if that
 * emptied it. */
static void remove_dir(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		empty_dir(fd);
		close(fd);
	}
	unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* Does the directory open as fd hold only what a temporary of revc's can:
 * its manifest, NAME.npy files and the temporaries of rt_atomic (all
 * regular files), the manifest among them? */
static bool revc_made(int fd)
{
	if (!rt_manifest_is_marked(fd))
		return false;
	DIR *d = entries(fd);
	if (!d)
		return false;
	bool ok = true;
	for (struct dirent *ent; ok && (ent = next(d));) {
		const char *name = ent->d_name;
		ok = (strcmp(name, RT_MANIFEST_NAME) == 0 || npy_stem(name) || temp_name(name, NULL)) &&
			regular(fd, name);
	}
	closedir(d);
	return ok;
}

/* Removes the base.tmp.<random> directories in parent that revc made (they
 * carry its manifest and nothing revc does not write) and that no running
 * revc holds (flock), through the descriptor that was checked and locked. */
static void remove_stale(const place *w)
{
	int pfd = open(w->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = pfd >= 0 ? entries(pfd) : NULL;
	if (!d) {
		if (pfd >= 0)
			close(pfd);
		return;
	}
	for (struct dirent *ent; (ent = next(d));) {
		if (!temp_name(ent->d_name, w->base))
			continue;
		int fd = openat(pfd, ent->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && revc_made(fd)) {
			empty_dir(fd);
			unlinkat(pfd, ent->d_name, AT_REMOVEDIR); /* only if that emptied it */
		}
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
	place w;
	if (!split_path(path, &w, e) || !check(&w, kind, e))
		return false;
	size_t n = strlen(w.path) + strlen(RT_TMP_TAG) + RT_TMP_SUFFIX + 1;
	d->path = strdup(w.path);
	d->tmp = malloc(n);
	if (!d->path || !d->tmp) {
		rt_dir_abort(d);
		return rt_error_oom(e, "a directory's name", (int64_t)n);
	}
	remove_stale(&w);
	rt_temp_template(d->tmp, n, d->path, strlen(d->path), RT_TMP_TAG);
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
	char path[RT_PATH_MAX];
	return rt_manifest_add(&d->manifest, name, dtype, rank, dim, e) &&
		rt_path_join(path, sizeof path, d->tmp, name, ".npy", e) && rt_npy_write(path, dtype, rank, dim, data, e);
}

/* Puts the complete directory tmp in place of the existing one at path
 * without RENAME_EXCHANGE: the old one goes aside to path.old.<random> (a
 * name revc never removes by itself), the new one takes its name, and the
 * old one is removed.  Returns what rename does, with errno. */
static int replace_aside(const char *tmp, const char *path)
{
	char aside[RT_PATH_MAX];
	if (!rt_temp_template(aside, sizeof aside, path, strlen(path), ".old.")) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* An empty directory of that name, which the rename replaces. */
	if (!mkdtemp(aside) || rename(path, aside) != 0) {
		int err = errno;
		rmdir(aside);
		errno = err;
		return -1;
	}
	if (rename(tmp, path) != 0) {
		int err = errno;
		rename(aside, path); /* put the old one back */
		errno = err;
		return -1;
	}
	rt_sync_parent(path);
	remove_dir(AT_FDCWD, aside);
	return 0;
}

bool rt_dir_commit(rt_dir *d, rt_err *e)
{
	/* The files were fsync'd as they were written; the manifest, last,
	 * lists them all.  Look again at what is to be replaced (hours may have
	 * passed since rt_dir_check), give the directory its mode (mkdtemp's is
	 * 0700), make it and its entries durable, then swap. */
	if (!rt_manifest_write(&d->manifest, d->tmp, e)) {
		rt_dir_abort(d);
		return false;
	}
	struct stat st;
	bool exists = lstat(d->path, &st) == 0;
	if (exists && !rt_dir_check(d->path, d->manifest.kind, e)) {
		rt_dir_abort(d);
		return false;
	}
	if (fchmod(d->fd, exists ? st.st_mode & 07777 : rt_umasked(0777)) != 0 || fsync(d->fd) != 0) {
		rt_errorf(e, "cannot write '%s': %s", d->tmp, strerror(errno));
		rt_dir_abort(d);
		return false;
	}
	bool aside = false;
	int rc = exists ? renameat2(AT_FDCWD, d->tmp, AT_FDCWD, d->path, RENAME_EXCHANGE) : rename(d->tmp, d->path);
	if (rc != 0 && exists && (errno == EINVAL || errno == ENOSYS)) {
		aside = true; /* this filesystem cannot exchange two names */
		rc = replace_aside(d->tmp, d->path);
	}
	if (rc != 0) {
		rt_errorf(e, "cannot %s '%s': %s", exists ? "replace" : "create", d->path, strerror(errno));
		rt_dir_abort(d);
		return false;
	}
	if (!aside)
		rt_sync_parent(d->path);
	if (exists && !aside)
		remove_dir(AT_FDCWD, d->tmp); /* now the previous directory */
	free(d->tmp);
	d->tmp = NULL;
	rt_dir_abort(d); /* frees the rest */
	return true;
}

void rt_dir_abort(rt_dir *d)
{
	if (d->tmp && d->fd >= 0) {
		empty_dir(d->fd);
		rmdir(d->tmp);
	} else if (d->tmp) {
		remove_dir(AT_FDCWD, d->tmp);
	}
	if (d->fd >= 0)
		close(d->fd);
	free(d->tmp);
	free(d->path);
	rt_manifest_free(&d->manifest);
	memset(d, 0, sizeof *d);
	d->fd = -1;
}
