/* Set-up shared by the emk_conv2d_s8 variants (internal header of conv2d_s8*.c), written as it was when
 * the variants shared one file, so that each variant's code stays the same. */
#ifndef FW_CONV2D_S8_H
#define FW_CONV2D_S8_H

#include "kernels.h"

/* The fast paths (MVE, DSP): groups 1 and an input offset whose padding byte is representable. */
__attribute__((unused)) static int conv_fast_ok(const qconv_params *p) {
  return p->groups == 1 && p->input_offset >= -127 && p->input_offset <= 128; /* pad byte representable */
}
/* 1x1 without padding: the rows are read straight from the input. */
__attribute__((unused)) static int conv_direct(const qconv_params *p) {
  return p->k_h == 1 && p->k_w == 1 && p->pad_h == 0 && p->pad_w == 0;
}

/* The MVE path's 1x1 kernel with the weights in registers: unit stride and at most 16 input channels. A
 * macro: as a function it changes GCC's inlining of the whole MVE file (and so its instruction counts). */
#define CONV_MVE_IS_K16(p) (conv_direct(p) && (p)->stride_h == 1 && (p)->stride_w == 1 && (p)->in_c <= 16)
/* The MVE path's 1x1 kernel with each pixel's row in registers: unit stride, 16 < in_c <= 64, whole groups
 * of four output channels. */
#define CONV_MVE_IS_XQ(p)                                                                                  \
  (conv_direct(p) && (p)->stride_h == 1 && (p)->stride_w == 1 && (p)->in_c > 16 && (p)->in_c <= 64 &&       \
   (p)->out_c % 4 == 0)
/* The MVE path's kernels taking two pixels per weight load: 1x1 rows of K = 64 read in place (conv_xp64),
 * gathered rows of 32 < K <= 48 (conv_xr48); whole groups of 16 output channels. */
#define CONV_MVE_IS_XP(p)                                                                                  \
  (conv_fast_ok(p) && (p)->out_c % 16 == 0 &&                                                              \
   ((CONV_MVE_IS_XQ(p) && (p)->in_c == 64) ||                                                              \
    (!conv_direct(p) && (p)->k_h * (p)->k_w * (p)->in_c > 32 && (p)->k_h * (p)->k_w * (p)->in_c <= 48)))
/* The MVE path's kernel for a shape (per-channel requantization that the vector code cannot take aside:
 * that falls back to the reference), also named in the compile report (boards/host/query.c). */
typedef enum {
  CONV_MVE_GENERAL, CONV_MVE_K16, CONV_MVE_ROWS_DIRECT, CONV_MVE_ROWS_IM2COL, CONV_MVE_XQ, CONV_MVE_XP
} conv_mve_path;
__attribute__((unused)) static conv_mve_path conv_mve_path_of(const qconv_params *p) {
  if (!conv_fast_ok(p)) return CONV_MVE_GENERAL;
  if (CONV_MVE_IS_K16(p)) return CONV_MVE_K16;
  if (CONV_MVE_IS_XP(p)) return CONV_MVE_XP;
  if (CONV_MVE_IS_XQ(p)) return CONV_MVE_XQ;
  const int32_t K = p->k_h * p->k_w * p->in_c; /* gathered rows of 16 < K <= 64: the same kernel */
  if (!conv_direct(p) && K > 16 && K <= 64 && p->out_c % 4 == 0) return CONV_MVE_XQ;
  return conv_direct(p) ? CONV_MVE_ROWS_DIRECT : CONV_MVE_ROWS_IM2COL;
}

/* Scratch of the MVE fast path: the per-channel bias with the input-offset
 * term (out_c int32, rounded up to whole vectors; unused by the MVE path when
 * the program carries it, p->beff, but the DSP path copies it there: its
 * pixel loop runs faster so), then one im2col row unless the convolution
 * reads its rows straight from the input. The same size on every build, so
 * that a program plans the same memory for any core. */
/* emk_conv2d_s8_get_buffer_size, defined by the file of the variant the build picks (conv2d_s8.c says
 * why): a macro, so that the function is written once. */
#define CONV2D_S8_GET_BUFFER_SIZE                                                                      \
  size_t emk_conv2d_s8_get_buffer_size(const qconv_params *p) {                                        \
    if (!conv_fast_ok(p)) return 0;                                                                    \
    const size_t beff = ((size_t)p->out_c + 3) / 4 * 16;                                               \
    const size_t row = conv_direct(p) ? 0 : ((size_t)p->k_h * p->k_w * p->in_c + 15) / 16 * 16;       \
    return beff + row;                                                                                 \
  }

#endif
