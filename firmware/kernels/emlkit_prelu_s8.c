/* emlkit::prelu: int8 PReLU with one slope per channel (emlkit/emlkit_ops.py defines the numerics). The positive
 * side has one requantization, the negative side one per channel (its multiplier carries the slope's sign).
 * Integer arithmetic only, so one portable kernel; the dispatcher keeps the kernels.h shape. */
#include "emlkit_kernels.h"

void emk_emlkit_prelu_s8_ref(const int8_t *in, int8_t *out, int32_t outer, int32_t c, int32_t inner,
                             const int32_t *neg, int32_t in_zp, int32_t out_zp, int32_t mult, int32_t shift) {
  for (int32_t o = 0; o < outer; o++)
    for (int32_t k = 0; k < c; k++) {
      const int32_t nm = neg[2 * k], ns = neg[2 * k + 1];
      for (int32_t i = 0; i < inner; i++) {
        const int32_t q = *in++ - in_zp;
        *out++ = q >= 0 ? emlkit_requant_s8(q, mult, shift, out_zp) : emlkit_requant_s8(q, nm, ns, out_zp);
      }
    }
}

void emk_emlkit_prelu_s8(const int8_t *in, int8_t *out, int32_t outer, int32_t c, int32_t inner, const int32_t *neg,
                         int32_t in_zp, int32_t out_zp, int32_t mult, int32_t shift) {
  emk_emlkit_prelu_s8_ref(in, out, outer, c, inner, neg, in_zp, out_zp, mult, shift);
}
