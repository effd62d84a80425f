/* cortex_m::quantized_conv2d (and _nhwc: same memory layout): NHWC input,
 * OHWI weights, per-output-channel requantization (operators.py
 * quantized_conv2d_impl, CMSIS-NN arm_convolve_s8). Padding contributes zero
 * after the input offset is added, as in F.conv2d on the offset input.
 *
 * The family is split by variant: conv2d_s8_ref.c (portable C), conv2d_s8_mve.c (Helium), conv2d_s8_dsp.c
 * (DSP extension); what they share is conv2d_s8.h. The dispatcher emk_conv2d_s8 and
 * emk_conv2d_s8_get_buffer_size are defined in the file of the variant the build picks (K_BEST in
 * kernels.h; this file for the builds without MVE or DSP): there GCC compiles them together with that
 * variant as when the family was one file (it inlines the variant into the dispatcher, or the scratch size
 * into the variant, as before), so the code and the instruction counts stay the same. The variants are
 * named here so that `emlkit export`, which follows the identifiers a file names, copies each of their
 * files. */
#include "conv2d_s8.h"

k_conv_ref_fn emk_conv2d_s8_ref;
k_conv_fn emk_conv2d_s8_mve, emk_conv2d_s8_dsp;

/* The builds without MVE or DSP. */
#if !FW_HAVE_MVE && !FW_HAVE_DSP
#include <string.h>

#include "kernels_dsp.h" /* the plain-C requantization helpers */

CONV2D_S8_GET_BUFFER_SIZE

/* Portable fast path (Cortex-M0+/M3, the host), for groups 1 with a pad byte that the int8 range holds
 * (conv_fast_ok), in the scratch every variant gets: per output channel the start value bias +
 * input_offset * sum(weights) (the program's p->beff when it carries it), then one im2col row whose padding
 * taps hold -input_offset, so that each output is that start value plus a plain int8 dot product of the
 * pixel's row with the channel's weight row. Sums modulo 2^32 in any order equal the reference's int32
 * wrap-around, so the result is bit-identical. 1x1 convolutions without padding read their rows straight
 * from the input (stride 1: two pixels by two channels at a time). Rows against several channels at a time
 * share each input load; outputs are requantized
 * by the 32-bit form (k_finish_fast_s8) when every channel allows it, checked once per layer. */
typedef struct {
  const int32_t *beff, *mult, *shift;
  int32_t K, OC, oo, lo, hi, fast;
} conv_c_ctx;

static inline int8_t conv_c_fin(const conv_c_ctx *g, uint32_t acc, int32_t o) {
  return g->fast ? k_finish_fast_s8((int32_t)acc, g->mult[o], g->shift[o], g->oo, g->lo, g->hi)
                 : k_finish_s8((int32_t)acc, g->mult[o], g->shift[o], g->oo, g->lo, g->hi);
}

#if defined(__ARM_ARCH_6M__)
/* Armv6-M has eight low registers: two channels per pass keep the loop out of the stack. */
#define CONV_C_BLOCK 2
#else
#define CONV_C_BLOCK 4
#endif
/* Asm text of the Armv7-M loops (asm operand names): ACC += A * B; and the bytes of two rows K apart, P's
 * row's at NEAR and the next row's at FAR, P moved on one byte. */
#define CONV_C_MLA(ACC, A, B) "mla %[" ACC "], %[" A "], %[" B "], %[" ACC "]\n"
#define CONV_C_LD2(FAR, NEAR, P) "ldrsb %[" FAR "], [%[" P "], %[k]]\n" "ldrsb %[" NEAR "], [%[" P "]], #1\n"

/* Output channel o of one pixel's K-byte row x. */
static void conv_c_row1(const conv_c_ctx *g, const int8_t *x, const int8_t *w, int32_t o, int8_t *op) {
  const int32_t K = g->K;
  const int8_t *w0 = w + (size_t)o * K;
  uint32_t a0 = (uint32_t)g->beff[o];
  for (int32_t i = 0; i < K; i++) a0 += (uint32_t)(x[i] * w0[i]);
  op[o] = conv_c_fin(g, a0, o);
}

/* One pixel's K-byte row x against every output channel, outputs to op. */
static __attribute__((noinline)) void conv_c_row(const conv_c_ctx *g, const int8_t *x, const int8_t *w, int8_t *op) {
  const int32_t K = g->K, OC = g->OC;
  const int32_t *const beff = g->beff;
  int32_t o = 0;
#if CONV_C_BLOCK == 4
  for (; o + 4 <= OC; o += 4) {
    const int8_t *w0 = w + (size_t)o * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
    uint32_t a0 = (uint32_t)beff[o], a1 = (uint32_t)beff[o + 1], a2 = (uint32_t)beff[o + 2], a3 = (uint32_t)beff[o + 3];
    int32_t i = 0;
#if defined(__thumb2__) && defined(__ARM_ARCH_7M__)
    /* Armv7-M: four bytes per pass, each one input load, four weight loads (rows K, 2K, 3K on from the first,
     * whose load moves the pointer on) and four MLA; in asm for the reason given at conv_c_dot2x2 */
    if (K >= 4) {
      int32_t n = K >> 2, t0, t1;
      const int8_t *xp = x, *wp = w0;
      const int32_t k2 = 2 * K, k3 = 3 * K;
#define CONV_C_STEP4              \
  "ldrsb %[t0], [%[xp]], #1\n"    \
  "ldrsb %[t1], [%[wp], %[k1]]\n" \
  CONV_C_MLA("a1", "t0", "t1")    \
  "ldrsb %[t1], [%[wp], %[k2]]\n" \
  CONV_C_MLA("a2", "t0", "t1")    \
  "ldrsb %[t1], [%[wp], %[k3]]\n" \
  CONV_C_MLA("a3", "t0", "t1")    \
  "ldrsb %[t1], [%[wp]], #1\n"    \
  CONV_C_MLA("a0", "t0", "t1")
      __asm volatile(K_ASM_REPEAT("n", CONV_C_STEP4 CONV_C_STEP4 CONV_C_STEP4 CONV_C_STEP4)
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [xp] "+r"(xp), [wp] "+r"(wp),
                       [n] "+r"(n), [t0] "=&r"(t0), [t1] "=&r"(t1)
                     : [k1] "r"(K), [k2] "r"(k2), [k3] "r"(k3)
                     : "cc", "memory");
#undef CONV_C_STEP4
      i = K & ~3;
    }
#endif
    for (; i < K; i++) {
      const int32_t xv = x[i];
      a0 += (uint32_t)(xv * w0[i]);
      a1 += (uint32_t)(xv * w1[i]);
      a2 += (uint32_t)(xv * w2[i]);
      a3 += (uint32_t)(xv * w3[i]);
    }
    op[o] = conv_c_fin(g, a0, o);
    op[o + 1] = conv_c_fin(g, a1, o + 1);
    op[o + 2] = conv_c_fin(g, a2, o + 2);
    op[o + 3] = conv_c_fin(g, a3, o + 3);
  }
#endif
  for (; o + 2 <= OC; o += 2) {
    const int8_t *w0 = w + (size_t)o * K, *w1 = w0 + K;
    uint32_t a0 = (uint32_t)beff[o], a1 = (uint32_t)beff[o + 1];
    for (int32_t i = 0; i < K; i++) {
      const int32_t xv = x[i];
      a0 += (uint32_t)(xv * w0[i]);
      a1 += (uint32_t)(xv * w1[i]);
    }
    op[o] = conv_c_fin(g, a0, o);
    op[o + 1] = conv_c_fin(g, a1, o + 1);
  }
  if (o < OC) conv_c_row1(g, x, w, o, op);
}

#if defined(__ARM_ARCH_6M__)
/* Armv6-M: acc[0..3] += x.w0, x.w1, y.w0, y.w1 over K >= 1 bytes (y = x + K, w1 = w0 + K) with the four
 * accumulators in r8-r11 (ADD takes high registers) so that the eight low ones hold the four row ends, the
 * index running from -K up to 0 (LDRSB has register offsets only) and three temporaries: 15 instructions per
 * four products where GCC's two-channel loop takes 11 per two. */
static __attribute__((naked, noinline)) void conv_c_dot2x2_v6m(const int8_t *x, const int8_t *w0, int32_t K,
                                                              uint32_t *acc) {
  __asm(".syntax unified\n"
        "push {r4, r5, r6, r7, lr}\n"
        "mov r4, r8\n"
        "mov r5, r9\n"
        "mov r6, r10\n"
        "mov r7, r11\n"
        "push {r4, r5, r6, r7}\n"
        "ldm r3!, {r4, r5, r6, r7}\n"
        "mov r8, r4\n"
        "mov r9, r5\n"
        "mov r10, r6\n"
        "mov r11, r7\n"
        "mov ip, r3\n"
        "adds r0, r0, r2\n"   /* x row end */
        "adds r4, r0, r2\n"   /* y row end */
        "adds r1, r1, r2\n"   /* w0 row end */
        "adds r5, r1, r2\n"   /* w1 row end */
        "rsbs r2, r2, #0\n"
        "1:\n"
        "ldrsb r3, [r0, r2]\n"
        "ldrsb r6, [r1, r2]\n"
        "movs r7, r3\n"
        "muls r7, r6\n"
        "add r8, r7\n"
        "ldrsb r7, [r5, r2]\n"
        "muls r3, r7\n"
        "add r9, r3\n"
        "ldrsb r3, [r4, r2]\n"
        "muls r6, r3\n"
        "add r10, r6\n"
        "muls r7, r3\n"
        "add r11, r7\n"
        "adds r2, r2, #1\n"
        "bne 1b\n"
        "mov r3, ip\n"
        "subs r3, r3, #16\n"
        "mov r4, r8\n"
        "mov r5, r9\n"
        "mov r6, r10\n"
        "mov r7, r11\n"
        "stm r3!, {r4, r5, r6, r7}\n"
        "pop {r4, r5, r6, r7}\n"
        "mov r8, r4\n"
        "mov r9, r5\n"
        "mov r10, r6\n"
        "mov r11, r7\n"
        "pop {r4, r5, r6, r7, pc}\n");
}
static inline __attribute__((always_inline)) void conv_c_dot2x2(const int8_t *x, const int8_t *w0, int32_t K,
                                                               uint32_t *a00, uint32_t *a01, uint32_t *a10,
                                                               uint32_t *a11) {
  uint32_t acc[4] = {*a00, *a01, *a10, *a11};
  conv_c_dot2x2_v6m(x, w0, K, acc);
  *a00 = acc[0], *a01 = acc[1], *a10 = acc[2], *a11 = acc[3];
}
#endif

#if CONV_C_BLOCK == 4
/* a00 += x.w0, a01 += x.w1, a10 += y.w0, a11 += y.w1 over K bytes, where y = x + K and w1 = w0 + K. */
static inline __attribute__((always_inline)) void conv_c_dot2x2(const int8_t *x, const int8_t *w0, int32_t K,
                                                               uint32_t *a00, uint32_t *a01, uint32_t *a10,
                                                               uint32_t *a11) {
  uint32_t b00 = *a00, b01 = *a01, b10 = *a10, b11 = *a11;
  int32_t i = 0;
#if defined(__thumb2__) && defined(__ARM_ARCH_7M__)
  /* Armv7-M: four bytes per pass, each a load of both pixels' and both channels' bytes (the second pixel's and
   * channel's at register offset K) and four MLA; GCC reassociates the C form of this unrolling into MUL and
   * ADD pairs, hence the asm */
  if (K >= 4) {
    int32_t n = K >> 2, t0, t1, t2, t3;
    const int8_t *xp = x, *wp = w0;
#define CONV_C_STEP             \
  CONV_C_LD2("t0", "t1", "xp")  \
  CONV_C_LD2("t2", "t3", "wp")  \
  CONV_C_MLA("b00", "t1", "t3") \
  CONV_C_MLA("b01", "t1", "t2") \
  CONV_C_MLA("b10", "t0", "t3") \
  CONV_C_MLA("b11", "t0", "t2")
    __asm volatile(K_ASM_REPEAT("n", CONV_C_STEP CONV_C_STEP CONV_C_STEP CONV_C_STEP)
                   : [b00] "+r"(b00), [b01] "+r"(b01), [b10] "+r"(b10), [b11] "+r"(b11), [xp] "+r"(xp),
                     [wp] "+r"(wp), [n] "+r"(n), [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3)
                   : [k] "r"(K)
                   : "cc", "memory");
#undef CONV_C_STEP
    i = K & ~3;
  }
#endif
  for (; i < K; i++) {
    const int32_t xa = x[i], ya = x[K + i], va = w0[i], ua = w0[K + i];
    b00 += (uint32_t)(xa * va);
    b01 += (uint32_t)(xa * ua);
    b10 += (uint32_t)(ya * va);
    b11 += (uint32_t)(ya * ua);
  }
  *a00 = b00, *a01 = b01, *a10 = b10, *a11 = b11;
}
#endif

#if defined(__thumb2__) && defined(__ARM_ARCH_7M__)
#define CONV_C_THREE 1
/* Armv7-M: three pixels by two channels, a[p][c] += row p of x (rows K apart) . row c of w0 (rows K apart), over
 * K >= 4 bytes (K & ~3 of them; the caller adds the rest): per byte two weight and three input loads for six
 * MLA, where two by two takes four loads for four. Thirteen registers, so the step count is n; in asm for the
 * reason given at conv_c_dot2x2. */
static inline __attribute__((always_inline)) void conv_c_dot3x2(const int8_t *x, const int8_t *w0, int32_t K,
                                                               uint32_t a[6]) {
  uint32_t b00 = a[0], b01 = a[1], b10 = a[2], b11 = a[3], b20 = a[4], b21 = a[5];
  int32_t n = K >> 2, t, u0, u1;
  const int8_t *xp = x, *wp = w0;
  const int32_t k2 = 2 * K;
#define CONV_C_STEP3             \
  CONV_C_LD2("u1", "u0", "wp")   \
  "ldrsb %[t], [%[xp], %[k]]\n"  \
  CONV_C_MLA("b10", "t", "u0")   \
  CONV_C_MLA("b11", "t", "u1")   \
  "ldrsb %[t], [%[xp], %[k2]]\n" \
  CONV_C_MLA("b20", "t", "u0")   \
  CONV_C_MLA("b21", "t", "u1")   \
  "ldrsb %[t], [%[xp]], #1\n"    \
  CONV_C_MLA("b00", "t", "u0")   \
  CONV_C_MLA("b01", "t", "u1")
  __asm volatile(K_ASM_REPEAT("n", CONV_C_STEP3 CONV_C_STEP3 CONV_C_STEP3 CONV_C_STEP3)
                 : [b00] "+r"(b00), [b01] "+r"(b01), [b10] "+r"(b10), [b11] "+r"(b11), [b20] "+r"(b20),
                   [b21] "+r"(b21), [xp] "+r"(xp), [wp] "+r"(wp), [n] "+r"(n), [t] "=&r"(t), [u0] "=&r"(u0),
                   [u1] "=&r"(u1)
                 : [k] "r"(K), [k2] "r"(k2)
                 : "cc", "memory");
#undef CONV_C_STEP3
  a[0] = b00, a[1] = b01, a[2] = b10, a[3] = b11, a[4] = b20, a[5] = b21;
}
#endif

#if CONV_C_BLOCK == 4 || defined(__ARM_ARCH_6M__)

/* 1x1 stride-1 convolutions without padding: consecutive pixels are consecutive K-byte rows, so two pixels by
 * two output channels share each load (four loads for four products). fast: the 32-bit requantization applies to
 * every channel (a constant in each out-of-line copy below); the finish's parameters are locals, since the int8
 * stores may alias *g. */
static inline __attribute__((always_inline)) void conv_c_pointwise_body(const conv_c_ctx *g, const int8_t *x,
                                                                       const int8_t *w, int32_t npix, int8_t *out,
                                                                       const int fast) {
  const int32_t K = g->K, OC = g->OC, oo = g->oo, lo = g->lo, hi = g->hi;
  const int32_t *const beff = g->beff, *const mult = g->mult, *const shift = g->shift;
#define CONV_C_FIN(A, O)                                                        \
  (fast ? k_finish_fast_s8((int32_t)(A), mult[O], shift[O], oo, lo, hi)         \
        : k_finish_s8((int32_t)(A), mult[O], shift[O], oo, lo, hi))
  int32_t j = 0;
#ifdef CONV_C_THREE
  if (K >= 4)
    for (; j + 3 <= npix; j += 3, x += 3 * K, out += 3 * OC) {
      int32_t o = 0;
      for (; o + 2 <= OC; o += 2) {
        const int8_t *w0 = w + (size_t)o * K;
        const uint32_t b0 = (uint32_t)beff[o], b1 = (uint32_t)beff[o + 1];
        uint32_t a[6] = {b0, b1, b0, b1, b0, b1};
        conv_c_dot3x2(x, w0, K, a);
        for (int32_t i = K & ~3; i < K; i++) {
          const int32_t va = w0[i], ua = w0[K + i];
          for (int32_t q = 0; q < 3; q++) {
            a[2 * q] += (uint32_t)(x[q * K + i] * va);
            a[2 * q + 1] += (uint32_t)(x[q * K + i] * ua);
          }
        }
        for (int32_t q = 0; q < 3; q++) {
          out[q * OC + o] = CONV_C_FIN(a[2 * q], o);
          out[q * OC + o + 1] = CONV_C_FIN(a[2 * q + 1], o + 1);
        }
      }
      for (; o < OC; o++) {
        conv_c_row1(g, x, w, o, out);
        conv_c_row1(g, x + K, w, o, out + OC);
        conv_c_row1(g, x + 2 * K, w, o, out + 2 * OC);
      }
    }
#endif
  for (; j + 2 <= npix; j += 2, x += 2 * K, out += 2 * OC) {
    int32_t o = 0;
    for (; o + 2 <= OC; o += 2) {
      const int8_t *w0 = w + (size_t)o * K;
      const uint32_t b0 = (uint32_t)beff[o], b1 = (uint32_t)beff[o + 1];
      uint32_t a00 = b0, a01 = b1, a10 = b0, a11 = b1;
      conv_c_dot2x2(x, w0, K, &a00, &a01, &a10, &a11);
      out[o] = CONV_C_FIN(a00, o);
      out[o + 1] = CONV_C_FIN(a01, o + 1);
      out[OC + o] = CONV_C_FIN(a10, o);
      out[OC + o + 1] = CONV_C_FIN(a11, o + 1);
    }
    if (o < OC) {
      conv_c_row1(g, x, w, o, out);
      conv_c_row1(g, x + K, w, o, out + OC);
    }
  }
  if (j < npix) conv_c_row(g, x, w, out);
#undef CONV_C_FIN
}
static __attribute__((noinline)) void conv_c_pointwise_fast(const conv_c_ctx *g, const int8_t *x, const int8_t *w,
                                                            int32_t npix, int8_t *out) {
  conv_c_pointwise_body(g, x, w, npix, out, 1);
}
static __attribute__((noinline)) void conv_c_pointwise_gen(const conv_c_ctx *g, const int8_t *x, const int8_t *w,
                                                           int32_t npix, int8_t *out) {
  conv_c_pointwise_body(g, x, w, npix, out, 0);
}
#endif

/* The im2col row of output pixel (b, oy, ox): k_h x k_w taps of C bytes, padding taps = pad. */
static void conv_c_im2col(const qconv_params *p, const int8_t *in, int32_t b, int32_t oy, int32_t ox, int8_t pad,
                          int8_t *dst) {
  const int32_t C = p->in_c, ix0 = ox * p->stride_w - p->pad_w;
  /* a kernel row of undilated taps inside the input is one run of k_w * C bytes: one copy (one-channel inputs
   * made one call per byte) */
  const int run = p->dil_w == 1 && ix0 >= 0 && ix0 + p->k_w <= p->in_w;
  for (int32_t ky = 0; ky < p->k_h; ky++) {
    const int32_t iy = oy * p->stride_h - p->pad_h + ky * p->dil_h;
    if (run && iy >= 0 && iy < p->in_h) {
      memcpy(dst, in + (((size_t)b * p->in_h + iy) * p->in_w + ix0) * C, (size_t)p->k_w * C);
      dst += (size_t)p->k_w * C;
      continue;
    }
    for (int32_t kx = 0; kx < p->k_w; kx++, dst += C) {
      const int32_t ix = ox * p->stride_w - p->pad_w + kx * p->dil_w;
      if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w)
        memset(dst, pad, (size_t)C);
      else
        memcpy(dst, in + (((size_t)b * p->in_h + iy) * p->in_w + ix) * C, (size_t)C);
    }
  }
}

/* The dispatcher of the builds without MVE or DSP. */
k_status emk_conv2d_s8(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                       const int32_t *mult, const int32_t *shift, int8_t *out, void *scratch, size_t scratch_size) {
  if (!conv_fast_ok(p)) {
    emk_conv2d_s8_ref(p, in, w, bias, mult, shift, out);
    return K_OK;
  }
  if (scratch_size < emk_conv2d_s8_get_buffer_size(p) || ((uintptr_t)scratch & 3)) return K_ERR_SCRATCH;
  const int32_t C = p->in_c, K = p->k_h * p->k_w * C, OC = p->out_c;
  int32_t *beff = (int32_t *)scratch;
  int8_t *row = (int8_t *)scratch + ((size_t)OC + 3) / 4 * 16;
  if (p->beff && p->input_offset) /* folded at compile time (emlkit/passes/window_bias.py) */
    memcpy(beff, p->beff, (size_t)OC * sizeof(int32_t));
  else if (!p->input_offset) /* no weight sums to fold: a pass over every weight saved */
    for (int32_t o = 0; o < OC; o++) beff[o] = bias ? bias[o] : 0;
  else
    for (int32_t o = 0; o < OC; o++) {
      uint32_t ws = 0;
      for (int32_t i = 0; i < K; i++) ws += (uint32_t)w[(size_t)o * K + i];
      beff[o] = (int32_t)((bias ? (uint32_t)bias[o] : 0u) + (uint32_t)p->input_offset * ws);
    }
  conv_c_ctx g = {beff, mult, shift, K, OC, p->output_offset, p->act_min, p->act_max, k_rq_fast_ok(mult, shift, OC)};
  const int direct = conv_direct(p);
  const int8_t pad = (int8_t)-p->input_offset;
  /* locals: the int8 stores may alias *p */
  const int32_t B = p->batch, OH = p->out_h, OW = p->out_w, IH = p->in_h, IW = p->in_w, SH = p->stride_h, SW = p->stride_w;
#if CONV_C_BLOCK == 4 || defined(__ARM_ARCH_6M__)
  if (direct && SH == 1 && SW == 1) {
    (g.fast ? conv_c_pointwise_fast : conv_c_pointwise_gen)(&g, in, w, B * OH * OW, out);
    return K_OK;
  }
#endif
  int8_t *op = out;
  for (int32_t b = 0; b < B; b++)
    for (int32_t oy = 0; oy < OH; oy++)
      for (int32_t ox = 0; ox < OW; ox++, op += OC) {
        const int8_t *x = row;
        if (direct)
          x = in + (((size_t)b * IH + (size_t)oy * SH) * IW + (size_t)ox * SW) * C;
        else
          conv_c_im2col(p, in, b, oy, ox, pad, row);
        conv_c_row(&g, x, w, op);
      }
  return K_OK;
}
#endif
