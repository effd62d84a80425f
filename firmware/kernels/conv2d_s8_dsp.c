/* emk_conv2d_s8_dsp: the DSP-extension (SIMD32) variant of cortex_m::quantized_conv2d (conv2d_s8.c). */
#include "conv2d_s8.h"
#include "kernels_dsp.h"

#if FW_HAVE_DSP
/* The scratch size, defined here on the builds that pick this variant (conv2d_s8.c says why). */
CONV2D_S8_GET_BUFFER_SIZE

/* DSP extension (Cortex-M4/M7/M33), groups == 1 with an input offset in the
 * int8 pad range, the same scratch as the MVE path: the per-channel bias with
 * input_offset * sum(weights) folded in, then one im2col row whose padding
 * taps hold -input_offset (so that they contribute nothing). Each output
 * pixel's K-byte row (the input itself for 1x1 convolutions without padding;
 * for interior pixels with dil_w == 1 and k_w*C >= 16 the k_h input runs of
 * k_w*C bytes, no copy) is multiplied with four weight rows at a time (k_dot4_s8_dsp:
 * SXTB16 + SMLAD). Other cases run the portable code. */
static void im2col_row_dsp(const qconv_params *p, const int8_t *in, int32_t b, int32_t oy, int32_t ox,
                           int8_t pad, int8_t *dst) {
  const int32_t C = p->in_c, kwc = p->k_w * C;
  const int32_t iy0 = oy * p->stride_h - p->pad_h, ix0 = ox * p->stride_w - p->pad_w;
  int32_t kx_lo = 0, kx_hi = p->k_w;
  while (kx_lo < kx_hi && ix0 + kx_lo * p->dil_w < 0) kx_lo++;
  while (kx_hi > kx_lo && ix0 + (kx_hi - 1) * p->dil_w >= p->in_w) kx_hi--;
  for (int32_t ky = 0; ky < p->k_h; ky++, dst += kwc) {
    const int32_t iy = iy0 + ky * p->dil_h;
    if (iy < 0 || iy >= p->in_h || kx_lo >= kx_hi) {
      memset(dst, pad, (size_t)kwc);
      continue;
    }
    memset(dst, pad, (size_t)kx_lo * C);
    const int8_t *row = in + ((size_t)b * p->in_h + iy) * p->in_w * C;
    if (p->dil_w == 1) {
      memcpy(dst + kx_lo * C, row + (size_t)(ix0 + kx_lo) * C, (size_t)(kx_hi - kx_lo) * C);
    } else {
      for (int32_t kx = kx_lo; kx < kx_hi; kx++)
        memcpy(dst + kx * C, row + (size_t)(ix0 + kx * p->dil_w) * C, (size_t)C);
    }
    memset(dst + kx_hi * C, pad, (size_t)(p->k_w - kx_hi) * C);
  }
}

/* 1x1 stride-1 convolutions without padding (MobileNet's expand and project
 * layers): the pixels are consecutive K-byte rows, like the weight rows, so
 * two pixels by two output channels share each load (k_dot2x2_s8_dsp); an
 * odd last pixel takes four channels at a time, an odd last channel one.
 * Instantiated twice with a constant `fast`: when every channel has
 * mult >= 0 and shift <= -2 (k_rq_fast_ok, checked once per layer) each
 * output is requantized by k_requantize_dsp's SMLAL branch alone, without
 * the per-output range tests, and the channel pairs are the outer loop, so
 * that each pair's multipliers, rounding constants and shifts are set up
 * once for all pixels (pw_fin_fast) instead of once per output. Out of line
 * so that the loops get the registers to themselves. */
/* k_requantize_dsp_fast with hq = 2^(rs-2) and sh1 = rs-1 precomputed
 * (rs = -shift >= 2), then the output offset and the clamp. */
/* sat8: the layer's clamp is the whole int8 range (no activation, or a ReLU whose zero point is -128), which
 * one SSAT does without holding lo and hi. */
static inline int8_t pw_fin_fast(int32_t acc, int32_t m, int32_t hq, int32_t sh1, int32_t off, int32_t lo,
                                 int32_t hi, const int sat8) {
  const int64_t t = (int64_t)acc * m + (int64_t)(((uint64_t)(uint32_t)hq << 32) | (1u << 30));
  int32_t h = (int32_t)(t >> 32);
  if (h < hq) h = h - 1 + (int32_t)((uint32_t)t >> 31);
  const int32_t v = (int32_t)((uint32_t)(h >> sh1) + (uint32_t)off);
  return (int8_t)(sat8 ? __ssat(v, 8) : k_clamp(v, lo, hi));
}
/* Two pixels by two output channels as k_dot2x2_s8_dsp, with the two weight rows already split into int16
 * halves in we (pw_wext): per four bytes [lo16(w0), lo16(w1)] then [hi16(w0), hi16(w1)], read by two LDRD,
 * so that only the pixels' words take SXTB16 (4 per four bytes, was 8): 16 instructions per four bytes
 * and 16 MACs, was 21. n4 = K / 4 >= 1; s4 = K - 4 (the second pixel's row after the first's load). */
#define PW_WE_STEP                                      \
  "ldr    %[xa], [%[x]], #4\n\t"                        \
  "ldr    %[xb], [%[x], %[s4]]\n\t"                     \
  "ldrd   %[w0], %[w1], [%[we]], #8\n\t"                \
  "sxtb16 %[t], %[xa]\n\t"                              \
  "smlad  %[a00], %[t], %[w0], %[a00]\n\t"              \
  "smlad  %[a01], %[t], %[w1], %[a01]\n\t"              \
  "sxtb16 %[t], %[xb]\n\t"                              \
  "smlad  %[a10], %[t], %[w0], %[a10]\n\t"              \
  "smlad  %[a11], %[t], %[w1], %[a11]\n\t"              \
  "ldrd   %[w0], %[w1], [%[we]], #8\n\t"                \
  "sxtb16 %[t], %[xa], ror #8\n\t"                      \
  "smlad  %[a00], %[t], %[w0], %[a00]\n\t"              \
  "smlad  %[a01], %[t], %[w1], %[a01]\n\t"              \
  "sxtb16 %[t], %[xb], ror #8\n\t"                      \
  "smlad  %[a10], %[t], %[w0], %[a10]\n\t"              \
  "smlad  %[a11], %[t], %[w1], %[a11]\n\t"
static inline __attribute__((always_inline)) void pw_dot2x2_we(const int8_t *x, const int32_t *we, int32_t K,
                                                               int32_t acc[4]) {
  int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3], xa, xb, w0, w1, t;
  const int32_t s4 = K - 4;
  int32_t n8 = K >> 3;
  if (n8 > 0)
    __asm volatile(K_ASM_REPEAT("n8", PW_WE_STEP PW_WE_STEP)
                   : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [x] "+r"(x), [we] "+r"(we),
                     [n8] "+r"(n8), [xa] "=&r"(xa), [xb] "=&r"(xb), [w0] "=&r"(w0), [w1] "=&r"(w1), [t] "=&r"(t)
                   : [s4] "r"(s4)
                   : "cc", "memory");
  if (K & 4)
    __asm volatile(PW_WE_STEP
                   : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [x] "+r"(x), [we] "+r"(we),
                     [xa] "=&r"(xa), [xb] "=&r"(xb), [w0] "=&r"(w0), [w1] "=&r"(w1), [t] "=&r"(t)
                   : [s4] "r"(s4)
                   : "memory");
  acc[0] = a00, acc[1] = a01, acc[2] = a10, acc[3] = a11;
}
#undef PW_WE_STEP
/* Weight rows w0 and w0 + K (K a multiple of 4) into pw_dot2x2_we's layout: 4 K bytes. */
static inline void pw_wext(const int8_t *w0, int32_t K, int32_t *we) {
  for (int32_t i = 0; i < K; i += 4, we += 4) {
    const int32_t a = k_rd32(w0 + i), b = k_rd32(w0 + K + i);
    we[0] = k_lo16(a), we[1] = k_lo16(b), we[2] = k_hi16(a), we[3] = k_hi16(b);
  }
}
/* The mm variants' tail outputs (an odd last pixel or channel; every output of a one-pixel layer) with
 * k_rq_mm's constant computed per output: k_rq_mm_ok held for every channel. */
static inline int8_t pw_fin_mm(int32_t acc, int32_t m, int32_t sh, int32_t off, int32_t lo, int32_t hi,
                               const int sat8) {
  const int32_t v = k_rq_mm(acc, m, k_rq_mm_c(sh, off), -sh);
  return (int8_t)(sat8 ? __ssat(v, 8) : k_clamp(v, lo, hi));
}
#define PW_FIN(A, O)                                                                                           \
  (fast == 2   ? pw_fin_mm(A, mult[O], shift[O], off, lo, hi, sat8)                                          \
   : fast == 1 ? k_finish_fast_s8(A, mult[O], shift[O], off, lo, hi)                                          \
               : k_finish_s8(A, mult[O], shift[O], off, lo, hi))
/* fast: 0 the general requantization, 1 k_rq_fast_ok held (pw_fin_fast), 2 k_rq_mm_ok held (k_rq_mm, the
 * output offset inside its constant) */
static inline __attribute__((always_inline)) void conv_dsp_pointwise_body(const qconv_params *p, const int8_t *in,
                                                                          const int8_t *w, const int32_t *mult,
                                                                          const int32_t *shift, int8_t *out,
                                                                          const int32_t *beff, const int fast,
                                                                          const int sat8, int32_t *we) {
  const int32_t K = p->in_c, OC = p->out_c, OC2 = OC & ~1, OC4 = OC & ~3;
  const int32_t npix = p->batch * p->out_h * p->out_w;
  const int32_t off = p->output_offset, lo = p->act_min, hi = p->act_max;
  int32_t i = 0;
  if (fast == 2) {
    const int32_t npix2 = npix & ~1;
    for (int32_t o = 0; o < OC2; o += 2) {
      const int32_t m0 = mult[o], m1 = mult[o + 1], b0 = beff[o], b1 = beff[o + 1];
      const int32_t c0 = k_rq_mm_c(shift[o], off), c1 = k_rq_mm_c(shift[o + 1], off);
      const int32_t r0 = -shift[o], r1 = -shift[o + 1];
      const int8_t *wo = w + (size_t)o * K;
      int8_t *op = out + o;
      if (we) pw_wext(wo, K, we);
      for (int32_t j = 0; j < npix2; j += 2, op += 2 * OC) {
        int32_t acc[4] = {b0, b1, b0, b1};
        if (we)
          pw_dot2x2_we(in + (size_t)j * K, we, K, acc);
        else
          k_dot2x2_s8_dsp(in + (size_t)j * K, wo, K, K, acc);
        const int32_t v00 = k_rq_mm(acc[0], m0, c0, r0), v01 = k_rq_mm(acc[1], m1, c1, r1);
        const int32_t v10 = k_rq_mm(acc[2], m0, c0, r0), v11 = k_rq_mm(acc[3], m1, c1, r1);
        if (sat8)
          op[0] = (int8_t)__ssat(v00, 8), op[1] = (int8_t)__ssat(v01, 8), op[OC] = (int8_t)__ssat(v10, 8),
          op[OC + 1] = (int8_t)__ssat(v11, 8);
        else
          op[0] = (int8_t)k_clamp(v00, lo, hi), op[1] = (int8_t)k_clamp(v01, lo, hi),
          op[OC] = (int8_t)k_clamp(v10, lo, hi), op[OC + 1] = (int8_t)k_clamp(v11, lo, hi);
      }
    }
    i = npix2;
  } else if (fast) {
    const int32_t npix2 = npix & ~1;
    for (int32_t o = 0; o < OC2; o += 2) {
      const int32_t m0 = mult[o], m1 = mult[o + 1], b0 = beff[o], b1 = beff[o + 1];
      const int32_t q0 = 1 << (-shift[o] - 2), q1 = 1 << (-shift[o + 1] - 2);
      const int32_t r0 = -shift[o] - 1, r1 = -shift[o + 1] - 1;
      const int8_t *wo = w + (size_t)o * K;
      for (int32_t j = 0; j < npix2; j += 2) {
        int32_t acc[4] = {b0, b1, b0, b1};
        k_dot2x2_s8_dsp(in + (size_t)j * K, wo, K, K, acc);
        int8_t *op = out + (size_t)j * OC + o;
        const int8_t v00 = pw_fin_fast(acc[0], m0, q0, r0, off, lo, hi, sat8);
        const int8_t v01 = pw_fin_fast(acc[1], m1, q1, r1, off, lo, hi, sat8);
        const int8_t v10 = pw_fin_fast(acc[2], m0, q0, r0, off, lo, hi, sat8);
        const int8_t v11 = pw_fin_fast(acc[3], m1, q1, r1, off, lo, hi, sat8);
        op[0] = v00, op[1] = v01, op[OC] = v10, op[OC + 1] = v11;
      }
    }
    i = npix2;
  }
  if (fast && OC2 < OC) /* the last channel of an odd count, for the pixel pairs done above */
    for (int32_t j = 0; j < i; j++) {
      int32_t acc = beff[OC2];
      k_dot1_s8_dsp(in + (size_t)j * K, w + (size_t)OC2 * K, K, &acc, 0, 0);
      out[(size_t)j * OC + OC2] = PW_FIN(acc, OC2);
    }
  for (; !fast && i + 2 <= npix; i += 2) {
    const int8_t *x = in + (size_t)i * K;
    int8_t *op = out + (size_t)i * OC;
    for (int32_t o = 0; o < OC2; o += 2) {
      int32_t acc[4] = {beff[o], beff[o + 1], beff[o], beff[o + 1]};
      k_dot2x2_s8_dsp(x, w + (size_t)o * K, K, K, acc);
      op[o] = PW_FIN(acc[0], o);
      op[o + 1] = PW_FIN(acc[1], o + 1);
      op[OC + o] = PW_FIN(acc[2], o);
      op[OC + o + 1] = PW_FIN(acc[3], o + 1);
    }
    if (OC2 < OC) {
      const int32_t o = OC2;
      for (int j = 0; j < 2; j++) {
        int32_t acc = beff[o];
        k_dot1_s8_dsp(x + (size_t)j * K, w + (size_t)o * K, K, &acc, 0, 0);
        op[(size_t)j * OC + o] = PW_FIN(acc, o);
      }
    }
  }
  if (i < npix) {
    const int8_t *x = in + (size_t)i * K;
    int8_t *op = out + (size_t)i * OC;
    for (int32_t o0 = 0; o0 < OC4; o0 += 4) {
      int32_t acc[4] = {beff[o0], beff[o0 + 1], beff[o0 + 2], beff[o0 + 3]};
      k_dot4_s8_dsp(x, w + (size_t)o0 * K, K, K, acc, 0, 0);
      for (int j = 0; j < 4; j++) op[o0 + j] = PW_FIN(acc[j], o0 + j);
    }
    for (int32_t o = OC4; o < OC; o++) {
      int32_t acc = beff[o];
      k_dot1_s8_dsp(x, w + (size_t)o * K, K, &acc, 0, 0);
      op[o] = PW_FIN(acc, o);
    }
  }
}
#undef PW_FIN
/* conv_dsp_pointwise_body's five copies, one per (fast: 0 general, 1 k_rq_fast_ok, 2 k_rq_mm_ok; sat8),
 * noinline so that each folds its constants; the k_rq_mm ones also take the split-row scratch we (WE_PARAM). */
#define PW_VARIANT(name, fast, sat8, WE_PARAM, we)                                                         \
  static __attribute__((noinline)) void name(const qconv_params *p, const int8_t *in, const int8_t *w,      \
                                             const int32_t *mult, const int32_t *shift, int8_t *out,        \
                                             const int32_t *beff WE_PARAM) {                                \
    conv_dsp_pointwise_body(p, in, w, mult, shift, out, beff, fast, sat8, we);                              \
  }
#define PW_WE_PARAM , int32_t *we
PW_VARIANT(conv_dsp_pointwise_fast, 1, 0, , NULL)
PW_VARIANT(conv_dsp_pointwise_fast_sat8, 1, 1, , NULL)
PW_VARIANT(conv_dsp_pointwise_gen, 0, 0, , NULL)
PW_VARIANT(conv_dsp_pointwise_mm, 2, 0, PW_WE_PARAM, we)
PW_VARIANT(conv_dsp_pointwise_mm_sat8, 2, 1, PW_WE_PARAM, we)
#undef PW_WE_PARAM
#undef PW_VARIANT
/* we: 4 K bytes of scratch for pw_wext's split weight rows (the scratch when beff is the program's), or NULL */
static void conv_dsp_pointwise(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *mult,
                               const int32_t *shift, int8_t *out, const int32_t *beff, int32_t *we) {
  const int sat8 = p->act_min == -128 && p->act_max == 127;
  /* every sum: a start value plus at most K products of magnitude 2^14 */
  if (k_rq_mm_ok(mult, shift, beff, NULL, p->out_c, (int64_t)p->in_c << 14)) {
    if ((p->in_c & 3) || p->batch * p->out_h * p->out_w < 2) we = NULL; /* no pixel pair: nothing to split for */
    if (sat8)
      conv_dsp_pointwise_mm_sat8(p, in, w, mult, shift, out, beff, we);
    else
      conv_dsp_pointwise_mm(p, in, w, mult, shift, out, beff, we);
  } else if (k_rq_fast_ok(mult, shift, p->out_c) && sat8)
    conv_dsp_pointwise_fast_sat8(p, in, w, mult, shift, out, beff);
  else if (k_rq_fast_ok(mult, shift, p->out_c))
    conv_dsp_pointwise_fast(p, in, w, mult, shift, out, beff);
  else
    conv_dsp_pointwise_gen(p, in, w, mult, shift, out, beff);
}

k_status emk_conv2d_s8_dsp(const qconv_params *p, const int8_t *in, const int8_t *w,
                        const int32_t *bias, const int32_t *mult, const int32_t *shift,
                        int8_t *out, void *scratch, size_t scratch_size) {
  if (!conv_fast_ok(p)) {
    emk_conv2d_s8_ref(p, in, w, bias, mult, shift, out);
    return K_OK;
  }
  if (scratch_size < emk_conv2d_s8_get_buffer_size(p) || ((uintptr_t)scratch & 3)) return K_ERR_SCRATCH;
  const int32_t C = p->in_c, K = p->k_h * p->k_w * C, kwc = p->k_w * C, OC = p->out_c;
  const int32_t OC4 = OC & ~3;
  int32_t *beff = (int32_t *)scratch;
  int8_t *row = (int8_t *)scratch + ((size_t)OC + 3) / 4 * 16;
  const int direct = conv_direct(p);
  /* The start values read in place (the program's beff, or the bias when the compiler folded the input
     offset away: FoldInputOffset) leave the scratch free: 1x1 stride 1 for the split weight rows when it
     holds them (4 K bytes); the other shapes for k_rq_mm's constants (its first 4 OC bytes) when every
     whole group of four channels is in its range (padding taps hold -input_offset: int8 products too) */
  const int pw = direct && p->stride_h == 1 && p->stride_w == 1;
  const int32_t *start = p->input_offset ? p->beff : bias;
  const int own = start && (pw ? (size_t)K * 4 <= scratch_size : k_rq_mm_ok(mult, shift, start, NULL, OC4, (int64_t)K << 14));
  if (own)
    ;
  else if (p->beff && p->input_offset) /* folded at compile time (emlkit/passes/window_bias.py) */
    for (int32_t o = 0; o < OC; o++) beff[o] = p->beff[o];
  else
    for (int32_t o = 0; o < OC; o++)
      beff[o] = (int32_t)((bias ? (uint32_t)bias[o] : 0u) +
                          (p->input_offset ? (uint32_t)p->input_offset * (uint32_t)k_sum_s8_dsp(w + (size_t)o * K, K)
                                           : 0u));
  const int32_t oo = p->output_offset, lo = p->act_min, hi = p->act_max; /* *p may alias the output */
  if (pw) {
    conv_dsp_pointwise(p, in, w, mult, shift, out, own ? start : beff, own ? (int32_t *)scratch : NULL);
    return K_OK;
  }
  const int32_t *b0 = own ? start : beff;
  int32_t *rqc = own ? (int32_t *)scratch : NULL;
  if (rqc)
    for (int32_t o = 0; o < OC4; o++) rqc[o] = k_rq_mm_c(shift[o], oo);
  const int sat8 = lo == -128 && hi == 127;
  const size_t ystep = (size_t)p->dil_h * p->in_w * C;
  /* interior pixels read their k_h input runs in place when the runs are long enough (16 bytes or more);
     shorter runs (e.g. a one-channel input's 4-byte rows) cost more in per-run set-up than one copy of the
     whole row into scratch */
  const int runs = p->dil_w == 1 && kwc >= 16;
  const int fast = k_rq_fast_ok(mult, shift, OC); /* the requantization without its range tests */
  int8_t *op = out;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const int32_t iy0 = oy * p->stride_h - p->pad_h;
      const int rows_in = iy0 >= 0 && iy0 + (p->k_h - 1) * p->dil_h < p->in_h;
      for (int32_t ox = 0; ox < p->out_w; ox++, op += OC) {
        const int32_t ix0 = ox * p->stride_w - p->pad_w;
        /* the row as nseg runs of seg bytes, ystep apart in the input */
        const int8_t *x;
        int32_t nseg = 1, seg = K;
        size_t xstep = 0;
        if (direct) {
          x = in + (((size_t)b * p->in_h + iy0) * p->in_w + ix0) * C;
        } else if (runs && rows_in && ix0 >= 0 && ix0 + p->k_w <= p->in_w) {
          x = in + (((size_t)b * p->in_h + iy0) * p->in_w + ix0) * C;
          nseg = p->k_h, seg = kwc, xstep = ystep;
        } else {
          im2col_row_dsp(p, in, b, oy, ox, (int8_t)-p->input_offset, row);
          x = row;
        }
        for (int32_t o0 = 0; o0 < OC4; o0 += 4) {
          int32_t acc[4] = {b0[o0], b0[o0 + 1], b0[o0 + 2], b0[o0 + 3]};
          const int8_t *wr = w + (size_t)o0 * K, *xs = x;
          for (int32_t s = 0; s < nseg; s++, xs += xstep) k_dot4_s8_dsp(xs, wr + (size_t)s * seg, K, seg, acc, 0, 0);
          if (rqc && sat8)
            for (int j = 0; j < 4; j++)
              op[o0 + j] = (int8_t)__ssat(k_rq_mm(acc[j], mult[o0 + j], rqc[o0 + j], -shift[o0 + j]), 8);
          else if (rqc)
            for (int j = 0; j < 4; j++)
              op[o0 + j] = (int8_t)k_clamp(k_rq_mm(acc[j], mult[o0 + j], rqc[o0 + j], -shift[o0 + j]), lo, hi);
          else if (fast)
            for (int j = 0; j < 4; j++) op[o0 + j] = k_finish_fast_s8(acc[j], mult[o0 + j], shift[o0 + j], oo, lo, hi);
          else
            for (int j = 0; j < 4; j++) op[o0 + j] = k_finish_s8(acc[j], mult[o0 + j], shift[o0 + j], oo, lo, hi);
        }
        for (int32_t o = OC4; o < OC; o++) {
          int32_t acc = b0[o];
          const int8_t *wr = w + (size_t)o * K, *xs = x;
          for (int32_t s = 0; s < nseg; s++, xs += xstep) k_dot1_s8_dsp(xs, wr + (size_t)s * seg, seg, &acc, 0, 0);
          op[o] = k_finish_s8(acc, mult[o], shift[o], oo, lo, hi);
        }
      }
    }
  return K_OK;
}

/* The dispatcher of the builds that pick this variant (kernels.h: K_CONV_DISPATCHER). */
K_CONV_DISPATCHER(emk_conv2d_s8, emk_conv2d_s8_dsp)
#endif
