/* emlkit::floor_divide: the exact floor of the quotient of two int8 tensors' real values, requantized once
 * (emlkit/emlkit_ops.py defines the numerics). Both scales enter as 24-bit integer mantissas and one exponent,
 * so N / D is the real quotient itself and its floor is exact (no float, no rounding before the floor). */
#include <stddef.h>

#include "emlkit_kernels.h"

#define FLOOR_DIV_CLAMP ((int64_t)1 << 31)

static int64_t floor_div64(int64_t n, int64_t d) {
  const int64_t q = n / d; /* C truncates toward zero: one less when the signs differ and it is inexact */
  return (n % d != 0 && ((n < 0) != (d < 0))) ? q - 1 : q;
}

/* One quotient: the codes qa = a - a_zp, qb = b - b_zp. */
static inline int8_t floor_div_one(int32_t qa, int32_t qb, const emlkit_floor_div_params *p) {
  if (qb == 0) { /* a real division by zero: +-inf saturates, 0 / 0 gives the output's zero */
    const int32_t zp_out = p->out_zp < -128 ? -128 : (p->out_zp > 127 ? 127 : p->out_zp);
    return (int8_t)(qa > 0 ? 127 : (qa < 0 ? -128 : zp_out));
  }
  const int32_t up = p->exp > 0 ? p->exp : 0, down = p->exp < 0 ? -p->exp : 0;
  /* shifts of the magnitudes (a left shift of a negative int64 is undefined in C11) */
  const int64_t num = (int64_t)qa * p->a_mant * ((int64_t)1 << up);
  const int64_t den = (int64_t)qb * p->b_mant * ((int64_t)1 << down);
  int64_t f = floor_div64(num, den);
  f = f < -FLOOR_DIV_CLAMP ? -FLOOR_DIV_CLAMP : (f > FLOOR_DIV_CLAMP ? FLOOR_DIV_CLAMP : f);
  return emlkit_requant_s8(f, p->mult, p->shift, p->out_zp);
}

void emk_emlkit_floor_divide_s8_ref(const int8_t *a, const int8_t *b, int8_t *out, size_t n,
                                    const emlkit_floor_div_params *p) {
  for (size_t i = 0; i < n; i++) out[i] = floor_div_one(a[i] - p->a_zp, b[i] - p->b_zp, p);
}

void emk_emlkit_floor_divide_s8(const int8_t *a, const int8_t *b, int8_t *out, size_t n,
                                const emlkit_floor_div_params *p) {
  emk_emlkit_floor_divide_s8_ref(a, b, out, n, p);
}

void emk_emlkit_floor_divide_bcast_s8_ref(const int8_t *a, const int8_t *b, int8_t *out, const emlkit_bcast_walk *w,
                                          const emlkit_floor_div_params *p) {
  int32_t at[EMLKIT_FLOOR_DIV_MAX_DIMS] = {0};
  size_t total = 1;
  for (int32_t d = 0; d < w->rank; d++) total *= (size_t)w->size[d];
  const int8_t *pa = a, *pb = b;
  for (size_t i = 0; i < total; i++) {
    out[i] = floor_div_one(*pa - p->a_zp, *pb - p->b_zp, p);
    for (int32_t d = w->rank - 1; d >= 0; d--) { /* an odometer over the dims, innermost first */
      pa += w->a_step[d];
      pb += w->b_step[d];
      if (++at[d] < w->size[d]) break;
      pa -= (ptrdiff_t)w->a_step[d] * w->size[d];
      pb -= (ptrdiff_t)w->b_step[d] * w->size[d];
      at[d] = 0;
    }
  }
}

void emk_emlkit_floor_divide_bcast_s8(const int8_t *a, const int8_t *b, int8_t *out, const emlkit_bcast_walk *w,
                                      const emlkit_floor_div_params *p) {
  emk_emlkit_floor_divide_bcast_s8_ref(a, b, out, w, p);
}
