/* cortex_m::pad: constant padding. The AoT pass gives pre/post pads in the
 * tensor's physical (memory) dim order, so the kernel pads the dense 4-D
 * memory view directly: rows of the innermost dim are copied with memcpy. */
#include <string.h>

#include "kernels.h"

static void fill(uint8_t *dst, size_t count, const void *value, size_t es) {
  for (size_t i = 0; i < count; i++) memcpy(dst + i * es, value, es);
}

void emk_pad_any_ref(size_t es, const int32_t in_shape[4], const int32_t pre[4], const int32_t post[4],
              const void *in, const void *value, void *out) {
  int32_t os[4];
  for (int d = 0; d < 4; d++) os[d] = in_shape[d] + pre[d] + post[d];
  const uint8_t *src = (const uint8_t *)in;
  uint8_t *dst = (uint8_t *)out;
  const size_t row = (size_t)in_shape[3] * es;
  for (int32_t i0 = 0; i0 < os[0]; i0++) {
    for (int32_t i1 = 0; i1 < os[1]; i1++) {
      for (int32_t i2 = 0; i2 < os[2]; i2++) {
        const int32_t s0 = i0 - pre[0], s1 = i1 - pre[1], s2 = i2 - pre[2];
        uint8_t *o = dst + ((((size_t)i0 * os[1] + i1) * os[2] + i2) * os[3]) * es;
        if (s0 < 0 || s0 >= in_shape[0] || s1 < 0 || s1 >= in_shape[1] || s2 < 0 ||
            s2 >= in_shape[2]) {
          fill(o, (size_t)os[3], value, es);
          continue;
        }
        fill(o, (size_t)pre[3], value, es);
        memcpy(o + (size_t)pre[3] * es,
               src + ((((size_t)s0 * in_shape[1] + s1) * in_shape[2] + s2) * in_shape[3]) * es,
               row);
        fill(o + (size_t)pre[3] * es + row, (size_t)post[3], value, es);
      }
    }
  }
}

void emk_pad_any(size_t es, const int32_t in_shape[4], const int32_t pre[4], const int32_t post[4],
          const void *in, const void *value, void *out) {
  emk_pad_any_ref(es, in_shape, pre, post, in, value, out);
}
