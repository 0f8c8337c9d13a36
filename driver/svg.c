/* svg.c: the pieces the hand-written SVG figures share (the memory
 * timeline, driver/timeline.c; the memory/time frontier, driver/frontier.c):
 * escaped text, round tick steps and their labels, and the width estimate
 * their layouts use, since SVG cannot measure text. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

double drv_svg_text_w(const char *s, double size)
{
	return (double)strlen(s) * size * DRV_SVG_EM;
}

void drv_svg_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

void drv_svg_text(FILE *f, double x, double y, const char *anchor, const char *extra, const char *s)
{
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\"%s%s%s%s>", x, y, anchor ? " text-anchor=\"" : "",
		anchor ? anchor : "", anchor ? "\"" : "", extra ? extra : "");
	drv_svg_escaped(f, s);
	fputs("</text>\n", f);
}

double drv_svg_nice_step(double span, int want)
{
	if (!(span > 0))
		return 1;
	double raw = span / want, p = pow(10, floor(log10(raw)));
	return raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 2.5 * p ? 2.5 * p : raw <= 5 * p ? 5 * p
		: 10 * p;
}

void drv_svg_tick_label(char *buf, size_t n, double v, double step)
{
	int dec = 0;
	if (fabs(v) < 1e-9 * step)
		v = 0; /* not "-0" */
	for (double k = step; dec < 6 && fabs(k - round(k)) > 1e-6 * k; k *= 10)
		dec++;
	snprintf(buf, n, "%.*f", dec, v);
}

FILE *drv_svg_open(double W, double H, double font, char **buf, size_t *len)
{
	*buf = NULL;
	*len = 0;
	FILE *f = open_memstream(buf, len);
	if (!f)
		IR_DIE("open_memstream failed");
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Verdana, sans-serif\" "
		"font-size=\"%.0f\">\n", ceil(W), ceil(H), ceil(W), ceil(H), font);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	return f;
}
