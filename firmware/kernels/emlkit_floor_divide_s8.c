/* emlkit::floor_divide: the exact floor of the quotient of two int8 tensors' real values, requantized once
 * (emlkit/emlkit_ops.py defines the numerics). Both scales enter as 24-bit integer mantissas and one exponent,
 * so N / D is the real quotient itself and its floor is exact (no float, no rounding before the floor). */
#include "emlkit_kernels.h"

#define FLOOR_DIV_CLAMP ((int64_t)1 << 31)

static int64_t floor_div64(int64_t n, int64_t d) {
  const int64_t q = n / d; /* C truncates toward zero: one less when the signs differ and it is inexact */
  return (n % d != 0 && ((n < 0) != (d < 0))) ? q - 1 : q;
}

void emk_emlkit_floor_divide_s8_ref(const int8_t *a, const int8_t *b, int8_t *out, size_t n,
                                    const emlkit_floor_div_params *p) {
  const int32_t up = p->exp > 0 ? p->exp : 0, down = p->exp < 0 ? -p->exp : 0;
  const int8_t zp_out = (int8_t)(p->out_zp < -128 ? -128 : (p->out_zp > 127 ? 127 : p->out_zp));
  for (size_t i = 0; i < n; i++) {
    const int32_t qa = a[i] - p->a_zp, qb = b[i] - p->b_zp;
    if (qb == 0) { /* a real division by zero: +-inf saturates, 0 / 0 gives the output's zero */
      out[i] = qa > 0 ? 127 : (qa < 0 ? -128 : zp_out);
      continue;
    }
    /* shifts of the magnitudes (a left shift of a negative int64 is undefined in C11) */
    const int64_t num = (int64_t)qa * p->a_mant * ((int64_t)1 << up);
    const int64_t den = (int64_t)qb * p->b_mant * ((int64_t)1 << down);
    int64_t f = floor_div64(num, den);
    f = f < -FLOOR_DIV_CLAMP ? -FLOOR_DIV_CLAMP : (f > FLOOR_DIV_CLAMP ? FLOOR_DIV_CLAMP : f);
    out[i] = emlkit_requant_s8(f, p->mult, p->shift, p->out_zp);
  }
}

void emk_emlkit_floor_divide_s8(const int8_t *a, const int8_t *b, int8_t *out, size_t n,
                                const emlkit_floor_div_params *p) {
  emk_emlkit_floor_divide_s8_ref(a, b, out, n, p);
}
