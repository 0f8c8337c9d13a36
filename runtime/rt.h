/* rt.h: the public interface of revc's runtime: files, and (as it grows)
 * tensors, kernels, the executor, data loaders and .npy I/O.
 *
 * Runtime functions report user errors (a missing file, a short read) by
 * returning false with a message in an rt_err; they never exit. */
#ifndef REVC_RT_H
#define REVC_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir.h"

typedef struct {
	char msg[512];
} rt_err;

bool rt_errorf(rt_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- files (runtime/file.c) ------------------------------------------- */

/* Reads a whole regular file (at most max bytes) into a malloc'd buffer with
 * a NUL after the data. */
bool rt_file_read(const char *path, size_t max, char **data, size_t *len, rt_err *e);

/* A file written under a temporary name in the same directory, made durable
 * and renamed into place on commit, so readers never see half of it. */
typedef struct {
	FILE *f;
	char *path, *tmp;
} rt_atomic;

bool rt_atomic_open(rt_atomic *a, const char *path, rt_err *e);
bool rt_atomic_commit(rt_atomic *a, rt_err *e);
void rt_atomic_abort(rt_atomic *a);
/* Writes len bytes to path atomically. */
bool rt_file_write_atomic(const char *path, const void *data, size_t len, rt_err *e);

/* ---- BLAS (runtime/blas.c) -------------------------------------------- */

/* "OpenBLAS 0.3.21". */
const char *rt_blas_version(void);

#endif
