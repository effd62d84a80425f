/* cortex_m::quantized_max_pool2d (and _nhwc): max over the valid taps of each
 * window (padding never wins, as with F.max_pool2d), then clamp to the
 * activation range. Input and output share the zero point, so no rescale. */
#include "kernels.h"
#include "kernels_mve.h"
#include "kernels_dsp.h"

void emk_max_pool2d_s8_ref(const qpool_params *p, const int8_t *in, int8_t *out, int32_t act_min,
                     int32_t act_max) {
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const k_span ys = k_pool_span(oy, p->stride_h, p->pad_h, p->k_h, p->in_h);
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const k_span xs = k_pool_span(ox, p->stride_w, p->pad_w, p->k_w, p->in_w);
        for (int32_t c = 0; c < p->c; c++) {
          int32_t m = -128;
          for (int32_t y = ys.lo; y < ys.hi; y++)
            for (int32_t x = xs.lo; x < xs.hi; x++) {
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
void emk_max_pool2d_s8_mve(const qpool_params *p, const int8_t *in, int8_t *out, int32_t act_min,
                     int32_t act_max) {
  const int8x16_t vlo = vdupq_n_s8((int8_t)act_min), vhi = vdupq_n_s8((int8_t)act_max);
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const k_span ys = k_pool_span(oy, p->stride_h, p->pad_h, p->k_h, p->in_h);
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const k_span xs = k_pool_span(ox, p->stride_w, p->pad_w, p->k_w, p->in_w);
        int8_t *op = out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * p->c;
        for (int32_t c0 = 0; c0 < p->c; c0 += 16) {
          const mve_pred16_t pr = vctp8q((uint32_t)(p->c - c0));
          int8x16_t m = vdupq_n_s8(-128);
          for (int32_t y = ys.lo; y < ys.hi; y++) {
            const int8_t *ip = in + (((size_t)b * p->in_h + y) * p->in_w + xs.lo) * p->c + c0;
            for (int32_t x = xs.lo; x < xs.hi; x++, ip += p->c) m = vmaxq_s8(m, vldrbq_z_s8(ip, pr));
          }
          vstrbq_p_s8(op + c0, vminq_s8(vmaxq_s8(m, vlo), vhi), pr);
        }
      }
    }
}
#endif

#if FW_HAVE_DSP
/* Byte-wise signed max and min of four int8 lanes: SSUB8 sets the GE flag of
 * each lane where x - y >= 0 (computed exactly, not wrapped), SEL picks x's
 * byte there and y's elsewhere. One asm block, so that nothing can be
 * scheduled between the flag-setting SSUB8 and the SEL that reads them. */
static inline int32_t max4_dsp(int32_t x, int32_t y) {
  int32_t r;
  __asm("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(x), "r"(y) : "cc");
  return r;
}
static inline int32_t min4_dsp(int32_t x, int32_t y) {
  int32_t r;
  __asm("ssub8 %0, %1, %2\n\tsel %0, %2, %1" : "=&r"(r) : "r"(x), "r"(y) : "cc");
  return r;
}
static inline int32_t rep4(int32_t v) { return (int32_t)((uint32_t)(uint8_t)v * 0x01010101u); }

/* Sixteen channels per window walk in four words (one LDR and one SSUB8/SEL
 * pair per word and tap), then four, then single channels; the running max
 * starts at -128 as in the reference, so empty windows give -128 before the
 * clamp. Words are read and written at any alignment (LDR/STR). */
void emk_max_pool2d_s8_dsp(const qpool_params *p, const int8_t *in, int8_t *out, int32_t act_min,
                     int32_t act_max) {
  if (act_min < -128 || act_max > 127 || act_min > act_max) { /* byte lanes cannot hold that clamp */
    emk_max_pool2d_s8_ref(p, in, out, act_min, act_max);
    return;
  }
  const int32_t lo = rep4(act_min), hi = rep4(act_max), init = (int32_t)0x80808080u;
  const int32_t c = p->c;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const k_span ys = k_pool_span(oy, p->stride_h, p->pad_h, p->k_h, p->in_h);
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const k_span xs = k_pool_span(ox, p->stride_w, p->pad_w, p->k_w, p->in_w);
        int8_t *op = out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * c;
        const int8_t *base = in + (((size_t)b * p->in_h + ys.lo) * p->in_w + xs.lo) * c;
        const size_t row = (size_t)p->in_w * c;
        const int32_t nx = xs.hi - xs.lo, ny = ys.hi - ys.lo;
        int32_t c0 = 0;
        for (; c0 + 16 <= c; c0 += 16) {
          int32_t m0 = init, m1 = init, m2 = init, m3 = init;
          const int8_t *rp = base + c0;
          for (int32_t y = 0; y < ny; y++, rp += row) {
            const int8_t *ip = rp;
            for (int32_t x = 0; x < nx; x++, ip += c) {
              m0 = max4_dsp(m0, k_rd32(ip));
              m1 = max4_dsp(m1, k_rd32(ip + 4));
              m2 = max4_dsp(m2, k_rd32(ip + 8));
              m3 = max4_dsp(m3, k_rd32(ip + 12));
            }
          }
          k_wr32(op + c0, min4_dsp(max4_dsp(m0, lo), hi));
          k_wr32(op + c0 + 4, min4_dsp(max4_dsp(m1, lo), hi));
          k_wr32(op + c0 + 8, min4_dsp(max4_dsp(m2, lo), hi));
          k_wr32(op + c0 + 12, min4_dsp(max4_dsp(m3, lo), hi));
        }
        for (; c0 + 4 <= c; c0 += 4) {
          int32_t m0 = init;
          const int8_t *rp = base + c0;
          for (int32_t y = 0; y < ny; y++, rp += row) {
            const int8_t *ip = rp;
            for (int32_t x = 0; x < nx; x++, ip += c) m0 = max4_dsp(m0, k_rd32(ip));
          }
          k_wr32(op + c0, min4_dsp(max4_dsp(m0, lo), hi));
        }
        for (; c0 < c; c0++) {
          int32_t m = -128;
          const int8_t *rp = base + c0;
          for (int32_t y = 0; y < ny; y++, rp += row) {
            const int8_t *ip = rp;
            for (int32_t x = 0; x < nx; x++, ip += c)
              if (*ip > m) m = *ip;
          }
          op[c0] = (int8_t)k_clamp(m, act_min, act_max);
        }
      }
    }
}
#endif

void emk_max_pool2d_s8(const qpool_params *p, const int8_t *in, int8_t *out, int32_t act_min,
                 int32_t act_max) {
  K_BEST(emk_max_pool2d_s8)(p, in, out, act_min, act_max);
}
