/* Helium helpers shared by the *_mve kernels (internal header). */
#ifndef FW_KERNELS_MVE_H
#define FW_KERNELS_MVE_H

#include "kernels.h"

#if FW_HAVE_MVE
#include <arm_mve.h>

/* Vector twin of k_requantize for lanes with 0 <= mult and -31 <= shift <= 0
 * (the only case the callers send here; others take the scalar path).
 * VQRDMULH computes (a*b + 2^30) >> 31 exactly like the reference (it only
 * saturates for INT32_MIN*INT32_MIN, excluded by mult >= 0). The reference's
 * divide rounds half away from zero while VRSHL rounds half up, so negative
 * lanes are first nudged down by one; `x & neg_shift` has its sign bit set
 * exactly when x < 0 and the shift is non-zero. */
static inline int32x4_t k_requantize_mve(int32x4_t x, int32x4_t mult, int32x4_t neg_shift) {
  x = vqrdmulhq_s32(x, mult);
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(x, neg_shift), 31);
  x = vqaddq_s32(x, fixup);
  return vrshlq_s32(x, neg_shift);
}

/* Same with one multiplier/shift for all lanes. */
static inline int32x4_t k_requantize_mve_n(int32x4_t x, int32_t mult, int32_t neg_shift) {
  x = vqrdmulhq_n_s32(x, mult);
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(x, vdupq_n_s32(neg_shift)), 31);
  x = vqaddq_s32(x, fixup);
  return vrshlq_n_s32(x, neg_shift);
}

/* Whether (mult, shift) can use the vector requantization above. */
static inline int k_requant_vec_ok(int32_t mult, int32_t shift) {
  return mult >= 0 && shift <= 0 && shift >= -31;
}
#endif

#endif

#if FW_HAVE_MVE
#ifndef FW_KERNELS_MVE_DOT
#define FW_KERNELS_MVE_DOT
/* Four int8 dot products of one `x` run against four weight runs of `len`
 * bytes, 16 MACs per VMLADAVA; tail loads are zero-predicated so the sums
 * need no predication. With want_wsum the weight sums are accumulated too
 * (for the input-offset term of partial windows). Inlined with a constant
 * want_wsum so both variants are branch-free. */
static inline __attribute__((always_inline)) void k_dot4_s8_mve(
    const int8_t *x, const int8_t *w0, const int8_t *w1, const int8_t *w2, const int8_t *w3,
    int32_t len, int32_t acc[4], int32_t wsum[4], const int want_wsum) {
  int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int32_t i = 0;
  for (; i + 16 <= len; i += 16) {
    const int8x16_t vx = vldrbq_s8(x + i);
    const int8x16_t v0 = vldrbq_s8(w0 + i), v1 = vldrbq_s8(w1 + i);
    const int8x16_t v2 = vldrbq_s8(w2 + i), v3 = vldrbq_s8(w3 + i);
    a0 = vmladavaq_s8(a0, vx, v0);
    a1 = vmladavaq_s8(a1, vx, v1);
    a2 = vmladavaq_s8(a2, vx, v2);
    a3 = vmladavaq_s8(a3, vx, v3);
    if (want_wsum) {
      s0 = vaddvaq_s8(s0, v0);
      s1 = vaddvaq_s8(s1, v1);
      s2 = vaddvaq_s8(s2, v2);
      s3 = vaddvaq_s8(s3, v3);
    }
  }
  if (i < len) {
    const mve_pred16_t pr = vctp8q((uint32_t)(len - i));
    const int8x16_t vx = vldrbq_z_s8(x + i, pr);
    const int8x16_t v0 = vldrbq_z_s8(w0 + i, pr), v1 = vldrbq_z_s8(w1 + i, pr);
    const int8x16_t v2 = vldrbq_z_s8(w2 + i, pr), v3 = vldrbq_z_s8(w3 + i, pr);
    a0 = vmladavaq_s8(a0, vx, v0);
    a1 = vmladavaq_s8(a1, vx, v1);
    a2 = vmladavaq_s8(a2, vx, v2);
    a3 = vmladavaq_s8(a3, vx, v3);
    if (want_wsum) {
      s0 = vaddvaq_s8(s0, v0);
      s1 = vaddvaq_s8(s1, v1);
      s2 = vaddvaq_s8(s2, v2);
      s3 = vaddvaq_s8(s3, v3);
    }
  }
  acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
  if (want_wsum) {
    wsum[0] += s0; wsum[1] += s1; wsum[2] += s2; wsum[3] += s3;
  }
}

/* Sum of `len` int8 values. */
static inline int32_t k_sum_s8_mve(const int8_t *x, int32_t len) {
  int32_t s = 0, i = 0;
  for (; i + 16 <= len; i += 16) s = vaddvaq_s8(s, vldrbq_s8(x + i));
  if (i < len) s = vaddvaq_s8(s, vldrbq_z_s8(x + i, vctp8q((uint32_t)(len - i))));
  return s;
}

/* int32 lanes from four scalars. */
static inline int32x4_t k_vec4_s32(const int32_t v[4]) {
  int32x4_t r = vdupq_n_s32(v[0]);
  r = vsetq_lane_s32(v[1], r, 1);
  r = vsetq_lane_s32(v[2], r, 2);
  return vsetq_lane_s32(v[3], r, 3);
}
#endif
#endif
