/* emlkit::adaptive_avg_pool2d: int8 average over PyTorch's adaptive windows (rows and columns of unequal sizes
 * when the output does not divide the input), host-made window and requantization tables
 * (emlkit/passes/emlkit_adaptive_avg_pool.py; emlkit/emlkit_ops.py defines the numerics). The window sum is exact
 * in int32 (at most 2^16 taps), then requantized once with the window's own factor. */
#include "emlkit_kernels.h"

void emk_emlkit_adaptive_avg_pool2d_s8_ref(const int8_t *in, int8_t *out, int32_t batch, int32_t in_h, int32_t in_w,
                                           int32_t c, int32_t out_h, int32_t out_w, const int32_t *rows,
                                           const int32_t *cols, const int32_t *requant, int32_t in_zp,
                                           int32_t out_zp) {
  const size_t row_len = (size_t)in_w * (size_t)c;
  for (int32_t b = 0; b < batch; b++) {
    const int8_t *plane = in + (size_t)b * (size_t)in_h * row_len;
    for (int32_t oy = 0; oy < out_h; oy++) {
      const int32_t y0 = rows[2 * oy], y1 = rows[2 * oy + 1];
      for (int32_t ox = 0; ox < out_w; ox++) {
        const int32_t x0 = cols[2 * ox], x1 = cols[2 * ox + 1];
        const int32_t *rq = requant + 2 * ((size_t)oy * (size_t)out_w + (size_t)ox);
        for (int32_t k = 0; k < c; k++) {
          int32_t sum = 0;
          for (int32_t y = y0; y < y1; y++) {
            const int8_t *px = plane + (size_t)y * row_len + (size_t)x0 * (size_t)c + (size_t)k;
            for (int32_t x = x0; x < x1; x++, px += c) sum += *px - in_zp;
          }
          *out++ = emlkit_requant_s8(sum, rq[0], rq[1], out_zp);
        }
      }
    }
  }
}

void emk_emlkit_adaptive_avg_pool2d_s8(const int8_t *in, int8_t *out, int32_t batch, int32_t in_h, int32_t in_w,
                                       int32_t c, int32_t out_h, int32_t out_w, const int32_t *rows,
                                       const int32_t *cols, const int32_t *requant, int32_t in_zp, int32_t out_zp) {
  emk_emlkit_adaptive_avg_pool2d_s8_ref(in, out, batch, in_h, in_w, c, out_h, out_w, rows, cols, requant, in_zp,
                                        out_zp);
}
