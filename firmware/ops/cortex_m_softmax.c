/* Adapter for cortex_m::softmax.out(input, dim, input_zero_point,
 * output_zero_point, input_multiplier, input_shift, diff_min, out). diff_min
 * is unused, as in the reference (its float path needs no cut-off). */
#include "cortex_m_util.h"

/* Argument slots (the operator's schema, out last). */
enum { SOFTMAX_IN, SOFTMAX_DIM, SOFTMAX_IN_ZP, SOFTMAX_OUT_ZP, SOFTMAX_IN_MULT, SOFTMAX_IN_SHIFT, SOFTMAX_DIFF_MIN, SOFTMAX_OUT };

ET_PREPARE et_status op_cortex_m_softmax_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::softmax";
  et_tensor *in, *out;
  int32_t dim, izp, ozp, mult, shift, diff_min;
  CM_TRY(cm_nargs(ctx, op, nargs, SOFTMAX_OUT));
  CM_TRY(cm_tensor(ctx, op, args, SOFTMAX_IN, "input", false, &in));
  CM_TRY(cm_tensor(ctx, op, args, SOFTMAX_OUT, "out", false, &out));
  CM_TRY(cm_int(ctx, op, args, SOFTMAX_DIM, "dim", -ET_MAX_DIM, ET_MAX_DIM - 1, &dim));
  CM_TRY(cm_int(ctx, op, args, SOFTMAX_IN_ZP, "input_zero_point", -128, 127, &izp));
  CM_TRY(cm_int(ctx, op, args, SOFTMAX_OUT_ZP, "output_zero_point", -128, 127, &ozp));
  CM_TRY(cm_int(ctx, op, args, SOFTMAX_IN_MULT, "input_multiplier", 1, INT32_MAX, &mult));
  CM_TRY(cm_int(ctx, op, args, SOFTMAX_IN_SHIFT, "input_shift", -31, 31, &shift));
  CM_TRY(cm_int(ctx, op, args, SOFTMAX_DIFF_MIN, "diff_min", INT32_MIN, INT32_MAX, &diff_min));
  if (ozp != -128)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: output_zero_point must be -128 (output scale 1/256), got %d", op, (int)ozp);
  CM_TRY(cm_dtype(ctx, op, in, "input", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  return cm_softmax_shapes(ctx, op, in, out, dim);
}

et_status op_cortex_m_softmax_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const in = args[SOFTMAX_IN]->u.t;
  et_tensor *const out = args[SOFTMAX_OUT]->u.t;
  if (et_tensor_numel(in) == 0) return ET_OK;
  int32_t outer, len, inner;
  cm_dim_view(in, cm_i(args, SOFTMAX_DIM), &outer, &len, &inner);
  emk_softmax_s8((const int8_t *)in->data, (int8_t *)out->data, outer, len, inner, cm_i(args, SOFTMAX_IN_ZP), cm_i(args, SOFTMAX_OUT_ZP), cm_i(args, SOFTMAX_IN_MULT),
             cm_i(args, SOFTMAX_IN_SHIFT));
  return ET_OK;
}
