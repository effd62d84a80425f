/* cortex_m::quantized_activation: a 256-entry int8 table built ahead of time
 * (sigmoid, tanh, silu, ...): out[i] = lut[in[i] + 128]. The reference only
 * accepts int8 input and an int8 table of 256 entries. */
#include "kernels.h"
#include "kernels_mve.h"

void qlut_s8_ref(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]) {
  for (size_t i = 0; i < n; i++) out[i] = lut[(uint8_t)(in[i] + 128)];
}

#if FW_HAVE_MVE
/* 16 lookups per gather load. Short inputs use the offsets x ^ 0x80
 * (x + 128 as an unsigned byte). Longer ones first copy the table rotated by
 * 128 bytes onto the stack, so that the raw input byte is the offset, and
 * run a tail-predicated loop of load, gather, store (in asm: GCC 12 adds
 * index arithmetic around the intrinsics and does not use DLSTP). */
void qlut_s8_mve(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]) {
  if (n >= 128 && n <= 0x7fffffffu) {
    int8_t rot[256] __attribute__((aligned(16)));
    for (int i = 0; i < 128; i += 16) {
      vstrbq_s8(rot + i, vldrbq_s8(lut + 128 + i));
      vstrbq_s8(rot + 128 + i, vldrbq_s8(lut + i));
    }
    const int8_t *tab = rot;
    __asm volatile(
        "dlstp.8 lr, %[n]\n"
        "1:\n"
        "vldrb.u8 q0, [%[x]], #16\n"
        "vldrb.u8 q1, [%[t], q0]\n"
        "vstrb.8 q1, [%[y]], #16\n"
        "letp lr, 1b\n"
        : [x] "+r"(in), [y] "+r"(out)
        : [n] "r"((uint32_t)n), [t] "r"(tab)
        : "q0", "q1", "lr", "memory");
    return;
  }
  const uint8x16_t bias = vdupq_n_u8(0x80);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const uint8x16_t idx = veorq_u8(vldrbq_u8((const uint8_t *)in + i), bias);
    vstrbq_s8(out + i, vldrbq_gather_offset_s8(lut, idx));
  }
  if (i < n) {
    const mve_pred16_t pr = vctp8q((uint32_t)(n - i));
    const uint8x16_t idx = veorq_u8(vldrbq_z_u8((const uint8_t *)in + i, pr), bias);
    vstrbq_p_s8(out + i, vldrbq_gather_offset_z_s8(lut, idx, pr), pr);
  }
}
#endif

void qlut_s8(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]) {
#if FW_HAVE_MVE
  qlut_s8_mve(in, out, n, lut);
#else
  qlut_s8_ref(in, out, n, lut);
#endif
}
