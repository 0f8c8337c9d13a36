/* timeline.c: the SVG that `revc mem --timeline` draws: the bytes live at
 * each schedule step, stacked by category, on axes in MiB and schedule
 * steps, with the peak marked by the node that runs there, and a legend
 * beside the plot giving each category's bytes at the peak.
 *
 * The leading steps that change no live bytes (parameters, state and
 * inputs being brought in) are left off the step axis when they are more
 * than a few percent of it, and the axis says so.  SVG cannot measure
 * text, so widths are estimated generously (DRV_SVG_EM of the font size a
 * character, more for bold) and the canvas is laid out around the widest
 * label: nothing overlaps and nothing is cut off.  tests/cli/timeline.sh
 * checks that with the same estimate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define FONT 12.0
#define TITLE_FONT 16.0
/* Bold text counts as BOLD times its size (drv_svg_text_w). */
#define BOLD 1.1
#define MIB 1048576.0
/* Leading unchanged steps are left out when they are at least this share. */
#define SKIP_SHARE 0.02

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
#define NSTACK ((int)(sizeof stack / sizeof stack[0]))

static int64_t bytes_at(const ps_memory *m, int t, ps_mem_cat c)
{
	if (c == PS_MEM_PARAMS || c == PS_MEM_OPTSTATE)
		return m->persistent[c];
	return t < m->steps ? m->live[(size_t)t * PS_MEM_CAT_COUNT + c] : 0;
}

/* The plot box and what it maps: steps [s0, n) across, bytes [0, ymax] up. */
typedef struct {
	double L, T, PW, PH;
	int s0, n;
	double ymax;
} frame;

static double fx(const frame *fr, double t)
{
	return fr->L + fr->PW * (t - fr->s0) / (fr->n - fr->s0);
}

static double fy(const frame *fr, int64_t b)
{
	return fr->T + fr->PH * (1 - (double)b / fr->ymax);
}

/* One edge of a band: the step function lev over the steps drawn, left to
 * right or right to left, a point only where it changes. */
static void edge(FILE *f, const frame *fr, const int64_t *lev, bool backward)
{
	int s0 = fr->s0, n = fr->n;
	if (!backward) {
		fprintf(f, "%.1f,%.1f ", fx(fr, s0), fy(fr, lev[s0]));
		for (int t = s0 + 1; t < n; t++)
			if (lev[t] != lev[t - 1])
				fprintf(f, "%.1f,%.1f %.1f,%.1f ", fx(fr, t), fy(fr, lev[t - 1]), fx(fr, t),
					fy(fr, lev[t]));
		fprintf(f, "%.1f,%.1f ", fx(fr, n), fy(fr, lev[n - 1]));
	} else {
		fprintf(f, "%.1f,%.1f ", fx(fr, n), fy(fr, lev[n - 1]));
		for (int t = n - 1; t > s0; t--)
			if (lev[t] != lev[t - 1])
				fprintf(f, "%.1f,%.1f %.1f,%.1f ", fx(fr, t), fy(fr, lev[t]), fx(fr, t),
					fy(fr, lev[t - 1]));
		fprintf(f, "%.1f,%.1f ", fx(fr, s0), fy(fr, lev[s0]));
	}
}

/* The first step whose live bytes differ from step 0's, or 0. */
static int unchanged_lead(const ps_memory *m, int n)
{
	for (int t = 1; t < n; t++)
		for (int c = 0; c < PS_MEM_CAT_COUNT; c++)
			if (bytes_at(m, t, (ps_mem_cat)c) != bytes_at(m, 0, (ps_mem_cat)c))
				return t;
	return 0;
}

/* Horizontal gridlines at the byte ticks, drawn under the data. */
static void grid(FILE *f, const frame *fr, double step)
{
	for (int k = 1; k * step * MIB <= fr->ymax * (1 + 1e-9); k++) {
		double y = fy(fr, (int64_t)(k * step * MIB));
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n",
			fr->L, y, fr->L + fr->PW, y);
	}
}

/* Ticks and labels, in MiB up (step apart) and in schedule steps across. */
static void axes(FILE *f, const frame *fr, double step, int skipped)
{
	char lab[64];
	for (int k = 0; k * step * MIB <= fr->ymax * (1 + 1e-9); k++) {
		double y = fy(fr, (int64_t)(k * step * MIB));
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
			fr->L - 4, y, fr->L, y);
		drv_svg_tick_label(lab, sizeof lab, k * step, step);
		drv_svg_text(f, fr->L - 7, y + 4, "end", NULL, lab);
	}
	/* Steps: ticks at round numbers, and the first step drawn when the
	 * axis starts late, with a break mark. */
	double sstep = ceil(drv_svg_nice_step(fr->n - fr->s0, 8));
	double first = ceil(fr->s0 / sstep) * sstep, s0_w = 0;
	if (skipped) {
		snprintf(lab, sizeof lab, "%d", fr->s0);
		s0_w = drv_svg_text_w(lab, FONT);
		drv_svg_text(f, fr->L, fr->T + fr->PH + 18, "middle", NULL, lab);
		double y = fr->T + fr->PH;
		fprintf(f, "<path d=\"M%.1f,%.1f l6,-10 M%.1f,%.1f l6,-10\" stroke=\"black\"/>\n",
			fr->L + 4, y + 5, fr->L + 9, y + 5);
	}
	for (double s = first; s <= fr->n; s += sstep) {
		double x = fx(fr, s);
		snprintf(lab, sizeof lab, "%.0f", s);
		if (skipped && x - fr->L < (s0_w + drv_svg_text_w(lab, FONT)) / 2 + 8)
			continue;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", x,
			fr->T + fr->PH, x, fr->T + fr->PH + 4);
		drv_svg_text(f, x, fr->T + fr->PH + 18, "middle", NULL, lab);
	}
	fprintf(f, "<rect id=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
		"stroke=\"black\"/>\n", fr->L, fr->T, fr->PW, fr->PH);
	drv_svg_text(f, fr->L - 7, fr->T - 14, "end", NULL, "MiB");
}

/* One polygon per category over the levels lev (NSTACK rows of fr->n): the
 * top of its band left to right, the top of the band below right to left. */
static void bands(FILE *f, const frame *fr, const int64_t *lev)
{
	int n = fr->n;
	int64_t *ground = calloc((size_t)n, sizeof *ground);
	if (!ground)
		IR_DIE("out of memory");
	for (int c = 0; c < NSTACK; c++) {
		const int64_t *hi = lev + (size_t)c * n, *lo = c ? lev + (size_t)(c - 1) * n : ground;
		bool any = false;
		for (int t = fr->s0; t < n && !any; t++)
			any = hi[t] != lo[t];
		if (!any)
			continue;
		fprintf(f, "<polygon fill=\"%s\" stroke=\"none\" points=\"", colour[stack[c]]);
		edge(f, fr, hi, false);
		edge(f, fr, lo, true);
		fprintf(f, "\"/>\n");
	}
	free(ground);
}

/* The legend at (x, y), top of the stack first, each category with its
 * bytes at step p; returns its width.  With f NULL it only measures. */
static double legend(FILE *f, const ps_memory *m, int p, double x, double y, const char *head,
	const char *total)
{
	const double swatch = 12, gap = 8, col = 16;
	char values[NSTACK][32];
	double name_w = drv_svg_text_w("total", FONT * BOLD), value_w = drv_svg_text_w(total, FONT * BOLD);
	for (int c = 0; c < NSTACK; c++) {
		revc_format_bytes(values[c], sizeof values[c], bytes_at(m, p, stack[c]));
		name_w = fmax(name_w, drv_svg_text_w(ps_mem_cat_name(stack[c]), FONT));
		value_w = fmax(value_w, drv_svg_text_w(values[c], FONT));
	}
	double width = fmax(swatch + gap + name_w + col + value_w, drv_svg_text_w(head, FONT * BOLD));
	if (!f)
		return width;
	double vx = x + swatch + gap + name_w + col + value_w;
	fprintf(f, "<g id=\"legend\">\n");
	drv_svg_text(f, x, y + 10, NULL, " font-weight=\"bold\"", head);
	y += 22;
	for (int c = NSTACK - 1; c >= 0; c--, y += 20) {
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"%s\"/>\n",
			x, y, swatch, swatch, colour[stack[c]]);
		drv_svg_text(f, x + swatch + gap, y + 10, NULL, NULL, ps_mem_cat_name(stack[c]));
		drv_svg_text(f, vx, y + 10, "end", NULL, values[c]);
	}
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", x,
		y, vx, y);
	drv_svg_text(f, x + swatch + gap, y + 16, NULL, " font-weight=\"bold\"", "total");
	drv_svg_text(f, vx, y + 16, "end", " font-weight=\"bold\"", total);
	fprintf(f, "</g>\n");
	return width;
}

/* The peak at step p (bytes in all): a dashed line up into the band above
 * the plot, and its two-line label beside the line on whichever side has
 * room in a canvas W wide. */
static void peak_mark(FILE *f, const frame *fr, int p, int64_t bytes, double W, const char *line1,
	const char *line2)
{
	double px = fx(fr, p + 0.5), py = fy(fr, bytes);
	double label_w = fmax(drv_svg_text_w(line1, FONT * BOLD), drv_svg_text_w(line2, FONT));
	double ly = fr->T - 44;
	bool right = px + 8 + label_w <= W - 16;
	double lx = right ? px + 8 : fmax(16 + label_w, px - 8);
	const char *anchor = right ? "start" : "end";
	fprintf(f, "<g id=\"peak\">\n");
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" "
		"stroke-dasharray=\"4,3\"/>\n", px, ly - 10, px, fr->T + fr->PH);
	fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"white\" stroke=\"black\"/>\n",
		px, py);
	drv_svg_text(f, lx, ly, anchor, " font-weight=\"bold\"", line1);
	drv_svg_text(f, lx, ly + 16, anchor, NULL, line2);
	fprintf(f, "</g>\n");
}

char *drv_timeline_svg(const char *model, int64_t batch, ps_strategy s,
	const ir_graph *g, const ps_memory *m)
{
	int n = m->steps > 0 ? m->steps : 1;
	/* Cumulative levels, bottom to top: lev[c] is the top of band c. */
	int64_t *lev = calloc((size_t)NSTACK * (size_t)n, sizeof *lev);
	if (!lev)
		IR_DIE("out of memory");
	int64_t top = 1;
	for (int t = 0; t < n; t++) {
		int64_t sum = 0;
		for (int c = 0; c < NSTACK; c++) {
			sum += m->steps > 0 ? bytes_at(m, t, stack[c]) : 0;
			lev[(size_t)c * n + t] = sum;
		}
		if (sum > top)
			top = sum;
	}
	int lead = unchanged_lead(m, n);
	int skipped = lead >= SKIP_SHARE * n ? lead - 1 : 0;

	/* The texts whose widths the layout depends on. */
	char title[256], subtitle[256], note[256], peak1[128], peak2[256], legend_head[64];
	char total_s[32];
	int p = m->peak_step >= 0 && m->peak_step < n ? m->peak_step : 0;
	int64_t peak_total = m->steps > 0 ? lev[(size_t)(NSTACK - 1) * n + p] : 0;
	snprintf(title, sizeof title, "%s, batch %lld, strategy %s", model, (long long)batch,
		ps_strategy_name(s));
	snprintf(subtitle, sizeof subtitle, "bytes live at each of the %d schedule steps, stacked by "
		"category", m->steps);
	if (skipped)
		snprintf(note, sizeof note, "schedule step (steps 0 to %d, which change no live bytes, "
			"are left out)", skipped - 1);
	else
		snprintf(note, sizeof note, "schedule step");
	revc_format_bytes(total_s, sizeof total_s, peak_total);
	snprintf(peak1, sizeof peak1, "peak %.2f MiB at step %d", (double)peak_total / MIB, p);
	peak2[0] = 0;
	if (p < g->n) {
		const ir_node *v = g->nodes[p];
		char ref[64];
		snprintf(peak2, sizeof peak2, "%s %s %s%s%s", ir_node_ref(v, ref, sizeof ref),
			ir_role_name(v->role), ir_op_name(v->op), v->scope ? " in " : "", v->scope ? v->scope : "");
	}
	snprintf(legend_head, sizeof legend_head, "at the peak (step %d)", p);

	/* Layout: title and the peak's label above the plot, tick labels to
	 * its left, the legend to its right. */
	frame fr = {.T = 112, .PW = 720, .PH = 320, .s0 = skipped, .n = n};
	double ystep = drv_svg_nice_step((double)top / MIB, 6);
	fr.ymax = ceil((double)top / MIB / ystep - 1e-9) * ystep * MIB;
	if (fr.ymax < (double)top)
		fr.ymax = (double)top;
	char lab[64];
	drv_svg_tick_label(lab, sizeof lab, fr.ymax / MIB, ystep);
	fr.L = 16 + fmax(drv_svg_text_w(lab, FONT), drv_svg_text_w("MiB", FONT)) + 12;
	double legend_x = fr.L + fr.PW + 28;
	double W = legend_x + legend(NULL, m, p, 0, 0, legend_head, total_s) + 16;
	W = fmax(W, 16 + fmax(drv_svg_text_w(title, TITLE_FONT * BOLD), drv_svg_text_w(subtitle, FONT)) + 16);
	W = fmax(W, fr.L + fr.PW / 2 + drv_svg_text_w(note, FONT) / 2 + 16);
	double H = fr.T + fr.PH + 56;

	char *buf;
	size_t len;
	FILE *f = drv_svg_open(W, H, FONT, &buf, &len);
	char big[64];
	snprintf(big, sizeof big, " font-size=\"%.0f\" font-weight=\"bold\"", TITLE_FONT);
	drv_svg_text(f, 16, 26, NULL, big, title);
	drv_svg_text(f, 16, 46, NULL, " fill=\"#555555\"", subtitle);

	grid(f, &fr, ystep);
	bands(f, &fr, lev);
	axes(f, &fr, ystep, skipped);
	drv_svg_text(f, fr.L + fr.PW / 2, fr.T + fr.PH + 40, "middle", NULL, note);

	peak_mark(f, &fr, p, peak_total, W, peak1, peak2);
	legend(f, m, p, legend_x, fr.T + 4, legend_head, total_s);
	fprintf(f, "</svg>\n");
	fclose(f);
	free(lev);
	return buf;
}
