/* manifest.h: internal to runtime/.  Writing revc-manifest.txt, and the
 * mark by which rt_dir (dir.c) tells its own temporary directories from
 * anyone else's; the reading side is in rt.h. */
#ifndef REVC_RT_MANIFEST_H
#define REVC_RT_MANIFEST_H

#include "rt.h"

/* Seals m and writes DIR/revc-manifest.txt atomically. */
bool rt_manifest_write(rt_manifest *m, const char *dir, rt_err *e);
/* Writes revc-manifest.txt into the new directory open as dirfd at once
 * (no temporary, no fsync): the mark of a temporary directory, which
 * rt_manifest_write replaces once the directory is complete. */
bool rt_manifest_mark(int dirfd, const rt_manifest *m, rt_err *e);
/* Whether the directory open as dirfd holds a revc-manifest.txt that starts
 * as a revc manifest does (of any version), or an empty one (a mark cut
 * short): how revc recognises its own temporaries. */
bool rt_manifest_is_marked(int dirfd);

#endif
