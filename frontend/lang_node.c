/* lang_node.c: the nodes of a lowered network and their sizes.  A node
 * takes the current scope and position (fe_lw_place); parameters and state
 * are named prefix.NAME.suffix; every tensor is checked against
 * IR_MAX_BYTES, an error blaming the key among those that decided its
 * dimensions that was written last, as fe_spec_check_sizes does. */
#include <stdio.h>
#include <string.h>

#include "lang_lower.h"

void fe_lw_place(lw *L, const char *scope, ir_pos pos)
{
	if (!L->scope || strcmp(L->scope, scope) != 0)
		L->scope = ir_arena_strdup(L->g->arena, scope);
	if (pos.file && (!L->pos.file || strcmp(L->pos.file, pos.file) != 0))
		pos.file = ir_arena_strdup(L->g->arena, pos.file);
	else if (pos.file)
		pos.file = L->pos.file;
	L->pos = pos;
}

/* Nodes of statement st take its position, or the anchor when it is the
 * prelude's. */
void fe_lw_place_stmt(lw *L, ir_pos stmt_pos)
{
	fe_lw_place(L, L->scope, fe_is_prelude(stmt_pos.file) ? L->anchor : stmt_pos);
}

ir_node *fe_lw_node_n(lw *L, ir_op op, ir_node *const *in, int nin)
{
	ir_node *n = ir_node_new(L->g, op, in, nin);
	n->pos = L->pos;
	n->pos_printed = L->pos.file != NULL;
	n->scope = L->scope;
	return n;
}

ir_node *fe_lw_node(lw *L, ir_op op, ir_node *a, ir_node *b)
{
	ir_node *in[2] = {a, b};
	return fe_lw_node_n(L, op, in, a ? (b ? 2 : 1) : 0);
}

/* Checks a tensor of dtype dt against IR_MAX_BYTES; blames the key, among
 * `keys` and the batch and input, that was written last. */
bool fe_lw_fits(lw *L, ir_pos at, unsigned keys, const char *what, ir_dtype dt, int rank, const int64_t *dims)
{
	ir_type t = ir_type_make(dt, rank, dims);
	if (!L->sizes || ir_type_size_ok(&t))
		return true;
	const fe_spec *s = L->s;
	keys |= K(BATCH);
	int blame = -1;
	for (int k = 0; k < FE_KEY_COUNT; k++)
		if ((keys & (1u << k)) && s->seq[k] && (blame < 0 || s->seq[k] >= s->seq[blame]))
			blame = k;
	char type[160], value[200];
	ir_type_str(&t, type, sizeof type);
	if (blame < 0)
		return fe_lw_fail(L, at, "%s %s is larger than 2^40 bytes", what, type);
	const int64_t *v;
	const ir_pos *pos;
	int n;
	int64_t tmp;
	size_t used = 0;
	value[0] = 0;
	if (fe_lw_key_ints(s, (fe_key)blame, &v, &pos, &n, &tmp))
		for (int i = 0; i < n && used < sizeof value - 24; i++)
			used += (size_t)snprintf(value + used, sizeof value - used, "%s%lld", i ? "," : "", (long long)v[i]);
	return fe_lw_fail(L, s->vpos[blame], "%s %s makes %s %s larger than 2^40 bytes", fe_keys[blame].name, value, what,
		type);
}

static unsigned all_keys(const tensor *t)
{
	unsigned k = 0;
	for (int i = 0; i < t->rank; i++)
		k |= t->keys[i];
	return k;
}

/* Gives y (made by the layer named what) the shape in t and checks its size. */
bool fe_lw_output(lw *L, tensor *t, ir_node *y, const char *what)
{
	t->n = y;
	char buf[160];
	snprintf(buf, sizeof buf, "the output of %s", what);
	return fe_lw_fits(L, L->pos, all_keys(t), buf, L->dt, t->rank, t->dim);
}

/* A parameter or state tensor named prefix.name.suffix (prefix.name when
 * suffix is NULL: embed.pos). */
ir_node *fe_lw_tensor_node(lw *L, ir_op op, const char *name, const char *suffix, int rank, const int64_t *dims,
	unsigned keys)
{
	char full[256];
	if (suffix)
		snprintf(full, sizeof full, "%s.%s.%s", L->prefix, name, suffix);
	else
		snprintf(full, sizeof full, "%s.%s", L->prefix, name);
	char what[300];
	snprintf(what, sizeof what, "the weight %s", full);
	if (!fe_lw_fits(L, L->pos, keys, what, L->dt, rank, dims))
		return NULL;
	ir_node *n = fe_lw_node(L, op, NULL, NULL);
	n->name = ir_arena_strdup(L->g->arena, full);
	n->type = ir_type_make(L->dt, rank, dims);
	return n;
}
