/* Adapters: cortex_m::quantize_per_tensor.out, cortex_m::dequantize_per_tensor.out
 * (input, scale, zero_point, quant_min, quant_max, dtype, out). */
#include "cortex_m_util.h"

/* Argument slots of quantize_per_tensor and dequantize_per_tensor (the same schema, out last). */
enum { QPT_IN, QPT_SCALE, QPT_ZP, QPT_QMIN, QPT_QMAX, QPT_DTYPE, QPT_OUT };

ET_PREPARE static et_status qparams(et_kernel_ctx *ctx, const char *op, et_value **args, double *scale, int32_t *zp,
                         int32_t *qmin, int32_t *qmax, int32_t *dtype) {
  CM_TRY(cm_double(ctx, op, args, QPT_SCALE, "scale", scale));
  if (!(*scale > 0.0))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: scale must be positive, got %g", op, *scale);
  CM_TRY(cm_int(ctx, op, args, QPT_ZP, "zero_point", INT32_MIN, INT32_MAX, zp));
  CM_TRY(cm_int(ctx, op, args, QPT_QMIN, "quant_min", INT32_MIN, INT32_MAX, qmin));
  CM_TRY(cm_int(ctx, op, args, QPT_QMAX, "quant_max", INT32_MIN, INT32_MAX, qmax));
  CM_TRY(cm_int(ctx, op, args, QPT_DTYPE, "dtype", 0, 64, dtype));
  if (*dtype != ET_DT_BYTE && *dtype != ET_DT_CHAR && *dtype != ET_DT_SHORT && *dtype != ET_DT_INT)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: quantized dtype %s not supported (uint8, int8, int16, int32)", op,
                   et_dtype_name(*dtype));
  if (*qmin > *qmax) return et_fail(ctx, ET_E_INVALID_ARG, "%s: quant_min %d > quant_max %d", op, (int)*qmin, (int)*qmax);
  return ET_OK;
}

ET_PREPARE static et_status same_layout(et_kernel_ctx *ctx, const char *op, const et_tensor *in, const et_tensor *out) {
  if (!cm_same_sizes(in, out))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out must have the input's sizes", op);
  if (!cm_layout_is(out, in->dim_order))
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: out must have the input's dim order", op);
  return ET_OK;
}

/* Both ops' checks. The float side is checked before the qparams when it is the
 * input (quantize) and after them when it is the out (dequantize), so each
 * reports the first bad argument in schema order. */
ET_PREPARE static et_status prepare(et_kernel_ctx *ctx, const char *op, bool quantize, et_value **args, uint32_t nargs) {
  et_tensor *in, *out;
  double scale;
  int32_t zp, qmin, qmax, dt;
  CM_TRY(cm_nargs(ctx, op, nargs, QPT_OUT));
  CM_TRY(cm_tensor(ctx, op, args, QPT_IN, "input", false, &in));
  CM_TRY(cm_tensor(ctx, op, args, QPT_OUT, "out", false, &out));
  if (quantize) CM_TRY(cm_dtype(ctx, op, in, "input", ET_DT_FLOAT));
  CM_TRY(qparams(ctx, op, args, &scale, &zp, &qmin, &qmax, &dt));
  if (!quantize) CM_TRY(cm_dtype(ctx, op, in, "input", dt));
  CM_TRY(cm_dtype(ctx, op, out, "out", quantize ? dt : ET_DT_FLOAT));
  return same_layout(ctx, op, in, out);
}

OP_PREPARE(op_cortex_m_quantize_per_tensor_out, prepare, "cortex_m::quantize_per_tensor", true)

et_status op_cortex_m_quantize_per_tensor_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const in = args[QPT_IN]->u.t;
  et_tensor *const out = args[QPT_OUT]->u.t;
  emk_quantize_f32((const float *)in->data, et_tensor_numel(in), cm_d(args, QPT_SCALE), cm_i(args, QPT_ZP), cm_i(args, QPT_QMIN), cm_i(args, QPT_QMAX),
               (k_dtype)cm_i(args, QPT_DTYPE), out->data);
  return ET_OK;
}

OP_PREPARE(op_cortex_m_dequantize_per_tensor_out, prepare, "cortex_m::dequantize_per_tensor", false)

et_status op_cortex_m_dequantize_per_tensor_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const in = args[QPT_IN]->u.t;
  et_tensor *const out = args[QPT_OUT]->u.t;
  emk_dequantize_f32(in->data, (k_dtype)cm_i(args, QPT_DTYPE), et_tensor_numel(in), cm_d(args, QPT_SCALE), cm_i(args, QPT_ZP),
                 (float *)out->data);
  return ET_OK;
}
