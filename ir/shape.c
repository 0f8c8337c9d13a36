/* shape.c: one shape rule per op family.
 *
 * A rule checks its node's operand dtypes and shapes and its attribute
 * values, and computes the result type into *out.  *out arrives holding the
 * declared type, or rank -1 when there is none; ops whose result cannot be
 * derived from the operands alone (a transposed convolution's input size, a
 * global pool's spatial size) take it from there and check it is consistent.
 * Attribute presence and arity are checked before a rule runs (ir_verify and
 * ir_node_infer), so rules may read required attributes directly.
 *
 * Layouts: activations NCHW, conv weights OIHW, dense weights [out, in].
 */
#include <math.h>
#include <string.h>

#include "shape.h"
#include "shape_check.h"

/* Operand i must be a float vector [c] matching operand 0's dtype, one per
 * `what` (channel, feature). */
static bool need_vector(const ir_node *n, int i, int64_t c, const char *what, ir_diags *d)
{
	if (!need_float(n, i, 1, d))
		return false;
	if (in(n, i)->dim[0] != c) {
		char b[128];
		return fail(n, d, "operand %d must be [%lld] (one per %s), got %s", i,
			(long long)c, what, tstr(in(n, i), b, sizeof b));
	}
	return true;
}

static bool need_channels(const ir_node *n, int i, int64_t c, ir_diags *d)
{
	return need_vector(n, i, c, "channel", d);
}

/* Operand i must be [2, c]: the mean and biased variance from bn_stats. */
static bool need_stats(const ir_node *n, int i, int64_t c, ir_diags *d)
{
	if (!need_float(n, i, 2, d))
		return false;
	if (in(n, i)->dim[0] != 2 || in(n, i)->dim[1] != c) {
		char b[128];
		return fail(n, d, "operand %d must be batch statistics [2,%lld], got %s", i,
			(long long)c, tstr(in(n, i), b, sizeof b));
	}
	return true;
}

static bool need_same_shape(const ir_node *n, int i, int j, ir_diags *d)
{
	if (!ir_type_same_shape(in(n, i), in(n, j))) {
		char a[128], b[128];
		return fail(n, d, "operands %d and %d differ in shape: %s vs %s", i, j,
			tstr(in(n, i), a, sizeof a), tstr(in(n, j), b, sizeof b));
	}
	return true;
}

/* Activations are [N,C] or [N,C,H,W]. */
static bool need_activation(const ir_node *n, int i, ir_diags *d)
{
	if (!need_float(n, i, -1, d))
		return false;
	int r = in(n, i)->rank;
	if (r != 2 && r != 4) {
		char b[128];
		return fail(n, d, "operand %d must be [N,C] or [N,C,H,W], got %s", i,
			tstr(in(n, i), b, sizeof b));
	}
	return true;
}

/* The result must have been declared, with the given rank. */
static bool need_declared(const ir_node *n, const ir_type *out, int rank, ir_diags *d)
{
	if (!declared(out))
		return fail(n, d, "needs a declared result type");
	if (out->rank != rank)
		return fail(n, d, "result must have rank %d", rank);
	return true;
}

bool ir_rule_source(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!declared(out))
		return fail(n, d, "needs a declared result type");
	if ((ir_op_is_persistent(n->op) || n->op == IR_OP_CONST) &&
	    !ir_dtype_is_float(out->dtype))
		return fail(n, d, "must be f32 or f64, got %s", ir_dtype_name(out->dtype));
	return true;
}

bool ir_rule_same(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (n->op != IR_OP_OUTPUT && !need_float(n, 0, -1, d))
		return false;
	*out = *in(n, 0);
	return true;
}

bool ir_rule_binary(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, -1, d) || !need_float(n, 1, -1, d) || !need_same_shape(n, 0, 1, d))
		return false;
	*out = *in(n, 0);
	return true;
}

bool ir_rule_split(const ir_node *n, ir_type *out, ir_diags *d)
{
	const ir_type *x = in(n, 0);
	int64_t axis = ir_node_int(n, IR_ATTR_AXIS), part = ir_node_int(n, IR_ATTR_PART),
		parts = ir_node_int(n, IR_ATTR_PARTS);
	if (!need_float(n, 0, -1, d))
		return false;
	if (axis < 0 || axis >= x->rank)
		return fail(n, d, "axis %lld out of range for rank %d", (long long)axis, x->rank);
	if (parts < 1 || x->dim[axis] % parts != 0)
		return fail(n, d, "cannot split %lld into %lld equal parts", (long long)x->dim[axis],
			(long long)parts);
	if (part < 0 || part >= parts)
		return fail(n, d, "part %lld out of range 0..%lld", (long long)part, (long long)parts - 1);
	*out = *x;
	out->dim[axis] /= parts;
	return true;
}

bool ir_rule_concat(const ir_node *n, ir_type *out, ir_diags *d)
{
	const ir_type *a = in(n, 0), *b = in(n, 1);
	int64_t axis = ir_node_int(n, IR_ATTR_AXIS);
	if (!need_float(n, 0, -1, d) || !need_float(n, 1, a->rank, d))
		return false;
	if (axis < 0 || axis >= a->rank)
		return fail(n, d, "axis %lld out of range for rank %d", (long long)axis, a->rank);
	for (int i = 0; i < a->rank; i++)
		if (i != axis && a->dim[i] != b->dim[i])
			return fail(n, d, "operands differ in dimension %d: %lld vs %lld", i,
				(long long)a->dim[i], (long long)b->dim[i]);
	*out = *a;
	if (!ir_size_add(a->dim[axis], b->dim[axis], &out->dim[axis]))
		return fail(n, d, "result dimension overflows");
	return true;
}

bool ir_rule_channel_pad(const ir_node *n, ir_type *out, ir_diags *d)
{
	int64_t lo = ir_node_int(n, IR_ATTR_LO), hi = ir_node_int(n, IR_ATTR_HI);
	if (!need_float(n, 0, 4, d))
		return false;
	if (lo < 0 || hi < 0 || lo > IR_MAX_BYTES || hi > IR_MAX_BYTES)
		return fail(n, d, "lo and hi must be between 0 and 2^40");
	*out = *in(n, 0);
	out->dim[1] += lo + hi;
	return true;
}

bool ir_rule_channel_slice(const ir_node *n, ir_type *out, ir_diags *d)
{
	int64_t lo = ir_node_int(n, IR_ATTR_LO), hi = ir_node_int(n, IR_ATTR_HI);
	if (!need_float(n, 0, 4, d))
		return false;
	if (lo < 0 || hi < 0 || lo > IR_MAX_BYTES || hi > IR_MAX_BYTES || lo + hi >= in(n, 0)->dim[1])
		return fail(n, d, "cannot slice lo=%lld and hi=%lld channels off %lld", (long long)lo,
			(long long)hi, (long long)in(n, 0)->dim[1]);
	*out = *in(n, 0);
	out->dim[1] -= lo + hi;
	return true;
}

/* Reads and checks stride and pad of a convolution or pooling node. */
static bool conv_params(const ir_node *n, int64_t *s, int64_t pad[4], ir_diags *d)
{
	const ir_attr *p = ir_node_attr(n, IR_ATTR_PAD);
	*s = ir_node_int(n, IR_ATTR_STRIDE);
	if (*s < 1 || *s > IR_MAX_WINDOW)
		return fail(n, d, "stride must be between 1 and %d, got %lld", IR_MAX_WINDOW, (long long)*s);
	if (p->u.ints.n != 4)
		return fail(n, d, "pad must be [top, bottom, left, right]");
	for (int i = 0; i < 4; i++) {
		pad[i] = p->u.ints.v[i];
		if (pad[i] < 0 || pad[i] > IR_MAX_WINDOW)
			return fail(n, d, "padding must be between 0 and %d, got %lld", IR_MAX_WINDOW, (long long)pad[i]);
	}
	return true;
}

/* Output size of a window k, stride s over size x with padding lo+hi; -1 when
 * the window does not fit. */
static int64_t window_out(int64_t x, int64_t k, int64_t s, int64_t lo, int64_t hi)
{
	int64_t span = x + lo + hi;
	if (k < 1 || span < k)
		return -1;
	return (span - k) / s + 1;
}

/* Checks x [N,C,H,W] against w [O,C,KH,KW] and computes the conv2d result. */
static bool conv_forward_shape(const ir_node *n, const ir_type *x, const ir_type *w, ir_type *y,
	ir_diags *d)
{
	int64_t s, pad[4];
	char a[128], b[128];
	if (!conv_params(n, &s, pad, d))
		return false;
	if (x->rank != 4 || w->rank != 4)
		return fail(n, d, "needs [N,C,H,W] data and [O,C,KH,KW] filter, got %s and %s",
			tstr(x, a, sizeof a), tstr(w, b, sizeof b));
	if (x->dim[1] != w->dim[1])
		return fail(n, d, "data has %lld channels but the filter expects %lld",
			(long long)x->dim[1], (long long)w->dim[1]);
	int64_t ho = window_out(x->dim[2], w->dim[2], s, pad[0], pad[1]);
	int64_t wo = window_out(x->dim[3], w->dim[3], s, pad[2], pad[3]);
	if (ho < 1 || wo < 1)
		return fail(n, d, "a %lldx%lld filter does not fit the padded %lldx%lld input",
			(long long)w->dim[2], (long long)w->dim[3], (long long)x->dim[2],
			(long long)x->dim[3]);
	int64_t dims[4] = {x->dim[0], w->dim[0], ho, wo};
	*y = ir_type_make(x->dtype, 4, dims);
	return true;
}

bool ir_rule_conv2d(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, 4, d) || !need_float(n, 1, 4, d))
		return false;
	return conv_forward_shape(n, in(n, 0), in(n, 1), out, d);
}

/* The data gradient's shape is the forward input's, which the declared type
 * gives; without one, the smallest input with this output is assumed. */
bool ir_rule_conv2d_dx(const ir_node *n, ir_type *out, ir_diags *d)
{
	const ir_type *dy = in(n, 0), *w = in(n, 1);
	int64_t s, pad[4];
	if (!need_float(n, 0, 4, d) || !need_float(n, 1, 4, d) || !conv_params(n, &s, pad, d))
		return false;
	if (!declared(out)) {
		int64_t dims[4] = {dy->dim[0], w->dim[1], (dy->dim[2] - 1) * s + w->dim[2] - pad[0] - pad[1],
			(dy->dim[3] - 1) * s + w->dim[3] - pad[2] - pad[3]};
		*out = ir_type_make(dy->dtype, 4, dims);
	}
	ir_type y;
	if (out->rank != 4 || !conv_forward_shape(n, out, w, &y, d))
		return out->rank == 4 ? false : fail(n, d, "result must have rank 4");
	if (!ir_type_same_shape(&y, dy)) {
		char a[128], b[128];
		return fail(n, d, "a convolution of %s gives %s, not the incoming gradient's shape",
			tstr(out, a, sizeof a), tstr(&y, b, sizeof b));
	}
	out->dtype = dy->dtype;
	return true;
}

bool ir_rule_conv2d_dw(const ir_node *n, ir_type *out, ir_diags *d)
{
	const ir_type *dy = in(n, 0), *x = in(n, 1);
	int64_t s, pad[4];
	if (!need_float(n, 0, 4, d) || !need_float(n, 1, 4, d) || !conv_params(n, &s, pad, d))
		return false;
	if (!declared(out)) {
		int64_t dims[4] = {dy->dim[1], x->dim[1], x->dim[2] + pad[0] + pad[1] - (dy->dim[2] - 1) * s,
			x->dim[3] + pad[2] + pad[3] - (dy->dim[3] - 1) * s};
		*out = ir_type_make(dy->dtype, 4, dims);
	}
	ir_type y;
	if (out->rank != 4)
		return fail(n, d, "result must have rank 4");
	if (!conv_forward_shape(n, x, out, &y, d))
		return false;
	if (!ir_type_same_shape(&y, dy)) {
		char a[128], b[128];
		return fail(n, d, "a filter %s gives output %s, not the incoming gradient's shape",
			tstr(out, a, sizeof a), tstr(&y, b, sizeof b));
	}
	out->dtype = dy->dtype;
	return true;
}

bool ir_rule_bn_stats(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_activation(n, 0, d))
		return false;
	int64_t dims[2] = {2, in(n, 0)->dim[1]};
	*out = ir_type_make(in(n, 0)->dtype, 2, dims);
	return true;
}

static bool positive_eps(const ir_node *n, ir_diags *d)
{
	double eps = ir_node_float(n, IR_ATTR_EPS);
	if (!(eps > 0 && eps < 1))
		return fail(n, d, "eps must be in (0, 1), got %g", eps);
	return true;
}

/* bn_norm(x, stats, gamma, beta) */
bool ir_rule_bn_norm(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_activation(n, 0, d) || !positive_eps(n, d))
		return false;
	int64_t c = in(n, 0)->dim[1];
	if (!need_stats(n, 1, c, d) || !need_channels(n, 2, c, d) || !need_channels(n, 3, c, d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* bn_infer(x, mean, var, gamma, beta) */
bool ir_rule_bn_infer(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_activation(n, 0, d) || !positive_eps(n, d))
		return false;
	int64_t c = in(n, 0)->dim[1];
	for (int i = 1; i < 5; i++)
		if (!need_channels(n, i, c, d))
			return false;
	*out = *in(n, 0);
	return true;
}

/* bn_dgamma(dy, x, stats) = sum over N,H,W of dy * xhat */
bool ir_rule_bn_dgamma(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_activation(n, 0, d) || !need_float(n, 1, -1, d) || !need_same_shape(n, 0, 1, d) ||
	    !positive_eps(n, d))
		return false;
	int64_t c = in(n, 0)->dim[1];
	if (!need_stats(n, 2, c, d))
		return false;
	*out = ir_type_make(in(n, 0)->dtype, 1, &c);
	return true;
}

/* bn_dx(dy, x, stats, gamma, dgamma, dbeta) */
bool ir_rule_bn_dx(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_activation(n, 0, d) || !need_float(n, 1, -1, d) || !need_same_shape(n, 0, 1, d) ||
	    !positive_eps(n, d))
		return false;
	int64_t c = in(n, 0)->dim[1];
	if (!need_stats(n, 2, c, d))
		return false;
	for (int i = 3; i < 6; i++)
		if (!need_channels(n, i, c, d))
			return false;
	*out = *in(n, 0);
	return true;
}

/* bn_running_mean/var(running, stats) */
bool ir_rule_bn_running(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, 1, d))
		return false;
	double m = ir_node_float(n, IR_ATTR_MOMENTUM);
	if (!(m >= 0 && m < 1))
		return fail(n, d, "momentum must be in [0, 1), got %g", m);
	if (n->op == IR_OP_BN_RUNNING_VAR && ir_node_int(n, IR_ATTR_NCOUNT) < 2)
		return fail(n, d, "count must be at least 2 for an unbiased variance");
	if (!need_stats(n, 1, in(n, 0)->dim[0], d))
		return false;
	*out = *in(n, 0);
	return true;
}

static bool window_ok(const ir_node *n, int64_t k, ir_diags *d)
{
	if (k < 1 || k > IR_MAX_WINDOW)
		return fail(n, d, "window must be between 1 and %d, got %lld", IR_MAX_WINDOW, (long long)k);
	return true;
}

static bool pool_fits(const ir_node *n, const ir_type *x, int64_t k, ir_diags *d)
{
	if (!window_ok(n, k, d))
		return false;
	if (x->dim[2] < k || x->dim[3] < k)
		return fail(n, d, "a %lldx%lld window does not fit %lldx%lld", (long long)k,
			(long long)k, (long long)x->dim[2], (long long)x->dim[3]);
	return true;
}

/* Average pool, window = stride, VALID padding. */
bool ir_rule_avgpool(const ir_node *n, ir_type *out, ir_diags *d)
{
	int64_t k = ir_node_int(n, IR_ATTR_WINDOW);
	if (!need_float(n, 0, 4, d) || !pool_fits(n, in(n, 0), k, d))
		return false;
	*out = *in(n, 0);
	out->dim[2] /= k;
	out->dim[3] /= k;
	return true;
}

bool ir_rule_avgpool_grad(const ir_node *n, ir_type *out, ir_diags *d)
{
	const ir_type *dy = in(n, 0);
	int64_t k = ir_node_int(n, IR_ATTR_WINDOW);
	if (!need_float(n, 0, 4, d))
		return false;
	if (!window_ok(n, k, d))
		return false;
	if (!declared(out)) {
		*out = *dy;
		if (__builtin_mul_overflow(out->dim[2], k, &out->dim[2]) ||
		    __builtin_mul_overflow(out->dim[3], k, &out->dim[3]))
			return fail(n, d, "the result's size overflows");
	}
	if (out->rank != 4)
		return fail(n, d, "result must have rank 4");
	if (!pool_fits(n, out, k, d))
		return false;
	if (out->dim[0] != dy->dim[0] || out->dim[1] != dy->dim[1] || out->dim[2] / k != dy->dim[2] ||
	    out->dim[3] / k != dy->dim[3])
		return fail(n, d, "pooling the result would not give the incoming gradient's shape");
	out->dtype = dy->dtype;
	return true;
}

static bool maxpool_shape(const ir_node *n, const ir_type *x, ir_type *y, ir_diags *d)
{
	int64_t s, pad[4], k = ir_node_int(n, IR_ATTR_WINDOW);
	if (!conv_params(n, &s, pad, d))
		return false;
	if (!window_ok(n, k, d))
		return false;
	int64_t ho = window_out(x->dim[2], k, s, pad[0], pad[1]);
	int64_t wo = window_out(x->dim[3], k, s, pad[2], pad[3]);
	if (ho < 1 || wo < 1)
		return fail(n, d, "the window does not fit the padded input");
	*y = *x;
	y->dim[2] = ho;
	y->dim[3] = wo;
	return true;
}

bool ir_rule_maxpool(const ir_node *n, ir_type *out, ir_diags *d)
{
	return need_float(n, 0, 4, d) && maxpool_shape(n, in(n, 0), out, d);
}

/* maxpool_grad(dy, x) */
bool ir_rule_maxpool_grad(const ir_node *n, ir_type *out, ir_diags *d)
{
	ir_type y;
	if (!need_float(n, 0, 4, d) || !need_float(n, 1, 4, d) || !maxpool_shape(n, in(n, 1), &y, d))
		return false;
	if (!ir_type_same_shape(&y, in(n, 0)))
		return fail(n, d, "the incoming gradient does not match the pooled shape");
	*out = *in(n, 1);
	return true;
}

bool ir_rule_global_avgpool(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, 4, d))
		return false;
	int64_t dims[2] = {in(n, 0)->dim[0], in(n, 0)->dim[1]};
	*out = ir_type_make(in(n, 0)->dtype, 2, dims);
	return true;
}

bool ir_rule_global_avgpool_grad(const ir_node *n, ir_type *out, ir_diags *d)
{
	const ir_type *dy = in(n, 0);
	if (!need_float(n, 0, 2, d) || !need_declared(n, out, 4, d))
		return false;
	if (out->dim[0] != dy->dim[0] || out->dim[1] != dy->dim[1] || out->dim[2] < 1 || out->dim[3] < 1)
		return fail(n, d, "result must be [%lld,%lld,H,W]", (long long)dy->dim[0],
			(long long)dy->dim[1]);
	out->dtype = dy->dtype;
	return true;
}

static int64_t flag_attr(const ir_node *n, ir_attr_kind k)
{
	const ir_attr *a = ir_node_attr(n, k);
	return a ? a->u.i : 0;
}

/* The matrix a tensor of rank >= 2 stands for: its leading dimensions
 * merged into rows, its last one the columns ([N,T,D] is [N*T, D], in
 * place). */
static void as_matrix(const ir_type *t, int64_t *rows, int64_t *cols)
{
	*rows = 1;
	for (int i = 0; i < t->rank - 1; i++)
		*rows *= t->dim[i];
	*cols = t->dim[t->rank - 1];
}

/* matmul(a, b): [M,K] x [K,N]; trans_a/trans_b use the operand transposed.
 * Tokens: a (either way) and b (untransposed) may also be [N,T,K], read as
 * the matrix [N*T,K], so a dense layer over tokens, x·Wᵀ, and its weight
 * gradient, dyᵀ·x, are one product each.  An untransposed rank-3 a keeps
 * its leading dimensions in the result: [N,T,K] x [K,O] is [N,T,O]. */
bool ir_rule_matmul(const ir_node *n, ir_type *out, ir_diags *d)
{
	int64_t ta = flag_attr(n, IR_ATTR_TRANS_A), tb = flag_attr(n, IR_ATTR_TRANS_B);
	if (!need_float(n, 0, -1, d) || !need_float(n, 1, -1, d))
		return false;
	const ir_type *a = in(n, 0), *b = in(n, 1);
	char s[128];
	if (a->rank != 2 && a->rank != 3)
		return fail(n, d, "operand 0 must be [M,K] or [N,T,K], got %s", tstr(a, s, sizeof s));
	if (b->rank != 2 && (b->rank != 3 || tb == 1))
		return fail(n, d, "operand 1 must be [K,N]%s, got %s", tb == 1 ? "" : " or [N,T,K]",
			tstr(b, s, sizeof s));
	if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
		return fail(n, d, "trans_a and trans_b must be 0 or 1");
	int64_t ar, ac, br, bc;
	as_matrix(a, &ar, &ac);
	as_matrix(b, &br, &bc);
	int64_t m = ta ? ac : ar, ka = ta ? ar : ac, kb = tb ? bc : br, nn = tb ? br : bc;
	if (ka != kb)
		return fail(n, d, "inner dimensions differ: %lld vs %lld", (long long)ka, (long long)kb);
	if (a->rank == 3 && !ta) {
		int64_t dims[3] = {a->dim[0], a->dim[1], nn};
		*out = ir_type_make(a->dtype, 3, dims);
	} else {
		int64_t dims[2] = {m, nn};
		*out = ir_type_make(a->dtype, 2, dims);
	}
	return true;
}

/* bias_add(x [N,C,...], b [C]) */
bool ir_rule_bias_add(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_activation(n, 0, d) || !need_channels(n, 1, in(n, 0)->dim[1], d))
		return false;
	*out = *in(n, 0);
	return true;
}

bool ir_rule_reduce_sum(const ir_node *n, ir_type *out, ir_diags *d)
{
	const ir_type *x = in(n, 0);
	const ir_attr *axes = ir_node_attr(n, IR_ATTR_AXES);
	if (!need_float(n, 0, -1, d))
		return false;
	bool drop[IR_MAX_RANK] = {false};
	for (int i = 0; i < axes->u.ints.n; i++) {
		int64_t a = axes->u.ints.v[i];
		if (a < 0 || a >= x->rank || (i > 0 && a <= axes->u.ints.v[i - 1]))
			return fail(n, d, "axes must be increasing and below rank %d", x->rank);
		drop[a] = true;
	}
	*out = ir_type_scalar(x->dtype);
	for (int i = 0; i < x->rank; i++)
		if (!drop[i])
			out->dim[out->rank++] = x->dim[i];
	return true;
}

static bool xent_operands(const ir_node *n, ir_diags *d)
{
	const ir_type *labels = in(n, 1);
	char b[128];
	if (!need_float(n, 0, 2, d))
		return false;
	if (labels->dtype != IR_I32 || labels->rank != 1 || labels->dim[0] != in(n, 0)->dim[0])
		return fail(n, d, "labels must be i32[%lld], got %s", (long long)in(n, 0)->dim[0],
			tstr(labels, b, sizeof b));
	return true;
}

/* softmax_xent(logits [N,K], labels i32[N]): the mean cross-entropy, a scalar. */
bool ir_rule_softmax_xent(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!xent_operands(n, d))
		return false;
	*out = ir_type_scalar(in(n, 0)->dtype);
	return true;
}

bool ir_rule_softmax_xent_grad(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!xent_operands(n, d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* momentum(v, g[, w]): v = momentum*v + g (+ wd*w).  wd goes with w. */
bool ir_rule_momentum(const ir_node *n, ir_type *out, ir_diags *d)
{
	for (int i = 0; i < n->nin; i++)
		if (!need_float(n, i, -1, d) || !need_same_shape(n, 0, i, d))
			return false;
	bool has_wd = ir_node_attr(n, IR_ATTR_WD) != NULL;
	if (has_wd != (n->nin == 3))
		return fail(n, d, "weight decay needs the weight as operand 2, and only then");
	double m = ir_node_float(n, IR_ATTR_MOMENTUM);
	if (!(m >= 0 && m < 1))
		return fail(n, d, "momentum must be in [0, 1), got %g", m);
	*out = *in(n, 0);
	return true;
}

/* sgd(w, v, lr): w = w - lr*v, lr a scalar. */
bool ir_rule_sgd(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, -1, d) || !need_float(n, 1, -1, d) || !need_same_shape(n, 0, 1, d) ||
	    !need_float(n, 2, 0, d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* ---- attention and token layout -------------------------------------- */

/* bmatmul(a [...,M,K], b [...,K,N]): one product per index of the leading
 * (batch) dimensions, which must be equal; trans_a/trans_b transpose each
 * matrix. */
bool ir_rule_bmatmul(const ir_node *n, ir_type *out, ir_diags *d)
{
	int64_t ta = flag_attr(n, IR_ATTR_TRANS_A), tb = flag_attr(n, IR_ATTR_TRANS_B);
	if (!need_float(n, 0, -1, d) || !need_float(n, 1, in(n, 0)->rank, d))
		return false;
	const ir_type *a = in(n, 0), *b = in(n, 1);
	int r = a->rank;
	if (r < 3)
		return fail(n, d, "operands must have a batch dimension and rank 3 or more");
	if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
		return fail(n, d, "trans_a and trans_b must be 0 or 1");
	for (int i = 0; i < r - 2; i++)
		if (a->dim[i] != b->dim[i])
			return fail(n, d, "batch dimension %d differs: %lld vs %lld", i, (long long)a->dim[i],
				(long long)b->dim[i]);
	int64_t m = a->dim[r - 2 + ta], ka = a->dim[r - 1 - ta], kb = b->dim[r - 2 + tb],
		nn = b->dim[r - 1 - tb];
	if (ka != kb)
		return fail(n, d, "inner dimensions differ: %lld vs %lld", (long long)ka, (long long)kb);
	*out = *a;
	out->dim[r - 2] = m;
	out->dim[r - 1] = nn;
	return true;
}

/* broadcast_add(x, b): b's shape is x's last dimensions, and b is added to
 * every slice of x along the others ([N,T,D] + [D] or + [T,D]). */
bool ir_rule_broadcast_add(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, -1, d) || !need_float(n, 1, -1, d))
		return false;
	const ir_type *x = in(n, 0), *b = in(n, 1);
	char s[128], t[128];
	bool ok = b->rank >= 1 && b->rank < x->rank;
	for (int i = 0; ok && i < b->rank; i++)
		ok = b->dim[i] == x->dim[x->rank - b->rank + i];
	if (!ok)
		return fail(n, d, "operand 1 must have the last dimensions of operand 0, got %s and %s",
			tstr(x, s, sizeof s), tstr(b, t, sizeof t));
	*out = *x;
	return true;
}

/* heads_split(x [N,T,P*h*d]) {heads h, part p, parts P}: part p of the P
 * equal column blocks (q, k or v of qkv), its columns j*d .. j*d+d-1 being
 * head j: [N,h,T,d]. */
bool ir_rule_heads_split(const ir_node *n, ir_type *out, ir_diags *d)
{
	int64_t h = ir_node_int(n, IR_ATTR_HEADS), part = ir_node_int(n, IR_ATTR_PART),
		parts = ir_node_int(n, IR_ATTR_PARTS);
	if (!need_float(n, 0, 3, d))
		return false;
	const ir_type *x = in(n, 0);
	if (parts < 1 || parts > 3)
		return fail(n, d, "parts must be 1, 2 or 3, got %lld", (long long)parts);
	if (part < 0 || part >= parts)
		return fail(n, d, "part %lld out of range 0..%lld", (long long)part, (long long)parts - 1);
	if (h < 1 || h > x->dim[2] / parts || x->dim[2] % parts != 0 || (x->dim[2] / parts) % h != 0)
		return fail(n, d, "cannot split %lld columns into %lld parts of %lld heads",
			(long long)x->dim[2], (long long)parts, (long long)h);
	int64_t dims[4] = {x->dim[0], h, x->dim[1], x->dim[2] / parts / h};
	*out = ir_type_make(x->dtype, 4, dims);
	return true;
}

/* heads_merge(x0 [N,h,T,d], ...): the heads of each operand side by side
 * in column order, the operands after one another: [N,T,nin*h*d].  Its
 * adjoint is heads_split. */
bool ir_rule_heads_merge(const ir_node *n, ir_type *out, ir_diags *d)
{
	for (int i = 0; i < n->nin; i++)
		if (!need_float(n, i, 4, d) || !need_same_shape(n, 0, i, d))
			return false;
	const ir_type *x = in(n, 0);
	int64_t dims[3] = {x->dim[0], x->dim[2], n->nin * x->dim[1] * x->dim[3]};
	*out = ir_type_make(x->dtype, 3, dims);
	return true;
}

/* to_tokens(x [N,C,H,W]) = [N,H*W,C]: the feature vector of pixel (i,j) is
 * token i*W + j. */
bool ir_rule_to_tokens(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, 4, d))
		return false;
	const ir_type *x = in(n, 0);
	int64_t dims[3] = {x->dim[0], 0, x->dim[1]};
	if (!ir_size_mul(x->dim[2], x->dim[3], &dims[1]))
		return fail(n, d, "the number of tokens overflows");
	*out = ir_type_make(x->dtype, 3, dims);
	return true;
}

/* from_tokens(x [N,T,C]) : [N,C,H,W], declared, with H*W = T: to_tokens'
 * adjoint (and inverse). */
bool ir_rule_from_tokens(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, 3, d) || !need_declared(n, out, 4, d))
		return false;
	const ir_type *x = in(n, 0);
	char s[128];
	int64_t hw;
	if (out->dim[0] != x->dim[0] || out->dim[1] != x->dim[2] || out->dim[2] < 1 || out->dim[3] < 1 ||
	    !ir_size_mul(out->dim[2], out->dim[3], &hw) || hw != x->dim[1])
		return fail(n, d, "result must be [%lld,%lld,H,W] with H*W = %lld, got %s", (long long)x->dim[0],
			(long long)x->dim[2], (long long)x->dim[1], tstr(out, s, sizeof s));
	out->dtype = x->dtype;
	return true;
}

/* ---- AdamW */

/* A beta attribute must be in [0, 1). */
static bool need_beta(const ir_node *n, ir_diags *d)
{
	double b = ir_node_float(n, IR_ATTR_BETA);
	if (!(b >= 0 && b < 1))
		return fail(n, d, "beta must be in [0, 1), got %g", b);
	return true;
}

/* adam_count(t): t + 1, t a float scalar (the steps taken). */
bool ir_rule_adam_count(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, 0, d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* adam_bias(t) {beta}: the scalar 1 - beta^t. */
bool ir_rule_adam_bias(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, 0, d) || !need_beta(n, d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* adam_m(m, g), adam_v(v, g) {beta}: a moment and the gradient, one shape. */
bool ir_rule_adam_moment(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, -1, d) || !need_float(n, 1, -1, d) || !need_same_shape(n, 0, 1, d) ||
	    !need_beta(n, d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* adamw(w, m, v, lr, c1, c2) {eps [, wd]}: w, m, v of one shape; lr and the
 * bias corrections c1, c2 scalars. */
bool ir_rule_adamw(const ir_node *n, ir_type *out, ir_diags *d)
{
	for (int i = 0; i < 3; i++)
		if (!need_float(n, i, -1, d) || !need_same_shape(n, 0, i, d))
			return false;
	for (int i = 3; i < 6; i++)
		if (!need_float(n, i, 0, d))
			return false;
	double eps = ir_node_float(n, IR_ATTR_EPS);
	if (!(eps > 0 && isfinite(eps)))
		return fail(n, d, "eps must be positive, got %g", eps);
	if (ir_node_attr(n, IR_ATTR_WD) && !(ir_node_float(n, IR_ATTR_WD) >= 0))
		return fail(n, d, "wd must not be negative, got %g", ir_node_float(n, IR_ATTR_WD));
	*out = *in(n, 0);
	return true;
}

/* ---- layer norm, softmax, mean over tokens ------------------------------------ */

/* Operand i is rows of a non-empty last axis: rank >= lowest (2 for layer
 * norm, 1 for softmax). */
static bool need_rows(const ir_node *n, int i, int lowest, ir_diags *d)
{
	if (!need_float(n, i, -1, d))
		return false;
	if (in(n, i)->rank < lowest) {
		char b[128];
		return fail(n, d, "operand %d must have rank %d or more, got %s", i, lowest,
			tstr(in(n, i), b, sizeof b));
	}
	if (in(n, i)->dim[in(n, i)->rank - 1] < 1)
		return fail(n, d, "operand %d has an empty last axis", i);
	return true;
}

/* Operand i must be layer-norm statistics for x = operand j: x's shape with
 * the last axis 2. */
static bool need_ln_stats(const ir_node *n, int i, int j, ir_diags *d)
{
	if (!need_float(n, i, -1, d))
		return false;
	ir_type want = *in(n, j);
	want.dim[want.rank - 1] = 2;
	if (!ir_type_same_shape(in(n, i), &want)) {
		char a[128], b[128];
		return fail(n, d, "operand %d must be layer-norm statistics %s, got %s", i,
			tstr(&want, a, sizeof a), tstr(in(n, i), b, sizeof b));
	}
	return true;
}

/* The last axis of operand 0. */
static int64_t features(const ir_node *n)
{
	return in(n, 0)->dim[in(n, 0)->rank - 1];
}

bool ir_rule_ln_stats(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_rows(n, 0, 2, d))
		return false;
	*out = *in(n, 0);
	out->dim[out->rank - 1] = 2;
	return true;
}

/* ln_norm(x, stats, gamma, beta) */
bool ir_rule_ln_norm(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_rows(n, 0, 2, d) || !positive_eps(n, d) || !need_ln_stats(n, 1, 0, d) ||
	    !need_vector(n, 2, features(n), "feature", d) || !need_vector(n, 3, features(n), "feature", d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* ln_dgamma(dy, x, stats): [D], the sum over the rows of dy * xhat. */
bool ir_rule_ln_dgamma(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_rows(n, 0, 2, d) || !need_float(n, 1, -1, d) || !need_same_shape(n, 0, 1, d) ||
	    !positive_eps(n, d) || !need_ln_stats(n, 2, 0, d))
		return false;
	int64_t c = features(n);
	*out = ir_type_make(in(n, 0)->dtype, 1, &c);
	return true;
}

/* ln_dx(dy, x, stats, gamma) */
bool ir_rule_ln_dx(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_rows(n, 0, 2, d) || !need_float(n, 1, -1, d) || !need_same_shape(n, 0, 1, d) ||
	    !positive_eps(n, d) || !need_ln_stats(n, 2, 0, d) || !need_vector(n, 3, features(n), "feature", d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* softmax(x) over the last axis, of factor * x */
bool ir_rule_softmax(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_rows(n, 0, 1, d) || !finite_factor(n, d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* softmax_grad(dy, y) */
bool ir_rule_softmax_grad(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_rows(n, 0, 1, d) || !need_float(n, 1, -1, d) || !need_same_shape(n, 0, 1, d) ||
	    !finite_factor(n, d))
		return false;
	*out = *in(n, 0);
	return true;
}

/* token_mean(x [N,T,D]): [N,D] */
bool ir_rule_token_mean(const ir_node *n, ir_type *out, ir_diags *d)
{
	if (!need_float(n, 0, 3, d))
		return false;
	if (in(n, 0)->dim[1] < 1)
		return fail(n, d, "there must be at least one token");
	int64_t dims[2] = {in(n, 0)->dim[0], in(n, 0)->dim[2]};
	*out = ir_type_make(in(n, 0)->dtype, 2, dims);
	return true;
}

/* token_mean_grad(dy [N,D]): the result [N,T,D] is declared. */
bool ir_rule_token_mean_grad(const ir_node *n, ir_type *out, ir_diags *d)
{
	const ir_type *dy = in(n, 0);
	if (!need_float(n, 0, 2, d) || !need_declared(n, out, 3, d))
		return false;
	if (out->dim[0] != dy->dim[0] || out->dim[2] != dy->dim[1] || out->dim[1] < 1)
		return fail(n, d, "result must be [%lld,T,%lld]", (long long)dy->dim[0],
			(long long)dy->dim[1]);
	out->dtype = dy->dtype;
	return true;
}
