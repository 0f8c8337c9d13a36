/* kernel_net.h: the test harness of the kernel suites: small graphs built
 * with the IR builder and run kernel by kernel by a tiny interpreter that
 * keeps every value as doubles and converts at each kernel call, so one
 * graph runs in either dtype; references and finite differences. */
#ifndef REVC_KERNEL_NET_H
#define REVC_KERNEL_NET_H

#include <check.h>
#include <math.h>

#include "kernels.h"

#define NET_MAX 32

/* A graph of one dtype and the value of each node by id: double[] for
 * float values, int32_t[] for labels. */
typedef struct {
	ir_graph *g;
	ir_dtype dt;
	bool round; /* round inputs to float (f32 nets, and f64 nets compared to them) */
	void *val[NET_MAX];
} net;

#define FD_H 1e-6
/* The error of a coordinate is relative to its gradient, but at least to
 * FD_FLOOR: the tests' gradients are O(0.1..10), and a coordinate near 0 can
 * only be compared absolutely, central differences carrying ~1e-10 of
 * rounding noise. */
#define FD_FLOOR 1e-2

double uniform(double lo, double hi);
int64_t elems(const ir_node *n);
double worse(double err, double e);
double rel_err(const double *got, const double *want, int64_t n);
void report(const char *what, double err, double tol);
void check_close(const char *what, const double *got, const double *want, int64_t n,
	double tol);
void net_init(net *t, ir_dtype dt);
void net_free(net *t);
double *dval(net *t, const ir_node *n);
ir_node *leaf(net *t, ir_dtype dt, int rank, const int64_t *dims);
ir_node *input(net *t, int rank, const int64_t *dims, double lo, double hi);
ir_node *op(net *t, ir_op o, int nin, ...);
ir_node *fin(ir_node *n);
ir_node *declare(ir_node *n, const ir_node *like);
void set_window(net *t, ir_node *n, int64_t s, const int64_t pad[4]);
double *run(const ir_node *n, void *const *vals);
void net_eval(net *t, int last);
void fd_check(net *t, ir_node *x, ir_node *y, ir_node *dy, ir_node *grad, double tol,
	const char *what);

void call(const ir_node *n, void *out, const void *in0, const void *in1, const void *in2);
/* The same with all of n's operands, in[0 .. n->nin-1]. */
void call_n(const ir_node *n, void *out, const void *const *in);
void *as(ir_dtype dt, const double *v, int n, void *buf);
void check_buf(const char *what, ir_dtype dt, const void *got, const double *want, int n);

extern uint64_t rng; /* state of uniform(); tests reseed it */

#endif
