/* cortex_m::quantized_add: both operands are rescaled to a common 2^20-scaled
 * fixed point, summed, requantized to the output scale and clamped
 * (operators.py quantized_add_impl, CMSIS-NN arm_elementwise_add_s8). */
#include "kernels.h"
#include "kernels_mve.h"

#define K_ADD_LEFT_SHIFT 20 /* SHIFT_INT8 in the reference */

static inline int8_t add_one(int32_t a, int32_t b, const qadd_params *p) {
  const int32_t fa = k_requantize((int32_t)((uint32_t)(a - p->a_zp) << K_ADD_LEFT_SHIFT), p->a_mult, p->a_shift);
  const int32_t fb = k_requantize((int32_t)((uint32_t)(b - p->b_zp) << K_ADD_LEFT_SHIFT), p->b_mult, p->b_shift);
  const int32_t sum = (int32_t)((uint32_t)fa + (uint32_t)fb); /* int32 add wraps in torch */
  const int32_t r = k_requantize(sum, p->out_mult, p->out_shift);
  return (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->out_zp), p->act_min, p->act_max);
}

void qadd_s8_ref(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qadd_params *p) {
  const size_t n = a_len > b_len ? a_len : b_len;
  for (size_t i = 0; i < n; i++) out[i] = add_one(a[i % a_len], b[i % b_len], p);
}

#if FW_HAVE_MVE
/* Four lanes of int32 per step (VLDRB.S32 widens on load, VSTRB.32 narrows
 * on store), tail-predicated. Requant parameters outside the vector helper's
 * range fall back to the scalar code so results stay identical. */
static void add_block_mve(const int8_t *a, const int8_t *b, int8_t *out, int32_t len,
                          const qadd_params *p) {
  const int32x4_t za = vdupq_n_s32(p->a_zp), zb = vdupq_n_s32(p->b_zp);
  const int32x4_t zo = vdupq_n_s32(p->out_zp);
  const int32x4_t lo = vdupq_n_s32(p->act_min), hi = vdupq_n_s32(p->act_max);
  for (int32_t i = 0; i < len; i += 4) {
    const mve_pred16_t pr = vctp32q((uint32_t)(len - i));
    int32x4_t va = vldrbq_z_s32(a + i, pr);
    int32x4_t vb = vldrbq_z_s32(b + i, pr);
    va = vshlq_n_s32(vsubq_s32(va, za), K_ADD_LEFT_SHIFT);
    vb = vshlq_n_s32(vsubq_s32(vb, zb), K_ADD_LEFT_SHIFT);
    va = k_requantize_mve_n(va, p->a_mult, p->a_shift);
    vb = k_requantize_mve_n(vb, p->b_mult, p->b_shift);
    int32x4_t r = k_requantize_mve_n(vaddq_s32(va, vb), p->out_mult, p->out_shift);
    r = vminq_s32(vmaxq_s32(vaddq_s32(r, zo), lo), hi);
    vstrbq_p_s32(out + i, r, pr);
  }
}

void qadd_s8_mve(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qadd_params *p) {
  if (!k_requant_vec_ok(p->a_mult, p->a_shift) || !k_requant_vec_ok(p->b_mult, p->b_shift) ||
      !k_requant_vec_ok(p->out_mult, p->out_shift)) {
    qadd_s8_ref(a, a_len, b, b_len, out, p);
    return;
  }
  const size_t n = a_len > b_len ? a_len : b_len;
  const size_t blk = a_len < b_len ? a_len : b_len; /* period of the broadcast */
  for (size_t s = 0; s < n; s += blk)
    add_block_mve(a_len == n ? a + s : a, b_len == n ? b + s : b, out + s, (int32_t)blk, p);
}
#endif

void qadd_s8(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len, int8_t *out,
             const qadd_params *p) {
#if FW_HAVE_MVE
  qadd_s8_mve(a, a_len, b, b_len, out, p);
#else
  qadd_s8_ref(a, a_len, b, b_len, out, p);
#endif
}
