/* Adapters for cortex_m::quantized_linear and cortex_m::quantized_batch_matmul. */
#include "cortex_m_util.h"

ET_PREPARE et_status op_cortex_m_quantized_linear_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::quantized_linear";
  et_tensor *in, *w, *bias, *ksum, *out;
  qlinear_params p;
  CM_TRY(cm_nargs(ctx, op, nargs, 11));
  CM_TRY(cm_tensor(ctx, op, args, 0, "input", false, &in));
  CM_TRY(cm_tensor(ctx, op, args, 1, "weights", false, &w));
  CM_TRY(cm_tensor(ctx, op, args, 2, "bias", true, &bias));
  CM_TRY(cm_tensor(ctx, op, args, 3, "kernel_sum", true, &ksum));
  CM_TRY(cm_tensor(ctx, op, args, 11, "out", false, &out));
  CM_TRY(cm_int(ctx, op, args, 4, "input_offset", -CM_MAX_OFFSET, CM_MAX_OFFSET, &p.input_offset));
  CM_TRY(cm_int(ctx, op, args, 5, "filter_offset", -CM_MAX_OFFSET, CM_MAX_OFFSET, &p.filter_offset));
  CM_TRY(cm_int(ctx, op, args, 6, "output_offset", -CM_MAX_OFFSET, CM_MAX_OFFSET, &p.output_offset));
  int32_t mults[ET_MAX_DIM], shifts[ET_MAX_DIM];
  uint32_t nm = 0, ns = 0;
  /* the reference requantizes per tensor with entry 0; longer lists would be
   * per-channel, which it does not implement */
  CM_TRY(cm_int_list(ctx, op, args, 7, "requantize_multipliers", 1, 0, INT32_MAX, mults, &nm));
  CM_TRY(cm_int_list(ctx, op, args, 8, "requantize_shifts", 1, -31, 31, shifts, &ns));
  if (nm != 1 || ns != 1)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: needs exactly one requantize multiplier and shift (per-tensor)", op);
  p.mult = mults[0], p.shift = shifts[0];
  CM_TRY(cm_int(ctx, op, args, 9, "activation_max", -128, 127, &p.act_max));
  CM_TRY(cm_int(ctx, op, args, 10, "activation_min", -128, 127, &p.act_min));
  CM_TRY(cm_act(ctx, op, p.act_min, p.act_max));
  CM_TRY(cm_dtype(ctx, op, in, "input", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, w, "weights", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  CM_TRY(cm_rank(ctx, op, w, "weights", 2));
  CM_TRY(cm_contiguous(ctx, op, w, "weights"));
  CM_TRY(cm_contiguous(ctx, op, in, "input"));
  CM_TRY(cm_contiguous(ctx, op, out, "out"));
  if (in->dim < 1 || out->dim != in->dim)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: input and out need the same rank >= 1", op);
  p.k = in->sizes[in->dim - 1];
  p.n = w->sizes[0];
  if (w->sizes[1] != p.k)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: weights are [%d,%d] but the input's last dim is %d", op,
                   (int)w->sizes[0], (int)w->sizes[1], (int)p.k);
  for (uint8_t d = 0; d + 1 < in->dim; d++)
    if (out->sizes[d] != in->sizes[d])
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: out's leading dims differ from the input's", op);
  if (out->sizes[out->dim - 1] != p.n)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out's last dim is %d, weights give %d", op,
                   (int)out->sizes[out->dim - 1], (int)p.n);
  p.rows = p.k ? (int32_t)(et_tensor_numel(in) / (size_t)p.k) : 0;
  CM_TRY(cm_per_channel(ctx, op, bias, "bias", p.n));
  return cm_per_channel(ctx, op, ksum, "kernel_sum", p.n);
}

et_status op_cortex_m_quantized_linear_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  et_tensor *const in = args[0]->u.t, *const w = args[1]->u.t, *const bias = cm_t(args, 2), *const ksum = cm_t(args, 3);
  et_tensor *const out = args[11]->u.t;
  if (et_tensor_numel(out) == 0) return ET_OK;
  qlinear_params p;
  p.input_offset = cm_i(args, 4);
  p.filter_offset = cm_i(args, 5);
  p.output_offset = cm_i(args, 6);
  p.mult = (int32_t)et_list_int(args[7], 0);
  p.shift = (int32_t)et_list_int(args[8], 0);
  p.act_max = cm_i(args, 9);
  p.act_min = cm_i(args, 10);
  p.k = in->sizes[in->dim - 1];
  p.n = w->sizes[0];
  p.rows = p.k ? (int32_t)(et_tensor_numel(in) / (size_t)p.k) : 0;
  qlinear_s8(&p, (const int8_t *)in->data, (const int8_t *)w->data, bias ? (const int32_t *)bias->data : NULL,
             ksum ? (const int32_t *)ksum->data : NULL, (int8_t *)out->data);
  return ET_OK;
}

ET_PREPARE et_status op_cortex_m_quantized_batch_matmul_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::quantized_batch_matmul";
  et_tensor *l, *r, *out;
  qbmm_params p;
  CM_TRY(cm_nargs(ctx, op, nargs, 8));
  CM_TRY(cm_tensor(ctx, op, args, 0, "lhs", false, &l));
  CM_TRY(cm_tensor(ctx, op, args, 2, "rhs_transposed", false, &r));
  CM_TRY(cm_tensor(ctx, op, args, 8, "out", false, &out));
  CM_TRY(cm_int(ctx, op, args, 1, "lhs_zero_point", -CM_MAX_OFFSET, CM_MAX_OFFSET, &p.lhs_offset));
  CM_TRY(cm_int(ctx, op, args, 3, "rhs_zero_point", -CM_MAX_OFFSET, CM_MAX_OFFSET, &p.rhs_offset));
  CM_TRY(cm_int(ctx, op, args, 4, "output_zero_point", -CM_MAX_OFFSET, CM_MAX_OFFSET, &p.out_zp));
  CM_TRY(cm_int(ctx, op, args, 5, "output_multiplier", 0, INT32_MAX, &p.mult));
  CM_TRY(cm_int(ctx, op, args, 6, "output_shift", -31, 31, &p.shift));
  CM_TRY(cm_dtype(ctx, op, l, "lhs", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, r, "rhs_transposed", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  CM_TRY(cm_rank(ctx, op, l, "lhs", 3));
  CM_TRY(cm_rank(ctx, op, r, "rhs_transposed", 3));
  CM_TRY(cm_rank(ctx, op, out, "out", 3));
  CM_TRY(cm_contiguous(ctx, op, l, "lhs"));
  CM_TRY(cm_contiguous(ctx, op, r, "rhs_transposed"));
  CM_TRY(cm_contiguous(ctx, op, out, "out"));
  p.batch = l->sizes[0], p.m = l->sizes[1], p.k = l->sizes[2], p.n = r->sizes[1];
  if (r->sizes[0] != p.batch || r->sizes[2] != p.k || out->sizes[0] != p.batch || out->sizes[1] != p.m ||
      out->sizes[2] != p.n)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: shapes lhs [B,M,K], rhs_transposed [B,N,K], out [B,M,N] do not match", op);
  return ET_OK;
}

et_status op_cortex_m_quantized_batch_matmul_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const l = args[0]->u.t, *const r = args[2]->u.t;
  et_tensor *const out = args[8]->u.t;
  if (et_tensor_numel(out) == 0) return ET_OK;
  qbmm_params p;
  p.lhs_offset = cm_i(args, 1);
  p.rhs_offset = cm_i(args, 3);
  p.out_zp = cm_i(args, 4);
  p.mult = cm_i(args, 5);
  p.shift = cm_i(args, 6);
  p.batch = l->sizes[0], p.m = l->sizes[1], p.k = l->sizes[2], p.n = r->sizes[1];
  qbmm_s8(&p, (const int8_t *)l->data, (const int8_t *)r->data, (int8_t *)out->data);
  return ET_OK;
}
