/* cortex_m::quantized_batch_matmul: out[b] = lhs[b] @ rhs_t[b]^T with the
 * (negated zero point) offsets added to both operands, per-tensor requant,
 * + output zero point, clamp to int8 (operators.py quantized_batch_matmul_impl).
 * The reference multiplies in float32, exact while partial sums stay below
 * 2^24 (inner sizes up to ~250 at full int8 range); here it is exact int32. */
#include "kernels.h"
#include "kernels_dsp.h"
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
/* Requantize four sums, add the output zero point, clamp, store nout bytes. */
static inline __attribute__((always_inline)) void bmm_store4_mve(const qbmm_params *p, int32x4_t v, int8_t *o,
                                                                 int32_t nout) {
  v = vaddq_n_s32(k_requantize_mve_n(v, p->mult, p->shift), p->out_zp);
  v = vshrq_n_s32(vqshlq_n_s32(v, 24), 24); /* the clamp to int8 without constant vectors */
  vstrbq_p_s32(o, v, vctp32q((uint32_t)nout));
}

/* k <= 16 (attention's head dims and short sequences), where k_dot4's loop set-up and tail cost more than its
 * MACs: each rhs row is one zero-predicated vector, four of them held in registers (with their offset terms)
 * while every lhs row passes them (one load, one VADDV for its sum, four VMLADAV), so each output is written
 * four bytes at a time down the columns. */
static void bmm_small_k_mve(const qbmm_params *pp, const int8_t *lhs, const int8_t *rhs_t, int8_t *out) {
  const qbmm_params q = *pp, *p = &q; /* a copy: the int8 stores could alias *pp, which GCC would reload */
  const int32_t k = p->k, n = p->n, m = p->m;
  const mve_pred16_t pk = vctp8q((uint32_t)k);
  const uint32_t kab = (uint32_t)k * (uint32_t)p->lhs_offset * (uint32_t)p->rhs_offset;
  for (int32_t b = 0; b < p->batch; b++) {
    const int8_t *lb = lhs + (size_t)b * m * k, *rb = rhs_t + (size_t)b * n * k;
    int8_t *ob = out + (size_t)b * m * n;
    for (int32_t j0 = 0; j0 < n; j0 += 4) {
      const int32_t nout = n - j0 < 4 ? n - j0 : 4;
      const int8_t *r = rb + (size_t)j0 * k;
      const int8x16_t v0 = vldrbq_z_s8(r, pk), v1 = vldrbq_z_s8(r + (nout > 1 ? k : 0), pk),
                      v2 = vldrbq_z_s8(r + (nout > 2 ? 2 * k : 0), pk), v3 = vldrbq_z_s8(r + (nout > 3 ? 3 * k : 0), pk);
      const int32_t rs[4] = {vaddvq_s8(v0), vaddvq_s8(v1), vaddvq_s8(v2), vaddvq_s8(v3)};
      /* lhs_offset * sum(r) + k * lhs_offset * rhs_offset per column */
      const int32x4_t cj = vaddq_n_s32(vmulq_n_s32(k_vec4_s32(rs), p->lhs_offset), (int32_t)kab);
      for (int32_t i = 0; i < m; i++) {
        const int8x16_t x = vldrbq_z_s8(lb + (size_t)i * k, pk);
        const int32_t acc[4] = {vmladavq_s8(x, v0), vmladavq_s8(x, v1), vmladavq_s8(x, v2), vmladavq_s8(x, v3)};
        const int32_t ci = (int32_t)((uint32_t)p->rhs_offset * (uint32_t)vaddvq_s8(x));
        bmm_store4_mve(p, vaddq_s32(vaddq_n_s32(k_vec4_s32(acc), ci), cj), ob + (size_t)i * n + j0, nout);
      }
    }
  }
}

/* Four rhs rows per pass over an lhs row, offsets expanded as in linear. */
void emk_batch_matmul_s8_mve(const qbmm_params *p, const int8_t *lhs, const int8_t *rhs_t, int8_t *out) {
  if (!k_requant_vec_ok(p->mult, p->shift)) {
    emk_batch_matmul_s8_ref(p, lhs, rhs_t, out);
    return;
  }
  if (p->k <= 16) {
    bmm_small_k_mve(p, lhs, rhs_t, out);
    return;
  }
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
        bmm_store4_mve(p, k_vec4_s32(acc), out + ((size_t)b * p->m + i) * p->n + j0, nout);
      }
    }
}
#endif

#if FW_HAVE_DSP
/* Four rhs rows per pass over an lhs row with SMLAD (k_dot4_s8_dsp adds lhs_offset to the lhs halves in the
 * same SXTAB16, |l + lhs_offset| <= 255), so the rhs offset is the per-row constant
 * rhs_offset * sum(l + lhs_offset). */
void emk_batch_matmul_s8_dsp(const qbmm_params *pp, const int8_t *lhs, const int8_t *rhs_t, int8_t *out) {
  const qbmm_params q = *pp, *p = &q; /* a copy: the int8 stores could alias *pp, which GCC would reload */
  const int32_t k = p->k, n = p->n, lo = p->lhs_offset;
  for (int32_t b = 0; b < p->batch; b++) {
    const int8_t *rb = rhs_t + (size_t)b * n * k;
    for (int32_t i = 0; i < p->m; i++) {
      const int8_t *l = lhs + ((size_t)b * p->m + i) * k;
      const uint32_t lsum = (uint32_t)k_sum_s8_dsp(l, k) + (uint32_t)k * (uint32_t)lo;
      const int32_t c = (int32_t)(lsum * (uint32_t)p->rhs_offset);
      int8_t *o = out + ((size_t)b * p->m + i) * n;
      int32_t j = 0;
      for (; j + 4 <= n; j += 4) {
        int32_t acc[4] = {c, c, c, c};
        k_dot4_s8_dsp(l, rb + (size_t)j * k, k, k, acc, 1, lo);
        for (int t = 0; t < 4; t++) o[j + t] = k_finish_s8(acc[t], p->mult, p->shift, p->out_zp, -128, 127);
      }
      for (; j < n; j++) {
        int32_t acc = c;
        k_dot1_s8_dsp(l, rb + (size_t)j * k, k, &acc, 1, lo);
        o[j] = k_finish_s8(acc, p->mult, p->shift, p->out_zp, -128, 127);
      }
    }
  }
}
#endif

void emk_batch_matmul_s8(const qbmm_params *p, const int8_t *lhs, const int8_t *rhs_t, int8_t *out) {
  K_BEST(emk_batch_matmul_s8)(p, lhs, rhs_t, out);
}
