/* cortex_m::quantized_div: the reference divides the zero-point-corrected
 * operands in float32 and rescales by the effective scale carried by the
 * AoT pass; the same float32 steps here are bit-identical. Division has no
 * vector instruction in MVE, so there is no MVE variant. */
#pragma GCC optimize("fp-contract=off")
#include <math.h>

#include "kernels.h"

static inline int32_t div_one(int32_t a, int32_t b, float s, float fzp, float lo, float hi) {
  const float fa = (float)a, fb = (float)b;
  const float q = fb != 0.0f ? fa / fb : 0.0f;
  float r = rintf(q * s) + fzp;
  if (!(r >= lo)) r = lo; /* NaN cannot occur (b != 0), but keep the cast defined */
  if (r > hi) r = hi;
  return (int32_t)r;
}

void emk_div_s8_ref(const int8_t *a, const int8_t *b, int8_t *out, size_t n, int32_t a_zp,
                 int32_t b_zp, int32_t out_zp, double out_scale) {
  const float s = (float)out_scale, fzp = (float)out_zp;
  for (size_t i = 0; i < n; i++)
    out[i] = (int8_t)div_one(a[i] - a_zp, b[i] - b_zp, s, fzp, -128.0f, 127.0f);
}

void emk_div_s16_ref(const int16_t *a, const int16_t *b, int16_t *out, size_t n, int32_t a_zp,
                  int32_t b_zp, int32_t out_zp, double out_scale) {
  const float s = (float)out_scale, fzp = (float)out_zp;
  for (size_t i = 0; i < n; i++)
    out[i] = (int16_t)div_one(a[i] - a_zp, b[i] - b_zp, s, fzp, -32768.0f, 32767.0f);
}

void emk_div_s8(const int8_t *a, const int8_t *b, int8_t *out, size_t n, int32_t a_zp,
             int32_t b_zp, int32_t out_zp, double out_scale) {
  emk_div_s8_ref(a, b, out, n, a_zp, b_zp, out_zp, out_scale);
}

void emk_div_s16(const int16_t *a, const int16_t *b, int16_t *out, size_t n, int32_t a_zp,
              int32_t b_zp, int32_t out_zp, double out_scale) {
  emk_div_s16_ref(a, b, out, n, a_zp, b_zp, out_zp, out_scale);
}
