/* cortex_m::quantize_per_tensor and dequantize_per_tensor.
 * Both references run in float32 (torch multiplies a float32 tensor by a
 * Python float after rounding it to float32), so the same float operations
 * here give bit-identical results: the Helium variant does the same float32
 * multiply, round-half-even (VRINTN = rintf in the default rounding mode),
 * add and NaN-aware clamp, four lanes at a time. They sit at the graph's
 * edges, but on an image-sized input they cost as much as a small layer. */
#pragma GCC optimize("fp-contract=off") /* no FMA: the reference rounds each step */
#include <math.h>

#include "kernels.h"
#include "kernels_mve.h"

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

void emk_quantize_f32_ref(const float *in, size_t n, double scale, int32_t zp,
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

void emk_dequantize_f32_ref(const void *in, k_dtype in_dtype, size_t n, double scale,
                        int32_t zp, float *out) {
  const float s = (float)scale, fzp = (float)zp;
  for (size_t i = 0; i < n; i++) out[i] = ((float)load_q(in, in_dtype, i) - fzp) * s;
}

#if FW_HAVE_MVE_FP
void emk_quantize_f32_mve(const float *in, size_t n, double scale, int32_t zp, int32_t qmin, int32_t qmax,
                      k_dtype out_dtype, void *out) {
  const float32x4_t inv = vdupq_n_f32((float)(1.0 / scale)), fzp = vdupq_n_f32((float)zp);
  const float32x4_t lo = vdupq_n_f32((float)qmin), hi = vdupq_n_f32((float)qmax);
  for (size_t i = 0; i < n; i += 4) {
    const mve_pred16_t pr = vctp32q((uint32_t)(n - i));
    float32x4_t r = vaddq_f32(vrndnq_f32(vmulq_f32(vldrwq_z_f32(in + i, pr), inv)), fzp);
    /* VMAXNM takes the number when one side is NaN: NaN goes to qmin like the reference */
    r = vminnmq_f32(vmaxnmq_f32(r, lo), hi);
    const int32x4_t q = vcvtq_s32_f32(r);
    switch (out_dtype) {
      case K_U8: vstrbq_p_u32((uint8_t *)out + i, vreinterpretq_u32_s32(q), pr); break;
      case K_S8: vstrbq_p_s32((int8_t *)out + i, q, pr); break;
      case K_S16: vstrhq_p_s32((int16_t *)out + i, q, pr); break;
      default: vstrwq_p_s32((int32_t *)out + i, q, pr); break;
    }
  }
}

void emk_dequantize_f32_mve(const void *in, k_dtype in_dtype, size_t n, double scale, int32_t zp, float *out) {
  const float32x4_t s = vdupq_n_f32((float)scale), fzp = vdupq_n_f32((float)zp);
  for (size_t i = 0; i < n; i += 4) {
    const mve_pred16_t pr = vctp32q((uint32_t)(n - i));
    int32x4_t q;
    switch (in_dtype) {
      case K_U8: q = vreinterpretq_s32_u32(vldrbq_z_u32((const uint8_t *)in + i, pr)); break;
      case K_S8: q = vldrbq_z_s32((const int8_t *)in + i, pr); break;
      case K_S16: q = vldrhq_z_s32((const int16_t *)in + i, pr); break;
      default: q = vldrwq_z_s32((const int32_t *)in + i, pr); break;
    }
    vstrwq_p_f32(out + i, vmulq_f32(vsubq_f32(vcvtq_f32_s32(q), fzp), s), pr);
  }
}
#endif

void emk_quantize_f32(const float *in, size_t n, double scale, int32_t zp, int32_t qmin,
                  int32_t qmax, k_dtype out_dtype, void *out) {
#if FW_HAVE_MVE_FP
  emk_quantize_f32_mve(in, n, scale, zp, qmin, qmax, out_dtype, out);
#else
  emk_quantize_f32_ref(in, n, scale, zp, qmin, qmax, out_dtype, out);
#endif
}

void emk_dequantize_f32(const void *in, k_dtype in_dtype, size_t n, double scale, int32_t zp,
                    float *out) {
#if FW_HAVE_MVE_FP
  emk_dequantize_f32_mve(in, in_dtype, n, scale, zp, out);
#else
  emk_dequantize_f32_ref(in, in_dtype, n, scale, zp, out);
#endif
}
