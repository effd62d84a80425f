/* Dim-order aware tensor helpers shared by the runtime and the aten ops. */
#include "runtime.h"

void et_tensor_strides(const et_tensor *t, size_t strides[ET_MAX_DIM]) {
  size_t s = 1;
  for (int k = (int)t->dim - 1; k >= 0; k--) {
    strides[t->dim_order[k]] = s;
    s *= (size_t)t->sizes[t->dim_order[k]];
  }
}

bool et_dim_order_is_identity(const et_tensor *t) {
  for (uint8_t d = 0; d < t->dim; d++)
    if (t->dim_order[d] != d) return false;
  return true;
}

/* Same memory layout: equal orders, or orders that differ only in size-1 dims
 * (which do not move data). */
bool et_same_dim_order(const et_tensor *a, const et_tensor *b) {
  if (a->dim != b->dim) return false;
  uint8_t ka = 0, kb = 0;
  for (;;) {
    while (ka < a->dim && a->sizes[a->dim_order[ka]] == 1) ka++;
    while (kb < b->dim && b->sizes[b->dim_order[kb]] == 1) kb++;
    if (ka == a->dim || kb == b->dim) return ka == a->dim && kb == b->dim;
    if (a->dim_order[ka] != b->dim_order[kb]) return false;
    ka++, kb++;
  }
}

et_status et_copy_tensor(et_kernel_ctx *ctx, et_tensor *dst, const et_tensor *src) {
  if (dst->dtype != src->dtype)
    return et_fail(ctx, ET_E_INVALID_ARG, "dtype %s given, %s expected", et_dtype_name(src->dtype), et_dtype_name(dst->dtype));
  if (dst->dim != src->dim)
    return et_fail(ctx, ET_E_INVALID_ARG, "rank %u given, %u expected", src->dim, dst->dim);
  for (uint8_t d = 0; d < dst->dim; d++)
    if (dst->sizes[d] != src->sizes[d])
      return et_fail(ctx, ET_E_INVALID_ARG, "size %d given for dim %u, %d expected", (int)src->sizes[d], d, (int)dst->sizes[d]);
  if (dst->nbytes != src->nbytes) return et_fail(ctx, ET_E_INVALID_ARG, "byte sizes differ");
  if (dst->data == src->data) return ET_OK;
  if (et_same_dim_order(dst, src)) {
    memmove(dst->data, src->data, dst->nbytes);
    return ET_OK;
  }
  size_t es = et_dtype_size(dst->dtype), n = et_tensor_numel(dst);
  size_t ss[ET_MAX_DIM];
  et_tensor_strides(src, ss);
  /* Walk dst in its memory order, keeping a counter per dim. */
  int32_t idx[ET_MAX_DIM] = {0};
  size_t soff = 0;
  uint8_t *o = dst->data;
  const uint8_t *in = src->data;
  for (size_t k = 0; k < n; k++) {
    memcpy(o + k * es, in + soff * es, es);
    for (int j = (int)dst->dim - 1; j >= 0; j--) {
      uint8_t d = dst->dim_order[j];
      if (++idx[d] < dst->sizes[d]) {
        soff += ss[d];
        break;
      }
      soff -= ss[d] * (size_t)(idx[d] - 1);
      idx[d] = 0;
    }
  }
  return ET_OK;
}

double et_elem_as_double(int dtype, const void *data, size_t i) {
  const uint8_t *p = data;
  switch (dtype) {
    case ET_DT_BYTE: return p[i];
    case ET_DT_CHAR: return ((const int8_t *)data)[i];
    case ET_DT_BOOL: return p[i] != 0;
    case ET_DT_SHORT: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case ET_DT_INT: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case ET_DT_LONG: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case ET_DT_FLOAT: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case ET_DT_DOUBLE: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    default: return 0;
  }
}

void et_elem_from_double(int dtype, void *data, size_t i, double v) {
  uint8_t *p = data;
  switch (dtype) {
    case ET_DT_BYTE: p[i] = (uint8_t)v; break;
    case ET_DT_CHAR: ((int8_t *)data)[i] = (int8_t)v; break;
    case ET_DT_BOOL: p[i] = v != 0; break;
    case ET_DT_SHORT: { int16_t x = (int16_t)v; memcpy(p + 2 * i, &x, 2); break; }
    case ET_DT_INT: { int32_t x = (int32_t)v; memcpy(p + 4 * i, &x, 4); break; }
    case ET_DT_LONG: { int64_t x = (int64_t)v; memcpy(p + 8 * i, &x, 8); break; }
    case ET_DT_FLOAT: { float x = (float)v; memcpy(p + 4 * i, &x, 4); break; }
    case ET_DT_DOUBLE: memcpy(p + 8 * i, &v, 8); break;
    default: break;
  }
}
