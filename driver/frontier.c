/* frontier.c: the SVG that `revc mem --plot` draws: strategy auto's
 * frontier (revc_sweep_run) as a step line of planned total (MiB, across)
 * against step time (seconds, up): for a budget x, the line is the time of
 * the fastest schedule whose total fits x.  A dot marks each frontier
 * schedule; store, revnet and checkpoint are labelled squares on the same
 * axes.  Measured step times, when the caller filled them in, are hollow
 * circles joined by a dashed line.  The layout estimates text widths as
 * timeline.c does (drv_svg_text_w), so labels stay inside the canvas. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define FONT 12.0
#define TITLE_FONT 16.0
#define MIB 1048576.0

typedef struct {
	double L, T, PW, PH;
	double x0, x1, y0, y1; /* MiB across, seconds up */
} frame;

static double fx(const frame *fr, int64_t bytes)
{
	return fr->L + fr->PW * ((double)bytes / MIB - fr->x0) / (fr->x1 - fr->x0);
}

static double fy(const frame *fr, double s)
{
	return fr->T + fr->PH * (1 - (s - fr->y0) / (fr->y1 - fr->y0));
}

/* Ticks, labels and gridlines of both axes, and the axis titles. */
static void axes(FILE *f, const frame *fr, double xs, double ys, const char *ytitle)
{
	char lab[64];
	for (double v = ceil(fr->y0 / ys - 1e-9) * ys; v <= fr->y1 + 1e-9 * ys; v += ys) {
		double y = fy(fr, v);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", fr->L, y,
			fr->L + fr->PW, y);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", fr->L - 4, y,
			fr->L, y);
		drv_svg_tick_label(lab, sizeof lab, v, ys);
		drv_svg_text(f, fr->L - 7, y + 4, "end", NULL, lab);
	}
	for (double v = ceil(fr->x0 / xs - 1e-9) * xs; v <= fr->x1 + 1e-9 * xs; v += xs) {
		double x = fx(fr, (int64_t)(v * MIB));
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", x, fr->T, x,
			fr->T + fr->PH);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", x,
			fr->T + fr->PH, x, fr->T + fr->PH + 4);
		drv_svg_tick_label(lab, sizeof lab, v, xs);
		drv_svg_text(f, x, fr->T + fr->PH + 18, "middle", NULL, lab);
	}
	fprintf(f, "<rect id=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
		"stroke=\"black\"/>\n", fr->L, fr->T, fr->PW, fr->PH);
	drv_svg_text(f, fr->L + fr->PW / 2, fr->T + fr->PH + 40, "middle", NULL,
		"planned total: parameters + optimiser state + arena (MiB)");
	drv_svg_text(f, fr->L - 7, fr->T - 12, "end", NULL, ytitle);
}

/* The fastest time within each budget: from each point (by total
 * ascending) right to the next one's total, then down to its time, and
 * on from the last (store) to the right edge.  measured: the measured
 * times instead, dashed, where every point has one. */
static void step_line(FILE *f, const frame *fr, const revc_sweep *s, bool measured)
{
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"", measured ? "#d62728"
		: "#1f77b4", measured ? "1.5" : "2", measured ? " stroke-dasharray=\"5,3\"" : "");
	for (int i = s->npoints - 1; i >= 0; i--) {
		const revc_sweep_point *p = &s->points[i];
		double t = measured ? p->measured_seconds : p->predicted_seconds;
		if (i < s->npoints - 1)
			fprintf(f, "%.1f,%.1f ", fx(fr, p->total_bytes), fy(fr, measured ? s->points[i + 1].measured_seconds
				: s->points[i + 1].predicted_seconds));
		fprintf(f, "%.1f,%.1f ", fx(fr, p->total_bytes), fy(fr, t));
	}
	if (s->npoints > 0) {
		const revc_sweep_point *p = &s->points[0];
		fprintf(f, "%.1f,%.1f", fr->L + fr->PW, fy(fr, measured ? p->measured_seconds : p->predicted_seconds));
	}
	fputs("\"/>\n", f);
}

static bool all_measured(const revc_sweep *s)
{
	for (int i = 0; i < s->npoints; i++)
		if (s->points[i].measured_seconds < 0)
			return false;
	return s->npoints > 0;
}

char *revc_sweep_svg(const revc_model *m, const revc_sweep *s)
{
	bool meas = all_measured(s);
	for (int i = 0; i < 3; i++)
		meas = meas && s->fixed[i].measured_seconds >= 0;
	/* The ranges: every point drawn, with a margin. */
	double xmax = 0, ymin = INFINITY, ymax = 0;
	for (int i = 0; i < s->npoints + 3; i++) {
		const revc_sweep_point *p = i < s->npoints ? &s->points[i] : &s->fixed[i - s->npoints];
		xmax = fmax(xmax, (double)p->total_bytes / MIB);
		ymin = fmin(ymin, p->predicted_seconds);
		ymax = fmax(ymax, p->predicted_seconds);
		if (meas) {
			ymin = fmin(ymin, p->measured_seconds);
			ymax = fmax(ymax, p->measured_seconds);
		}
	}
	if (!(ymin < ymax)) {
		ymin = ymin > 0 ? ymin * 0.9 : 0;
		ymax = ymax > 0 ? ymax * 1.1 : 1;
	}
	double ys = drv_svg_nice_step(ymax - ymin, 6), xs = drv_svg_nice_step(xmax * 1.05, 8);
	frame fr = {.T = 96, .PW = 640, .PH = 360};
	fr.y0 = floor(ymin / ys - 0.25) * ys;
	fr.y1 = ceil(ymax / ys + 0.25) * ys;
	if (fr.y0 < 0)
		fr.y0 = 0;
	fr.x0 = 0;
	fr.x1 = ceil(xmax * 1.05 / xs) * xs;
	char lab[64];
	drv_svg_tick_label(lab, sizeof lab, fr.y1, ys);
	const char *ytitle = "s a step";
	fr.L = 16 + fmax(drv_svg_text_w(lab, FONT), drv_svg_text_w(ytitle, FONT)) + 12;

	char title[256], sub[256], rate[64];
	snprintf(title, sizeof title, "%s, batch %lld: the memory/time frontier", revc_model_name(m),
		(long long)revc_model_batch(m));
	snprintf(rate, sizeof rate, "%.1f", REVC_SWEEP_FLOP_RATE / 1e9);
	snprintf(sub, sizeof sub, "strategy auto's %d schedules (of %d choices); predicted time = cost-model FLOPs "
		"at %s GFLOP/s%s", s->npoints, s->choices, rate, meas ? "; measured: fastest of the timed steps" : "");
	static const char *const legend[] = {"auto (predicted)", "auto (measured)", "fixed strategies (predicted)",
		"fixed strategies (measured)"};
	double lw = 0;
	for (int i = 0; i < 4; i++)
		if (meas || i % 2 == 0)
			lw = fmax(lw, drv_svg_text_w(legend[i], FONT));
	double W = fr.L + fr.PW + 28 + 30 + lw + 16;
	W = fmax(W, 16 + fmax(drv_svg_text_w(title, TITLE_FONT * 1.1), drv_svg_text_w(sub, FONT)) + 16);
	double H = fr.T + fr.PH + 60;

	char *buf;
	size_t len;
	FILE *f = drv_svg_open(W, H, FONT, &buf, &len);
	drv_svg_text(f, 16, 28, NULL, " font-size=\"16\" font-weight=\"bold\"", title);
	drv_svg_text(f, 16, 50, NULL, NULL, sub);
	axes(f, &fr, xs, ys, ytitle);
	step_line(f, &fr, s, false);
	if (meas)
		step_line(f, &fr, s, true);
	for (int i = 0; i < s->npoints; i++) {
		const revc_sweep_point *p = &s->points[i];
		fprintf(f, "<circle class=\"auto\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#1f77b4\"><title>%s</title></circle>\n",
			fx(&fr, p->total_bytes), fy(&fr, p->predicted_seconds), p->decisions);
		if (meas)
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"none\" stroke=\"#d62728\"/>\n",
				fx(&fr, p->total_bytes), fy(&fr, p->measured_seconds));
	}
	/* The fixed strategies: squares, labelled above and to the right,
	 * or to the left near the right edge. */
	for (int i = 0; i < 3; i++) {
		const revc_sweep_point *p = &s->fixed[i];
		double x = fx(&fr, p->total_bytes), y = fy(&fr, p->predicted_seconds);
		fprintf(f, "<rect class=\"fixed\" x=\"%.1f\" y=\"%.1f\" width=\"9\" height=\"9\" fill=\"#2ca02c\"/>\n",
			x - 4.5, y - 4.5);
		if (meas)
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"none\" stroke=\"#d62728\"/>\n",
				x - 5, fy(&fr, p->measured_seconds) - 5);
		const char *name = revc_strategy_name(p->strategy);
		bool left = x + 8 + drv_svg_text_w(name, FONT) > fr.L + fr.PW;
		drv_svg_text(f, left ? x - 8 : x + 8, y - 8, left ? "end" : NULL, " font-weight=\"bold\"", name);
	}
	/* The legend, beside the plot. */
	double lx = fr.L + fr.PW + 28, ly = fr.T + 6;
	for (int i = 0; i < 4; i++) {
		if (!meas && (i == 1 || i == 3))
			continue;
		double cy = ly + 4;
		if (i == 0)
			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f77b4\" stroke-width=\"2\"/>"
				"<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#1f77b4\"/>\n", lx, cy, lx + 22, cy, lx + 11, cy);
		else if (i == 1)
			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" "
				"stroke-dasharray=\"5,3\"/><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"none\" stroke=\"#d62728\"/>\n",
				lx, cy, lx + 22, cy, lx + 11, cy);
		else
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"9\" height=\"9\" %s/>\n", lx + 6.5, cy - 4.5,
				i == 2 ? "fill=\"#2ca02c\"" : "fill=\"none\" stroke=\"#d62728\"");
		drv_svg_text(f, lx + 30, ly + 8, NULL, NULL, legend[i]);
		ly += 20;
	}
	fputs("</svg>\n", f);
	if (fclose(f) != 0)
		IR_DIE("out of memory");
	return buf;
}
