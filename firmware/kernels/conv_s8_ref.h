/* The loop nest of the portable convolutions (conv2d_s8_ref.c, depthwise_conv2d_s8_ref.c): the same window
 * walk, int32 accumulation and requantization; they differ only in which input channels and weights a
 * tap reads. Inlined with `depthwise` constant, so each file compiles to its own specialised loop. */
#ifndef FW_CONV_S8_REF_H
#define FW_CONV_S8_REF_H

#include <stdbool.h>

#include "kernels.h"

/* conv: weight OHWI [out_c][k_h][k_w][in_c/groups], out channel o reads group o / (out_c/groups);
 * depthwise: weight 1HWO [k_h][k_w][out_c], out channel o reads input channel o / (out_c/in_c). */
static inline __attribute__((always_inline)) void k_conv_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                                                                const int32_t *bias, const int32_t *mult,
                                                                const int32_t *shift, int8_t *out, bool depthwise) {
  const int32_t groups = depthwise ? p->in_c : p->groups;
  const int32_t cg = p->in_c / groups, og = p->out_c / groups;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++)
        for (int32_t o = 0; o < p->out_c; o++) {
          const int32_t g = o / og;
          uint32_t acc = bias ? (uint32_t)bias[o] : 0u; /* int32 wrap like torch */
          for (int32_t ky = 0; ky < p->k_h; ky++) {
            const int32_t iy = oy * p->stride_h - p->pad_h + ky * p->dil_h;
            if (iy < 0 || iy >= p->in_h) continue;
            for (int32_t kx = 0; kx < p->k_w; kx++) {
              const int32_t ix = ox * p->stride_w - p->pad_w + kx * p->dil_w;
              if (ix < 0 || ix >= p->in_w) continue;
              const size_t tap = (size_t)ky * p->k_w + kx;
              const int8_t *ip = in + (((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c + (size_t)g * cg;
              const int8_t *wp = depthwise ? w + tap * p->out_c + o : w + ((size_t)o * p->k_h * p->k_w + tap) * cg;
              for (int32_t c = 0; c < cg; c++)
                acc += (uint32_t)((ip[c] + p->input_offset) * wp[c]);
            }
          }
          const int32_t r = k_requantize((int32_t)acc, mult[o], shift[o]);
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o] =
              (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->output_offset), p->act_min, p->act_max);
        }
}

#endif
