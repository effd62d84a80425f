/* cortex_m::softmax. The reference dequantizes with
 *   scale = ldexp(mult / 2^31, shift) / 2^(31 - 5)   (double, then float32),
 * takes torch.softmax in float32 and quantizes with scale 1/256, zp -128.
 * This kernel does the same float32 steps (max, expf(x - max), sum, multiply
 * by 1/sum, rint(p * 256) + zp), but torch evaluates exp with SLEEF vector
 * code and sums in vector lanes, so a probability that lands within a few ulp
 * of a rounding boundary can come out one quantization step apart: results
 * match the reference within 1 step (the tests measure how often they differ).
 * No MVE variant: there is no vector exp, and NOTES.md records that GCC 12
 * crashes on CMSIS-NN's MVE softmax. */
#pragma GCC optimize("fp-contract=off")
#include <math.h>

#include "kernels.h"

void emk_softmax_s8_ref(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                    int32_t in_zp, int32_t out_zp, int32_t mult, int32_t shift) {
  const double real = ldexp((double)mult / 2147483648.0, shift) / (double)(1 << 26);
  const float scale = (float)real;
  const float fzp = (float)out_zp;
  for (int32_t o = 0; o < outer; o++) {
    for (int32_t i = 0; i < inner; i++) {
      const int8_t *x = in + (size_t)o * len * inner + i;
      int8_t *y = out + (size_t)o * len * inner + i;
      /* max of the dequantized values: scale > 0 so the largest int wins */
      const float m = (float)(k_max_strided_s8(x, len, inner) - in_zp) * scale;
      float sum = 0.0f;
      for (int32_t j = 0; j < len; j++)
        sum += expf((float)(x[(size_t)j * inner] - in_zp) * scale - m);
      const float inv = 1.0f / sum;
      for (int32_t j = 0; j < len; j++) {
        const float p = expf((float)(x[(size_t)j * inner] - in_zp) * scale - m) * inv;
        float r = rintf(p * 256.0f) + fzp;
        if (r < -128.0f) r = -128.0f;
        if (r > 127.0f) r = 127.0f;
        y[(size_t)j * inner] = (int8_t)r;
      }
    }
  }
}

void emk_softmax_s8(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                int32_t in_zp, int32_t out_zp, int32_t mult, int32_t shift) {
  emk_softmax_s8_ref(in, out, outer, len, inner, in_zp, out_zp, mult, shift);
}
