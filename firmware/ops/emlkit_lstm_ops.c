/* Adapter for emlkit::lstm (schema and Python reference: emlkit/emlkit_ops.py; the compile-time constants:
 * emlkit/passes/emlkit_lstm.py). Prepare checks once every bound the kernel's int32/int64 arithmetic relies on,
 * the constant requantization and table entries included (the same checks, in the same words, as
 * check_lstm_args in the reference); eval only unpacks and calls the kernel. */
#include "cortex_m_util.h"
#include "emlkit_kernels.h"

#include <string.h>

/* Argument slots both ops share (the schema's order), then each op's own. */
enum { RNN_X, RNN_W_IH, RNN_W_HH, RNN_BIAS, RNN_REQUANT, RNN_TABLES, RNN_BATCH_FIRST, RNN_X_ZP, RNN_H_ZP };
enum { ELSTM_X = RNN_X, ELSTM_W_IH = RNN_W_IH, ELSTM_W_HH = RNN_W_HH, ELSTM_BIAS = RNN_BIAS, ELSTM_REQUANT = RNN_REQUANT,
       ELSTM_TABLES = RNN_TABLES, ELSTM_BATCH_FIRST = RNN_BATCH_FIRST, ELSTM_X_ZP = RNN_X_ZP, ELSTM_H_ZP = RNN_H_ZP,
       ELSTM_CELL_FRAC, ELSTM_OUT_MULT, ELSTM_OUT_SHIFT, ELSTM_STATE_BYTES, ELSTM_H0, ELSTM_C0, ELSTM_OUT, ELSTM_CELL };
/* emlkit::gru.out(x, w_ih, w_hh, bias, requant, tables, batch_first, input_zero_point, output_zero_point,
 * h_multiplier, h_shift, output_multiplier, output_shift, state_bytes, h0, out): the LSTM's checks with three gate
 * rows per unit, bias [4H] (the x-side biases, then b_hn) and h's Q0.15 requantization; h0 None or B * H codes. */
enum { EGRU_X = RNN_X, EGRU_W_IH = RNN_W_IH, EGRU_W_HH = RNN_W_HH, EGRU_BIAS = RNN_BIAS, EGRU_REQUANT = RNN_REQUANT,
       EGRU_TABLES = RNN_TABLES, EGRU_BATCH_FIRST = RNN_BATCH_FIRST, EGRU_X_ZP = RNN_X_ZP, EGRU_H_ZP = RNN_H_ZP,
       EGRU_H_MULT, EGRU_H_SHIFT, EGRU_OUT_MULT, EGRU_OUT_SHIFT, EGRU_STATE_BYTES, EGRU_H0, EGRU_OUT };
/* emlkit_ops.def sizes each call's kept state by its state_bytes argument (ET_STATE_FROM_ARG) */
_Static_assert(ELSTM_STATE_BYTES == 12 && EGRU_STATE_BYTES == 13, "emlkit_ops.def's state argument index");

/* A streaming call's kept state (state_bytes > 0, emlkit/emlkit_ops.py: lstm_state_bytes, gru_state_bytes), in
 * the per-call memory the runtime keeps across executions and zeroes at load and eml_reset_state: a header whose
 * `started` is 0 until a first run has left a state, then (LSTM) int16 c [B][H], then int8 h codes [B][H]. */
#define RNN_STATE_HEADER 8
typedef struct {
  uint32_t started, pad;
} rnn_state_header;
_Static_assert(sizeof(rnn_state_header) == RNN_STATE_HEADER, "state header");

#define ELSTM_MAX_FEATURES (1 << 14) /* |dot| <= 127 * 255 * 2^14 < 2^29: int32 */
#define ELSTM_MAX_BIAS (1 << 24)

static const char *const k_lstm = "emlkit::lstm";
static const char *const k_gru = "emlkit::gru";

typedef struct {
  et_tensor *x, *w_ih, *w_hh, *bias, *rq, *tables, *out;
  int32_t batch_first;
} rnn_args;

/* Each op's wording of the shared checks (the reference's, emlkit/emlkit_ops.py). */
typedef struct {
  const char *weights, *requant_shape, *requant_range;
} rnn_words;

ET_PREPARE static et_status rnn_fail(et_kernel_ctx *ctx, const char *op, const char *what) {
  return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s", op, what);
}

/* The shared slots and OUT: tensors, batch_first and the zero points' ranges. */
ET_PREPARE static et_status rnn_fetch(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t out_slot,
                                      rnn_args *a) {
  int32_t zp;
  CM_TRY(cm_tensor(ctx, op, args, RNN_X, "x", false, &a->x));
  CM_TRY(cm_tensor(ctx, op, args, RNN_W_IH, "w_ih", false, &a->w_ih));
  CM_TRY(cm_tensor(ctx, op, args, RNN_W_HH, "w_hh", false, &a->w_hh));
  CM_TRY(cm_tensor(ctx, op, args, RNN_BIAS, "bias", false, &a->bias));
  CM_TRY(cm_tensor(ctx, op, args, RNN_REQUANT, "requant", false, &a->rq));
  CM_TRY(cm_tensor(ctx, op, args, RNN_TABLES, "tables", false, &a->tables));
  CM_TRY(cm_tensor(ctx, op, args, out_slot, "out", false, &a->out));
  CM_TRY(cm_int(ctx, op, args, RNN_BATCH_FIRST, "batch_first", 0, 1, &a->batch_first));
  CM_TRY(cm_int(ctx, op, args, RNN_X_ZP, "input_zero_point", -128, 127, &zp));
  CM_TRY(cm_int(ctx, op, args, RNN_H_ZP, "output_zero_point", -128, 127, &zp));
  return ET_OK;
}

/* state_bytes (slot SLOT) is 0 or exactly WANT, and the runtime gave the call that much memory. */
ET_PREPARE static et_status rnn_state_check(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t slot,
                                            int64_t want, const char *what) {
  int32_t v;
  CM_TRY(cm_int(ctx, op, args, slot, "state_bytes", 0, INT32_MAX, &v));
  if (v != 0 && v != want) return et_fail(ctx, ET_E_INVALID_ARG, "%s: state_bytes must be 0 or %s", op, what);
  if (v != 0 && (ctx->state == NULL || ctx->state_size < (size_t)v))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: the runtime gave %u bytes of state, the call needs %d", op,
                   (unsigned)(ctx->state ? ctx->state_size : 0), (int)v);
  return ET_OK;
}

/* After a streaming run: the last step's h codes of every batch row (Y's layout) into the kept state. */
static void rnn_keep_h(int8_t *dst, const int8_t *y, int32_t batch, int32_t steps, int32_t hid, int32_t batch_first) {
  for (int32_t b = 0; b < batch; b++) {
    const int8_t *src = batch_first ? y + ((size_t)b * steps + steps - 1) * hid : y + ((size_t)(steps - 1) * batch + b) * hid;
    memcpy(dst + (size_t)b * hid, src, (size_t)hid);
  }
}

/* Everything the kernels' int32/int64 arithmetic relies on for GATES gate rows per hidden unit: x and out 3-D
 * contiguous int8, the weights' shapes, the sizes' bound, bias [4H] within +-2^24, requant [GATES*H, 4] in range,
 * the two int16 tables, out x's shape with H features. *HID: H. */
ET_PREPARE static et_status rnn_check(et_kernel_ctx *ctx, const char *op, const rnn_args *a, int32_t gates,
                                      const rnn_words *w, int32_t *hid_out) {
  const et_tensor *x = a->x, *w_ih = a->w_ih, *w_hh = a->w_hh, *bias = a->bias, *rq = a->rq, *tables = a->tables;
  CM_TRY(cm_dtype(ctx, op, x, "x", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, a->out, "out", ET_DT_CHAR));
  CM_TRY(cm_rank(ctx, op, x, "x", 3));
  CM_TRY(cm_rank(ctx, op, a->out, "out", 3));
  CM_TRY(cm_contiguous(ctx, op, x, "x"));
  CM_TRY(cm_contiguous(ctx, op, a->out, "out"));
  const int32_t in = x->sizes[2];
  const int32_t rows = w_ih->dim == 2 ? w_ih->sizes[0] : 0, hid = rows / gates;
  if (w_ih->dtype != ET_DT_CHAR || w_hh->dtype != ET_DT_CHAR || rows % gates || rows == 0 || w_ih->sizes[1] != in ||
      w_hh->dim != 2 || w_hh->sizes[0] != rows || w_hh->sizes[1] != hid || !w_ih->data || !w_hh->data)
    return rnn_fail(ctx, op, w->weights);
  if (in > ELSTM_MAX_FEATURES || hid > ELSTM_MAX_FEATURES)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input and hidden sizes must be at most %d", op, ELSTM_MAX_FEATURES);
  if (bias->dtype != ET_DT_INT || bias->dim != 1 || bias->sizes[0] != 4 * hid || !bias->data)
    return rnn_fail(ctx, op, "bias must be int32 [4H] within +-2^24");
  const int32_t *b = (const int32_t *)bias->data;
  for (int32_t r = 0; r < 4 * hid; r++)
    if (b[r] < -ELSTM_MAX_BIAS || b[r] > ELSTM_MAX_BIAS) return rnn_fail(ctx, op, "bias must be int32 [4H] within +-2^24");
  if (rq->dtype != ET_DT_INT || rq->dim != 2 || rq->sizes[0] != rows || rq->sizes[1] != 4 || !rq->data)
    return rnn_fail(ctx, op, w->requant_shape);
  const int32_t *q = (const int32_t *)rq->data;
  for (int32_t k = 0; k < 4 * rows; k += 2)
    if (q[k] < (1 << 30) || q[k + 1] < 1 || q[k + 1] > 62) return rnn_fail(ctx, op, w->requant_range);
  if (tables->dtype != ET_DT_SHORT || tables->dim != 2 || tables->sizes[0] != 2 ||
      tables->sizes[1] != EMLKIT_LSTM_TABLE_LEN || !tables->data)
    return rnn_fail(ctx, op, "tables must be int16 [2, 513] within +-32767");
  const int16_t *tv = (const int16_t *)tables->data;
  for (int32_t k = 0; k < 2 * EMLKIT_LSTM_TABLE_LEN; k++)
    if (tv[k] < -32767) return rnn_fail(ctx, op, "tables must be int16 [2, 513] within +-32767");
  if (a->out->sizes[0] != x->sizes[0] || a->out->sizes[1] != x->sizes[1] || a->out->sizes[2] != hid)
    return rnn_fail(ctx, op, "out must be x's shape with H features");
  *hid_out = hid;
  return ET_OK;
}

/* The sizes eval passes to a kernel: x is [B, T, I] (batch_first) or [T, B, I], w_ih [GATES*H, I]. */
typedef struct {
  int32_t batch, steps, in, hid, batch_first;
} rnn_shape;

static rnn_shape rnn_shape_of(et_value **args, int32_t gates) {
  const et_tensor *const x = args[RNN_X]->u.t;
  const int32_t bf = cm_i(args, RNN_BATCH_FIRST);
  return (rnn_shape){bf ? x->sizes[0] : x->sizes[1], bf ? x->sizes[1] : x->sizes[0], x->sizes[2],
                     args[RNN_W_IH]->u.t->sizes[0] / gates, bf};
}

/* A streaming call's kept state (state_bytes, slot SLOT, non-zero; st NULL otherwise): the header, then the
 * LSTM's int16 c (C_ELEMS of them; none for the GRU), then the int8 h codes. */
typedef struct {
  rnn_state_header *st;
  int16_t *c;
  int8_t *h;
} rnn_kept;

static rnn_kept rnn_kept_of(et_kernel_ctx *ctx, et_value **args, uint32_t slot, size_t c_elems) {
  rnn_kept k = {cm_i(args, slot) ? (rnn_state_header *)ctx->state : NULL, NULL, NULL};
  if (k.st) k.c = (int16_t *)(void *)(k.st + 1), k.h = (int8_t *)(k.c + c_elems);
  return k;
}

/* The initial h codes: a given h0 (prepare: never in a streaming call), else the kept ones once the streaming
 * call has run, else NULL (zero codes). */
static const int8_t *rnn_h0(const et_value *h0v, const rnn_kept *k) {
  if (h0v->tag == ET_TAG_TENSOR) return (const int8_t *)h0v->u.t->data;
  return k->st && k->st->started ? k->h : NULL;
}

/* After a streaming call that ran steps: its last h codes kept for the next call. */
static void rnn_keep(const rnn_kept *k, const int8_t *y, const rnn_shape *d) {
  if (!k->st || d->steps <= 0) return;
  rnn_keep_h(k->h, y, d->batch, d->steps, d->hid, d->batch_first);
  k->st->started = 1;
}

ET_PREPARE et_status op_emlkit_lstm_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = k_lstm;
  static const rnn_words words = {"w_ih must be int8 [4H, I] with I = x's last dim and w_hh int8 [4H, H]",
                                  "requant must be int32 [4H, 4]",
                                  "requant multipliers must be in [2^30, 2^31) and shifts in [1, 62]"};
  rnn_args a;
  et_tensor *cell, *h0, *c0;
  int32_t v, hid;
  if (nargs < ELSTM_CELL + 1 || nargs > ELSTM_CELL + 3)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: got %u arguments, expected %u (schema args + out + cell)", op,
                   (unsigned)nargs, (unsigned)(ELSTM_CELL + 1));
  CM_TRY(rnn_fetch(ctx, op, args, ELSTM_OUT, &a));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_CELL, "cell", false, &cell));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_H0, "h0", true, &h0));
  CM_TRY(cm_tensor(ctx, op, args, ELSTM_C0, "c0", true, &c0));
  CM_TRY(cm_int(ctx, op, args, ELSTM_CELL_FRAC, "cell_frac_bits", 11, 15, &v));
  CM_TRY(cm_int(ctx, op, args, ELSTM_OUT_MULT, "output_multiplier", (int64_t)1 << 30, INT32_MAX, &v));
  CM_TRY(cm_int(ctx, op, args, ELSTM_OUT_SHIFT, "output_shift", 1, 62, &v));
  CM_TRY(cm_dtype(ctx, op, cell, "cell", ET_DT_SHORT));
  CM_TRY(cm_contiguous(ctx, op, cell, "cell"));
  CM_TRY(rnn_check(ctx, op, &a, 4, &words, &hid));
  const int32_t batch = a.batch_first ? a.x->sizes[0] : a.x->sizes[1];
  if (cell->dim != 2 || cell->sizes[0] != batch || cell->sizes[1] != hid)
    return rnn_fail(ctx, op, "cell must be int16 [B, H]");
  /* a given initial state (the model's h0, c0): both or neither, B * H codes each, not in a streaming call */
  if ((h0 == NULL) != (c0 == NULL) || (h0 && cm_i(args, ELSTM_STATE_BYTES) != 0))
    return rnn_fail(ctx, op, "h0 and c0 must be given together, and not with state_bytes");
  if (h0 && (h0->dtype != ET_DT_CHAR || c0->dtype != ET_DT_SHORT || et_tensor_numel(h0) != (size_t)batch * hid ||
             et_tensor_numel(c0) != (size_t)batch * hid || !h0->data || !c0->data))
    return rnn_fail(ctx, op, "h0 must be int8 and c0 int16, each with B * H elements");
  if (h0) {
    CM_TRY(cm_contiguous(ctx, op, h0, "h0"));
    CM_TRY(cm_contiguous(ctx, op, c0, "c0"));
  }
  return rnn_state_check(ctx, op, args, ELSTM_STATE_BYTES, RNN_STATE_HEADER + 3 * (int64_t)batch * hid,
                         "8 + 3 * B * H (a streaming call's header, int16 c and int8 h codes)");
}

et_status op_emlkit_lstm_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)nargs;
  const rnn_shape d = rnn_shape_of(args, 4);
  const size_t bh = (size_t)d.batch * d.hid;
  const rnn_kept k = rnn_kept_of(ctx, args, ELSTM_STATE_BYTES, bh);
  const emlkit_lstm_params p = {d.batch, d.steps, d.in, d.hid, d.batch_first, cm_i(args, ELSTM_X_ZP),
                                cm_i(args, ELSTM_H_ZP), cm_i(args, ELSTM_CELL_FRAC), cm_i(args, ELSTM_OUT_MULT),
                                cm_i(args, ELSTM_OUT_SHIFT)};
  int16_t *const cell = (int16_t *)args[ELSTM_CELL]->u.t->data;
  int8_t *const y = (int8_t *)args[ELSTM_OUT]->u.t->data;
  /* c starts as h does (rnn_h0): a given c0 (prepare: with h0), the kept c of a streaming call that has run */
  if (args[ELSTM_H0]->tag == ET_TAG_TENSOR) memcpy(cell, args[ELSTM_C0]->u.t->data, bh * sizeof *cell);
  else if (k.st && k.st->started) memcpy(cell, k.c, bh * sizeof *cell);
  emk_emlkit_lstm_s8(&p, (const int8_t *)args[ELSTM_X]->u.t->data, y, cell,
                     (const int8_t *)args[ELSTM_W_IH]->u.t->data, (const int8_t *)args[ELSTM_W_HH]->u.t->data,
                     (const int32_t *)args[ELSTM_BIAS]->u.t->data, (const int32_t *)args[ELSTM_REQUANT]->u.t->data,
                     (const int16_t *)args[ELSTM_TABLES]->u.t->data, rnn_h0(args[ELSTM_H0], &k));
  if (k.st && d.steps > 0) memcpy(k.c, cell, bh * sizeof *cell);
  rnn_keep(&k, y, &d);
  return ET_OK;
}

/* ---------------------------------------------------------------- emlkit::gru */

ET_PREPARE et_status op_emlkit_gru_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = k_gru;
  static const rnn_words words = {
      "x must be 3-D int8, w_ih int8 [3H, I] and w_hh int8 [3H, H]",
      "requant must be int32 [3H, 4], multipliers in [2^30, 2^31) and shifts in [1, 62]",
      "requant must be int32 [3H, 4], multipliers in [2^30, 2^31) and shifts in [1, 62]"};
  rnn_args a;
  et_tensor *h0;
  int32_t v, hid;
  CM_TRY(cm_nargs(ctx, op, nargs, EGRU_OUT));
  CM_TRY(rnn_fetch(ctx, op, args, EGRU_OUT, &a));
  CM_TRY(cm_tensor(ctx, op, args, EGRU_H0, "h0", true, &h0));
  CM_TRY(cm_int(ctx, op, args, EGRU_H_MULT, "h_multiplier", (int64_t)1 << 30, INT32_MAX, &v));
  CM_TRY(cm_int(ctx, op, args, EGRU_H_SHIFT, "h_shift", 1, 62, &v));
  CM_TRY(cm_int(ctx, op, args, EGRU_OUT_MULT, "output_multiplier", (int64_t)1 << 30, INT32_MAX, &v));
  CM_TRY(cm_int(ctx, op, args, EGRU_OUT_SHIFT, "output_shift", 1, 62, &v));
  CM_TRY(rnn_check(ctx, op, &a, 3, &words, &hid));
  const int32_t batch = a.batch_first ? a.x->sizes[0] : a.x->sizes[1];
  /* a given initial state (the model's h0): B * H codes, not in a streaming call (it starts from its kept h) */
  if (h0 && cm_i(args, EGRU_STATE_BYTES) != 0) return rnn_fail(ctx, op, "h0 must not be given with state_bytes");
  if (h0 && (h0->dtype != ET_DT_CHAR || et_tensor_numel(h0) != (size_t)batch * hid || !h0->data))
    return rnn_fail(ctx, op, "h0 must be int8 with B * H elements");
  if (h0) CM_TRY(cm_contiguous(ctx, op, h0, "h0"));
  return rnn_state_check(ctx, op, args, EGRU_STATE_BYTES, RNN_STATE_HEADER + (int64_t)batch * hid,
                         "8 + B * H (a streaming call's header and int8 h codes)");
}

et_status op_emlkit_gru_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)nargs;
  const rnn_shape d = rnn_shape_of(args, 3);
  const rnn_kept k = rnn_kept_of(ctx, args, EGRU_STATE_BYTES, 0);
  const emlkit_gru_params p = {d.batch, d.steps, d.in, d.hid, d.batch_first, cm_i(args, EGRU_X_ZP),
                               cm_i(args, EGRU_H_ZP), cm_i(args, EGRU_H_MULT), cm_i(args, EGRU_H_SHIFT),
                               cm_i(args, EGRU_OUT_MULT), cm_i(args, EGRU_OUT_SHIFT)};
  int8_t *const y = (int8_t *)args[EGRU_OUT]->u.t->data;
  emk_emlkit_gru_s8(&p, (const int8_t *)args[EGRU_X]->u.t->data, y, (const int8_t *)args[EGRU_W_IH]->u.t->data,
                    (const int8_t *)args[EGRU_W_HH]->u.t->data, (const int32_t *)args[EGRU_BIAS]->u.t->data,
                    (const int32_t *)args[EGRU_REQUANT]->u.t->data, (const int16_t *)args[EGRU_TABLES]->u.t->data,
                    rnn_h0(args[EGRU_H0], &k));
  rnn_keep(&k, y, &d);
  return ET_OK;
}
