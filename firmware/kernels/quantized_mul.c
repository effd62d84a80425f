/* cortex_m::quantized_mul: (a - za) * (b - zb) requantized to the output
 * scale and clamped to int8 (operators.py quantized_mul_impl). */
#include "kernels.h"
#include "kernels_mve.h"

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

void qmul_s8(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len, int8_t *out,
             const qmul_params *p) {
#if FW_HAVE_MVE
  qmul_s8_mve(a, a_len, b, b_len, out, p);
#else
  qmul_s8_ref(a, a_len, b, b_len, out, p);
#endif
}
