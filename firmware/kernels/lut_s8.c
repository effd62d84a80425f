/* cortex_m::quantized_activation: a 256-entry int8 table built ahead of time
 * (sigmoid, tanh, silu, ...): out[i] = lut[in[i] + 128]. The reference only
 * accepts int8 input and an int8 table of 256 entries. */
#include "kernels.h"
#include "kernels_mve.h"
#include "kernels_dsp.h"

void emk_lut_s8_ref(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]) {
  for (size_t i = 0; i < n; i++) out[i] = lut[(uint8_t)(in[i] + 128)];
}

#if FW_HAVE_MVE
/* 16 lookups per gather load. Short inputs use the offsets x ^ 0x80
 * (x + 128 as an unsigned byte). Longer ones first copy the table rotated by
 * 128 bytes onto the stack, so that the raw input byte is the offset, and
 * run a tail-predicated loop of load, gather, store (in asm: GCC 12 adds
 * index arithmetic around the intrinsics and does not use DLSTP). */
void emk_lut_s8_mve(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]) {
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

#if FW_HAVE_DSP
/* Cores with the DSP extension and no MVE have no gather: SIMD32 splits
 * words into lanes but cannot index memory by them, so each element costs a
 * byte load, a table load and a byte store at best. Extracting bytes from a
 * word load (SXTB with rotation) costs one instruction per byte like LDRSB,
 * and packing four results for one STR costs as much as four STRB, so this
 * variant is the three-instruction form unrolled by eight (one pointer
 * update, compare and branch per eight elements; the portable loop spends
 * five to six per element). The signed input byte indexes the table from
 * its middle entry: lut + 128 + x is lut[x + 128]. */
void emk_lut_s8_dsp(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]) {
  const uint8_t *t = (const uint8_t *)lut + 128;
  const int8_t *end8 = in + (n & ~(size_t)7), *end = in + n;
  while (in != end8) {
    const int32_t x0 = in[0], x1 = in[1], x2 = in[2], x3 = in[3], x4 = in[4], x5 = in[5], x6 = in[6], x7 = in[7];
    out[0] = (int8_t)t[x0], out[1] = (int8_t)t[x1], out[2] = (int8_t)t[x2], out[3] = (int8_t)t[x3];
    out[4] = (int8_t)t[x4], out[5] = (int8_t)t[x5], out[6] = (int8_t)t[x6], out[7] = (int8_t)t[x7];
    in += 8, out += 8;
  }
  while (in != end) *out++ = (int8_t)t[*in++];
}
#endif

void emk_lut_s8(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]) {
  K_BEST(emk_lut_s8)(in, out, n, lut);
}
