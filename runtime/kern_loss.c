/* kern_loss.c: the reference kernels of softmax_xent (the mean softmax
 * cross-entropy) and softmax_xent_grad (its gradient with respect to the
 * logits).
 *
 * Logits [N,K] in the real type, labels i32[N].  Each row is shifted by its
 * maximum before exponentiating, so no exp overflows, and everything is
 * accumulated in double.  A label outside 0..K−1 is the data's fault: the
 * kernel returns false with a message before writing anything.
 *
 * Compiled once per real type (kernels.h).  Preconditions: the node
 * verified.  The result never overlaps an operand. */
#include <math.h>

#include "kernels.h"

/* The row's maximum and log Σ exp(row − max).  A NaN in the row is its
 * maximum, so NaN propagates to both (as it would through the sum). */
static void row_lse(const real *row, int64_t k, double *max, double *lse)
{
	double m = (double)row[0], s = 0;
	for (int64_t j = 1; j < k; j++)
		if ((double)row[j] > m || isnan(row[j]))
			m = (double)row[j];
	for (int64_t j = 0; j < k; j++)
		s += exp((double)row[j] - m);
	*max = m;
	*lse = log(s);
}

/* softmax_xent(logits, labels) = mean over n of logsumexp(row) − row[label] */
bool K(rt_k_softmax_xent)(const rt_kargs *a, rt_err *e)
{
	const ir_type *lt = &a->n->in[0]->type;
	int64_t n = lt->dim[0], k = lt->dim[1];
	const real *x = a->in[0];
	const int32_t *labels = a->in[1];
	real *out = a->out;
	if (!rt_check_labels(labels, n, k, e))
		return false;
	double total = 0;
	for (int64_t i = 0; i < n; i++) {
		double m, lse;
		row_lse(x + i * k, k, &m, &lse);
		/* The max minus the label's logit is exact or nearly; adding lse
		 * last keeps its digits when the logits are large. */
		total += (m - (double)x[i * k + labels[i]]) + lse;
	}
	*out = (real)(n > 0 ? total / (double)n : 0);
	return true;
}

/* softmax_xent_grad(logits, labels) = (softmax(row) − onehot(label)) / N */
bool K(rt_k_softmax_xent_grad)(const rt_kargs *a, rt_err *e)
{
	const ir_type *lt = &a->n->in[0]->type;
	int64_t n = lt->dim[0], k = lt->dim[1];
	const real *x = a->in[0];
	const int32_t *labels = a->in[1];
	real *dx = a->out;
	if (!rt_check_labels(labels, n, k, e))
		return false;
	for (int64_t i = 0; i < n; i++) {
		double m, lse;
		row_lse(x + i * k, k, &m, &lse);
		for (int64_t j = 0; j < k; j++) {
			double p = exp((double)x[i * k + j] - m - lse) - (j == labels[i]);
			dx[i * k + j] = (real)(p / (double)n);
		}
	}
	return true;
}
