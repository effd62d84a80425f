/* cortex_m::quantized_depthwise_conv2d (and _nhwc): NHWC input, 1HWO weights
 * [k_h][k_w][out_c]; output channel o reads input channel o / depth_multiplier
 * (operators.py: F.conv2d with groups = in_c; CMSIS-NN arm_depthwise_conv_s8). */
#include "kernels.h"
#include "kernels_mve.h"

void qdwconv2d_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                      const int32_t *bias, const int32_t *mult, const int32_t *shift,
                      int8_t *out) {
  const int32_t dm = p->out_c / p->in_c;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++)
        for (int32_t o = 0; o < p->out_c; o++) {
          const int32_t c = o / dm;
          uint32_t acc = bias ? (uint32_t)bias[o] : 0u;
          for (int32_t ky = 0; ky < p->k_h; ky++) {
            const int32_t iy = oy * p->stride_h - p->pad_h + ky * p->dil_h;
            if (iy < 0 || iy >= p->in_h) continue;
            for (int32_t kx = 0; kx < p->k_w; kx++) {
              const int32_t ix = ox * p->stride_w - p->pad_w + kx * p->dil_w;
              if (ix < 0 || ix >= p->in_w) continue;
              const int32_t x = in[(((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c + c];
              acc += (uint32_t)((x + p->input_offset) * w[((size_t)ky * p->k_w + kx) * p->out_c + o]);
            }
          }
          const int32_t r = k_requantize((int32_t)acc, mult[o], shift[o]);
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o] =
              (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->output_offset), p->act_min, p->act_max);
        }
}

#if FW_HAVE_MVE
/* depth_multiplier 1 (the common case): 16 channels per step in four int32
 * vectors: per 4 lanes one widening load of input and of weights, then
 * add offset, multiply, accumulate (MVE has no vector-by-vector integer VMLA).
 * Other multipliers and scalar-only requant parameters use the portable code. */
void qdwconv2d_s8_mve(const qconv_params *p, const int8_t *in, const int8_t *w,
                      const int32_t *bias, const int32_t *mult, const int32_t *shift,
                      int8_t *out) {
  int ok = p->out_c == p->in_c;
  for (int32_t o = 0; o < p->out_c && ok; o++) ok = k_requant_vec_ok(mult[o], shift[o]);
  if (!ok) {
    qdwconv2d_s8_ref(p, in, w, bias, mult, shift, out);
    return;
  }
  const int32_t C = p->in_c;
  const int32x4_t vlo = vdupq_n_s32(p->act_min), vhi = vdupq_n_s32(p->act_max);
  const int32x4_t voff = vdupq_n_s32(p->output_offset);
  const int32x4_t vin = vdupq_n_s32(p->input_offset);
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const int32_t iy0 = oy * p->stride_h - p->pad_h;
      int32_t ky_lo = 0, ky_hi = p->k_h;
      while (ky_lo < ky_hi && iy0 + ky_lo * p->dil_h < 0) ky_lo++;
      while (ky_hi > ky_lo && iy0 + (ky_hi - 1) * p->dil_h >= p->in_h) ky_hi--;
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const int32_t ix0 = ox * p->stride_w - p->pad_w;
        int32_t kx_lo = 0, kx_hi = p->k_w;
        while (kx_lo < kx_hi && ix0 + kx_lo * p->dil_w < 0) kx_lo++;
        while (kx_hi > kx_lo && ix0 + (kx_hi - 1) * p->dil_w >= p->in_w) kx_hi--;
        int8_t *op = out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * C;
        for (int32_t c0 = 0; c0 < C; c0 += 16) {
          const int32_t rem = C - c0;
          const mve_pred16_t p0 = vctp32q((uint32_t)rem);
          const mve_pred16_t p1 = vctp32q((uint32_t)(rem > 4 ? rem - 4 : 0));
          const mve_pred16_t p2 = vctp32q((uint32_t)(rem > 8 ? rem - 8 : 0));
          const mve_pred16_t p3 = vctp32q((uint32_t)(rem > 12 ? rem - 12 : 0));
          int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0;
          if (bias) {
            a0 = vldrwq_z_s32(bias + c0, p0);
            a1 = vldrwq_z_s32(bias + c0 + 4, p1);
            a2 = vldrwq_z_s32(bias + c0 + 8, p2);
            a3 = vldrwq_z_s32(bias + c0 + 12, p3);
          }
          for (int32_t ky = ky_lo; ky < ky_hi; ky++) {
            const int8_t *row = in + (((size_t)b * p->in_h + iy0 + ky * p->dil_h) * p->in_w) * C + c0;
            const int8_t *wrow = w + (size_t)ky * p->k_w * C + c0;
            for (int32_t kx = kx_lo; kx < kx_hi; kx++) {
              const int8_t *xp = row + (size_t)(ix0 + kx * p->dil_w) * C;
              const int8_t *wp = wrow + (size_t)kx * C;
              a0 = vaddq_s32(a0, vmulq_s32(vaddq_s32(vldrbq_z_s32(xp, p0), vin), vldrbq_z_s32(wp, p0)));
              a1 = vaddq_s32(a1, vmulq_s32(vaddq_s32(vldrbq_z_s32(xp + 4, p1), vin), vldrbq_z_s32(wp + 4, p1)));
              a2 = vaddq_s32(a2, vmulq_s32(vaddq_s32(vldrbq_z_s32(xp + 8, p2), vin), vldrbq_z_s32(wp + 8, p2)));
              a3 = vaddq_s32(a3, vmulq_s32(vaddq_s32(vldrbq_z_s32(xp + 12, p3), vin), vldrbq_z_s32(wp + 12, p3)));
            }
          }
#define DW_STORE(A, OFS, PR)                                                              \
  do {                                                                                    \
    int32x4_t r = k_requantize_mve(A, vldrwq_z_s32(mult + c0 + OFS, PR),                  \
                                   vldrwq_z_s32(shift + c0 + OFS, PR));                   \
    r = vminq_s32(vmaxq_s32(vaddq_s32(r, voff), vlo), vhi);                               \
    vstrbq_p_s32(op + c0 + OFS, r, PR);                                                   \
  } while (0)
          DW_STORE(a0, 0, p0);
          if (rem > 4) DW_STORE(a1, 4, p1);
          if (rem > 8) DW_STORE(a2, 8, p2);
          if (rem > 12) DW_STORE(a3, 12, p3);
#undef DW_STORE
        }
      }
    }
}
#endif

void qdwconv2d_s8(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                  const int32_t *mult, const int32_t *shift, int8_t *out) {
#if FW_HAVE_MVE
  qdwconv2d_s8_mve(p, in, w, bias, mult, shift, out);
#else
  qdwconv2d_s8_ref(p, in, w, bias, mult, shift, out);
#endif
}
