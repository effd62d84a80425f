/* emlkit::log_softmax: int8 log_softmax with a free output scale, integer only.
 * log_softmax_j = -(max - x_j) * s_in - ln(sum_k exp(-(max - x_k) * s_in)): the sum comes from softmax's
 * 256-entry exp table (exp_table[0] = 2^22), its log from an integer log2 (repeated squaring of the
 * normalised mantissa, Q20), and both terms are added in log2 units before one requantization. Same
 * operations as the Python reference (emlkit/emlkit_ops.py), hence bit-exact. One log per row, so no
 * MVE variant: the per-element work is a multiply-add and the requantization. */
#include "emlkit_exp_rows.h"
#include "emlkit_kernels.h"

#define LOG_FRAC 20
#define EXP_ONE_BITS 22

/* log2(s) in Q20 (s >= 1): the integer part from the bit length, 20 fraction bits by squaring m in Q30. */
static int64_t log2_q20(uint64_t s) {
  int32_t k = 63;
  while (!(s >> k)) k--;
  uint64_t m = k <= 30 ? s << (30 - k) : s >> (k - 30); /* [2^30, 2^31) */
  int64_t frac = 0;
  for (int i = 0; i < LOG_FRAC; i++) {
    m = (m * m) >> 30; /* m < 2^31: m * m < 2^62 */
    frac <<= 1;
    if (m >= ((uint64_t)1 << 31)) {
      m >>= 1;
      frac |= 1;
    }
  }
  return ((int64_t)k << LOG_FRAC) + frac;
}

void emk_emlkit_log_softmax_s8_ref(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                                   const int32_t *table, int32_t log2_scale, int32_t zp, int32_t mult,
                                   int32_t shift) {
  for (int32_t o = 0; o < outer; o++)
    for (int32_t i = 0; i < inner; i++) {
      const k_exp_row r = k_exp_row_s8(in, out, o, i, len, inner, table);
      /* r.sum >= table[0] = 2^22 (the max element), so l >= 0; a <= 255 * 2^23 + 16 * 2^20 < 2^31 */
      const int64_t l = log2_q20(r.sum) - ((int64_t)EXP_ONE_BITS << LOG_FRAC);
      for (int32_t j = 0; j < len; j++) {
        const int64_t a = (int64_t)(r.max - r.x[(size_t)j * inner]) * log2_scale + l;
        r.y[(size_t)j * inner] = emlkit_requant_s8(-a, mult, shift, zp);
      }
    }
}

void emk_emlkit_log_softmax_s8(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                               const int32_t *table, int32_t log2_scale, int32_t zp, int32_t mult, int32_t shift) {
  emk_emlkit_log_softmax_s8_ref(in, out, outer, len, inner, table, log2_scale, zp, mult, shift);
}
