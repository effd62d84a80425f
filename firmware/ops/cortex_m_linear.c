/* Adapters for cortex_m::quantized_linear and cortex_m::quantized_batch_matmul. */
#include "cortex_m_util.h"

/* Argument slots (the operators' schemas, out last). */
enum { LINEAR_IN, LINEAR_WEIGHTS, LINEAR_BIAS, LINEAR_KERNEL_SUM, LINEAR_IN_OFFSET, LINEAR_FILTER_OFFSET, LINEAR_OUT_OFFSET, LINEAR_MULTS, LINEAR_SHIFTS, LINEAR_ACT_MAX, LINEAR_ACT_MIN, LINEAR_OUT };
enum { BMM_LHS, BMM_LHS_ZP, BMM_RHS_T, BMM_RHS_ZP, BMM_OUT_ZP, BMM_OUT_MULT, BMM_OUT_SHIFT, BMM_SCRATCH, BMM_OUT };

/* Prepare's checks, each applied to a list of arguments in turn (the first failure is reported). */
#define N_CHECKED 3u
/* The slots of each operator's three zero points or offsets, read by prepare (checked) and by eval. */
static const uint32_t k_linear_off_slot[N_CHECKED] = {LINEAR_IN_OFFSET, LINEAR_FILTER_OFFSET, LINEAR_OUT_OFFSET};
static const uint32_t k_bmm_zp_slot[N_CHECKED] = {BMM_LHS_ZP, BMM_RHS_ZP, BMM_OUT_ZP};
/* Zero points and offsets: ints in [-CM_MAX_OFFSET, CM_MAX_OFFSET]. */
ET_PREPARE static et_status offsets(et_kernel_ctx *ctx, const char *op, et_value **args, const uint32_t slot[N_CHECKED],
                                    const char *const name[N_CHECKED], int32_t *const dst[N_CHECKED]) {
  for (uint32_t i = 0; i < N_CHECKED; i++) CM_TRY(cm_int(ctx, op, args, slot[i], name[i], -CM_MAX_OFFSET, CM_MAX_OFFSET, dst[i]));
  return ET_OK;
}
/* Eval's read of what offsets() checked. */
static void offsets_get(et_value **args, const uint32_t slot[N_CHECKED], int32_t *const dst[N_CHECKED]) {
  for (uint32_t i = 0; i < N_CHECKED; i++) *dst[i] = cm_i(args, slot[i]);
}
/* The operand tensors (required ones) of the given slots. */
ET_PREPARE static et_status tensors(et_kernel_ctx *ctx, const char *op, et_value **args, const uint32_t slot[N_CHECKED],
                                    const char *const name[N_CHECKED], et_tensor **dst[N_CHECKED]) {
  for (uint32_t i = 0; i < N_CHECKED; i++) CM_TRY(cm_tensor(ctx, op, args, slot[i], name[i], false, dst[i]));
  return ET_OK;
}
/* Each tensor int8; then (rank != 0) each of that rank. */
ET_PREPARE static et_status s8_of_rank(et_kernel_ctx *ctx, const char *op, et_tensor *const t[N_CHECKED], const char *const name[N_CHECKED],
                                       uint8_t rank) {
  for (uint32_t i = 0; i < N_CHECKED; i++) CM_TRY(cm_dtype(ctx, op, t[i], name[i], ET_DT_CHAR));
  for (uint32_t i = 0; rank && i < N_CHECKED; i++) CM_TRY(cm_rank(ctx, op, t[i], name[i], rank));
  return ET_OK;
}
/* Each tensor contiguous. */
ET_PREPARE static et_status contiguous(et_kernel_ctx *ctx, const char *op, et_tensor *const t[N_CHECKED], const char *const name[N_CHECKED]) {
  for (uint32_t i = 0; i < N_CHECKED; i++) CM_TRY(cm_contiguous(ctx, op, t[i], name[i]));
  return ET_OK;
}

ET_PREPARE et_status op_cortex_m_quantized_linear_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::quantized_linear";
  et_tensor *in, *w, *bias, *ksum, *out;
  qlinear_params p;
  static const char *const off_name[N_CHECKED] = {"input_offset", "filter_offset", "output_offset"};
  static const cm_tensor_arg ts[] = {{LINEAR_IN, "input", false},         {LINEAR_WEIGHTS, "weights", false},
                                     {LINEAR_BIAS, "bias", true},           {LINEAR_KERNEL_SUM, "kernel_sum", true},
                                     {LINEAR_OUT, "out", false}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, LINEAR_OUT, ts, 5, (et_tensor **const[]){&in, &w, &bias, &ksum, &out}));
  CM_TRY(offsets(ctx, op, args, k_linear_off_slot, off_name, (int32_t *const[N_CHECKED]){&p.input_offset, &p.filter_offset, &p.output_offset}));
  int32_t mults[ET_MAX_DIM], shifts[ET_MAX_DIM];
  uint32_t nm = 0, ns = 0;
  /* the reference requantizes per tensor with entry 0; longer lists would be
   * per-channel, which it does not implement */
  CM_TRY(cm_int_list(ctx, op, args, LINEAR_MULTS, "requantize_multipliers", 1, 0, INT32_MAX, mults, &nm));
  CM_TRY(cm_int_list(ctx, op, args, LINEAR_SHIFTS, "requantize_shifts", 1, -31, 31, shifts, &ns));
  if (nm != 1 || ns != 1)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: needs exactly one requantize multiplier and shift (per-tensor)", op);
  p.mult = mults[0], p.shift = shifts[0];
  CM_TRY(cm_int(ctx, op, args, LINEAR_ACT_MAX, "activation_max", -128, 127, &p.act_max));
  CM_TRY(cm_int(ctx, op, args, LINEAR_ACT_MIN, "activation_min", -128, 127, &p.act_min));
  CM_TRY(cm_act(ctx, op, p.act_min, p.act_max));
  CM_TRY(s8_of_rank(ctx, op, (et_tensor *const[N_CHECKED]){in, w, out}, (const char *const[N_CHECKED]){"input", "weights", "out"}, 0));
  CM_TRY(cm_rank(ctx, op, w, "weights", 2));
  CM_TRY(contiguous(ctx, op, (et_tensor *const[N_CHECKED]){w, in, out}, (const char *const[N_CHECKED]){"weights", "input", "out"}));
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
  et_tensor *const in = args[LINEAR_IN]->u.t, *const w = args[LINEAR_WEIGHTS]->u.t, *const bias = cm_t(args, LINEAR_BIAS), *const ksum = cm_t(args, LINEAR_KERNEL_SUM);
  et_tensor *const out = args[LINEAR_OUT]->u.t;
  if (et_tensor_numel(out) == 0) return ET_OK;
  qlinear_params p;
  offsets_get(args, k_linear_off_slot, (int32_t *const[N_CHECKED]){&p.input_offset, &p.filter_offset, &p.output_offset});
  p.mult = (int32_t)et_list_int(args[LINEAR_MULTS], 0);
  p.shift = (int32_t)et_list_int(args[LINEAR_SHIFTS], 0);
  p.act_max = cm_i(args, LINEAR_ACT_MAX);
  p.act_min = cm_i(args, LINEAR_ACT_MIN);
  p.k = in->sizes[in->dim - 1];
  p.n = w->sizes[0];
  p.rows = p.k ? (int32_t)(et_tensor_numel(in) / (size_t)p.k) : 0;
  emk_linear_s8(&p, (const int8_t *)in->data, (const int8_t *)w->data, bias ? (const int32_t *)bias->data : NULL,
             ksum ? (const int32_t *)ksum->data : NULL, (int8_t *)out->data);
  return ET_OK;
}

ET_PREPARE et_status op_cortex_m_quantized_batch_matmul_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::quantized_batch_matmul";
  et_tensor *l, *r, *out;
  qbmm_params p;
  static const uint32_t t_slot[N_CHECKED] = {BMM_LHS, BMM_RHS_T, BMM_OUT};
  static const char *const t_name[N_CHECKED] = {"lhs", "rhs_transposed", "out"};
  static const char *const zp_name[N_CHECKED] = {"lhs_zero_point", "rhs_zero_point", "output_zero_point"};
  CM_TRY(cm_nargs(ctx, op, nargs, BMM_OUT));
  CM_TRY(tensors(ctx, op, args, t_slot, t_name, (et_tensor **[N_CHECKED]){&l, &r, &out}));
  CM_TRY(offsets(ctx, op, args, k_bmm_zp_slot, zp_name, (int32_t *const[N_CHECKED]){&p.lhs_offset, &p.rhs_offset, &p.out_zp}));
  CM_TRY(cm_int(ctx, op, args, BMM_OUT_MULT, "output_multiplier", 0, INT32_MAX, &p.mult));
  CM_TRY(cm_int(ctx, op, args, BMM_OUT_SHIFT, "output_shift", -31, 31, &p.shift));
  et_tensor *const all[N_CHECKED] = {l, r, out};
  CM_TRY(s8_of_rank(ctx, op, all, t_name, 3));
  CM_TRY(contiguous(ctx, op, all, t_name));
  p.batch = l->sizes[0], p.m = l->sizes[1], p.k = l->sizes[2], p.n = r->sizes[1];
  if (r->sizes[0] != p.batch || r->sizes[2] != p.k || out->sizes[0] != p.batch || out->sizes[1] != p.m ||
      out->sizes[2] != p.n)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: shapes lhs [B,M,K], rhs_transposed [B,N,K], out [B,M,N] do not match", op);
  return ET_OK;
}

et_status op_cortex_m_quantized_batch_matmul_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const l = args[BMM_LHS]->u.t, *const r = args[BMM_RHS_T]->u.t;
  et_tensor *const out = args[BMM_OUT]->u.t;
  if (et_tensor_numel(out) == 0) return ET_OK;
  qbmm_params p;
  offsets_get(args, k_bmm_zp_slot, (int32_t *const[N_CHECKED]){&p.lhs_offset, &p.rhs_offset, &p.out_zp});
  p.mult = cm_i(args, BMM_OUT_MULT);
  p.shift = cm_i(args, BMM_OUT_SHIFT);
  p.batch = l->sizes[0], p.m = l->sizes[1], p.k = l->sizes[2], p.n = r->sizes[1];
  emk_batch_matmul_s8(&p, (const int8_t *)l->data, (const int8_t *)r->data, (int8_t *)out->data);
  return ET_OK;
}
