/* cortex_m::quantized_transpose_conv2d (and _nhwc): NHWC input, OHWI weights
 * [out_c][k_h][k_w][in_c], groups 1 (the reference's group count is always 1
 * for this weight layout). Written as a gather: output (oy, ox) takes input
 * (iy, ix) through tap (ky, kx) when oy = iy*stride - pad + ky*dil. The
 * reference accumulates in float32, which is exact while partial sums stay
 * below 2^24; this kernel accumulates exactly in int32. No MVE variant:
 * transposed conv is rare in the models this flow targets. */
#include "kernels.h"

void emk_transpose_conv2d_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                     const int32_t *bias, const int32_t *mult, const int32_t *shift,
                     int8_t *out) {
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++)
        for (int32_t o = 0; o < p->out_c; o++) {
          uint32_t acc = bias ? (uint32_t)bias[o] : 0u;
          for (int32_t ky = 0; ky < p->k_h; ky++) {
            const int32_t ty = oy + p->pad_h - ky * p->dil_h;
            if (ty < 0 || ty % p->stride_h) continue;
            const int32_t iy = ty / p->stride_h;
            if (iy >= p->in_h) continue;
            for (int32_t kx = 0; kx < p->k_w; kx++) {
              const int32_t tx = ox + p->pad_w - kx * p->dil_w;
              if (tx < 0 || tx % p->stride_w) continue;
              const int32_t ix = tx / p->stride_w;
              if (ix >= p->in_w) continue;
              const int8_t *ip = in + (((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c;
              const int8_t *wp = w + (((size_t)o * p->k_h + ky) * p->k_w + kx) * p->in_c;
              for (int32_t c = 0; c < p->in_c; c++)
                acc += (uint32_t)((ip[c] + p->input_offset) * wp[c]);
            }
          }
          const int32_t r = k_requantize((int32_t)acc, mult[o], shift[o]);
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o] =
              (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->output_offset), p->act_min, p->act_max);
        }
}

void emk_transpose_conv2d_s8(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                 const int32_t *mult, const int32_t *shift, int8_t *out) {
  emk_transpose_conv2d_s8_ref(p, in, w, bias, mult, shift, out);
}
