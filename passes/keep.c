/* keep.c: the per-unit decisions of the backward pass (ir_unit_keep on each
 * unit's forward y1: docs/ir.md), read from a graph, written to it, spelled
 * as a string of letters, and carried out.
 *
 * Carrying them out works from the last unit back, as revbwd always did:
 *   store      nothing changes: the gradients read the stored values;
 *   invert     G(y1) recomputed, x2 = y2 - G(y1), F(x2) recomputed,
 *              x1 = y1 - F(x2), y1 and y2 being the stand-ins the next
 *              unit left (its reconstructions) or the stored outputs;
 *   recompute  G and F recomputed the same way, without reconstruction
 *              (the unit's x2 stays stored: what revnet does for a unit
 *              with a downsample);
 *   rerun      a segment J..K (each unit rerun from J) reruns its whole
 *              forward from unit J's stored inputs, in list order, just
 *              before the first of its gradients (checkpointing).
 * New nodes have role recompute and the marking (and scope) of the node
 * they stand for, a reconstruction that of y2 (y1); batch norms among them
 * use batch statistics and never touch running statistics.  A unit whose two
 * inputs are one value (duplicated streams) reconstructs it once, as x2.
 *
 * The forward nodes outside the units form segments (passes.h): a stored
 * segment's gradients read its stored values; a recomputed one's forward
 * (the nodes marked keep(recompute)) reruns, in list order, from its stored
 * inputs just before the first gradient that reads one of its values, and
 * its gradients read the recomputations.  In the letters a segment is
 * S (stored) or R (recomputed), at its place among the units'; a string
 * without them stores every segment. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static const char letters[IR_KEEP_COUNT] = {
	[IR_KEEP_STORE] = 's', [IR_KEEP_INVERT] = 'i', [IR_KEEP_RECOMPUTE] = 'r', [IR_KEEP_RERUN] = 'c',
};

static bool segment_letter(char c)
{
	return c == 'S' || c == 'R';
}

bool ps_keep_parse(const char *str, int nu, ps_keep *out, char *why, size_t whylen)
{
	char s[PS_MAX_LETTERS + 1];
	int n = 0;
	for (; *str && n < PS_MAX_LETTERS; str++)
		if (!segment_letter(*str))
			s[n++] = *str;
	s[n] = '\0';
	if (n != nu || *str) {
		snprintf(why, whylen, "%d decisions for %d units", n + (int)strlen(str), nu);
		return false;
	}
	for (int k = 0; k < nu; k++) {
		if (s[k] == '+') {
			if (k == 0 || out[k - 1].keep != IR_KEEP_RERUN) {
				snprintf(why, whylen, "decision %d is '+' (rerun with the unit before), but unit %d is not rerun", k,
					k - 1);
				return false;
			}
			out[k] = (ps_keep){IR_KEEP_RERUN, out[k - 1].from};
			continue;
		}
		const char *c = memchr(letters, s[k], sizeof letters);
		if (!s[k] || !c) {
			snprintf(why, whylen, "decision %d is '%c', not one of s (store), i (invert), r (recompute), "
				"c (rerun from here), + (rerun with the unit before)", k, s[k]);
			return false;
		}
		out[k] = (ps_keep){(ir_unit_keep)(c - letters), k};
	}
	return true;
}

void ps_keep_format(const ps_keep *keep, int nu, char *buf)
{
	for (int k = 0; k < nu; k++)
		buf[k] = keep[k].keep == IR_KEEP_RERUN && keep[k].from < k ? '+' : letters[keep[k].keep];
	buf[nu] = '\0';
}

/* ---- segments ------------------------------------------------------------ */

static bool recomputable(const ir_node *n);

void ps_segments_index(const ir_graph *g, int *seg)
{
	int j = 0;
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		seg[i] = -1;
		if (n->role != IR_ROLE_FWD)
			continue;
		if (n->unit >= 0)
			j = n->unit + 1 > j ? n->unit + 1 : j;
		else if (recomputable(n))
			seg[i] = j;
	}
}

static int *segment_map(ir_graph *g)
{
	ir_graph_renumber(g);
	int *seg = malloc(((size_t)g->n + 1) * sizeof *seg);
	if (!seg)
		IR_DIE("out of memory");
	ps_segments_index(g, seg);
	return seg;
}

int ps_segments_find(ir_graph *g, int nu, int *at)
{
	int *seg = segment_map(g);
	bool *present = calloc((size_t)nu + 2, sizeof *present);
	if (!present)
		IR_DIE("out of memory");
	for (int i = 0; i < g->n; i++) {
		const ir_node *n = g->nodes[i];
		if (n->role == IR_ROLE_BWD)
			for (int k = 0; k < n->nin; k++)
				if (seg[n->in[k]->id] >= 0 && seg[n->in[k]->id] <= nu)
					present[seg[n->in[k]->id]] = true;
	}
	int ns = 0;
	for (int j = 0; j <= nu; j++)
		if (present[j])
			at[ns++] = j;
	free(present);
	free(seg);
	return ns;
}

bool ps_segments_parse(const char *s, int ns, bool *rec, char *why, size_t whylen)
{
	int n = 0;
	for (; *s; s++)
		if (segment_letter(*s)) {
			if (n < ns)
				rec[n] = *s == 'R';
			n++;
		}
	if (n == 0)
		for (int j = 0; j < ns; j++)
			rec[j] = false;
	if (n != 0 && n != ns) {
		snprintf(why, whylen, "%d segment decisions (S, R) for %d segments", n, ns);
		return false;
	}
	return true;
}

void ps_decisions_format(const ps_keep *keep, int nu, const int *at, const bool *rec, int ns, char *buf)
{
	bool any = false;
	for (int j = 0; j < ns; j++)
		any |= rec[j];
	int o = 0;
	for (int k = 0, j = 0; k <= nu; k++) {
		for (; any && j < ns && at[j] == k; j++)
			buf[o++] = rec[j] ? 'R' : 'S';
		if (k < nu)
			buf[o++] = keep[k].keep == IR_KEEP_RERUN && keep[k].from < k ? '+' : letters[keep[k].keep];
	}
	buf[o] = '\0';
}

void ps_segments_read(ir_graph *g, int nu, const int *at, int ns, bool *rec)
{
	int *seg = segment_map(g);
	for (int j = 0; j < ns; j++)
		rec[j] = false;
	for (int i = 0; i < g->n; i++)
		for (int j = 0; j < ns; j++)
			if (seg[i] == at[j] && at[j] <= nu && g->nodes[i]->keep == IR_KEEP_RECOMPUTE)
				rec[j] = true;
	free(seg);
}

/* Marks the recomputable nodes of the segments at[j] with rec[j]. */
static void segments_write(ir_graph *g, const int *seg, const int *at, const bool *rec, int ns)
{
	for (int i = 0; i < g->n; i++)
		for (int j = 0; j < ns; j++)
			if (seg[i] == at[j])
				g->nodes[i]->keep = rec[j] ? IR_KEEP_RECOMPUTE : IR_KEEP_NONE;
}

/* Segment j's marked nodes recomputed before the first gradient reading
 * one of them; the gradients that read them read the recomputations. */
static void segment_recompute(ps_recompute *r, const int *seg, int j)
{
	ir_graph *g = r->g;
	const ir_node *at = NULL;
	bool *reads = calloc((size_t)r->n + 1, sizeof *reads);
	if (!reads)
		IR_DIE("out of memory");
	for (int i = 0; i < r->n; i++) {
		const ir_node *n = r->orig[i];
		if (n->role != IR_ROLE_BWD)
			continue;
		for (int k = 0; k < n->nin; k++)
			if (n->in[k]->id < r->n && r->orig[n->in[k]->id] == n->in[k] && seg[n->in[k]->id] == j &&
			    n->in[k]->keep == IR_KEEP_RECOMPUTE)
				reads[i] = true;
		if (reads[i] && !at)
			at = n;
	}
	if (at) {
		for (int i = 0; i < r->n; i++)
			if (seg[i] == j && r->orig[i]->keep == IR_KEEP_RECOMPUTE)
				ps_recompute_set(r, r->orig[i], ps_recompute_clone(r, r->orig[i], at));
		for (int i = 0; i < r->n; i++)
			if (reads[i])
				ps_recompute_redirect(r, r->orig[i]);
	}
	(void)g;
	free(reads);
}

bool ps_keep_read(const ps_unit *u, int nu, ps_keep *out)
{
	bool any = false;
	for (int k = 0; k < nu; k++) {
		out[k] = u[k].y1 ? (ps_keep){u[k].y1->keep, u[k].y1->keep_from} : (ps_keep){IR_KEEP_NONE, k};
		any |= out[k].keep != IR_KEEP_NONE;
	}
	return any;
}

static void keep_write(const ps_unit *u, int nu, const ps_keep *keep)
{
	for (int k = 0; k < nu; k++)
		if (u[k].y1) {
			u[k].y1->keep = keep[k].keep;
			u[k].y1->keep_from = keep[k].from;
		}
}

static bool recomputable(const ir_node *n)
{
	return n->role == IR_ROLE_FWD && !ir_op_has(n->op, IR_OPF_SRC) && !ir_op_has(n->op, IR_OPF_FX);
}

static int int_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* The first gradient node of unit k, or NULL. */
static ir_node *first_bwd(const ir_graph *g, const ps_unit_map *m, int k)
{
	for (int j = m->start[k]; j < m->start[k + 1]; j++)
		if (g->nodes[m->ids[j]]->role == IR_ROLE_BWD)
			return g->nodes[m->ids[j]];
	return NULL;
}

/* Clones the forward nodes of part (F or G) of unit k, in order, to go
 * before `at`. */
static void clone_part(ps_recompute *r, const ps_unit_map *m, int k, ir_unit_part part, const ir_node *at)
{
	for (int j = m->start[k]; j < m->start[k + 1]; j++) {
		ir_node *n = r->orig[m->ids[j]];
		if (m->part[m->ids[j]] == part && recomputable(n))
			ps_recompute_set(r, n, ps_recompute_clone(r, n, at));
	}
}

/* y - f, reconstructing an input of a unit, to go before `at`. */
static ir_node *reconstruct(ps_recompute *r, ir_node *y, ir_node *f, const ir_node *at, const ir_node *like)
{
	ir_node *in[2] = {y, f};
	ir_node *x = ir_node_new(r->g, IR_OP_SUB, in, 2);
	ps_recompute_place(r, x, at);
	x->role = IR_ROLE_RECOMPUTE;
	x->type = like->type;
	x->scope = like->scope;
	ir_node_set_unit(x, like->unit, like->part);
	x->pos = like->pos;
	x->pos_printed = like->pos_printed;
	return x;
}

/* Redirects the gradient nodes of units a..b to the stand-ins. */
static void redirect(const ps_recompute *r, const ps_unit_map *m, int a, int b)
{
	for (int j = m->start[a]; j < m->start[b + 1]; j++)
		if (r->g->nodes[m->ids[j]]->role == IR_ROLE_BWD)
			ps_recompute_redirect(r, r->g->nodes[m->ids[j]]);
}

/* Invert or recompute unit k, before its first gradient. */
static void unit_recompute(ps_recompute *r, const ps_unit_map *m, const ps_unit *U, int k, bool invert)
{
	ir_node *at = first_bwd(r->g, m, k);
	if (!at || !U->y1 || !U->y2)
		return; /* nothing of it is differentiated, or it is not whole */
	ir_node *y1 = ps_recompute_of(r, U->y1), *y2 = ps_recompute_of(r, U->y2);
	clone_part(r, m, k, IR_PART_G, at);
	if (invert)
		ps_recompute_set(r, U->x2, reconstruct(r, y2, ps_recompute_of(r, U->g_out), at, U->y2));
	clone_part(r, m, k, IR_PART_F, at);
	/* Duplicated streams (RevViT's first unit, x1 = x2): x2 is x1. */
	if (invert && U->x1 != U->x2)
		ps_recompute_set(r, U->x1, reconstruct(r, y1, ps_recompute_of(r, U->f_out), at, U->y1));
	redirect(r, m, k, k);
}

/* Reruns units a..b (one segment) before the first of their gradients.
 * Their nodes, in list order, are a run of the unit map's ids once sorted. */
static void segment_rerun(ps_recompute *r, const ps_unit_map *m, int a, int b)
{
	ir_graph *g = r->g;
	int lo = m->start[a], hi = m->start[b + 1];
	int *ids = malloc(((size_t)(hi - lo) + 1) * sizeof *ids);
	if (!ids)
		IR_DIE("out of memory");
	memcpy(ids, m->ids + lo, (size_t)(hi - lo) * sizeof *ids);
	qsort(ids, (size_t)(hi - lo), sizeof *ids, int_cmp);
	const ir_node *at = NULL;
	for (int j = 0; j < hi - lo && !at; j++)
		if (g->nodes[ids[j]]->role == IR_ROLE_BWD)
			at = g->nodes[ids[j]];
	if (at) {
		for (int j = 0; j < hi - lo; j++) {
			ir_node *n = r->orig[ids[j]];
			if (recomputable(n))
				ps_recompute_set(r, n, ps_recompute_clone(r, n, at));
		}
		redirect(r, m, a, b);
	}
	free(ids);
}

void ps_keep_apply(ir_graph *g, const ps_unit *u, int nu, const ps_keep *keep, const int *at, const bool *rec,
	int ns)
{
	keep_write(u, nu, keep);
	ps_unit_map m;
	ps_unit_map_build(g, nu, &m);
	int *seg = segment_map(g);
	if (rec)
		segments_write(g, seg, at, rec, ns);
	ps_recompute r;
	ps_recompute_init(&r, g);
	segment_recompute(&r, seg, nu);
	for (int k = nu - 1; k >= 0; k--) {
		switch (keep[k].keep) {
		case IR_KEEP_NONE:
		case IR_KEEP_STORE:
		case IR_KEEP_COUNT: break;
		case IR_KEEP_INVERT: unit_recompute(&r, &m, &u[k], k, true); break;
		case IR_KEEP_RECOMPUTE: unit_recompute(&r, &m, &u[k], k, false); break;
		case IR_KEEP_RERUN:
			segment_rerun(&r, &m, keep[k].from, k);
			k = keep[k].from;
			break;
		}
		segment_recompute(&r, seg, k);
	}
	ps_recompute_finish(&r);
	free(seg);
	ps_unit_map_free(&m);
}

bool ps_keep_inverts(const ir_graph *g)
{
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->keep == IR_KEEP_INVERT)
			return true;
	return false;
}
