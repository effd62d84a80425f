/* cortex_m::minimum and cortex_m::maximum: torch.minimum/maximum with
 * broadcasting. The adapter turns broadcasting and dim orders into per-input
 * strides over the output's memory order; this walks them like an odometer.
 * Float inputs propagate NaN like torch. Cheap enough that there is no MVE
 * variant (the model only uses them for clamps of small tensors). */
#include "kernels.h"

#define MINMAX_LOOP(T, PICK)                                                   \
  do {                                                                         \
    const T *pa = (const T *)a;                                                \
    const T *pb = (const T *)b;                                                \
    T *po = (T *)out;                                                          \
    for (size_t k = 0; k < total; k++) {                                       \
      const T x = pa[ia], y = pb[ib];                                          \
      po[k] = PICK;                                                            \
      for (int d = ndim - 1; d >= 0; d--) {                                    \
        ia += a_str[d];                                                        \
        ib += b_str[d];                                                        \
        if (++idx[d] < shape[d]) break;                                        \
        ia -= (ptrdiff_t)a_str[d] * shape[d];                                  \
        ib -= (ptrdiff_t)b_str[d] * shape[d];                                  \
        idx[d] = 0;                                                            \
      }                                                                        \
    }                                                                          \
  } while (0)

/* Integer types: no NaN, a plain comparison. */
#define MINMAX_INT(T)                        \
  do {                                       \
    if (is_max) MINMAX_LOOP(T, x > y ? x : y); \
    else MINMAX_LOOP(T, x < y ? x : y);      \
  } while (0)

void emk_minmax_any_ref(k_dtype dt, int is_max, int ndim, const int32_t *shape, const void *a,
                 const int32_t *a_str, const void *b, const int32_t *b_str, void *out) {
  int32_t idx[K_MAX_DIM] = {0};
  size_t total = 1;
  for (int d = 0; d < ndim; d++) total *= (size_t)shape[d];
  ptrdiff_t ia = 0, ib = 0;
  switch (dt) {
    case K_U8: MINMAX_INT(uint8_t); break;
    case K_S8: MINMAX_INT(int8_t); break;
    case K_S16: MINMAX_INT(int16_t); break;
    case K_S32: MINMAX_INT(int32_t); break;
    case K_F32:
      /* x != x: NaN in either input wins, as in torch */
      if (is_max) MINMAX_LOOP(float, x != x ? x : (y != y ? y : (x > y ? x : y)));
      else MINMAX_LOOP(float, x != x ? x : (y != y ? y : (x < y ? x : y)));
      break;
  }
}

void emk_minmax_any(k_dtype dt, int is_max, int ndim, const int32_t *shape, const void *a,
             const int32_t *a_str, const void *b, const int32_t *b_str, void *out) {
  emk_minmax_any_ref(dt, is_max, ndim, shape, a, a_str, b, b_str, out);
}
