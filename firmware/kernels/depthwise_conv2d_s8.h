/* Set-up shared by the emk_depthwise_conv2d_s8 variants (internal header of depthwise_conv2d_s8*.c),
 * written as it was when the variants shared one file, so that each variant's code stays the same. */
#ifndef FW_DEPTHWISE_CONV2D_S8_H
#define FW_DEPTHWISE_CONV2D_S8_H

#include "kernels.h"

/* A convolution of a one-channel input (depthwise with in_c 1 and a depth
 * multiplier) is run as an ordinary convolution: its weights transposed to
 * OHWI rows in scratch, then emk_conv2d_s8's pixel-by-pixel path. */
__attribute__((unused)) static int dw_as_conv(const qconv_params *p) {
  return p->in_c == 1 && p->out_c > 1 && p->input_offset >= -127 && p->input_offset <= 128;
}
__attribute__((unused)) static qconv_params dw_conv_params(const qconv_params *p) {
  qconv_params c = *p;
  c.groups = 1;
  c.beff = c.dwblk = NULL; /* the transposed weights' sums are the conv kernel's own */
  return c;
}

/* Run it so (in a variant's entry point): the weights 1HWO [K][OC] -> OHWI
 * [OC][K] at the start of scratch, then the convolution variant CONV. A
 * macro, so each variant's code stays as it was written out in place. */
#define DW_AS_CONV(CONV)                                                                                  \
  do {                                                                                                    \
    const qconv_params c = dw_conv_params(p);                                                             \
    const int32_t K = p->k_h * p->k_w, OC = p->out_c;                                                     \
    int8_t *wt = (int8_t *)scratch;                                                                       \
    for (int32_t o = 0; o < OC; o++)                                                                      \
      for (int32_t k = 0; k < K; k++) wt[(size_t)o * K + k] = w[(size_t)k * OC + o];                      \
    const size_t used = ((size_t)OC * K + 15) / 16 * 16;                                                  \
    return CONV(&c, in, wt, bias, mult, shift, out, (int8_t *)scratch + used, scratch_size - used);       \
  } while (0)

/* The MVE path runs depth multipliers 1 and multiples of 4 (dm = out_c / in_c). */
__attribute__((unused)) static int dw_mve_multiplier_ok(const qconv_params *p, int32_t dm) {
  return p->out_c == p->in_c * dm && (dm == 1 || dm % 4 == 0);
}
/* The MVE path adds the input offset to int16 lanes (x + offset must stay within int16). */
__attribute__((unused)) static int dw_mve_offset_ok(const qconv_params *p) {
  return p->input_offset >= -32639 && p->input_offset <= 32640;
}
/* The MVE path's kernel for a shape (per-channel requantization that the vector code cannot take aside:
 * that falls back to the reference), also named in the compile report (boards/host/query.c). */
typedef enum { DW_MVE_REFERENCE, DW_MVE_AS_CONV, DW_MVE_MULT4, DW_MVE_16CH } dw_mve_path;
__attribute__((unused)) static dw_mve_path dw_mve_path_of(const qconv_params *p) {
  const int32_t dm = p->in_c > 0 ? p->out_c / p->in_c : 0;
  if (p->in_c <= 0 || !dw_mve_multiplier_ok(p, dm) || !dw_mve_offset_ok(p)) return DW_MVE_REFERENCE;
  if (dw_as_conv(p)) return DW_MVE_AS_CONV;
  return dm > 1 ? DW_MVE_MULT4 : DW_MVE_16CH;
}

/* Scratch of the MVE path, per 16 channels: the per-channel bias with the
 * input-offset term for windows inside the input, the multipliers, the shifts
 * (none when the program carries these blocks: p->dwblk); with a depth
 * multiplier, one window of input values (int32 per tap). The same size on
 * every build. */
/* emk_depthwise_conv2d_s8_get_buffer_size, defined by the file of the variant the build picks
 * (depthwise_conv2d_s8.c says why): a macro, so that the function is written once. */
#define DEPTHWISE_CONV2D_S8_GET_BUFFER_SIZE                                                                     \
  size_t emk_depthwise_conv2d_s8_get_buffer_size(const qconv_params *p) {                                       \
    if (dw_as_conv(p)) {                                                                                        \
      const qconv_params c = dw_conv_params(p);                                                                 \
      return ((size_t)p->out_c * p->k_h * p->k_w + 15) / 16 * 16 + emk_conv2d_s8_get_buffer_size(&c);           \
    }                                                                                                           \
    if (p->dwblk && p->beff && p->out_c == p->in_c) return 0; /* both the program's (DSP: beff, MVE: blocks) */ \
    const size_t blocks = ((size_t)p->out_c + 15) / 16 * 192; /* DW_BLOCK int32 per 16 channels */              \
    const int mult = p->in_c > 0 && p->out_c > p->in_c;    /* depth multiplier > 1: one window of values */     \
    return blocks + (mult ? (size_t)p->k_h * p->k_w * 4 : 0);                                                   \
  }

#endif
