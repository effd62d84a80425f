/* cortex_m::quantized_mul: (a - za) * (b - zb) requantized to the output
 * scale and clamped to int8 (operators.py quantized_mul_impl). */
#include "kernels.h"
#include "kernels_mve.h"
#include "kernels_dsp.h"

static inline int8_t mul_one(int32_t a, int32_t b, const qmul_params *p) {
  const int32_t prod = (int32_t)((uint32_t)(a - p->a_zp) * (uint32_t)(b - p->b_zp));
  const int32_t r = k_requantize(prod, p->out_mult, p->out_shift);
  return (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->out_zp), -128, 127);
}

void qmul_s8_ref(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qmul_params *p) {
  const size_t n = a_len > b_len ? a_len : b_len;
  for (size_t i = 0; i < n; i++) out[i] = mul_one(a[i % a_len], b[i % b_len], p);
}

#if FW_HAVE_MVE
static void mul_block_mve(const int8_t *a, const int8_t *b, int8_t *out, int32_t len,
                          const qmul_params *p) {
  const int32x4_t za = vdupq_n_s32(p->a_zp), zb = vdupq_n_s32(p->b_zp);
  const int32x4_t zo = vdupq_n_s32(p->out_zp);
  const int32x4_t lo = vdupq_n_s32(-128), hi = vdupq_n_s32(127);
  for (int32_t i = 0; i < len; i += 4) {
    const mve_pred16_t pr = vctp32q((uint32_t)(len - i));
    const int32x4_t va = vsubq_s32(vldrbq_z_s32(a + i, pr), za);
    const int32x4_t vb = vsubq_s32(vldrbq_z_s32(b + i, pr), zb);
    int32x4_t r = k_requantize_mve_n(vmulq_s32(va, vb), p->out_mult, p->out_shift);
    r = vminq_s32(vmaxq_s32(vaddq_s32(r, zo), lo), hi);
    vstrbq_p_s32(out + i, r, pr);
  }
}

void qmul_s8_mve(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qmul_params *p) {
  if (!k_requant_vec_ok(p->out_mult, p->out_shift)) {
    qmul_s8_ref(a, a_len, b, b_len, out, p);
    return;
  }
  const size_t n = a_len > b_len ? a_len : b_len;
  const size_t blk = a_len < b_len ? a_len : b_len;
  for (size_t s = 0; s < n; s += blk)
    mul_block_mve(a_len == n ? a + s : a, b_len == n ? b + s : b, out + s, (int32_t)blk, p);
}
#endif

#if FW_HAVE_DSP
/* DSP extension: four elements per step. One LDR per operand, SXTB16 splits
 * it into two int16 pairs and SADD16 adds -zero_point to both halves (exact
 * while |zero point| <= K_MUL_DSP_ZP_MAX keeps a - zp within int16), and
 * 16 x 16 -> 32-bit multiplies of the bottom and top halves (SMULBB, SMULTT)
 * give the reference's int32 products, exact since both factors are below
 * 2^15. The requantization is k_requantize_dsp (exact, see kernels_dsp.h) or
 * its rs >= 2 branch alone, and SSAT clamps to int8 as the reference does. */
#define K_MUL_DSP_ZP_MAX 32000

static inline __attribute__((always_inline)) int8_t mul_dsp_fin(int32_t prod, int32_t m, int32_t s, int32_t oz,
                                                                const int fast) {
  const int32_t r = fast ? k_requantize_dsp_fast(prod, m, s) : k_requantize_dsp(prod, m, s);
  return (int8_t)__ssat((int32_t)((uint32_t)r + (uint32_t)oz), 8);
}
/* Bottom and top int16 halves multiplied: GCC emits SMULBB / SMULTT. */
static inline int32_t mul_bb(int32_t x, int32_t y) { return (int32_t)(int16_t)x * (int16_t)y; }
static inline int32_t mul_tt(int32_t x, int32_t y) { return (x >> 16) * (y >> 16); }

static inline __attribute__((always_inline)) void mul_block_dsp(const int8_t *a, const int8_t *b, int8_t *out,
                                                                int32_t len, const qmul_params *p, int32_t nza2,
                                                                int32_t nzb2, const int fast) {
  const int32_t m = p->out_mult, s = p->out_shift, oz = p->out_zp;
  int32_t i = 0;
  for (; i + 4 <= len; i += 4) {
    const int32_t va = k_rd32(a + i), vb = k_rd32(b + i);
    const int32_t al = __sadd16(k_lo16(va), nza2), ah = __sadd16(k_hi16(va), nza2);
    const int32_t bl = __sadd16(k_lo16(vb), nzb2), bh = __sadd16(k_hi16(vb), nzb2);
    out[i] = mul_dsp_fin(mul_bb(al, bl), m, s, oz, fast);
    out[i + 1] = mul_dsp_fin(mul_bb(ah, bh), m, s, oz, fast);
    out[i + 2] = mul_dsp_fin(mul_tt(al, bl), m, s, oz, fast);
    out[i + 3] = mul_dsp_fin(mul_tt(ah, bh), m, s, oz, fast);
  }
  for (; i < len; i++)
    out[i] = mul_dsp_fin((a[i] + (int16_t)nza2) * (b[i] + (int16_t)nzb2), m, s, oz, fast);
}
static __attribute__((noinline)) void mul_block_dsp_fast(const int8_t *a, const int8_t *b, int8_t *out, int32_t len,
                                                         const qmul_params *p, int32_t nza2, int32_t nzb2) {
  mul_block_dsp(a, b, out, len, p, nza2, nzb2, 1);
}
static __attribute__((noinline)) void mul_block_dsp_gen(const int8_t *a, const int8_t *b, int8_t *out, int32_t len,
                                                        const qmul_params *p, int32_t nza2, int32_t nzb2) {
  mul_block_dsp(a, b, out, len, p, nza2, nzb2, 0);
}

void qmul_s8_dsp(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len, int8_t *out,
                 const qmul_params *p) {
  if (p->a_zp < -K_MUL_DSP_ZP_MAX || p->a_zp > K_MUL_DSP_ZP_MAX || p->b_zp < -K_MUL_DSP_ZP_MAX ||
      p->b_zp > K_MUL_DSP_ZP_MAX) {
    qmul_s8_ref(a, a_len, b, b_len, out, p);
    return;
  }
  const uint32_t za = (uint16_t)(0u - (uint32_t)p->a_zp), zb = (uint16_t)(0u - (uint32_t)p->b_zp);
  const int32_t nza2 = (int32_t)(za << 16 | za), nzb2 = (int32_t)(zb << 16 | zb);
  const int fast = p->out_mult >= 0 && p->out_shift <= -2;
  const size_t n = a_len > b_len ? a_len : b_len;
  const size_t blk = a_len < b_len ? a_len : b_len; /* period of the broadcast */
  if (blk == 0) return;
  for (size_t s = 0; s < n; s += blk) {
    const int32_t len = (int32_t)(n - s < blk ? n - s : blk);
    const int8_t *pa = a_len == n ? a + s : a, *pb = b_len == n ? b + s : b;
    if (fast)
      mul_block_dsp_fast(pa, pb, out + s, len, p, nza2, nzb2);
    else
      mul_block_dsp_gen(pa, pb, out + s, len, p, nza2, nzb2);
  }
}
#endif

void qmul_s8(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len, int8_t *out,
             const qmul_params *p) {
#if FW_HAVE_MVE
  qmul_s8_mve(a, a_len, b, b_len, out, p);
#elif FW_HAVE_DSP
  qmul_s8_dsp(a, a_len, b, b_len, out, p);
#else
  qmul_s8_ref(a, a_len, b, b_len, out, p);
#endif
}
