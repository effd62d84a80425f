/* emlkit::upsample_bilinear2d: int8 bilinear resize with host-made tables
 * (emlkit/passes/emlkit_bilinear.py; the Python reference in
 * emlkit/emlkit_ops.py defines the numerics). Each output row oy reads input
 * rows rows[3oy] and rows[3oy+1] with weight rows[3oy+2] / 2^11 on the second,
 * each output column likewise from cols. The sum
 *   acc = (2^11 - wy) * ((2^11 - wx) * a + wx * b) + wy * ((2^11 - wx) * c + wx * d)
 * of codes minus the input zero point is exact in int32 (|acc| <= 255 * 2^22),
 * then requantized once (round half up). The MVE variant computes acc for four
 * channels per vector (every lane's products and sums stay in int32, so it is
 * the same integer) and requantizes each lane with the scalar rounding; the
 * dispatcher takes it for NHWC maps of 4 channels or more (an NCHW plane is
 * one channel: nothing to vectorise across). */
#include "emlkit_kernels.h"

#if FW_HAVE_MVE
#include <arm_mve.h>
#endif

/* One output pixel's c channels from its four input pixels (top/bot rows, columns l/r, in bytes). */
typedef struct {
  int32_t c, in_zp, out_zp, mult, shift;
} bilinear_q;
typedef int8_t *(*bilinear_px)(const int8_t *top, const int8_t *bot, size_t l, size_t r, int32_t wx, int32_t wy,
                               const bilinear_q *q, int8_t *out);

/* The loop nest both variants share: always inlined with a constant `px`, so each variant compiles to its
 * own loops with the pixel body in place (no call per pixel). */
static inline __attribute__((always_inline)) void bilinear_nest(const int8_t *in, int8_t *out, int32_t batch,
                                                                int32_t in_h, int32_t in_w, int32_t out_h, int32_t out_w,
                                                                const int32_t *rows, const int32_t *cols,
                                                                const bilinear_q *q, bilinear_px px) {
  const size_t row_len = (size_t)in_w * (size_t)q->c;
  for (int32_t b = 0; b < batch; b++) {
    const int8_t *plane = in + (size_t)b * (size_t)in_h * row_len;
    for (int32_t oy = 0; oy < out_h; oy++) {
      const int8_t *top = plane + (size_t)rows[3 * oy] * row_len, *bot = plane + (size_t)rows[3 * oy + 1] * row_len;
      const int32_t wy = rows[3 * oy + 2];
      for (int32_t ox = 0; ox < out_w; ox++)
        out = px(top, bot, (size_t)cols[3 * ox] * (size_t)q->c, (size_t)cols[3 * ox + 1] * (size_t)q->c, cols[3 * ox + 2], wy,
                 q, out);
    }
  }
}

/* A variant's entry point: the shared loop nest around its pixel body. */
#define BILINEAR_VARIANT(fn, px)                                                                                   \
  void fn(const int8_t *in, int8_t *out, int32_t batch, int32_t in_h, int32_t in_w, int32_t c, int32_t out_h,      \
          int32_t out_w, const int32_t *rows, const int32_t *cols, int32_t in_zp, int32_t out_zp, int32_t mult,    \
          int32_t shift) {                                                                                         \
    const bilinear_q q = {c, in_zp, out_zp, mult, shift};                                                          \
    bilinear_nest(in, out, batch, in_h, in_w, out_h, out_w, rows, cols, &q, px);                                   \
  }

static inline __attribute__((always_inline)) int8_t *bilinear_px_ref(const int8_t *top, const int8_t *bot, size_t l,
                                                                     size_t r, int32_t wx, int32_t wy,
                                                                     const bilinear_q *q, int8_t *out) {
  const int32_t one = EMLKIT_BILINEAR_ONE, in_zp = q->in_zp;
  for (int32_t k = 0; k < q->c; k++) {
    const int32_t t = (one - wx) * (top[l + k] - in_zp) + wx * (top[r + k] - in_zp);
    const int32_t u = (one - wx) * (bot[l + k] - in_zp) + wx * (bot[r + k] - in_zp);
    *out++ = emlkit_requant_s8((int64_t)(one - wy) * t + (int64_t)wy * u, q->mult, q->shift, q->out_zp);
  }
  return out;
}

BILINEAR_VARIANT(emk_emlkit_resize_bilinear_s8_ref, bilinear_px_ref)

#if FW_HAVE_MVE
static inline __attribute__((always_inline)) int8_t *bilinear_px_mve(const int8_t *top, const int8_t *bot, size_t l,
                                                                     size_t r, int32_t wx, int32_t wy,
                                                                     const bilinear_q *q, int8_t *out) {
  const int32_t one = EMLKIT_BILINEAR_ONE, c = q->c;
  const int32x4_t zp = vdupq_n_s32(q->in_zp);
  for (int32_t k = 0; k < c; k += 4) {
    const int32_t left = c - k;
    const mve_pred16_t pr = vctp32q((uint32_t)left); /* tail lanes load nothing */
    const int32x4_t a = vsubq_s32(vldrbq_z_s32(top + l + k, pr), zp), bb = vsubq_s32(vldrbq_z_s32(top + r + k, pr), zp);
    const int32x4_t cc = vsubq_s32(vldrbq_z_s32(bot + l + k, pr), zp), d = vsubq_s32(vldrbq_z_s32(bot + r + k, pr), zp);
    const int32x4_t t = vmlaq_n_s32(vmulq_n_s32(a, one - wx), bb, wx);
    const int32x4_t u = vmlaq_n_s32(vmulq_n_s32(cc, one - wx), d, wx);
    int32_t lanes[4];
    vst1q_s32(lanes, vmlaq_n_s32(vmulq_n_s32(t, one - wy), u, wy));
    const int32_t n = left < 4 ? left : 4;
    for (int32_t j = 0; j < n; j++) *out++ = emlkit_requant_s8(lanes[j], q->mult, q->shift, q->out_zp);
  }
  return out;
}

BILINEAR_VARIANT(emk_emlkit_resize_bilinear_s8_mve, bilinear_px_mve)
#endif

void emk_emlkit_resize_bilinear_s8(const int8_t *in, int8_t *out, int32_t batch, int32_t in_h, int32_t in_w,
                                   int32_t c, int32_t out_h, int32_t out_w, const int32_t *rows, const int32_t *cols,
                                   int32_t in_zp, int32_t out_zp, int32_t mult, int32_t shift) {
#if FW_HAVE_MVE
  if (c >= 4) {
    emk_emlkit_resize_bilinear_s8_mve(in, out, batch, in_h, in_w, c, out_h, out_w, rows, cols, in_zp, out_zp, mult,
                                      shift);
    return;
  }
#endif
  emk_emlkit_resize_bilinear_s8_ref(in, out, batch, in_h, in_w, c, out_h, out_w, rows, cols, in_zp, out_zp, mult,
                                    shift);
}
