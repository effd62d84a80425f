/* aten::select_copy.int_out: out = self[..., index, ...] along one dim (the
 * slice a model writes as qkv[0]). Pure data movement on any dtype and dim
 * order: the output is walked in its logical order through the input's
 * strides with that dim removed, by aten_copy_iters (whole rows where both
 * sides are contiguous). */
#include "aten_util.h"

/* Argument slots (the operator's schema, out last). */
enum { SELECT_SELF, SELECT_DIM, SELECT_INDEX, SELECT_OUT };

ET_PREPARE et_status aten_select_copy_int_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::select_copy.int_out";
  aten_self_ints a;
  const et_status st = aten_self_ints_out(ctx, op, args, nargs, &a);
  if (st) return st;
  const et_tensor *self = a.self, *out = a.out;
  int64_t dim = a.x, index = a.y;
  if (self->dim < 1 || out->dim != self->dim - 1) return et_fail(ctx, ET_E_INVALID_ARG, "%s: output rank must be input rank - 1", op);
  if (dim < 0) dim += self->dim;
  if (dim < 0 || dim >= self->dim) return et_fail(ctx, ET_E_INVALID_ARG, "%s: dim out of range", op);
  const int64_t size = self->sizes[dim];
  if (index < -size || index >= size) return et_fail(ctx, ET_E_INVALID_ARG, "%s: index %ld out of range for size %ld", op, (long)index, (long)size);
  for (uint8_t i = 0, j = 0; i < self->dim; i++) {
    if (i == dim) continue;
    if (out->sizes[j++] != self->sizes[i]) return et_fail(ctx, ET_E_INVALID_ARG, "%s: output shape does not match", op);
  }
  return ET_OK;
}

et_status aten_select_copy_int_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *const self = args[SELECT_SELF]->u.t;
  et_tensor *const out = args[SELECT_OUT]->u.t;
  int64_t dim = args[SELECT_DIM]->u.i, index = args[SELECT_INDEX]->u.i;
  if (dim < 0) dim += self->dim;
  if (index < 0) index += self->sizes[dim];
  size_t ss[ET_MAX_DIM], src[ET_MAX_DIM], os[ET_MAX_DIM];
  et_tensor_strides(self, ss);
  et_tensor_strides(out, os);
  for (uint8_t i = 0, j = 0; i < self->dim; i++)
    if (i != dim) src[j++] = ss[i];
  const size_t es = et_dtype_size(out->dtype);
  const size_t base = (size_t)index * ss[dim];
  const size_t n = et_tensor_numel(out);
  if (out->dim == 0) {
    memcpy(out->data, (const uint8_t *)self->data + base * es, es);
    return ET_OK;
  }
  /* rows where both sides are contiguous, a transposing walk otherwise (a channels-last input) */
  et_iter di, si;
  et_iter_custom(&di, out->dim, out->sizes, os, 0);
  et_iter_custom(&si, out->dim, out->sizes, src, base);
  aten_copy_iters(out->data, &di, self->data, &si, n, es);
  return ET_OK;
}
