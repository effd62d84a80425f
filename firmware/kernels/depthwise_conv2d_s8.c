/* cortex_m::quantized_depthwise_conv2d (and _nhwc): NHWC input, 1HWO weights
 * [k_h][k_w][out_c]; output channel o reads input channel o / depth_multiplier
 * (operators.py: F.conv2d with groups = in_c; CMSIS-NN arm_depthwise_conv_s8).
 *
 * The family is split by variant: depthwise_conv2d_s8_ref.c (portable C), depthwise_conv2d_s8_mve.c
 * (Helium), depthwise_conv2d_s8_dsp.c (DSP extension); what they share is depthwise_conv2d_s8.h. The
 * dispatcher emk_depthwise_conv2d_s8 and emk_depthwise_conv2d_s8_get_buffer_size are defined in the file of
 * the variant the build picks (K_BEST in kernels.h; this file for the builds without MVE or DSP): there GCC
 * compiles them together with that variant as when the family was one file (it inlines the variant into the
 * dispatcher, or the scratch size into the variant, as before), so the code and the instruction counts stay
 * the same. The variants are named here so that `emlkit export`, which follows the identifiers a file
 * names, copies each of their files. */
#include "depthwise_conv2d_s8.h"

k_conv_ref_fn emk_depthwise_conv2d_s8_ref;
k_conv_fn emk_depthwise_conv2d_s8_mve, emk_depthwise_conv2d_s8_dsp;
/* One-input-channel layers run as convolutions (the scratch size included): that family too. */
k_conv_fn emk_conv2d_s8;

/* The builds without MVE or DSP. */
#if !FW_HAVE_MVE && !FW_HAVE_DSP
DEPTHWISE_CONV2D_S8_GET_BUFFER_SIZE

/* The dispatcher: the portable variant, which takes no scratch. */
k_status emk_depthwise_conv2d_s8(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                                 const int32_t *mult, const int32_t *shift, int8_t *out, void *scratch,
                                 size_t scratch_size) {
  (void)scratch, (void)scratch_size;
  emk_depthwise_conv2d_s8_ref(p, in, w, bias, mult, shift, out);
  return K_OK;
}
#endif
