/* emlkit::softmax: int8 softmax with a free output scale, integer only.
 * exp(-(max - x) * s_in) comes from a 256-entry table built on the host (the
 * difference of two int8 codes is 0..255 and the zero point cancels), the
 * probability is one rounded 64-bit division per element, the output a
 * multiplier/shift requantization. Same operations as the Python reference
 * (emlkit/emlkit_ops.py), hence bit-exact. No MVE variant: the 64-bit division
 * dominates and Helium has no integer divide. */
#include "emlkit_exp_rows.h"
#include "emlkit_kernels.h"

void emk_emlkit_softmax_s8_ref(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                           const int32_t *table, int32_t zp, int32_t mult, int32_t shift) {
  for (int32_t o = 0; o < outer; o++)
    for (int32_t i = 0; i < inner; i++) {
      const k_exp_row r = k_exp_row_s8(in, out, o, i, len, inner, table);
      /* r.sum >= table[0] >= 1 (the max element) */
      for (int32_t j = 0; j < len; j++)
        r.y[(size_t)j * inner] = k_exp_prob_s8((uint32_t)table[r.max - r.x[(size_t)j * inner]], r.sum, mult, shift, zp);
    }
}

void emk_emlkit_softmax_s8(const int8_t *in, int8_t *out, int32_t outer, int32_t len, int32_t inner,
                       const int32_t *table, int32_t zp, int32_t mult, int32_t shift) {
  emk_emlkit_softmax_s8_ref(in, out, outer, len, inner, table, zp, mult, shift);
}
