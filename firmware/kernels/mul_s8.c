/* cortex_m::quantized_mul: (a - za) * (b - zb) requantized to the output
 * scale and clamped to int8 (operators.py quantized_mul_impl). */
#include "kernels.h"
#include "kernels_mve.h"
#include "kernels_dsp.h"

void emk_mul_s8_ref(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qmul_params *p) {
  const size_t n = a_len > b_len ? a_len : b_len;
  for (size_t i = 0; i < n; i++) {
    const int32_t prod = (int32_t)((uint32_t)(a[i % a_len] - p->a_zp) * (uint32_t)(b[i % b_len] - p->b_zp));
    const int32_t r = k_requantize(prod, p->out_mult, p->out_shift);
    out[i] = (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->out_zp), -128, 127);
  }
}

#if FW_HAVE_MVE
static inline int32x4_t mul_vec(int32x4_t va, int32x4_t vb, const void *pv) {
  const qmul_params *p = (const qmul_params *)pv;
  return k_requantize_mve_n(vmulq_s32(va, vb), p->out_mult, p->out_shift);
}
static void mul_block_mve(const int8_t *a, const int8_t *b, int8_t *out, int32_t len, const void *pv) {
  const qmul_params *p = (const qmul_params *)pv;
  k_elem_block_mve(a, b, out, len, p->a_zp, p->b_zp, p->out_zp, -128, 127, mul_vec, p);
}

void emk_mul_s8_mve(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qmul_params *p) {
  if (!k_requant_vec_ok(p->out_mult, p->out_shift)) {
    emk_mul_s8_ref(a, a_len, b, b_len, out, p);
    return;
  }
  k_bcast_blocks(a, a_len, b, b_len, out, mul_block_mve, p);
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

void emk_mul_s8_dsp(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len, int8_t *out,
                 const qmul_params *p) {
  if (p->a_zp < -K_MUL_DSP_ZP_MAX || p->a_zp > K_MUL_DSP_ZP_MAX || p->b_zp < -K_MUL_DSP_ZP_MAX ||
      p->b_zp > K_MUL_DSP_ZP_MAX) {
    emk_mul_s8_ref(a, a_len, b, b_len, out, p);
    return;
  }
  const int32_t nza2 = k_neg_zp2(p->a_zp), nzb2 = k_neg_zp2(p->b_zp);
  const int fast = p->out_mult >= 0 && p->out_shift <= -2;
  /* Its own loop over the broadcast blocks rather than k_bcast_blocks: with
     nza2 and nzb2 as arguments instead of in a context struct, GCC 12 keeps
     one more value in registers in the four-element loop (139,400 against
     141,400 instructions for 8192 elements on the Cortex-M4). */
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

void emk_mul_s8(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len, int8_t *out,
             const qmul_params *p) {
  K_BEST(emk_mul_s8)(a, a_len, b, b_len, out, p);
}
