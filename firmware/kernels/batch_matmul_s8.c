/* cortex_m::quantized_batch_matmul: out[b] = lhs[b] @ rhs_t[b]^T with the
 * (negated zero point) offsets added to both operands, per-tensor requant,
 * + output zero point, clamp to int8 (operators.py quantized_batch_matmul_impl).
 * The reference multiplies in float32, exact while partial sums stay below
 * 2^24 (inner sizes up to ~250 at full int8 range); here it is exact int32. */
#include "kernels.h"
#include "kernels_mve.h"

void emk_batch_matmul_s8_ref(const qbmm_params *p, const int8_t *lhs, const int8_t *rhs_t, int8_t *out) {
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t i = 0; i < p->m; i++) {
      const int8_t *l = lhs + ((size_t)b * p->m + i) * p->k;
      for (int32_t j = 0; j < p->n; j++) {
        const int8_t *r = rhs_t + ((size_t)b * p->n + j) * p->k;
        uint32_t acc = 0;
        for (int32_t t = 0; t < p->k; t++)
          acc += (uint32_t)(l[t] + p->lhs_offset) * (uint32_t)(r[t] + p->rhs_offset);
        const int32_t q = k_requantize((int32_t)acc, p->mult, p->shift);
        out[((size_t)b * p->m + i) * p->n + j] =
            (int8_t)k_clamp((int32_t)((uint32_t)q + (uint32_t)p->out_zp), -128, 127);
      }
    }
}

#if FW_HAVE_MVE
/* Four rhs rows per pass over an lhs row, offsets expanded as in linear. */
void emk_batch_matmul_s8_mve(const qbmm_params *p, const int8_t *lhs, const int8_t *rhs_t, int8_t *out) {
  if (!k_requant_vec_ok(p->mult, p->shift)) {
    emk_batch_matmul_s8_ref(p, lhs, rhs_t, out);
    return;
  }
  const int32x4_t vlo = vdupq_n_s32(-128), vhi = vdupq_n_s32(127);
  const int32x4_t vzp = vdupq_n_s32(p->out_zp);
  const uint32_t kab = (uint32_t)p->k * (uint32_t)p->lhs_offset * (uint32_t)p->rhs_offset;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t i = 0; i < p->m; i++) {
      const int8_t *l = lhs + ((size_t)b * p->m + i) * p->k;
      const uint32_t lsum = (uint32_t)k_sum_s8_mve(l, p->k);
      for (int32_t j0 = 0; j0 < p->n; j0 += 4) {
        const int32_t nout = p->n - j0 < 4 ? p->n - j0 : 4;
        const int8_t *r[4];
        for (int q = 0; q < 4; q++) r[q] = rhs_t + ((size_t)b * p->n + j0 + (q < nout ? q : 0)) * p->k;
        int32_t acc[4] = {0, 0, 0, 0}, rs[4] = {0, 0, 0, 0};
        k_dot4_s8_mve(l, r[0], r[1], r[2], r[3], p->k, acc, rs, 1);
        for (int q = 0; q < 4; q++)
          acc[q] = (int32_t)((uint32_t)acc[q] + (uint32_t)p->lhs_offset * (uint32_t)rs[q] +
                             (uint32_t)p->rhs_offset * lsum + kab);
        int32x4_t v = k_requantize_mve_n(k_vec4_s32(acc), p->mult, p->shift);
        v = vminq_s32(vmaxq_s32(vaddq_s32(v, vzp), vlo), vhi);
        vstrbq_p_s32(out + ((size_t)b * p->m + i) * p->n + j0, v, vctp32q((uint32_t)nout));
      }
    }
}
#endif

void emk_batch_matmul_s8(const qbmm_params *p, const int8_t *lhs, const int8_t *rhs_t, int8_t *out) {
#if FW_HAVE_MVE
  emk_batch_matmul_s8_mve(p, lhs, rhs_t, out);
#else
  emk_batch_matmul_s8_ref(p, lhs, rhs_t, out);
#endif
}
