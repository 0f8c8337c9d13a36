/* Preloaded by tests/cli/checkpoint.sh: an unlinkat that, when
 * REVC_TEST_KILL_UNLINK is set, kills the process with SIGKILL right after
 * it has removed the manifest of a directory named *.tmp.* -- a kill at
 * a moment the test could otherwise only hit by chance, part way through
 * removing the checkpoint a save has just replaced.  revc removes the
 * manifest last (runtime/dir.c), so what the kill leaves is an empty
 * directory; had the manifest gone first, the files after it would stay,
 * unmarked, and no later save would remove them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT (meson passes -D_GNU_SOURCE already) */
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int unlinkat(int dirfd, const char *path, int flags);

/* Is the directory dirfd names (or path's, with AT_FDCWD) a temporary? */
static int in_temporary(int dirfd, const char *path)
{
	if (dirfd == AT_FDCWD)
		return strstr(path, ".tmp.") != NULL;
	char link[64], dir[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
	ssize_t n = readlink(link, dir, sizeof dir - 1);
	if (n <= 0)
		return 0;
	dir[n] = 0;
	return strstr(dir, ".tmp.") != NULL;
}

int unlinkat(int dirfd, const char *path, int flags)
{
	int (*real)(int, const char *, int) = (int (*)(int, const char *, int))dlsym(RTLD_NEXT, "unlinkat");
	int rc = real(dirfd, path, flags);
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (rc == 0 && getenv("REVC_TEST_KILL_UNLINK") && strcmp(base, "revc-manifest.txt") == 0 &&
	    in_temporary(dirfd, path))
		raise(SIGKILL);
	return rc;
}
