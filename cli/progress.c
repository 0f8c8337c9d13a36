/* progress.c: how long work shows progress.  On a terminal, one line
 * redrawn in place (a bar, step/total, loss, images/s, ETA); when stderr is
 * not a terminal, plain lines at each report point; with --json, one JSON
 * object per event on stdout instead. */
#include <math.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

double cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_progress_init(cli_progress *p, bool json, int64_t batch)
{
	memset(p, 0, sizeof *p);
	p->json = json;
	p->tty = !json && isatty(STDERR_FILENO);
	p->batch = batch;
}

static void format_time(char *buf, size_t n, double s)
{
	if (!isfinite(s) || s < 0)
		snprintf(buf, n, "--:--");
	else if (s >= 3600)
		snprintf(buf, n, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
	else
		snprintf(buf, n, "%d:%02d", (int)s / 60, (int)s % 60);
}

/* Clears the redrawn line before other output. */
static void clear_line(cli_progress *p)
{
	if (p->tty && p->drawn) {
		fputs("\r\033[K", stderr);
		p->drawn = false;
	}
}

void cli_progress_break(cli_progress *p)
{
	clear_line(p);
}

void cli_progress_step(void *user, const revc_progress *s)
{
	cli_progress *p = user;
	double rate = s->elapsed > 0 ? (double)s->images / s->elapsed : 0;
	double eta = rate > 0 ? (double)(s->total - s->step) * (double)p->batch / rate : (double)NAN;
	bool window = s->window_loss != 0 || s->window_accuracy != 0;
	if (p->json) {
		if (window)
			printf("{\"event\":\"step\",\"step\":%lld,\"total\":%lld,\"epoch\":%lld,\"loss\":%.9g,"
			       "\"window_loss\":%.9g,\"window_accuracy\":%.6g,\"lr\":%.6g,"
			       "\"images_per_sec\":%.1f,\"elapsed\":%.3f,\"eta\":%.1f}\n",
				(long long)s->step, (long long)s->total, (long long)s->epoch, s->loss,
				s->window_loss, s->window_accuracy, s->lr, rate, s->elapsed, isfinite(eta) ? eta : -1.0);
		fflush(stdout);
		return;
	}
	char t1[32], t2[32];
	format_time(t1, sizeof t1, s->elapsed);
	format_time(t2, sizeof t2, eta);
	if (p->tty) {
		double t = cli_now();
		if (t - p->last_draw < 0.1 && s->step != s->total)
			return;
		p->last_draw = t;
		int width = 24, fill = (int)((double)width * (double)s->step / (double)s->total);
		char bar[32];
		for (int i = 0; i < width; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[width] = 0;
		fprintf(stderr, "\r\033[K[%s] %lld/%lld  loss %.4f  %.0f img/s  %s  ETA %s", bar,
			(long long)s->step, (long long)s->total, s->loss, rate, t1, t2);
		p->drawn = true;
		if (s->step == s->total) {
			fputc('\n', stderr);
			p->drawn = false;
		}
	} else if (window) {
		fprintf(stderr, "step %lld/%lld  epoch %lld  loss %.4f  acc %.1f%%  lr %g  %.0f img/s  elapsed %s  ETA %s\n",
			(long long)s->step, (long long)s->total, (long long)s->epoch + 1, s->window_loss,
			100 * s->window_accuracy, s->lr, rate, t1, t2);
	}
	fflush(stderr);
}

void cli_progress_eval(void *user, int64_t step, double loss, double accuracy)
{
	cli_progress *p = user;
	if (p->json) {
		printf("{\"event\":\"eval\",\"step\":%lld,\"test_loss\":%.6g,\"test_accuracy\":%.6g}\n",
			(long long)step, loss, accuracy);
		fflush(stdout);
		return;
	}
	clear_line(p);
	fprintf(stderr, "eval at step %lld: test loss %.4f, accuracy %.2f%%\n", (long long)step, loss,
		100 * accuracy);
}

void cli_progress_save(void *user, int64_t step, const char *dir)
{
	cli_progress *p = user;
	if (p->json) {
		printf("{\"event\":\"checkpoint\",\"step\":%lld,\"dir\":\"", (long long)step);
		cli_json_string(stdout, dir);
		printf("\"}\n");
		fflush(stdout);
		return;
	}
	clear_line(p);
	fprintf(stderr, "checkpoint at step %lld: %s\n", (long long)step, dir);
}

void cli_json_string(FILE *out, const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20)
			fprintf(out, "\\u%04x", *c);
		else
			fputc(*c, out);
	}
}

double cli_rss_mib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_maxrss / 1024.0;
}
