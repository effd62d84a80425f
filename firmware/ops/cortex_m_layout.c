/* Adapters for cortex_m::pad and cortex_m::transpose. */
#include "cortex_m_util.h"

/* Argument slots (the operators' schemas, out last). */
enum { PAD_IN, PAD_PRE, PAD_POST, PAD_VALUE, PAD_OUT };
enum { TRANSPOSE_IN, TRANSPOSE_PERM, TRANSPOSE_OUT };

/* pad.out(input, pre_pad, post_pad, pad_value, out). The AoT pass gives the
 * 4 pads in physical order: NHWC for a channels-last 4-D tensor (its
 * is_channels_last also counts C == 1 or H == W == 1 tensors, whose bytes are
 * the same in both layouts), else logical order with rank < 4 tensors
 * right-aligned. */
ET_PREPARE et_status op_cortex_m_pad_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::pad";
  et_tensor *in, *out;
  int32_t pre[4], post[4], value;
  uint32_t n1 = 0, n2 = 0;
  CM_TRY(cm_nargs(ctx, op, nargs, PAD_OUT));
  CM_TRY(cm_tensor(ctx, op, args, PAD_IN, "input", false, &in));
  CM_TRY(cm_tensor(ctx, op, args, PAD_OUT, "out", false, &out));
  CM_TRY(cm_int_list(ctx, op, args, PAD_PRE, "pre_pad", 4, 0, 1 << 20, pre, &n1));
  CM_TRY(cm_int_list(ctx, op, args, PAD_POST, "post_pad", 4, 0, 1 << 20, post, &n2));
  if (n1 != 4 || n2 != 4)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: pre_pad and post_pad need 4 entries, got %u and %u", op, (unsigned)n1,
                   (unsigned)n2);
  if (in->dim < 1 || in->dim > 4)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input rank %u not supported (1..4)", op, (unsigned)in->dim);
  if (out->dim != in->dim || out->dtype != in->dtype)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out must have the input's rank and dtype", op);
  int64_t lo, hi;
  switch (in->dtype) {
    case ET_DT_CHAR: lo = -128, hi = 127; break;
    case ET_DT_BYTE: lo = 0, hi = 255; break;
    case ET_DT_SHORT: lo = -32768, hi = 32767; break;
    case ET_DT_INT: lo = INT32_MIN, hi = INT32_MAX; break;
    default:
      return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: dtype %s not supported (int8, uint8, int16, int32)", op,
                     et_dtype_name(in->dtype));
  }
  CM_TRY(cm_int(ctx, op, args, PAD_VALUE, "pad_value", lo, hi, &value));
  int32_t phys[4] = {1, 1, 1, 1};
  uint8_t order[4];
  const int off = 4 - in->dim;
  if (in->dim == 4 && cm_layout_is(in, cm_nhwc_order)) {
    phys[0] = in->sizes[0], phys[1] = in->sizes[2], phys[2] = in->sizes[3], phys[3] = in->sizes[1];
    memcpy(order, cm_nhwc_order, 4);
  } else if (cm_layout_is(in, cm_contig_order)) {
    for (int d = 0; d < in->dim; d++) phys[off + d] = in->sizes[d], order[d] = (uint8_t)d;
  } else {
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input must be contiguous or channels-last", op);
  }
  for (int d = 0; d < off; d++)
    if (pre[d] || post[d])
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: pad on dim %d beyond the input's rank %u", op, d, (unsigned)in->dim);
  /* out must be the padded shape in the same physical order */
  for (int j = 0; j < in->dim; j++) {
    const int ld = order[j];
    if (out->sizes[ld] != phys[off + j] + pre[off + j] + post[off + j])
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: out size %d at dim %d, padding gives %d", op, (int)out->sizes[ld], ld,
                     (int)(phys[off + j] + pre[off + j] + post[off + j]));
  }
  if (!cm_layout_is(out, order))
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: out must keep the input's memory layout", op);
  return ET_OK;
}

et_status op_cortex_m_pad_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const in = args[PAD_IN]->u.t;
  et_tensor *const out = args[PAD_OUT]->u.t;
  if (et_tensor_numel(out) == 0) return ET_OK;
  int32_t pre[4], post[4], phys[4] = {1, 1, 1, 1};
  for (uint32_t k = 0; k < 4; k++) pre[k] = (int32_t)et_list_int(args[PAD_PRE], k), post[k] = (int32_t)et_list_int(args[PAD_POST], k);
  const int32_t value = cm_i(args, PAD_VALUE);
  const size_t es = et_dtype_size(in->dtype);
  const int off = 4 - in->dim;
  if (in->dim == 4 && cm_layout_is(in, cm_nhwc_order))
    phys[0] = in->sizes[0], phys[1] = in->sizes[2], phys[2] = in->sizes[3], phys[3] = in->sizes[1];
  else
    for (int d = 0; d < in->dim; d++) phys[off + d] = in->sizes[d];
  if (et_tensor_numel(in) == 0) {
    /* nothing to copy: the output is all padding */
    for (size_t i = 0; i < et_tensor_numel(out); i++) memcpy((uint8_t *)out->data + i * es, &value, es);
    return ET_OK;
  }
  const int8_t v8 = (int8_t)value;
  const int16_t v16 = (int16_t)value;
  const void *vp = es == 1 ? (const void *)&v8 : es == 2 ? (const void *)&v16 : (const void *)&value;
  emk_pad_any(es, phys, pre, post, in->data, vp, out->data);
  return ET_OK;
}

/* transpose.out(input, perm, out): out = input.permute(perm), any dim orders. */
ET_PREPARE et_status op_cortex_m_transpose_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::transpose";
  et_tensor *in, *out;
  int32_t perm[ET_MAX_DIM];
  uint32_t np = 0;
  CM_TRY(cm_nargs(ctx, op, nargs, TRANSPOSE_OUT));
  CM_TRY(cm_tensor(ctx, op, args, TRANSPOSE_IN, "input", false, &in));
  CM_TRY(cm_tensor(ctx, op, args, TRANSPOSE_OUT, "out", false, &out));
  CM_TRY(cm_int_list(ctx, op, args, TRANSPOSE_PERM, "perm", ET_MAX_DIM, -ET_MAX_DIM, ET_MAX_DIM - 1, perm, &np));
  if (np != in->dim || out->dim != in->dim || out->dtype != in->dtype)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: perm, input and out must have the same rank and dtype", op);
  const size_t es = et_dtype_size(in->dtype);
  if (es == 0) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: dtype %s not supported", op, et_dtype_name(in->dtype));
  unsigned seen = 0;
  for (uint32_t d = 0; d < np; d++) {
    if (perm[d] < 0) perm[d] += (int32_t)np;
    if (perm[d] < 0 || perm[d] >= (int32_t)np || (seen >> perm[d]) & 1u)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: perm is not a permutation of 0..%u", op, (unsigned)(np - 1));
    seen |= 1u << perm[d];
    if (out->sizes[d] != in->sizes[perm[d]])
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: out size %d at dim %u, expected %d", op, (int)out->sizes[d],
                     (unsigned)d, (int)in->sizes[perm[d]]);
  }
  return ET_OK;
}

et_status op_cortex_m_transpose_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const in = args[TRANSPOSE_IN]->u.t;
  et_tensor *const out = args[TRANSPOSE_OUT]->u.t;
  if (et_tensor_numel(out) == 0) return ET_OK;
  const uint32_t np = in->dim;
  int32_t perm[ET_MAX_DIM], istr[ET_MAX_DIM], shape[K_MAX_DIM], str[K_MAX_DIM];
  for (uint32_t d = 0; d < np; d++) {
    perm[d] = (int32_t)et_list_int(args[TRANSPOSE_PERM], d);
    if (perm[d] < 0) perm[d] += (int32_t)np;
  }
  cm_logical_strides(in, istr);
  for (uint32_t j = 0; j < np; j++) {
    const int od = out->dim_order[j];
    shape[j] = out->sizes[od];
    str[j] = istr[perm[od]];
  }
  emk_transpose_any(et_dtype_size(in->dtype), (int)np, shape, str, in->data, out->data);
  return ET_OK;
}
