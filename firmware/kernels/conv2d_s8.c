/* cortex_m::quantized_conv2d (and _nhwc: same memory layout): NHWC input,
 * OHWI weights, per-output-channel requantization (operators.py
 * quantized_conv2d_impl, CMSIS-NN arm_convolve_s8). Padding contributes zero
 * after the input offset is added, as in F.conv2d on the offset input.
 *
 * The family is split by variant: conv2d_s8_ref.c (portable C), conv2d_s8_mve.c (Helium), conv2d_s8_dsp.c
 * (DSP extension); what they share is conv2d_s8.h. The dispatcher emk_conv2d_s8 and
 * emk_conv2d_s8_get_buffer_size are defined in the file of the variant the build picks (K_BEST in
 * kernels.h; this file for the builds without MVE or DSP): there GCC compiles them together with that
 * variant as when the family was one file (it inlines the variant into the dispatcher, or the scratch size
 * into the variant, as before), so the code and the instruction counts stay the same. The variants are
 * named here so that `emlkit export`, which follows the identifiers a file names, copies each of their
 * files. */
#include "conv2d_s8.h"

k_conv_ref_fn emk_conv2d_s8_ref;
k_conv_fn emk_conv2d_s8_mve, emk_conv2d_s8_dsp;

/* The builds without MVE or DSP. */
#if !FW_HAVE_MVE && !FW_HAVE_DSP
CONV2D_S8_GET_BUFFER_SIZE

/* The dispatcher of the builds without MVE or DSP: the portable variant, which takes no scratch. */
k_status emk_conv2d_s8(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                       const int32_t *mult, const int32_t *shift, int8_t *out, void *scratch, size_t scratch_size) {
  (void)scratch, (void)scratch_size;
  emk_conv2d_s8_ref(p, in, w, bias, mult, shift, out);
  return K_OK;
}
#endif
