/* Float reductions: aten::mean.out over a dim list and aten::_softmax.out.
 * Sums accumulate in double, then round to float once. */
#include "aten_util.h"

/* Argument slots (the operators' schemas, out last). */
enum { MEAN_SELF, MEAN_DIM, MEAN_KEEPDIM, MEAN_DTYPE, MEAN_OUT };
enum { SOFTMAX_SELF, SOFTMAX_DIM, SOFTMAX_HALF_TO_FLOAT, SOFTMAX_OUT };

ET_PREPARE et_status aten_mean_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::mean";
  et_tensor *a = NULL, *out = NULL;
  et_status st;
  if ((st = aten_self_out(ctx, op, args, nargs, 6, MEAN_OUT, &a, &out))) return st;
  if (a->dtype != ET_DT_FLOAT || out->dtype != ET_DT_FLOAT)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: only float32 is supported (got %s -> %s)", op, et_dtype_name(a->dtype),
                   et_dtype_name(out->dtype));
  if (args[MEAN_KEEPDIM]->tag != ET_TAG_BOOL) return et_fail(ctx, ET_E_INVALID_ARG, "%s: keepdim is not a bool", op);
  bool keep = args[MEAN_KEEPDIM]->u.b;
  unsigned mask = 0;
  if (args[MEAN_DIM]->tag == ET_TAG_INT_LIST && args[MEAN_DIM]->u.list.len > 0) {
    for (uint32_t i = 0; i < args[MEAN_DIM]->u.list.len; i++) {
      uint8_t d = 0;
      if ((st = aten_dim(ctx, op, et_list_int(args[MEAN_DIM], i), a->dim, &d))) return st;
      mask |= 1u << d;
    }
  } else if (args[MEAN_DIM]->tag == ET_TAG_NONE || args[MEAN_DIM]->tag == ET_TAG_INT_LIST) {
    mask = (1u << a->dim) - 1u;
  } else {
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dim is not an int list", op);
  }
  /* Output shape check. */
  uint8_t od = 0;
  uint8_t want_dim = keep ? a->dim : (uint8_t)(a->dim - __builtin_popcount(mask));
  if (out->dim != want_dim) return et_fail(ctx, ET_E_INVALID_ARG, "%s: output rank does not match keepdim", op);
  for (uint8_t d = 0; d < a->dim; d++) {
    if ((mask >> d) & 1u) {
      if (keep && out->sizes[od++] != 1) return et_fail(ctx, ET_E_INVALID_ARG, "%s: reduced dim is not 1 in the output", op);
    } else {
      if (out->sizes[od++] != a->sizes[d]) return et_fail(ctx, ET_E_INVALID_ARG, "%s: output shape mismatch", op);
    }
  }
  return ET_OK;
}

et_status aten_mean_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[MEAN_SELF]->u.t;
  et_tensor *const out = args[MEAN_OUT]->u.t;
  const bool keep = args[MEAN_KEEPDIM]->u.b;
  unsigned mask = 0;
  if (args[MEAN_DIM]->tag == ET_TAG_INT_LIST && args[MEAN_DIM]->u.list.len > 0) {
    for (uint32_t i = 0; i < args[MEAN_DIM]->u.list.len; i++) mask |= 1u << aten_dim_get(et_list_int(args[MEAN_DIM], i), a->dim);
  } else {
    mask = (1u << a->dim) - 1u;
  }
  size_t as[ET_MAX_DIM], os[ET_MAX_DIM];
  et_tensor_strides(a, as);
  et_tensor_strides(out, os);
  int32_t ksz[ET_MAX_DIM], rsz[ET_MAX_DIM];
  size_t kas[ET_MAX_DIM], kos[ET_MAX_DIM], ras[ET_MAX_DIM];
  uint8_t nk = 0, nr = 0, od = 0;
  for (uint8_t d = 0; d < a->dim; d++) {
    if ((mask >> d) & 1u) {
      if (keep) od++;
      rsz[nr] = a->sizes[d], ras[nr++] = as[d];
    } else {
      ksz[nk] = a->sizes[d], kas[nk] = as[d], kos[nk++] = os[od++];
    }
  }
  size_t rn = 1, kn = 1;
  for (uint8_t i = 0; i < nr; i++) rn *= (size_t)rsz[i];
  for (uint8_t i = 0; i < nk; i++) kn *= (size_t)ksz[i];
  et_iter ki, ko, ri;
  et_iter_custom(&ki, nk, ksz, kas, 0);
  et_iter_custom(&ko, nk, ksz, kos, 0);
  const float *pa = a->data;
  float *po = out->data;
  for (size_t k = 0; k < kn; k++) {
    double s = 0;
    et_iter_custom(&ri, nr, rsz, ras, ki.off);
    for (size_t r = 0; r < rn; r++) {
      s += pa[ri.off];
      et_iter_next(&ri);
    }
    po[ko.off] = rn ? (float)(s / (double)rn) : NAN;
    et_iter_next(&ki), et_iter_next(&ko);
  }
  return ET_OK;
}

ET_PREPARE et_status aten_softmax_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::_softmax";
  et_tensor *a = NULL, *out = NULL;
  uint8_t dim = 0;
  et_status st;
  if ((st = aten_self_dim_out(ctx, op, args, nargs, 5, SOFTMAX_DIM, SOFTMAX_OUT, &a, &out, &dim))) return st;
  if (a->dtype != ET_DT_FLOAT || out->dtype != ET_DT_FLOAT)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: only float32 is supported", op);
  if (!aten_same_shape(a, out)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: input and output shapes differ", op);
  return ET_OK;
}

et_status aten_softmax_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[SOFTMAX_SELF]->u.t;
  et_tensor *const out = args[SOFTMAX_OUT]->u.t;
  if (a->dim == 0) {
    *(float *)out->data = 1.0f;
    return ET_OK;
  }
  const uint8_t dim = aten_dim_get(args[SOFTMAX_DIM]->u.i, a->dim);
  size_t as[ET_MAX_DIM], os[ET_MAX_DIM];
  et_tensor_strides(a, as);
  et_tensor_strides(out, os);
  int32_t outer[ET_MAX_DIM];
  memcpy(outer, a->sizes, sizeof outer);
  outer[dim] = 1;
  size_t rows = 1, len = (size_t)a->sizes[dim];
  for (uint8_t d = 0; d < a->dim; d++) rows *= (size_t)outer[d];
  et_iter ia, io;
  et_iter_custom(&ia, a->dim, outer, as, 0);
  et_iter_custom(&io, a->dim, outer, os, 0);
  const float *pa = a->data;
  float *po = out->data;
  for (size_t r = 0; r < rows; r++) {
    float mx = -INFINITY;
    for (size_t i = 0; i < len; i++) {
      float x = pa[ia.off + i * as[dim]];
      if (x > mx || isnan(x)) mx = x;
    }
    double sum = 0;
    for (size_t i = 0; i < len; i++) {
      float e = expf(pa[ia.off + i * as[dim]] - mx);
      po[io.off + i * os[dim]] = e;
      sum += e;
    }
    for (size_t i = 0; i < len; i++) po[io.off + i * os[dim]] = (float)(po[io.off + i * os[dim]] / sum);
    et_iter_next(&ia), et_iter_next(&io);
  }
  return ET_OK;
}
