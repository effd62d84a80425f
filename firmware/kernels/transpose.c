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

/* The same copy by rows: size-1 dims dropped, neighbouring dims that are contiguous in the input too merged,
 * then the innermost dim as one block copy where the input is contiguous along it (a permutation that keeps the
 * last dim: whole rows), else a tight strided loop over the longest dim, so the odometer steps once per row,
 * not per element (any loop order writes the same elements). */
void emk_transpose_any(size_t es, int ndim, const int32_t *out_shape, const int32_t *in_str, const void *in,
                       void *out) {
  int32_t sz[K_MAX_DIM], st[K_MAX_DIM], idx[K_MAX_DIM] = {0};
  size_t ost[K_MAX_DIM];
  int n = 0;
  for (int d = 0; d < ndim; d++) {
    if (out_shape[d] == 0) return;
    if (out_shape[d] == 1) continue;
    if (n > 0 && st[n - 1] == in_str[d] * out_shape[d]) { /* the output is dense: dims n-1 and d are one */
      sz[n - 1] *= out_shape[d], st[n - 1] = in_str[d];
      continue;
    }
    sz[n] = out_shape[d], st[n] = in_str[d], n++;
  }
  const uint8_t *src = (const uint8_t *)in;
  uint8_t *dst = (uint8_t *)out;
  if (n == 0) {
    memcpy(dst, src, es);
    return;
  }
  ost[n - 1] = es;
  for (int d = n - 2; d >= 0; d--) ost[d] = ost[d + 1] * (size_t)sz[d + 1];
  if (st[n - 1] != 1) {
    int b = n - 1;
    for (int d = 0; d + 1 < n; d++)
      if (sz[d] > sz[b]) b = d;
    const int32_t ts = sz[b], tt = st[b];
    const size_t to = ost[b];
    sz[b] = sz[n - 1], st[b] = st[n - 1], ost[b] = ost[n - 1];
    sz[n - 1] = ts, st[n - 1] = tt, ost[n - 1] = to;
  }
  const int32_t cnt = sz[n - 1];
  const ptrdiff_t step = (ptrdiff_t)st[n - 1] * (ptrdiff_t)es;
  const size_t ostep = ost[n - 1];
  ptrdiff_t off = 0;
  size_t doff = 0;
  for (;;) {
    const uint8_t *s = src + off;
    uint8_t *o = dst + doff;
    if (step == (ptrdiff_t)es && ostep == es) memcpy(o, s, (size_t)cnt * es);
    else if (es == 1)
      for (int32_t i = 0; i < cnt; i++) o[(size_t)i * ostep] = s[i * step];
    else
      for (int32_t i = 0; i < cnt; i++) memcpy(o + (size_t)i * ostep, s + i * step, es);
    int d = n - 2;
    for (; d >= 0; d--) {
      off += (ptrdiff_t)st[d] * (ptrdiff_t)es, doff += ost[d];
      if (++idx[d] < sz[d]) break;
      off -= (ptrdiff_t)st[d] * (ptrdiff_t)es * sz[d], doff -= ost[d] * (size_t)sz[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}
