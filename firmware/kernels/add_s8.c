/* cortex_m::quantized_add: both operands are rescaled to a common 2^20-scaled
 * fixed point, summed, requantized to the output scale and clamped
 * (operators.py quantized_add_impl, CMSIS-NN arm_elementwise_add_s8). */
#include "kernels.h"
#include "kernels_mve.h"
#include "kernels_dsp.h"

#define K_ADD_LEFT_SHIFT 20 /* SHIFT_INT8 in the reference */

void emk_add_s8_ref(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qadd_params *p) {
  const size_t n = a_len > b_len ? a_len : b_len;
  for (size_t i = 0; i < n; i++) {
    const int32_t fa = k_requantize((int32_t)((uint32_t)(a[i % a_len] - p->a_zp) << K_ADD_LEFT_SHIFT), p->a_mult,
                                    p->a_shift);
    const int32_t fb = k_requantize((int32_t)((uint32_t)(b[i % b_len] - p->b_zp) << K_ADD_LEFT_SHIFT), p->b_mult,
                                    p->b_shift);
    const int32_t sum = (int32_t)((uint32_t)fa + (uint32_t)fb); /* int32 add wraps in torch */
    const int32_t r = k_requantize(sum, p->out_mult, p->out_shift);
    out[i] = (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->out_zp), p->act_min, p->act_max);
  }
}

#if FW_HAVE_MVE
/* One block, four lanes per step, in one tail-predicated asm loop (DLSTP /
 * LETP) with every parameter in a register: about 22 instructions per four
 * elements. (a - za) << 20 is one VMLAS (a * 2^20 + (-za << 20), the same
 * wrapping int32 value). The round-half-away fix-up of k_requantize_mve is
 * x + (x >> 31) * f with f = 1 for a negative shift and 0 for none (two
 * instructions instead of three; VQRDMULH with mult >= 0 never returns
 * INT32_MIN, so the add cannot wrap, like the VQADD it replaces). */
typedef struct {
  const int8_t *a;       /* 0 */
  const int8_t *b;       /* 4 */
  int8_t *out;           /* 8 */
  int32_t n;             /* 12: >= 1 */
  int32_t cza, czb;      /* 16, 20: -zp << 20 (wrapping) */
  int32_t sa, sb;        /* 24, 28: shifts (<= 0) */
  int32_t mo, so, zo;    /* 32, 36, 40: the output's multiplier, shift, zero point */
  int32_t fa, fb, fo;    /* 44, 48, 52: 1 where that shift is negative, else 0 */
  int32_t pad_[2];
  int32_t ma[4];         /* 64 */
  int32_t mb[4];         /* 80 */
  int32_t lo[4];         /* 96 */
  int32_t hi[4];         /* 112 */
} add_mve_args;

K_ASM_LOOP(add_run_mve, const add_mve_args,
      "ldr lr, [r0, #12]\n"
      "vldrw.32 q4, [r0, #96]\n"
      "vldrw.32 q5, [r0, #112]\n"
      "vldrw.32 q6, [r0, #64]\n"
      "vldrw.32 q7, [r0, #80]\n"
      "mov r1, #1048576\n"
      "vdup.32 q0, r1\n"
      "ldrd r3, r4, [r0, #16]\n"
      "ldrd r5, r6, [r0, #24]\n"
      "ldrd r7, r8, [r0, #32]\n"
      "ldr r9, [r0, #40]\n"
      "ldrd r10, r11, [r0, #44]\n"
      "ldr r12, [r0, #52]\n"
      "ldrd r1, r2, [r0, #4]\n"
      "ldr r0, [r0, #0]\n"
      "dlstp.32 lr, lr\n"
      "1:\n"
      "vldrb.s32 q1, [r0], #4\n"
      "vldrb.s32 q2, [r1], #4\n"
      "vmlas.s32 q1, q0, r3\n"
      "vmlas.s32 q2, q0, r4\n"
      "vqrdmulh.s32 q1, q1, q6\n"
      "vqrdmulh.s32 q2, q2, q7\n"
      "vshr.s32 q3, q1, #31\n"
      "vmla.s32 q1, q3, r10\n"
      "vrshl.s32 q1, r5\n"
      "vshr.s32 q3, q2, #31\n"
      "vmla.s32 q2, q3, r11\n"
      "vrshl.s32 q2, r6\n"
      "vadd.i32 q1, q1, q2\n"
      "vqrdmulh.s32 q1, q1, r7\n"
      "vshr.s32 q3, q1, #31\n"
      "vmla.s32 q1, q3, r12\n"
      "vrshl.s32 q1, r8\n"
      "vadd.i32 q1, q1, r9\n"
      "vmax.s32 q1, q1, q4\n"
      "vmin.s32 q1, q1, q5\n"
      "vstrb.32 q1, [r2], #4\n"
      "letp lr, 1b\n")

static void add_block_mve(const int8_t *a, const int8_t *b, int8_t *out, int32_t len, const void *pv) {
  /* pv is emk_add_s8_mve's own (non-const) args block: filled in per block, not copied */
  add_mve_args *r = (add_mve_args *)(uintptr_t)pv;
  if (len <= 0) return;
  r->a = a, r->b = b, r->out = out, r->n = len;
  add_run_mve(r);
}

void emk_add_s8_mve(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qadd_params *p) {
  if (!k_requant_vec_ok(p->a_mult, p->a_shift) || !k_requant_vec_ok(p->b_mult, p->b_shift) ||
      !k_requant_vec_ok(p->out_mult, p->out_shift)) {
    emk_add_s8_ref(a, a_len, b, b_len, out, p);
    return;
  }
  add_mve_args k __attribute__((aligned(16)));
  k.cza = (int32_t)((uint32_t)-(uint32_t)p->a_zp << K_ADD_LEFT_SHIFT);
  k.czb = (int32_t)((uint32_t)-(uint32_t)p->b_zp << K_ADD_LEFT_SHIFT);
  k.sa = p->a_shift, k.sb = p->b_shift, k.mo = p->out_mult, k.so = p->out_shift, k.zo = p->out_zp;
  k.fa = p->a_shift < 0, k.fb = p->b_shift < 0, k.fo = p->out_shift < 0;
  for (int j = 0; j < 4; j++) k.ma[j] = p->a_mult, k.mb[j] = p->b_mult, k.lo[j] = p->act_min, k.hi[j] = p->act_max;
  k_bcast_blocks(a, a_len, b, b_len, out, add_block_mve, &k);
}
#endif

#if FW_HAVE_DSP
/* DSP extension: four elements per step. One LDR per operand, SXTB16 splits
 * it into two int16 pairs, SADD16 adds -zp to both halves (no SMLAD, no
 * per-element subtraction). Only the low 12 bits of a - zp survive the
 * reference's << 20 in int32, and a 16-bit add modulo 2^16 keeps those bits
 * exact for any zero point, so the low half's lane is the word << 20 and the
 * high half's (word & 0xFFFF0000) << 4. The requantizations are the portable
 * path's, k_requantize_dsp (exact, see kernels_dsp.h), or its rs >= 2 branch
 * alone when all three multiplier / shift pairs allow it. */
typedef struct {
  int32_t am, as, bm, bs, om, os, oz, lo, hi;
  int32_t nza2, nzb2; /* k_neg_zp2 of the operands' zero points */
} add_dsp_k;

static inline __attribute__((always_inline)) int8_t add_dsp_one(int32_t fa_in, int32_t fb_in, const add_dsp_k *k,
                                                                const int fast) {
  int32_t fa, fb, r;
  if (fast) {
    fa = k_requantize_dsp_fast(fa_in, k->am, k->as);
    fb = k_requantize_dsp_fast(fb_in, k->bm, k->bs);
    r = k_requantize_dsp_fast((int32_t)((uint32_t)fa + (uint32_t)fb), k->om, k->os);
  } else {
    fa = k_requantize_dsp(fa_in, k->am, k->as);
    fb = k_requantize_dsp(fb_in, k->bm, k->bs);
    r = k_requantize_dsp((int32_t)((uint32_t)fa + (uint32_t)fb), k->om, k->os);
  }
  return (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)k->oz), k->lo, k->hi);
}

static inline __attribute__((always_inline)) void add_block_dsp(const int8_t *a, const int8_t *b, int8_t *out,
                                                                int32_t len, const add_dsp_k *kp, const int fast) {
  const add_dsp_k k = *kp;
  const int32_t nza2 = k.nza2, nzb2 = k.nzb2;
  int32_t i = 0;
  for (; i + 4 <= len; i += 4) {
    const int32_t va = k_rd32(a + i), vb = k_rd32(b + i);
    const int32_t al = __sadd16(k_lo16(va), nza2), ah = __sadd16(k_hi16(va), nza2);
    const int32_t bl = __sadd16(k_lo16(vb), nzb2), bh = __sadd16(k_hi16(vb), nzb2);
    out[i] = add_dsp_one((int32_t)((uint32_t)al << 20), (int32_t)((uint32_t)bl << 20), &k, fast);
    out[i + 1] = add_dsp_one((int32_t)((uint32_t)ah << 20), (int32_t)((uint32_t)bh << 20), &k, fast);
    out[i + 2] = add_dsp_one((int32_t)(((uint32_t)al & 0xFFFF0000u) << 4),
                             (int32_t)(((uint32_t)bl & 0xFFFF0000u) << 4), &k, fast);
    out[i + 3] = add_dsp_one((int32_t)(((uint32_t)ah & 0xFFFF0000u) << 4),
                             (int32_t)(((uint32_t)bh & 0xFFFF0000u) << 4), &k, fast);
  }
  for (; i < len; i++)
    out[i] = add_dsp_one((int32_t)((uint32_t)(a[i] + (int16_t)nza2) << K_ADD_LEFT_SHIFT),
                         (int32_t)((uint32_t)(b[i] + (int16_t)nzb2) << K_ADD_LEFT_SHIFT), &k, fast);
}
K_ELEM_BLOCK_FAST_GEN(add_block_dsp, add_dsp_k)

void emk_add_s8_dsp(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qadd_params *p) {
  add_dsp_k k;
  k.am = p->a_mult, k.as = p->a_shift, k.bm = p->b_mult, k.bs = p->b_shift;
  k.om = p->out_mult, k.os = p->out_shift, k.oz = p->out_zp, k.lo = p->act_min, k.hi = p->act_max;
  k.nza2 = k_neg_zp2(p->a_zp), k.nzb2 = k_neg_zp2(p->b_zp);
  const int fast = k.am >= 0 && k.as <= -2 && k.bm >= 0 && k.bs <= -2 && k.om >= 0 && k.os <= -2;
  if (a_len == 0 || b_len == 0) return;
  k_bcast_blocks(a, a_len, b, b_len, out, fast ? add_block_dsp_fast : add_block_dsp_gen, &k);
}
#endif

#if !FW_HAVE_MVE && !FW_HAVE_DSP
/* Portable fast path (Cortex-M0+/M3, the host): the broadcast split into equal-length blocks (no modulo per
 * element) and the 32-bit requantizations of kernels_dsp.h (k_requantize_dsp, exact; its rs >= 2 branch
 * alone when all three multiplier / shift pairs allow it, checked once per call). */
static inline __attribute__((always_inline)) void add_block_c(const int8_t *a, const int8_t *b, int8_t *out,
                                                              int32_t len, const qadd_params *pp, const int fast) {
  const qadd_params p = *pp; /* locals: the int8 stores may alias the parameters */
  for (int32_t i = 0; i < len; i++) {
    const int32_t xa = (int32_t)((uint32_t)(a[i] - p.a_zp) << K_ADD_LEFT_SHIFT);
    const int32_t xb = (int32_t)((uint32_t)(b[i] - p.b_zp) << K_ADD_LEFT_SHIFT);
    int32_t r;
    if (fast) {
      const int32_t fa = k_requantize_dsp_fast(xa, p.a_mult, p.a_shift), fb = k_requantize_dsp_fast(xb, p.b_mult, p.b_shift);
      r = k_requantize_dsp_fast((int32_t)((uint32_t)fa + (uint32_t)fb), p.out_mult, p.out_shift);
    } else {
      const int32_t fa = k_requantize_dsp(xa, p.a_mult, p.a_shift), fb = k_requantize_dsp(xb, p.b_mult, p.b_shift);
      r = k_requantize_dsp((int32_t)((uint32_t)fa + (uint32_t)fb), p.out_mult, p.out_shift);
    }
    out[i] = (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p.out_zp), p.act_min, p.act_max);
  }
}
K_ELEM_BLOCK_FAST_GEN(add_block_c, qadd_params)

#if defined(__ARM_ARCH_6M__)
/* Armv6-M (no 32x32->64 multiply): an operand's (a - zp) << 20 has its low 16 bits zero, so with
 * mult = mh * 2^16 + ml its product is d * 16 * (mh * 2^32 + ml * 2^16) and the reference's
 * floor((x * mult + 2^30) / 2^31) is d * (mh << 5) + floor((d * (ml << 4) + 2^14) / 2^15), both products
 * within 32 bits for |d| <= 255 (zero points in the int8 range, mult >= 0, shift <= 0: checked per call);
 * then the reference's half-away rounding by 2^rs in 32 bits. The sum's requantization is the general one. */
typedef struct {
  int32_t azp, a1, a2, ars, bzp, b1, b2, brs;
  qadd_params p;
} add_v6m_k;

static inline __attribute__((always_inline)) int32_t add_v6m_operand(int32_t d, int32_t m1, int32_t m2, int32_t rs) {
  int32_t u = d * m1 + ((d * m2 + (1 << 14)) >> 15);
  if (rs) {
    const int32_t mask = (int32_t)((1u << rs) - 1u), rem = u & mask;
    u >>= rs;
    u += rem > (mask >> 1) + (u < 0) ? 1 : 0;
  }
  return u;
}

static inline __attribute__((always_inline)) void add_block_v6m(const int8_t *a, const int8_t *b, int8_t *out,
                                                                int32_t len, const add_v6m_k *kp, const int fast) {
  const add_v6m_k k = *kp; /* locals: the int8 stores may alias the parameters */
  for (int32_t i = 0; i < len; i++) {
    const int32_t fa = add_v6m_operand(a[i] - k.azp, k.a1, k.a2, k.ars);
    const int32_t fb = add_v6m_operand(b[i] - k.bzp, k.b1, k.b2, k.brs);
    const int32_t sum = (int32_t)((uint32_t)fa + (uint32_t)fb);
    const int32_t r = fast ? k_requantize_dsp_fast(sum, k.p.out_mult, k.p.out_shift)
                           : k_requantize_dsp(sum, k.p.out_mult, k.p.out_shift);
    out[i] = (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)k.p.out_zp), k.p.act_min, k.p.act_max);
  }
}
K_ELEM_BLOCK_FAST_GEN(add_block_v6m, add_v6m_k)

static int add_v6m_ok(int32_t zp, int32_t mult, int32_t shift) {
  return zp >= -128 && zp <= 127 && mult >= 0 && shift <= 0 && shift >= -31;
}
#endif
#endif

void emk_add_s8(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len, int8_t *out,
             const qadd_params *p) {
#if !FW_HAVE_MVE && !FW_HAVE_DSP
  if (a_len == 0 || b_len == 0) return;
#if defined(__ARM_ARCH_6M__)
  if (add_v6m_ok(p->a_zp, p->a_mult, p->a_shift) && add_v6m_ok(p->b_zp, p->b_mult, p->b_shift)) {
    const add_v6m_k k = {p->a_zp, (p->a_mult >> 16) << 5, (p->a_mult & 0xFFFF) << 4, -p->a_shift,
                         p->b_zp, (p->b_mult >> 16) << 5, (p->b_mult & 0xFFFF) << 4, -p->b_shift, *p};
    const int out_fast = p->out_mult >= 0 && p->out_shift <= -2;
    k_bcast_blocks(a, a_len, b, b_len, out, out_fast ? add_block_v6m_fast : add_block_v6m_gen, &k);
    return;
  }
#endif
  const int fast = p->a_mult >= 0 && p->a_shift <= -2 && p->b_mult >= 0 && p->b_shift <= -2 && p->out_mult >= 0 &&
                   p->out_shift <= -2;
  k_bcast_blocks(a, a_len, b, b_len, out, fast ? add_block_c_fast : add_block_c_gen, p);
#else
  K_BEST(emk_add_s8)(a, a_len, b, b_len, out, p);
#endif
}
