/* emk_conv2d_s8_ref: the portable C variant of cortex_m::quantized_conv2d (conv2d_s8.c). */
#include "conv2d_s8.h"
#include "conv_s8_ref.h"

void emk_conv2d_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *mult, const int32_t *shift,
                    int8_t *out) {
  const int32_t cg = p->in_c / p->groups, og = p->out_c / p->groups;
  K_CONV_S8_REF(og, {
    const int8_t *ip = in + (((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c + (size_t)g * cg;
    const int8_t *wp = w + (((size_t)o * p->k_h + ky) * p->k_w + kx) * cg;
    for (int32_t c = 0; c < cg; c++)
      acc += (uint32_t)((ip[c] + p->input_offset) * wp[c]);
  })
}
