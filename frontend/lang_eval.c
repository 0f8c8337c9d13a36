/* lang_eval.c: the model language's integer expressions, evaluated in a
 * frame of block parameters and loop variables, with the spec's integer keys
 * as names.  Each value carries the keys it was computed from and where the
 * first of them was written, so that a size error can blame a key
 * (lang_node.c's fe_lw_fits). */
#include <string.h>

#include "lang_lower.h"

/* The integer values of key k (n of them), their positions; false when k
 * is not an integer key. */
bool fe_lw_key_ints(const fe_spec *s, fe_key k, const int64_t **v, const ir_pos **pos, int *n, int64_t *tmp)
{
	*pos = NULL;
	*n = 1;
	switch (k) {
	case FE_KEY_INPUT: *v = s->input; *pos = s->input_pos; *n = 3; return true;
	case FE_KEY_UNITS: *v = s->units; *pos = s->units_pos; *n = s->nstages; return true;
	case FE_KEY_FILTERS: *v = s->filters; *pos = s->filters_pos; *n = s->nfilters; return true;
	case FE_KEY_STRIDES: *v = s->strides; *pos = s->strides_pos; *n = s->nstrides; return true;
	case FE_KEY_LR_STEPS: *v = s->lr_steps; *pos = s->lr_steps_pos; *n = s->nlr_steps; return true;
	case FE_KEY_CLASSES: *v = &s->classes; return true;
	case FE_KEY_INIT_FILTERS: *v = &s->init_filters; return true;
	case FE_KEY_INIT_KERNEL: *v = &s->init_kernel; return true;
	case FE_KEY_INIT_STRIDE: *v = &s->init_stride; return true;
	case FE_KEY_BATCH: *v = &s->batch; return true;
	case FE_KEY_STEPS: *v = &s->steps; return true;
	case FE_KEY_EPOCHS: *v = &s->epochs; return true;
	case FE_KEY_SEED: *v = &s->seed; return true;
	case FE_KEY_INIT_MAX_POOL: *tmp = s->init_max_pool; *v = tmp; return true;
	case FE_KEY_PATCH: *v = &s->patch; return true;
	case FE_KEY_WIDTH: *v = &s->width; return true;
	case FE_KEY_HEADS: *v = &s->heads; return true;
	case FE_KEY_MLP_RATIO: *v = &s->mlp_ratio; return true;
	default: return false;
	}
}

static bool is_list_key(fe_key k)
{
	return fe_keys[k].nmax > 1;
}

static bool lookup_key(lw *L, const fe_expr *e, fe_key *k)
{
	if (fe_key_lookup(e->name, e->n, k))
		return true;
	return fe_lw_fail(L, e->pos, "unknown name '%.*s'", (int)e->n, e->name);
}

bool fe_lw_eval(lw *L, const frame *f, const fe_expr *e, val *out);

static bool eval_key(lw *L, const frame *f, const fe_expr *e, val *out)
{
	fe_key k;
	if (!lookup_key(L, e, &k))
		return false;
	const int64_t *v;
	const ir_pos *pos;
	int n;
	int64_t tmp;
	if (!fe_lw_key_ints(L->s, k, &v, &pos, &n, &tmp))
		return fe_lw_fail(L, e->pos, "key '%s' is not an integer", fe_keys[k].name);
	out->keys = 1u << k;
	if (e->kind == FE_E_LEN) {
		if (!is_list_key(k))
			return fe_lw_fail(L, e->pos, "'%s' is not a list", fe_keys[k].name);
		out->v = n;
		out->origin = L->s->vpos[k];
		return true;
	}
	if (e->kind == FE_E_NAME) {
		if (is_list_key(k))
			return fe_lw_fail(L, e->pos, "'%s' is a list: write %s[i]", fe_keys[k].name, fe_keys[k].name);
		out->v = v[0];
		out->origin = L->s->vpos[k];
		return true;
	}
	if (!is_list_key(k))
		return fe_lw_fail(L, e->pos, "'%s' is not a list", fe_keys[k].name);
	val i;
	if (!fe_lw_eval(L, f, e->a, &i))
		return false;
	if (i.v < 0 || i.v >= n)
		return fe_lw_fail(L, e->a->pos, "index %lld is outside %s, which has %d values", (long long)i.v,
			fe_keys[k].name, n);
	out->v = v[i.v];
	out->keys |= i.keys;
	out->origin = pos[i.v];
	return true;
}

bool fe_lw_eval(lw *L, const frame *f, const fe_expr *e, val *out)
{
	*out = (val){0};
	switch (e->kind) {
	case FE_E_INT:
		out->v = e->v;
		return true;
	case FE_E_NAME:
		for (int i = f->count - 1; i >= 0; i--)
			if (f->n[i] == e->n && memcmp(f->name[i], e->name, e->n) == 0) {
				*out = f->v[i];
				return true;
			}
		return eval_key(L, f, e, out);
	case FE_E_INDEX:
	case FE_E_LEN:
		return eval_key(L, f, e, out);
	case FE_E_NOT:
	case FE_E_NEG:
		if (!fe_lw_eval(L, f, e->a, out))
			return false;
		out->v = e->kind == FE_E_NOT ? !out->v : -out->v;
		return true;
	case FE_E_BIN:
		break;
	}
	val a, b;
	if (!fe_lw_eval(L, f, e->a, &a) || !fe_lw_eval(L, f, e->b, &b))
		return false;
	*out = a;
	out->keys |= b.keys;
	if (!out->origin.file)
		out->origin = b.origin;
	int64_t r = 0;
	bool over = false;
	switch (e->op) {
	case FE_OP_OR: r = a.v || b.v; break;
	case FE_OP_AND: r = a.v && b.v; break;
	case FE_OP_EQ: r = a.v == b.v; break;
	case FE_OP_NE: r = a.v != b.v; break;
	case FE_OP_LT: r = a.v < b.v; break;
	case FE_OP_LE: r = a.v <= b.v; break;
	case FE_OP_GT: r = a.v > b.v; break;
	case FE_OP_GE: r = a.v >= b.v; break;
	case FE_OP_ADD: over = __builtin_add_overflow(a.v, b.v, &r); break;
	case FE_OP_SUB: over = __builtin_sub_overflow(a.v, b.v, &r); break;
	case FE_OP_MUL: over = __builtin_mul_overflow(a.v, b.v, &r); break;
	case FE_OP_DIV:
	case FE_OP_MOD:
		if (b.v == 0)
			return fe_lw_fail(L, e->pos, "division by zero");
		if (a.v == INT64_MIN && b.v == -1)
			over = true;
		else
			r = e->op == FE_OP_DIV ? a.v / b.v : a.v % b.v;
		break;
	}
	if (over || r > FE_INT_MAX || r < -(int64_t)FE_INT_MAX)
		return fe_lw_fail(L, e->pos, "the value is out of range (at most %d)", FE_INT_MAX);
	out->v = r;
	return true;
}
