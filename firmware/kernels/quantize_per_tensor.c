/* cortex_m::quantize_per_tensor and dequantize_per_tensor.
 * Both references run in float32 (torch multiplies a float32 tensor by a
 * Python float after rounding it to float32), so the same float operations
 * here give bit-identical results. No MVE variant: these sit at the graph's
 * edges and run once per model input/output. */
#pragma GCC optimize("fp-contract=off") /* no FMA: the reference rounds each step */
#include <math.h>

#include "kernels.h"

static void store_q(void *out, k_dtype dt, size_t i, int32_t v) {
  switch (dt) {
    case K_U8: ((uint8_t *)out)[i] = (uint8_t)v; break;
    case K_S8: ((int8_t *)out)[i] = (int8_t)v; break;
    case K_S16: ((int16_t *)out)[i] = (int16_t)v; break;
    default: ((int32_t *)out)[i] = v; break;
  }
}

static int32_t load_q(const void *in, k_dtype dt, size_t i) {
  switch (dt) {
    case K_U8: return ((const uint8_t *)in)[i];
    case K_S8: return ((const int8_t *)in)[i];
    case K_S16: return ((const int16_t *)in)[i];
    default: return ((const int32_t *)in)[i];
  }
}

void quantize_f32_ref(const float *in, size_t n, double scale, int32_t zp,
                      int32_t qmin, int32_t qmax, k_dtype out_dtype, void *out) {
  const float inv = (float)(1.0 / scale);
  const float lo = (float)qmin, hi = (float)qmax, fzp = (float)zp;
  for (size_t i = 0; i < n; i++) {
    float r = rintf(in[i] * inv) + fzp;
    /* torch.clamp keeps NaN; casting NaN is undefined in C, so send it to qmin */
    if (!(r >= lo)) r = lo;
    if (r > hi) r = hi;
    store_q(out, out_dtype, i, (int32_t)r);
  }
}

void dequantize_f32_ref(const void *in, k_dtype in_dtype, size_t n, double scale,
                        int32_t zp, float *out) {
  const float s = (float)scale, fzp = (float)zp;
  for (size_t i = 0; i < n; i++) out[i] = ((float)load_q(in, in_dtype, i) - fzp) * s;
}

void quantize_f32(const float *in, size_t n, double scale, int32_t zp, int32_t qmin,
                  int32_t qmax, k_dtype out_dtype, void *out) {
  quantize_f32_ref(in, n, scale, zp, qmin, qmax, out_dtype, out);
}

void dequantize_f32(const void *in, k_dtype in_dtype, size_t n, double scale, int32_t zp,
                    float *out) {
  dequantize_f32_ref(in, in_dtype, n, scale, zp, out);
}
