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
       EBAG_SHIFT, EBAG_PSW, EBAG_PSW_ZP, EBAG_OUT };

#define EMLKIT_ADAPTIVE_MAX_TAPS (1 << 16) /* |sum| <= 255 * 2^16 < 2^24, times mult < 2^31: within int64 */
#define EMLKIT_BAG_MAX_INDICES (1 << 23)   /* |sum| <= 255 * 2^23 < 2^31, times mult < 2^31: within int64 */
#define EMLKIT_BAG_WEIGHTED_MAX_INDICES (1 << 15) /* with per-sample weights: |sum| <= 255 * 255 * 2^15 < 2^31 */

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

/* The walk over out (its memory order) of an operand T broadcast to it: T's element step per out dim (0 where T
 * is broadcast or has no such dim); false when T does not broadcast to out. */
static bool bcast_steps(const et_tensor *t, const et_tensor *out, int32_t *step) {
  size_t ts[ET_MAX_DIM];
  if (t->dim > out->dim) return false;
  et_tensor_strides(t, ts);
  const uint8_t lead = (uint8_t)(out->dim - t->dim);
  for (uint8_t k = 0; k < out->dim; k++) {
    const uint8_t d = out->dim_order[k];
    const int32_t s = d < lead ? 1 : t->sizes[d - lead];
    if (s != 1 && s != out->sizes[d]) return false;
    step[k] = s == 1 ? 0 : (int32_t)ts[d - lead];
  }
  return true;
}

static void bcast_walk(const et_tensor *a, const et_tensor *b, const et_tensor *out, emlkit_bcast_walk *w) {
  w->rank = out->dim;
  for (uint8_t k = 0; k < out->dim; k++) w->size[k] = out->sizes[out->dim_order[k]];
  (void)bcast_steps(a, out, w->a_step); /* prepare has checked both */
  (void)bcast_steps(b, out, w->b_step);
}

/* ---- emlkit::floor_divide.out(a, b, a_zero_point, b_zero_point, a_mantissa, b_mantissa, exponent,
 * output_zero_point, multiplier, shift, out): a and b int8 broadcast to out's shape (any memory orders; up to
 * EMLKIT_FLOOR_DIV_MAX_DIMS dims). ---- */
ET_PREPARE et_status op_emlkit_floor_divide_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::floor_divide";
  et_tensor *a, *b, *out;
  int32_t steps[ET_MAX_DIM];
  static const cm_tensor_arg ts[] = {{EFDIV_A, "a", false}, {EFDIV_B, "b", false}, {EFDIV_OUT, "out", false}};
  static const cm_int_arg ints[] = {
      {EFDIV_A_ZP, "a_zero_point", -128, 127},         {EFDIV_B_ZP, "b_zero_point", -128, 127},
      {EFDIV_A_MANT, "a_mantissa", 1 << 23, (1 << 24) - 1}, {EFDIV_B_MANT, "b_mantissa", 1 << 23, (1 << 24) - 1},
      {EFDIV_EXP, "exponent", -30, 30},                {EFDIV_OUT_ZP, "output_zero_point", -128, 127}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, EFDIV_OUT, ts, 3, (et_tensor **const[]){&a, &b, &out}));
  CM_TRY(cm_ints(ctx, op, args, ints, 6));
  CM_TRY(cm_requant_args(ctx, op, args, EFDIV_MULT));
  CM_TRY(cm_dtype(ctx, op, a, "a", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, b, "b", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  if (out->dim > EMLKIT_FLOOR_DIV_MAX_DIMS)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: out has %u dims, at most %d supported", op, (unsigned)out->dim,
                   EMLKIT_FLOOR_DIV_MAX_DIMS);
  if (!bcast_steps(a, out, steps) || !bcast_steps(b, out, steps))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: a and b must broadcast to out's sizes", op);
  return ET_OK;
}

et_status op_emlkit_floor_divide_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *const a = args[EFDIV_A]->u.t, *const b = args[EFDIV_B]->u.t;
  et_tensor *const out = args[EFDIV_OUT]->u.t;
  const emlkit_floor_div_params p = {cm_i(args, EFDIV_A_ZP),   cm_i(args, EFDIV_B_ZP), cm_i(args, EFDIV_A_MANT),
                                     cm_i(args, EFDIV_B_MANT), cm_i(args, EFDIV_EXP),  cm_i(args, EFDIV_OUT_ZP),
                                     cm_i(args, EFDIV_MULT),   cm_i(args, EFDIV_SHIFT)};
  if (cm_same_sizes(a, out) && cm_same_sizes(b, out) && cm_layout_is(a, out->dim_order) &&
      cm_layout_is(b, out->dim_order)) { /* one shape and order: a flat walk */
    emk_emlkit_floor_divide_s8((const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data,
                               et_tensor_numel(out), &p);
    return ET_OK;
  }
  emlkit_bcast_walk w;
  bcast_walk(a, b, out, &w);
  emk_emlkit_floor_divide_bcast_s8((const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data, &w, &p);
  return ET_OK;
}

/* ---- emlkit::embedding_bag.out(weight, indices, offsets, mode, include_last_offset, padding_idx,
 * weight_zero_point, output_zero_point, multiplier, shift, per_sample_weights, per_sample_weights_zero_point, out):
 * weight int8 [num, dim], indices and offsets 1-D int64, per_sample_weights None or (mode sum) int8 [len(indices)],
 * out int8 [bags, dim] contiguous. ---- */
ET_PREPARE et_status op_emlkit_embedding_bag_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::embedding_bag";
  et_tensor *w, *idx, *off, *psw, *out;
  int32_t mode, v, last;
  static const cm_tensor_arg ts[] = {{EBAG_WEIGHT, "weight", false},
                                     {EBAG_INDICES, "indices", false},
                                     {EBAG_OFFSETS, "offsets", false},
                                     {EBAG_PSW, "per_sample_weights", true},
                                     {EBAG_OUT, "out", false}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, EBAG_OUT, ts, 5, (et_tensor **const[]){&w, &idx, &off, &psw, &out}));
  CM_TRY(cm_int(ctx, op, args, EBAG_MODE, "mode", 0, 2, &mode));
  CM_TRY(cm_int(ctx, op, args, EBAG_LAST, "include_last_offset", 0, 1, &last));
  CM_TRY(cm_dtype(ctx, op, w, "weight", ET_DT_CHAR));
  CM_TRY(cm_rank(ctx, op, w, "weight", 2));
  CM_TRY(cm_contiguous(ctx, op, w, "weight"));
  CM_TRY(cm_int(ctx, op, args, EBAG_PAD, "padding_idx", -1, w->sizes[0] - 1, &v));
  static const cm_int_arg zps[] = {{EBAG_W_ZP, "weight_zero_point", -128, 127},
                                   {EBAG_OUT_ZP, "output_zero_point", -128, 127},
                                   {EBAG_PSW_ZP, "per_sample_weights_zero_point", -128, 127}};
  CM_TRY(cm_ints(ctx, op, args, zps, 3));
  CM_TRY(cm_requant_args(ctx, op, args, EBAG_MULT));
  CM_TRY(cm_dtype(ctx, op, idx, "indices", ET_DT_LONG));
  CM_TRY(cm_dtype(ctx, op, off, "offsets", ET_DT_LONG));
  CM_TRY(cm_rank(ctx, op, idx, "indices", 1));
  CM_TRY(cm_rank(ctx, op, off, "offsets", 1));
  const int32_t limit = psw ? EMLKIT_BAG_WEIGHTED_MAX_INDICES : EMLKIT_BAG_MAX_INDICES;
  if (idx->sizes[0] > limit)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %ld indices, at most %ld supported%s", op, (long)idx->sizes[0],
                   (long)limit, psw ? " with per-sample weights" : "");
  if (psw) {
    CM_TRY(cm_dtype(ctx, op, psw, "per_sample_weights", ET_DT_CHAR));
    CM_TRY(cm_rank(ctx, op, psw, "per_sample_weights", 1));
    if (psw->sizes[0] != idx->sizes[0] || mode != 0)
      return et_fail(ctx, ET_E_INVALID_ARG,
                     "%s: per_sample_weights need mode sum and one weight per index (%ld, not %ld)", op,
                     (long)idx->sizes[0], (long)psw->sizes[0]);
  }
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
  const et_tensor *const psw = args[EBAG_PSW]->tag == ET_TAG_TENSOR ? args[EBAG_PSW]->u.t : NULL;
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
  /* torch's kernel reads past a short last offset there: its result is undefined (emlkit/emlkit_ops.py) */
  if (cm_i(args, EBAG_LAST) && (cm_i(args, EBAG_MODE) != 0 || cm_i(args, EBAG_PAD) >= 0) && n_off > 0 &&
      ov[n_off - 1] != n_idx)
    return et_fail(ctx, ET_E_INVALID_ARG,
                   "%s: include_last_offset outside mode sum without padding_idx needs the last offset %lld to be "
                   "len(indices) = %ld", op, (long long)ov[n_off - 1], (long)n_idx);
  const emlkit_embedding_bag_params p = {w->sizes[0],           w->sizes[1],           n_idx,
                                         n_off,                 cm_i(args, EBAG_LAST), cm_i(args, EBAG_MODE),
                                         cm_i(args, EBAG_PAD),  cm_i(args, EBAG_W_ZP), cm_i(args, EBAG_OUT_ZP),
                                         cm_i(args, EBAG_MULT), cm_i(args, EBAG_SHIFT), cm_i(args, EBAG_PSW_ZP)};
  emk_emlkit_embedding_bag_s8(&p, (const int8_t *)w->data, iv, ov, psw ? (const int8_t *)psw->data : NULL,
                              (int8_t *)args[EBAG_OUT]->u.t->data);
  return ET_OK;
}
