/* cortex_m::quantized_conv2d (and _nhwc: same memory layout): NHWC input,
 * OHWI weights, per-output-channel requantization (operators.py
 * quantized_conv2d_impl, CMSIS-NN arm_convolve_s8). Padding contributes zero
 * after the input offset is added, as in F.conv2d on the offset input. */
#include "kernels.h"
#include "kernels_mve.h"

void qconv2d_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *mult, const int32_t *shift,
                    int8_t *out) {
  const int32_t cg = p->in_c / p->groups, og = p->out_c / p->groups;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++)
        for (int32_t o = 0; o < p->out_c; o++) {
          const int32_t g = o / og;
          uint32_t acc = bias ? (uint32_t)bias[o] : 0u; /* int32 wrap like torch */
          for (int32_t ky = 0; ky < p->k_h; ky++) {
            const int32_t iy = oy * p->stride_h - p->pad_h + ky * p->dil_h;
            if (iy < 0 || iy >= p->in_h) continue;
            for (int32_t kx = 0; kx < p->k_w; kx++) {
              const int32_t ix = ox * p->stride_w - p->pad_w + kx * p->dil_w;
              if (ix < 0 || ix >= p->in_w) continue;
              const int8_t *ip = in + (((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c + (size_t)g * cg;
              const int8_t *wp = w + (((size_t)o * p->k_h + ky) * p->k_w + kx) * cg;
              for (int32_t c = 0; c < cg; c++)
                acc += (uint32_t)((ip[c] + p->input_offset) * wp[c]);
            }
          }
          const int32_t r = k_requantize((int32_t)acc, mult[o], shift[o]);
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o] =
              (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->output_offset), p->act_min, p->act_max);
        }
}

#if FW_HAVE_MVE
/* Four output channels at a time share each 16-byte input load (one VLDRB +
 * four VLDRB + four VMLADAVA per 64 MACs). The input offset is applied as
 * offset * sum(weights over the valid taps): the full-window sums are
 * computed once per channel group; border pixels add them up on the fly.
 * With groups == 1 and dil_w == 1, each kernel row is one contiguous run of
 * (valid kx) * C bytes in both input and weights. */
void qconv2d_s8_mve(const qconv_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *mult, const int32_t *shift,
                    int8_t *out) {
  for (int32_t o = 0; o < p->out_c; o++)
    if (!k_requant_vec_ok(mult[o], shift[o])) {
      qconv2d_s8_ref(p, in, w, bias, mult, shift, out);
      return;
    }
  const int32_t cg = p->in_c / p->groups, og = p->out_c / p->groups;
  const int32_t kwc = p->k_w * cg, ktot = p->k_h * kwc;
  const int merged = p->groups == 1 && p->dil_w == 1;
  const int32x4_t vlo = vdupq_n_s32(p->act_min), vhi = vdupq_n_s32(p->act_max);
  const int32x4_t voff = vdupq_n_s32(p->output_offset);
  for (int32_t o0 = 0; o0 < p->out_c; o0 += 4) {
    const int32_t nout = p->out_c - o0 < 4 ? p->out_c - o0 : 4;
    const mve_pred16_t pst = vctp32q((uint32_t)nout);
    const int8_t *wc[4];
    int32_t full_wsum[4], base[4], gidx[4];
    for (int j = 0; j < 4; j++) {
      const int32_t o = o0 + (j < nout ? j : 0); /* spare lanes repeat channel o0 */
      wc[j] = w + (size_t)o * ktot;
      full_wsum[j] = k_sum_s8_mve(wc[j], ktot);
      base[j] = bias ? bias[o] : 0;
      gidx[j] = o / og;
    }
    /* all four channels must read the same input slice to share loads */
    const int same_group = gidx[0] == gidx[1] && gidx[0] == gidx[2] && gidx[0] == gidx[3];
    const int32x4_t vm = vldrwq_z_s32(mult + o0, pst);
    const int32x4_t vs = vldrwq_z_s32(shift + o0, pst);
    for (int32_t b = 0; b < p->batch; b++)
      for (int32_t oy = 0; oy < p->out_h; oy++) {
        const int32_t iy0 = oy * p->stride_h - p->pad_h;
        for (int32_t ox = 0; ox < p->out_w; ox++) {
          const int32_t ix0 = ox * p->stride_w - p->pad_w;
          int32_t acc[4] = {0, 0, 0, 0}, ws[4] = {0, 0, 0, 0};
          int32_t kx_lo = 0, kx_hi = p->k_w;
          while (kx_lo < kx_hi && ix0 + kx_lo * p->dil_w < 0) kx_lo++;
          while (kx_hi > kx_lo && ix0 + (kx_hi - 1) * p->dil_w >= p->in_w) kx_hi--;
          int full = kx_lo == 0 && kx_hi == p->k_w;
          for (int32_t ky = 0; ky < p->k_h && full; ky++) {
            const int32_t iy = iy0 + ky * p->dil_h;
            if (iy < 0 || iy >= p->in_h) full = 0;
          }
          if (same_group) {
            const int32_t g = gidx[0];
            for (int32_t ky = 0; ky < p->k_h; ky++) {
              const int32_t iy = iy0 + ky * p->dil_h;
              if (iy < 0 || iy >= p->in_h) continue;
              const int8_t *row = in + ((size_t)b * p->in_h + iy) * p->in_w * p->in_c + (size_t)g * cg;
              const size_t wrow = (size_t)ky * kwc;
              if (merged) {
                const int8_t *xp = row + (size_t)(ix0 + kx_lo) * p->in_c;
                const size_t wo = wrow + (size_t)kx_lo * cg;
                const int32_t len = (kx_hi - kx_lo) * cg;
                if (full) k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, len, acc, ws, 0);
                else k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, len, acc, ws, 1);
              } else {
                for (int32_t kx = kx_lo; kx < kx_hi; kx++) {
                  const int8_t *xp = row + (size_t)(ix0 + kx * p->dil_w) * p->in_c;
                  const size_t wo = wrow + (size_t)kx * cg;
                  if (full) k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, cg, acc, ws, 0);
                  else k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, cg, acc, ws, 1);
                }
              }
            }
          } else {
            /* channel groups straddle a conv group boundary: one channel at a time */
            for (int j = 0; j < nout; j++) {
              int32_t a1[4] = {0, 0, 0, 0}, s1[4] = {0, 0, 0, 0};
              for (int32_t ky = 0; ky < p->k_h; ky++) {
                const int32_t iy = iy0 + ky * p->dil_h;
                if (iy < 0 || iy >= p->in_h) continue;
                const int8_t *row = in + ((size_t)b * p->in_h + iy) * p->in_w * p->in_c + (size_t)gidx[j] * cg;
                for (int32_t kx = kx_lo; kx < kx_hi; kx++) {
                  const int8_t *xp = row + (size_t)(ix0 + kx * p->dil_w) * p->in_c;
                  const int8_t *wp = wc[j] + (size_t)ky * kwc + (size_t)kx * cg;
                  k_dot4_s8_mve(xp, wp, wp, wp, wp, cg, a1, s1, 1);
                }
              }
              acc[j] = a1[0];
              ws[j] = s1[0];
            }
            full = 0;
          }
          for (int j = 0; j < 4; j++)
            acc[j] = (int32_t)((uint32_t)base[j] + (uint32_t)acc[j] +
                               (uint32_t)p->input_offset * (uint32_t)(full ? full_wsum[j] : ws[j]));
          int32x4_t r = k_requantize_mve(k_vec4_s32(acc), vm, vs);
          r = vminq_s32(vmaxq_s32(vaddq_s32(r, voff), vlo), vhi);
          vstrbq_p_s32(out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o0, r, pst);
        }
      }
  }
}
#endif

void qconv2d_s8(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                const int32_t *mult, const int32_t *shift, int8_t *out) {
#if FW_HAVE_MVE
  qconv2d_s8_mve(p, in, w, bias, mult, shift, out);
#else
  qconv2d_s8_ref(p, in, w, bias, mult, shift, out);
#endif
}
