/* emk_depthwise_conv2d_s8_ref: the portable C variant of cortex_m::quantized_depthwise_conv2d
 * (depthwise_conv2d_s8.c). */
#include "depthwise_conv2d_s8.h"

void emk_depthwise_conv2d_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                      const int32_t *bias, const int32_t *mult, const int32_t *shift,
                      int8_t *out) {
  const int32_t dm = p->out_c / p->in_c;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++)
        for (int32_t o = 0; o < p->out_c; o++) {
          const int32_t c = o / dm;
          uint32_t acc = bias ? (uint32_t)bias[o] : 0u;
          for (int32_t ky = 0; ky < p->k_h; ky++) {
            const int32_t iy = oy * p->stride_h - p->pad_h + ky * p->dil_h;
            if (iy < 0 || iy >= p->in_h) continue;
            for (int32_t kx = 0; kx < p->k_w; kx++) {
              const int32_t ix = ox * p->stride_w - p->pad_w + kx * p->dil_w;
              if (ix < 0 || ix >= p->in_w) continue;
              const int32_t x = in[(((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c + c];
              acc += (uint32_t)((x + p->input_offset) * w[((size_t)ky * p->k_w + kx) * p->out_c + o]);
            }
          }
          const int32_t r = k_requantize((int32_t)acc, mult[o], shift[o]);
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o] =
              (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->output_offset), p->act_min, p->act_max);
        }
}
