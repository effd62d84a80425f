/* Helpers shared by the portable aten:: adapters: argument unpacking with
 * clear errors, and a logical-order iterator that knows each tensor's dim
 * order (so NCHW and channels-last data are handled the same way). */
#ifndef ATEN_UTIL_H
#define ATEN_UTIL_H

#include <math.h>

#include "op_entry.h"
#include "runtime.h"

/* Walks logical indices in row-major order and tracks a memory offset (in
 * elements) through arbitrary per-dim strides. */
typedef struct {
  uint8_t dim;
  int32_t sizes[ET_MAX_DIM];
  size_t stride[ET_MAX_DIM];
  int32_t idx[ET_MAX_DIM];
  size_t off;
} et_iter;

static inline void et_iter_custom(et_iter *it, uint8_t dim, const int32_t *sizes, const size_t *stride, size_t base) {
  memset(it, 0, sizeof *it);
  it->dim = dim;
  for (uint8_t d = 0; d < dim; d++) it->sizes[d] = sizes[d], it->stride[d] = stride[d];
  it->off = base;
}
/* Copy n elements of es bytes, walked by two iterators over the same logical sizes, by whole rows where
 * both sides are contiguous (aten_copy.c). */
void aten_copy_iters(uint8_t *o, et_iter *di, const uint8_t *in, et_iter *si, size_t n, size_t es);
static inline void et_iter_init(et_iter *it, const et_tensor *t) {
  size_t s[ET_MAX_DIM];
  et_tensor_strides(t, s);
  et_iter_custom(it, t->dim, t->sizes, s, 0);
}
static inline void et_iter_next(et_iter *it) {
  for (int d = (int)it->dim - 1; d >= 0; d--) {
    if (++it->idx[d] < it->sizes[d]) {
      it->off += it->stride[d];
      return;
    }
    it->off -= it->stride[d] * (size_t)(it->sizes[d] - 1);
    it->idx[d] = 0;
  }
}

/* The out slot of an (..., out, ret) argument list of `nargs` entries, counted from the end: for adapters that
 * serve overloads of different arities. */
#define ATEN_OUT_SLOT(nargs) ((uint32_t)(nargs) - 2u)

/* Argument access: return ET_OK or fail with the op's name in the message. */
static inline et_status aten_nargs(et_kernel_ctx *ctx, const char *op, uint32_t nargs, uint32_t want) {
  if (nargs != want) return et_fail(ctx, ET_E_INVALID_ARG, "%s: got %u arguments, expected %u", op, (unsigned)nargs, (unsigned)want);
  return ET_OK;
}
static inline et_status aten_tensor(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, et_tensor **t) {
  *t = NULL;
  if (args[i]->tag != ET_TAG_TENSOR) return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u is not a tensor", op, (unsigned)i);
  *t = args[i]->u.t;
  return ET_OK;
}
static inline et_status aten_int(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, int64_t *v) {
  if (v) *v = 0; /* v NULL: only the kind is checked */
  if (args[i]->tag != ET_TAG_INT) return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u is not an int", op, (unsigned)i);
  if (v) *v = args[i]->u.i;
  return ET_OK;
}
/* The (self, ..., out) head most prepare functions start with: the argument
 * count, then self (argument 0) and out (argument iout) as tensors. */
static inline et_status aten_self_out(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs, uint32_t want,
                                      uint32_t iout, et_tensor **self, et_tensor **out) {
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, want)) || (st = aten_tensor(ctx, op, args, 0, self))) return st;
  return aten_tensor(ctx, op, args, iout, out);
}
/* (self, int, int, out) ops, out of self's dtype: select_copy (dim, index) and
 * emlkit::upsample_nearest2d (factors). Arguments are checked in schema order. */
typedef struct {
  et_tensor *self, *out;
  int64_t x, y; /* the two ints, in schema order */
} aten_self_ints;
static inline et_status aten_self_ints_out(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs,
                                           aten_self_ints *a) {
  et_status st;
  memset(a, 0, sizeof *a);
  if ((st = aten_nargs(ctx, op, nargs, 5)) || (st = aten_tensor(ctx, op, args, 0, &a->self)) ||
      (st = aten_int(ctx, op, args, 1, &a->x)) || (st = aten_int(ctx, op, args, 2, &a->y)) ||
      (st = aten_tensor(ctx, op, args, 3, &a->out)))
    return st;
  if (a->self->dtype != a->out->dtype)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dtype %s in, %s out", op, et_dtype_name(a->self->dtype),
                   et_dtype_name(a->out->dtype));
  return ET_OK;
}
/* Scalar (int, double or bool) as double; *present=false for None when allowed. */
static inline et_status aten_scalar(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, double *v, bool *present) {
  const et_value *a = args[i];
  if (present) *present = true;
  switch (a->tag) {
    case ET_TAG_INT: *v = (double)a->u.i; return ET_OK;
    case ET_TAG_DOUBLE: *v = a->u.d; return ET_OK;
    case ET_TAG_BOOL: *v = a->u.b; return ET_OK;
    case ET_TAG_NONE:
      if (present) {
        *present = false;
        return ET_OK;
      }
      break;
    default: break;
  }
  return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u is not a scalar", op, (unsigned)i);
}
/* Unchecked forms for the eval functions (prepare checked the kinds). */
static inline double aten_scalar_get(const et_value *a, bool *present) {
  if (present) *present = a->tag != ET_TAG_NONE;
  switch (a->tag) {
    case ET_TAG_INT: return (double)a->u.i;
    case ET_TAG_DOUBLE: return a->u.d;
    case ET_TAG_BOOL: return a->u.b;
    default: return 0;
  }
}
/* A checked dim normalised into [0, rank). */
static inline uint8_t aten_dim_get(int64_t d, uint8_t rank) {
  return (uint8_t)(d < 0 ? d + (rank == 0 ? 1 : rank) : d);
}
/* A dim argument normalised into [0, rank). */
static inline et_status aten_dim(et_kernel_ctx *ctx, const char *op, int64_t d, uint8_t rank, uint8_t *out) {
  int64_t r = rank == 0 ? 1 : rank;
  if (d < -r || d >= r) return et_fail(ctx, ET_E_INVALID_ARG, "%s: dim %lld out of range for rank %u", op, (long long)d, rank);
  *out = (uint8_t)(d < 0 ? d + r : d);
  return ET_OK;
}
/* Argument i, an int, as a dim of a tensor of `rank`, normalised into [0, rank). */
static inline et_status aten_dim_arg(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, uint8_t rank, uint8_t *dim) {
  int64_t d64 = 0;
  et_status st = aten_int(ctx, op, args, i, &d64);
  return st ? st : aten_dim(ctx, op, d64, rank, dim);
}
/* The (self, ..., dim, ..., out) head: aten_self_out, then argument idim as a dim of self, normalised into [0, rank). */
static inline et_status aten_self_dim_out(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs, uint32_t want,
                                          uint32_t idim, uint32_t iout, et_tensor **self, et_tensor **out, uint8_t *dim) {
  et_status st;
  *dim = 0;
  if ((st = aten_self_out(ctx, op, args, nargs, want, iout, self, out))) return st;
  return aten_dim_arg(ctx, op, args, idim, (*self)->dim, dim);
}
static inline bool aten_same_shape(const et_tensor *a, const et_tensor *b) {
  if (a->dim != b->dim) return false;
  for (uint8_t d = 0; d < a->dim; d++)
    if (a->sizes[d] != b->sizes[d]) return false;
  return true;
}
/* Saturating store of a double into any supported dtype (no UB on overflow). */
static inline void aten_store(int dtype, void *data, size_t i, double v) {
  double lo = 0, hi = 0;
  switch (dtype) {
    case ET_DT_BYTE: lo = 0, hi = 255; break;
    case ET_DT_CHAR: lo = -128, hi = 127; break;
    case ET_DT_SHORT: lo = -32768, hi = 32767; break;
    case ET_DT_INT: lo = -2147483648.0, hi = 2147483647.0; break;
    case ET_DT_LONG: lo = -9223372036854775808.0, hi = 9223372036854774784.0; break;
    default: et_elem_from_double(dtype, data, i, v); return;
  }
  if (isnan(v)) v = 0;
  v = v < lo ? lo : v > hi ? hi : v;
  et_elem_from_double(dtype, data, i, v);
}

/* Strides of `t` seen from `out`'s logical dims: dims aligned right,
 * broadcast dims get stride 0 (PyTorch broadcasting). Prepare checks the
 * shapes with it; eval calls it again only to compute the strides. */
static inline et_status aten_bcast_strides(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const et_tensor *out,
                                           size_t *st) {
  size_t ts[ET_MAX_DIM];
  if (t->dim > out->dim) return et_fail(ctx, ET_E_INVALID_ARG, "%s: input rank %u exceeds output rank %u", op, t->dim, out->dim);
  et_tensor_strides(t, ts);
  uint8_t lead = out->dim - t->dim;
  for (uint8_t d = 0; d < out->dim; d++) {
    if (d < lead) {
      st[d] = 0;
      continue;
    }
    int32_t s = t->sizes[d - lead];
    if (s == out->sizes[d]) st[d] = s == 1 ? 0 : ts[d - lead];
    else if (s == 1) st[d] = 0;
    else return et_fail(ctx, ET_E_INVALID_ARG, "%s: shapes are not broadcastable to the output", op);
  }
  return ET_OK;
}

static inline bool aten_is_int_dt(int dt) {
  return dt == ET_DT_BYTE || dt == ET_DT_CHAR || dt == ET_DT_SHORT || dt == ET_DT_INT || dt == ET_DT_LONG || dt == ET_DT_BOOL;
}
/* Element i of an integer (or bool) tensor's data, exact for int64. */
static inline int64_t aten_i64(int dt, const void *p, size_t i) {
  const uint8_t *b = p;
  switch (dt) {
    case ET_DT_LONG: { int64_t v; memcpy(&v, b + 8 * i, 8); return v; }
    case ET_DT_INT: { int32_t v; memcpy(&v, b + 4 * i, 4); return v; }
    case ET_DT_SHORT: { int16_t v; memcpy(&v, b + 2 * i, 2); return v; }
    case ET_DT_CHAR: { int8_t v; memcpy(&v, b + i, 1); return v; }
    case ET_DT_BYTE: return b[i];
    case ET_DT_BOOL: return b[i] != 0;
    default: return (int64_t)et_elem_as_double(dt, p, i);
  }
}
/* Store v into an integer (or bool) tensor, wrapping like PyTorch's integer kernels. */
static inline void aten_store_i64(int dt, void *p, size_t i, int64_t v) {
  uint8_t *b = p;
  switch (dt) {
    case ET_DT_BYTE: b[i] = (uint8_t)v; break;
    case ET_DT_CHAR: { int8_t x = (int8_t)(uint8_t)v; memcpy(b + i, &x, 1); break; }
    case ET_DT_BOOL: b[i] = v != 0; break;
    case ET_DT_SHORT: { int16_t x = (int16_t)(uint16_t)v; memcpy(b + 2 * i, &x, 2); break; }
    case ET_DT_INT: { int32_t x = (int32_t)(uint32_t)v; memcpy(b + 4 * i, &x, 4); break; }
    default: memcpy(b + 8 * i, &v, 8); break;
  }
}

#endif
