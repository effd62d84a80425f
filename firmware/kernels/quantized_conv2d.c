/* cortex_m::quantized_conv2d (and _nhwc: same memory layout): NHWC input,
 * OHWI weights, per-output-channel requantization (operators.py
 * quantized_conv2d_impl, CMSIS-NN arm_convolve_s8). Padding contributes zero
 * after the input offset is added, as in F.conv2d on the offset input. */
#include "kernels.h"
#include "kernels_mve.h"

void qconv2d_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *mult, const int32_t *shift,
                    int8_t *out) {
  const int32_t cg = p->in_c / p->groups, og = p->out_c / p->groups;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++)
        for (int32_t o = 0; o < p->out_c; o++) {
          const int32_t g = o / og;
          uint32_t acc = bias ? (uint32_t)bias[o] : 0u; /* int32 wrap like torch */
          for (int32_t ky = 0; ky < p->k_h; ky++) {
            const int32_t iy = oy * p->stride_h - p->pad_h + ky * p->dil_h;
            if (iy < 0 || iy >= p->in_h) continue;
            for (int32_t kx = 0; kx < p->k_w; kx++) {
              const int32_t ix = ox * p->stride_w - p->pad_w + kx * p->dil_w;
              if (ix < 0 || ix >= p->in_w) continue;
              const int8_t *ip = in + (((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c + (size_t)g * cg;
              const int8_t *wp = w + (((size_t)o * p->k_h + ky) * p->k_w + kx) * cg;
              for (int32_t c = 0; c < cg; c++)
                acc += (uint32_t)((ip[c] + p->input_offset) * wp[c]);
            }
          }
          const int32_t r = k_requantize((int32_t)acc, mult[o], shift[o]);
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o] =
              (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->output_offset), p->act_min, p->act_max);
        }
}

#if FW_HAVE_MVE
/* General path (grouped convs, K beyond the fast path's stack buffers,
 * input offsets outside the int8 pad range). Four output channels at a time
 * share each 16-byte input load (one VLDRB + four VLDRB + four VMLADAVA per
 * 64 MACs). The input offset is applied as offset * sum(weights over the
 * valid taps): the full-window sums are computed once per channel group;
 * border pixels add them up on the fly. With groups == 1 and dil_w == 1,
 * each kernel row is one contiguous run of (valid kx) * C bytes in both
 * input and weights. */
static void conv_mve_general(const qconv_params *p, const int8_t *in, const int8_t *w,
                             const int32_t *bias, const int32_t *mult, const int32_t *shift,
                             int8_t *out) {
  const int32_t cg = p->in_c / p->groups, og = p->out_c / p->groups;
  const int32_t kwc = p->k_w * cg, ktot = p->k_h * kwc;
  const int merged = p->groups == 1 && p->dil_w == 1;
  const int32x4_t vlo = vdupq_n_s32(p->act_min), vhi = vdupq_n_s32(p->act_max);
  const int32x4_t voff = vdupq_n_s32(p->output_offset);
  for (int32_t o0 = 0; o0 < p->out_c; o0 += 4) {
    const int32_t nout = p->out_c - o0 < 4 ? p->out_c - o0 : 4;
    const mve_pred16_t pst = vctp32q((uint32_t)nout);
    const int8_t *wc[4];
    int32_t full_wsum[4], base[4], gidx[4];
    for (int j = 0; j < 4; j++) {
      const int32_t o = o0 + (j < nout ? j : 0); /* spare lanes repeat channel o0 */
      wc[j] = w + (size_t)o * ktot;
      full_wsum[j] = k_sum_s8_mve(wc[j], ktot);
      base[j] = bias ? bias[o] : 0;
      gidx[j] = o / og;
    }
    /* all four channels must read the same input slice to share loads */
    const int same_group = gidx[0] == gidx[1] && gidx[0] == gidx[2] && gidx[0] == gidx[3];
    const int32x4_t vm = vldrwq_z_s32(mult + o0, pst);
    const int32x4_t vs = vldrwq_z_s32(shift + o0, pst);
    for (int32_t b = 0; b < p->batch; b++)
      for (int32_t oy = 0; oy < p->out_h; oy++) {
        const int32_t iy0 = oy * p->stride_h - p->pad_h;
        for (int32_t ox = 0; ox < p->out_w; ox++) {
          const int32_t ix0 = ox * p->stride_w - p->pad_w;
          int32_t acc[4] = {0, 0, 0, 0}, ws[4] = {0, 0, 0, 0};
          int32_t kx_lo = 0, kx_hi = p->k_w;
          while (kx_lo < kx_hi && ix0 + kx_lo * p->dil_w < 0) kx_lo++;
          while (kx_hi > kx_lo && ix0 + (kx_hi - 1) * p->dil_w >= p->in_w) kx_hi--;
          int full = kx_lo == 0 && kx_hi == p->k_w;
          for (int32_t ky = 0; ky < p->k_h && full; ky++) {
            const int32_t iy = iy0 + ky * p->dil_h;
            if (iy < 0 || iy >= p->in_h) full = 0;
          }
          if (same_group) {
            const int32_t g = gidx[0];
            for (int32_t ky = 0; ky < p->k_h; ky++) {
              const int32_t iy = iy0 + ky * p->dil_h;
              if (iy < 0 || iy >= p->in_h) continue;
              const int8_t *row = in + ((size_t)b * p->in_h + iy) * p->in_w * p->in_c + (size_t)g * cg;
              const size_t wrow = (size_t)ky * kwc;
              if (merged) {
                const int8_t *xp = row + (size_t)(ix0 + kx_lo) * p->in_c;
                const size_t wo = wrow + (size_t)kx_lo * cg;
                const int32_t len = (kx_hi - kx_lo) * cg;
                if (full) k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, len, acc, ws, 0);
                else k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, len, acc, ws, 1);
              } else {
                for (int32_t kx = kx_lo; kx < kx_hi; kx++) {
                  const int8_t *xp = row + (size_t)(ix0 + kx * p->dil_w) * p->in_c;
                  const size_t wo = wrow + (size_t)kx * cg;
                  if (full) k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, cg, acc, ws, 0);
                  else k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, cg, acc, ws, 1);
                }
              }
            }
          } else {
            /* channel groups straddle a conv group boundary: one channel at a time */
            for (int j = 0; j < nout; j++) {
              int32_t a1[4] = {0, 0, 0, 0}, s1[4] = {0, 0, 0, 0};
              for (int32_t ky = 0; ky < p->k_h; ky++) {
                const int32_t iy = iy0 + ky * p->dil_h;
                if (iy < 0 || iy >= p->in_h) continue;
                const int8_t *row = in + ((size_t)b * p->in_h + iy) * p->in_w * p->in_c + (size_t)gidx[j] * cg;
                for (int32_t kx = kx_lo; kx < kx_hi; kx++) {
                  const int8_t *xp = row + (size_t)(ix0 + kx * p->dil_w) * p->in_c;
                  const int8_t *wp = wc[j] + (size_t)ky * kwc + (size_t)kx * cg;
                  k_dot4_s8_mve(xp, wp, wp, wp, wp, cg, a1, s1, 1);
                }
              }
              acc[j] = a1[0];
              ws[j] = s1[0];
            }
            full = 0;
          }
          for (int j = 0; j < 4; j++)
            acc[j] = (int32_t)((uint32_t)base[j] + (uint32_t)acc[j] +
                               (uint32_t)p->input_offset * (uint32_t)(full ? full_wsum[j] : ws[j]));
          int32x4_t r = k_requantize_mve(k_vec4_s32(acc), vm, vs);
          r = vminq_s32(vmaxq_s32(vaddq_s32(r, voff), vlo), vhi);
          vstrbq_p_s32(out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o0, r, pst);
        }
      }
  }
}

/* Fast path for groups == 1: a GEMM of output pixels x output channels.
 * Four output pixels form a tile; each pixel's receptive field is a row of
 * K = k_h*k_w*C bytes (OHWI order, like a weight row), gathered (im2col)
 * and stored interleaved in 16-byte chunks, so one pointer walks all four
 * rows. For each output channel, one 16-byte weight load feeds four VMLADAVA
 * (one per pixel); each pixel's four channels are then requantized as one
 * vector. Padding taps are filled with -input_offset so that
 * (x + input_offset) is 0 there, which lets the input offset be applied once
 * per channel as input_offset * sum(all its weights), folded into the bias. */
#define CONV_TILE 4
#define CONV_MAX_K 768    /* stack: 4*768 interleaved + 768 bytes im2col row */
#define CONV_BIAS_CAP 64  /* stack: per-channel bias + input_offset*sum(w) */

/* Dot products of the four interleaved rows at xi against nch consecutive
 * weight rows (K bytes each) starting at w, accumulated onto
 * d[4*j + c] (pixel j, channel c).
 * A tail-predicated low-overhead loop (DLSTP/LETP): lanes past K are
 * inactive, so nothing beyond the rows is read or accumulated. In asm
 * because GCC 12 spills the pointers of the intrinsic version and doubles
 * the instruction count; VMLAVA needs even accumulator registers. */
static inline void dot_tile(const int8_t *xi, const int8_t *w, int32_t k, int32_t nch, int32_t *d) {
  register int32_t a0 __asm("r0");
  register int32_t a1 __asm("r2");
  register int32_t a2 __asm("r4");
  register int32_t a3 __asm("r6");
  /* the loop leaves w at the next 16-byte step; kfix brings it to w + K.
   * xi and k live in memory operands to keep enough registers free. */
  const int32_t kfix = k - ((k + 15) & ~15);
  const int8_t *x;
  int32_t t;
  __asm volatile(
      "2:\n"
      "ldr %[x], %[xi]\n"
      "ldr %[t], %[k]\n"
      "ldr %[a0], [%[d]]\n"
      "ldr %[a1], [%[d], #16]\n"
      "ldr %[a2], [%[d], #32]\n"
      "ldr %[a3], [%[d], #48]\n"
      "dlstp.8 lr, %[t]\n"
      "1:\n"
      "vldrb.8 q0, [%[w]], #16\n"
      "vldrb.8 q1, [%[x], #16]\n"
      "vldrb.8 q2, [%[x], #32]\n"
      "vmlava.s8 %[a1], q1, q0\n"
      "vldrb.8 q3, [%[x], #48]\n"
      "vmlava.s8 %[a2], q2, q0\n"
      "vldrb.8 q1, [%[x]], #64\n"
      "vmlava.s8 %[a3], q3, q0\n"
      "vmlava.s8 %[a0], q1, q0\n"
      "letp lr, 1b\n"
      "ldr %[t], %[kfix]\n"
      "str %[a0], [%[d]]\n"
      "str %[a1], [%[d], #16]\n"
      "str %[a2], [%[d], #32]\n"
      "str %[a3], [%[d], #48]\n"
      "adds %[d], #4\n"
      "add %[w], %[t]\n"
      "subs %[n], #1\n"
      "bne 2b\n"
      : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [x] "=&r"(x),
        [t] "=&r"(t), [w] "+r"(w), [d] "+r"(d), [n] "+r"(nch)
      : [xi] "m"(xi), [k] "m"(k), [kfix] "m"(kfix)
      : "q0", "q1", "q2", "q3", "lr", "memory", "cc");
}

/* Byte copy / fill with whole vectors and one predicated tail. */
static inline void copy_s8(int8_t *dst, const int8_t *src, int32_t n) {
  for (; n >= 16; n -= 16, dst += 16, src += 16) vstrbq_s8(dst, vldrbq_s8(src));
  if (n > 0) {
    const mve_pred16_t pr = vctp8q((uint32_t)n);
    vstrbq_p_s8(dst, vldrbq_z_s8(src, pr), pr);
  }
}
static inline void fill_s8(int8_t *dst, int8x16_t v, int32_t n) {
  for (; n >= 16; n -= 16, dst += 16) vstrbq_s8(dst, v);
  if (n > 0) vstrbq_p_s8(dst, v, vctp8q((uint32_t)n));
}

/* Receptive field of output pixel (b, oy, ox) as one row of K bytes (OHWI order). */
static void im2col_row(const qconv_params *p, const int8_t *in, int32_t b, int32_t oy, int32_t ox,
                       int8x16_t vpad, int8_t *dst) {
  const int32_t C = p->in_c, kwc = p->k_w * C;
  const int32_t iy0 = oy * p->stride_h - p->pad_h, ix0 = ox * p->stride_w - p->pad_w;
  const int32_t iy_last = iy0 + (p->k_h - 1) * p->dil_h, ix_last = ix0 + (p->k_w - 1) * p->dil_w;
  const int8_t *src = in + (((size_t)b * p->in_h + iy0) * p->in_w + ix0) * C;
  const size_t ystep = (size_t)p->dil_h * p->in_w * C;
  if (p->dil_w == 1 && iy0 >= 0 && ix0 >= 0 && iy_last < p->in_h && ix_last < p->in_w) {
    /* interior pixel: each kernel row is one contiguous run */
    for (int32_t ky = 0; ky < p->k_h; ky++, dst += kwc, src += ystep) copy_s8(dst, src, kwc);
    return;
  }
  int32_t kx_lo = 0, kx_hi = p->k_w;
  while (kx_lo < kx_hi && ix0 + kx_lo * p->dil_w < 0) kx_lo++;
  while (kx_hi > kx_lo && ix0 + (kx_hi - 1) * p->dil_w >= p->in_w) kx_hi--;
  for (int32_t ky = 0; ky < p->k_h; ky++, dst += kwc, src += ystep) {
    const int32_t iy = iy0 + ky * p->dil_h;
    if (iy < 0 || iy >= p->in_h || kx_lo >= kx_hi) {
      fill_s8(dst, vpad, kwc);
      continue;
    }
    fill_s8(dst, vpad, kx_lo * C);
    if (p->dil_w == 1) {
      copy_s8(dst + kx_lo * C, src + (size_t)kx_lo * C, (kx_hi - kx_lo) * C);
    } else {
      for (int32_t kx = kx_lo; kx < kx_hi; kx++)
        copy_s8(dst + kx * C, src + (size_t)kx * p->dil_w * C, C);
    }
    fill_s8(dst + kx_hi * C, vpad, (p->k_w - kx_hi) * C);
  }
}

/* Row `src` (K bytes) into slot j of the interleaved tile buffer. */
static inline void interleave_row(int8_t *tile, int32_t j, const int8_t *src, int32_t k) {
  int8_t *dst = tile + 16 * j;
  for (; k >= 16; k -= 16, dst += 64, src += 16) vstrbq_s8(dst, vldrbq_s8(src));
  if (k > 0) vstrbq_s8(dst, vldrbq_z_s8(src, vctp8q((uint32_t)k)));
}

/* Interior pixel whose kernel rows are whole 16-byte chunks of the K-row
 * (dil_w == 1, k_w*C a multiple of 16): gathered straight into slot j of the
 * interleaved tile. Returns 0 (nothing written) for any other pixel. */
static inline int im2col_interleaved(const qconv_params *p, const int8_t *in, int32_t b, int32_t oy,
                                     int32_t ox, int8_t *tile, int32_t j) {
  const int32_t C = p->in_c, kwc = p->k_w * C;
  const int32_t iy0 = oy * p->stride_h - p->pad_h, ix0 = ox * p->stride_w - p->pad_w;
  if ((kwc & 15) || p->dil_w != 1 || iy0 < 0 || ix0 < 0 || iy0 + (p->k_h - 1) * p->dil_h >= p->in_h ||
      ix0 + p->k_w - 1 >= p->in_w)
    return 0;
  const int8_t *src = in + (((size_t)b * p->in_h + iy0) * p->in_w + ix0) * C;
  const size_t ystep = (size_t)p->dil_h * p->in_w * C;
  int8_t *dst = tile + 16 * j;
  for (int32_t ky = 0; ky < p->k_h; ky++, src += ystep)
    for (int32_t q = 0; q < kwc; q += 16, dst += 64) vstrbq_s8(dst, vldrbq_s8(src + q));
  return 1;
}

/* Slot `from` of the interleaved tile into slot `to`. */
static inline void copy_slot(int8_t *tile, int32_t from, int32_t to, int32_t k) {
  for (int32_t q = 0; q < k; q += 16) vstrbq_s8(tile + 4 * q + 16 * to, vldrbq_s8(tile + 4 * q + 16 * from));
}

/* Output channels [c_lo, c_hi) for all pixels; beff[o - c_lo] = bias +
 * input_offset * sum(weights of o). */
static void conv_tiles(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *mult,
                       const int32_t *shift, int8_t *out, int32_t c_lo, int32_t c_hi,
                       const int32_t *beff, int8_t *tile, int8_t *row, int direct) {
  const int32_t K = p->k_h * p->k_w * p->in_c, OC = p->out_c;
  const int32_t npix = p->batch * p->out_h * p->out_w;
  const int8x16_t vpad = vdupq_n_s8((int8_t)-p->input_offset);
  const int32x4_t vlo = vdupq_n_s32(p->act_min), vhi = vdupq_n_s32(p->act_max);
  int32_t b = 0, oy = 0, ox = 0; /* coordinates of the next pixel to gather */
  for (int32_t t0 = 0; t0 < npix; t0 += CONV_TILE) {
    const int32_t n = npix - t0 < CONV_TILE ? npix - t0 : CONV_TILE;
    for (int32_t j = 0; j < n; j++) {
      if (direct) {
        interleave_row(tile, j, in + (((size_t)b * p->in_h + (size_t)oy * p->stride_h) * p->in_w +
                                      (size_t)ox * p->stride_w) * p->in_c, K);
      } else if (!im2col_interleaved(p, in, b, oy, ox, tile, j)) {
        im2col_row(p, in, b, oy, ox, vpad, row);
        interleave_row(tile, j, row, K);
      }
      if (++ox == p->out_w) {
        ox = 0;
        if (++oy == p->out_h) oy = 0, b++;
      }
    }
    /* spare slots repeat the last pixel; their results are not stored */
    for (int32_t j = n; j < CONV_TILE; j++) copy_slot(tile, n - 1, j, K);
    int8_t *ob = out + (size_t)t0 * OC;
    for (int32_t o0 = c_lo; o0 < c_hi; o0 += 4) {
      const int32_t nch = c_hi - o0 < 4 ? c_hi - o0 : 4;
      const mve_pred16_t pch = vctp32q((uint32_t)nch);
      /* [pixel][channel], starting from the per-channel terms */
      int32_t acc[CONV_TILE * 4] __attribute__((aligned(16)));
      const int32x4_t vb = vldrwq_z_s32(beff + (o0 - c_lo), pch);
      vstrwq_s32(acc, vb), vstrwq_s32(acc + 4, vb), vstrwq_s32(acc + 8, vb), vstrwq_s32(acc + 12, vb);
      dot_tile(tile, w + (size_t)o0 * K, K, nch, acc);
      const int32x4_t vm = vldrwq_z_s32(mult + o0, pch), vs = vldrwq_z_s32(shift + o0, pch);
      int8_t *oc = ob + o0;
#define CONV_STORE(J)                                                          \
  do {                                                                         \
    int32x4_t r_ = k_requantize_mve(vldrwq_s32(acc + 4 * (J)), vm, vs);        \
    r_ = vminq_s32(vmaxq_s32(vaddq_n_s32(r_, p->output_offset), vlo), vhi);    \
    vstrbq_p_s32(oc + (size_t)(J) * OC, r_, pch);                              \
  } while (0)
      CONV_STORE(0);
      if (n > 1) CONV_STORE(1);
      if (n > 2) CONV_STORE(2);
      if (n > 3) CONV_STORE(3);
#undef CONV_STORE
    }
  }
}

void qconv2d_s8_mve(const qconv_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *mult, const int32_t *shift,
                    int8_t *out) {
  for (int32_t o = 0; o < p->out_c; o++)
    if (!k_requant_vec_ok(mult[o], shift[o])) {
      qconv2d_s8_ref(p, in, w, bias, mult, shift, out);
      return;
    }
  const int32_t K = p->k_h * p->k_w * p->in_c;
  const int direct = p->k_h == 1 && p->k_w == 1 && p->pad_h == 0 && p->pad_w == 0;
  /* the pad byte must be representable; the rows must fit the stack buffers */
  if (p->groups != 1 || p->input_offset < -127 || p->input_offset > 128 || K > CONV_MAX_K) {
    conv_mve_general(p, in, w, bias, mult, shift, out);
    return;
  }
  int8_t tile[CONV_TILE * CONV_MAX_K] __attribute__((aligned(16)));
  int8_t row[CONV_MAX_K] __attribute__((aligned(16)));
  int32_t beff[CONV_BIAS_CAP] __attribute__((aligned(16)));
  /* channel chunks bound the stack used for the per-channel terms */
  for (int32_t c_lo = 0; c_lo < p->out_c; c_lo += CONV_BIAS_CAP) {
    const int32_t c_hi = p->out_c - c_lo < CONV_BIAS_CAP ? p->out_c : c_lo + CONV_BIAS_CAP;
    for (int32_t o = c_lo; o < c_hi; o++)
      beff[o - c_lo] = (int32_t)((bias ? (uint32_t)bias[o] : 0u) +
                                 (uint32_t)p->input_offset * (uint32_t)k_sum_s8_mve(w + (size_t)o * K, K));
    conv_tiles(p, in, w, mult, shift, out, c_lo, c_hi, beff, tile, row, direct);
  }
}
#endif

void qconv2d_s8(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                const int32_t *mult, const int32_t *shift, int8_t *out) {
#if FW_HAVE_MVE
  qconv2d_s8_mve(p, in, w, bias, mult, shift, out);
#else
  qconv2d_s8_ref(p, in, w, bias, mult, shift, out);
#endif
}
