/* emlkit::quantized_avg_pool2d: integer window sum requantized to the pool's
 * own output qparams (cortex_m::quantized_avg_pool2d keeps its input's). No
 * padding, so the divisor k_h * k_w is folded into the multiplier on the host.
 * The MVE variant sums 16 channels per vector; integer sums are exact in any
 * order, so it matches the portable code bit for bit. */
#include "emlkit_kernels.h"

#if FW_HAVE_MVE
#include <arm_mve.h>
#endif

void emk_emlkit_avg_pool2d_s8_ref(const qpool_params *p, const int8_t *in, int8_t *out, int32_t in_zp, int32_t out_zp,
                           int32_t mult, int32_t shift) {
  const int32_t C = p->c;
  const int64_t off = (int64_t)p->k_h * p->k_w * in_zp;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const int8_t *win = in + (((size_t)b * p->in_h + (size_t)oy * p->stride_h) * p->in_w +
                                  (size_t)ox * p->stride_w) * C;
        int8_t *dst = out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * C;
        for (int32_t c = 0; c < C; c++) {
          int32_t sum = 0;
          for (int32_t y = 0; y < p->k_h; y++)
            for (int32_t x = 0; x < p->k_w; x++) sum += win[((size_t)y * p->in_w + x) * C + c];
          dst[c] = emlkit_requant_s8((int64_t)sum - off, mult, shift, out_zp);
        }
      }
}

#if FW_HAVE_MVE
/* Sixteen channels per pass: int8 taps widened into four int32x4 sums
 * (vldrbq_s32 at offsets 0, 4, 8, 12), tail lanes predicated. */
void emk_emlkit_avg_pool2d_s8_mve(const qpool_params *p, const int8_t *in, int8_t *out, int32_t in_zp, int32_t out_zp,
                           int32_t mult, int32_t shift) {
  const int32_t C = p->c, KH = p->k_h, KW = p->k_w, IW = p->in_w;
  const int64_t off = (int64_t)KH * KW * in_zp;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const int8_t *win = in + (((size_t)b * p->in_h + (size_t)oy * p->stride_h) * IW +
                                  (size_t)ox * p->stride_w) * C;
        int8_t *dst = out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * C;
        for (int32_t c0 = 0; c0 < C; c0 += 16) {
          const int32_t nl = C - c0 < 16 ? C - c0 : 16;
          int32x4_t s[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
          mve_pred16_t pr[4];
          for (int k = 0; k < 4; k++) {
            const int32_t left = nl - 4 * k;
            pr[k] = vctp32q((uint32_t)(left < 0 ? 0 : left));
          }
          for (int32_t y = 0; y < KH; y++)
            for (int32_t x = 0; x < KW; x++) {
              const int8_t *ip = win + ((size_t)y * IW + x) * C + c0;
              for (int k = 0; k < 4; k++) s[k] = vaddq_s32(s[k], vldrbq_z_s32(ip + 4 * k, pr[k]));
            }
          int32_t lanes[16];
          for (int k = 0; k < 4; k++) vst1q_s32(lanes + 4 * k, s[k]);
          for (int32_t l = 0; l < nl; l++) dst[c0 + l] = emlkit_requant_s8((int64_t)lanes[l] - off, mult, shift, out_zp);
        }
      }
}
#endif

void emk_emlkit_avg_pool2d_s8(const qpool_params *p, const int8_t *in, int8_t *out, int32_t in_zp, int32_t out_zp,
                       int32_t mult, int32_t shift) {
#if FW_HAVE_MVE
  emk_emlkit_avg_pool2d_s8_mve(p, in, out, in_zp, out_zp, mult, shift);
#else
  emk_emlkit_avg_pool2d_s8_ref(p, in, out, in_zp, out_zp, mult, shift);
#endif
}
