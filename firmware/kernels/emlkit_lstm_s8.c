/* emlkit::lstm: one int8 LSTM layer with an int16 cell state (numerics: emlkit/emlkit_ops.py, lstm_reference;
 * the compile-time constants: emlkit/passes/emlkit_lstm.py). Per step and batch row, each hidden unit j takes
 * its four gate rows (j, H + j, 2H + j, 3H + j) in turn: two int32 dot products (x and h_{t-1} codes minus
 * their zero points), each requantized to Q3.12 per row, plus the Q3.12 bias, saturated to int16; sigmoid or
 * tanh by table interpolation to Q0.15; then c and h of unit j. h_{t-1} is read back from y's previous step,
 * so besides the cell state (the op's second output) the kernel needs no memory of its own. A given initial state
 * (h0 codes, the cell's contents) replaces the zero one: a streaming program's state or the model's (h0, c0). */
#include "emlkit_kernels.h"

static inline int32_t lstm_sat16(int64_t v) { return (int32_t)(v < -32768 ? -32768 : (v > 32767 ? 32767 : v)); }

static inline int64_t lstm_rq(int64_t v, int32_t mult, int32_t shift) {
  return (v * mult + ((int64_t)1 << (shift - 1))) >> shift;
}

/* Table lookup with linear interpolation: 2^7 input codes between entries, rounding half up. */
static inline int32_t lstm_lut(const int16_t *t, int32_t v) {
  const int32_t u = v + 32768, j = u >> 7, e = u & 127;
  const int32_t a = t[j], b = t[j + 1];
  return a + (((b - a) * e + 64) >> 7);
}

void emk_emlkit_lstm_s8_ref(const emlkit_lstm_params *p, const int8_t *x, int8_t *y, int16_t *cell,
                            const int8_t *w_ih, const int8_t *w_hh, const int32_t *bias, const int32_t *requant,
                            const int16_t *tables, const int8_t *h0) {
  const int32_t B = p->batch, T = p->steps, I = p->in, H = p->hid, K = p->cell_frac;
  /* element strides of one time step and one batch row, in x and in y */
  const size_t xt = p->batch_first ? (size_t)I : (size_t)B * I, xb = p->batch_first ? (size_t)T * I : (size_t)I;
  const size_t yt = p->batch_first ? (size_t)H : (size_t)B * H, yb = p->batch_first ? (size_t)T * H : (size_t)H;
  const int16_t *const sig = tables, *const tnh = tables + EMLKIT_LSTM_TABLE_LEN;
  const int64_t f_scale = (int64_t)1 << (15 - K), c_half = (int64_t)1 << (29 - K);
  if (!h0)
    for (size_t k = 0; k < (size_t)B * H; k++) cell[k] = 0;
  for (int32_t t = 0; t < T; t++) {
    for (int32_t b = 0; b < B; b++) {
      const int8_t *const xv = x + (size_t)t * xt + (size_t)b * xb;
      const int8_t *const hv = t ? y + (size_t)(t - 1) * yt + (size_t)b * yb : (h0 ? h0 + (size_t)b * H : NULL);
      int8_t *const out = y + (size_t)t * yt + (size_t)b * yb;
      int16_t *const c = cell + (size_t)b * H;
      for (int32_t j = 0; j < H; j++) {
        int32_t gate[4];
        for (int32_t g = 0; g < 4; g++) {
          const size_t r = (size_t)g * H + (size_t)j;
          const int8_t *const wi = w_ih + r * I;
          int32_t ax = 0, ah = 0;
          for (int32_t k = 0; k < I; k++) ax += wi[k] * (xv[k] - p->x_zp);
          if (hv) {
            const int8_t *const wh = w_hh + r * H;
            for (int32_t k = 0; k < H; k++) ah += wh[k] * (hv[k] - p->h_zp);
          }
          const int32_t *const rq = requant + 4 * r;
          const int32_t pre = lstm_sat16(lstm_rq(ax, rq[0], rq[1]) + lstm_rq(ah, rq[2], rq[3]) + bias[r]);
          gate[g] = lstm_lut(g == 2 ? tnh : sig, pre);
        }
        /* c = f c + i g in Q0.30, rounded once to K fraction bits */
        const int64_t acc = (int64_t)gate[1] * c[j] * f_scale + (int64_t)gate[0] * gate[2];
        const int32_t cj = lstm_sat16((acc + c_half) >> (30 - K));
        c[j] = (int16_t)cj;
        const int32_t v = K <= 12 ? lstm_sat16((int64_t)cj * ((int64_t)1 << (12 - K)))
                                  : (cj + (1 << (K - 13))) >> (K - 12);
        out[j] = emlkit_requant_s8((int64_t)gate[3] * lstm_lut(tnh, v), p->out_mult, p->out_shift, p->h_zp);
      }
    }
  }
}

void emk_emlkit_lstm_s8(const emlkit_lstm_params *p, const int8_t *x, int8_t *y, int16_t *cell, const int8_t *w_ih,
                        const int8_t *w_hh, const int32_t *bias, const int32_t *requant, const int16_t *tables,
                        const int8_t *h0) {
  emk_emlkit_lstm_s8_ref(p, x, y, cell, w_ih, w_hh, bias, requant, tables, h0);
}

/* emlkit::gru: the same loop shape; per hidden unit j its three gate rows (j, H + j, 2H + j). */
static inline int32_t gru_dot(const int8_t *w, const int8_t *v, int32_t n, int32_t zp) {
  int32_t acc = 0;
  for (int32_t k = 0; k < n; k++) acc += w[k] * (v[k] - zp);
  return acc;
}

void emk_emlkit_gru_s8_ref(const emlkit_gru_params *p, const int8_t *x, int8_t *y, const int8_t *w_ih,
                           const int8_t *w_hh, const int32_t *bias, const int32_t *requant, const int16_t *tables,
                           const int8_t *h0) {
  const int32_t B = p->batch, T = p->steps, I = p->in, H = p->hid;
  const size_t xt = p->batch_first ? (size_t)I : (size_t)B * I, xb = p->batch_first ? (size_t)T * I : (size_t)I;
  const size_t yt = p->batch_first ? (size_t)H : (size_t)B * H, yb = p->batch_first ? (size_t)T * H : (size_t)H;
  const int16_t *const sig = tables, *const tnh = tables + EMLKIT_LSTM_TABLE_LEN;
  const int64_t lim = (int64_t)1 << 24;
  for (int32_t t = 0; t < T; t++) {
    for (int32_t b = 0; b < B; b++) {
      const int8_t *const xv = x + (size_t)t * xt + (size_t)b * xb;
      const int8_t *const hv = t ? y + (size_t)(t - 1) * yt + (size_t)b * yb : (h0 ? h0 + (size_t)b * H : NULL);
      int8_t *const out = y + (size_t)t * yt + (size_t)b * yb;
      for (int32_t j = 0; j < H; j++) {
        int64_t ax[3], ah[3];
        for (int32_t g = 0; g < 3; g++) {
          const size_t r = (size_t)g * H + (size_t)j;
          const int32_t *const rq = requant + 4 * r;
          ax[g] = lstm_rq(gru_dot(w_ih + r * I, xv, I, p->x_zp), rq[0], rq[1]) + bias[r];
          ah[g] = hv ? lstm_rq(gru_dot(w_hh + r * H, hv, H, p->h_zp), rq[2], rq[3]) : 0;
        }
        const int64_t rg = lstm_lut(sig, lstm_sat16(ax[0] + ah[0]));
        const int64_t zg = lstm_lut(sig, lstm_sat16(ax[1] + ah[1]));
        int64_t hn = ah[2] + bias[3 * H + j];
        hn = hn < -lim ? -lim : (hn > lim ? lim : hn);
        const int64_t ng = lstm_lut(tnh, lstm_sat16(ax[2] + ((rg * hn + (1 << 14)) >> 15)));
        int64_t hq = hv ? lstm_rq(hv[j] - p->h_zp, p->h_mult, p->h_shift) : 0;
        hq = hq < -32767 ? -32767 : (hq > 32767 ? 32767 : hq);
        out[j] = emlkit_requant_s8((32768 - zg) * ng + zg * hq, p->out_mult, p->out_shift, p->h_zp);
      }
    }
  }
}

void emk_emlkit_gru_s8(const emlkit_gru_params *p, const int8_t *x, int8_t *y, const int8_t *w_ih, const int8_t *w_hh,
                       const int32_t *bias, const int32_t *requant, const int16_t *tables, const int8_t *h0) {
  emk_emlkit_gru_s8_ref(p, x, y, w_ih, w_hh, bias, requant, tables, h0);
}
