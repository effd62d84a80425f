/* emk_conv2d_s8_ref: the portable C variant of cortex_m::quantized_conv2d (conv2d_s8.c). */
#include "conv2d_s8.h"
#include "conv_s8_ref.h"

void emk_conv2d_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *mult, const int32_t *shift,
                    int8_t *out) {
  k_conv_s8_ref(p, in, w, bias, mult, shift, out, false);
}
