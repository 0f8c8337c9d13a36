/* embed.c: revc used from a C program through revc.h alone.
 * Build against an installed revc:
 *   cc embed.c $(pkg-config --cflags --libs revc) -o embed */
#include <stdio.h>

#include <revc.h>

int main(void)
{
	printf("librevc %s (revc.h %d.%d.%d)\n", revc_version(), REVC_VERSION_MAJOR, REVC_VERSION_MINOR,
		REVC_VERSION_PATCH);
	return 0;
}
