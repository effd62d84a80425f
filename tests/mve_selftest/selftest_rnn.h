/* Random trials of emlkit::lstm and emlkit::gru for the MVE and DSP self-tests (included by their main.c after
 * selftest_common.h, with SELFTEST_VARIANT(name) naming the variant under test): sizes 1-70 inputs and 1-40 units
 * (tails of every length for the 4- and 16-byte steps), 1-2 batch rows, 1-4 steps, either layout, any zero points,
 * from zero or a given state, random tables and requantization in the kernels' bounds. The variants differ only in
 * the gate matmul, so the requantization is chosen to keep the gate pre-activations mostly unsaturated (a wrong dot
 * product then shows in h). Both outputs (and the LSTM's cell) must match byte for byte. */
#ifndef SELFTEST_RNN_H
#define SELFTEST_RNN_H

#include "emlkit_kernels.h"

#define RNN_MAX_I 70
#define RNN_MAX_H 40
/* Operands carved from the including test's buffers (no room for more .bss in the M55 image's DTCM): x, h0, the
 * tables and both cells from g_in (16-byte aligned), both weights from g_w, y from g_a / g_b, the bias from g_bias
 * and the requantization from g_ksum. */
#define g_rnn_x (g_in)
#define g_rnn_h0 (g_in + 1024)
#define g_rnn_tables ((int16_t *)(void *)(g_in + 2048))
#define g_rnn_ca ((int16_t *)(void *)(g_in + 8192))
#define g_rnn_cb ((int16_t *)(void *)(g_in + 8704))
#define g_rnn_wih (g_w)
#define g_rnn_whh (g_w + 4 * RNN_MAX_H * RNN_MAX_I)
#define g_rnn_ya (g_a)
#define g_rnn_yb (g_b)
#define g_rnn_bias (g_bias)
#define g_rnn_rq (g_ksum)
_Static_assert(sizeof g_in >= 9216 && sizeof g_w >= 4 * RNN_MAX_H * (RNN_MAX_I + RNN_MAX_H) &&
                   sizeof g_bias >= 4 * RNN_MAX_H * sizeof(int32_t) && sizeof g_ksum >= 16 * RNN_MAX_H * sizeof(int32_t),
               "the self-test's buffers hold the RNN operands");

typedef struct {
  int32_t b, t, i, h, bf, xzp, hzp;
} rnn_shape_t;

/* Random operands for GATES gate rows per unit; returns the shape. */
static rnn_shape_t rnn_random(int32_t gates) {
  rnn_shape_t s = {rr(1, 2), rr(1, 4), rr(1, RNN_MAX_I), rr(1, RNN_MAX_H), rr(0, 1), rr(-128, 127), rr(-128, 127)};
  fill(g_rnn_x, (size_t)s.b * s.t * s.i);
  fill(g_rnn_wih, (size_t)gates * s.h * s.i);
  fill(g_rnn_whh, (size_t)gates * s.h * s.h);
  fill(g_rnn_h0, (size_t)s.b * s.h);
  for (int32_t k = 0; k < 2 * EMLKIT_LSTM_TABLE_LEN; k++) g_rnn_tables[k] = (int16_t)rr(-32767, 32767);
  for (int32_t k = 0; k < 4 * s.h; k++) g_rnn_bias[k] = rr(-40000, 40000);
  for (int32_t k = 0; k < 4 * gates * s.h; k += 2) { /* rq(dot) about 2^(46 - shift) * 2^(log2 dot) */
    g_rnn_rq[k] = (int32_t)((1u << 30) + (rnd() >> 2));
    g_rnn_rq[k + 1] = rr(34, 44);
  }
  for (int32_t k = 0; k < s.b * s.h; k++) g_rnn_ca[k] = g_rnn_cb[k] = (int16_t)rnd();
  return s;
}

static UNUSED_FN long trial_emlkit_lstm(int t) {
  const rnn_shape_t s = rnn_random(4);
  const emlkit_lstm_params p = {s.b, s.t, s.i, s.h, s.bf, s.xzp, s.hzp, rr(11, 15),
                                (int32_t)((1u << 30) + (rnd() >> 2)), rr(50, 56)};
  const int8_t *h0 = (t & 1) ? g_rnn_h0 : NULL; /* odd trials: a given state (h0, the cell's contents) */
  const size_t n = (size_t)s.b * s.t * s.h;
  poison(g_rnn_ya, g_rnn_yb, n);
  emk_emlkit_lstm_s8_ref(&p, g_rnn_x, g_rnn_ya, g_rnn_ca, g_rnn_wih, g_rnn_whh, g_rnn_bias, g_rnn_rq, g_rnn_tables, h0);
  SELFTEST_VARIANT(emk_emlkit_lstm_s8)(&p, g_rnn_x, g_rnn_yb, g_rnn_cb, g_rnn_wih, g_rnn_whh, g_rnn_bias, g_rnn_rq,
                                  g_rnn_tables, h0);
  const long d = first_diff(g_rnn_ya, g_rnn_yb, n);
  if (d >= 0) return d;
  return memcmp(g_rnn_ca, g_rnn_cb, (size_t)s.b * s.h * sizeof g_rnn_ca[0]) ? (long)n : -1;
}

static UNUSED_FN long trial_emlkit_gru(int t) {
  const rnn_shape_t s = rnn_random(3);
  const emlkit_gru_params p = {s.b, s.t, s.i, s.h, s.bf, s.xzp, s.hzp, (int32_t)((1u << 30) + (rnd() >> 2)),
                               rr(20, 30), (int32_t)((1u << 30) + (rnd() >> 2)), rr(50, 56)};
  const int8_t *h0 = (t & 1) ? g_rnn_h0 : NULL;
  const size_t n = (size_t)s.b * s.t * s.h;
  poison(g_rnn_ya, g_rnn_yb, n);
  emk_emlkit_gru_s8_ref(&p, g_rnn_x, g_rnn_ya, g_rnn_wih, g_rnn_whh, g_rnn_bias, g_rnn_rq, g_rnn_tables, h0);
  SELFTEST_VARIANT(emk_emlkit_gru_s8)(&p, g_rnn_x, g_rnn_yb, g_rnn_wih, g_rnn_whh, g_rnn_bias, g_rnn_rq, g_rnn_tables, h0);
  return first_diff(g_rnn_ya, g_rnn_yb, n);
}
#endif
