/* emk_depthwise_conv2d_s8_ref: the portable C variant of cortex_m::quantized_depthwise_conv2d
 * (depthwise_conv2d_s8.c). */
#include "conv_s8_ref.h"
#include "depthwise_conv2d_s8.h"

void emk_depthwise_conv2d_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                      const int32_t *bias, const int32_t *mult, const int32_t *shift,
                      int8_t *out) {
  const int32_t dm = p->out_c / p->in_c;
  K_CONV_S8_REF(dm, { /* group g is input channel g */
    const int32_t x = in[(((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c + g];
    acc += (uint32_t)((x + p->input_offset) * w[((size_t)ky * p->k_w + kx) * p->out_c + o]);
  })
}
