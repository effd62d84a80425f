/* Adapters for emlkit::prelu, emlkit::adaptive_avg_pool2d, emlkit::floor_divide and emlkit::embedding_bag, the int8
 * forms of ops ExecuTorch's Cortex-M flow leaves in float (semantics: emlkit/emlkit_ops.py). prepare checks every
 * argument and table entry once, at load; eval checks only what a program's inputs decide (embedding_bag's indices
 * and offsets). */
#include "cortex_m_util.h"
#include "emlkit_kernels.h"

/* Argument slots (the operators' schemas in emlkit/emlkit_ops.py, out last). */
enum { EPRELU_IN, EPRELU_NEG, EPRELU_IN_ZP, EPRELU_OUT_ZP, EPRELU_MULT, EPRELU_SHIFT, EPRELU_OUT };
enum { EAAP_IN, EAAP_ROWS, EAAP_COLS, EAAP_REQUANT, EAAP_IN_ZP, EAAP_OUT_ZP, EAAP_OUT };
enum { EFDIV_A, EFDIV_B, EFDIV_A_ZP, EFDIV_B_ZP, EFDIV_A_MANT, EFDIV_B_MANT, EFDIV_EXP, EFDIV_OUT_ZP, EFDIV_MULT,
       EFDIV_SHIFT, EFDIV_OUT };
enum { EBAG_WEIGHT, EBAG_INDICES, EBAG_OFFSETS, EBAG_MODE, EBAG_LAST, EBAG_PAD, EBAG_W_ZP, EBAG_OUT_ZP, EBAG_MULT,
       EBAG_SHIFT, EBAG_OUT };

#define EMLKIT_ADAPTIVE_MAX_TAPS (1 << 16) /* |sum| <= 255 * 2^16 < 2^24, times mult < 2^31: within int64 */
#define EMLKIT_BAG_MAX_INDICES (1 << 23)   /* |sum| <= 255 * 2^23 < 2^31, times mult < 2^31: within int64 */

ET_PREPARE static et_status requant_pair(et_kernel_ctx *ctx, const char *op, const char *what, int64_t mult,
                                         int64_t shift, bool signed_mult) {
  const int64_t mag = mult < 0 ? -mult : mult;
  const bool ok_mult = (mag >= ((int64_t)1 << 30) && mag <= INT32_MAX && (signed_mult || mult > 0)) ||
                       (signed_mult && mult == 0);
  if (!ok_mult || shift < 1 || shift > 62)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %s multiplier %lld / shift %lld outside %s[2^30, 2^31) / [1, 62]", op,
                   what, (long long)mult, (long long)shift, signed_mult ? "0 or +-" : "");
  return ET_OK;
}

/* An int32 [n, 2] constant table (prepare reads it). */
ET_PREPARE static et_status pair_table(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name,
                                       int32_t n) {
  CM_TRY(cm_dtype(ctx, op, t, name, ET_DT_INT));
  if (t->dim != 2 || t->sizes[0] != n || t->sizes[1] != 2 || !t->data)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s must be a constant int32 [%ld, 2] table", op, name, (long)n);
  return ET_OK;
}

/* A constant int32 [n, 2] table of (multiplier, shift) pairs, each checked by requant_pair. */
ET_PREPARE static et_status requant_table(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name,
                                          int32_t n, const char *what, bool signed_mult) {
  CM_TRY(pair_table(ctx, op, t, name, n));
  const int32_t *v = (const int32_t *)t->data;
  for (int32_t k = 0; k < n; k++) CM_TRY(requant_pair(ctx, op, what, v[2 * k], v[2 * k + 1], signed_mult));
  return ET_OK;
}

/* Input and out of one int8 shape and one memory order. */
ET_PREPARE static et_status same_s8(et_kernel_ctx *ctx, const char *op, const et_tensor *in, const char *name,
                                    const et_tensor *out) {
  CM_TRY(cm_dtype(ctx, op, in, name, ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  if (!cm_same_sizes(in, out) || !cm_layout_is(out, in->dim_order))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out must have %s's sizes and dim order", op, name);
  return ET_OK;
}

/* ---- emlkit::prelu.out(x, neg_requant, input_zero_point, output_zero_point, multiplier, shift, out) ---- */
ET_PREPARE et_status op_emlkit_prelu_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::prelu";
  et_tensor *in, *neg, *out;
  static const cm_tensor_arg ts[] = {{EPRELU_IN, "x", false}, {EPRELU_NEG, "neg_requant", false},
                                     {EPRELU_OUT, "out", false}};
  static const cm_int_arg zps[] = {{EPRELU_IN_ZP, "input_zero_point", -128, 127},
                                   {EPRELU_OUT_ZP, "output_zero_point", -128, 127}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, EPRELU_OUT, ts, 3, (et_tensor **const[]){&in, &neg, &out}));
  CM_TRY(cm_ints(ctx, op, args, zps, 2));
  CM_TRY(cm_requant_args(ctx, op, args, EPRELU_MULT));
  CM_TRY(same_s8(ctx, op, in, "x", out));
  if (in->dim < 2)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: x must have 2 or more dims (dim 1 holds the channels), got %u-D", op,
                   (unsigned)in->dim);
  return requant_table(ctx, op, neg, "neg_requant", in->sizes[1], "a channel's negative-side", true);
}

et_status op_emlkit_prelu_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *in;
  et_tensor *out;
  int32_t v[3]; /* around the channel dim */
  if (!cm_io_view(args, EPRELU_IN, EPRELU_OUT, 1, &in, &out, v)) return ET_OK;
  emk_emlkit_prelu_s8((const int8_t *)in->data, (int8_t *)out->data, v[0], v[1], v[2],
                      (const int32_t *)args[EPRELU_NEG]->u.t->data, cm_i(args, EPRELU_IN_ZP),
                      cm_i(args, EPRELU_OUT_ZP), cm_i(args, EPRELU_MULT), cm_i(args, EPRELU_SHIFT));
  return ET_OK;
}

/* ---- emlkit::adaptive_avg_pool2d.out(x, rows, cols, requant, input_zero_point, output_zero_point, out): logical
 * NCHW; x and out both channels-last (the kernel's NHWC) or both contiguous NCHW (NHWC with one channel and N * C
 * images). ---- */
ET_PREPARE static et_status window_table(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name,
                                         int32_t n, int32_t size, int32_t *widest) {
  CM_TRY(pair_table(ctx, op, t, name, n));
  const int32_t *v = (const int32_t *)t->data;
  *widest = 0;
  for (int32_t i = 0; i < n; i++) {
    if (v[2 * i] < 0 || v[2 * i] >= v[2 * i + 1] || v[2 * i + 1] > size)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s[%ld] = [%ld, %ld) is empty or outside [0, %ld)", op, name, (long)i,
                     (long)v[2 * i], (long)v[2 * i + 1], (long)size);
    if (v[2 * i + 1] - v[2 * i] > *widest) *widest = v[2 * i + 1] - v[2 * i];
  }
  return ET_OK;
}

ET_PREPARE et_status op_emlkit_adaptive_avg_pool2d_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::adaptive_avg_pool2d";
  et_tensor *in, *rows, *cols, *rq, *out;
  int32_t wr, wc;
  static const cm_tensor_arg ts[] = {{EAAP_IN, "x", false},           {EAAP_ROWS, "rows", false},
                                     {EAAP_COLS, "cols", false},       {EAAP_REQUANT, "requant", false},
                                     {EAAP_OUT, "out", false}};
  static const cm_int_arg zps[] = {{EAAP_IN_ZP, "input_zero_point", -128, 127},
                                   {EAAP_OUT_ZP, "output_zero_point", -128, 127}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, EAAP_OUT, ts, 5, (et_tensor **const[]){&in, &rows, &cols, &rq, &out}));
  CM_TRY(cm_ints(ctx, op, args, zps, 2));
  CM_TRY(cm_s8_map_pair(ctx, op, in, out));
  CM_TRY(window_table(ctx, op, rows, "rows", out->sizes[2], in->sizes[2], &wr));
  CM_TRY(window_table(ctx, op, cols, "cols", out->sizes[3], in->sizes[3], &wc));
  if ((int64_t)wr * wc > EMLKIT_ADAPTIVE_MAX_TAPS)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: a %ldx%ld window has more than %d taps", op, (long)wr, (long)wc,
                   EMLKIT_ADAPTIVE_MAX_TAPS);
  return requant_table(ctx, op, rq, "requant", out->sizes[2] * out->sizes[3], "a window's", false);
}

et_status op_emlkit_adaptive_avg_pool2d_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  cm_s8_map m;
  if (!cm_s8_map_io(args, EAAP_IN, EAAP_ROWS, EAAP_COLS, EAAP_OUT, &m)) return ET_OK;
  emk_emlkit_adaptive_avg_pool2d_s8(m.in, m.out, m.images, m.ih, m.iw, m.c, m.oh, m.ow, m.rows, m.cols,
                                    (const int32_t *)args[EAAP_REQUANT]->u.t->data, cm_i(args, EAAP_IN_ZP),
                                    cm_i(args, EAAP_OUT_ZP));
  return ET_OK;
}

/* ---- emlkit::floor_divide.out(a, b, a_zero_point, b_zero_point, a_mantissa, b_mantissa, exponent,
 * output_zero_point, multiplier, shift, out): a, b and out of one shape and memory order. ---- */
ET_PREPARE et_status op_emlkit_floor_divide_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::floor_divide";
  et_tensor *a, *b, *out;
  static const cm_tensor_arg ts[] = {{EFDIV_A, "a", false}, {EFDIV_B, "b", false}, {EFDIV_OUT, "out", false}};
  static const cm_int_arg ints[] = {
      {EFDIV_A_ZP, "a_zero_point", -128, 127},         {EFDIV_B_ZP, "b_zero_point", -128, 127},
      {EFDIV_A_MANT, "a_mantissa", 1 << 23, (1 << 24) - 1}, {EFDIV_B_MANT, "b_mantissa", 1 << 23, (1 << 24) - 1},
      {EFDIV_EXP, "exponent", -30, 30},                {EFDIV_OUT_ZP, "output_zero_point", -128, 127}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, EFDIV_OUT, ts, 3, (et_tensor **const[]){&a, &b, &out}));
  CM_TRY(cm_ints(ctx, op, args, ints, 6));
  CM_TRY(cm_requant_args(ctx, op, args, EFDIV_MULT));
  CM_TRY(same_s8(ctx, op, a, "a", out));
  return same_s8(ctx, op, b, "b", out);
}

et_status op_emlkit_floor_divide_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  et_tensor *const out = args[EFDIV_OUT]->u.t;
  const emlkit_floor_div_params p = {cm_i(args, EFDIV_A_ZP),   cm_i(args, EFDIV_B_ZP), cm_i(args, EFDIV_A_MANT),
                                     cm_i(args, EFDIV_B_MANT), cm_i(args, EFDIV_EXP),  cm_i(args, EFDIV_OUT_ZP),
                                     cm_i(args, EFDIV_MULT),   cm_i(args, EFDIV_SHIFT)};
  emk_emlkit_floor_divide_s8((const int8_t *)args[EFDIV_A]->u.t->data, (const int8_t *)args[EFDIV_B]->u.t->data,
                             (int8_t *)out->data, et_tensor_numel(out), &p);
  return ET_OK;
}

/* ---- emlkit::embedding_bag.out(weight, indices, offsets, mode, include_last_offset, padding_idx,
 * weight_zero_point, output_zero_point, multiplier, shift, out): weight int8 [num, dim], indices and offsets 1-D
 * int64, out int8 [bags, dim] contiguous. ---- */
ET_PREPARE et_status op_emlkit_embedding_bag_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::embedding_bag";
  et_tensor *w, *idx, *off, *out;
  int32_t v, last;
  static const cm_tensor_arg ts[] = {{EBAG_WEIGHT, "weight", false}, {EBAG_INDICES, "indices", false},
                                     {EBAG_OFFSETS, "offsets", false}, {EBAG_OUT, "out", false}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, EBAG_OUT, ts, 4, (et_tensor **const[]){&w, &idx, &off, &out}));
  CM_TRY(cm_int(ctx, op, args, EBAG_MODE, "mode", 0, 2, &v));
  CM_TRY(cm_int(ctx, op, args, EBAG_LAST, "include_last_offset", 0, 1, &last));
  CM_TRY(cm_dtype(ctx, op, w, "weight", ET_DT_CHAR));
  CM_TRY(cm_rank(ctx, op, w, "weight", 2));
  CM_TRY(cm_contiguous(ctx, op, w, "weight"));
  CM_TRY(cm_int(ctx, op, args, EBAG_PAD, "padding_idx", -1, w->sizes[0] - 1, &v));
  static const cm_int_arg zps[] = {{EBAG_W_ZP, "weight_zero_point", -128, 127},
                                   {EBAG_OUT_ZP, "output_zero_point", -128, 127}};
  CM_TRY(cm_ints(ctx, op, args, zps, 2));
  CM_TRY(cm_requant_args(ctx, op, args, EBAG_MULT));
  CM_TRY(cm_dtype(ctx, op, idx, "indices", ET_DT_LONG));
  CM_TRY(cm_dtype(ctx, op, off, "offsets", ET_DT_LONG));
  CM_TRY(cm_rank(ctx, op, idx, "indices", 1));
  CM_TRY(cm_rank(ctx, op, off, "offsets", 1));
  if (idx->sizes[0] > EMLKIT_BAG_MAX_INDICES)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %ld indices, at most %d supported", op, (long)idx->sizes[0],
                   EMLKIT_BAG_MAX_INDICES);
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  CM_TRY(cm_rank(ctx, op, out, "out", 2));
  CM_TRY(cm_contiguous(ctx, op, out, "out"));
  if (out->sizes[0] != off->sizes[0] - last || out->sizes[1] != w->sizes[1])
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out is [%ld, %ld] but %ld offsets%s and %ld columns give [%ld, %ld]", op,
                   (long)out->sizes[0], (long)out->sizes[1], (long)off->sizes[0],
                   last ? " (the last one an end)" : "", (long)w->sizes[1], (long)(off->sizes[0] - last),
                   (long)w->sizes[1]);
  return ET_OK;
}

et_status op_emlkit_embedding_bag_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)nargs;
  const char *op = "emlkit::embedding_bag";
  const et_tensor *const w = args[EBAG_WEIGHT]->u.t, *const idx = args[EBAG_INDICES]->u.t;
  const et_tensor *const off = args[EBAG_OFFSETS]->u.t;
  const int64_t *iv = (const int64_t *)idx->data, *ov = (const int64_t *)off->data;
  const int32_t n_idx = idx->sizes[0], n_off = off->sizes[0];
  /* the program's inputs decide these: checked on every call */
  for (int32_t i = 0; i < n_idx; i++)
    if (iv[i] < 0 || iv[i] >= w->sizes[0])
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: indices[%ld] = %lld is outside [0, %ld)", op, (long)i,
                     (long long)iv[i], (long)w->sizes[0]);
  for (int32_t j = 0; j < n_off; j++) {
    const int64_t lo = j ? ov[j - 1] : 0;
    if (ov[j] < lo || ov[j] > n_idx)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: offsets[%ld] = %lld is below the previous offset or outside [0, %ld]",
                     op, (long)j, (long long)ov[j], (long)n_idx);
  }
  const emlkit_embedding_bag_params p = {w->sizes[0],           w->sizes[1],           n_idx,
                                         n_off,                 cm_i(args, EBAG_LAST), cm_i(args, EBAG_MODE),
                                         cm_i(args, EBAG_PAD),  cm_i(args, EBAG_W_ZP), cm_i(args, EBAG_OUT_ZP),
                                         cm_i(args, EBAG_MULT), cm_i(args, EBAG_SHIFT)};
  emk_emlkit_embedding_bag_s8(&p, (const int8_t *)w->data, iv, ov, (int8_t *)args[EBAG_OUT]->u.t->data);
  return ET_OK;
}
