/* cortex_m::quantized_max_pool2d (and _nhwc): max over the valid taps of each
 * window (padding never wins, as with F.max_pool2d), then clamp to the
 * activation range. Input and output share the zero point, so no rescale. */
#include "kernels.h"
#include "kernels_mve.h"

static inline void window(int32_t o, int32_t stride, int32_t pad, int32_t k, int32_t n,
                          int32_t *lo, int32_t *hi) {
  int32_t s = o * stride - pad, e = s + k;
  *lo = s < 0 ? 0 : s;
  *hi = e > n ? n : e;
}

void qmaxpool_s8_ref(const qpool_params *p, const int8_t *in, int8_t *out, int32_t act_min,
                     int32_t act_max) {
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      int32_t y0, y1;
      window(oy, p->stride_h, p->pad_h, p->k_h, p->in_h, &y0, &y1);
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        int32_t x0, x1;
        window(ox, p->stride_w, p->pad_w, p->k_w, p->in_w, &x0, &x1);
        for (int32_t c = 0; c < p->c; c++) {
          int32_t m = -128;
          for (int32_t y = y0; y < y1; y++)
            for (int32_t x = x0; x < x1; x++) {
              const int32_t v = in[(((size_t)b * p->in_h + y) * p->in_w + x) * p->c + c];
              if (v > m) m = v;
            }
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->c + c] =
              (int8_t)k_clamp(m, act_min, act_max);
        }
      }
    }
}

#if FW_HAVE_MVE
/* 16 channels per VMAX. */
void qmaxpool_s8_mve(const qpool_params *p, const int8_t *in, int8_t *out, int32_t act_min,
                     int32_t act_max) {
  const int8x16_t vlo = vdupq_n_s8((int8_t)act_min), vhi = vdupq_n_s8((int8_t)act_max);
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      int32_t y0, y1;
      window(oy, p->stride_h, p->pad_h, p->k_h, p->in_h, &y0, &y1);
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        int32_t x0, x1;
        window(ox, p->stride_w, p->pad_w, p->k_w, p->in_w, &x0, &x1);
        int8_t *op = out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * p->c;
        for (int32_t c0 = 0; c0 < p->c; c0 += 16) {
          const mve_pred16_t pr = vctp8q((uint32_t)(p->c - c0));
          int8x16_t m = vdupq_n_s8(-128);
          for (int32_t y = y0; y < y1; y++) {
            const int8_t *ip = in + (((size_t)b * p->in_h + y) * p->in_w + x0) * p->c + c0;
            for (int32_t x = x0; x < x1; x++, ip += p->c) m = vmaxq_s8(m, vldrbq_z_s8(ip, pr));
          }
          vstrbq_p_s8(op + c0, vminq_s8(vmaxq_s8(m, vlo), vhi), pr);
        }
      }
    }
}
#endif

void qmaxpool_s8(const qpool_params *p, const int8_t *in, int8_t *out, int32_t act_min,
                 int32_t act_max) {
#if FW_HAVE_MVE
  qmaxpool_s8_mve(p, in, out, act_min, act_max);
#else
  qmaxpool_s8_ref(p, in, out, act_min, act_max);
#endif
}
