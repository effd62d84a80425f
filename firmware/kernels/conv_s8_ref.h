/* The loop nest of the portable convolutions (conv2d_s8_ref.c, depthwise_conv2d_s8_ref.c): the same window
 * walk, int32 accumulation and requantization; they differ only in which input channels and weights a tap
 * reads. A macro, so each variant's code stays as it was written out in place (an inline function with a
 * constant flag compiles the conv slower on the cores that run it). */
#ifndef FW_CONV_S8_REF_H
#define FW_CONV_S8_REF_H

#include "kernels.h"

/* In a function with the k_conv_ref_fn parameters (p, in, w, bias, mult, shift, out): every output element,
 * where output channel o is in group g = o / OG; the statements TAP add the in-bounds tap (ky, kx) at input
 * row iy and column ix of (b, g, o) to acc. */
#define K_CONV_S8_REF(OG, ...)                                                                                 \
  for (int32_t b = 0; b < p->batch; b++)                                                                       \
    for (int32_t oy = 0; oy < p->out_h; oy++)                                                                  \
      for (int32_t ox = 0; ox < p->out_w; ox++)                                                                \
        for (int32_t o = 0; o < p->out_c; o++) {                                                               \
          const int32_t g = o / (OG);                                                                          \
          uint32_t acc = bias ? (uint32_t)bias[o] : 0u; /* int32 wrap like torch */                            \
          for (int32_t ky = 0; ky < p->k_h; ky++) {                                                            \
            const int32_t iy = oy * p->stride_h - p->pad_h + ky * p->dil_h;                                    \
            if (iy < 0 || iy >= p->in_h) continue;                                                             \
            for (int32_t kx = 0; kx < p->k_w; kx++) {                                                          \
              const int32_t ix = ox * p->stride_w - p->pad_w + kx * p->dil_w;                                  \
              if (ix < 0 || ix >= p->in_w) continue;                                                           \
              __VA_ARGS__                                                                                      \
            }                                                                                                  \
          }                                                                                                    \
          const int32_t r = k_requantize((int32_t)acc, mult[o], shift[o]);                                     \
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o] =                                  \
              (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->output_offset), p->act_min, p->act_max);    \
        }

#endif
