/* cortex_m::quantized_avg_pool2d (and _nhwc). The reference is float32:
 * dequantize with scale = mult * 2^shift / 2^31 (double, rounded to float by
 * torch), F.avg_pool2d with count_include_pad=False (sum of the valid taps in
 * row-major order, divided by their count), quantize with rint(x / scale) + zp
 * and clamp. The same float32 operations in the same order give bit-identical
 * results (no FMA contraction). */
#pragma GCC optimize("fp-contract=off")
#include <math.h>

#include "kernels.h"
#include "kernels_mve.h"

static float pool_scale(int32_t mult, int32_t shift) {
  return (float)((double)mult * ldexp(1.0, shift) / 2147483648.0);
}

static inline int8_t finish(float sum, int32_t count, float scale, float fzp) {
  const float avg = sum / (float)count;
  float r = rintf(avg / scale) + fzp;
  if (!(r >= -128.0f)) r = -128.0f;
  if (r > 127.0f) r = 127.0f;
  return (int8_t)r;
}

/* Valid tap range of one window: [lo, hi) clipped to the input. */
static inline void window(int32_t o, int32_t stride, int32_t pad, int32_t k, int32_t n,
                          int32_t *lo, int32_t *hi) {
  int32_t s = o * stride - pad, e = s + k;
  *lo = s < 0 ? 0 : s;
  *hi = e > n ? n : e;
}

void qavgpool_s8_ref(const qpool_params *p, const int8_t *in, int8_t *out, int32_t zp,
                     int32_t mult, int32_t shift) {
  const float scale = pool_scale(mult, shift), fzp = (float)zp;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      int32_t y0, y1;
      window(oy, p->stride_h, p->pad_h, p->k_h, p->in_h, &y0, &y1);
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        int32_t x0, x1;
        window(ox, p->stride_w, p->pad_w, p->k_w, p->in_w, &x0, &x1);
        const int32_t count = (y1 - y0) * (x1 - x0);
        for (int32_t c = 0; c < p->c; c++) {
          float sum = 0.0f;
          for (int32_t y = y0; y < y1; y++)
            for (int32_t x = x0; x < x1; x++) {
              const int8_t q = in[(((size_t)b * p->in_h + y) * p->in_w + x) * p->c + c];
              sum += ((float)q - fzp) * scale;
            }
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->c + c] =
              count > 0 ? finish(sum, count, scale, fzp) : (int8_t)k_clamp(zp, -128, 127);
        }
      }
    }
}

#if FW_HAVE_MVE_FP
/* Four channels per float32 vector, in the same tap order as the scalar
 * code. Each tap's term ((float)q - zp) * scale depends only on the byte q,
 * so for larger windows the 256 possible terms are computed once per call
 * with exactly those float operations, and each tap becomes a byte load, a
 * gather from that table and an add: the same values summed in the same
 * order, hence bit-identical. MVE has no vector divide, so the two divisions
 * per output stay scalar. */
#define POOL_TABLE_MIN_TAPS 256 /* taps x channels from which the table pays off */

void qavgpool_s8_mve(const qpool_params *p, const int8_t *in, int8_t *out, int32_t zp,
                     int32_t mult, int32_t shift) {
  const float scale = pool_scale(mult, shift), fzp = (float)zp;
  const float32x4_t vzp = vdupq_n_f32(fzp), vsc = vdupq_n_f32(scale);
  /* tab[u] is the term of the byte u read as int8 (u is the unsigned byte) */
  float tab[256] __attribute__((aligned(16)));
  const int use_tab = (int64_t)p->k_h * p->k_w * p->c >= POOL_TABLE_MIN_TAPS;
  if (use_tab)
    for (int32_t u = 0; u < 256; u += 4) {
      const int32x4_t ub = vreinterpretq_s32_u32(vidupq_n_u32((uint32_t)u, 1));
      const int32x4_t q = vsubq_n_s32(veorq_s32(ub, vdupq_n_s32(0x80)), 0x80); /* sign-extend the byte */
      vstrwq_f32(tab + u, vmulq_f32(vsubq_f32(vcvtq_f32_s32(q), vzp), vsc));
    }
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      int32_t y0, y1;
      window(oy, p->stride_h, p->pad_h, p->k_h, p->in_h, &y0, &y1);
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        int32_t x0, x1;
        window(ox, p->stride_w, p->pad_w, p->k_w, p->in_w, &x0, &x1);
        const int32_t count = (y1 - y0) * (x1 - x0);
        int8_t *op = out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * p->c;
        for (int32_t c0 = 0; c0 < p->c; c0 += 4) {
          float32x4_t sum = vdupq_n_f32(0.0f);
          const int8_t *row = in + (((size_t)b * p->in_h + y0) * p->in_w + x0) * p->c + c0;
          const size_t ystep = (size_t)p->in_w * p->c;
          if (use_tab && p->c - c0 >= 4) {
            for (int32_t y = y0; y < y1; y++, row += ystep) {
              const int8_t *ip = row;
              for (int32_t x = x0; x < x1; x++, ip += p->c)
                sum = vaddq_f32(sum, vldrwq_gather_shifted_offset_f32(tab, vldrbq_u32((const uint8_t *)ip)));
            }
          } else {
            const mve_pred16_t pr = vctp32q((uint32_t)(p->c - c0));
            for (int32_t y = y0; y < y1; y++, row += ystep) {
              const int8_t *ip = row;
              for (int32_t x = x0; x < x1; x++, ip += p->c) {
                const float32x4_t v = vcvtq_f32_s32(vldrbq_z_s32(ip, pr));
                sum = vaddq_f32(sum, vmulq_f32(vsubq_f32(v, vzp), vsc));
              }
            }
          }
          float lanes[4];
          vstrwq_f32(lanes, sum);
          const int32_t nl = p->c - c0 < 4 ? p->c - c0 : 4;
          for (int32_t l = 0; l < nl; l++)
            op[c0 + l] = count > 0 ? finish(lanes[l], count, scale, fzp) : (int8_t)k_clamp(zp, -128, 127);
        }
      }
    }
}
#endif

void qavgpool_s8(const qpool_params *p, const int8_t *in, int8_t *out, int32_t zp, int32_t mult,
                 int32_t shift) {
#if FW_HAVE_MVE_FP
  qavgpool_s8_mve(p, in, out, zp, mult, shift);
#else
  qavgpool_s8_ref(p, in, out, zp, mult, shift);
#endif
}
