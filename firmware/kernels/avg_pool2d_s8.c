/* cortex_m::quantized_avg_pool2d (and _nhwc). The reference is float32:
 * dequantize with scale = mult * 2^shift / 2^31 (double, rounded to float by
 * torch), F.avg_pool2d with count_include_pad=False (sum of the valid taps in
 * row-major order, divided by their count), quantize with rint(x / scale) + zp
 * and clamp. The same float32 operations in the same order give bit-identical
 * results (no FMA contraction). */
#pragma GCC optimize("fp-contract=off")
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "kernels_mve.h"
#include "kernels_dsp.h"

/* Scratch of the MVE path: the 256-entry float term table, for windows where
 * it pays off (taps x channels >= 256). The same size on every build. */
size_t emk_avg_pool2d_s8_get_buffer_size(const qpool_params *p) {
  return (int64_t)p->k_h * p->k_w * p->c >= 256 ? 256 * sizeof(float) : 0;
}

static float pool_scale(int32_t mult, int32_t shift) {
  return (float)((double)mult * ldexp(1.0, shift) / 2147483648.0);
}

static inline int8_t finish(float sum, int32_t count, float scale, float fzp) {
  const float avg = sum / (float)count;
  float r = rintf(avg / scale) + fzp;
  if (!(r >= -128.0f)) r = -128.0f;
  if (r > 127.0f) r = 127.0f;
  return (int8_t)r;
}

void emk_avg_pool2d_s8_ref(const qpool_params *p, const int8_t *in, int8_t *out, int32_t zp,
                     int32_t mult, int32_t shift) {
  const float scale = pool_scale(mult, shift), fzp = (float)zp;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const k_span ys = k_pool_span(oy, p->stride_h, p->pad_h, p->k_h, p->in_h);
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const k_span xs = k_pool_span(ox, p->stride_w, p->pad_w, p->k_w, p->in_w);
        const int32_t count = (ys.hi - ys.lo) * (xs.hi - xs.lo);
        for (int32_t c = 0; c < p->c; c++) {
          float sum = 0.0f;
          for (int32_t y = ys.lo; y < ys.hi; y++)
            for (int32_t x = xs.lo; x < xs.hi; x++) {
              const int8_t q = in[(((size_t)b * p->in_h + y) * p->in_w + x) * p->c + c];
              sum += ((float)q - fzp) * scale;
            }
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->c + c] =
              count > 0 ? finish(sum, count, scale, fzp) : (int8_t)k_clamp(zp, -128, 127);
        }
      }
    }
}

#if FW_HAVE_MVE_FP
/* Float32 vectors of channels, in the same tap order as the scalar code.
 * Each tap's term ((float)q - zp) * scale depends only on the byte q, so for
 * larger windows the 256 possible terms are computed once per call with
 * exactly those float operations, and each tap becomes a byte load, a gather
 * from that table and an add: the same values summed in the same order,
 * hence bit-identical. Sixteen channels per pass amortise the window walk. */

/* The two divisions per output (sum / count, then / scale) without a vector
 * divide: t = sum * (1/count * 1/scale) is within a few ulp of the
 * reference's doubly rounded quotient, and |t| <= 128 + |zp| (it is the mean
 * of q - zp), so wherever t is farther than margin = 2^-16 * (129 + |zp|)
 * (some 64 ulp) from a half-integer, rint() of both is the same integer.
 * Lanes near a rounding boundary (about one output in 2000) are redone with
 * the scalar divisions. The int8 clamp is a saturating shift up and back. */
typedef struct {
  float k, neg_margin, scale, fzp;
  int32_t count, zp, vec;
} pool_finish;

static inline void finish4_mve(const pool_finish *f, float32x4_t sum, int32_t nl, int8_t *dst) {
  const mve_pred16_t pr = vctp32q((uint32_t)nl);
  if (f->vec) {
    const float32x4_t t = vmulq_n_f32(sum, f->k);
    const float32x4_t r = vrndnq_f32(t);
    const float32x4_t a = vsubq_n_f32(vabsq_f32(vsubq_f32(t, r)), 0.5f); /* in [-0.5, 0] */
    if (vcmpgtq_m_n_f32(a, f->neg_margin, pr) == 0) {
      const int32x4_t q = vaddq_n_s32(vcvtq_s32_f32(r), f->zp);
      vstrbq_p_s32(dst, vshrq_n_s32(vqshlq_n_s32(q, 24), 24), pr);
      return;
    }
  }
  float lanes[4];
  vstrwq_f32(lanes, sum);
  for (int32_t l = 0; l < nl; l++) dst[l] = finish(lanes[l], f->count, f->scale, f->fzp);
}

/* Sixteen channels over n taps step bytes apart: per tap four byte loads,
 * four gathers from the term table and four adds, in that order per lane. In
 * asm because GCC 12 adds address copies that make the loop a third longer. */
static inline void pool_taps16(const int8_t *ip, int32_t n, int32_t step, const float *tab, float32x4_t *a0,
                               float32x4_t *a1, float32x4_t *a2, float32x4_t *a3) {
  float32x4_t s0 = *a0, s1 = *a1, s2 = *a2, s3 = *a3;
  uint32x4_t t0;
  float32x4_t t1;
  if (n <= 0) return;
  __asm volatile(
      "dls lr, %[n]\n"
      "1:\n"
      "vldrb.u32 %q[t0], [%[ip]]\n"
      "vldrw.u32 %q[t1], [%[tab], %q[t0], uxtw #2]\n"
      "vadd.f32 %q[s0], %q[s0], %q[t1]\n"
      "vldrb.u32 %q[t0], [%[ip], #4]\n"
      "vldrw.u32 %q[t1], [%[tab], %q[t0], uxtw #2]\n"
      "vadd.f32 %q[s1], %q[s1], %q[t1]\n"
      "vldrb.u32 %q[t0], [%[ip], #8]\n"
      "vldrw.u32 %q[t1], [%[tab], %q[t0], uxtw #2]\n"
      "vadd.f32 %q[s2], %q[s2], %q[t1]\n"
      "vldrb.u32 %q[t0], [%[ip], #12]\n"
      "vldrw.u32 %q[t1], [%[tab], %q[t0], uxtw #2]\n"
      "vadd.f32 %q[s3], %q[s3], %q[t1]\n"
      "add %[ip], %[step]\n"
      "le lr, 1b\n"
      : [s0] "+w"(s0), [s1] "+w"(s1), [s2] "+w"(s2), [s3] "+w"(s3), [t0] "=&w"(t0), [t1] "=&w"(t1),
        [ip] "+r"(ip)
      : [n] "r"(n), [step] "r"(step), [tab] "r"(tab)
      : "lr", "memory");
  *a0 = s0, *a1 = s1, *a2 = s2, *a3 = s3;
}

k_status emk_avg_pool2d_s8_mve(const qpool_params *p, const int8_t *in, int8_t *out, int32_t zp,
                         int32_t mult, int32_t shift, void *scratch, size_t scratch_size) {
  if (scratch_size < emk_avg_pool2d_s8_get_buffer_size(p) || ((uintptr_t)scratch & 3)) return K_ERR_SCRATCH;
  /* locals: stores through `out` may alias *p as far as the compiler knows */
  const int32_t C = p->c, IH = p->in_h, IW = p->in_w, OH = p->out_h, OW = p->out_w;
  const int32_t KH = p->k_h, KW = p->k_w, SH = p->stride_h, SW = p->stride_w;
  const int32_t PH = p->pad_h, PW = p->pad_w;
  const float scale = pool_scale(mult, shift), fzp = (float)zp;
  const float rs = 1.0f / scale;
  pool_finish f = {0.0f, -0x1p-16f * (float)(129 + (zp < 0 ? -zp : zp)), scale, fzp, 0, zp, 0};
  /* else (tiny or odd scales, zero points far outside int8) every output
     takes the scalar divisions */
  f.vec = isfinite(rs) && rs > 0.0f && zp >= -32768 && zp <= 32767;
  const float32x4_t vzp = vdupq_n_f32(fzp), vsc = vdupq_n_f32(scale);
  const size_t ystep = (size_t)IW * C;
  /* tab[u] is the term of the byte u read as int8 (u is the unsigned byte), in scratch */
  float *tab = (float *)scratch;
  const int use_tab = emk_avg_pool2d_s8_get_buffer_size(p) > 0;
  if (use_tab)
    for (int32_t u = 0; u < 256; u += 4) {
      const int32x4_t ub = vreinterpretq_s32_u32(vidupq_n_u32((uint32_t)u, 1));
      const int32x4_t q = vsubq_n_s32(veorq_s32(ub, vdupq_n_s32(0x80)), 0x80); /* sign-extend the byte */
      vstrwq_f32(tab + u, vmulq_f32(vsubq_f32(vcvtq_f32_s32(q), vzp), vsc));
    }
  int8_t *op = out;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < OH; oy++) {
      const k_span ys = k_pool_span(oy, SH, PH, KH, IH);
      for (int32_t ox = 0; ox < OW; ox++, op += C) {
        const k_span xs = k_pool_span(ox, SW, PW, KW, IW);
        const int32_t wy = ys.hi - ys.lo, wx = xs.hi - xs.lo;
        f.count = wy * wx;
        if (f.count <= 0) { /* empty window (padding only): the zero point */
          for (int32_t c = 0; c < C; c++) op[c] = (int8_t)k_clamp(zp, -128, 127);
          continue;
        }
        f.k = rs / (float)f.count;
        if (!isfinite(f.k)) f.vec = 0;
        const int8_t *base = in + (((size_t)b * IH + ys.lo) * IW + xs.lo) * C;
        int32_t c0 = 0;
        /* rows that span the input's width follow each other in memory: one run */
        const int32_t runs = (size_t)wx * C == ystep ? 1 : wy, run_len = (size_t)wx * C == ystep ? wy * wx : wx;
        for (; use_tab && c0 + 16 <= C; c0 += 16) {
          float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
          const int8_t *row = base + c0;
          for (int32_t y = 0; y < runs; y++, row += ystep) pool_taps16(row, run_len, C, tab, &s0, &s1, &s2, &s3);
          finish4_mve(&f, s0, 4, op + c0);
          finish4_mve(&f, s1, 4, op + c0 + 4);
          finish4_mve(&f, s2, 4, op + c0 + 8);
          finish4_mve(&f, s3, 4, op + c0 + 12);
        }
        for (; c0 < C; c0 += 4) {
          const int32_t nl = C - c0 < 4 ? C - c0 : 4;
          const mve_pred16_t pr = vctp32q((uint32_t)nl);
          float32x4_t sum = vdupq_n_f32(0.0f);
          const int8_t *row = base + c0;
          for (int32_t y = 0; y < wy; y++, row += ystep) {
            const int8_t *ip = row;
            for (int32_t x = 0; x < wx; x++, ip += C) {
              const float32x4_t v = vcvtq_f32_s32(vldrbq_z_s32(ip, pr));
              sum = vaddq_f32(sum, vmulq_f32(vsubq_f32(v, vzp), vsc));
            }
          }
          finish4_mve(&f, sum, nl, op + c0);
        }
      }
    }
  return K_OK;
}
#endif

#if FW_HAVE_DSP
/* Cores with the DSP extension and no MVE (Cortex-M4/M7/M33): the MVE
 * path's term table without vectors. Each tap's term ((float)q - zp) * scale
 * depends only on the byte q, so for windows with taps x channels >= 256
 * the 256 terms are computed once per call with exactly those float
 * operations (this file is compiled without FMA contraction) into scratch,
 * and each tap becomes a byte load, a table load and the same float add in
 * the same order as emk_avg_pool2d_s8_ref; four channels share the window walk.
 * The finish keeps the reference's two float divisions. For a quotient x
 * with |x| < 2^22, f = x + 1.5 * 2^23 rounds x to the nearest integer, ties
 * to even (the rounding mode rintf also uses; FPv4/5 has no VRINT and
 * newlib's rintf is a software routine), and that integer is f's bit
 * pattern minus 0x4B400000; rint(x) + zp is then exact in float for
 * |zp| < 2^22, so the reference's float clamp to [-128, 127] is SSAT on
 * the integer sum. Other quotients (and NaN) take the reference's finish. */
static inline int8_t finish_dsp(float sum, int32_t count, float scale, float fzp, int32_t zp) {
  const float x = sum / (float)count / scale;
  if (!(fabsf(x) < 4194304.0f)) return finish(sum, count, scale, fzp);
  const float f = x + 12582912.0f;
  int32_t i;
  memcpy(&i, &f, 4);
  return (int8_t)__ssat(i - 0x4B400000 + zp, 8);
}

/* One window walk over `lanes` channels from c: a float sum per channel (named s0, s1, ...), the terms read
 * from the table by byte, then finish_dsp each. Written once as a macro over the lane list (8, 4, 1), so
 * each expansion is the code as it was written out per width. */
#define AVG_DECL(i) float s##i = 0.0f;
#define AVG_SUM(i) s##i += tab[q[i]];
#define AVG_FIN(i) op[c + i] = finish_dsp(s##i, count, scale, fzp, zp);
#define AVG_LANES1(M) M(0)
#define AVG_LANES4(M) M(0) M(1) M(2) M(3)
#define AVG_LANES8(M) AVG_LANES4(M) M(4) M(5) M(6) M(7)
#define AVG_WINDOW_DSP(LANES)                               \
  {                                                         \
    LANES(AVG_DECL)                                         \
    const uint8_t *q = base + c;                            \
    for (int32_t y = 0; y < ny; y++, q += rowadj)           \
      for (int32_t x = 0; x < nx; x++, q += C) { LANES(AVG_SUM) } \
    LANES(AVG_FIN)                                          \
  }

k_status emk_avg_pool2d_s8_dsp(const qpool_params *p, const int8_t *in, int8_t *out, int32_t zp,
                         int32_t mult, int32_t shift, void *scratch, size_t scratch_size) {
  if (scratch_size < emk_avg_pool2d_s8_get_buffer_size(p) || ((uintptr_t)scratch & 3)) return K_ERR_SCRATCH;
  if ((int64_t)p->k_h * p->k_w * p->c < 256) {
    emk_avg_pool2d_s8_ref(p, in, out, zp, mult, shift);
    return K_OK;
  }
  const float scale = pool_scale(mult, shift), fzp = (float)zp;
  float *tab = (float *)scratch; /* tab[u]: the term of the byte u read as int8 */
  for (int32_t u = 0; u < 256; u++) tab[u] = ((float)(int8_t)(uint8_t)u - fzp) * scale;
  const int32_t C = p->c, C4 = C & ~3;
  const int8_t zq = (int8_t)k_clamp(zp, -128, 127);
  if (zp < -4194303 || zp > 4194303) { /* the exact-sum argument of finish_dsp needs |zp| < 2^22 */
    emk_avg_pool2d_s8_ref(p, in, out, zp, mult, shift);
    return K_OK;
  }
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const k_span ys = k_pool_span(oy, p->stride_h, p->pad_h, p->k_h, p->in_h);
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        const k_span xs = k_pool_span(ox, p->stride_w, p->pad_w, p->k_w, p->in_w);
        const int32_t nx = xs.hi - xs.lo, ny = ys.hi - ys.lo, count = ny * nx;
        int8_t *op = out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * C;
        if (count <= 0) {
          for (int32_t c = 0; c < C; c++) op[c] = zq;
          continue;
        }
        const uint8_t *base = (const uint8_t *)in + (((size_t)b * p->in_h + ys.lo) * p->in_w + xs.lo) * C;
        const int32_t rowadj = (p->in_w - nx) * C;
        int32_t c = 0;
        for (; c + 8 <= C; c += 8) AVG_WINDOW_DSP(AVG_LANES8)
        for (; c < C4; c += 4) AVG_WINDOW_DSP(AVG_LANES4)
        for (; c < C; c++) AVG_WINDOW_DSP(AVG_LANES1)
      }
    }
  return K_OK;
}
#endif
k_status emk_avg_pool2d_s8(const qpool_params *p, const int8_t *in, int8_t *out, int32_t zp, int32_t mult,
                     int32_t shift, void *scratch, size_t scratch_size) {
#if FW_HAVE_MVE_FP
  return emk_avg_pool2d_s8_mve(p, in, out, zp, mult, shift, scratch, scratch_size);
#elif FW_HAVE_DSP
  return emk_avg_pool2d_s8_dsp(p, in, out, zp, mult, shift, scratch, scratch_size);
#else
  (void)scratch, (void)scratch_size;
  emk_avg_pool2d_s8_ref(p, in, out, zp, mult, shift);
  return K_OK;
#endif
}
