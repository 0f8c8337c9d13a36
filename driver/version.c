/* version.c: the library's version (revc.h), as meson.build sets it. */
#include "revc.h"
#include "revc_config.h"

const char *revc_version(void)
{
	return REVC_VERSION;
}
