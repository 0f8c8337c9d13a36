/* step_arena.c: the one allocation a step's values and workspaces live in
 * (interpreter and JIT arenas, a compiled library's).  An arena of 2 MiB or
 * more is 2 MiB aligned and asks the kernel for transparent huge pages
 * (madvise; Debian's default THP mode serves only regions that ask): a
 * step sweeps its whole arena, and with 4 KiB pages revnet-38's 200 MB
 * need 50,000 TLB entries where the core has a few thousand.  The pages
 * are given only when the kernel has them; the arena works either way.
 * REVC_HUGEPAGES=0 in the environment turns the request off, for
 * comparisons.  Free an arena with free(). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rt.h"

enum { HUGE_PAGE = 2 << 20 };

static bool want_huge_pages(void)
{
	const char *v = getenv("REVC_HUGEPAGES");
	return !v || strcmp(v, "0") != 0;
}

void *rt_step_arena_alloc(int64_t bytes)
{
	size_t size = (size_t)((bytes + 63) / 64 * 64 + 64);
	if (size < HUGE_PAGE || !want_huge_pages())
		return aligned_alloc(64, size);
	size = (size + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
	void *p = aligned_alloc(HUGE_PAGE, size);
#ifdef MADV_HUGEPAGE
	if (p)
		(void)madvise(p, size, MADV_HUGEPAGE); /* advice: failure changes nothing */
#endif
	return p;
}
