/* test_rt_kern_attn.c: the reference kernels of the attention and
 * token-layout ops (bmatmul, broadcast_add, heads_split, heads_merge,
 * to_tokens, from_tokens, and matmul over tokens) against hand-computed
 * values and direct references, and the gradients their autodiff rules
 * build (the same ops) against finite differences in f64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_net.h"
#include "runtime_suites.h"

static ir_node *with_ints(net *t, ir_node *n, ir_attr_kind k1, int64_t v1, ir_attr_kind k2, int64_t v2)
{
	ir_node_set_int(t->g, n, k1, v1);
	ir_node_set_int(t->g, n, k2, v2);
	return n;
}

static ir_node *split(net *t, ir_node *x, int64_t heads, int64_t part, int64_t parts)
{
	ir_node *n = op(t, IR_OP_HEADS_SPLIT, 1, x);
	ir_node_set_int(t->g, n, IR_ATTR_HEADS, heads);
	return fin(with_ints(t, n, IR_ATTR_PART, part, IR_ATTR_PARTS, parts));
}

static ir_node *zeros(net *t, const ir_node *like)
{
	ir_node *n = op(t, IR_OP_CONST, 0);
	ir_node_set_float(t->g, n, IR_ATTR_VALUE, 0);
	return declare(n, like);
}

static ir_node *bmm(net *t, ir_op o, ir_node *a, ir_node *b, int ta, int tb)
{
	return fin(with_ints(t, op(t, o, 2, a, b), IR_ATTR_TRANS_A, ta, IR_ATTR_TRANS_B, tb));
}

/* ---- heads ----------------------------------------------------------------- */

/* qkv[n,t,c] = 1000n + 100t + c, 3 parts of 2 heads of width 2: part p,
 * head j, element i is column 4p + 2j + i; merging the parts gives qkv. */
START_TEST(test_heads_hand)
{
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *x = input(&t, 3, (int64_t[]){2, 3, 12}, 0, 1);
		for (int i = 0; i < 72; i++)
			dval(&t, x)[i] = 1000 * (i / 36) + 100 * (i / 12 % 3) + i % 12;
		ir_node *p[3];
		for (int k = 0; k < 3; k++)
			p[k] = split(&t, x, 2, k, 3);
		ck_assert_int_eq(p[0]->type.rank, 4);
		ck_assert(p[0]->type.dim[0] == 2 && p[0]->type.dim[1] == 2 && p[0]->type.dim[2] == 3 &&
			  p[0]->type.dim[3] == 2);
		ir_node *m = fin(op(&t, IR_OP_HEADS_MERGE, 3, p[0], p[1], p[2]));
		ir_node *m1 = fin(op(&t, IR_OP_HEADS_MERGE, 1, p[2]));
		net_eval(&t, t.g->n - 1);
		for (int k = 0; k < 3; k++)
			for (int i = 0; i < 24; i++) {
				int n = i / 12, j = i / 6 % 2, s = i / 2 % 3, e = i % 2;
				ck_assert(dval(&t, p[k])[i] == 1000 * n + 100 * s + 4 * k + 2 * j + e);
			}
		ck_assert(memcmp(dval(&t, m), dval(&t, x), 72 * sizeof(double)) == 0);
		for (int i = 0; i < 24; i++)
			ck_assert(dval(&t, m1)[i] == 1000 * (i / 12) + 100 * (i / 4 % 3) + 8 + i % 4);
		net_free(&t);
	}
}
END_TEST

/* heads_split's gradient is heads_merge with zeros for the other parts,
 * heads_merge's is heads_split. */
START_TEST(test_heads_fd)
{
	for (int part = 0; part < 3; part++) {
		net t;
		net_init(&t, IR_F64);
		ir_node *x = input(&t, 3, (int64_t[]){2, 3, 12}, -1, 1);
		ir_node *y = split(&t, x, 2, part, 3);
		ir_node *dy = input(&t, 4, y->type.dim, -1, 1), *z = zeros(&t, y);
		ir_node *in[3] = {z, z, z};
		in[part] = dy;
		ir_node *dx = fin(op(&t, IR_OP_HEADS_MERGE, 3, in[0], in[1], in[2]));
		fd_check(&t, x, y, dy, dx, 1e-8, "heads_split fd");
		net_free(&t);
	}
	net t;
	net_init(&t, IR_F64);
	int64_t dims[4] = {2, 3, 4, 2};
	ir_node *a = input(&t, 4, dims, -1, 1), *b = input(&t, 4, dims, -1, 1);
	ir_node *y = fin(op(&t, IR_OP_HEADS_MERGE, 2, a, b));
	ck_assert(y->type.dim[1] == 4 && y->type.dim[2] == 12);
	ir_node *dy = input(&t, 3, y->type.dim, -1, 1);
	fd_check(&t, a, y, dy, split(&t, dy, 3, 0, 2), 1e-8, "heads_merge fd (a)");
	fd_check(&t, b, y, dy, split(&t, dy, 3, 1, 2), 1e-8, "heads_merge fd (b)");
	net_free(&t);
}
END_TEST

/* ---- tokens ------------------------------------------------------------------ */

/* x[n,c,i,j] is token i*W + j's feature c; from_tokens undoes it. */
START_TEST(test_tokens)
{
	for (int dt = 0; dt < 2; dt++) {
		net t;
		net_init(&t, dt ? IR_F64 : IR_F32);
		ir_node *x = input(&t, 4, (int64_t[]){2, 3, 2, 4}, -1, 1);
		ir_node *y = fin(op(&t, IR_OP_TO_TOKENS, 1, x));
		ck_assert(y->type.rank == 3 && y->type.dim[0] == 2 && y->type.dim[1] == 8 && y->type.dim[2] == 3);
		ir_node *back = declare(op(&t, IR_OP_FROM_TOKENS, 1, y), x);
		net_eval(&t, t.g->n - 1);
		for (int n = 0; n < 2; n++)
			for (int c = 0; c < 3; c++)
				for (int i = 0; i < 2; i++)
					for (int j = 0; j < 4; j++)
						ck_assert(dval(&t, y)[(n * 8 + i * 4 + j) * 3 + c] ==
							  dval(&t, x)[((n * 3 + c) * 2 + i) * 4 + j]);
		ck_assert(memcmp(dval(&t, back), dval(&t, x), 48 * sizeof(double)) == 0);
		if (dt) {
			ir_node *dy = input(&t, 3, y->type.dim, -1, 1);
			fd_check(&t, x, y, dy, declare(op(&t, IR_OP_FROM_TOKENS, 1, dy), x), 1e-8, "to_tokens fd");
			ir_node *tok = input(&t, 3, y->type.dim, -1, 1);
			ir_node *img = declare(op(&t, IR_OP_FROM_TOKENS, 1, tok), x);
			ir_node *di = input(&t, 4, x->type.dim, -1, 1);
			fd_check(&t, tok, img, di, fin(op(&t, IR_OP_TO_TOKENS, 1, di)), 1e-8, "from_tokens fd");
		}
		net_free(&t);
	}
}
END_TEST

/* ---- products ------------------------------------------------------------------ */

/* Over batch [2,3]: C_b = op(A_b)·op(B_b) against the direct product, and
 * the gradients autodiff builds (bmatmuls) against differences. */
START_TEST(test_bmatmul)
{
	const int64_t m = 3, k = 4, n = 2;
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			for (int dt = 0; dt < 2; dt++) {
				net t;
				net_init(&t, dt ? IR_F64 : IR_F32);
				ir_node *a = input(&t, 4, ta ? (int64_t[]){2, 3, k, m} : (int64_t[]){2, 3, m, k}, -1, 1);
				ir_node *b = input(&t, 4, tb ? (int64_t[]){2, 3, n, k} : (int64_t[]){2, 3, k, n}, -1, 1);
				ir_node *c = bmm(&t, IR_OP_BMATMUL, a, b, ta, tb);
				ir_node *dc = input(&t, 4, c->type.dim, -1, 1);
				ir_node *da = ta ? bmm(&t, IR_OP_BMATMUL, b, dc, tb, 1) : bmm(&t, IR_OP_BMATMUL, dc, b, 0, !tb);
				ir_node *db = tb ? bmm(&t, IR_OP_BMATMUL, dc, a, 1, ta) : bmm(&t, IR_OP_BMATMUL, a, dc, !ta, 0);
				net_eval(&t, t.g->n - 1);
				double ref[36] = {0}, *av = dval(&t, a), *bv = dval(&t, b);
				for (int64_t q = 0; q < 6; q++)
					for (int64_t i = 0; i < m; i++)
						for (int64_t j = 0; j < n; j++)
							for (int64_t p = 0; p < k; p++)
								ref[(q * m + i) * n + j] += av[q * m * k + (ta ? p * m + i : i * k + p)] *
											    bv[q * k * n + (tb ? j * k + p : p * n + j)];
				char what[64];
				snprintf(what, sizeof what, "bmatmul %s ta=%d tb=%d", dt ? "f64" : "f32", ta, tb);
				check_close(what, dval(&t, c), ref, 36, dt ? 1e-15 : 1e-6);
				if (dt) {
					snprintf(what, sizeof what, "bmatmul da fd ta=%d tb=%d", ta, tb);
					fd_check(&t, a, c, dc, da, 1e-8, what);
					snprintf(what, sizeof what, "bmatmul db fd ta=%d tb=%d", ta, tb);
					fd_check(&t, b, c, dc, db, 1e-8, what);
				}
				net_free(&t);
			}
}
END_TEST

/* A dense layer over tokens, x [2,3,4]·Wᵀ with W [5,4] (and x·W with W
 * [4,5]): one product over the 6 rows; the weight gradient one product
 * over them too. */
START_TEST(test_matmul_tokens)
{
	for (int tb = 0; tb < 2; tb++)
		for (int dt = 0; dt < 2; dt++) {
			net t;
			net_init(&t, dt ? IR_F64 : IR_F32);
			ir_node *x = input(&t, 3, (int64_t[]){2, 3, 4}, -1, 1);
			ir_node *w = input(&t, 2, tb ? (int64_t[]){5, 4} : (int64_t[]){4, 5}, -1, 1);
			ir_node *y = bmm(&t, IR_OP_MATMUL, x, w, 0, tb);
			ck_assert(y->type.rank == 3 && y->type.dim[0] == 2 && y->type.dim[1] == 3 && y->type.dim[2] == 5);
			ir_node *dy = input(&t, 3, y->type.dim, -1, 1);
			ir_node *dx = bmm(&t, IR_OP_MATMUL, dy, w, 0, !tb);
			ir_node *dw = tb ? bmm(&t, IR_OP_MATMUL, dy, x, 1, 0) : bmm(&t, IR_OP_MATMUL, x, dy, 1, 0);
			ck_assert(ir_type_same_shape(&dw->type, &w->type) && ir_type_same_shape(&dx->type, &x->type));
			net_eval(&t, t.g->n - 1);
			double ref[30] = {0}, *xv = dval(&t, x), *wv = dval(&t, w);
			for (int r = 0; r < 6; r++)
				for (int o = 0; o < 5; o++)
					for (int i = 0; i < 4; i++)
						ref[r * 5 + o] += xv[r * 4 + i] * wv[tb ? o * 4 + i : i * 5 + o];
			check_close(dt ? "matmul over tokens f64" : "matmul over tokens f32", dval(&t, y), ref, 30,
				dt ? 1e-15 : 1e-6);
			if (dt) {
				fd_check(&t, x, y, dy, dx, 1e-8, "matmul over tokens dx fd");
				fd_check(&t, w, y, dy, dw, 1e-8, "matmul over tokens dw fd");
			}
			net_free(&t);
		}
}
END_TEST

/* x [2,3,4] + b [4] (a dense bias over tokens) and + b [3,4] (a positional
 * embedding); db sums dy over the leading dimensions. */
START_TEST(test_broadcast_add)
{
	for (int r = 1; r <= 2; r++)
		for (int dt = 0; dt < 2; dt++) {
			net t;
			net_init(&t, dt ? IR_F64 : IR_F32);
			ir_node *x = input(&t, 3, (int64_t[]){2, 3, 4}, -1, 1);
			ir_node *b = input(&t, r, r == 1 ? (int64_t[]){4} : (int64_t[]){3, 4}, -1, 1);
			ir_node *y = fin(op(&t, IR_OP_BROADCAST_ADD, 2, x, b));
			ir_node *dy = input(&t, 3, y->type.dim, -1, 1);
			ir_node *db = op(&t, IR_OP_REDUCE_SUM, 1, dy);
			ir_node_set_ints(t.g, db, IR_ATTR_AXES, (int64_t[]){0, 1}, 3 - r);
			fin(db);
			net_eval(&t, t.g->n - 1);
			int64_t nb = elems(b);
			double ref[24];
			for (int i = 0; i < 24; i++)
				ref[i] = dval(&t, x)[i] + dval(&t, b)[i % nb];
			check_close("broadcast_add", dval(&t, y), ref, 24, dt ? 1e-16 : 1e-7);
			if (dt)
				fd_check(&t, b, y, dy, db, 1e-8, r == 1 ? "broadcast_add db fd [D]" : "broadcast_add db fd [T,D]");
			net_free(&t);
		}
}
END_TEST

Suite *rt_kern_attn_suite(void)
{
	Suite *s = suite_create("rt_kern_attn");
	TCase *tc = tcase_create("kernels");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_heads_hand);
	tcase_add_test(tc, test_heads_fd);
	tcase_add_test(tc, test_tokens);
	tcase_add_test(tc, test_bmatmul);
	tcase_add_test(tc, test_matmul_tokens);
	tcase_add_test(tc, test_broadcast_add);
	suite_add_tcase(s, tc);
	return s;
}
