/* Kernels of our own emlkit:: operators (emlkit/emlkit_ops.py holds the Python
 * references they match bit for bit). Integer arithmetic only; the same
 * conventions as kernels.h (pre-validated inputs, NHWC 4-D activations). */
#ifndef FW_EMLKIT_KERNELS_H
#define FW_EMLKIT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

/* round-half-up (v * mult) / 2^shift + zp, clamped to int8; shift in [1, 62],
 * |v * mult| < 2^62 (the adapters bound both). >> of a negative int64 is an
 * arithmetic shift with GCC and Clang, i.e. floor, as torch's >> in the
 * reference. */
static inline int8_t emlkit_requant_s8(int64_t v, int32_t mult, int32_t shift, int32_t zp) {
  const int64_t r = ((v * (int64_t)mult + ((int64_t)1 << (shift - 1))) >> shift) + zp;
  return (int8_t)(r < -128 ? -128 : (r > 127 ? 127 : r));
}

/* ---- emlkit::softmax (emlkit_softmax_s8.c) ----
 * [outer][len][inner] view, softmax over len. table: 256 int32 entries in
 * [0, 2^22], table[0] >= 1. p = ((e << 31) + s) / (2 s) in Q30, then
 * emlkit_requant_s8(p, mult, shift, zp). */
void emk_emlkit_softmax_s8_ref(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                           const int32_t *table, int32_t zp, int32_t mult, int32_t shift);
void emk_emlkit_softmax_s8(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                       const int32_t *table, int32_t zp, int32_t mult, int32_t shift);
/* The quotient those kernels requantize, floor((e * 2^31 + sum) / (2 sum)), as the non-reference entries compute it
 * (a reciprocal per row and one correction, emlkit_exp_rows.h): exported for the kernel tests, which check it on
 * the quotients the reciprocal alone gets one short. */
uint64_t emk_emlkit_exp_quotient(uint64_t e, uint64_t sum);

/* ---- emlkit::masked_softmax (emlkit_masked_softmax_s8.c) ----
 * emlkit::softmax over the elements whose mask byte is 0 (a nonzero byte leaves the element out). The rows are
 * walked over `rank` nested logical dims (outermost first, the softmax dim last): in/out advance x_step[d]
 * elements along dim d (in and out share one layout), the mask m_step[d] (0 where it is broadcast). Per row,
 * over the kept elements: m = max, s = sum of table[m - x], p = ((e << 31) + s) / (2 s); p = 0 for a left-out
 * element and for every element of a row with nothing kept; out = emlkit_requant_s8(p, mult, shift, zp). */
#define EMLKIT_MASKED_SOFTMAX_MAX_DIMS 6
typedef struct {
  int32_t rank, size[EMLKIT_MASKED_SOFTMAX_MAX_DIMS], x_step[EMLKIT_MASKED_SOFTMAX_MAX_DIMS],
      m_step[EMLKIT_MASKED_SOFTMAX_MAX_DIMS];
} emlkit_row_walk;
void emk_emlkit_masked_softmax_s8_ref(const int8_t *in, const uint8_t *mask, int8_t *out, const emlkit_row_walk *w,
                                      const int32_t *table, int32_t zp, int32_t mult, int32_t shift);
void emk_emlkit_masked_softmax_s8(const int8_t *in, const uint8_t *mask, int8_t *out, const emlkit_row_walk *w,
                                  const int32_t *table, int32_t zp, int32_t mult, int32_t shift);

/* ---- emlkit::log_softmax (emlkit_log_softmax_s8.c) ----
 * [outer][len][inner] view, log_softmax over len (len <= 2^16). table: softmax's, table[0] = 2^22, the rest in
 * [0, 2^22]; log2_scale (K) in [1, 2^23]. a = (max - x) * K + log2_q20(sum of table[max - x]) - 22 * 2^20, then
 * emlkit_requant_s8(-a, mult, shift, zp). */
void emk_emlkit_log_softmax_s8_ref(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                                   const int32_t *table, int32_t log2_scale, int32_t zp, int32_t mult, int32_t shift);
void emk_emlkit_log_softmax_s8(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                               const int32_t *table, int32_t log2_scale, int32_t zp, int32_t mult, int32_t shift);

/* ---- emlkit::quantized_avg_pool2d (emlkit_avg_pool2d_s8.c), NHWC ----
 * No padding: every window has k_h * k_w taps (p->pad_* must be 0).
 * out = emlkit_requant_s8(sum of (x - in_zp) over the window, mult, shift, out_zp). */
void emk_emlkit_avg_pool2d_s8_ref(const qpool_params *p, const int8_t *in, int8_t *out, int32_t in_zp, int32_t out_zp,
                           int32_t mult, int32_t shift);
void emk_emlkit_avg_pool2d_s8(const qpool_params *p, const int8_t *in, int8_t *out, int32_t in_zp, int32_t out_zp,
                       int32_t mult, int32_t shift);
#if FW_HAVE_MVE
void emk_emlkit_avg_pool2d_s8_mve(const qpool_params *p, const int8_t *in, int8_t *out, int32_t in_zp, int32_t out_zp,
                           int32_t mult, int32_t shift);
#endif

/* ---- emlkit::upsample_bilinear2d (emlkit_resize_bilinear_s8.c), NHWC (an NCHW tensor is NHWC with c = 1 and
 * batch = N * C) ----
 * rows: out_h triples (y0, y1, wy), cols: out_w triples (x0, x1, wx), indices inside the input, weights in
 * [0, 2^11]. With q = x - in_zp:
 * out = emlkit_requant_s8((2^11 - wy) * ((2^11 - wx) * q[y0][x0] + wx * q[y0][x1])
 *                         + wy * ((2^11 - wx) * q[y1][x0] + wx * q[y1][x1]), mult, shift, out_zp). */
#define EMLKIT_BILINEAR_BITS 11
#define EMLKIT_BILINEAR_ONE (1 << EMLKIT_BILINEAR_BITS)
void emk_emlkit_resize_bilinear_s8_ref(const int8_t *in, int8_t *out, int32_t batch, int32_t in_h, int32_t in_w,
                                       int32_t c, int32_t out_h, int32_t out_w, const int32_t *rows,
                                       const int32_t *cols, int32_t in_zp, int32_t out_zp, int32_t mult,
                                       int32_t shift);
void emk_emlkit_resize_bilinear_s8(const int8_t *in, int8_t *out, int32_t batch, int32_t in_h, int32_t in_w,
                                   int32_t c, int32_t out_h, int32_t out_w, const int32_t *rows, const int32_t *cols,
                                   int32_t in_zp, int32_t out_zp, int32_t mult, int32_t shift);
#if FW_HAVE_MVE
void emk_emlkit_resize_bilinear_s8_mve(const int8_t *in, int8_t *out, int32_t batch, int32_t in_h, int32_t in_w,
                                       int32_t c, int32_t out_h, int32_t out_w, const int32_t *rows,
                                       const int32_t *cols, int32_t in_zp, int32_t out_zp, int32_t mult,
                                       int32_t shift);
#endif

/* ---- emlkit::lstm (emlkit_lstm_s8.c) ----
 * One unidirectional LSTM layer, torch's gate order (i, f, g, o). _dsp (SMLAD) and _mve (VMLADAVA) variants of
 * the gate matmul, bit-exact with _ref; the dispatcher picks the best the build has (K_BEST). x: int8 [B][T][I]
 * (batch_first) or [T][B][I]; y: int8 h codes in the same layout; cell: int16 [B][H], the working cell state
 * (K = cell_frac fraction bits), the last one on return. w_ih int8 [4H][I], w_hh int8 [4H][H], bias int32 [4H]
 * (Q3.12), requant int32 [4H][4] (Mx, Tx, Mh, Th: x and h dot products to Q3.12), tables int16 [2][513]
 * (sigmoid, tanh in Q0.15 over [-8, 8]). The adapter bounds I, H <= 2^14, |bias| <= 2^24, shifts in [1, 62],
 * 11 <= K <= 15. h0: NULL for the zero initial state (cell is zeroed first), else the initial h codes [B][H]
 * with cell holding the initial cell state. Numerics: emlkit/emlkit_ops.py (lstm_reference). */
#define EMLKIT_LSTM_TABLE_LEN 513
typedef struct {
  int32_t batch, steps, in, hid, batch_first;
  int32_t x_zp, h_zp, cell_frac, out_mult, out_shift;
} emlkit_lstm_params;
void emk_emlkit_lstm_s8_ref(const emlkit_lstm_params *p, const int8_t *x, int8_t *y, int16_t *cell,
                            const int8_t *w_ih, const int8_t *w_hh, const int32_t *bias, const int32_t *requant,
                            const int16_t *tables, const int8_t *h0);
void emk_emlkit_lstm_s8(const emlkit_lstm_params *p, const int8_t *x, int8_t *y, int16_t *cell, const int8_t *w_ih,
                        const int8_t *w_hh, const int32_t *bias, const int32_t *requant, const int16_t *tables,
                        const int8_t *h0);
#if FW_HAVE_DSP
void emk_emlkit_lstm_s8_dsp(const emlkit_lstm_params *p, const int8_t *x, int8_t *y, int16_t *cell,
                            const int8_t *w_ih, const int8_t *w_hh, const int32_t *bias, const int32_t *requant,
                            const int16_t *tables, const int8_t *h0);
#endif
#if FW_HAVE_MVE
void emk_emlkit_lstm_s8_mve(const emlkit_lstm_params *p, const int8_t *x, int8_t *y, int16_t *cell,
                            const int8_t *w_ih, const int8_t *w_hh, const int32_t *bias, const int32_t *requant,
                            const int16_t *tables, const int8_t *h0);
#endif

/* ---- emlkit::gru (emlkit_lstm_s8.c) ----
 * One unidirectional GRU layer, torch's gate order (r, z, n), the LSTM's layouts, tables and variants.
 * w_ih int8 [3H][I], w_hh int8 [3H][H], bias int32 [4H] (3H x-side in Q3.12, then b_hn), requant int32 [3H][4].
 * h_{t-1} in Q0.15 through (h_mult, h_shift), the output through (out_mult, out_shift). h0: NULL for the zero
 * initial state, else the initial h codes [B][H]. Numerics:
 * emlkit/emlkit_ops.py (gru_reference). */
typedef struct {
  int32_t batch, steps, in, hid, batch_first;
  int32_t x_zp, h_zp, h_mult, h_shift, out_mult, out_shift;
} emlkit_gru_params;
void emk_emlkit_gru_s8_ref(const emlkit_gru_params *p, const int8_t *x, int8_t *y, const int8_t *w_ih,
                           const int8_t *w_hh, const int32_t *bias, const int32_t *requant, const int16_t *tables,
                           const int8_t *h0);
void emk_emlkit_gru_s8(const emlkit_gru_params *p, const int8_t *x, int8_t *y, const int8_t *w_ih, const int8_t *w_hh,
                       const int32_t *bias, const int32_t *requant, const int16_t *tables, const int8_t *h0);
#if FW_HAVE_DSP
void emk_emlkit_gru_s8_dsp(const emlkit_gru_params *p, const int8_t *x, int8_t *y, const int8_t *w_ih,
                           const int8_t *w_hh, const int32_t *bias, const int32_t *requant, const int16_t *tables,
                           const int8_t *h0);
#endif
#if FW_HAVE_MVE
void emk_emlkit_gru_s8_mve(const emlkit_gru_params *p, const int8_t *x, int8_t *y, const int8_t *w_ih,
                           const int8_t *w_hh, const int32_t *bias, const int32_t *requant, const int16_t *tables,
                           const int8_t *h0);
#endif

/* ---- emlkit::prelu (emlkit_prelu_s8.c): [outer][c][inner] view (c the channel dim in memory order) ----
 * neg: c pairs (multiplier, shift), multiplier 0 or +-[2^30, 2^31), shift in [1, 62]. With q = x - in_zp:
 * out = emlkit_requant_s8(q, q >= 0 ? mult : neg[2k], q >= 0 ? shift : neg[2k + 1], out_zp). */
void emk_emlkit_prelu_s8_ref(const int8_t *in, int8_t *out, int32_t outer, int32_t c, int32_t inner,
                             const int32_t *neg, int32_t in_zp, int32_t out_zp, int32_t mult, int32_t shift);
void emk_emlkit_prelu_s8(const int8_t *in, int8_t *out, int32_t outer, int32_t c, int32_t inner, const int32_t *neg,
                         int32_t in_zp, int32_t out_zp, int32_t mult, int32_t shift);

/* ---- emlkit::adaptive_avg_pool2d (emlkit_adaptive_avg_pool2d_s8.c), NHWC (NCHW as NHWC with c = 1 and
 * batch = N * C) ----
 * rows: out_h pairs [start, end) of input rows, cols: out_w pairs of input columns, non-empty and inside the
 * input, at most 2^16 taps a window; requant: out_h * out_w pairs (mult, shift), row-major over the output:
 * out = emlkit_requant_s8(sum of (x - in_zp) over the window, mult, shift, out_zp). */
void emk_emlkit_adaptive_avg_pool2d_s8_ref(const int8_t *in, int8_t *out, int32_t batch, int32_t in_h, int32_t in_w,
                                           int32_t c, int32_t out_h, int32_t out_w, const int32_t *rows,
                                           const int32_t *cols, const int32_t *requant, int32_t in_zp,
                                           int32_t out_zp);
void emk_emlkit_adaptive_avg_pool2d_s8(const int8_t *in, int8_t *out, int32_t batch, int32_t in_h, int32_t in_w,
                                       int32_t c, int32_t out_h, int32_t out_w, const int32_t *rows,
                                       const int32_t *cols, const int32_t *requant, int32_t in_zp, int32_t out_zp);

/* ---- emlkit::floor_divide (emlkit_floor_divide_s8.c): n elements of a, b, out in one memory order ----
 * A = a - a_zp, B = b - b_zp; N = A * a_mant << max(exp, 0), D = B * b_mant << max(-exp, 0) (mantissas in
 * [2^23, 2^24), |exp| <= 30: |N|, |D| < 2^62); f = floor(N / D) clamped to [-2^31, 2^31];
 * out = emlkit_requant_s8(f, mult, shift, out_zp); B = 0: 127 (A > 0), -128 (A < 0), out_zp (A = 0). */
typedef struct {
  int32_t a_zp, b_zp, a_mant, b_mant, exp, out_zp, mult, shift;
} emlkit_floor_div_params;
void emk_emlkit_floor_divide_s8_ref(const int8_t *a, const int8_t *b, int8_t *out, size_t n,
                                    const emlkit_floor_div_params *p);
void emk_emlkit_floor_divide_s8(const int8_t *a, const int8_t *b, int8_t *out, size_t n,
                                const emlkit_floor_div_params *p);
/* The same with broadcast operands: out is written in order over `rank` nested dims (outermost first) of sizes
 * size[d]; a and b advance a_step[d] / b_step[d] elements along dim d (0 where the operand is broadcast). A scalar
 * divisor is a one-element b (b_step all 0). */
#define EMLKIT_FLOOR_DIV_MAX_DIMS 6
typedef struct {
  int32_t rank, size[EMLKIT_FLOOR_DIV_MAX_DIMS], a_step[EMLKIT_FLOOR_DIV_MAX_DIMS], b_step[EMLKIT_FLOOR_DIV_MAX_DIMS];
} emlkit_bcast_walk;
void emk_emlkit_floor_divide_bcast_s8_ref(const int8_t *a, const int8_t *b, int8_t *out, const emlkit_bcast_walk *w,
                                          const emlkit_floor_div_params *p);
void emk_emlkit_floor_divide_bcast_s8(const int8_t *a, const int8_t *b, int8_t *out, const emlkit_bcast_walk *w,
                                      const emlkit_floor_div_params *p);

/* ---- emlkit::embedding_bag (emlkit_embedding_bag_s8.c) ----
 * weight: int8 [num][dim]; indices: n_idx entries in [0, num); offsets: n_off non-decreasing entries in [0, n_idx]
 * (the adapter checks both); bag j (of bags = n_off - include_last_offset) spans indices [offsets[j], end_j),
 * end_j = offsets[j + 1], or n_idx for j + 1 = n_off. Entries equal to padding_idx (-1: none) are skipped.
 * psw: NULL, or (mode 0 only) n_idx int8 per-sample weights, zero point psw_zp. Per bag and column, with
 * w = weight[i][col] - w_zp over the bag's n entries e: mode 0 v = sum w, or sum w * (psw[e] - psw_zp) with psw,
 * mode 1 v = sum w * ((2^16 + n / 2) / n) (0 for n = 0), mode 2 v = max w (0 for n = 0);
 * out[j][col] = emlkit_requant_s8(v, mult, shift, out_zp). */
#define EMLKIT_EMBEDDING_BAG_MEAN_BITS 16
typedef struct {
  int32_t num, dim, n_idx, n_off, include_last_offset, mode, padding_idx, w_zp, out_zp, mult, shift, psw_zp;
} emlkit_embedding_bag_params;
void emk_emlkit_embedding_bag_s8_ref(const emlkit_embedding_bag_params *p, const int8_t *weight, const int64_t *indices,
                                     const int64_t *offsets, const int8_t *psw, int8_t *out);
void emk_emlkit_embedding_bag_s8(const emlkit_embedding_bag_params *p, const int8_t *weight, const int64_t *indices,
                                 const int64_t *offsets, const int8_t *psw, int8_t *out);

#endif
