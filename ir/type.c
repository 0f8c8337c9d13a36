/* type.c: dtypes and tensor types (dtype + static shape). */
#include <string.h>

#include "ir.h"

static const struct {
	const char *name;
	int size;
	bool is_float;
} dtypes[] = {
	[IR_F32] = {"f32", 4, true},
	[IR_F64] = {"f64", 8, true},
	[IR_I32] = {"i32", 4, false},
};
_Static_assert(sizeof dtypes / sizeof dtypes[0] == IR_DTYPE_COUNT, "dtype table");

const char *ir_dtype_name(ir_dtype t) { return dtypes[t].name; }
int ir_dtype_size(ir_dtype t) { return dtypes[t].size; }
bool ir_dtype_is_float(ir_dtype t) { return dtypes[t].is_float; }

bool ir_dtype_parse(const char *s, size_t n, ir_dtype *out)
{
	for (int i = 0; i < IR_DTYPE_COUNT; i++) {
		if (strlen(dtypes[i].name) == n && memcmp(dtypes[i].name, s, n) == 0) {
			*out = (ir_dtype)i;
			return true;
		}
	}
	return false;
}

ir_type ir_type_make(ir_dtype dt, int rank, const int64_t *dims)
{
	IR_ASSERT(rank >= 0 && rank <= IR_MAX_RANK);
	ir_type t = {.dtype = dt, .rank = rank};
	for (int i = 0; i < rank; i++)
		t.dim[i] = dims[i];
	return t;
}

ir_type ir_type_scalar(ir_dtype dt)
{
	return ir_type_make(dt, 0, NULL);
}

bool ir_type_same_shape(const ir_type *a, const ir_type *b)
{
	if (a->rank != b->rank)
		return false;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != b->dim[i])
			return false;
	return true;
}

bool ir_type_eq(const ir_type *a, const ir_type *b)
{
	return a->dtype == b->dtype && ir_type_same_shape(a, b);
}

bool ir_type_size_ok(const ir_type *t)
{
	int64_t n = ir_dtype_size(t->dtype);
	for (int i = 0; i < t->rank; i++)
		if (t->dim[i] < 0 || !ir_size_mul(n, t->dim[i], &n) || n > IR_MAX_BYTES)
			return false;
	return true;
}

int64_t ir_type_elems(const ir_type *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->rank; i++)
		if (!ir_size_mul(n, t->dim[i], &n))
			IR_DIE("element count of a verified type overflows");
	return n;
}

int64_t ir_type_bytes(const ir_type *t)
{
	int64_t n;
	if (!ir_size_mul(ir_type_elems(t), ir_dtype_size(t->dtype), &n))
		IR_DIE("byte size of a verified type overflows");
	return n;
}

int ir_type_str(const ir_type *t, char *buf, size_t n)
{
	int len = snprintf(buf, n, "%s[", ir_dtype_name(t->dtype));
	for (int i = 0; i < t->rank; i++) {
		size_t at = (size_t)len < n ? (size_t)len : n;
		len += snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)t->dim[i]);
	}
	size_t at = (size_t)len < n ? (size_t)len : n;
	len += snprintf(buf + at, n - at, "]");
	return len;
}
