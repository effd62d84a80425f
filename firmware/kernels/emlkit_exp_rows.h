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

/* k_exp_prob_s8's quotient for every kept element of one row, without a 64-bit division per element:
 * floor((e * 2^31 + sum) / (2 sum)) = floor(m / sum), m = e * 2^30 + floor(sum / 2) (for an odd sum the dropped half
 * never carries the quotient over). m * floor((2^64 - 1) / sum) / 2^64 is q or q - 1 (m < 2^53 makes the
 * reciprocal's error under 2^-10), and one remainder check settles it: exact for 2 <= sum < 2^32, the division
 * otherwise. The reciprocal costs one division per row. */
typedef struct {
  uint64_t sum, recip;
  uint32_t half;
  int fast;
} k_exp_div;

static inline k_exp_div k_exp_div_make(uint64_t sum) {
  k_exp_div d;
  d.sum = sum, d.half = (uint32_t)(sum >> 1), d.fast = sum >= 2 && sum <= 0xFFFFFFFFu;
  d.recip = d.fast ? UINT64_MAX / sum : 0;
  return d;
}

/* The high 64 bits of a * b (a < 2^53), from four 32 x 32 -> 64 products. */
static inline uint64_t k_mulhi64(uint64_t a, uint64_t b) {
  const uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
  const uint64_t t = al * bl, u = ah * bl + (t >> 32), v = al * bh + (uint32_t)u;
  return ah * bh + (u >> 32) + (v >> 32);
}

/* floor((e * 2^31 + sum) / (2 sum)), sum = d->sum. */
static inline uint64_t k_exp_quotient(uint64_t e, const k_exp_div *d) {
  if (!d->fast) return ((e << 31) + d->sum) / (2 * d->sum);
  const uint64_t m = (e << 30) + d->half;
  uint64_t q = k_mulhi64(m, d->recip);
  if (m - q * d->sum >= d->sum) q++;
  return q;
}

/* k_exp_prob_s8(e, d->sum, ...), the same code. */
static inline int8_t k_exp_prob_div_s8(uint64_t e, const k_exp_div *d, int32_t mult, int32_t shift, int32_t zp) {
  return emlkit_requant_s8((int64_t)k_exp_quotient(e, d), mult, shift, zp);
}

#endif
