/* The rows of emlkit::softmax and emlkit::log_softmax (internal header): each kernel walks the [outer][len][inner]
 * view row by row and needs, per row, where it starts and its exp-table sum (k_exp_sum_strided_s8); the softmaxes'
 * probability code (k_exp_prob_s8). */
#ifndef FW_EMLKIT_EXP_ROWS_H
#define FW_EMLKIT_EXP_ROWS_H

#include "emlkit_kernels.h"

typedef struct {
  const int8_t *x; /* the row's first input element; the next ones `inner` apart */
  int8_t *y;       /* its first output element, likewise */
  int32_t max;     /* its largest code */
  uint64_t sum;    /* sum of table[max - x_j] over the row */
} k_exp_row;

/* Row (o, i) of in and out, [outer][len][inner]: the row over len at outer index o and inner index i. */
static inline k_exp_row k_exp_row_s8(const int8_t *in, int8_t *out, int32_t o, int32_t i, int32_t len, int32_t inner,
                                     const int32_t *table) {
  k_exp_row r;
  r.x = in + (size_t)o * len * inner + i;
  r.y = out + (size_t)o * len * inner + i;
  r.sum = k_exp_sum_strided_s8(r.x, len, inner, table, &r.max);
  return r;
}

/* A kept element's output code: p = round(e * 2^30 / sum) (e = table[max - x], sum >= 1; e << 31 <= 2^53) in one
 * 64-bit division, then requantized (emlkit::softmax and emlkit::masked_softmax alike). */
static inline int8_t k_exp_prob_s8(uint64_t e, uint64_t sum, int32_t mult, int32_t shift, int32_t zp) {
  return emlkit_requant_s8((int64_t)(((e << 31) + sum) / (2 * sum)), mult, shift, zp);
}

#endif
