/* test_driver.c: librevc through revc.h alone, against oracles that are not
 * the driver's own code:
 * - the fashion-b4 fixture (an independent PyTorch implementation): the
 *   loss and every parameter's gradient from revc_grad, in float64;
 * - `revc mem --json`: revc_memory_plan's figures equal the command's to
 *   the byte;
 * - a parameter's pointer from revc_param sees a training step's update in
 *   place (the Python module hands these out as NumPy views);
 * - errors carry the command's file:line:col text with the caret;
 * - the gradient check against finite differences, the benchmark's plan
 *   against revc_model_memory, .npy batches against the runtime's reader. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "revc.h"
#include "rt.h"

#define FIXTURE_DIR "tests/data/fashion-b4"
#include "fixture_b4.h"

static const char *fixture_sets[] = {"batch=4"};

static revc_model *fashion_b4(revc_dtype dt, revc_engine engine)
{
	revc_options o;
	revc_options_init(&o);
	o.dtype = dt;
	o.engine = engine;
	return test_model("models/fashion.rev", fixture_sets, 1, &o, FIXTURE_DIR "/params");
}

START_TEST(test_fixture_grad_f64)
{
	revc_model *m = fashion_b4(REVC_F64, REVC_INTERP);
	fixture f;
	revc_batch b = fixture_batch(&f, REVC_F64);
	revc_error *err = NULL;
	double loss;
	ck_assert_msg(revc_grad(m, &b, &loss, &err), "%s", revc_error_message(err));
	rt_npy want_loss = read_npy("grad_f64", "loss");
	double wl = *(double *)want_loss.data;
	ck_assert_msg(fabs(loss - wl) <= 1e-12 * fabs(wl), "loss %.17g vs %.17g", loss, wl);
	rt_npy_free(&want_loss);
	int checked = 0;
	for (int i = 0; i < revc_param_count(m); i++) {
		revc_tensor p, g;
		ck_assert(revc_param_at(m, i, &p));
		if (!p.trainable) {
			ck_assert(!revc_grad_at(m, i, &g));
			continue;
		}
		ck_assert_msg(revc_grad_at(m, i, &g), "no gradient for %s", p.name);
		ck_assert_str_eq(g.name, p.name);
		ck_assert_int_eq(g.dtype, REVC_F64);
		ck_assert_int_eq(g.rank, p.rank);
		rt_npy want = read_npy("grad_f64", p.name);
		int64_t n = 1;
		for (int k = 0; k < g.rank; k++)
			n *= g.dim[k];
		ck_assert_int_eq(n, want.count);
		double mx = 0, diff = 0;
		for (int64_t k = 0; k < n; k++) {
			double w = ((double *)want.data)[k], a = ((double *)g.data)[k];
			mx = fmax(mx, fabs(w));
			diff = fmax(diff, fabs(a - w));
		}
		ck_assert_msg(diff <= 1e-9 * mx, "%s: max|a-b| %g of max|b| %g", p.name, diff, mx);
		rt_npy_free(&want);
		checked++;
	}
	ck_assert_int_eq(checked, 77);
	revc_model_free(m);
}
END_TEST

/* A training step changes the parameters where revc_param points, and the
 * loss it reports is the one before the update (revc_grad's, an oracle
 * checked above against the fixture). */
START_TEST(test_param_pointer_sees_step)
{
	revc_model *m = fashion_b4(REVC_F32, REVC_JIT);
	fixture f;
	revc_batch b = fixture_batch(&f, REVC_F32);
	revc_tensor w, again;
	ck_assert(revc_param(m, "s0.u0.f.conv0.w", &w));
	ck_assert(w.trainable && w.dtype == REVC_F32 && w.rank == 4);
	ck_assert(!revc_param(m, "no.such.w", &again));
	float before[16];
	memcpy(before, w.data, sizeof before);
	revc_error *err = NULL;
	double gl, loss;
	ck_assert_msg(revc_grad(m, &b, &gl, &err), "%s", revc_error_message(err));
	ck_assert_msg(memcmp(before, w.data, sizeof before) == 0, "revc_grad changed a parameter");
	ck_assert_msg(revc_train_step(m, &b, 0.1, &loss, &err), "%s", revc_error_message(err));
	ck_assert_msg(fabs(loss - 2.389552251322171) <= 1e-4, "step loss %g", loss);
	ck_assert(revc_param(m, "s0.u0.f.conv0.w", &again));
	ck_assert_ptr_eq(again.data, w.data);
	int changed = 0;
	for (int k = 0; k < 16; k++)
		changed += ((float *)w.data)[k] != before[k];
	ck_assert_int_gt(changed, 8);
	revc_model_free(m);
}
END_TEST

/* Evaluation batches any number of examples: three alone give the first
 * three rows of four. */
START_TEST(test_eval_partial_batch)
{
	revc_model *m = fashion_b4(REVC_F64, REVC_INTERP);
	fixture f;
	revc_batch b = fixture_batch(&f, REVC_F64);
	double l4, a4, l3, a3, logits4[40], logits3[30];
	revc_error *err = NULL;
	ck_assert_msg(revc_eval(m, &b, &l4, &a4, logits4, &err), "%s", revc_error_message(err));
	b.n = 3;
	ck_assert_msg(revc_eval(m, &b, &l3, &a3, logits3, &err), "%s", revc_error_message(err));
	for (int k = 0; k < 30; k++)
		ck_assert(logits3[k] == logits4[k]);
	double sum = 0;
	for (int r = 0; r < 3; r++) {
		double mx = -INFINITY, z = 0;
		for (int j = 0; j < 10; j++)
			mx = fmax(mx, logits3[r * 10 + j]);
		for (int j = 0; j < 10; j++)
			z += exp(logits3[r * 10 + j] - mx);
		sum += mx + log(z) - logits3[r * 10 + f.y[r]];
	}
	ck_assert_msg(fabs(l3 - sum / 3) <= 1e-12, "loss %g vs %g", l3, sum / 3);
	ck_assert(isfinite(l4) && a4 >= 0 && a4 <= 1);
	revc_model_free(m);
}
END_TEST

/* The evaluation graph compiled after the step calls the step's code for
 * the kernels they share (codegen/kcache.c): its logits equal, bit for
 * bit, those of the evaluation graph compiled alone, and a training step
 * in between (the shared code stays the step's) changes nothing either. */
START_TEST(test_eval_reuses_step_kernels)
{
	revc_options o;
	revc_options_init(&o);
	o.engine = REVC_JIT;
	o.threads = 2;
	revc_model *both = test_model("models/fashion.rev", fixture_sets, 1, &o, FIXTURE_DIR "/params");
	o.graphs = REVC_GRAPH_EVAL;
	revc_model *alone = test_model("models/fashion.rev", fixture_sets, 1, &o, FIXTURE_DIR "/params");
	fixture f;
	revc_batch b = fixture_batch(&f, REVC_F32);
	float got[40], want[40];
	double lg, lw;
	revc_error *err = NULL;
	ck_assert_msg(revc_eval(both, &b, &lg, NULL, got, &err), "%s", revc_error_message(err));
	ck_assert_msg(revc_eval(alone, &b, &lw, NULL, want, &err), "%s", revc_error_message(err));
	for (int k = 0; k < 40; k++)
		ck_assert_msg(got[k] == want[k] && isfinite(got[k]), "logit %d: %.9g vs %.9g", k, (double)got[k], (double)want[k]);
	ck_assert(lg == lw);
	revc_model_free(alone);
	revc_model_free(both);
}
END_TEST

/* The JSON member "key":N after the text at from, or -1. */
static long long member(const char *json, const char *from, const char *key)
{
	const char *p = strstr(json, from);
	char k[64];
	snprintf(k, sizeof k, "\"%s\":", key);
	p = p ? strstr(p, k) : NULL;
	return p ? atoll(p + strlen(k)) : -1;
}

START_TEST(test_memory_equals_revc_mem)
{
	static const char *names[] = {"store", "revnet", "checkpoint"};
	const char *revc = getenv("REVC");
	ck_assert_msg(revc, "REVC names the revc binary");
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "%s mem %s/models/fashion.rev --set batch=4 --strategy all --json", revc, root());
	FILE *p = popen(cmd, "r");
	ck_assert(p);
	static char json[1 << 16];
	size_t n = fread(json, 1, sizeof json - 1, p);
	json[n] = 0;
	ck_assert_int_eq(pclose(p), 0);

	char path[1024];
	snprintf(path, sizeof path, "%s/models/fashion.rev", root());
	revc_error *err = NULL;
	revc_model *m = revc_model_from_file(path, fixture_sets, 1, &err);
	ck_assert_msg(m, "%s", revc_error_message(err));
	for (int s = 0; s < 3; s++) {
		revc_memory r;
		ck_assert_msg(revc_memory_plan(m, (revc_strategy)s, NULL, &r, &err), "%s", revc_error_message(err));
		char from[64];
		snprintf(from, sizeof from, "\"strategy\":\"%s\"", names[s]);
		ck_assert(!r.cut);
		ck_assert_int_eq(r.steps, member(json, from, "steps"));
		ck_assert_int_eq(r.peak_step, member(json, from, "peak_step"));
		ck_assert_int_eq(r.peak_bytes, member(json, from, "peak_bytes"));
		ck_assert_int_eq(r.arena_bytes, member(json, from, "arena_bytes"));
		ck_assert_int_eq(r.saved_transient_peak_bytes, member(json, from, "saved_transient_peak_bytes"));
		ck_assert_int_eq(r.total_bytes, member(json, from, "total_bytes"));
		ck_assert_int_eq(r.at_peak.parameters, member(json, from, "parameters"));
		ck_assert_int_eq(r.at_peak.gradients, member(json, from, "gradients"));
		ck_assert_int_eq(r.at_peak.optimizer_state, member(json, from, "optimizer_state"));
		ck_assert_int_eq(r.at_peak.saved, member(json, from, "saved"));
		ck_assert_int_eq(r.at_peak.transient, member(json, from, "transient"));
		ck_assert_int_eq(r.at_peak.workspace, member(json, from, "workspace"));
		ck_assert_int_gt(r.peak_bytes, 0);
	}
	revc_model_free(m);
}
END_TEST

START_TEST(test_errors_carry_positions)
{
	static const char text[] = "model bad\nbatch = -3\n";
	revc_error *err = NULL;
	ck_assert_ptr_null(revc_model_from_string("bad.rev", text, sizeof text - 1, NULL, 0, &err));
	ck_assert_ptr_nonnull(err);
	ck_assert_int_eq(revc_error_kind_of(err), REVC_ERR_USER);
	ck_assert_str_eq(revc_error_message(err),
		"bad.rev:2:9: error: 'batch' must be positive, found -3\n  batch = -3\n          ^\n");
	revc_error_free(err);

	/* An override is its own source, "--set", line by line. */
	static const char *sets[] = {"seed=1", "batch=zero"};
	char path[1024];
	snprintf(path, sizeof path, "%s/models/fashion.rev", root());
	err = NULL;
	ck_assert_ptr_null(revc_model_from_file(path, sets, 2, &err));
	ck_assert_msg(strncmp(revc_error_message(err), "--set:2:", 8) == 0, "%s", revc_error_message(err));
	ck_assert_msg(strstr(revc_error_message(err), "\n  batch=zero\n"), "%s", revc_error_message(err));
	revc_error_free(err);

	err = NULL;
	ck_assert_ptr_null(revc_model_from_file("/nonexistent/x.rev", NULL, 0, &err));
	ck_assert_msg(strstr(revc_error_message(err), "revc: error: cannot open '/nonexistent/x.rev'") ==
		revc_error_message(err), "%s", revc_error_message(err));
	revc_error_free(err);

	/* A limit below the plan, and running what was not compiled. */
	revc_model *m = revc_model_from_file(path, fixture_sets, 1, &err);
	ck_assert_ptr_nonnull(m);
	revc_options o;
	revc_options_init(&o);
	o.engine = REVC_INTERP;
	o.max_memory = 1000;
	err = NULL;
	ck_assert(!revc_model_compile(m, &o, &err));
	ck_assert_int_eq(revc_error_kind_of(err), REVC_ERR_USER); /* revc train exits 1 for it */
	ck_assert_msg(strstr(revc_error_message(err), "more than --max-memory 1000 B (1000 bytes)"), "%s",
		revc_error_message(err));
	revc_error_free(err);
	double loss;
	err = NULL;
	ck_assert(!revc_train_step(m, &(revc_batch){0}, 0.1, &loss, &err));
	ck_assert_int_eq(revc_error_kind_of(err), REVC_ERR_USAGE);
	revc_error_free(err);
	revc_model_free(m);
}
END_TEST

/* An IR model through one pass prints what the golden file of that pass
 * says (tests/ir/dce), and its errors point into the IR file. */
START_TEST(test_ir_model_golden)
{
	char path[1024], want[1024];
	snprintf(path, sizeof path, "%s/tests/ir/dce/basic.ir", root());
	snprintf(want, sizeof want, "%s/tests/ir/dce/basic.expected", root());
	revc_error *err = NULL;
	revc_model *m = revc_model_from_ir(path, &err);
	ck_assert_msg(m, "%s", revc_error_message(err));
	revc_options o;
	revc_options_init(&o);
	o.passes = "dce";
	o.engine = REVC_INTERP;
	o.no_run = true;
	ck_assert_msg(revc_model_compile(m, &o, &err), "%s", revc_error_message(err));
	ck_assert(revc_model_cut(m));
	char *text = revc_model_print(m, REVC_GRAPH_STEP, false, &err);
	ck_assert_msg(text, "%s", revc_error_message(err));
	char *expected;
	size_t len;
	rt_err e;
	ck_assert_msg(rt_file_read(want, 1 << 20, &expected, &len, &e), "%s", e.msg);
	ck_assert_str_eq(text, expected);
	free(text);
	free(expected);
	revc_model_free(m);

	static const char bad[] = "graph @g {\n  %0 = frobnicate() : f32[2]\n}\n";
	FILE *f = fopen("/tmp/revc-test-driver-bad.ir", "w");
	ck_assert(f && fwrite(bad, 1, sizeof bad - 1, f) == sizeof bad - 1 && fclose(f) == 0);
	err = NULL;
	ck_assert_ptr_null(revc_model_from_ir("/tmp/revc-test-driver-bad.ir", &err));
	ck_assert_str_eq(revc_error_message(err), "/tmp/revc-test-driver-bad.ir:2:8: error: unknown op 'frobnicate'\n"
		"    %0 = frobnicate() : f32[2]\n         ^\n");
	revc_error_free(err);
	remove("/tmp/revc-test-driver-bad.ir");
}
END_TEST

/* The drift report through revc.h: reconstruction in f64 is exact to
 * rounding, in f32 it is not exact but small (the oracle: arithmetic
 * precision, not revc's own figures); an IR model has no spec to build it
 * from. */
START_TEST(test_drift_json)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/models/fashion.rev", root());
	const char *sets[] = {"batch=2", "units=1,1,1"};
	revc_error *err = NULL;
	revc_model *m = revc_model_from_file(path, sets, 2, &err);
	ck_assert_msg(m, "%s", revc_error_message(err));
	revc_options o;
	revc_options_init(&o);
	o.cpu = getenv("REVC_CPU"); /* the JIT's code for it, as cli-drift's */
	char *json = revc_drift_json(m, &o, 1, &err);
	ck_assert_msg(json, "%s", revc_error_message(err));
	char engine[80];
	snprintf(engine, sizeof engine, "\"engine\":\"jit (%s)\"", o.cpu ? o.cpu : "");
	ck_assert_msg(!o.cpu || strstr(json, engine), "%.120s: not for REVC_CPU", json);
	double f32_rel = -1, f64_rel = -1;
	const char *p32 = strstr(json, "\"f32\":{\"x1_abs\":"), *p64 = strstr(json, "\"f64\":{\"x1_abs\":");
	ck_assert(p32 && p64);
	ck_assert(sscanf(strstr(p32, "x1_rel"), "x1_rel\":%lf", &f32_rel) == 1);
	ck_assert(sscanf(strstr(p64, "x1_rel"), "x1_rel\":%lf", &f64_rel) == 1);
	ck_assert_msg(f64_rel >= 0 && f64_rel < 1e-12, "f64 %g", f64_rel);
	ck_assert_msg(f32_rel > f64_rel && f32_rel < 1e-4, "f32 %g", f32_rel);
	free(json);
	revc_model_free(m);

	snprintf(path, sizeof path, "%s/tests/ir/dce/basic.ir", root());
	m = revc_model_from_ir(path, &err);
	ck_assert_msg(m, "%s", revc_error_message(err));
	ck_assert_ptr_null(revc_drift_json(m, NULL, 1, &err));
	ck_assert_int_eq(revc_error_kind_of(err), REVC_ERR_USAGE);
	revc_error_free(err);
	revc_model_free(m);
}
END_TEST

/* A small spec model: fashion with one unit per stage. */
static revc_model *tiny_model(void)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/models/fashion.rev", root());
	const char *sets[] = {"batch=4", "units=1,1,1"};
	revc_error *err = NULL;
	revc_model *m = revc_model_from_file(path, sets, 2, &err);
	ck_assert_msg(m, "%s", revc_error_message(err));
	return m;
}

/* The gradient check through revc.h, whose oracle is finite differences:
 * every trainable tensor agrees at the default tolerance; at one no
 * difference meets, tensors fail as a result, not an error; cut short by
 * the pass options it builds and dumps the graphs and checks nothing; an IR
 * model has no spec to check. */
START_TEST(test_check_gradients)
{
	revc_model *m = tiny_model();
	revc_options o;
	revc_options_init(&o);
	o.engine = REVC_INTERP;
	revc_check_options c;
	revc_check_options_init(&c);
	c.samples = 1;
	revc_check_report r;
	revc_error *err = NULL;
	ck_assert_msg(revc_check_gradients(m, &o, &c, &r, &err), "%s", revc_error_message(err));
	ck_assert(!r.cut && r.seed == 1);
	ck_assert_str_eq(r.engine, "interp");
	ck_assert_int_eq(r.n, 41);
	ck_assert_int_eq(r.failed, 0);
	ck_assert_str_eq(r.tensors[0].name, "init.conv.w");
	for (int i = 0; i < r.n; i++)
		ck_assert(r.tensors[i].ok && r.tensors[i].samples == 1 && r.tensors[i].scale > 0);
	ck_assert(r.worst_at >= 0 && r.worst == r.tensors[r.worst_at].error && r.worst <= 1e-6);
	revc_check_report_free(&r);

	c.tolerance = 1e-16;
	ck_assert_msg(revc_check_gradients(m, &o, &c, &r, &err), "%s", revc_error_message(err));
	ck_assert_int_gt(r.failed, 0);
	revc_check_report_free(&r);

	o.stop_after = "shape";
	o.dump_after = "shape";
	ck_assert_msg(revc_check_gradients(m, &o, &c, &r, &err), "%s", revc_error_message(err));
	ck_assert(r.cut && r.n == 0 && !r.engine[0]);
	const char *dumps = revc_model_dump(m, NULL);
	ck_assert(dumps && strstr(dumps, "# ---- after shape ----") && strstr(dumps, "# ---- eval: after shape ----"));
	revc_check_report_free(&r);
	revc_model_free(m);

	char path[1024];
	snprintf(path, sizeof path, "%s/tests/ir/dce/basic.ir", root());
	m = revc_model_from_ir(path, &err);
	ck_assert_msg(m, "%s", revc_error_message(err));
	ck_assert(!revc_check_gradients(m, NULL, NULL, &r, &err));
	ck_assert_int_eq(revc_error_kind_of(err), REVC_ERR_USAGE);
	revc_error_free(err);
	revc_check_report_free(&r);
	revc_model_free(m);
}
END_TEST

/* revc_bench compiles the step and runs it: its arena is the compiled
 * model's plan (revc_model_memory), its FLOPs those of the products; cut
 * short it runs nothing.  (No figure of time is asserted.) */
START_TEST(test_bench)
{
	revc_model *m = tiny_model();
	revc_options o;
	revc_options_init(&o);
	o.engine = REVC_INTERP;
	revc_bench_options b;
	revc_bench_options_init(&b);
	b.steps = 1;
	revc_bench_result r;
	revc_error *err = NULL;
	ck_assert_msg(revc_bench(m, &o, &b, &r, &err), "%s", revc_error_message(err));
	revc_memory mem;
	ck_assert_msg(revc_model_memory(m, &mem, &err), "%s", revc_error_message(err));
	ck_assert(!r.cut && r.arena_bytes == mem.arena_bytes && r.arena_bytes > 0);
	ck_assert(r.flops > 1e6 && r.median_seconds > 0 && r.min_seconds <= r.median_seconds);
	ck_assert(r.gemm_seconds == 0 && r.kernels == 0 && r.blas_core && !r.cpu_native);
	ck_assert_ptr_null(revc_model_cpu(m));
	/* the host probe: a round trip, or -1 when a partner thread never ran
	 * within its 50 ms (one CPU, or a machine that busy); a batch of 500
	 * trips that finished averages at most about 50 ms / 500 = 100 us */
	for (int i = 0; i < 2; i++)
		ck_assert_msg(r.round_trip_ns[i] == -1 || (r.round_trip_ns[i] > 1 && r.round_trip_ns[i] < 1e6),
			"round trip %g ns", r.round_trip_ns[i]);
	revc_model_free(m);

	m = tiny_model();
	o.stop_after = "dce";
	ck_assert_msg(revc_bench(m, &o, &b, &r, &err), "%s", revc_error_message(err));
	ck_assert(r.cut && r.median_seconds == 0);
	revc_model_free(m);
}
END_TEST

/* The threads this process has (Linux's /proc/self/status). */
static int live_threads(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	ck_assert(f);
	char line[256];
	int n = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	ck_assert_int_gt(n, 0);
	return n;
}

/* revc_bench_versus builds B with the setting in the environment and puts
 * back what was there (a value, or nothing); A is built without it.  With
 * REVC_EPILOGUE=0 B has no convolution epilogues, so more kernel calls.
 * B runs on A's thread pool: the two builds add one pool's workers to the
 * process, not two.  A bad setting is a usage error.  (No figure of time
 * is asserted.) */
START_TEST(test_bench_versus)
{
	revc_options o;
	revc_options_init(&o);
	revc_bench_options b;
	revc_bench_options_init(&b);
	b.steps = 2;
	revc_versus_result r;
	revc_error *err = NULL;
	/* A plain bench first, so that the threads the libraries start once
	 * (OpenBLAS's) are there before the count */
	revc_model *m0 = tiny_model();
	revc_bench_result r0;
	ck_assert_msg(revc_bench(m0, &o, &b, &r0, &err), "%s", revc_error_message(err));
	revc_model_free(m0);
	for (int was = 0; was < 2; was++) {
		if (was)
			setenv("REVC_EPILOGUE", "1", 1);
		else
			unsetenv("REVC_EPILOGUE");
		revc_model *m = tiny_model(), *m2 = tiny_model();
		int before = live_threads();
		ck_assert_msg(revc_bench_versus(m, m2, "REVC_EPILOGUE=0", &o, &b, &r, &err), "%s", revc_error_message(err));
		ck_assert_int_eq(live_threads() - before, o.threads - 1);
		const char *now = getenv("REVC_EPILOGUE");
		ck_assert(was ? now && strcmp(now, "1") == 0 : !now);
		ck_assert_int_eq(r.pairs, 2);
		ck_assert_msg(r.calls[1] > r.calls[0] && r.calls[0] > 0, "calls %d, %d", r.calls[0], r.calls[1]);
		ck_assert(r.min_seconds[0] > 0 && r.min_seconds[0] <= r.median_seconds[0]);
		ck_assert(r.min_seconds[1] > 0 && r.min_seconds[1] <= r.median_seconds[1]);
		ck_assert(r.ratio_low > 0 && r.ratio_low <= r.ratio_median && r.ratio_median <= r.ratio_high);
		revc_model_free(m);
		revc_model_free(m2);
	}
	unsetenv("REVC_EPILOGUE");
	revc_model *m = tiny_model(), *m2 = tiny_model();
	ck_assert(!revc_bench_versus(m, m2, "REVC EPILOGUE=0", &o, &b, &r, &err));
	ck_assert_int_eq(revc_error_kind_of(err), REVC_ERR_USAGE);
	revc_error_free(err);
	revc_model_free(m);
	revc_model_free(m2);
}
END_TEST

/* Counts the .npy files in dir, and those whose name ends in suffix. */
static int npy_files(const char *dir, const char *suffix, int *with)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "ls '%s'", dir);
	FILE *p = popen(cmd, "r");
	ck_assert(p);
	char line[512];
	int n = 0;
	*with = 0;
	while (fgets(line, sizeof line, p)) {
		line[strcspn(line, "\n")] = 0;
		size_t len = strlen(line), sl = strlen(suffix);
		if (len > 4 && strcmp(line + len - 4, ".npy") == 0) {
			n++;
			*with += len >= sl + 4 && strncmp(line + len - 4 - sl, suffix, sl) == 0;
		}
	}
	pclose(p);
	return n;
}

/* A batch from .npy files is the fixture's as the test reads it; a label
 * file that is not integers is refused; after a training step the state
 * directory holds the running statistics (one per batch-norm mean and
 * variance) and no momentum buffer, and the gradient directory the loss
 * and a file per parameter. */
START_TEST(test_npy_batch_and_dirs)
{
	revc_model *m = fashion_b4(REVC_F64, REVC_INTERP);
	char x[1024], y[1024];
	snprintf(x, sizeof x, "%s/tests/data/fashion-b4/x.npy", root());
	snprintf(y, sizeof y, "%s/tests/data/fashion-b4/y.npy", root());
	revc_batch b;
	revc_error *err = NULL;
	ck_assert_msg(revc_batch_load(m, x, y, REVC_F64, &b, &err), "%s", revc_error_message(err));
	fixture f;
	revc_batch want = fixture_batch(&f, REVC_F64);
	ck_assert_int_eq(b.n, 4);
	ck_assert(memcmp(b.x, want.x, sizeof f.xd) == 0 && memcmp(b.labels, want.labels, sizeof f.y) == 0);
	revc_batch bad;
	ck_assert(!revc_batch_load(m, x, x, REVC_F64, &bad, &err));
	ck_assert_ptr_nonnull(strstr(revc_error_message(err), "need integer labels [4]"));
	revc_error_free(err);

	char dir[] = "/tmp/revc-test-driver-XXXXXX", state[1100], grads[1100];
	ck_assert(mkdtemp(dir));
	snprintf(state, sizeof state, "%s/state", dir);
	snprintf(grads, sizeof grads, "%s/grads", dir);
	double loss;
	ck_assert_msg(revc_train_step(m, &b, 0.1, &loss, &err), "%s", revc_error_message(err));
	ck_assert_msg(revc_save_gradients(m, grads, loss, &err) == false, "gradients before revc_grad");
	revc_error_free(err);
	ck_assert_msg(revc_dir_check(state, REVC_DIR_STATE, NULL, &err), "%s", revc_error_message(err));
	ck_assert_msg(revc_save_state(m, state, &err), "%s", revc_error_message(err));
	int means, mom, params = 0, stats = 0;
	for (int i = 0; i < revc_param_count(m); i++) {
		revc_tensor t;
		ck_assert(revc_param_at(m, i, &t));
		params += t.trainable;
		size_t len = strlen(t.name);
		stats += len > 5 && (strcmp(t.name + len - 5, ".mean") == 0 || strcmp(t.name + len - 4, ".var") == 0);
	}
	ck_assert_int_eq(npy_files(state, ".mom", &mom), stats);
	ck_assert_int_eq(mom, 0);
	ck_assert_int_eq(npy_files(state, ".mean", &means) - means, stats / 2);
	ck_assert_msg(revc_grad(m, &b, &loss, &err), "%s", revc_error_message(err));
	ck_assert_msg(revc_save_gradients(m, grads, loss, &err), "%s", revc_error_message(err));
	ck_assert_int_eq(npy_files(grads, "loss", &means), params + 1);
	ck_assert_int_eq(means, 1);
	ck_assert(!revc_dir_check(grads, REVC_DIR_STATE, NULL, &err)); /* a gradient directory is not state */
	revc_error_free(err);
	ck_assert(revc_dir_same(state, "/tmp/../tmp/x/..") == false && revc_dir_same(grads, grads));
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	revc_batch_free(&b);
	revc_model_free(m);
}
END_TEST

/* The arena a header emitted for dir/tiny.o declares. */
static long long header_arena(const char *path)
{
	FILE *f = fopen(path, "r");
	ck_assert_msg(f, "%s", path);
	char line[256];
	long long arena = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "#define TINY_ARENA_BYTES %lldLL", &arena) == 1)
			break;
	fclose(f);
	return arena;
}

/* revc_emit of a model not compiled emits for the default strategy
 * (revnet), as revc compile does: its header's arena is revc_emit_with's
 * under REVC_REVNET, not under REVC_STORE. */
START_TEST(test_emit_defaults)
{
	revc_model *m = tiny_model();
	char dir[] = "/tmp/revc-test-emit-XXXXXX", obj[100], hdr[100];
	ck_assert(mkdtemp(dir));
	snprintf(obj, sizeof obj, "%s/tiny.o", dir);
	snprintf(hdr, sizeof hdr, "%s/tiny.h", dir);
	revc_error *err = NULL;
	ck_assert_msg(revc_emit(m, obj, hdr, NULL, &err), "%s", revc_error_message(err));
	long long arena = header_arena(hdr);
	revc_emit_options e;
	revc_emit_options_init(&e);
	ck_assert(e.strategy == REVC_REVNET);
	ck_assert_msg(revc_emit_with(m, obj, &e, &err), "%s", revc_error_message(err));
	ck_assert_int_eq(e.arena_bytes, arena);
	e.strategy = REVC_STORE;
	ck_assert_msg(revc_emit_with(m, obj, &e, &err), "%s", revc_error_message(err));
	ck_assert_int_gt(e.arena_bytes, arena);
	char name[64];
	ck_assert(revc_emit_default_prefix("d/libfoo.so", name, sizeof name) && strcmp(name, "foo") == 0);
	ck_assert(!revc_emit_default_prefix("foo.a", name, sizeof name));
	ck_assert(revc_emit_prefix_ok("_x2") && !revc_emit_prefix_ok("2x"));
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	revc_model_free(m);
}
END_TEST

START_TEST(test_version)
{
	char want[32];
	snprintf(want, sizeof want, "%d.%d.%d", REVC_VERSION_MAJOR, REVC_VERSION_MINOR, REVC_VERSION_PATCH);
	ck_assert_str_eq(revc_version(), want);
	revc_strategy s;
	ck_assert(revc_strategy_parse("checkpoint", &s) && s == REVC_CHECKPOINT);
	ck_assert(!revc_strategy_parse("nope", &s));
	ck_assert_str_eq(revc_strategy_name(REVC_REVNET), "revnet");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("driver");
	TCase *tc = tcase_create("driver");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_version);
	tcase_add_test(tc, test_drift_json);
	tcase_add_test(tc, test_errors_carry_positions);
	tcase_add_test(tc, test_ir_model_golden);
	tcase_add_test(tc, test_memory_equals_revc_mem);
	tcase_add_test(tc, test_fixture_grad_f64);
	tcase_add_test(tc, test_eval_partial_batch);
	tcase_add_test(tc, test_eval_reuses_step_kernels);
	tcase_add_test(tc, test_param_pointer_sees_step);
	tcase_add_test(tc, test_check_gradients);
	tcase_add_test(tc, test_bench);
	tcase_add_test(tc, test_bench_versus);
	tcase_add_test(tc, test_npy_batch_and_dirs);
	tcase_add_test(tc, test_emit_defaults);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
