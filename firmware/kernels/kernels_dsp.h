/* DSP-extension (SIMD32) helpers shared by the *_dsp kernels (internal
 * header): Cortex-M4/M7/M33 and other cores with __ARM_FEATURE_DSP but no
 * MVE. ACLE intrinsics from <arm_acle.h>.
 *
 * Bit-exactness: SXTB16 splits four int8 into two int16 pairs (bytes 0,2 and,
 * rotated by 8, bytes 1,3); SMLAD / SMLABB / SMLATT multiply 16-bit halves
 * exactly and add to the 32-bit accumulator modulo 2^32 (overflow only sets
 * the sticky Q flag), which is the reference's int32 wrap-around. */
#ifndef FW_KERNELS_DSP_H
#define FW_KERNELS_DSP_H

#include "kernels.h"

#if FW_HAVE_DSP
#include <arm_acle.h>
#include <string.h>

/* Four bytes from any address (the Armv7E-M/Armv8-M LDR allows unaligned). */
static inline int32_t k_rd32(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}
static inline void k_wr32(int8_t *p, int32_t v) { memcpy(p, &v, 4); }

/* -zp modulo 2^16 in both halves: SADD16 with it subtracts a zero point
 * from two int16 lanes at once. */
static inline int32_t k_neg_zp2(int32_t zp) {
  const uint32_t h = (uint16_t)(0u - (uint32_t)zp);
  return (int32_t)(h << 16 | h);
}

/* Bytes 0 and 2 as int16 halves. */
static inline int32_t k_lo16(int32_t v) { return __sxtb16(v); }
/* Bytes 1 and 3 as int16 halves: SXTB16 with its rotate field. GCC 12's
 * arm_acle.h has no __ror, and the builtin does not absorb a C rotate, so
 * this one form is written out (CMSIS's __SXTB16_RORn is the same). */
static inline int32_t k_hi16(int32_t v) {
  int32_t r;
  __asm("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}

/* The same with off2's halves added (SXTAB16): k_lo16(v) + off2 and k_hi16(v) + off2 lane by lane in one
 * instruction each, where a separate SADD16 would take a second; exact while x + offset fits int16. */
static inline int32_t k_lo16_add(int32_t v, int32_t off2) { return __sxtab16(off2, v); }
static inline int32_t k_hi16_add(int32_t v, int32_t off2) {
  int32_t r;
  __asm("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(off2), "r"(v));
  return r;
}

/* Sum of n int8. */
static inline int32_t k_sum_s8_dsp(const int8_t *x, int32_t n) {
  const int32_t ones = 0x00010001;
  int32_t s = 0, i = 0;
  for (; i + 4 <= n; i += 4) {
    const int32_t v = k_rd32(x + i);
    s = __smlad(k_lo16(v), ones, s);
    s = __smlad(k_hi16(v), ones, s);
  }
  for (; i < n; i++) s += x[i];
  return s;
}

/* acc[j] += sum_i (x[i] + xoff) * w[j * ws + i] over n bytes, for four
 * weight rows ws bytes apart sharing each load of x (one LDR + two SXTB16 of
 * x, with use_off SXTAB16 adding the offset in the same two, which must keep x + xoff
 * within int16; then per row one LDR, two SXTB16 and two SMLAD per four
 * MACs; the rows are addressed from one pointer so that the loop fits the
 * registers). Inlined with a constant use_off. */
static inline __attribute__((always_inline)) void k_dot4_s8_dsp(const int8_t *x, const int8_t *w, int32_t ws,
                                                                int32_t n, int32_t acc[4], const int use_off,
                                                                int32_t xoff) {
  int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  const int32_t ws2 = 2 * ws, ws3 = 3 * ws;
  const int32_t off2 = (int32_t)(((uint32_t)(uint16_t)xoff << 16) | (uint16_t)xoff);
  if (!use_off) {
    xoff = 0;
    /* without the offset, the loop in asm: GCC keeps ws, 2 ws and 3 ws on the stack and reloads them
       (30 instructions per four bytes); here rows 1-3 are [w, ws], [w, ws, lsl #1] and [w + 2 ws, ws]
       (one ADD), row 0 post-increments w, and x's halves stay in two registers: 26 per four bytes */
    int32_t n4 = n >> 2, v, t, xl, xh;
    if (n4 > 0)
      __asm volatile(
          "1:\n\t"
          "ldr    %[v], [%[x]], #4\n\t"
          "sxtb16 %[xl], %[v]\n\t"
          "sxtb16 %[xh], %[v], ror #8\n\t"
          "ldr    %[v], [%[w], %[ws]]\n\t"
          "sxtb16 %[t], %[v]\n\t"
          "sxtb16 %[v], %[v], ror #8\n\t"
          "smlad  %[a1], %[xl], %[t], %[a1]\n\t"
          "smlad  %[a1], %[xh], %[v], %[a1]\n\t"
          "ldr    %[v], [%[w], %[ws], lsl #1]\n\t"
          "sxtb16 %[t], %[v]\n\t"
          "sxtb16 %[v], %[v], ror #8\n\t"
          "smlad  %[a2], %[xl], %[t], %[a2]\n\t"
          "smlad  %[a2], %[xh], %[v], %[a2]\n\t"
          "add    %[t], %[w], %[ws], lsl #1\n\t"
          "ldr    %[v], [%[t], %[ws]]\n\t"
          "sxtb16 %[t], %[v]\n\t"
          "sxtb16 %[v], %[v], ror #8\n\t"
          "smlad  %[a3], %[xl], %[t], %[a3]\n\t"
          "smlad  %[a3], %[xh], %[v], %[a3]\n\t"
          "ldr    %[v], [%[w]], #4\n\t"
          "sxtb16 %[t], %[v]\n\t"
          "sxtb16 %[v], %[v], ror #8\n\t"
          "smlad  %[a0], %[xl], %[t], %[a0]\n\t"
          "smlad  %[a0], %[xh], %[v], %[a0]\n\t"
          "subs   %[n4], %[n4], #1\n\t"
          "bne    1b\n\t"
          : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x] "+r"(x), [w] "+r"(w), [n4] "+r"(n4),
            [v] "=&r"(v), [t] "=&r"(t), [xl] "=&r"(xl), [xh] "=&r"(xh)
          : [ws] "r"(ws)
          : "cc", "memory");
  }
  for (int32_t c = use_off ? n >> 2 : 0; c > 0; c--) {
    const int32_t vx = k_rd32(x);
    x += 4;
    const int32_t xl = use_off ? k_lo16_add(vx, off2) : k_lo16(vx), xh = use_off ? k_hi16_add(vx, off2) : k_hi16(vx);
    int32_t v = k_rd32(w);
    a0 = __smlad(xh, k_hi16(v), a0);
    a0 = __smlad(xl, k_lo16(v), a0);
    v = k_rd32(w + ws);
    a1 = __smlad(xh, k_hi16(v), a1);
    a1 = __smlad(xl, k_lo16(v), a1);
    v = k_rd32(w + ws2);
    a2 = __smlad(xh, k_hi16(v), a2);
    a2 = __smlad(xl, k_lo16(v), a2);
    v = k_rd32(w + ws3);
    w += 4;
    a3 = __smlad(xh, k_hi16(v), a3);
    a3 = __smlad(xl, k_lo16(v), a3);
  }
  for (int32_t i = 0; i < (n & 3); i++) {
    const int32_t xv = x[i] + xoff;
    a0 = (int32_t)((uint32_t)a0 + (uint32_t)(xv * w[i]));
    a1 = (int32_t)((uint32_t)a1 + (uint32_t)(xv * w[ws + i]));
    a2 = (int32_t)((uint32_t)a2 + (uint32_t)(xv * w[ws2 + i]));
    a3 = (int32_t)((uint32_t)a3 + (uint32_t)(xv * w[ws3 + i]));
  }
  acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

/* Two pixels by two output channels: acc[0..3] += x0.w0, x0.w1, x1.w0,
 * x1.w1 over n bytes, where x1 = x0 + s and w1 = w0 + s (consecutive pixels
 * of a 1x1 stride-1 convolution, whose rows are K = C bytes like the weight
 * rows). Per four bytes: four LDR, eight SXTB16, eight SMLAD for 16 MACs.
 * The loop is asm because GCC spills its end pointer (25 instructions per
 * four bytes): here the row-0 loads post-increment both pointers, the row-1
 * loads use the one register s - 4, and eight bytes per pass leave two
 * instructions of loop control per eight bytes (21 per four bytes). It
 * needs every low and high register but one: 4 sums, 6 halves, 4 loop
 * registers. */
#define K_DOT2X2_STEP                                   \
  "ldr    %[t0], [%[w]], #4\n\t"        /* w0 */      \
  "sxtb16 %[t1], %[t0]\n\t"                            \
  "sxtb16 %[t0], %[t0], ror #8\n\t"                    \
  "ldr    %[t2], [%[x]], #4\n\t"        /* x0 */      \
  "sxtb16 %[t3], %[t2]\n\t"                            \
  "sxtb16 %[t2], %[t2], ror #8\n\t"                    \
  "smlad  %[a00], %[t3], %[t1], %[a00]\n\t"            \
  "smlad  %[a00], %[t2], %[t0], %[a00]\n\t"            \
  "ldr    %[t4], [%[x], %[s4]]\n\t"     /* x1 */      \
  "sxtb16 %[t5], %[t4]\n\t"                            \
  "sxtb16 %[t4], %[t4], ror #8\n\t"                    \
  "smlad  %[a10], %[t5], %[t1], %[a10]\n\t"            \
  "smlad  %[a10], %[t4], %[t0], %[a10]\n\t"            \
  "ldr    %[t0], [%[w], %[s4]]\n\t"     /* w1 */      \
  "sxtb16 %[t1], %[t0]\n\t"                            \
  "sxtb16 %[t0], %[t0], ror #8\n\t"                    \
  "smlad  %[a01], %[t3], %[t1], %[a01]\n\t"            \
  "smlad  %[a01], %[t2], %[t0], %[a01]\n\t"            \
  "smlad  %[a11], %[t5], %[t1], %[a11]\n\t"            \
  "smlad  %[a11], %[t4], %[t0], %[a11]\n\t"
static inline __attribute__((always_inline)) void k_dot2x2_s8_dsp(const int8_t *x, const int8_t *w, int32_t s,
                                                                  int32_t n, int32_t acc[4]) {
  int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
  const int32_t s4 = s - 4;
  int32_t t0, t1, t2, t3, t4, t5;
  int32_t n8 = n >> 3;
  if (n8 > 0)
    __asm volatile(K_ASM_REPEAT("n8", K_DOT2X2_STEP K_DOT2X2_STEP)
                   : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [x] "+r"(x), [w] "+r"(w),
                     [n8] "+r"(n8), [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4),
                     [t5] "=&r"(t5)
                   : [s4] "r"(s4)
                   : "cc", "memory");
  if (n & 4)
    __asm volatile(K_DOT2X2_STEP
                   : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [x] "+r"(x), [w] "+r"(w),
                     [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4), [t5] "=&r"(t5)
                   : [s4] "r"(s4)
                   : "memory");
  for (int32_t i = 0; i < (n & 3); i++) {
    const int32_t x0 = x[i], x1 = x[s + i], w0 = w[i], w1 = w[s + i];
    a00 = (int32_t)((uint32_t)a00 + (uint32_t)(x0 * w0));
    a01 = (int32_t)((uint32_t)a01 + (uint32_t)(x0 * w1));
    a10 = (int32_t)((uint32_t)a10 + (uint32_t)(x1 * w0));
    a11 = (int32_t)((uint32_t)a11 + (uint32_t)(x1 * w1));
  }
  acc[0] = a00, acc[1] = a01, acc[2] = a10, acc[3] = a11;
}
#undef K_DOT2X2_STEP

/* The same for one weight row. */
static inline __attribute__((always_inline)) void k_dot1_s8_dsp(const int8_t *x, const int8_t *w, int32_t n,
                                                                int32_t *acc, const int use_off, int32_t xoff) {
  int32_t a0 = *acc;
  const int32_t off2 = (int32_t)(((uint32_t)(uint16_t)xoff << 16) | (uint16_t)xoff);
  if (!use_off) xoff = 0;
  for (int32_t c = n >> 2; c > 0; c--) {
    const int32_t vx = k_rd32(x), v = k_rd32(w);
    x += 4, w += 4;
    const int32_t xl = use_off ? k_lo16_add(vx, off2) : k_lo16(vx), xh = use_off ? k_hi16_add(vx, off2) : k_hi16(vx);
    a0 = __smlad(xh, k_hi16(v), a0);
    a0 = __smlad(xl, k_lo16(v), a0);
  }
  for (int32_t i = 0; i < (n & 3); i++) a0 = (int32_t)((uint32_t)a0 + (uint32_t)((x[i] + xoff) * w[i]));
  *acc = a0;
}

/* The requantization in one SMMLAR, for layers where every channel has 2^30 < mult, 1 <= -shift <= 22 and
 * every sum stays within |acc| < 2^30 (k_rq_mm_ok). SMMLAR(2 acc, mult, c) = floor((2 acc mult + 2^31) / 2^32)
 * + c = r1 + c, the reference's first step r1 = floor((acc mult + 2^30) / 2^31) (2 acc does not overflow).
 * Its rounding of r1 / 2^rs half away from zero is floor((r1 + 2^(rs-1) - [r1 < 0]) / 2^rs); with
 * mult > 2^30, r1 < 0 exactly when acc < 0, so c = 2^(rs-1) + off 2^rs + (acc >> 31) and one ASR by rs give
 * the rounded value plus the output offset (|r1 + c| < 2^31 for rs <= 22). Five instructions per output
 * before the clamp, where k_finish_fast_s8 takes about ten. Checked against k_requantize in the self-test. */
static inline int32_t k_rq_mm_c(int32_t shift, int32_t off) {
  const int32_t rs = -shift;
  return (int32_t)((1u << (rs - 1)) + (uint32_t)off * (1u << rs));
}
static inline int32_t k_rq_mm(int32_t acc, int32_t mult, int32_t c, int32_t rs) {
  int32_t r;
  __asm("smmlar %0, %1, %2, %3"
        : "=r"(r)
        : "r"((int32_t)((uint32_t)acc << 1)), "r"(mult), "r"((int32_t)((uint32_t)c + (uint32_t)(acc >> 31))));
  return r >> rs;
}
/* span: the most that the products can add to a start value (from b0[i], or b1[i] when given; NULL: 0). */
static inline int k_rq_mm_ok(const int32_t *mult, const int32_t *shift, const int32_t *b0, const int32_t *b1,
                             int32_t n, int64_t span) {
  const int64_t lim = (int64_t)1 << 30;
  for (int32_t i = 0; i < n; i++) {
    const int64_t v0 = b0 ? b0[i] : 0, v1 = b1 ? b1[i] : 0;
    if (mult[i] <= (1 << 30) || shift[i] > -1 || shift[i] < -22) return 0;
    if ((v0 < 0 ? -v0 : v0) + span >= lim || (v1 < 0 ? -v1 : v1) + span >= lim) return 0;
  }
  return 1;
}

#endif

/* The requantization helpers below are plain C (one 32x32->64 multiply-accumulate): the portable fast paths
 * (conv2d_s8.c, depthwise_conv2d_s8.c) use them too. */

/* val * mult exactly, for 0 <= mult. Armv6-M's MULS keeps only the low 32 bits of a product, so GCC makes an
 * int64 product a call of __aeabi_lmul (a general 64x64 multiply, about 45 instructions); with mult >= 0 four
 * 16x16 products, each exact in 32 bits, make it: vh * mh (|vh| <= 2^15, mh < 2^15), vh * ml and vl * mh
 * (below 2^31 in magnitude) and vl * ml (below 2^32, unsigned), summed at their weights 2^32, 2^16 and 1. */
#if defined(__ARM_ARCH_6M__)
static inline int64_t k_mul64_v6m(int32_t val, int32_t mult) {
  const uint32_t vl = (uint32_t)val & 0xFFFFu, ml = (uint32_t)mult & 0xFFFFu;
  const int32_t vh = val >> 16, mh = mult >> 16;
  const int32_t mid1 = vh * (int32_t)ml, mid2 = (int32_t)(vl * (uint32_t)mh);
  return (int64_t)(vh * mh) * 4294967296 + (int64_t)(vl * ml) + (int64_t)mid1 * 65536 +
         (int64_t)mid2 * 65536;
}
#define K_MUL64_NONNEG(val, mult) k_mul64_v6m((val), (mult))
/* Out of line there (one copy per file): inlined at every call site they would not fit the micro:bit's flash. */
#define K_RQ_INLINE __attribute__((noinline, unused))
#else
#define K_MUL64_NONNEG(val, mult) ((int64_t)(val) * (mult))
#define K_RQ_INLINE inline
#endif
/* k_requantize for 0 <= mult and shift <= 0 (every real scale), without its
 * 64-bit shifts. With t = val * mult + 2^30 the reference computes
 * r1 = floor(t / 2^31), then rounds r1 / 2^rs half away from zero (rs =
 * -shift), which equals floor((r1 + 2^(rs-1) - [r1 < 0]) / 2^rs) =
 * floor((t + 2^(rs+30) - [t < 0] * 2^31) / 2^(31+rs)): for rs >= 2 one SMLAL
 * from the constant 2^30 + 2^(rs+30), a compare of its high word (t < 0
 * exactly when it is below 2^(rs-2)), the borrow of the -2^31 correction and
 * one arithmetic shift of the high word by rs-1. rs = 0 or 1 take the
 * 32-bit funnel form; positive shifts and negative multipliers take
 * k_requantize. Checked against k_requantize on 2e8 random and exhaustive
 * small inputs, ties included, besides the self-test. */
static K_RQ_INLINE int32_t k_requantize_dsp(int32_t val, int32_t mult, int32_t shift) {
  if (shift > 0 || mult < 0) return k_requantize(val, mult, shift);
  const int rs = -shift;
  if (rs >= 2) {
    const int32_t hq = 1 << (rs - 2); /* 2^(rs+30) = hq * 2^32 */
    const int64_t t = K_MUL64_NONNEG(val, mult) + (int64_t)(((uint64_t)(uint32_t)hq << 32) | (1u << 30));
    int32_t hi = (int32_t)(t >> 32);
    if (hi < hq) hi = hi - 1 + (int32_t)((uint32_t)t >> 31);
    return hi >> (rs - 1);
  }
  int32_t res = (int32_t)((K_MUL64_NONNEG(val, mult) + (1ll << 30)) >> 31); /* in [-2^31, 2^31) */
  if (rs) { /* rs == 1: the reference's remainder test with mask 1 */
    const int32_t rem = res & 1;
    res >>= 1;
    res += rem > (res < 0 ? 1 : 0) ? 1 : 0;
  }
  return res;
}

/* k_requantize_dsp's rs >= 2 branch alone, for callers that checked once
 * that every channel has mult >= 0 and shift <= -2 (k_rq_fast_ok). */
#if defined(__ARM_ARCH_6M__)
/* Armv6-M: the same steps in 30 instructions where GCC makes about 65 of k_mul64_v6m's: hi:lo = vl * ml, then
 * vh * ml and vl * mh added at 2^16 and 2^30 + hq * 2^32 added, each by ADDS / ADCS, with vh * mh the high
 * word's start. */
static __attribute__((noinline, unused)) int32_t k_requantize_dsp_fast(int32_t val, int32_t mult, int32_t shift) {
  int32_t vl, ml, lo, hq;
  __asm(".syntax unified\n"          /* GCC hands Thumb-1 inline asm to the assembler in divided syntax */
        "mvns %[s], %[s]\n"         /* rs - 1 */
        "movs %[hq], #1\n"
        "lsls %[hq], %[s]\n"
        "lsrs %[hq], %[hq], #1\n"   /* hq = 2^(rs-2) */
        "uxth %[vl], %[v]\n"
        "asrs %[v], %[v], #16\n"    /* vh */
        "uxth %[ml], %[m]\n"
        "lsrs %[m], %[m], #16\n"    /* mh */
        "movs %[lo], %[vl]\n"
        "muls %[lo], %[ml]\n"       /* vl * ml */
        "muls %[ml], %[v]\n"        /* vh * ml */
        "muls %[vl], %[m]\n"        /* vl * mh */
        "muls %[m], %[v]\n"         /* hi = vh * mh */
        "lsls %[v], %[ml], #16\n"
        "asrs %[ml], %[ml], #16\n"
        "adds %[lo], %[lo], %[v]\n"
        "adcs %[m], %[ml]\n"
        "lsls %[v], %[vl], #16\n"
        "lsrs %[vl], %[vl], #16\n"
        "adds %[lo], %[lo], %[v]\n"
        "adcs %[m], %[vl]\n"
        "movs %[v], #1\n"
        "lsls %[v], %[v], #30\n"
        "adds %[lo], %[lo], %[v]\n"
        "adcs %[m], %[hq]\n"        /* t = val * mult + 2^30 + hq * 2^32 */
        "cmp %[m], %[hq]\n"
        "bge 1f\n"
        "lsrs %[lo], %[lo], #31\n"  /* t < 0: hi - 1 + bit 31 of t */
        "adds %[m], %[m], %[lo]\n"
        "subs %[m], %[m], #1\n"
        "1:\n"
        "asrs %[m], %[s]\n"
        : [v] "+l"(val), [m] "+l"(mult), [s] "+l"(shift), [vl] "=&l"(vl), [ml] "=&l"(ml), [lo] "=&l"(lo),
          [hq] "=&l"(hq)
        :
        : "cc");
  return mult;
}
#else
static K_RQ_INLINE int32_t k_requantize_dsp_fast(int32_t val, int32_t mult, int32_t shift) {
  const int rs = -shift;
  const int32_t hq = 1 << (rs - 2);
  const int64_t t = K_MUL64_NONNEG(val, mult) + (int64_t)(((uint64_t)(uint32_t)hq << 32) | (1u << 30));
  int32_t hi = (int32_t)(t >> 32);
  if (hi < hq) hi = hi - 1 + (int32_t)((uint32_t)t >> 31);
  return hi >> (rs - 1);
}
#endif
static inline int k_rq_fast_ok(const int32_t *mult, const int32_t *shift, int32_t n) {
  for (int32_t i = 0; i < n; i++)
    if (mult[i] < 0 || shift[i] > -2) return 0;
  return 1;
}
static inline int8_t k_finish_fast_s8(int32_t acc, int32_t mult, int32_t shift, int32_t off, int32_t lo,
                                      int32_t hi) {
  const int32_t r = k_requantize_dsp_fast(acc, mult, shift);
  return (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)off), lo, hi);
}

/* Requantize, add the output offset, clamp: the portable finish. */
static inline int8_t k_finish_s8(int32_t acc, int32_t mult, int32_t shift, int32_t off, int32_t lo,
                                 int32_t hi) {
  const int32_t r = k_requantize_dsp(acc, mult, shift);
  return (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)off), lo, hi);
}

#endif
