/* aot_path.c: where `revc compile` finds the AOT runtime it links into
 * model libraries (runtime/revc_aot.h and librevc_aot.a).
 *
 * An installed revc keeps both in LIBDIR/revc/ (meson.build installs them
 * there).  The prefix is found at run time, not compiled in, so that an
 * installation may be moved (or installed with --destdir) and still work:
 * the file holding this code -- librevc.so, or the revc executable when it
 * is linked statically -- lies in PREFIX/LIBDIR or PREFIX/BINDIR, and the
 * running executable is tried too.  When neither is an installation (revc
 * run from its build directory) the build tree's copies are used, at the
 * paths revc_config.h records.  Nothing is cached: the answer is a few
 * stat calls. */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "revc_config.h"
#include "rt.h"

static bool is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* PREFIX when dir is PREFIX/sub (sub relative, as meson's bindir and
 * libdir usually are), into prefix (RT_PATH_MAX bytes). */
static bool strip_dir(const char *dir, const char *sub, char *prefix)
{
	size_t n = strlen(dir), k = strlen(sub);
	if (sub[0] == '/' || k == 0 || n <= k || dir[n - k - 1] != '/' || strcmp(dir + n - k, sub) != 0)
		return false;
	snprintf(prefix, RT_PATH_MAX, "%.*s", (int)(n - k - 1), dir);
	return true;
}

/* The AOT runtime of the installation holding file (a path to librevc.so
 * or revc), if there is one. */
static bool installed(const char *file, rt_aot_paths *p)
{
	char real[PATH_MAX], prefix[RT_PATH_MAX], dir[RT_PATH_MAX];
	if (!file || !realpath(file, real))
		return false;
	char *slash = strrchr(real, '/');
	if (!slash)
		return false;
	*slash = '\0';
	rt_err e;
	bool ok;
	if (REVC_LIBDIR[0] == '/')
		ok = rt_path_join(dir, sizeof dir, REVC_LIBDIR, "revc", "", &e);
	else if (strip_dir(real, REVC_LIBDIR, prefix) || strip_dir(real, REVC_BINDIR, prefix))
		ok = rt_path_join(dir, sizeof dir, prefix, REVC_LIBDIR, "/revc", &e);
	else
		return false;
	char header[RT_PATH_MAX];
	if (!ok || !rt_path_join(p->lib, sizeof p->lib, dir, "librevc_aot.a", "", &e) ||
	    !rt_path_join(header, sizeof header, dir, "revc_aot.h", "", &e) || !is_file(p->lib) || !is_file(header))
		return false;
	memcpy(p->include, dir, sizeof dir);
	return true;
}

bool rt_aot_find(rt_aot_paths *p, rt_err *e)
{
	Dl_info info;
	if (dladdr((void *)rt_aot_find, &info) && installed(info.dli_fname, p))
		return true;
	if (installed("/proc/self/exe", p))
		return true;
	char header[RT_PATH_MAX];
	snprintf(header, sizeof header, "%s/revc_aot.h", REVC_AOT_INCLUDE);
	if (is_file(REVC_AOT_LIB) && is_file(header)) {
		snprintf(p->lib, sizeof p->lib, "%s", REVC_AOT_LIB);
		snprintf(p->include, sizeof p->include, "%s", REVC_AOT_INCLUDE);
		return true;
	}
	return rt_errorf(e, "cannot find revc's AOT runtime (librevc_aot.a): not in %s/revc of this installation, "
	                    "nor in the build tree (%s)", REVC_LIBDIR, REVC_AOT_LIB);
}
