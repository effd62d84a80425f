/* Adapters for emlkit::softmax, emlkit::log_softmax, emlkit::masked_softmax, emlkit::quantized_avg_pool2d and emlkit::upsample_bilinear2d, the ops with free output
 * qparams (semantics: emlkit/emlkit_ops.py; the layout ops are in emlkit_ops.c).
 * prepare checks every bound the kernels' int64 arithmetic relies on. */
#include "cortex_m_util.h"
#include "emlkit_kernels.h"

/* Argument slots (the operators' schemas in emlkit/emlkit_ops.py, out last). */
enum { ESOFTMAX_IN, ESOFTMAX_EXP_TABLE, ESOFTMAX_DIM, ESOFTMAX_OUT_ZP, ESOFTMAX_MULT, ESOFTMAX_SHIFT, ESOFTMAX_OUT };
enum { ELOGSM_IN, ELOGSM_EXP_TABLE, ELOGSM_DIM, ELOGSM_LOG2_SCALE, ELOGSM_OUT_ZP, ELOGSM_MULT, ELOGSM_SHIFT, ELOGSM_OUT };
enum { EMSM_IN, EMSM_MASK, EMSM_EXP_TABLE, EMSM_DIM, EMSM_OUT_ZP, EMSM_MULT, EMSM_SHIFT, EMSM_OUT };
enum { EAVG_IN, EAVG_KERNEL, EAVG_STRIDE, EAVG_IN_ZP, EAVG_OUT_ZP, EAVG_MULT, EAVG_SHIFT, EAVG_OUT };
enum { EBIL_IN, EBIL_ROWS, EBIL_COLS, EBIL_IN_ZP, EBIL_OUT_ZP, EBIL_MULT, EBIL_SHIFT, EBIL_OUT };

#define EMLKIT_EXP_ONE (1 << 22)
#define EMLKIT_LOG_MAX_K (1 << 23) /* 255 * K + 16 * 2^20 < 2^31: a * mult stays inside int64 */
#define EMLKIT_LOG_MAX_LEN (1 << 16)
#define EMLKIT_MAX_TAPS (1 << 16) /* |sum| <= 255 * 2^16 < 2^24, times mult < 2^31: within int64 */

/* The exp table both softmax ops read: 256 entries in [0, 2^22], entry 0 at least 1 (exactly 2^22 if `one`). */
ET_PREPARE static et_status emlkit_exp_table(et_kernel_ctx *ctx, const char *op, const et_tensor *table, bool one) {
  if (et_tensor_numel(table) != 256 || !table->data)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: exp_table must have 256 entries, got %u", op,
                   (unsigned)et_tensor_numel(table));
  const int32_t *t = (const int32_t *)table->data;
  if (one ? t[0] != EMLKIT_EXP_ONE : (t[0] < 1 || t[0] > EMLKIT_EXP_ONE))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: exp_table[0] = %ld must be %s", op, (long)t[0],
                   one ? "2^22" : "in [1, 2^22]");
  for (int k = 1; k < 256; k++)
    if (t[k] < 0 || t[k] > EMLKIT_EXP_ONE)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: exp_table[%d] = %ld must be in [0, 2^22]", op, k, (long)t[k]);
  return ET_OK;
}

/* Prepare's checks that both softmax ops share (input, exp_table and dim in the same slots; out, the output zero
 * point and the requantization pair at OUT_SLOT, ZP_SLOT and MULT_SLOT): int8 input and out of one shape, dim in
 * range, an int32 exp table (emlkit_exp_table, entry 0 exactly 2^22 if `one`). *in and *dim for the op's own. */
ET_PREPARE static et_status emlkit_exp_prepare(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs,
                                               uint32_t out_slot, uint32_t zp_slot, uint32_t mult_slot, bool one,
                                               et_tensor **in, int32_t *dim) {
  et_tensor *table, *out;
  int32_t zp;
  const cm_tensor_arg ts[] = {{ESOFTMAX_IN, "input", false}, {ESOFTMAX_EXP_TABLE, "exp_table", false},
                              {out_slot, "out", false}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, out_slot, ts, 3, (et_tensor **const[]){in, &table, &out}));
  CM_TRY(cm_int(ctx, op, args, ESOFTMAX_DIM, "dim", -ET_MAX_DIM, ET_MAX_DIM - 1, dim));
  CM_TRY(cm_int(ctx, op, args, zp_slot, "output_zero_point", -128, 127, &zp));
  CM_TRY(cm_requant_args(ctx, op, args, mult_slot));
  CM_TRY(cm_dtype(ctx, op, *in, "input", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, table, "exp_table", ET_DT_INT));
  CM_TRY(emlkit_exp_table(ctx, op, table, one));
  return cm_softmax_shapes(ctx, op, *in, out, *dim);
}

/* Eval's arguments that both softmax ops share (input, exp_table and dim in the same slots, out at OUT_SLOT): the
 * int8 input and output viewed around dim as [outer][len][inner], and the table; false for an empty input. */
_Static_assert((int)ESOFTMAX_IN == ELOGSM_IN && (int)ESOFTMAX_EXP_TABLE == ELOGSM_EXP_TABLE && (int)ESOFTMAX_DIM == ELOGSM_DIM,
               "the softmax ops' leading slots");
typedef struct {
  const int8_t *in;
  int8_t *out;
  int32_t outer, len, inner;
  const int32_t *table;
} emlkit_exp_args;
static bool emlkit_exp_args_of(et_value **args, uint32_t out_slot, emlkit_exp_args *e) {
  const et_tensor *in;
  et_tensor *out;
  int32_t v[3]; /* around dim */
  if (!cm_io_view(args, ESOFTMAX_IN, out_slot, cm_i(args, ESOFTMAX_DIM), &in, &out, v)) return false;
  *e = (emlkit_exp_args){(const int8_t *)in->data, (int8_t *)out->data, v[0], v[1], v[2],
                         (const int32_t *)args[ESOFTMAX_EXP_TABLE]->u.t->data};
  return true;
}

/* emlkit::softmax.out(input, exp_table, dim, output_zero_point, output_multiplier, output_shift, out) */
ET_PREPARE et_status op_emlkit_softmax_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  et_tensor *in;
  int32_t dim;
  return emlkit_exp_prepare(ctx, "emlkit::softmax", args, nargs, ESOFTMAX_OUT, ESOFTMAX_OUT_ZP, ESOFTMAX_MULT, false,
                            &in, &dim);
}

et_status op_emlkit_softmax_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  emlkit_exp_args e;
  if (emlkit_exp_args_of(args, ESOFTMAX_OUT, &e))
    emk_emlkit_softmax_s8(e.in, e.out, e.outer, e.len, e.inner, e.table, cm_i(args, ESOFTMAX_OUT_ZP),
                          cm_i(args, ESOFTMAX_MULT), cm_i(args, ESOFTMAX_SHIFT));
  return ET_OK;
}

/* emlkit::log_softmax.out(input, exp_table, dim, input_log2_scale, output_zero_point, output_multiplier,
 * output_shift, out) */
ET_PREPARE et_status op_emlkit_log_softmax_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::log_softmax";
  et_tensor *in;
  int32_t dim, k, outer, len, inner;
  CM_TRY(emlkit_exp_prepare(ctx, op, args, nargs, ELOGSM_OUT, ELOGSM_OUT_ZP, ELOGSM_MULT, true, &in, &dim));
  CM_TRY(cm_int(ctx, op, args, ELOGSM_LOG2_SCALE, "input_log2_scale", 1, EMLKIT_LOG_MAX_K, &k));
  cm_dim_view(in, dim, &outer, &len, &inner);
  if (len > EMLKIT_LOG_MAX_LEN)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: dim %d has %ld elements, at most %d supported", op, (int)dim,
                   (long)len, EMLKIT_LOG_MAX_LEN);
  return ET_OK;
}

et_status op_emlkit_log_softmax_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  emlkit_exp_args e;
  if (emlkit_exp_args_of(args, ELOGSM_OUT, &e))
    emk_emlkit_log_softmax_s8(e.in, e.out, e.outer, e.len, e.inner, e.table, cm_i(args, ELOGSM_LOG2_SCALE),
                              cm_i(args, ELOGSM_OUT_ZP), cm_i(args, ELOGSM_MULT), cm_i(args, ELOGSM_SHIFT));
  return ET_OK;
}

/* emlkit::masked_softmax: emlkit::softmax with a bool mask broadcast to the input. Eval walks the rows (the softmax
 * dim last, the others in the input's memory order, the mask's steps 0 where it is broadcast). */
/* The walk over the rows of `in` (rank dims, each logical dim d at walk position pos[d]); false when the mask does
 * not broadcast to in's sizes. */
static bool masked_walk(const et_tensor *in, const et_tensor *mask, int32_t dim, emlkit_row_walk *w) {
  size_t xs[ET_MAX_DIM], ms[ET_MAX_DIM];
  if (mask->dim > in->dim) return false;
  et_tensor_strides(in, xs);
  et_tensor_strides(mask, ms);
  const uint8_t lead = (uint8_t)(in->dim - mask->dim);
  int32_t k = 0;
  w->rank = in->dim;
  for (uint8_t j = 0; j <= in->dim; j++) { /* memory order, then dim itself last */
    const int32_t d = j < in->dim ? in->dim_order[j] : dim;
    if (j < in->dim && d == dim) continue;
    const int32_t s = d < lead ? 1 : mask->sizes[d - lead];
    if (s != 1 && s != in->sizes[d]) return false;
    w->size[k] = in->sizes[d];
    w->x_step[k] = (int32_t)xs[d];
    w->m_step[k] = s == 1 ? 0 : (int32_t)ms[d - lead];
    k++;
  }
  return true;
}

/* emlkit::masked_softmax.out(input, mask, exp_table, dim, output_zero_point, output_multiplier, output_shift, out) */
ET_PREPARE et_status op_emlkit_masked_softmax_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::masked_softmax";
  et_tensor *in, *mask, *table, *out;
  int32_t dim, zp;
  emlkit_row_walk w;
  static const cm_tensor_arg ts[] = {{EMSM_IN, "input", false}, {EMSM_MASK, "mask", false},
                                     {EMSM_EXP_TABLE, "exp_table", false}, {EMSM_OUT, "out", false}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, EMSM_OUT, ts, 4, (et_tensor **const[]){&in, &mask, &table, &out}));
  CM_TRY(cm_int(ctx, op, args, EMSM_DIM, "dim", -EMLKIT_MASKED_SOFTMAX_MAX_DIMS, EMLKIT_MASKED_SOFTMAX_MAX_DIMS - 1,
                &dim));
  CM_TRY(cm_int(ctx, op, args, EMSM_OUT_ZP, "output_zero_point", -128, 127, &zp));
  CM_TRY(cm_requant_args(ctx, op, args, EMSM_MULT));
  CM_TRY(cm_dtype(ctx, op, in, "input", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, mask, "mask", ET_DT_BOOL));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, table, "exp_table", ET_DT_INT));
  if (in->dim < 1 || in->dim > EMLKIT_MASKED_SOFTMAX_MAX_DIMS)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: the input must have 1 to %d dims, got %u", op,
                   EMLKIT_MASKED_SOFTMAX_MAX_DIMS, (unsigned)in->dim);
  CM_TRY(cm_softmax_shapes(ctx, op, in, out, dim));
  if (!masked_walk(in, mask, dim < 0 ? dim + in->dim : dim, &w))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: mask does not broadcast to the input's sizes", op);
  return emlkit_exp_table(ctx, op, table, false);
}

et_status op_emlkit_masked_softmax_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *in;
  et_tensor *out;
  if (!cm_io(args, EMSM_IN, EMSM_OUT, &in, &out)) return ET_OK;
  const et_tensor *mask = args[EMSM_MASK]->u.t;
  const int32_t dim = cm_i(args, EMSM_DIM);
  emlkit_row_walk w;
  (void)masked_walk(in, mask, dim < 0 ? dim + in->dim : dim, &w); /* prepare has checked it */
  emk_emlkit_masked_softmax_s8((const int8_t *)in->data, (const uint8_t *)mask->data, (int8_t *)out->data, &w,
                               (const int32_t *)args[EMSM_EXP_TABLE]->u.t->data, cm_i(args, EMSM_OUT_ZP),
                               cm_i(args, EMSM_MULT), cm_i(args, EMSM_SHIFT));
  return ET_OK;
}

/* emlkit::quantized_avg_pool2d.out(input, kernel_size, stride, input_zero_point, output_zero_point,
 * multiplier, shift, out): logical NCHW, channels-last bytes (as cortex_m::quantized_avg_pool2d). */
ET_PREPARE et_status op_emlkit_quantized_avg_pool2d_out_prepare(et_kernel_ctx *ctx, et_value **args,
                                                                uint32_t nargs) {
  const char *op = "emlkit::quantized_avg_pool2d";
  et_tensor *in, *out;
  int32_t k[2], s[2], di[4], d_o[4];
  static const cm_tensor_arg ts[] = {{EAVG_IN, "input", false}, {EAVG_OUT, "out", false}};
  static const cm_int_arg zps[] = {{EAVG_IN_ZP, "input_zero_point", -128, 127},
                                   {EAVG_OUT_ZP, "output_zero_point", -128, 127}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, EAVG_OUT, ts, 2, (et_tensor **const[]){&in, &out}));
  CM_TRY(cm_pair(ctx, op, args, EAVG_KERNEL, "kernel_size", 1, 4096, k));
  CM_TRY(cm_pair(ctx, op, args, EAVG_STRIDE, "stride", 1, 4096, s));
  CM_TRY(cm_ints(ctx, op, args, zps, 2));
  CM_TRY(cm_requant_args(ctx, op, args, EAVG_MULT));
  if ((int64_t)k[0] * k[1] > EMLKIT_MAX_TAPS)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: window %dx%d has more than %d taps", op, (int)k[0], (int)k[1],
                   EMLKIT_MAX_TAPS);
  CM_TRY(cm_dtype(ctx, op, in, "input", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  CM_TRY(cm_nhwc(ctx, op, in, "input", false, di));
  CM_TRY(cm_nhwc(ctx, op, out, "out", false, d_o));
  if (k[0] > di[1] || k[1] > di[2])
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: window %dx%d is larger than the %dx%d input", op, (int)k[0],
                   (int)k[1], (int)di[1], (int)di[2]);
  const int32_t oh = (di[1] - k[0]) / s[0] + 1, ow = (di[2] - k[1]) / s[1] + 1;
  if (d_o[0] != di[0] || d_o[1] != oh || d_o[2] != ow || d_o[3] != di[3])
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out is NHWC [%d,%d,%d,%d] but the geometry gives [%d,%d,%d,%d]", op,
                   (int)d_o[0], (int)d_o[1], (int)d_o[2], (int)d_o[3], (int)di[0], (int)oh, (int)ow, (int)di[3]);
  return ET_OK;
}

et_status op_emlkit_quantized_avg_pool2d_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *in;
  et_tensor *out;
  if (!cm_io(args, EAVG_IN, EAVG_OUT, &in, &out)) return ET_OK;
  int32_t k[2], s[2], di[4], d_o[4];
  cm_pair_get(args, EAVG_KERNEL, k);
  cm_pair_get(args, EAVG_STRIDE, s);
  cm_nhwc_get(in, false, di);
  cm_nhwc_get(out, false, d_o);
  const qpool_params p = {di[0], di[1], di[2], di[3], d_o[1], d_o[2], k[0], k[1], s[0], s[1], 0, 0};
  emk_emlkit_avg_pool2d_s8(&p, (const int8_t *)in->data, (int8_t *)out->data, cm_i(args, EAVG_IN_ZP), cm_i(args, EAVG_OUT_ZP),
                    cm_i(args, EAVG_MULT), cm_i(args, EAVG_SHIFT));
  return ET_OK;
}

/* emlkit::upsample_bilinear2d.out(x, rows, cols, input_zero_point, output_zero_point, multiplier, shift, out):
 * logical NCHW; input and output share one dim order, channels-last (the kernel's NHWC) or contiguous NCHW
 * (NHWC with one channel and N * C images). Prepare checks every table entry once; eval trusts them. */
ET_PREPARE static et_status bil_table(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name,
                                      int32_t out_len, int32_t in_len) {
  CM_TRY(cm_dtype(ctx, op, t, name, ET_DT_INT));
  if (t->dim != 2 || t->sizes[0] != out_len || t->sizes[1] != 3 || !t->data)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s must be an int32 [%ld, 3] table", op, name, (long)out_len);
  const int32_t *v = (const int32_t *)t->data;
  for (int32_t i = 0; i < out_len; i++) {
    const int32_t i0 = v[3 * i], i1 = v[3 * i + 1], w = v[3 * i + 2];
    if (i0 < 0 || i0 >= in_len || i1 < 0 || i1 >= in_len || w < 0 || w > EMLKIT_BILINEAR_ONE)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s[%ld] = (%ld, %ld, %ld): an index outside [0, %ld) or a weight "
                     "outside [0, %d]", op, name, (long)i, (long)i0, (long)i1, (long)w, (long)in_len,
                     EMLKIT_BILINEAR_ONE);
  }
  return ET_OK;
}

ET_PREPARE et_status op_emlkit_upsample_bilinear2d_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::upsample_bilinear2d";
  et_tensor *in, *rows, *cols, *out;
  static const cm_tensor_arg ts[] = {{EBIL_IN, "x", false}, {EBIL_ROWS, "rows", false}, {EBIL_COLS, "cols", false},
                                     {EBIL_OUT, "out", false}};
  static const cm_int_arg zps[] = {{EBIL_IN_ZP, "input_zero_point", -128, 127},
                                   {EBIL_OUT_ZP, "output_zero_point", -128, 127}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, EBIL_OUT, ts, 4, (et_tensor **const[]){&in, &rows, &cols, &out}));
  CM_TRY(cm_ints(ctx, op, args, zps, 2));
  CM_TRY(cm_requant_args(ctx, op, args, EBIL_MULT));
  CM_TRY(cm_s8_map_pair(ctx, op, in, out));
  CM_TRY(bil_table(ctx, op, rows, "rows", out->sizes[2], in->sizes[2]));
  return bil_table(ctx, op, cols, "cols", out->sizes[3], in->sizes[3]);
}

et_status op_emlkit_upsample_bilinear2d_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  cm_s8_map m;
  if (!cm_s8_map_io(args, EBIL_IN, EBIL_ROWS, EBIL_COLS, EBIL_OUT, &m)) return ET_OK;
  emk_emlkit_resize_bilinear_s8(m.in, m.out, m.images, m.ih, m.iw, m.c, m.oh, m.ow, m.rows, m.cols,
                                cm_i(args, EBIL_IN_ZP), cm_i(args, EBIL_OUT_ZP), cm_i(args, EBIL_MULT),
                                cm_i(args, EBIL_SHIFT));
  return ET_OK;
}
