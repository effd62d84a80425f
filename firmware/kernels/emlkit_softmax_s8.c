/* emlkit::softmax: int8 softmax with a free output scale, integer only.
 * exp(-(max - x) * s_in) comes from a 256-entry table built on the host (the
 * difference of two int8 codes is 0..255 and the zero point cancels), the
 * probability is one rounded 64-bit division per element, the output a
 * multiplier/shift requantization. Same operations as the Python reference
 * (emlkit/emlkit_ops.py), hence bit-exact. No MVE variant: the 64-bit division
 * dominates and Helium has no integer divide: the non-reference entry divides by
 * multiplying with each row's reciprocal instead (emlkit_exp_rows.h). */
#include "emlkit_exp_rows.h"
#include "emlkit_kernels.h"

/* FAST: the quotients through the row's reciprocal (k_exp_prob_div_s8), else one division each. */
static inline __attribute__((always_inline)) void softmax_rows(const int8_t *in, int8_t *out, int32_t outer,
    int32_t len, int32_t inner, const int32_t *table, int32_t zp, int32_t mult, int32_t shift, int fast) {
  for (int32_t o = 0; o < outer; o++)
    for (int32_t i = 0; i < inner; i++) {
      const k_exp_row r = k_exp_row_s8(in, out, o, i, len, inner, table);
      const k_exp_div d = k_exp_div_make(r.sum); /* r.sum >= table[0] >= 1 (the max element) */
      for (int32_t j = 0; j < len; j++) {
        const uint32_t e = (uint32_t)table[r.max - r.x[(size_t)j * inner]];
        r.y[(size_t)j * inner] = fast ? k_exp_prob_div_s8(e, &d, mult, shift, zp) : k_exp_prob_s8(e, r.sum, mult, shift, zp);
      }
    }
}

void emk_emlkit_softmax_s8_ref(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                           const int32_t *table, int32_t zp, int32_t mult, int32_t shift) {
  softmax_rows(in, out, outer, len, inner, table, zp, mult, shift, 0);
}

void emk_emlkit_softmax_s8(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                       const int32_t *table, int32_t zp, int32_t mult, int32_t shift) {
  softmax_rows(in, out, outer, len, inner, table, zp, mult, shift, 1);
}

uint64_t emk_emlkit_exp_quotient(uint64_t e, uint64_t sum) {
  const k_exp_div d = k_exp_div_make(sum);
  return k_exp_quotient(e, &d);
}
