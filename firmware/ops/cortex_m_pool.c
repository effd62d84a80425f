/* Adapters for cortex_m::quantized_avg_pool2d, quantized_max_pool2d and their
 * _nhwc variants (NHWC bytes either way; see cm_nhwc). */
#include "cortex_m_util.h"

/* Argument slots (the operators' schemas, out last); both start input, kernel_size, stride, padding. */
enum { AVG_IN, AVG_KERNEL, AVG_STRIDE, AVG_PADDING, AVG_CEIL_MODE, AVG_ZP, AVG_MULT, AVG_SHIFT, AVG_SCRATCH, AVG_OUT };
enum { MAXP_IN, MAXP_KERNEL, MAXP_STRIDE, MAXP_PADDING, MAXP_DILATION, MAXP_CEIL_MODE, MAXP_IN_ZP, MAXP_OUT_ZP, MAXP_ACT_MIN, MAXP_ACT_MAX, MAXP_OUT };

static int32_t pool_out(int32_t n, int32_t k, int32_t s, int32_t p, int32_t d, bool ceil) {
  const int32_t num = n + 2 * p - d * (k - 1) - 1;
  int32_t o = (ceil ? (num + s - 1) / s : num / s) + 1;
  if (ceil && (o - 1) * s >= n + p) o--; /* last window must start inside input or left pad */
  return o;
}

ET_PREPARE static et_status geometry(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t *i, bool has_dil,
                          bool nhwc, et_tensor *in, et_tensor *out, qpool_params *p, bool *ceil) {
  int32_t k[2], s[2], pad[2], dil[2] = {1, 1};
  uint32_t ns = 0;
  CM_TRY(cm_pair(ctx, op, args, (*i)++, "kernel_size", 1, 4096, k));
  CM_TRY(cm_int_list(ctx, op, args, (*i)++, "stride", 2, 1, 4096, s, &ns));
  if (ns == 0) s[0] = k[0], s[1] = k[1]; /* torch: empty stride means stride = kernel */
  else if (ns == 1) s[1] = s[0];
  CM_TRY(cm_pair(ctx, op, args, (*i)++, "padding", 0, 4096, pad));
  if (has_dil) CM_TRY(cm_pair(ctx, op, args, (*i)++, "dilation", 1, 4096, dil));
  CM_TRY(cm_bool(ctx, op, args, (*i)++, "ceil_mode", ceil));
  if (dil[0] != 1 || dil[1] != 1)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: dilation %d,%d not supported (only 1)", op, (int)dil[0], (int)dil[1]);
  if (pad[0] * 2 > k[0] || pad[1] * 2 > k[1])
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: padding must be at most half the kernel size", op);
  CM_TRY(cm_dtype(ctx, op, in, "input", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  int32_t di[4] = {0}, d_o[4] = {0};
  CM_TRY(cm_nhwc(ctx, op, in, "input", nhwc, di));
  CM_TRY(cm_nhwc(ctx, op, out, "out", nhwc, d_o));
  p->batch = di[0], p->in_h = di[1], p->in_w = di[2], p->c = di[3];
  p->k_h = k[0], p->k_w = k[1], p->stride_h = s[0], p->stride_w = s[1], p->pad_h = pad[0], p->pad_w = pad[1];
  p->out_h = pool_out(p->in_h, k[0], s[0], pad[0], 1, *ceil);
  p->out_w = pool_out(p->in_w, k[1], s[1], pad[1], 1, *ceil);
  if (d_o[0] != p->batch || d_o[1] != p->out_h || d_o[2] != p->out_w || d_o[3] != p->c)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out is NHWC [%d,%d,%d,%d] but the geometry gives [%d,%d,%d,%d]", op,
                   (int)d_o[0], (int)d_o[1], (int)d_o[2], (int)d_o[3], (int)p->batch, (int)p->out_h, (int)p->out_w,
                   (int)p->c);
  return ET_OK;
}

ET_PREPARE static et_status avg_prepare(et_kernel_ctx *ctx, const char *op, bool nhwc, et_value **args, uint32_t nargs) {
  et_tensor *in, *out;
  qpool_params p;
  bool ceil;
  int32_t zp, mult, shift;
  uint32_t i = AVG_KERNEL;
  CM_TRY(cm_nargs(ctx, op, nargs, AVG_OUT));
  CM_TRY(cm_tensor(ctx, op, args, AVG_IN, "input", false, &in));
  CM_TRY(cm_tensor(ctx, op, args, AVG_OUT, "out", false, &out));
  CM_TRY(geometry(ctx, op, args, &i, false, nhwc, in, out, &p, &ceil));
  CM_TRY(cm_int(ctx, op, args, i++, "zero_point", -128, 127, &zp));
  CM_TRY(cm_int(ctx, op, args, i++, "multiplier", 1, INT32_MAX, &mult));
  CM_TRY(cm_int(ctx, op, args, i++, "shift", -31, 31, &shift));
  if (et_tensor_numel(out) == 0) return ET_OK;
  const size_t need = emk_avg_pool2d_s8_get_buffer_size(&p);
  et_tensor *scr = NULL;
  if (need) {
    CM_TRY(cm_tensor(ctx, op, args, AVG_SCRATCH, "scratch", false, &scr));
    if (scr->nbytes < need)
      return et_fail(ctx, ET_E_INVALID_ARG,
                     "%s: scratch tensor has %u bytes, the kernel needs %u (compile the program again with this "
                     "version of emlkit)", op, (unsigned)scr->nbytes, (unsigned)need);
  }
  return ET_OK;
}

/* Eval's view of the checked geometry (out_h/out_w: out's checked sizes). */
static void geometry_get(et_value **args, bool nhwc, const et_tensor *in, const et_tensor *out, qpool_params *p) {
  int32_t k[2], s[2], pad[2], di[4], d_o[4];
  cm_pair_get(args, AVG_KERNEL, k);
  if (args[AVG_STRIDE]->u.list.len == 0) s[0] = k[0], s[1] = k[1];
  else cm_pair_get(args, AVG_STRIDE, s);
  cm_pair_get(args, AVG_PADDING, pad);
  cm_nhwc_get(in, nhwc, di);
  cm_nhwc_get(out, nhwc, d_o);
  p->batch = di[0], p->in_h = di[1], p->in_w = di[2], p->c = di[3];
  p->k_h = k[0], p->k_w = k[1], p->stride_h = s[0], p->stride_w = s[1], p->pad_h = pad[0], p->pad_w = pad[1];
  p->out_h = d_o[1], p->out_w = d_o[2];
}

static et_status avg(et_kernel_ctx *ctx, const char *op, et_value **args, bool nhwc) {
  const et_tensor *const in = args[AVG_IN]->u.t;
  et_tensor *const out = args[AVG_OUT]->u.t;
  if (et_tensor_numel(out) == 0) return ET_OK;
  qpool_params p;
  geometry_get(args, nhwc, in, out, &p);
  const int32_t zp = cm_i(args, AVG_ZP), mult = cm_i(args, AVG_MULT), shift = cm_i(args, AVG_SHIFT);
  const et_tensor *const scr = emk_avg_pool2d_s8_get_buffer_size(&p) ? args[AVG_SCRATCH]->u.t : NULL;
  if (emk_avg_pool2d_s8(&p, (const int8_t *)in->data, (int8_t *)out->data, zp, mult, shift, scr ? scr->data : NULL,
                  scr ? scr->nbytes : 0) != K_OK)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: the kernel refused its scratch memory (not 4-byte aligned)", op);
  return ET_OK;
}

ET_PREPARE static et_status maxp_prepare(et_kernel_ctx *ctx, const char *op, bool nhwc, et_value **args, uint32_t nargs) {
  et_tensor *in, *out;
  qpool_params p;
  bool ceil;
  int32_t izp, ozp, lo, hi;
  uint32_t i = MAXP_KERNEL;
  CM_TRY(cm_nargs(ctx, op, nargs, MAXP_OUT));
  CM_TRY(cm_tensor(ctx, op, args, MAXP_IN, "input", false, &in));
  CM_TRY(cm_tensor(ctx, op, args, MAXP_OUT, "out", false, &out));
  CM_TRY(geometry(ctx, op, args, &i, true, nhwc, in, out, &p, &ceil));
  if (ceil) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: ceil_mode=True is not supported (as in the reference)", op);
  CM_TRY(cm_int(ctx, op, args, i++, "input_zero_point", -128, 127, &izp));
  CM_TRY(cm_int(ctx, op, args, i++, "output_zero_point", -128, 127, &ozp));
  CM_TRY(cm_int(ctx, op, args, i++, "activation_min", -128, 127, &lo));
  CM_TRY(cm_int(ctx, op, args, i++, "activation_max", -128, 127, &hi));
  CM_TRY(cm_act(ctx, op, lo, hi));
  if (izp != ozp)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input and output zero points must match (%d vs %d)", op, (int)izp,
                   (int)ozp);
  return ET_OK;
}

static et_status maxp(et_value **args, bool nhwc) {
  const et_tensor *const in = args[MAXP_IN]->u.t;
  et_tensor *const out = args[MAXP_OUT]->u.t;
  if (et_tensor_numel(out) == 0) return ET_OK;
  qpool_params p;
  geometry_get(args, nhwc, in, out, &p);
  const int32_t lo = cm_i(args, MAXP_ACT_MIN), hi = cm_i(args, MAXP_ACT_MAX);
  emk_max_pool2d_s8(&p, (const int8_t *)in->data, (int8_t *)out->data, lo, hi);
  return ET_OK;
}

OP_PREPARE(op_cortex_m_quantized_avg_pool2d_out, avg_prepare, "cortex_m::quantized_avg_pool2d", false)
et_status op_cortex_m_quantized_avg_pool2d_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return avg(ctx, "cortex_m::quantized_avg_pool2d", args, false); }
OP_PREPARE(op_cortex_m_quantized_avg_pool2d_nhwc_out, avg_prepare, "cortex_m::quantized_avg_pool2d_nhwc", true)
et_status op_cortex_m_quantized_avg_pool2d_nhwc_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return avg(ctx, "cortex_m::quantized_avg_pool2d_nhwc", args, true); }
OP_PREPARE(op_cortex_m_quantized_max_pool2d_out, maxp_prepare, "cortex_m::quantized_max_pool2d", false)
et_status op_cortex_m_quantized_max_pool2d_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return maxp(args, false); }
OP_PREPARE(op_cortex_m_quantized_max_pool2d_nhwc_out, maxp_prepare, "cortex_m::quantized_max_pool2d_nhwc", true)
et_status op_cortex_m_quantized_max_pool2d_nhwc_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return maxp(args, true); }
