/* Adapter for cortex_m::softmax.out(input, dim, input_zero_point,
 * output_zero_point, input_multiplier, input_shift, diff_min, out). diff_min
 * is unused, as in the reference (its float path needs no cut-off). */
#include "cortex_m_util.h"

ET_PREPARE et_status op_cortex_m_softmax_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::softmax";
  et_tensor *in, *out;
  int32_t dim, izp, ozp, mult, shift, diff_min;
  CM_TRY(cm_nargs(ctx, op, nargs, 7));
  CM_TRY(cm_tensor(ctx, op, args, 0, "input", false, &in));
  CM_TRY(cm_tensor(ctx, op, args, 7, "out", false, &out));
  CM_TRY(cm_int(ctx, op, args, 1, "dim", -ET_MAX_DIM, ET_MAX_DIM - 1, &dim));
  CM_TRY(cm_int(ctx, op, args, 2, "input_zero_point", -128, 127, &izp));
  CM_TRY(cm_int(ctx, op, args, 3, "output_zero_point", -128, 127, &ozp));
  CM_TRY(cm_int(ctx, op, args, 4, "input_multiplier", 1, INT32_MAX, &mult));
  CM_TRY(cm_int(ctx, op, args, 5, "input_shift", -31, 31, &shift));
  CM_TRY(cm_int(ctx, op, args, 6, "diff_min", INT32_MIN, INT32_MAX, &diff_min));
  if (ozp != -128)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: output_zero_point must be -128 (output scale 1/256), got %d", op, (int)ozp);
  CM_TRY(cm_dtype(ctx, op, in, "input", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  return cm_softmax_shapes(ctx, op, in, out, dim);
}

et_status op_cortex_m_softmax_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const in = args[0]->u.t;
  et_tensor *const out = args[7]->u.t;
  if (et_tensor_numel(in) == 0) return ET_OK;
  int32_t outer, len, inner;
  cm_dim_view(in, cm_i(args, 1), &outer, &len, &inner);
  softmax_s8((const int8_t *)in->data, (int8_t *)out->data, outer, len, inner, cm_i(args, 2), cm_i(args, 3), cm_i(args, 4),
             cm_i(args, 5));
  return ET_OK;
}
