/* test_lang.c: unit tests of the model language (frontend/lang_*.c): the
 * RevNet presets, which expand to the prelude's network (models/lib/
 * revnet.rev), lower to exactly the graph of the C lowering revc had before
 * (lang_oracle.c), for every preset, both modes, both float dtypes and
 * overrides of the keys that shape the network; a user-defined block and a
 * network of the file's own lower with the names docs/model.md gives; a
 * spec with definitions prints and parses back.  Errors are the corpus's
 * (tests/spec/bad/cases.txt, run by test_frontend.c and the CLI).  Files are
 * read from $REVC_SOURCE_ROOT, which meson sets. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe.h"

#include "lang_oracle.c"

static char *read_source(const char *rel, size_t *len)
{
	const char *root = getenv("REVC_SOURCE_ROOT");
	ck_assert_msg(root != NULL, "REVC_SOURCE_ROOT is not set");
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", root, rel);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot read %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	ck_assert(fread(buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	buf[n] = 0;
	*len = (size_t)n;
	return buf;
}

/* Parses, applies the ';'-separated overrides, checks everything; all must
 * pass.  text and file must outlive s. */
static void spec_ok(fe_spec *s, const char *file, const char *text, size_t len, const char *sets, ir_dtype dt)
{
	ir_diags d;
	ir_diags_init(&d);
	bool ok = fe_spec_parse(s, file, text, len, &d);
	char buf[512];
	snprintf(buf, sizeof buf, "%s", sets ? sets : "");
	int index = 0;
	for (char *set = strtok(buf, ";"); ok && set; set = strtok(NULL, ";"))
		ok = fe_spec_set(s, set, ++index, &d);
	ok = ok && fe_spec_check(s, &d) && fe_spec_check_sizes(s, dt, &d);
	ck_assert_msg(ok, "%s [%s]: %s at %d:%d", file, sets ? sets : "", d.n ? d.items[0].msg : "?",
		d.n ? d.items[0].pos.line : 0, d.n ? d.items[0].pos.col : 0);
	ir_diags_free(&d);
}

/* ---- the presets against the oracle --------------------------------------- */

static const char *const presets[] = {"models/fashion.rev", "models/revnet-38.rev", "models/revnet-110.rev",
	"models/revnet-164.rev"};

/* Overrides each preset must take; those a preset cannot (a stride that no
 * longer divides) are skipped where fe_spec_check refuses them. */
static const char *const variants[] = {
	"",
	"units=1,2,3",
	"units=4,1;filters=32,64;strides=1,2",
	"filters=32,64,128;init_filters=32",
	"strides=1,1,2",
	"strides=2,2,1",
	"init_max_pool=true",
	"init_stride=2;strides=1,2,1",
	"init_kernel=5;batch=7",
	"block=bottleneck;filters=64,128,256",
	"block=basic",
	"units=1;filters=64;strides=2;init_filters=64",
	"input=3,12,12;init_max_pool=true;strides=1,3,2",
};

#define NVARIANTS ((int)(sizeof variants / sizeof variants[0]))
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))

START_TEST(test_presets_identical)
{
	const char *file = presets[_i / NVARIANTS];
	const char *sets = variants[_i % NVARIANTS];
	size_t len;
	char *text = read_source(file, &len);
	fe_spec s;
	ir_diags d;
	ir_diags_init(&d);
	bool ok = fe_spec_parse(&s, file, text, len, &d);
	char buf[512];
	snprintf(buf, sizeof buf, "%s", sets);
	int index = 0;
	for (char *set = strtok(buf, ";"); ok && set; set = strtok(NULL, ";"))
		ok = fe_spec_set(&s, set, ++index, &d);
	ck_assert_msg(ok, "%s [%s] does not parse", file, sets);
	if (!fe_spec_check(&s, &d)) {
		/* Only the network's own rules may refuse an override. */
		ck_assert_msg(strstr(d.items[0].msg, "divide") || strstr(d.items[0].msg, "shrink") ||
			strstr(d.items[0].msg, "divisible"), "%s [%s]: %s", file, sets, d.items[0].msg);
		ir_diags_free(&d);
		free(text);
		return;
	}
	for (int dt = IR_F32; dt <= IR_F64; dt++) {
		ck_assert(fe_spec_check_sizes(&s, (ir_dtype)dt, &d));
		for (int mode = FE_LOWER_TRAIN; mode <= FE_LOWER_EVAL; mode++) {
			ir_graph *a = fe_lower(&s, (ir_dtype)dt, (fe_lower_mode)mode);
			ir_graph *b = oracle_lower(&s, (ir_dtype)dt, (fe_lower_mode)mode);
			char *pa = ir_print_str(a), *pb = ir_print_str(b);
			ck_assert_msg(strcmp(pa, pb) == 0, "%s [%s] %s %s: the language's graph differs from the oracle's",
				file, sets, ir_dtype_name((ir_dtype)dt), mode == FE_LOWER_TRAIN ? "train" : "eval");
			ck_assert_int_gt((int)strlen(pa), 1000);
			free(pa);
			free(pb);
			ir_graph_free(a);
			ir_graph_free(b);
		}
	}
	ir_diags_free(&d);
	free(text);
}
END_TEST

/* The oracle can fail: a bottleneck graph is not a basic one. */
START_TEST(test_oracle_differs)
{
	size_t len;
	char *text = read_source("models/revnet-164.rev", &len);
	fe_spec s;
	spec_ok(&s, "models/revnet-164.rev", text, len, "units=1,1,1", IR_F32);
	ir_graph *a = fe_lower(&s, IR_F32, FE_LOWER_TRAIN);
	s.block = FE_BLOCK_BASIC;
	ir_graph *b = oracle_lower(&s, IR_F32, FE_LOWER_TRAIN);
	char *pa = ir_print_str(a), *pb = ir_print_str(b);
	ck_assert(strcmp(pa, pb) != 0);
	free(pa);
	free(pb);
	ir_graph_free(a);
	ir_graph_free(b);
	free(text);
}
END_TEST

/* ---- user-defined blocks and networks ------------------------------------- */

static bool has_param(const ir_graph *g, const char *name)
{
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if ((n->op == IR_OP_PARAM || n->op == IR_OP_STATE) && n->name && strcmp(n->name, name) == 0)
			return true;
	}
	return false;
}

static int count_op(const ir_graph *g, ir_op op)
{
	int k = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		k += n->op == op;
	}
	return k;
}

START_TEST(test_user_block)
{
	size_t len;
	char *text = read_source("examples/plain.rev", &len);
	fe_spec s;
	spec_ok(&s, "examples/plain.rev", text, len, NULL, IR_F32);
	ck_assert_int_eq(s.block, FE_BLOCK_DEF);
	ck_assert_str_eq(s.block_name, "plain");
	ir_graph *g = fe_lower(&s, IR_F32, FE_LOWER_TRAIN);
	ck_assert(has_param(g, "init.conv.w") && has_param(g, "init.bn.gamma") && has_param(g, "final.dense.b"));
	ck_assert(has_param(g, "s0.u0.f.conv0.w") && has_param(g, "s0.u0.f.conv1.w"));
	ck_assert(has_param(g, "s2.u1.g.conv1.w"));
	ck_assert(!has_param(g, "s0.u1.f.bn0.gamma") && !has_param(g, "s0.u0.f.bn1.gamma"));
	/* Batch norm only in the init and final blocks; two convs a function. */
	ck_assert_int_eq(count_op(g, IR_OP_BN_NORM), 2);
	ck_assert_int_eq(count_op(g, IR_OP_CONV2D), 1 + 6 * 2 * 2);
	ck_assert_int_eq(count_op(g, IR_OP_AVGPOOL), 4);
	/* Nodes of the user's block point at its lines. */
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op == IR_OP_RELU && n->scope && strcmp(n->scope, "s1.u1.g") == 0)
			ck_assert_int_eq(n->pos.line, 27);
	}
	ir_graph_free(g);
	free(text);
}
END_TEST

static const char own_net[] =
	"input = 3,8,8\n"
	"classes = 4\n"
	"init_filters = 8\n"
	"units = 3\n"
	"filters = 8\n"
	"strides = 1\n"
	"block = basic\n"
	"batch = 2\n"
	"\n"
	"def mlp(c, k) {\n"
	"\tconv k c\n"
	"\trelu\n"
	"\tconv 1 c as out\n"
	"}\n"
	"\n"
	"def twice(c) {\n"
	"\tmlp(c, 1)    # a block calls a block\n"
	"\tmlp(k=3, c=c)\n"
	"}\n"
	"\n"
	"network {\n"
	"\tsection stem {\n"
	"\t\tconv 3 16 stride=1\n"
	"\t\trelu\n"
	"\t\tsplit\n"
	"\t}\n"
	"\tstage u in units[0] {\n"
	"\t\tif u % 2 == 0 {\n"
	"\t\t\tcoupling f=mlp(8, 3) g=mlp(8, 1)\n"
	"\t\t} else {\n"
	"\t\t\tcoupling f=mlp(8, 1) g=mlp(8, 1 + 2 * (u > 0))\n"
	"\t\t}\n"
	"\t}\n"
	"\tsection head {\n"
	"\t\tmerge\n"
	"\t\tavgpool 2\n"
	"\t\tconv 1 (filters[0] * 2) as mix\n"
	"\t\tbn\n"
	"\t\trelu\n"
	"\t\tglobal_avgpool\n"
	"\t\tdense classes\n"
	"\t}\n"
	"}\n";

START_TEST(test_own_network)
{
	fe_spec s;
	spec_ok(&s, "own.rev", own_net, sizeof own_net - 1, NULL, IR_F64);
	ck_assert(s.own_network);
	ir_graph *g = fe_lower(&s, IR_F64, FE_LOWER_EVAL);
	ck_assert(has_param(g, "stem.conv.w") && has_param(g, "head.mix.w") && has_param(g, "head.bn.mean"));
	ck_assert(has_param(g, "head.dense.w") && !has_param(g, "head.dense.b"));
	ck_assert(has_param(g, "s0.u0.f.conv0.w") && has_param(g, "s0.u0.f.out.w"));
	ck_assert(has_param(g, "s0.u2.g.out.w") && !has_param(g, "s0.u3.f.conv0.w"));
	ck_assert(!has_param(g, "init.conv.w"));
	ck_assert_int_eq(count_op(g, IR_OP_BN_INFER), 1);
	ck_assert_int_eq(count_op(g, IR_OP_ADD), 6);
	/* The 3x3 conv of unit 1's G (1 + 2 * (u > 0)). */
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->op == IR_OP_PARAM && strcmp(n->name, "s0.u1.g.conv0.w") == 0)
			ck_assert_int_eq(n->type.dim[2], 3);
	}
	char *p = ir_print_str(g);
	ck_assert(strstr(p, "scope(\"head\") loc(\"own.rev\":37:3)") != NULL);
	free(p);
	ir_graph_free(g);
	/* The same without the loop's else: units=1 makes one unit. */
	ck_assert(fe_spec_set(&s, "units=1", 1, &(ir_diags){0}));
	ir_diags d;
	ir_diags_init(&d);
	ck_assert(fe_spec_check(&s, &d));
	g = fe_lower(&s, IR_F64, FE_LOWER_TRAIN);
	ck_assert_int_eq(count_op(g, IR_OP_ADD), 2);
	ir_graph_free(g);
	ir_diags_free(&d);
}
END_TEST

/* fe_spec_print writes the definitions too: the printed spec parses back to
 * an equal spec with the same graph. */
START_TEST(test_print_roundtrip)
{
	fe_spec a, b;
	spec_ok(&a, "own.rev", own_net, sizeof own_net - 1, NULL, IR_F32);
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	fe_spec_print(f, &a);
	fclose(f);
	ck_assert(strstr(buf, "def twice(c) {") != NULL);
	spec_ok(&b, "printed.rev", buf, n, NULL, IR_F32);
	ck_assert(fe_spec_equal(&a, &b));
	ir_graph *ga = fe_lower(&a, IR_F32, FE_LOWER_TRAIN), *gb = fe_lower(&b, IR_F32, FE_LOWER_TRAIN);
	char *pa = ir_print_str(ga), *pb = ir_print_str(gb);
	/* Positions name the file; everything else is the same. */
	ck_assert_int_eq(count_op(ga, IR_OP_CONV2D), count_op(gb, IR_OP_CONV2D));
	ck_assert_int_eq(ga->n, gb->n);
	free(pa);
	free(pb);
	ir_graph_free(ga);
	ir_graph_free(gb);
	/* Specs whose definitions differ are not equal. */
	char *other = strdup(own_net);
	char *at = strstr(other, "as out");
	ck_assert_ptr_nonnull(at);
	at[5] = 'w';
	fe_spec c;
	spec_ok(&c, "other.rev", other, strlen(other), NULL, IR_F32);
	ck_assert(!fe_spec_equal(&a, &c));
	free(other);
	free(buf);
}
END_TEST

static Suite *lang_suite(void)
{
	Suite *s = suite_create("lang");
	TCase *tc = tcase_create("lang");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_presets_identical, 0, NPRESETS * NVARIANTS);
	tcase_add_test(tc, test_oracle_differs);
	tcase_add_test(tc, test_user_block);
	tcase_add_test(tc, test_own_network);
	tcase_add_test(tc, test_print_roundtrip);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lang_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
