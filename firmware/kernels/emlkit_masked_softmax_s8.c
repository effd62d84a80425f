/* emlkit::masked_softmax: emlkit::softmax (emlkit_softmax_s8.c) over the elements a broadcast bool mask leaves in.
 * The same table, sum and rounded division per element, so a row with nothing left out gives emlkit::softmax's
 * codes; a left-out element, and each element of a row with nothing left in, gets probability 0 (torch's
 * exp(-inf); a row torch would fill with NaN gets the code of 0 here). The mask is read through steps, so a
 * [B, S] key padding mask serves [B, H, L, S] scores without a copy. Bit-exact with the Python reference
 * (emlkit/emlkit_ops.py). */
#include "emlkit_exp_rows.h"
#include "emlkit_kernels.h"

static inline __attribute__((always_inline)) void masked_row(const int8_t *x, const uint8_t *m, int8_t *y,
    int32_t len, ptrdiff_t xs, ptrdiff_t ms, const int32_t *table, int32_t zp, int32_t mult, int32_t shift, int fast) {
  int32_t mx = -129;
  for (int32_t j = 0; j < len; j++)
    if (!m[j * ms] && x[j * xs] > mx) mx = x[j * xs];
  uint64_t s = 0;
  if (mx >= -128)
    for (int32_t j = 0; j < len; j++)
      if (!m[j * ms]) s += (uint32_t)table[mx - x[j * xs]];
  /* s >= table[0] >= 1 when a kept element exists */
  const int8_t zero = emlkit_requant_s8(0, mult, shift, zp);
  const k_exp_div d = k_exp_div_make(s);
  for (int32_t j = 0; j < len; j++) {
    if (m[j * ms] || s == 0) {
      y[j * xs] = zero;
      continue;
    }
    const uint32_t e = (uint32_t)table[mx - x[j * xs]];
    y[j * xs] = fast ? k_exp_prob_div_s8(e, &d, mult, shift, zp) : k_exp_prob_s8(e, s, mult, shift, zp);
  }
}

/* FAST: the quotients through each row's reciprocal (k_exp_prob_div_s8), else one division each. */
static inline __attribute__((always_inline)) void masked_rows(const int8_t *in, const uint8_t *mask, int8_t *out,
    const emlkit_row_walk *w, const int32_t *table, int32_t zp, int32_t mult, int32_t shift, int fast) {
  const int32_t last = w->rank - 1; /* the softmax dim; the dims before it count the rows */
  int32_t idx[EMLKIT_MASKED_SOFTMAX_MAX_DIMS] = {0};
  ptrdiff_t xo = 0, mo = 0;
  for (;;) {
    masked_row(in + xo, mask + mo, out + xo, w->size[last], w->x_step[last], w->m_step[last], table, zp, mult,
               shift, fast);
    int32_t d = last - 1;
    for (; d >= 0; d--) { /* next row: an odometer over the outer dims */
      if (++idx[d] < w->size[d]) {
        xo += w->x_step[d], mo += w->m_step[d];
        break;
      }
      xo -= (ptrdiff_t)(w->size[d] - 1) * w->x_step[d], mo -= (ptrdiff_t)(w->size[d] - 1) * w->m_step[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

void emk_emlkit_masked_softmax_s8_ref(const int8_t *in, const uint8_t *mask, int8_t *out, const emlkit_row_walk *w,
                                      const int32_t *table, int32_t zp, int32_t mult, int32_t shift) {
  masked_rows(in, mask, out, w, table, zp, mult, shift, 0);
}

void emk_emlkit_masked_softmax_s8(const int8_t *in, const uint8_t *mask, int8_t *out, const emlkit_row_walk *w,
                                  const int32_t *table, int32_t zp, int32_t mult, int32_t shift) {
  masked_rows(in, mask, out, w, table, zp, mult, shift, 1);
}
