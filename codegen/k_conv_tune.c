/* k_conv_tune.c: the measured choice between a convolution's lowerings,
 * and its cache on disk (on unless REVC_CONV_TUNE=0; docs/codegen.md).
 *
 * cg_jit_compile calls cg_conv_tune_begin before emitting the step: for
 * every f32 convolution Winograd fits (k_conv_choice.c's unfit) and no
 * REVC_CONV forces, the candidates (direct, winograd2, winograd4) are looked up
 * in the cache, keyed by the CPU the code is made for, this host's CPU and
 * features, the thread count, the op and the geometry; the shapes not in
 * it get one kernel per candidate (no epilogue) in one module, compiled
 * together, each run on zeroed scratch buffers with the step's thread
 * count (chunks split as runtime/pool.c splits them), the candidates
 * alternated, once to warm up and REPS times, each call's time its
 * slowest chunk's processor time, the minimum kept.  The cost model's
 * choice wins unless another candidate is MARGIN faster, and then only if
 * it is again in a second round of timing (the minimum of both); where
 * the cost model's choice is not a candidate, the fastest wins (direct on
 * a tie).  The new lines are merged into the cache file.
 * Until cg_conv_tune_end, the calling thread's cg_conv_lowering_of
 * answers with the tuned choice of every shape whose line is in the file
 * (read from it, or written to it); the others get the cost model's.
 *
 * That last rule is what keeps `train --resume` bit for bit: a choice is
 * used only once a later process would read the same one, so a run
 * without a writable cache is the cost model's where it measured, as its
 * resumption will be.  Hence also: with no cache directory nothing is
 * timed; when the file cannot be written nothing is timed either (the
 * lock file beside it cannot be made).  A candidate that does not compile
 * leaves that shape to the cost model; nothing is printed.
 *
 * The workspace planned for such a convolution is the largest of its
 * candidates' and the cost model's choice's, tune on or off
 * (cg_conv_tune_largest), so that the plan and `revc mem` depend on
 * neither the host, nor what the tune measured, nor REVC_CONV_TUNE.
 *
 * The cache file, $XDG_CACHE_HOME/revc/conv-tune (else
 * $HOME/.cache/revc/conv-tune), is text: the line "revc conv-tune 4",
 * then one line per shape, tab-separated: the key, the lowering chosen
 * ("direct", "winograd2" or "winograd4"), and the candidates' minimum
 * times in ms in that order.  A file with another first line is ignored,
 * a malformed line skipped.  A write holds an flock on conv-tune.lock
 * beside it,
 * reads the file again (a line another process wrote wins over this
 * one's unwritten measure of the same shape, which then takes it), writes
 * the union whole to a temporary name and renames it over the file, so
 * concurrent processes lose no line. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define HEADER "revc conv-tune 4" /* 4: F(4x4) faster with AVX2 (by_quads); 3: winograd4 a candidate; 2: the MARGIN rule (older files are ignored, timed again) */
#define REPS 3

/* How much faster than the cost model's choice a candidate must be.  On
 * a loaded host the candidates' minimum times drift apart by a few per
 * cent: a cache timed at a load average of 4.5 put fashion's 7x7
 * conv2d_dw on the direct kernel, 4-9% slower than F(2x2) on the idle
 * machine. */
#define MARGIN 0.05

/* F(4x4)'s rounding error is about ten times F(2x2)'s (docs/codegen.md,
 * Numerics: 3-7e-6 of the largest output, against 2-4e-7), yet its times
 * are weighed like the others': fashion's epoch with F(4x4) forced on
 * every convolution ends at the same test accuracy as with F(2x2) (89.08%
 * against 88.96%, AVX2 code on a Zen 4).  The tests that compare a step
 * with the interpreter's to 1e-5 name their lowerings (test_codegen.c). */
static const cg_conv_lowering candidates[] = {CG_CONV_DIRECT, CG_CONV_WINOGRAD2, CG_CONV_WINOGRAD4};
#define NCAND ((int)(sizeof candidates / sizeof candidates[0]))

typedef struct {
	char key[224];
	cg_conv_lowering l;
	double ms[NCAND];
	char why[128];
	bool kept; /* the cache file has this line (read, or written): only then is it used */
} entry;

/* Every choice this process knows, under mu.  Entries are allocated one
 * by one and never freed; a kept entry never changes, so the `why` of one
 * stays valid (an entry not kept may still take the file's line). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry **table;
static int nentries, capacity;

/* The calling thread's tune: the key prefix ("" when none is in force),
 * and the candidate being timed (CG_CONV_AUTO when none). */
static _Thread_local char scope[160];
static _Thread_local cg_conv_lowering trying = CG_CONV_AUTO;

bool cg_conv_tune_on(void)
{
	const char *e = getenv("REVC_CONV_TUNE");
	return !(e && !strcmp(e, "0")) && cg_conv_forced() == CG_CONV_AUTO;
}

cg_conv_lowering cg_conv_tune_trying(void)
{
	return trying;
}

int64_t cg_conv_tune_largest(const ir_conv_geom *g, const ir_node *n,
	int64_t (*elems)(const ir_conv_geom *, const ir_node *))
{
	if (cg_conv_forced() != CG_CONV_AUTO || !cg_conv_winograd_fits(g, n->type.dtype))
		return elems(g, n);
	cg_conv_lowering was = trying, each[NCAND + 1];
	memcpy(each, candidates, sizeof candidates);
	each[NCAND] = cg_conv_modelled(g, NULL); /* what a shape not kept gets */
	int64_t most = 0;
	for (int c = 0; c <= NCAND; c++) {
		trying = each[c];
		int64_t e = elems(g, n);
		most = e > most ? e : most;
	}
	trying = was;
	return most;
}

/* ---- keys ------------------------------------------------------------------ */

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* "TARGET/HOST/FEATURES-HASH t=THREADS": what the times depend on but the
 * shape. */
static void scope_of(const cg_options *o, char *buf, size_t len)
{
	char *name, *features, host[64];
	cg_cpu_target(o->cpu, &name, &features);
	cg_host_cpu(host, sizeof host);
	char *hn, *hf;
	cg_cpu_target(NULL, &hn, &hf);
	snprintf(buf, len, "%s/%s/%016llx t=%d", name, host, (unsigned long long)fnv1a(hf),
		o->threads > 0 ? o->threads : 1);
	LLVMDisposeMessage(name);
	LLVMDisposeMessage(features);
	LLVMDisposeMessage(hn);
	LLVMDisposeMessage(hf);
}

static void key_of(const char *sc, const ir_conv_geom *g, char *buf, size_t len)
{
	snprintf(buf, len, "%s %s n=%lld c=%lld h=%lld w=%lld o=%lld k=%lldx%lld s=%lld pad=%lld,%lld,%lld,%lld", sc,
		ir_op_name(g->op), (long long)g->n, (long long)g->c, (long long)g->h, (long long)g->w, (long long)g->o,
		(long long)g->kh, (long long)g->kw, (long long)g->s, (long long)g->pt, (long long)g->pb,
		(long long)g->pl, (long long)g->pr);
}

/* The entry of key, or NULL (mu held). */
static entry *find(const char *key)
{
	for (int i = 0; i < nentries; i++)
		if (!strcmp(table[i]->key, key))
			return table[i];
	return NULL;
}

static void describe(entry *e, const char *how)
{
	int at = snprintf(e->why, sizeof e->why, "%s:", how);
	for (int c = 0; c < NCAND && at > 0 && at < (int)sizeof e->why; c++)
		at += snprintf(e->why + at, sizeof e->why - at, "%s %s %.3f ms", c ? "," : "",
			cg_conv_lowering_name(candidates[c]), e->ms[c]);
}

/* Adds an entry (mu held). */
static void add(const char *key, cg_conv_lowering l, const double *ms, const char *how, bool kept)
{
	if (nentries == capacity) {
		capacity = capacity ? 2 * capacity : 64;
		table = realloc(table, (size_t)capacity * sizeof *table);
		if (!table)
			IR_DIE("out of memory");
	}
	entry *e = calloc(1, sizeof *e);
	if (!e)
		IR_DIE("out of memory");
	snprintf(e->key, sizeof e->key, "%s", key);
	e->l = l;
	memcpy(e->ms, ms, sizeof e->ms);
	describe(e, how);
	e->kept = kept;
	table[nentries++] = e;
}

bool cg_conv_tuned(const ir_conv_geom *g, cg_conv_lowering *l, const char **why)
{
	if (!scope[0])
		return false;
	char key[sizeof table[0]->key];
	key_of(scope, g, key, sizeof key);
	pthread_mutex_lock(&mu);
	entry *e = find(key);
	bool kept = e && e->kept;
	if (kept) {
		*l = e->l;
		if (why)
			*why = e->why;
	}
	pthread_mutex_unlock(&mu);
	return kept;
}

/* ---- the file ------------------------------------------------------------ */

bool cg_cache_dir(char *buf, size_t len)
{
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	int n;
	if (x && x[0] == '/')
		n = snprintf(buf, len, "%s/revc", x);
	else if (h && h[0] == '/')
		n = snprintf(buf, len, "%s/.cache/revc", h);
	else
		return false;
	return n > 0 && (size_t)n < len;
}

bool cg_make_dirs(const char *dir)
{
	char path[4096];
	int n = snprintf(path, sizeof path, "%s", dir);
	if (n <= 0 || (size_t)n >= sizeof path)
		return false;
	for (char *p = path + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(path, 0755) && errno != EEXIST)
				return false;
			*p = '/';
		}
	return !mkdir(path, 0755) || errno == EEXIST;
}

static cg_conv_lowering lowering_named(const char *s)
{
	for (int c = 0; c < NCAND; c++)
		if (!strcmp(s, cg_conv_lowering_name(candidates[c])))
			return candidates[c];
	return CG_CONV_AUTO;
}

/* One line "KEY\tLOWERING\tMS\tMS" of the file into the table: a new
 * entry, or the line of an entry not kept (another process wrote it
 * first, and what it chose is what later runs will read); false when it
 * is malformed (mu held). */
static bool parse_line(char *line)
{
	char *f[NCAND + 2];
	int nf = 0;
	for (char *p = line, *t; nf < NCAND + 2; p = t + 1) {
		f[nf++] = p;
		if (!(t = strchr(p, '\t')))
			break;
		*t = 0;
	}
	if (nf != NCAND + 2 || strchr(f[nf - 1], '\t') || !f[0][0] || strlen(f[0]) >= sizeof table[0]->key)
		return false;
	cg_conv_lowering l = lowering_named(f[1]);
	double ms[NCAND];
	for (int c = 0; c < NCAND; c++) {
		char *end;
		ms[c] = strtod(f[2 + c], &end);
		if (end == f[2 + c] || *end || !isfinite(ms[c]) || ms[c] < 0)
			return false;
	}
	if (l == CG_CONV_AUTO)
		return false;
	entry *e = find(f[0]);
	if (!e)
		add(f[0], l, ms, "cached", true);
	else if (!e->kept) {
		e->l = l;
		memcpy(e->ms, ms, sizeof e->ms);
		describe(e, "cached");
		e->kept = true;
	}
	return true;
}

static void file_path(const char *dir, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* Reads the cache file into the table (mu held). */
static void load(const char *dir)
{
	char path[4200];
	file_path(dir, "conv-tune", path, sizeof path);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[512];
	bool ok = fgets(line, sizeof line, f) && !strcmp(line, HEADER "\n");
	while (ok && fgets(line, sizeof line, f)) {
		size_t n = strlen(line);
		if (n == 0 || line[n - 1] != '\n') { /* too long, or cut short */
			while (n == sizeof line - 1 && line[n - 1] != '\n' && fgets(line, sizeof line, f))
				n = strlen(line);
			continue;
		}
		line[n - 1] = 0;
		parse_line(line);
	}
	fclose(f);
}

/* The lock file beside the cache, opened (not locked), or -1 when it
 * cannot be: then neither can the cache be written. */
static int open_lock(const char *dir)
{
	if (!cg_make_dirs(dir))
		return -1;
	char path[4200];
	file_path(dir, "conv-tune.lock", path, sizeof path);
	return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
}

/* Writes the table to the cache file: a temporary file, then renamed over
 * it; true when it was, and then every entry is kept (mu held, and the
 * lock).  Failures leave the file as it was. */
static bool store(const char *dir)
{
	char path[4200], tmp[4300];
	file_path(dir, "conv-tune", path, sizeof path);
	snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		return false;
	fprintf(f, HEADER "\n");
	for (int i = 0; i < nentries; i++) {
		fprintf(f, "%s\t%s", table[i]->key, cg_conv_lowering_name(table[i]->l));
		for (int c = 0; c < NCAND; c++)
			fprintf(f, "\t%.4f", table[i]->ms[c]);
		fprintf(f, "\n");
	}
	bool ok = !ferror(f);
	ok = !fclose(f) && ok;
	if (!ok || rename(tmp, path)) {
		unlink(tmp);
		return false;
	}
	for (int i = 0; i < nentries; i++)
		table[i]->kept = true;
	return true;
}

/* Merges the table into the cache file under the lock (fd, open_lock's):
 * the file read again, then written whole. */
static void merge(const char *dir, int fd)
{
	if (flock(fd, LOCK_EX))
		return;
	pthread_mutex_lock(&mu);
	load(dir);
	store(dir);
	pthread_mutex_unlock(&mu);
	flock(fd, LOCK_UN);
}

/* ---- timing ---------------------------------------------------------------- */

/* The calling thread's processor time: what the host's other processes
 * do not add to (wall time does, on a shared machine). */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
	revc_abi_kernel *fn;
	void **args;
	int64_t extent;
	int t, nt;
	double seconds; /* the chunk's processor time */
} chunk;

static void *run_chunk(void *p)
{
	chunk *c = p;
	double t0 = cpu_now();
	c->fn(c->args, c->extent * c->t / c->nt, c->extent * (c->t + 1) / c->nt, c->t);
	c->seconds = cpu_now() - t0;
	return NULL;
}

/* One call of fn over [0, extent) on nt threads: its slowest chunk's
 * processor time, in seconds. */
static double run_once(revc_abi_kernel *fn, void **args, int64_t extent, int nt)
{
	chunk c[CG_MAX_PARTS];
	pthread_t tid[CG_MAX_PARTS];
	bool started[CG_MAX_PARTS] = {false};
	for (int t = 0; t < nt; t++)
		c[t] = (chunk){fn, args, extent, t, nt, 0};
	for (int t = 1; t < nt; t++)
		started[t] = !pthread_create(&tid[t], NULL, run_chunk, &c[t]);
	run_chunk(&c[0]);
	double most = c[0].seconds;
	for (int t = 1; t < nt; t++) {
		if (started[t])
			pthread_join(tid[t], NULL);
		else
			run_chunk(&c[t]);
		most = c[t].seconds > most ? c[t].seconds : most;
	}
	return most;
}

static void *scratch(int64_t bytes)
{
	size_t n = (size_t)((bytes + 63) / 64 * 64);
	void *p = aligned_alloc(64, n ? n : 64);
	if (!p)
		IR_DIE("out of memory");
	memset(p, 0, n ? n : 64);
	return p;
}

/* The minimum times in ms of REPS calls of each candidate's kernel fn[c]
 * on n's shapes, the candidates alternated (so that the host's drift
 * falls on both), after a call of each to warm up. */
static void time_kernels(revc_abi_kernel *const fn[NCAND], const int64_t extent[NCAND], const ir_node *n,
	const cg_options *o, double ms[NCAND])
{
	void *args[8] = {0};
	IR_ASSERT(n->nin + 2 <= 8);
	args[0] = scratch(ir_type_bytes(&n->type));
	for (int k = 0; k < n->nin; k++)
		args[k + 1] = scratch(ir_type_bytes(&n->in[k]->type));
	args[n->nin + 1] = scratch(cg_workspace(n, (void *)o));
	int threads = cg_module_parts_for(o->threads);
	for (int c = 0; c < NCAND; c++)
		ms[c] = INFINITY;
	for (int r = 0; r <= REPS; r++)
		for (int c = 0; c < NCAND; c++) {
			double s = 1e3 * run_once(fn[c], args, extent[c], extent[c] > 1 ? threads : 1);
			ms[c] = r > 0 && s < ms[c] ? s : ms[c]; /* the first warms up */
		}
	for (int k = 0; k <= n->nin + 1; k++)
		free(args[k]);
}

int cg_conv_tune_pick(const double *ms, const cg_conv_lowering *cand, int n, cg_conv_lowering model)
{
	int best = 0;
	for (int c = 1; c < n; c++)
		best = ms[c] < ms[best] ? c : best;
	for (int c = 0; c < n; c++)
		if (cand[c] == model)
			return ms[best] < (1 - MARGIN) * ms[c] ? best : c;
	return best;
}

/* The candidate kept for n from its kernels fn: cg_conv_tune_pick on one
 * round of timing, and when that overrules the cost model, on the minimum
 * of a second round and the first.  ms: the times kept. */
static int choose(revc_abi_kernel *const fn[NCAND], const int64_t extent[NCAND], const ir_node *n,
	const cg_options *o, double ms[NCAND])
{
	ir_conv_geom g = ir_conv_geom_of(n);
	cg_conv_lowering model = cg_conv_modelled(&g, NULL);
	time_kernels(fn, extent, n, o, ms);
	int best = cg_conv_tune_pick(ms, candidates, NCAND, model);
	bool overrules = false;
	for (int c = 0; c < NCAND; c++)
		overrules = overrules || (candidates[c] == model && c != best);
	if (!overrules)
		return best;
	double again[NCAND];
	time_kernels(fn, extent, n, o, again);
	for (int c = 0; c < NCAND; c++)
		ms[c] = again[c] < ms[c] ? again[c] : ms[c];
	return cg_conv_tune_pick(ms, candidates, NCAND, model);
}

/* A shape to time: its node, key and each candidate's kernel and extent. */
typedef struct {
	const ir_node *n;
	char key[sizeof table[0]->key];
	LLVMValueRef fn[NCAND];
	int64_t extent[NCAND];
} shape;

/* Emits, compiles and times the candidates of each of ns shapes, adding
 * the choices to the table (mu not held). */
static void measure(shape *s, int ns, const cg_options *o)
{
	cg_module m;
	cg_module_init(&m, "revc_tune", o->cpu, o->threads, NULL);
	m.libm_math = o->libm_math;
	int parts = cg_module_parts_for(o->threads);
	cg_module_add_parts(&m, parts);
	for (int i = 0; i < ns; i++) {
		const cg_op_impl *impl = cg_op_impl_get(s[i].n);
		char sig[1024], key[1100];
		cg_node_signature(s[i].n, sig, sizeof sig);
		for (int c = 0; c < NCAND; c++) {
			trying = candidates[c];
			snprintf(key, sizeof key, "tune %s %s", cg_conv_lowering_name(trying), sig);
			bool fresh;
			cg_home home;
			s[i].fn[c] = cg_kernel(&m, key, &fresh, &home);
			if (fresh) {
				cg_kb k;
				cg_kb_begin(&k, home.m, home.fn, s[i].n->type.dtype);
				impl->emit(&k, s[i].n);
				cg_kb_end(&k);
			}
			s[i].extent[c] = impl->extent(s[i].n);
		}
		trying = CG_CONV_AUTO;
	}
	ir_diags d;
	ir_diags_init(&d);
	cg_jit *j = cg_jit_kernels(&m, o, &d);
	for (int i = 0; j && i < ns; i++) {
		revc_abi_kernel *fn[NCAND];
		bool ok = true;
		for (int c = 0; c < NCAND; c++)
			ok = (fn[c] = cg_jit_kernel(j, s[i].fn[c], &d)) != NULL && ok;
		double ms[NCAND];
		int best = ok ? choose(fn, s[i].extent, s[i].n, o, ms) : 0;
		pthread_mutex_lock(&mu);
		if (ok && !find(s[i].key))
			add(s[i].key, candidates[best], ms, "measured", false);
		pthread_mutex_unlock(&mu);
	}
	cg_jit_free(j);
	cg_module_free(&m);
	ir_diags_free(&d);
}

/* ---- the tune -------------------------------------------------------------- */

void cg_conv_tune_begin(const ir_graph *g, const cg_options *o)
{
	scope[0] = 0;
	char sc[sizeof scope], dir[4096];
	if (!cg_conv_tune_on() || !cg_cache_dir(dir, sizeof dir))
		return; /* nowhere to keep a choice: the cost model, nothing timed */
	scope_of(o, sc, sizeof sc);
	pthread_mutex_lock(&mu);
	load(dir);
	shape *s = calloc((size_t)g->n + 1, sizeof *s);
	if (!s)
		IR_DIE("out of memory");
	int ns = 0;
	bool unkept = false; /* a shape measured earlier whose line could not be written */
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op != IR_OP_CONV2D && n->op != IR_OP_CONV2D_DX && n->op != IR_OP_CONV2D_DW)
			continue;
		ir_conv_geom geom = ir_conv_geom_of(n);
		if (!cg_conv_winograd_fits(&geom, n->type.dtype))
			continue;
		key_of(sc, &geom, s[ns].key, sizeof s[ns].key);
		entry *e = find(s[ns].key);
		unkept = unkept || (e && !e->kept);
		bool dup = e != NULL;
		for (int k = 0; k < ns && !dup; k++)
			dup = !strcmp(s[k].key, s[ns].key);
		if (!dup)
			s[ns++].n = n;
	}
	pthread_mutex_unlock(&mu);
	int fd = ns > 0 || unkept ? open_lock(dir) : -1;
	if (fd >= 0) { /* the file can be written: what is measured can be kept */
		if (ns > 0)
			measure(s, ns, o);
		merge(dir, fd);
		close(fd);
	}
	free(s);
	snprintf(scope, sizeof scope, "%s", sc);
}

void cg_conv_tune_end(void)
{
	scope[0] = 0;
}

void cg_conv_tune_enter(const cg_options *o, char *saved, size_t len)
{
	snprintf(saved, len, "%s", scope);
	if (o && cg_conv_tune_on())
		scope_of(o, scope, sizeof scope);
}

void cg_conv_tune_leave(const char *saved)
{
	snprintf(scope, sizeof scope, "%s", saved);
}
