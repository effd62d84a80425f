/* Adapter for emlkit::lstm (schema and Python reference: emlkit/emlkit_ops.py; the compile-time constants:
 * emlkit/passes/emlkit_lstm.py). Prepare checks once every bound the kernel's int32/int64 arithmetic relies on,
 * the constant requantization and table entries included (the same checks, in the same words, as
 * check_lstm_args in the reference); eval only unpacks and calls the kernel. */
#include "cortex_m_util.h"
#include "emlkit_kernels.h"

/* Argument slots (the schema's order, then the two outputs). */
enum {
  ELSTM_X, ELSTM_W_IH, ELSTM_W_HH, ELSTM_BIAS, ELSTM_REQUANT, ELSTM_TABLES, ELSTM_BATCH_FIRST, ELSTM_X_ZP,
  ELSTM_H_ZP, ELSTM_CELL_FRAC, ELSTM_OUT_MULT, ELSTM_OUT_SHIFT, ELSTM_OUT, ELSTM_CELL
};

#define ELSTM_MAX_FEATURES (1 << 14) /* |dot| <= 127 * 255 * 2^14 < 2^29: int32 */
#define ELSTM_MAX_BIAS (1 << 24)

static const char *const k_lstm = "emlkit::lstm";

ET_PREPARE static et_status lstm_fail(et_kernel_ctx *ctx, const char *what) {
  return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s", k_lstm, what);
}

ET_PREPARE et_status op_emlkit_lstm_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = k_lstm;
  et_tensor *x, *w_ih, *w_hh, *bias, *rq, *tables, *out, *cell;
  int32_t bf, xzp, hzp, frac, mult, shift;
  if (nargs < ELSTM_CELL + 1 || nargs > ELSTM_CELL + 3)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: got %u arguments, expected %u (schema args + out + cell)", op,
                   (unsigned)nargs, (unsigned)(ELSTM_CELL + 1));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_X, "x", false, &x));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_W_IH, "w_ih", false, &w_ih));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_W_HH, "w_hh", false, &w_hh));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_BIAS, "bias", false, &bias));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_REQUANT, "requant", false, &rq));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_TABLES, "tables", false, &tables));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_OUT, "out", false, &out));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_CELL, "cell", false, &cell));
  CM_TRY(cm_int(ctx, op, args, ELSTM_BATCH_FIRST, "batch_first", 0, 1, &bf));
  CM_TRY(cm_int(ctx, op, args, ELSTM_X_ZP, "input_zero_point", -128, 127, &xzp));
  CM_TRY(cm_int(ctx, op, args, ELSTM_H_ZP, "output_zero_point", -128, 127, &hzp));
  CM_TRY(cm_int(ctx, op, args, ELSTM_CELL_FRAC, "cell_frac_bits", 11, 15, &frac));
  CM_TRY(cm_int(ctx, op, args, ELSTM_OUT_MULT, "output_multiplier", (int64_t)1 << 30, INT32_MAX, &mult));
  CM_TRY(cm_int(ctx, op, args, ELSTM_OUT_SHIFT, "output_shift", 1, 62, &shift));
  CM_TRY(cm_dtype(ctx, op, x, "x", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, cell, "cell", ET_DT_SHORT));
  CM_TRY(cm_rank(ctx, op, x, "x", 3));
  CM_TRY(cm_rank(ctx, op, out, "out", 3));
  CM_TRY(cm_contiguous(ctx, op, x, "x"));
  CM_TRY(cm_contiguous(ctx, op, out, "out"));
  CM_TRY(cm_contiguous(ctx, op, cell, "cell"));
  const int32_t in = x->sizes[2];
  const int32_t hid4 = w_ih->dim == 2 ? w_ih->sizes[0] : 0, hid = hid4 / 4;
  if (w_ih->dtype != ET_DT_CHAR || w_hh->dtype != ET_DT_CHAR || hid4 % 4 || hid4 == 0 || w_ih->sizes[1] != in ||
      w_hh->dim != 2 || w_hh->sizes[0] != hid4 || w_hh->sizes[1] != hid || !w_ih->data || !w_hh->data)
    return lstm_fail(ctx, "w_ih must be int8 [4H, I] with I = x's last dim and w_hh int8 [4H, H]");
  if (in > ELSTM_MAX_FEATURES || hid > ELSTM_MAX_FEATURES)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input and hidden sizes must be at most %d", op, ELSTM_MAX_FEATURES);
  if (bias->dtype != ET_DT_INT || bias->dim != 1 || bias->sizes[0] != hid4 || !bias->data)
    return lstm_fail(ctx, "bias must be int32 [4H] within +-2^24");
  const int32_t *b = (const int32_t *)bias->data;
  for (int32_t r = 0; r < hid4; r++)
    if (b[r] < -ELSTM_MAX_BIAS || b[r] > ELSTM_MAX_BIAS) return lstm_fail(ctx, "bias must be int32 [4H] within +-2^24");
  if (rq->dtype != ET_DT_INT || rq->dim != 2 || rq->sizes[0] != hid4 || rq->sizes[1] != 4 || !rq->data)
    return lstm_fail(ctx, "requant must be int32 [4H, 4]");
  const int32_t *q = (const int32_t *)rq->data;
  for (int32_t k = 0; k < 4 * hid4; k += 2)
    if (q[k] < (1 << 30) || q[k + 1] < 1 || q[k + 1] > 62)
      return lstm_fail(ctx, "requant multipliers must be in [2^30, 2^31) and shifts in [1, 62]");
  if (tables->dtype != ET_DT_SHORT || tables->dim != 2 || tables->sizes[0] != 2 ||
      tables->sizes[1] != EMLKIT_LSTM_TABLE_LEN || !tables->data)
    return lstm_fail(ctx, "tables must be int16 [2, 513] within +-32767");
  const int16_t *tv = (const int16_t *)tables->data;
  for (int32_t k = 0; k < 2 * EMLKIT_LSTM_TABLE_LEN; k++)
    if (tv[k] < -32767) return lstm_fail(ctx, "tables must be int16 [2, 513] within +-32767");
  const int32_t batch = bf ? x->sizes[0] : x->sizes[1];
  if (out->sizes[0] != x->sizes[0] || out->sizes[1] != x->sizes[1] || out->sizes[2] != hid)
    return lstm_fail(ctx, "out must be x's shape with H features");
  if (cell->dim != 2 || cell->sizes[0] != batch || cell->sizes[1] != hid)
    return lstm_fail(ctx, "cell must be int16 [B, H]");
  return ET_OK;
}

et_status op_emlkit_lstm_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *const x = args[ELSTM_X]->u.t, *const w_ih = args[ELSTM_W_IH]->u.t;
  const int32_t bf = cm_i(args, ELSTM_BATCH_FIRST);
  const emlkit_lstm_params p = {bf ? x->sizes[0] : x->sizes[1], bf ? x->sizes[1] : x->sizes[0], x->sizes[2],
                                w_ih->sizes[0] / 4, bf, cm_i(args, ELSTM_X_ZP), cm_i(args, ELSTM_H_ZP),
                                cm_i(args, ELSTM_CELL_FRAC), cm_i(args, ELSTM_OUT_MULT), cm_i(args, ELSTM_OUT_SHIFT)};
  emk_emlkit_lstm_s8(&p, (const int8_t *)x->data, (int8_t *)args[ELSTM_OUT]->u.t->data,
                     (int16_t *)args[ELSTM_CELL]->u.t->data, (const int8_t *)w_ih->data,
                     (const int8_t *)args[ELSTM_W_HH]->u.t->data, (const int32_t *)args[ELSTM_BIAS]->u.t->data,
                     (const int32_t *)args[ELSTM_REQUANT]->u.t->data, (const int16_t *)args[ELSTM_TABLES]->u.t->data);
  return ET_OK;
}

/* ---------------------------------------------------------------- emlkit::gru
 * emlkit::gru.out(x, w_ih, w_hh, bias, requant, tables, batch_first, input_zero_point, output_zero_point,
 * h_multiplier, h_shift, output_multiplier, output_shift, out): the LSTM's checks with three gate rows per unit,
 * bias [4H] (the x-side biases, then b_hn) and h's Q0.15 requantization. */
enum {
  EGRU_X, EGRU_W_IH, EGRU_W_HH, EGRU_BIAS, EGRU_REQUANT, EGRU_TABLES, EGRU_BATCH_FIRST, EGRU_X_ZP, EGRU_H_ZP,
  EGRU_H_MULT, EGRU_H_SHIFT, EGRU_OUT_MULT, EGRU_OUT_SHIFT, EGRU_OUT
};

static const char *const k_gru = "emlkit::gru";

ET_PREPARE static et_status gru_fail(et_kernel_ctx *ctx, const char *what) {
  return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s", k_gru, what);
}

ET_PREPARE et_status op_emlkit_gru_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = k_gru;
  et_tensor *x, *w_ih, *w_hh, *bias, *rq, *tables, *out;
  int32_t bf, xzp, hzp, v;
  CM_TRY(cm_nargs(ctx, op, nargs, EGRU_OUT));
  CM_TRY(cm_tensor(ctx, op, args, EGRU_X, "x", false, &x));
  CM_TRY(cm_tensor(ctx, op, args, EGRU_W_IH, "w_ih", false, &w_ih));
  CM_TRY(cm_tensor(ctx, op, args, EGRU_W_HH, "w_hh", false, &w_hh));
  CM_TRY(cm_tensor(ctx, op, args, EGRU_BIAS, "bias", false, &bias));
  CM_TRY(cm_tensor(ctx, op, args, EGRU_REQUANT, "requant", false, &rq));
  CM_TRY(cm_tensor(ctx, op, args, EGRU_TABLES, "tables", false, &tables));
  CM_TRY(cm_tensor(ctx, op, args, EGRU_OUT, "out", false, &out));
  CM_TRY(cm_int(ctx, op, args, EGRU_BATCH_FIRST, "batch_first", 0, 1, &bf));
  CM_TRY(cm_int(ctx, op, args, EGRU_X_ZP, "input_zero_point", -128, 127, &xzp));
  CM_TRY(cm_int(ctx, op, args, EGRU_H_ZP, "output_zero_point", -128, 127, &hzp));
  CM_TRY(cm_int(ctx, op, args, EGRU_H_MULT, "h_multiplier", (int64_t)1 << 30, INT32_MAX, &v));
  CM_TRY(cm_int(ctx, op, args, EGRU_H_SHIFT, "h_shift", 1, 62, &v));
  CM_TRY(cm_int(ctx, op, args, EGRU_OUT_MULT, "output_multiplier", (int64_t)1 << 30, INT32_MAX, &v));
  CM_TRY(cm_int(ctx, op, args, EGRU_OUT_SHIFT, "output_shift", 1, 62, &v));
  CM_TRY(cm_dtype(ctx, op, x, "x", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  CM_TRY(cm_rank(ctx, op, x, "x", 3));
  CM_TRY(cm_rank(ctx, op, out, "out", 3));
  CM_TRY(cm_contiguous(ctx, op, x, "x"));
  CM_TRY(cm_contiguous(ctx, op, out, "out"));
  const int32_t in = x->sizes[2];
  const int32_t hid3 = w_ih->dim == 2 ? w_ih->sizes[0] : 0, hid = hid3 / 3;
  if (w_ih->dtype != ET_DT_CHAR || w_hh->dtype != ET_DT_CHAR || hid3 % 3 || hid3 == 0 || w_ih->sizes[1] != in ||
      w_hh->dim != 2 || w_hh->sizes[0] != hid3 || w_hh->sizes[1] != hid || !w_ih->data || !w_hh->data)
    return gru_fail(ctx, "x must be 3-D int8, w_ih int8 [3H, I] and w_hh int8 [3H, H]");
  if (in > ELSTM_MAX_FEATURES || hid > ELSTM_MAX_FEATURES)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input and hidden sizes must be at most %d", op, ELSTM_MAX_FEATURES);
  if (bias->dtype != ET_DT_INT || bias->dim != 1 || bias->sizes[0] != 4 * hid || !bias->data)
    return gru_fail(ctx, "bias must be int32 [4H] within +-2^24");
  const int32_t *b = (const int32_t *)bias->data;
  for (int32_t r = 0; r < 4 * hid; r++)
    if (b[r] < -ELSTM_MAX_BIAS || b[r] > ELSTM_MAX_BIAS) return gru_fail(ctx, "bias must be int32 [4H] within +-2^24");
  if (rq->dtype != ET_DT_INT || rq->dim != 2 || rq->sizes[0] != hid3 || rq->sizes[1] != 4 || !rq->data)
    return gru_fail(ctx, "requant must be int32 [3H, 4], multipliers in [2^30, 2^31) and shifts in [1, 62]");
  const int32_t *q = (const int32_t *)rq->data;
  for (int32_t k = 0; k < 4 * hid3; k += 2)
    if (q[k] < (1 << 30) || q[k + 1] < 1 || q[k + 1] > 62)
      return gru_fail(ctx, "requant must be int32 [3H, 4], multipliers in [2^30, 2^31) and shifts in [1, 62]");
  if (tables->dtype != ET_DT_SHORT || tables->dim != 2 || tables->sizes[0] != 2 ||
      tables->sizes[1] != EMLKIT_LSTM_TABLE_LEN || !tables->data)
    return gru_fail(ctx, "tables must be int16 [2, 513] within +-32767");
  const int16_t *tv = (const int16_t *)tables->data;
  for (int32_t k = 0; k < 2 * EMLKIT_LSTM_TABLE_LEN; k++)
    if (tv[k] < -32767) return gru_fail(ctx, "tables must be int16 [2, 513] within +-32767");
  if (out->sizes[0] != x->sizes[0] || out->sizes[1] != x->sizes[1] || out->sizes[2] != hid)
    return gru_fail(ctx, "out must be x's shape with H features");
  return ET_OK;
}

et_status op_emlkit_gru_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *const x = args[EGRU_X]->u.t, *const w_ih = args[EGRU_W_IH]->u.t;
  const int32_t bf = cm_i(args, EGRU_BATCH_FIRST);
  const emlkit_gru_params p = {bf ? x->sizes[0] : x->sizes[1], bf ? x->sizes[1] : x->sizes[0], x->sizes[2],
                               w_ih->sizes[0] / 3, bf, cm_i(args, EGRU_X_ZP), cm_i(args, EGRU_H_ZP),
                               cm_i(args, EGRU_H_MULT), cm_i(args, EGRU_H_SHIFT), cm_i(args, EGRU_OUT_MULT),
                               cm_i(args, EGRU_OUT_SHIFT)};
  emk_emlkit_gru_s8(&p, (const int8_t *)x->data, (int8_t *)args[EGRU_OUT]->u.t->data, (const int8_t *)w_ih->data,
                    (const int8_t *)args[EGRU_W_HH]->u.t->data, (const int32_t *)args[EGRU_BIAS]->u.t->data,
                    (const int32_t *)args[EGRU_REQUANT]->u.t->data, (const int16_t *)args[EGRU_TABLES]->u.t->data);
  return ET_OK;
}
