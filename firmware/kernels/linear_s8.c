/* cortex_m::quantized_linear (operators.py quantized_linear_impl, CMSIS-NN
 * arm_fully_connected_s8). Two contracts, picked by which tensor the AoT pass
 * filled in: kernel_sum (MVE targets; bias and input_offset are folded into
 * it) or bias (scalar/DSP targets). Per-tensor requantization. */
#include "kernels.h"
#include "kernels_mve.h"
#include "kernels_dsp.h"

static inline int8_t finish(uint32_t acc, const qlinear_params *p) {
  const int32_t r = k_requantize((int32_t)acc, p->mult, p->shift);
  return (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->output_offset), p->act_min, p->act_max);
}

void emk_linear_s8_ref(const qlinear_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *kernel_sum, int8_t *out) {
  for (int32_t r = 0; r < p->rows; r++) {
    const int8_t *x = in + (size_t)r * p->k;
    uint32_t xsum = 0;
    for (int32_t i = 0; i < p->k; i++) xsum += (uint32_t)x[i];
    for (int32_t o = 0; o < p->n; o++) {
      const int8_t *wr = w + (size_t)o * p->k;
      uint32_t acc = 0; /* int32 arithmetic wraps in torch, unsigned here */
      if (kernel_sum) {
        for (int32_t i = 0; i < p->k; i++) acc += (uint32_t)(x[i] * wr[i]);
        acc += xsum * (uint32_t)p->filter_offset + (uint32_t)kernel_sum[o];
      } else {
        for (int32_t i = 0; i < p->k; i++)
          acc += (uint32_t)(x[i] + p->input_offset) * (uint32_t)(wr[i] + p->filter_offset);
        if (bias) acc += (uint32_t)bias[o];
      }
      out[(size_t)r * p->n + o] = finish(acc, p);
    }
  }
}

#if FW_HAVE_MVE
/* Four weight rows per pass over the input row (k_dot4_s8_mve). The offsets
 * expand as (x+a)(w+b) = xw + a*sum(w) + b*sum(x) + k*a*b, exact mod 2^32
 * like the reference's int32 arithmetic. */
void emk_linear_s8_mve(const qlinear_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *kernel_sum, int8_t *out) {
  if (!k_requant_vec_ok(p->mult, p->shift)) {
    emk_linear_s8_ref(p, in, w, bias, kernel_sum, out);
    return;
  }
  const int32x4_t vlo = vdupq_n_s32(p->act_min), vhi = vdupq_n_s32(p->act_max);
  const int32x4_t voff = vdupq_n_s32(p->output_offset);
  const uint32_t kab = (uint32_t)p->k * (uint32_t)p->input_offset * (uint32_t)p->filter_offset;
  for (int32_t r = 0; r < p->rows; r++) {
    const int8_t *x = in + (size_t)r * p->k;
    const uint32_t xsum = (uint32_t)k_sum_s8_mve(x, p->k);
    for (int32_t o0 = 0; o0 < p->n; o0 += 4) {
      const int32_t nout = p->n - o0 < 4 ? p->n - o0 : 4;
      const int8_t *wr[4];
      for (int j = 0; j < 4; j++) wr[j] = w + (size_t)(o0 + (j < nout ? j : 0)) * p->k;
      int32_t acc[4] = {0, 0, 0, 0}, ws[4] = {0, 0, 0, 0};
      if (kernel_sum) {
        k_dot4_s8_mve(x, wr[0], wr[1], wr[2], wr[3], p->k, acc, ws, 0);
        for (int j = 0; j < 4; j++)
          acc[j] = (int32_t)((uint32_t)acc[j] + xsum * (uint32_t)p->filter_offset +
                             (uint32_t)kernel_sum[o0 + (j < nout ? j : 0)]);
      } else {
        k_dot4_s8_mve(x, wr[0], wr[1], wr[2], wr[3], p->k, acc, ws, 1);
        for (int j = 0; j < 4; j++)
          acc[j] = (int32_t)((uint32_t)acc[j] + (uint32_t)p->input_offset * (uint32_t)ws[j] +
                             (uint32_t)p->filter_offset * xsum + kab +
                             (bias ? (uint32_t)bias[o0 + (j < nout ? j : 0)] : 0u));
      }
      int32x4_t v = k_requantize_mve_n(k_vec4_s32(acc), p->mult, p->shift);
      v = vminq_s32(vmaxq_s32(vaddq_s32(v, voff), vlo), vhi);
      vstrbq_p_s32(out + (size_t)r * p->n + o0, v, vctp32q((uint32_t)nout));
    }
  }
}
#endif

#if FW_HAVE_DSP
/* DSP extension (Cortex-M4/M7/M33): four weight rows per pass over the input
 * row (k_dot4_s8_dsp, SXTB16 + SMLAD). With kernel_sum:
 * acc = x.w + filter_offset * sum(x) + kernel_sum[o]. Without, the input
 * offset is added to the input halves in the loop (SADD16) and the filter
 * offset expands as (x+a)(w+b) = (x+a)w + b*(sum(x) + k*a); all exact mod 2^32
 * like the reference's int32 arithmetic. */
void emk_linear_s8_dsp(const qlinear_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *kernel_sum, int8_t *out) {
  const int32_t a = p->input_offset, K = p->k, N = p->n, N4 = N & ~3;
  /* locals: stores through int8_t pointers may alias *p */
  const int32_t oo = p->output_offset, lo = p->act_min, hi = p->act_max, qm = p->mult, qs = p->shift;
  if (!kernel_sum && (a < -32640 || a > 32639)) {
    emk_linear_s8_ref(p, in, w, bias, kernel_sum, out);
    return;
  }
  for (int32_t r = 0; r < p->rows; r++) {
    const int8_t *x = in + (size_t)r * K;
    int8_t *op = out + (size_t)r * N;
    const uint32_t xsum = (uint32_t)k_sum_s8_dsp(x, K);
    /* the per-row term common to every output */
    const uint32_t common = kernel_sum ? xsum * (uint32_t)p->filter_offset
                                       : (uint32_t)p->filter_offset * (xsum + (uint32_t)K * (uint32_t)a);
    for (int32_t o0 = 0; o0 < N; o0 += 4) {
      const int32_t nout = N - o0 < 4 ? N - o0 : 4;
      int32_t acc[4];
      for (int j = 0; j < 4; j++) {
        const int32_t o = o0 + (j < nout ? j : 0);
        acc[j] = (int32_t)(common + (kernel_sum ? (uint32_t)kernel_sum[o] : bias ? (uint32_t)bias[o] : 0u));
      }
      const int8_t *wr = w + (size_t)o0 * K;
      if (o0 < N4) {
        if (kernel_sum) k_dot4_s8_dsp(x, wr, K, K, acc, 0, 0);
        else k_dot4_s8_dsp(x, wr, K, K, acc, 1, a);
      } else {
        for (int j = 0; j < nout; j++) {
          if (kernel_sum) k_dot1_s8_dsp(x, wr + (size_t)j * K, K, &acc[j], 0, 0);
          else k_dot1_s8_dsp(x, wr + (size_t)j * K, K, &acc[j], 1, a);
        }
      }
      for (int j = 0; j < nout; j++) op[o0 + j] = k_finish_s8(acc[j], qm, qs, oo, lo, hi);
    }
  }
}
#endif

void emk_linear_s8(const qlinear_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                const int32_t *kernel_sum, int8_t *out) {
  K_BEST(emk_linear_s8)(p, in, w, bias, kernel_sum, out);
}
