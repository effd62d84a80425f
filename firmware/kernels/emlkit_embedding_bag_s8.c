/* emlkit::embedding_bag: sum, mean or max of int8 table rows per bag, requantized once (emlkit/emlkit_ops.py
 * defines the numerics; the adapter has checked every index and offset). The mean multiplies the bag's sum by a
 * Q16 reciprocal of its count, so the kernel needs no division per element; sums (of rows times their per-sample
 * weights' codes, when given) are exact in int64. */
#include <stdbool.h>

#include "emlkit_kernels.h"

void emk_emlkit_embedding_bag_s8_ref(const emlkit_embedding_bag_params *p, const int8_t *weight, const int64_t *indices,
                                     const int64_t *offsets, const int8_t *psw, int8_t *out) {
  const int32_t bags = p->n_off - (p->include_last_offset ? 1 : 0);
  for (int32_t j = 0; j < bags; j++) {
    const int64_t start = offsets[j], end = j + 1 < p->n_off ? offsets[j + 1] : p->n_idx;
    int32_t n = 0;
    for (int64_t e = start; e < end; e++) n += indices[e] != p->padding_idx;
    const int64_t recip =
        p->mode == 1 && n > 0 ? (((int64_t)1 << EMLKIT_EMBEDDING_BAG_MEAN_BITS) + n / 2) / n : 1;
    for (int32_t col = 0; col < p->dim; col++) {
      int64_t v = 0;
      bool first = true;
      for (int64_t e = start; e < end; e++) {
        if (indices[e] == p->padding_idx) continue;
        const int32_t w = weight[(size_t)indices[e] * (size_t)p->dim + (size_t)col] - p->w_zp;
        if (p->mode == 2) v = first || w > v ? w : v;
        else if (psw) v += (int64_t)w * (psw[e] - p->psw_zp);
        else v += w;
        first = false;
      }
      *out++ = emlkit_requant_s8(v * recip, p->mult, p->shift, p->out_zp);
    }
  }
}

void emk_emlkit_embedding_bag_s8(const emlkit_embedding_bag_params *p, const int8_t *weight, const int64_t *indices,
                                 const int64_t *offsets, const int8_t *psw, int8_t *out) {
  emk_emlkit_embedding_bag_s8_ref(p, weight, indices, offsets, psw, out);
}
