/* cortex_m::transpose (input.permute(perm).contiguous()) and, through the
 * same strided walk, any dim-order change: the output is written densely in
 * its memory order, the input read with the strides the adapter derived. */
#include <string.h>

#include "kernels.h"

void emk_transpose_any_ref(size_t es, int ndim, const int32_t *out_shape, const int32_t *in_str,
                  const void *in, void *out) {
  int32_t idx[K_MAX_DIM] = {0};
  size_t total = 1;
  for (int d = 0; d < ndim; d++) total *= (size_t)out_shape[d];
  const uint8_t *src = (const uint8_t *)in;
  uint8_t *dst = (uint8_t *)out;
  ptrdiff_t off = 0;
  for (size_t k = 0; k < total; k++) {
    switch (es) { /* fixed-size copies avoid a memcpy call per element */
      case 1: dst[k] = src[off]; break;
      case 2: memcpy(dst + 2 * k, src + 2 * off, 2); break;
      case 4: memcpy(dst + 4 * k, src + 4 * off, 4); break;
      default: memcpy(dst + es * k, src + (ptrdiff_t)es * off, es); break;
    }
    for (int d = ndim - 1; d >= 0; d--) {
      off += in_str[d];
      if (++idx[d] < out_shape[d]) break;
      off -= (ptrdiff_t)in_str[d] * out_shape[d];
      idx[d] = 0;
    }
  }
}

void emk_transpose_any(size_t es, int ndim, const int32_t *out_shape, const int32_t *in_str,
              const void *in, void *out) {
  emk_transpose_any_ref(es, ndim, out_shape, in_str, in, out);
}
