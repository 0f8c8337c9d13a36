/* timeline.c: the SVG that `revc mem --timeline` draws: live bytes at each
 * schedule step, stacked by category, the peak marked. */
#include <stdlib.h>

#include "cli.h"
#include "rt.h"

static const char *const colour[] = {
	[PS_MEM_PARAMS] = "#9e9e9e",
	[PS_MEM_OPTSTATE] = "#c7c7c7",
	[PS_MEM_SAVED] = "#1f77b4",
	[PS_MEM_TRANSIENT] = "#ff7f0e",
	[PS_MEM_GRADS] = "#2ca02c",
	[PS_MEM_WORKSPACE] = "#d62728",
};
_Static_assert(sizeof colour / sizeof colour[0] == PS_MEM_CAT_COUNT, "category colours");

/* Bottom to top. */
static const ps_mem_cat stack[] = {PS_MEM_PARAMS, PS_MEM_OPTSTATE, PS_MEM_SAVED, PS_MEM_GRADS,
	PS_MEM_TRANSIENT, PS_MEM_WORKSPACE};

static int64_t bytes_at(const ps_memory *m, int t, ps_mem_cat c)
{
	if (c == PS_MEM_PARAMS || c == PS_MEM_OPTSTATE)
		return m->persistent[c];
	return m->live[(size_t)t * PS_MEM_CAT_COUNT + c];
}

bool cli_timeline_svg(const char *path, const char *model, ps_strategy s, const ps_memory *m)
{
	const double W = 960, H = 420, L = 80, R = 200, T = 40, B = 50;
	double pw = W - L - R, ph = H - T - B;
	int n = m->steps > 0 ? m->steps : 1;
	int64_t top = 0;
	for (int t = 0; t < n; t++) {
		int64_t sum = 0;
		for (size_t c = 0; c < sizeof stack / sizeof stack[0]; c++)
			sum += bytes_at(m, t, stack[c]);
		if (sum > top)
			top = sum;
	}
	double ymax = top > 0 ? (double)top * 1.05 : 1;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		IR_DIE("open_memstream failed");
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"15\">%s, strategy %s: live bytes per schedule step</text>\n",
		L, model, ps_strategy_name(s));
	/* One polygon per category: its top edge left to right, its bottom edge
	 * (the layers below) right to left. */
	int64_t *below = calloc((size_t)n + 1, sizeof *below);
	if (!below)
		IR_DIE("out of memory");
	for (size_t c = 0; c < sizeof stack / sizeof stack[0]; c++) {
		fprintf(f, "<polygon fill=\"%s\" stroke=\"none\" points=\"", colour[stack[c]]);
		for (int t = 0; t < n; t++) {
			double x0 = L + pw * t / n, x1 = L + pw * (t + 1) / n;
			double y = T + ph * (1 - (double)(below[t] + bytes_at(m, t, stack[c])) / ymax);
			fprintf(f, "%.1f,%.1f %.1f,%.1f ", x0, y, x1, y);
		}
		for (int t = n - 1; t >= 0; t--) {
			double x0 = L + pw * t / n, x1 = L + pw * (t + 1) / n;
			double y = T + ph * (1 - (double)below[t] / ymax);
			fprintf(f, "%.1f,%.1f %.1f,%.1f ", x1, y, x0, y);
			below[t] += bytes_at(m, t, stack[c]);
		}
		fprintf(f, "\"/>\n");
		fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
			"<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", W - R + 15, T + 20.0 * (double)c, colour[stack[c]],
			W - R + 32, T + 20.0 * (double)c + 10, ps_mem_cat_name(stack[c]));
	}
	/* Axes, ticks and the peak. */
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, T + ph, L + pw, T + ph);
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, T, L, T + ph);
	for (int k = 0; k <= 4; k++) {
		double v = ymax * k / 4, y = T + ph * (1 - (double)k / 4);
		fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.1f MiB</text>\n", L - 6, y + 4,
			v / (1 << 20));
		int step = (int)((double)n * k / 4);
		fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>\n", L + pw * k / 4,
			T + ph + 18, step);
	}
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">schedule step</text>\n", L + pw / 2, H - 10);
	double px = L + pw * (m->peak_step + 0.5) / n;
	int64_t peak_total = m->peak + m->persistent[PS_MEM_PARAMS] + m->persistent[PS_MEM_OPTSTATE];
	double py = T + ph * (1 - (double)peak_total / ymax);
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"black\" stroke-dasharray=\"4,3\"/>\n",
		px, T, px, T + ph);
	fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"black\"/>\n", px, py);
	fprintf(f, "<text x=\"%.1f\" y=\"%.0f\">peak %.2f MiB at step %d</text>\n", px + 6, T + 12,
		(double)peak_total / (1 << 20), m->peak_step);
	fprintf(f, "</svg>\n");
	fclose(f);
	free(below);
	bool ok = cli_write_output(path, buf, len);
	free(buf);
	return ok;
}
