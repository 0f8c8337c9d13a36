/* test_frontend.c: unit tests of frontend/, the model-spec language: the
 * preset files, --set overrides, print/parse round trips, the lr schedule,
 * derived stage sizes, the malformed-spec corpus (tests/spec/bad/cases.txt)
 * and untrusted input (truncations, mutations, junk).  Files are read from
 * $REVC_SOURCE_ROOT, which meson sets. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe.h"

/* ---- helpers ---------------------------------------------------------- */

/* $REVC_SOURCE_ROOT/rel, malloc'd.  No ck_assert here or in try_read: the
 * suite builder uses them outside any test. */
static char *source_path(const char *rel)
{
	const char *root = getenv("REVC_SOURCE_ROOT");
	size_t n = strlen(root) + strlen(rel) + 2;
	char *p = malloc(n);
	snprintf(p, n, "%s/%s", root, rel);
	return p;
}

/* The whole file, malloc'd and NUL-terminated (the parser does not need the
 * NUL; string searches in the tests do), or NULL when it cannot be read. */
static char *try_read(const char *rel, size_t *len)
{
	if (!getenv("REVC_SOURCE_ROOT"))
		return NULL;
	char *path = source_path(rel);
	FILE *f = fopen(path, "rb");
	free(path);
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	for (size_t got; (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
		n += got;
		if (cap - n - 1 == 0)
			buf = realloc(buf, cap *= 2);
	}
	fclose(f);
	buf[n] = 0;
	*len = n;
	return buf;
}

static char *read_source(const char *rel, size_t *len)
{
	char *text = try_read(rel, len);
	ck_assert_msg(text != NULL, "cannot read %s under $REVC_SOURCE_ROOT", rel);
	return text;
}

static void print_diag(const ir_diags *d)
{
	for (int i = 0; i < d->n; i++)
		ir_diag_print(stderr, &d->items[i], NULL, 0);
}

/* Parses text (and applies sets, NULL-terminated) and checks; all must
 * succeed.  file must outlive s (positions point to it). */
static void spec_ok(fe_spec *s, const char *file, const char *text, size_t len, const char *const *sets)
{
	ir_diags d;
	ir_diags_init(&d);
	bool ok = fe_spec_parse(s, file, text, len, &d);
	for (int i = 0; ok && sets && sets[i]; i++)
		ok = fe_spec_set(s, sets[i], i + 1, &d);
	if (ok)
		ok = fe_spec_check(s, &d);
	if (!ok)
		print_diag(&d);
	ck_assert_msg(ok, "%s does not parse and check", file);
	ck_assert_int_eq(d.n, 0);
	ir_diags_free(&d);
}

static void load(fe_spec *s, const char *file, const char *const *sets)
{
	size_t len;
	char *text = read_source(file, &len);
	spec_ok(s, file, text, len, sets);
	free(text);
}

/* fe_spec_print into a malloc'd string. */
static char *print_str(const fe_spec *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	fe_spec_print(f, s);
	fclose(f);
	return buf;
}

static bool pos_is(ir_pos p, const char *file, int line, int col)
{
	return p.file && strcmp(p.file, file) == 0 && p.line == line && p.col == col;
}

/* ---- presets ---------------------------------------------------------- */

typedef struct {
	const char *file, *name;
	int64_t input[3], classes, init_filters;
	int64_t units[3], filters[3], strides[3];
	fe_block block;
	int64_t batch;
	int nlr;
	double lr_list[7];
	int64_t lr_steps[6];
	int64_t steps, epochs;
	const char *dataset;
	fe_dataset kind;
	int64_t size[4]; /* H = W entering stages 0..2 and the final block */
	int64_t half[4];
} preset_case;

static const preset_case presets[] = {
	{"models/revnet-38.rev", "revnet-38", {3, 32, 32}, 10, 32, {3, 3, 3}, {32, 64, 112}, {1, 2, 2},
		FE_BLOCK_BASIC, 100, 3, {0.1, 0.01, 0.001}, {40000, 60000}, 80000, 1,
		"cifar10:data/cifar-10-batches-bin", FE_DATA_CIFAR10, {32, 32, 16, 8}, {16, 16, 32, 56}},
	{"models/revnet-110.rev", "revnet-110", {3, 32, 32}, 10, 32, {9, 9, 9}, {32, 64, 128}, {1, 2, 2},
		FE_BLOCK_BASIC, 100, 3, {0.1, 0.01, 0.001}, {40000, 60000}, 80000, 1,
		"cifar10:data/cifar-10-batches-bin", FE_DATA_CIFAR10, {32, 32, 16, 8}, {16, 16, 32, 64}},
	{"models/revnet-164.rev", "revnet-164", {3, 32, 32}, 10, 32, {9, 9, 9}, {128, 256, 512}, {1, 2, 2},
		FE_BLOCK_BOTTLENECK, 100, 3, {0.1, 0.01, 0.001}, {40000, 60000}, 80000, 1,
		"cifar10:data/cifar-10-batches-bin", FE_DATA_CIFAR10, {32, 32, 16, 8}, {16, 64, 128, 256}},
	{"models/fashion.rev", "fashion", {1, 28, 28}, 10, 16, {2, 2, 2}, {16, 32, 64}, {1, 2, 2},
		FE_BLOCK_BASIC, 50, 7, {0.02, 0.05, 0.1, 0.05, 0.02, 0.008, 0.003}, {100, 200, 400, 700, 900, 1050},
		0, 1, "fashion-mnist", FE_DATA_FASHION_MNIST,
		{28, 28, 14, 7}, {8, 8, 16, 32}},
};

START_TEST(test_preset)
{
	const preset_case *c = &presets[_i];
	fe_spec s;
	load(&s, c->file, NULL);
	ck_assert_str_eq(s.name, c->name);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(s.input[i], c->input[i]);
	ck_assert_int_eq(s.classes, c->classes);
	ck_assert_int_eq(s.init_filters, c->init_filters);
	ck_assert_int_eq(s.init_kernel, 3);
	ck_assert_int_eq(s.init_stride, 1);
	ck_assert(!s.init_max_pool);
	ck_assert_int_eq(s.nstages, 3);
	ck_assert_int_eq(s.nfilters, 3);
	ck_assert_int_eq(s.nstrides, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(s.units[i], c->units[i]);
		ck_assert_int_eq(s.filters[i], c->filters[i]);
		ck_assert_int_eq(s.strides[i], c->strides[i]);
	}
	ck_assert_int_eq(s.block, c->block);
	ck_assert_int_eq(s.batch, c->batch);
	ck_assert_int_eq(s.nlr, c->nlr);
	ck_assert_int_eq(s.nlr_steps, c->nlr - 1);
	for (int i = 0; i < c->nlr; i++)
		ck_assert(s.lr_list[i] == c->lr_list[i]);
	for (int i = 0; i < c->nlr - 1; i++)
		ck_assert_int_eq(s.lr_steps[i], c->lr_steps[i]);
	ck_assert(s.momentum == 0.9);
	ck_assert(s.weight_decay == 2e-4);
	ck_assert_int_eq(s.steps, c->steps);
	ck_assert_int_eq(s.epochs, c->epochs);
	/* fashion ships seed 1: see models/fashion.rev. */
	ck_assert_int_eq(s.seed, strcmp(c->name, "fashion") == 0 ? 1 : 0);
	ck_assert_str_eq(s.dataset, c->dataset);
	ck_assert_int_eq(s.dataset_kind, c->kind);
	for (int i = 0; i <= 3; i++) {
		int64_t h, w, half;
		fe_spec_stage_input(&s, i, &h, &w, &half);
		ck_assert_int_eq(h, c->size[i]);
		ck_assert_int_eq(w, c->size[i]);
		ck_assert_int_eq(half, c->half[i]);
	}
	/* Positions point into the file. */
	ck_assert_str_eq(s.pos[FE_KEY_UNITS].file, c->file);
	ck_assert_int_gt(s.pos[FE_KEY_UNITS].line, 1);
	ck_assert_int_eq(s.pos[FE_KEY_UNITS].col, 1);
	ck_assert_int_eq(s.vpos[FE_KEY_UNITS].col, 9);
	ck_assert_int_eq(s.units_pos[1].col, 11);
	if (strcmp(c->name, "fashion") == 0)
		ck_assert_str_eq(s.pos[FE_KEY_SEED].file, c->file);
	else
		ck_assert_ptr_null(s.pos[FE_KEY_SEED].file); /* a default */
}
END_TEST

START_TEST(test_defaults)
{
	fe_spec s;
	fe_spec_init(&s);
	ck_assert_str_eq(s.name, "model");
	ck_assert_int_eq(s.init_kernel, 3);
	ck_assert_int_eq(s.init_stride, 1);
	ck_assert(!s.init_max_pool);
	ck_assert_int_eq(s.nlr, 1);
	ck_assert(s.lr_list[0] == 0.1);
	ck_assert_int_eq(s.nlr_steps, 0);
	ck_assert(s.momentum == 0.9);
	ck_assert(s.weight_decay == 2e-4);
	ck_assert_int_eq(s.steps, 0);
	ck_assert_int_eq(s.epochs, 1);
	ck_assert_int_eq(s.seed, 0);
	ck_assert_str_eq(s.dataset, "synthetic");
	ck_assert_int_eq(s.dataset_kind, FE_DATA_SYNTHETIC);
	ck_assert_ptr_null(fe_spec_dataset_dir(&s));
	for (int k = 0; k < FE_KEY_COUNT; k++) {
		ck_assert_int_eq(s.seq[k], 0);
		ck_assert_ptr_null(s.pos[k].file);
	}
	/* Required keys are unset, and fe_spec_check says so. */
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(!fe_spec_check(&s, &d));
	ck_assert_int_eq(d.n, 1);
	ck_assert_str_eq(d.items[0].msg, "missing required key 'input'");
	ir_diags_free(&d);
	ck_assert_str_eq(fe_key_name(FE_KEY_WEIGHT_DECAY), "weight_decay");
	ck_assert_str_eq(fe_key_default(FE_KEY_WEIGHT_DECAY), "2e-4");
	ck_assert(fe_key_required(FE_KEY_UNITS));
	ck_assert(!fe_key_required(FE_KEY_LR));
	ck_assert_ptr_nonnull(fe_key_help(FE_KEY_LR));
	/* The key table says which networks need a key: the RevNet keys only
	 * revnet, the others every network or none. */
	for (int k = 0; k < FE_KEY_COUNT; k++) {
		bool revnet_only = k == FE_KEY_INIT_FILTERS || k == FE_KEY_FILTERS || k == FE_KEY_STRIDES ||
				   k == FE_KEY_BLOCK;
		s.network = FE_NET_REVNET;
		ck_assert_msg(fe_spec_needs_key(&s, (fe_key)k) == fe_key_required((fe_key)k), "%s", fe_key_name((fe_key)k));
		s.network = FE_NET_REVVIT;
		ck_assert_msg(fe_spec_needs_key(&s, (fe_key)k) == (fe_key_required((fe_key)k) && !revnet_only), "%s",
			fe_key_name((fe_key)k));
	}
}
END_TEST

static const char minimal[] = "input = 1,8,8\nclasses = 2\ninit_filters = 4\nunits = 1\n"
                              "filters = 4\nstrides = 1\nblock = basic\nbatch = 1\n";

/* Without a `model` line the name is the file's base name. */
START_TEST(test_model_name)
{
	static const struct {
		const char *file, *name;
	} cases[] = {
		{"dir/sub/my-net.v2.rev", "my-net.v2"},
		{"weird name!.rev", "weird_name_"},
		{"noext", "noext"},
		{".hidden", ".hidden"},
		{"dir/", "model"},
		{NULL, "_input_"},
	};
	fe_spec s;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		spec_ok(&s, cases[i].file, minimal, strlen(minimal), NULL);
		ck_assert_str_eq(s.name, cases[i].name);
	}
	/* A long file name is cut to fit. */
	char file[200], want[FE_MAX_NAME];
	memset(file, 'b', sizeof file);
	memcpy(file + sizeof file - 5, ".rev", 5);
	memset(want, 'b', FE_MAX_NAME - 1);
	want[FE_MAX_NAME - 1] = 0;
	spec_ok(&s, file, minimal, strlen(minimal), NULL);
	ck_assert_str_eq(s.name, want);
	static const char named[] = "# comment first\n\nmodel tiny_1.0-x  # the name\ninput = 1,8,8\n"
	                            "classes = 2\ninit_filters = 4\nunits = 1\nfilters = 4\nstrides = 1\n"
	                            "block = basic\nbatch = 1\n";
	spec_ok(&s, "x.rev", named, strlen(named), NULL);
	ck_assert_str_eq(s.name, "tiny_1.0-x");
}
END_TEST

/* Blank lines, comments, tabs, CRLF line ends and no final newline. */
START_TEST(test_layout)
{
	static const char text[] = "\r\n# c\r\n\t input\t=\t1 , 8,8   # C,H,W\r\nclasses=2\r\n"
	                           "init_filters =4\nunits= 1\n\n\nfilters = 4\nstrides = 1\nblock = basic\n"
	                           "batch = 1\r\ninit_max_pool = true\nlr = 5e-2\nmomentum = 0\n"
	                           "weight_decay = 0.0\nseed = 2147483647\nsteps = 10";
	fe_spec s;
	spec_ok(&s, "layout.rev", text, strlen(text), NULL);
	ck_assert_int_eq(s.input[0], 1);
	ck_assert_int_eq(s.input[2], 8);
	ck_assert(s.init_max_pool);
	ck_assert(s.lr_list[0] == 0.05);
	ck_assert(s.momentum == 0);
	ck_assert_int_eq(s.seed, 2147483647);
	ck_assert_int_eq(s.steps, 10);
	ck_assert(pos_is(s.pos[FE_KEY_INPUT], "layout.rev", 3, 3));
	ck_assert(pos_is(s.input_pos[1], "layout.rev", 3, 15));
	ck_assert(pos_is(s.vpos[FE_KEY_BATCH], "layout.rev", 12, 9));
	int64_t h, w, half;
	fe_spec_stage_input(&s, 1, &h, &w, &half);
	ck_assert_int_eq(h, 4); /* the max pool halves 8 */
	ck_assert_int_eq(w, 4);
	ck_assert_int_eq(half, 2);
	/* The same text with "\0" inside is rejected; text need not end in NUL. */
	char buf[sizeof text];
	memcpy(buf, text, sizeof text);
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(fe_spec_parse(&s, "layout.rev", buf, sizeof text - 1, &d));
	ck_assert(!fe_spec_parse(&s, "layout.rev", buf, sizeof text, &d));
	ck_assert_int_eq(d.n, 1);
	ck_assert_str_eq(d.items[0].msg, "unexpected byte 0x00");
	ck_assert_int_eq(d.items[0].pos.line, 18);
	ck_assert_int_eq(d.items[0].pos.col, 11);
	ir_diags_free(&d);
}
END_TEST

/* ---- overrides -------------------------------------------------------- */

START_TEST(test_set_units_batch)
{
	static const char *const sets[] = {"units=81,81,81", "batch=32", NULL};
	fe_spec s;
	load(&s, "models/revnet-110.rev", sets);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(s.units[i], 81);
	ck_assert_int_eq(s.batch, 32);
	ck_assert(pos_is(s.pos[FE_KEY_UNITS], "--set", 1, 1));
	ck_assert(pos_is(s.vpos[FE_KEY_UNITS], "--set", 1, 7));
	ck_assert(pos_is(s.units_pos[2], "--set", 1, 13));
	ck_assert(pos_is(s.vpos[FE_KEY_BATCH], "--set", 2, 7));
	ck_assert_int_gt(s.seq[FE_KEY_BATCH], s.seq[FE_KEY_UNITS]);
	ck_assert_int_gt(s.seq[FE_KEY_UNITS], s.seq[FE_KEY_FILTERS]);
	ck_assert_int_eq(s.filters[2], 128); /* untouched */
}
END_TEST

/* Tensor sizes: every preset fits in both dtypes; too large a tensor is one
 * diagnostic at the value of the key written last among those to blame. */
START_TEST(test_sizes)
{
	static const char *const big_batch[] = {"batch=100000000", NULL};
	static const char *const big_input[] = {"input=3,100000,100000", NULL};
	static const char *const wide[] = {"filters=32,64,2000000000", NULL};
	static const char *const logits[] = {"classes=2147483647", "batch=100000", NULL};
	static const struct {
		const char *const *sets;
		ir_dtype dt;
		int line, col;
		const char *msg;
	} cases[] = {
		{big_batch, IR_F32, 1, 7, "batch 100000000 makes the input tensor f32[100000000,3,32,32] larger than 2^40 bytes"},
		{big_input, IR_F32, 1, 7, "input 3,100000,100000 makes the input tensor f32[100,3,100000,100000] larger than 2^40 bytes"},
		{wide, IR_F64, 1, 15, "filters 2000000000 makes the weight s2.u0.f.conv0.w f64[1000000000,32,3,3] larger than 2^40 bytes"},
		{logits, IR_F32, 2, 7, "batch 100000 makes the logits f32[100000,2147483647] larger than 2^40 bytes"},
	};
	static const char *const files[] = {"models/revnet-38.rev", "models/revnet-110.rev", "models/revnet-164.rev",
		"models/fashion.rev"};
	fe_spec s;
	ir_diags d;
	ir_diags_init(&d);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		load(&s, files[i], NULL);
		ck_assert(fe_spec_check_sizes(&s, IR_F32, &d) && fe_spec_check_sizes(&s, IR_F64, &d));
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		load(&s, "models/revnet-38.rev", cases[i].sets);
		ck_assert(!fe_spec_check_sizes(&s, cases[i].dt, &d));
		ck_assert_int_eq(d.n, 1);
		ck_assert_str_eq(d.items[0].msg, cases[i].msg);
		ck_assert(pos_is(d.items[0].pos, "--set", cases[i].line, cases[i].col));
		ir_diags_clear(&d);
	}
	ir_diags_free(&d);
}
END_TEST

/* lr=X replaces a whole schedule; the last assignment of lr, lr_list or
 * lr_steps wins. */
START_TEST(test_set_lr)
{
	static const char *const lr[] = {"lr=0.05", NULL};
	fe_spec s;
	load(&s, "models/revnet-38.rev", lr);
	ck_assert_int_eq(s.nlr, 1);
	ck_assert_int_eq(s.nlr_steps, 0);
	ck_assert(s.lr_list[0] == 0.05);
	ck_assert(fe_spec_lr_at(&s, 0) == 0.05);
	ck_assert(fe_spec_lr_at(&s, 70000) == 0.05);
	ck_assert(pos_is(s.vpos[FE_KEY_LR_STEPS], "--set", 1, 4));

	static const char *const sched[] = {"lr_list=1,0.5", "lr_steps=500", "steps=1000", NULL};
	load(&s, "models/fashion.rev", sched);
	ck_assert_int_eq(s.nlr, 2);
	ck_assert(fe_spec_lr_at(&s, 499) == 1);
	ck_assert(fe_spec_lr_at(&s, 500) == 0.5);
	ck_assert_int_eq(s.steps, 1000);

	static const char *const back[] = {"lr_list=1,0.5", "lr_steps=500", "lr=0.2", NULL};
	load(&s, "models/fashion.rev", back);
	ck_assert_int_eq(s.nlr, 1);
	ck_assert_int_eq(s.nlr_steps, 0);
	ck_assert(s.lr_list[0] == 0.2);
}
END_TEST

START_TEST(test_set_other)
{
	static const char *const sets[] = {" dataset = cifar10:/data/c10 ", "block=bottleneck", "init_max_pool=true",
		"seed=7", "momentum=0", "weight_decay=0", "input=3,64,64", "init_stride=2", "epochs=3", NULL};
	fe_spec s;
	load(&s, "models/revnet-164.rev", sets);
	ck_assert_str_eq(s.dataset, "cifar10:/data/c10");
	ck_assert_str_eq(fe_spec_dataset_dir(&s), "/data/c10");
	ck_assert_int_eq(s.dataset_kind, FE_DATA_CIFAR10);
	ck_assert(pos_is(s.vpos[FE_KEY_DATASET], "--set", 1, 12));
	ck_assert(s.init_max_pool);
	ck_assert_int_eq(s.seed, 7);
	int64_t h, w, half;
	fe_spec_stage_input(&s, 0, &h, &w, &half); /* 64 /2 (conv) /2 (pool) */
	ck_assert_int_eq(h, 16);
	fe_spec_stage_input(&s, 3, &h, &w, &half);
	ck_assert_int_eq(w, 4);
	ck_assert_int_eq(half, 256);
	ck_assert_str_eq(fe_block_name(s.block), "bottleneck");
	ck_assert_str_eq(fe_dataset_name(s.dataset_kind), "cifar10");
}
END_TEST

/* A failed --set leaves the spec as it was; empty, NULL and overlong
 * overrides are errors too. */
START_TEST(test_set_errors)
{
	fe_spec s, before;
	load(&s, "models/fashion.rev", NULL);
	before = s;
	static const struct {
		const char *set;
		int col;
		const char *msg;
	} cases[] = {
		{"", 1, "expected KEY=VALUE, found end of line"},
		{"   ", 4, "expected KEY=VALUE, found end of line"},
		{"=3", 1, "expected KEY=VALUE, found '='"},
		{"batch=8\n", 8, "unexpected byte 0x0a"},
		{"units=2,2,x", 11, "expected an integer for 'units', found 'x'"},
		{"filters=16,32,64,", 18, "missing value after ','"},
		{"dataset=fashion-mnist:", 23, "missing directory after 'fashion-mnist:'"},
		{"Batch=8", 1, "unknown key 'Batch'; did you mean 'batch'?"},
		{"weight-decay=0", 1, "unknown key 'weight-decay'; did you mean 'weight_decay'?"},
		{"x=1", 1, "unknown key 'x'"},
	};
	ir_diags d;
	ir_diags_init(&d);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert(!fe_spec_set(&s, cases[i].set, 4, &d));
		ck_assert_int_eq(d.n, 1);
		ck_assert_str_eq(d.items[0].msg, cases[i].msg);
		ck_assert(pos_is(d.items[0].pos, "--set", 4, cases[i].col));
		ck_assert(memcmp(&s, &before, sizeof s) == 0);
		ir_diags_clear(&d);
	}
	ck_assert(!fe_spec_set(&s, NULL, 1, &d));
	ck_assert_str_eq(d.items[0].msg, "expected KEY=VALUE, found end of line");
	ir_diags_clear(&d);
	char *big = malloc(FE_MAX_LINE + 10);
	memset(big, '1', FE_MAX_LINE + 9);
	memcpy(big, "seed=", 5);
	big[FE_MAX_LINE + 9] = 0;
	ck_assert(!fe_spec_set(&s, big, 2, &d));
	ck_assert_str_eq(d.items[0].msg, "a --set is at most 4096 bytes");
	ck_assert_int_eq(d.items[0].pos.col, FE_MAX_LINE + 1);
	ir_diags_clear(&d);
	big[FE_MAX_LINE] = 0; /* 4096 bytes: long but allowed, the number too big */
	ck_assert(!fe_spec_set(&s, big, 2, &d));
	char want[128];
	snprintf(want, sizeof want, "'seed' is too large: %.40s... (at most 2147483647)", big + 5);
	ck_assert_str_eq(d.items[0].msg, want);
	free(big);
	ir_diags_free(&d);
	ck_assert(memcmp(&s, &before, sizeof s) == 0);
}
END_TEST

/* ---- printing ---------------------------------------------------------- */

static void check_roundtrip(const fe_spec *s)
{
	char *text = print_str(s);
	fe_spec back;
	spec_ok(&back, "printed.rev", text, strlen(text), NULL);
	if (!fe_spec_equal(s, &back))
		fprintf(stderr, "printed:\n%s", text);
	ck_assert(fe_spec_equal(s, &back));
	char *again = print_str(&back);
	ck_assert_str_eq(text, again);
	free(text);
	free(again);
}

START_TEST(test_print_roundtrip)
{
	fe_spec s;
	for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
		load(&s, presets[i].file, NULL);
		check_roundtrip(&s);
	}
	static const char *const odd[] = {"lr_list=0.1,0.123456789012345678,3e-300,1e300", "lr_steps=1,2,2147483647",
		"momentum=0.333333333333333333", "weight_decay=1.5e-7", "seed=2147483647", "init_max_pool=true",
		"dataset=fashion-mnist:/usr/share/datasets/fashion-mnist", "units=1,2,3,4,5,6,7,8",
		"filters=16,16,16,32,32,32,64,64", "strides=1,1,1,1,1,1,2,1", "input=1,56,56", NULL};
	load(&s, "models/fashion.rev", odd);
	check_roundtrip(&s);
	char *text = print_str(&s);
	ck_assert_ptr_nonnull(strstr(text, "\nlr_list = 0.1,0.12345678901234568,3e-300,1e+300\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nweight_decay = 1.5e-07\n"));
	free(text);
	/* AdamW's keys print and read back; the defaults are PyTorch's. */
	load(&s, "models/fashion.rev", NULL);
	ck_assert(s.optimizer == FE_OPT_MOMENTUM && s.beta1 == 0.9 && s.beta2 == 0.999 && s.eps == 1e-8);
	static const char *const adamw[] = {"optimizer=adamw", "beta1=0", "beta2=0.99999999999", "eps=3e-300", NULL};
	load(&s, "models/fashion.rev", adamw);
	ck_assert(s.optimizer == FE_OPT_ADAMW && s.beta1 == 0 && s.beta2 == 0.99999999999 && s.eps == 3e-300);
	check_roundtrip(&s);
	text = print_str(&s);
	ck_assert_ptr_nonnull(strstr(text, "\noptimizer = adamw\nbeta1 = 0\nbeta2 = 0.99999999999\neps = 3e-300\n"));
	free(text);
	/* A constant rate prints as lr. */
	static const char *const constant[] = {"lr=0.1", NULL};
	load(&s, "models/fashion.rev", constant);
	text = print_str(&s);
	ck_assert_ptr_nonnull(strstr(text, "\nlr = 0.1\n"));
	ck_assert_ptr_null(strstr(text, "lr_steps"));
	ck_assert(strncmp(text, "model fashion\n", 14) == 0);
	free(text);
}
END_TEST

/* ---- RevViT ------------------------------------------------------------ */

/* The RevViT presets (docs/model.md's table) read, print back without the
 * RevNet keys they leave out, and lower to the 55 parameters named and
 * shaped as docs/model.md says; a RevNet spec's print has no RevViT keys. */
START_TEST(test_revvit_presets)
{
	static const struct {
		const char *file;
		int64_t c, hw, patch, width, heads, units, ratio, batch;
	} want[] = {{"models/revvit-fashion.rev", 1, 28, 4, 64, 4, 4, 2, 100},
		{"models/revvit-cifar.rev", 3, 32, 4, 192, 3, 12, 4, 64}};
	for (int i = 0; i < 2; i++) {
		fe_spec s;
		load(&s, want[i].file, NULL);
		ck_assert(s.network == FE_NET_REVVIT);
		ck_assert(s.input[0] == want[i].c && s.input[1] == want[i].hw && s.input[2] == want[i].hw);
		ck_assert(s.patch == want[i].patch && s.width == want[i].width && s.heads == want[i].heads);
		ck_assert(s.nstages == 1 && s.units[0] == want[i].units && s.mlp_ratio == want[i].ratio);
		ck_assert(s.batch == want[i].batch && s.optimizer == FE_OPT_ADAMW && s.nlr == 1 && s.lr_list[0] == 1e-3);
		ck_assert(s.weight_decay == 0.05 && s.classes == 10);
		check_roundtrip(&s);
		char *text = print_str(&s);
		ck_assert_ptr_nonnull(strstr(text, "\nnetwork = revvit\n"));
		ck_assert_ptr_null(strstr(text, "filters"));
		ck_assert_ptr_null(strstr(text, "block"));
		free(text);
		ir_graph *g = fe_lower(&s, IR_F32, FE_LOWER_TRAIN);
		int64_t d = want[i].width, t = (want[i].hw / want[i].patch) * (want[i].hw / want[i].patch);
		int64_t m = want[i].ratio * d, p = want[i].patch, last = want[i].units - 1;
		char last_qkv[64], last_fc1[64];
		snprintf(last_qkv, sizeof last_qkv, "s0.u%lld.f.qkv.w", (long long)last);
		snprintf(last_fc1, sizeof last_fc1, "s0.u%lld.g.fc1.b", (long long)last);
		const struct {
			const char *name;
			int rank;
			int64_t dim[4];
		} shapes[] = {{"embed.conv.w", 4, {d, want[i].c, p, p}}, {"embed.conv.b", 1, {d}}, {"embed.pos", 2, {t, d}},
			{"s0.u0.f.ln.gamma", 1, {d}}, {last_qkv, 2, {3 * d, d}}, {"s0.u0.f.proj.w", 2, {d, d}},
			{"s0.u0.g.fc2.w", 2, {d, m}}, {last_fc1, 1, {m}}, {"final.ln.beta", 1, {d}},
			{"final.dense.w", 2, {10, d}}};
		int params = 0, found = 0;
		for (int k = 0; k < g->n; k++) {
			const ir_node *n = g->nodes[k];
			if (n->op != IR_OP_PARAM)
				continue;
			params++;
			for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
				if (strcmp(n->name, shapes[j].name) != 0)
					continue;
				found++;
				ck_assert_int_eq(n->type.rank, shapes[j].rank);
				for (int r = 0; r < shapes[j].rank; r++)
					ck_assert_int_eq(n->type.dim[r], shapes[j].dim[r]);
			}
		}
		ck_assert_int_eq(params, 7 + 12 * (int)want[i].units);
		ck_assert_int_eq(found, (int)(sizeof shapes / sizeof shapes[0]));
		ir_graph_free(g);
	}
	fe_spec s;
	load(&s, "models/fashion.rev", NULL);
	char *text = print_str(&s);
	ck_assert_ptr_null(strstr(text, "network"));
	ck_assert_ptr_null(strstr(text, "patch"));
	free(text);
}
END_TEST

/* ---- schedule ---------------------------------------------------------- */

START_TEST(test_lr_schedule)
{
	static const struct {
		int64_t step;
		double lr;
	} cases[] = {
		{0, 0.1}, {1, 0.1}, {39999, 0.1}, {40000, 0.01}, {59999, 0.01}, {60000, 0.001},
		{79999, 0.001}, {INT64_MAX, 0.001}, {-1, 0.1},
	};
	fe_spec s;
	load(&s, "models/revnet-110.rev", NULL);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		ck_assert(fe_spec_lr_at(&s, cases[i].step) == cases[i].lr);
	/* fashion's warm-up and decay, at and around its boundaries. */
	load(&s, "models/fashion.rev", NULL);
	ck_assert(fe_spec_lr_at(&s, 0) == 0.02);
	ck_assert(fe_spec_lr_at(&s, 199) == 0.05);
	ck_assert(fe_spec_lr_at(&s, 200) == 0.1);
	ck_assert(fe_spec_lr_at(&s, 1049) == 0.008);
	ck_assert(fe_spec_lr_at(&s, 1199) == 0.003);
	static const char *const constant[] = {"lr=0.1", NULL};
	load(&s, "models/fashion.rev", constant);
	ck_assert(fe_spec_lr_at(&s, 0) == 0.1);
	ck_assert(fe_spec_lr_at(&s, 1000000) == 0.1);
}
END_TEST

/* ---- the malformed-spec corpus ------------------------------------------ */

typedef struct {
	char file[256], sets[1024], want[1024];
} bad_case;

/* Reads tests/spec/bad/cases.txt: FILE|SETS|EXPECTED, '#' comments. */
static int load_cases(bad_case **out)
{
	size_t len;
	char *text = read_source("tests/spec/bad/cases.txt", &len);
	int n = 0, cap = 0;
	bad_case *cases = NULL;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (line[0] == '#' || line[0] == 0)
			continue;
		char *bar1 = strchr(line, '|'), *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
		ck_assert_msg(bar2 != NULL, "cases.txt: bad line '%s'", line);
		if (n == cap)
			cases = realloc(cases, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *cases);
		bad_case *c = &cases[n++];
		snprintf(c->file, sizeof c->file, "%.*s", (int)(bar1 - line), line);
		snprintf(c->sets, sizeof c->sets, "%.*s", (int)(bar2 - bar1 - 1), bar1 + 1);
		if (strncmp(bar2 + 1, "--set:", 6) == 0)
			snprintf(c->want, sizeof c->want, "%s", bar2 + 1);
		else
			snprintf(c->want, sizeof c->want, "%s:%s", c->file, bar2 + 1);
	}
	free(text);
	*out = cases;
	return n;
}

START_TEST(test_bad_spec)
{
	bad_case *cases;
	int n = load_cases(&cases);
	ck_assert_int_lt(_i, n);
	const bad_case *c = &cases[_i];
	char rel[512];
	snprintf(rel, sizeof rel, "tests/spec/bad/%s", c->file);
	size_t len;
	char *text = read_source(rel, &len);
	fe_spec s;
	ir_diags d;
	ir_diags_init(&d);
	bool ok = fe_spec_parse(&s, c->file, text, len, &d);
	char sets[sizeof c->sets];
	strcpy(sets, c->sets);
	int index = 0;
	for (char *set = strtok(sets, ";"); ok && set; set = strtok(NULL, ";"))
		ok = fe_spec_set(&s, set, ++index, &d);
	if (ok)
		ok = fe_spec_check(&s, &d);
	ck_assert_msg(!ok, "%s|%s: no error, want %s", c->file, c->sets, c->want);
	ck_assert_int_eq(d.n, 1);
	char got[2048];
	const ir_pos *p = &d.items[0].pos;
	snprintf(got, sizeof got, "%s:%d:%d: error: %s", p->file, p->line, p->col, d.items[0].msg);
	ck_assert_msg(strcmp(got, c->want) == 0, "%s|%s:\n  got:  %s\n  want: %s", c->file, c->sets, got, c->want);
	ir_diags_free(&d);
	free(text);
	free(cases);
}
END_TEST

/* The corpus is big enough to mean something. */
START_TEST(test_bad_corpus_size)
{
	bad_case *cases;
	int n = load_cases(&cases), nset = 0;
	for (int i = 0; i < n; i++)
		nset += strncmp(cases[i].want, "--set:", 6) == 0;
	ck_assert_int_ge(n, 30);
	ck_assert_int_ge(nset, 6);
	free(cases);
}
END_TEST

/* ---- untrusted input ----------------------------------------------------- */

/* Parses, sets and checks; whatever the input, each step either succeeds or
 * stops with exactly one diagnostic, and a good spec prints. */
static void run_any(const char *text, size_t len, const char *set)
{
	fe_spec s;
	ir_diags d;
	ir_diags_init(&d);
	bool ok = fe_spec_parse(&s, "fuzz.rev", text, len, &d);
	if (ok && set)
		ok = fe_spec_set(&s, set, 1, &d);
	if (ok && (ok = fe_spec_check(&s, &d))) {
		char *out = print_str(&s);
		free(out);
		for (int i = 0; i <= s.nstages; i++)
			fe_spec_stage_input(&s, i, NULL, NULL, NULL);
	}
	ck_assert_int_eq(d.n, ok ? 0 : 1);
	if (!ok) {
		ck_assert_ptr_nonnull(d.items[0].pos.file);
		ck_assert(d.items[0].msg[0] != 0);
		/* The caret printer copes with any position on any text. */
		FILE *null = fopen("/dev/null", "w");
		ir_diag_print(null, &d.items[0], text, len);
		fclose(null);
	}
	ir_diags_free(&d);
}

START_TEST(test_truncations)
{
	for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
		size_t len;
		char *text = read_source(presets[i].file, &len);
		for (size_t n = 0; n <= len; n++) {
			/* An exact-size copy, so that ASan sees any over-read. */
			char *copy = malloc(n ? n : 1);
			memcpy(copy, text, n);
			run_any(copy, n, NULL);
			free(copy);
		}
		free(text);
	}
}
END_TEST

START_TEST(test_mutations)
{
	static const char bytes[] = {0, '\n', '\r', ',', '=', '#', ' ', '-', '.', 'e', '9', '0', ':', '\x80', '\xff', 'x'};
	srand(4242);
	for (int trial = 0; trial < 4000; trial++) {
		size_t len;
		char *text = read_source(presets[trial % 4].file, &len);
		int edits = 1 + rand() % 4;
		for (int e = 0; e < edits; e++) {
			size_t at = (size_t)rand() % len;
			text[at] = rand() % 2 ? bytes[rand() % (int)sizeof bytes] : (char)(rand() % 256);
		}
		char *copy = malloc(len);
		memcpy(copy, text, len);
		run_any(copy, len, NULL);
		free(copy);
		free(text);
	}
	/* Random overrides on a good spec. */
	static const char *const keys[] = {"units=", "filters=", "strides=", "input=", "lr_list=", "lr_steps=",
		"init_filters=", "init_stride=", "block=", "dataset=", "momentum=", "lr=", "seed="};
	for (int trial = 0; trial < 4000; trial++) {
		char set[64];
		int n = snprintf(set, sizeof set, "%s", keys[rand() % (int)(sizeof keys / sizeof keys[0])]);
		int extra = rand() % 20;
		for (int i = 0; i < extra && n < (int)sizeof set - 1; i++)
			set[n++] = "0123456789,,,.-e:xb"[rand() % 19];
		set[n] = 0;
		size_t len;
		char *text = read_source(presets[trial % 4].file, &len);
		run_any(text, len, set);
		free(text);
	}
}
END_TEST

START_TEST(test_junk)
{
	srand(99);
	for (int trial = 0; trial < 500; trial++) {
		size_t len = (size_t)(rand() % 300);
		char *buf = malloc(len ? len : 1);
		for (size_t i = 0; i < len; i++)
			buf[i] = (char)(rand() % 256);
		run_any(buf, len, NULL);
		free(buf);
	}
	/* Overlong lines, and a file over FE_MAX_FILE. */
	size_t len = FE_MAX_FILE + 1;
	char *buf = malloc(len);
	memset(buf, '\n', len);
	ir_diags d;
	ir_diags_init(&d);
	fe_spec s;
	ck_assert(!fe_spec_parse(&s, "big.rev", buf, len, &d));
	ck_assert_int_eq(d.n, 1);
	ck_assert_int_eq(d.items[0].pos.line, 0);
	ck_assert_str_eq(d.items[0].msg, "a spec is at most 1048576 bytes; this one is 1048577");
	ir_diags_clear(&d);
	memset(buf, '#', FE_MAX_LINE + 1);
	ck_assert(!fe_spec_parse(&s, "long.rev", buf, FE_MAX_LINE + 1, &d));
	ck_assert_str_eq(d.items[0].msg, "line is longer than 4096 bytes");
	ck_assert_int_eq(d.items[0].pos.col, FE_MAX_LINE + 1);
	ir_diags_clear(&d);
	/* Exactly FE_MAX_LINE bytes is fine (then the keys are missing). */
	ck_assert(!fe_spec_parse(&s, "long.rev", buf, FE_MAX_LINE, &d));
	ck_assert_str_eq(d.items[0].msg, "missing required key 'input'");
	ck_assert_int_eq(d.items[0].pos.line, 2);
	ir_diags_free(&d);
	free(buf);
	/* A NULL text is an empty file. */
	ir_diags_init(&d);
	ck_assert(!fe_spec_parse(&s, "null.rev", NULL, 0, &d));
	ck_assert_str_eq(d.items[0].msg, "missing required key 'input'");
	ir_diags_free(&d);
}
END_TEST

/* The caret points at the value. */
START_TEST(test_diag_caret)
{
	static const char text[] = "input = 1,28,28\nclasses = 10\ninit_filters = 16\nunits = 2,2,2\n"
	                           "filters = 16,33,64\nstrides = 1,2,2\nblock = basic\nbatch = 100\n";
	fe_spec s;
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(fe_spec_parse(&s, "t.rev", text, strlen(text), &d));
	ck_assert(!fe_spec_check(&s, &d));
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	ir_diag_print(f, &d.items[0], text, strlen(text));
	fclose(f);
	ck_assert_str_eq(out, "t.rev:5:14: error: filters must be even: 33\n"
	                      "  filters = 16,33,64\n"
	                      "               ^\n");
	free(out);
	ir_diags_free(&d);
}
END_TEST

/* docs/spec.md documents every key of keys.def. */
START_TEST(test_docs_list_keys)
{
	size_t len;
	char *doc = read_source("docs/spec.md", &len);
	for (int k = 0; k < FE_KEY_COUNT; k++) {
		char want[64];
		snprintf(want, sizeof want, "| `%s` |", fe_key_name((fe_key)k));
		ck_assert_msg(strstr(doc, want) != NULL, "docs/spec.md has no row for '%s'", fe_key_name((fe_key)k));
	}
	free(doc);
}
END_TEST

static Suite *frontend_suite(void)
{
	Suite *s = suite_create("frontend");
	TCase *tc = tcase_create("spec");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_preset, 0, (int)(sizeof presets / sizeof presets[0]));
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_model_name);
	tcase_add_test(tc, test_layout);
	tcase_add_test(tc, test_set_units_batch);
	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_set_lr);
	tcase_add_test(tc, test_set_other);
	tcase_add_test(tc, test_set_errors);
	tcase_add_test(tc, test_print_roundtrip);
	tcase_add_test(tc, test_revvit_presets);
	tcase_add_test(tc, test_lr_schedule);
	tcase_add_test(tc, test_diag_caret);
	tcase_add_test(tc, test_docs_list_keys);
	suite_add_tcase(s, tc);

	TCase *bad = tcase_create("bad");
	tcase_set_timeout(bad, 60);
	/* One test per case; when cases.txt cannot be read here, one that
	 * fails saying so. */
	size_t len;
	char *text = try_read("tests/spec/bad/cases.txt", &len);
	int n = 0;
	for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n"))
		n += line[0] != '#';
	free(text);
	tcase_add_loop_test(bad, test_bad_spec, 0, n > 0 ? n : 1);
	tcase_add_test(bad, test_bad_corpus_size);
	tcase_add_test(bad, test_truncations);
	tcase_add_test(bad, test_mutations);
	tcase_add_test(bad, test_junk);
	suite_add_tcase(s, bad);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(frontend_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
