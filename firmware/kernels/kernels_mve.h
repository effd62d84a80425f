/* Helium helpers shared by the *_mve kernels (internal header). */
#ifndef FW_KERNELS_MVE_H
#define FW_KERNELS_MVE_H

#include "kernels.h"

#if FW_HAVE_MVE
#include <arm_mve.h>

/* A hand-scheduled MVE loop: a naked function `name` taking its argument block in r0, whose body is the asm
 * text given (string literals). The frame is written here once: entry and exit save and restore what AAPCS
 * says a callee keeps (r4-r11, lr, d8-d15). `a` is only read by the asm. */
#define K_ASM_SAVE "push {r4-r11, lr}\n" "vpush {d8-d15}\n"
#define K_ASM_RESTORE "vpop {d8-d15}\n" "pop {r4-r11, pc}\n"
/* A naked loop's counter kept in its argument block: word OFS (bytes) of BASE minus one, the flags set for the
 * loop's closing bne (r2 is scratch there). */
#define K_ASM_COUNT_DOWN(BASE, OFS) "ldr r2, [" BASE ", #" #OFS "]\n" "subs r2, #1\n" "str r2, [" BASE ", #" #OFS "]\n"

#define K_ASM_LOOP(name, args_t, ...)                                                \
  __attribute__((naked, noinline)) static void name(args_t *a __attribute__((unused))) { \
    __asm volatile(K_ASM_SAVE __VA_ARGS__ K_ASM_RESTORE);                            \
  }
/* Both fix-up variants of a loop whose asm text LOOP(FIX) takes the fix-up (K_FIX_ANY, K_FIX_NEG below): `name`
 * for any shift, `name##_neg` for calls whose shifts are all negative. */
#define K_ASM_LOOPS(name, args_t, LOOP) \
  K_ASM_LOOP(name, args_t, LOOP(K_FIX_ANY)) \
  K_ASM_LOOP(name##_neg, args_t, LOOP(K_FIX_NEG))

/* Vector twin of k_requantize for lanes with 0 <= mult and -31 <= shift <= 0
 * (the only case the callers send here; others take the scalar path).
 * VQRDMULH computes (a*b + 2^30) >> 31 exactly like the reference (it only
 * saturates for INT32_MIN*INT32_MIN, excluded by mult >= 0). The reference's
 * divide rounds half away from zero while VRSHL rounds half up, so negative
 * lanes are first nudged down by one; `x & neg_shift` has its sign bit set
 * exactly when x < 0 and the shift is non-zero. */
static inline int32x4_t k_requantize_mve(int32x4_t x, int32x4_t mult, int32x4_t neg_shift) {
  x = vqrdmulhq_s32(x, mult);
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(x, neg_shift), 31);
  x = vqaddq_s32(x, fixup);
  return vrshlq_s32(x, neg_shift);
}

/* The fix-up above as asm text for the hand-written loops: FIX(Q, S, T) nudges
 * the VQRDMULH result in register Q for the shifts in register S (T: a
 * scratch register, neither of them). K_FIX_ANY is the three instructions above.
 * K_FIX_NEG, for calls whose shifts are all negative, is x + (x >> 31): the
 * sign test no longer needs the shift, and the plain add cannot wrap, since
 * VQRDMULH with mult >= 0 never returns INT32_MIN (its least result is
 * INT32_MIN + 1, for INT32_MIN * INT32_MAX). */
#define K_FIX_ANY(Q, S, T) "vand " T ", " Q ", " S "\n" "vshr.s32 " T ", " T ", #31\n" "vqadd.s32 " Q ", " Q ", " T "\n"
#define K_FIX_NEG(Q, S, T) "vshr.s32 " T ", " Q ", #31\n" "vadd.i32 " Q ", " Q ", " T "\n"

/* Same with one multiplier/shift for all lanes. */
static inline int32x4_t k_requantize_mve_n(int32x4_t x, int32_t mult, int32_t neg_shift) {
  x = vqrdmulhq_n_s32(x, mult);
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(x, vdupq_n_s32(neg_shift)), 31);
  x = vqaddq_s32(x, fixup);
  return vrshlq_n_s32(x, neg_shift);
}

/* Whether (mult, shift) can use the vector requantization above. */
static inline int k_requant_vec_ok(int32_t mult, int32_t shift) {
  return mult >= 0 && shift <= 0 && shift >= -31;
}

/* k_requant_vec_ok for every one of n channels, four per step: K_RQ_OK when all pass, plus K_RQ_NEG when
 * every shift is negative (the asm loops' K_FIX_NEG). Flags rather than an out-parameter: a local whose
 * address is taken costs the callers' asm a register. */
#define K_RQ_OK 1
#define K_RQ_NEG 2
static __attribute__((noinline, unused)) int k_requant_vec_flags(const int32_t *mult, const int32_t *shift, int32_t n) {
  mve_pred16_t bad = 0, nonneg = 0;
  for (int32_t i = 0; i < n; i += 4) {
    const mve_pred16_t pr = vctp32q((uint32_t)(n - i));
    const int32x4_t m = vldrwq_z_s32(mult + i, pr), s = vldrwq_z_s32(shift + i, pr);
    bad |= vcmpltq_m_n_s32(m, 0, pr) | vcmpgtq_m_n_s32(s, 0, pr) | vcmpltq_m_n_s32(s, -31, pr);
    nonneg |= vcmpgeq_m_n_s32(s, 0, pr);
  }
  return (bad == 0 ? K_RQ_OK : 0) | (nonneg == 0 ? K_RQ_NEG : 0);
}

/* One block of an int8 elementwise op, four int32 lanes per step (VLDRB.S32
 * widens on load, VSTRB.32 narrows on store), tail-predicated: out = clamp(
 * op(a - za, b - zb, p) + zo, lo, hi). Inlined with a constant `op`, which
 * is inlined in turn. */
typedef int32x4_t k_elem_op_mve(int32x4_t a, int32x4_t b, const void *p);
static inline __attribute__((always_inline)) void k_elem_block_mve(const int8_t *a, const int8_t *b, int8_t *out,
                                                                   int32_t len, int32_t za, int32_t zb, int32_t zo,
                                                                   int32_t lo, int32_t hi, k_elem_op_mve *op,
                                                                   const void *p) {
  const int32x4_t vza = vdupq_n_s32(za), vzb = vdupq_n_s32(zb), vzo = vdupq_n_s32(zo);
  const int32x4_t vlo = vdupq_n_s32(lo), vhi = vdupq_n_s32(hi);
  for (int32_t i = 0; i < len; i += 4) {
    const mve_pred16_t pr = vctp32q((uint32_t)(len - i));
    const int32x4_t va = vsubq_s32(vldrbq_z_s32(a + i, pr), vza);
    const int32x4_t vb = vsubq_s32(vldrbq_z_s32(b + i, pr), vzb);
    const int32x4_t r = op(va, vb, p);
    vstrbq_p_s32(out + i, vminq_s32(vmaxq_s32(vaddq_s32(r, vzo), vlo), vhi), pr);
  }
}
#endif

#endif

#if FW_HAVE_MVE
#ifndef FW_KERNELS_MVE_DOT
#define FW_KERNELS_MVE_DOT
/* One 16-byte step of k_dot4_s8_mve (the full steps and the predicated
 * tail): a[j] += x . v[j], with want_wsum s[j] += sum(v[j]). Inlined into
 * locals, so it costs nothing over writing the step out twice. */
static inline __attribute__((always_inline)) void k_dot4_step_mve(int8x16_t vx, int8x16_t v0, int8x16_t v1,
                                                                  int8x16_t v2, int8x16_t v3, int32_t a[4],
                                                                  int32_t s[4], const int want_wsum) {
  a[0] = vmladavaq_s8(a[0], vx, v0);
  a[1] = vmladavaq_s8(a[1], vx, v1);
  a[2] = vmladavaq_s8(a[2], vx, v2);
  a[3] = vmladavaq_s8(a[3], vx, v3);
  if (want_wsum) {
    s[0] = vaddvaq_s8(s[0], v0);
    s[1] = vaddvaq_s8(s[1], v1);
    s[2] = vaddvaq_s8(s[2], v2);
    s[3] = vaddvaq_s8(s[3], v3);
  }
}

/* Four int8 dot products of one `x` run against four weight runs of `len`
 * bytes, 16 MACs per VMLADAVA; tail loads are zero-predicated so the sums
 * need no predication. With want_wsum the weight sums are accumulated too
 * (for the input-offset term of partial windows). Inlined with a constant
 * want_wsum so both variants are branch-free. */
static inline __attribute__((always_inline)) void k_dot4_s8_mve(
    const int8_t *x, const int8_t *w0, const int8_t *w1, const int8_t *w2, const int8_t *w3,
    int32_t len, int32_t acc[4], int32_t wsum[4], const int want_wsum) {
  int32_t a[4] = {acc[0], acc[1], acc[2], acc[3]};
  int32_t s[4] = {0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 16 <= len; i += 16)
    k_dot4_step_mve(vldrbq_s8(x + i), vldrbq_s8(w0 + i), vldrbq_s8(w1 + i), vldrbq_s8(w2 + i), vldrbq_s8(w3 + i),
                    a, s, want_wsum);
  if (i < len) {
    const mve_pred16_t pr = vctp8q((uint32_t)(len - i));
    k_dot4_step_mve(vldrbq_z_s8(x + i, pr), vldrbq_z_s8(w0 + i, pr), vldrbq_z_s8(w1 + i, pr),
                    vldrbq_z_s8(w2 + i, pr), vldrbq_z_s8(w3 + i, pr), a, s, want_wsum);
  }
  acc[0] = a[0]; acc[1] = a[1]; acc[2] = a[2]; acc[3] = a[3];
  if (want_wsum) {
    wsum[0] += s[0]; wsum[1] += s[1]; wsum[2] += s[2]; wsum[3] += s[3];
  }
}

/* Sum of `len` int8 values. */
static inline int32_t k_sum_s8_mve(const int8_t *x, int32_t len) {
  int32_t s = 0, i = 0;
  for (; i + 16 <= len; i += 16) s = vaddvaq_s8(s, vldrbq_s8(x + i));
  if (i < len) s = vaddvaq_s8(s, vldrbq_z_s8(x + i, vctp8q((uint32_t)(len - i))));
  return s;
}

/* int32 lanes from four scalars. */
static inline int32x4_t k_vec4_s32(const int32_t v[4]) {
  int32x4_t r = vdupq_n_s32(v[0]);
  r = vsetq_lane_s32(v[1], r, 1);
  r = vsetq_lane_s32(v[2], r, 2);
  return vsetq_lane_s32(v[3], r, 3);
}
#endif
#endif
