/* emlkit::lstm: one int8 LSTM layer with an int16 cell state (numerics: emlkit/emlkit_ops.py, lstm_reference;
 * the compile-time constants: emlkit/passes/emlkit_lstm.py). Per step and batch row, each hidden unit j takes
 * its four gate rows (j, H + j, 2H + j, 3H + j) in turn: two int32 dot products (x and h_{t-1} codes minus
 * their zero points), each requantized to Q3.12 per row, plus the Q3.12 bias, saturated to int16; sigmoid or
 * tanh by table interpolation to Q0.15; then c and h of unit j. h_{t-1} is read back from y's previous step,
 * so besides the cell state (the op's second output) the kernel needs no memory of its own. A given initial state
 * (h0 codes, the cell's contents) replaces the zero one: a streaming program's state or the model's (h0, c0).
 * The gate matmul (rnn_dots_*) is the one part with _dsp (SXTAB16 + SMLAD) and _mve (VMLADAVA) variants; the rest
 * is one body for all, so the variants are bit-exact with _ref by construction once their dot products are
 * (tests/dsp_selftest, tests/mve_selftest). A KWS-sized LSTM(40, 64) + GRU(40, 64) over 25 frames: 4.82M + 3.65M
 * instructions portable on the M4, 2.03M + 2.01M with _dsp; 4.10M + 3.08M on the M55's portable build, 0.96M +
 * 0.76M with _mve (QEMU counts). */
#include "emlkit_kernels.h"
#include "kernels_dsp.h"
#include "kernels_mve.h"

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

/* The gate matmul, the kernels' only variant part: acc[g] = sum_k w[g * gs + k] * (v[k] - zp) for the G (3 or 4)
 * gate rows of one hidden unit, which lie gs bytes apart (rows j, H + j, ...), over n <= 2^14 codes. Every sum is
 * exact in int32 (|acc| < 255 * 127 * 2^14 < 2^29), so the order the variants add in does not change it. */
typedef void rnn_dots_fn(const int8_t *v, const int8_t *w, size_t gs, int32_t n, int32_t zp, int32_t G, int32_t *acc);

static inline __attribute__((always_inline)) void rnn_dots_ref(const int8_t *v, const int8_t *w, size_t gs, int32_t n,
                                                               int32_t zp, int32_t G, int32_t *acc) {
  for (int32_t g = 0; g < G; g++) {
    const int8_t *const wg = w + (size_t)g * gs;
    int32_t a = 0;
    for (int32_t k = 0; k < n; k++) a += wg[k] * (v[k] - zp);
    acc[g] = a;
  }
}

#if FW_HAVE_DSP
/* SXTAB16 adds -zp to two codes at once (|v - zp| <= 255 fits the int16 lanes), SMLAD takes two MACs: the LSTM's
 * four rows share each load of v (k_dot4_s8_dsp); the GRU's three take one row at a time. */
static inline __attribute__((always_inline)) void rnn_dots_dsp(const int8_t *v, const int8_t *w, size_t gs, int32_t n,
                                                               int32_t zp, int32_t G, int32_t *acc) {
  for (int32_t g = 0; g < G; g++) acc[g] = 0;
  if (G == 4) {
    k_dot4_s8_dsp(v, w, (int32_t)gs, n, acc, 1, -zp);
  } else {
    for (int32_t g = 0; g < G; g++) k_dot1_s8_dsp(v, w + (size_t)g * gs, n, &acc[g], 1, -zp);
  }
}
#endif

#if FW_HAVE_MVE
/* VMLADAVA: 16 MACs of the raw codes per row, and the rows' weight sums for the zero point:
 * sum w (v - zp) = sum w v - zp sum w (exact: both terms are below 2^29 in magnitude). Three rows (GRU) repeat the
 * first as the fourth, whose sums are dropped. */
static inline __attribute__((always_inline)) void rnn_dots_mve(const int8_t *v, const int8_t *w, size_t gs, int32_t n,
                                                               int32_t zp, int32_t G, int32_t *acc) {
  int32_t a[4] = {0, 0, 0, 0}, s[4] = {0, 0, 0, 0};
  k_dot4_s8_mve(v, w, w + gs, w + 2 * gs, G == 4 ? w + 3 * gs : w, n, a, s, 1);
  for (int32_t g = 0; g < G; g++) acc[g] = a[g] - zp * s[g];
}
#endif

static inline __attribute__((always_inline)) void lstm_run(const emlkit_lstm_params *p, const int8_t *x, int8_t *y,
                                                           int16_t *cell, const int8_t *w_ih, const int8_t *w_hh,
                                                           const int32_t *bias, const int32_t *requant,
                                                           const int16_t *tables, const int8_t *h0,
                                                           rnn_dots_fn *dots) {
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
        int32_t ax[4], ah[4] = {0, 0, 0, 0}, gate[4];
        dots(xv, w_ih + (size_t)j * I, (size_t)H * I, I, p->x_zp, 4, ax);
        if (hv) dots(hv, w_hh + (size_t)j * H, (size_t)H * H, H, p->h_zp, 4, ah);
        for (int32_t g = 0; g < 4; g++) {
          const size_t r = (size_t)g * H + (size_t)j;
          const int32_t *const rq = requant + 4 * r;
          const int32_t pre = lstm_sat16(lstm_rq(ax[g], rq[0], rq[1]) + lstm_rq(ah[g], rq[2], rq[3]) + bias[r]);
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

/* One entry point per gate-matmul variant: the body is shared, only rnn_dots_<v> differs. */
#define LSTM_VARIANT(v)                                                                                          \
  void emk_emlkit_lstm_s8_##v(const emlkit_lstm_params *p, const int8_t *x, int8_t *y, int16_t *cell,             \
                              const int8_t *w_ih, const int8_t *w_hh, const int32_t *bias, const int32_t *requant, \
                              const int16_t *tables, const int8_t *h0) {                                         \
    lstm_run(p, x, y, cell, w_ih, w_hh, bias, requant, tables, h0, rnn_dots_##v);                               \
  }
LSTM_VARIANT(ref)
#if FW_HAVE_DSP
LSTM_VARIANT(dsp)
#endif
#if FW_HAVE_MVE
LSTM_VARIANT(mve)
#endif

void emk_emlkit_lstm_s8(const emlkit_lstm_params *p, const int8_t *x, int8_t *y, int16_t *cell, const int8_t *w_ih,
                        const int8_t *w_hh, const int32_t *bias, const int32_t *requant, const int16_t *tables,
                        const int8_t *h0) {
  K_BEST(emk_emlkit_lstm_s8)(p, x, y, cell, w_ih, w_hh, bias, requant, tables, h0);
}

/* emlkit::gru: the same loop shape; per hidden unit j its three gate rows (j, H + j, 2H + j). */
static inline __attribute__((always_inline)) void gru_run(const emlkit_gru_params *p, const int8_t *x, int8_t *y,
                                                          const int8_t *w_ih, const int8_t *w_hh, const int32_t *bias,
                                                          const int32_t *requant, const int16_t *tables,
                                                          const int8_t *h0, rnn_dots_fn *dots) {
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
        int32_t dx[3], dh[3] = {0, 0, 0};
        int64_t ax[3], ah[3];
        dots(xv, w_ih + (size_t)j * I, (size_t)H * I, I, p->x_zp, 3, dx);
        if (hv) dots(hv, w_hh + (size_t)j * H, (size_t)H * H, H, p->h_zp, 3, dh);
        for (int32_t g = 0; g < 3; g++) {
          const size_t r = (size_t)g * H + (size_t)j;
          const int32_t *const rq = requant + 4 * r;
          ax[g] = lstm_rq(dx[g], rq[0], rq[1]) + bias[r];
          ah[g] = hv ? lstm_rq(dh[g], rq[2], rq[3]) : 0;
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

#define GRU_VARIANT(v)                                                                                         \
  void emk_emlkit_gru_s8_##v(const emlkit_gru_params *p, const int8_t *x, int8_t *y, const int8_t *w_ih,          \
                             const int8_t *w_hh, const int32_t *bias, const int32_t *requant,                     \
                             const int16_t *tables, const int8_t *h0) {                                         \
    gru_run(p, x, y, w_ih, w_hh, bias, requant, tables, h0, rnn_dots_##v);                                      \
  }
GRU_VARIANT(ref)
#if FW_HAVE_DSP
GRU_VARIANT(dsp)
#endif
#if FW_HAVE_MVE
GRU_VARIANT(mve)
#endif

void emk_emlkit_gru_s8(const emlkit_gru_params *p, const int8_t *x, int8_t *y, const int8_t *w_ih, const int8_t *w_hh,
                       const int32_t *bias, const int32_t *requant, const int16_t *tables, const int8_t *h0) {
  K_BEST(emk_emlkit_gru_s8)(p, x, y, w_ih, w_hh, bias, requant, tables, h0);
}
