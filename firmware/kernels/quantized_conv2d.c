/* cortex_m::quantized_conv2d (and _nhwc: same memory layout): NHWC input,
 * OHWI weights, per-output-channel requantization (operators.py
 * quantized_conv2d_impl, CMSIS-NN arm_convolve_s8). Padding contributes zero
 * after the input offset is added, as in F.conv2d on the offset input. */
#include "kernels.h"
#include "kernels_mve.h"
#include "kernels_dsp.h"

void qconv2d_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *mult, const int32_t *shift,
                    int8_t *out) {
  const int32_t cg = p->in_c / p->groups, og = p->out_c / p->groups;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++)
        for (int32_t o = 0; o < p->out_c; o++) {
          const int32_t g = o / og;
          uint32_t acc = bias ? (uint32_t)bias[o] : 0u; /* int32 wrap like torch */
          for (int32_t ky = 0; ky < p->k_h; ky++) {
            const int32_t iy = oy * p->stride_h - p->pad_h + ky * p->dil_h;
            if (iy < 0 || iy >= p->in_h) continue;
            for (int32_t kx = 0; kx < p->k_w; kx++) {
              const int32_t ix = ox * p->stride_w - p->pad_w + kx * p->dil_w;
              if (ix < 0 || ix >= p->in_w) continue;
              const int8_t *ip = in + (((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c + (size_t)g * cg;
              const int8_t *wp = w + (((size_t)o * p->k_h + ky) * p->k_w + kx) * cg;
              for (int32_t c = 0; c < cg; c++)
                acc += (uint32_t)((ip[c] + p->input_offset) * wp[c]);
            }
          }
          const int32_t r = k_requantize((int32_t)acc, mult[o], shift[o]);
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o] =
              (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->output_offset), p->act_min, p->act_max);
        }
}

static int conv_fast_ok(const qconv_params *p) {
  return p->groups == 1 && p->input_offset >= -127 && p->input_offset <= 128; /* pad byte representable */
}
static int conv_direct(const qconv_params *p) {
  return p->k_h == 1 && p->k_w == 1 && p->pad_h == 0 && p->pad_w == 0;
}

/* Scratch of the MVE fast path: the per-channel bias with the input-offset
 * term (out_c int32, rounded up to whole vectors; unused by the MVE path when
 * the program carries it, p->beff, but the DSP path copies it there: its
 * pixel loop runs faster so), then one im2col row unless the convolution
 * reads its rows straight from the input. The same size on every build, so
 * that a program plans the same memory for any core. */
size_t qconv2d_s8_get_buffer_size(const qconv_params *p) {
  if (!conv_fast_ok(p)) return 0;
  const size_t beff = ((size_t)p->out_c + 3) / 4 * 16;
  const size_t row = conv_direct(p) ? 0 : ((size_t)p->k_h * p->k_w * p->in_c + 15) / 16 * 16;
  return beff + row;
}

#if FW_HAVE_MVE
/* General path (grouped convs, input offsets outside the int8 pad range).
 * Four output channels at a time share each 16-byte input load (one VLDRB +
 * four VLDRB + four VMLADAVA per 64 MACs). The input offset is applied as
 * offset * sum(weights over the valid taps): full windows start from the
 * program's folded bias (p->beff), or without it from full-window sums
 * computed once per channel group and call; border pixels add the sums up on
 * the fly. With groups == 1 and dil_w == 1, each kernel row is one contiguous
 * run of (valid kx) * C bytes in both input and weights. */
static void conv_mve_general(const qconv_params *p, const int8_t *in, const int8_t *w,
                             const int32_t *bias, const int32_t *mult, const int32_t *shift,
                             int8_t *out) {
  const int32_t cg = p->in_c / p->groups, og = p->out_c / p->groups;
  const int32_t kwc = p->k_w * cg, ktot = p->k_h * kwc;
  const int merged = p->groups == 1 && p->dil_w == 1;
  const int32x4_t vlo = vdupq_n_s32(p->act_min), vhi = vdupq_n_s32(p->act_max);
  const int32x4_t voff = vdupq_n_s32(p->output_offset);
  for (int32_t o0 = 0; o0 < p->out_c; o0 += 4) {
    const int32_t nout = p->out_c - o0 < 4 ? p->out_c - o0 : 4;
    const mve_pred16_t pst = vctp32q((uint32_t)nout);
    const int8_t *wc[4];
    int32_t full_base[4], base[4], gidx[4]; /* start values of full / border windows */
    for (int j = 0; j < 4; j++) {
      const int32_t o = o0 + (j < nout ? j : 0); /* spare lanes repeat channel o0 */
      wc[j] = w + (size_t)o * ktot;
      base[j] = bias ? bias[o] : 0;
      full_base[j] = p->beff ? p->beff[o]
                             : (int32_t)((uint32_t)base[j] +
                                         (uint32_t)p->input_offset * (uint32_t)k_sum_s8_mve(wc[j], ktot));
      gidx[j] = o / og;
    }
    /* all four channels must read the same input slice to share loads */
    const int same_group = gidx[0] == gidx[1] && gidx[0] == gidx[2] && gidx[0] == gidx[3];
    const int32x4_t vm = vldrwq_z_s32(mult + o0, pst);
    const int32x4_t vs = vldrwq_z_s32(shift + o0, pst);
    for (int32_t b = 0; b < p->batch; b++)
      for (int32_t oy = 0; oy < p->out_h; oy++) {
        const int32_t iy0 = oy * p->stride_h - p->pad_h;
        for (int32_t ox = 0; ox < p->out_w; ox++) {
          const int32_t ix0 = ox * p->stride_w - p->pad_w;
          int32_t acc[4] = {0, 0, 0, 0}, ws[4] = {0, 0, 0, 0};
          int32_t kx_lo = 0, kx_hi = p->k_w;
          while (kx_lo < kx_hi && ix0 + kx_lo * p->dil_w < 0) kx_lo++;
          while (kx_hi > kx_lo && ix0 + (kx_hi - 1) * p->dil_w >= p->in_w) kx_hi--;
          int full = kx_lo == 0 && kx_hi == p->k_w;
          for (int32_t ky = 0; ky < p->k_h && full; ky++) {
            const int32_t iy = iy0 + ky * p->dil_h;
            if (iy < 0 || iy >= p->in_h) full = 0;
          }
          if (same_group) {
            const int32_t g = gidx[0];
            for (int32_t ky = 0; ky < p->k_h; ky++) {
              const int32_t iy = iy0 + ky * p->dil_h;
              if (iy < 0 || iy >= p->in_h) continue;
              const int8_t *row = in + ((size_t)b * p->in_h + iy) * p->in_w * p->in_c + (size_t)g * cg;
              const size_t wrow = (size_t)ky * kwc;
              if (merged) {
                const int8_t *xp = row + (size_t)(ix0 + kx_lo) * p->in_c;
                const size_t wo = wrow + (size_t)kx_lo * cg;
                const int32_t len = (kx_hi - kx_lo) * cg;
                if (full) k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, len, acc, ws, 0);
                else k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, len, acc, ws, 1);
              } else {
                for (int32_t kx = kx_lo; kx < kx_hi; kx++) {
                  const int8_t *xp = row + (size_t)(ix0 + kx * p->dil_w) * p->in_c;
                  const size_t wo = wrow + (size_t)kx * cg;
                  if (full) k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, cg, acc, ws, 0);
                  else k_dot4_s8_mve(xp, wc[0] + wo, wc[1] + wo, wc[2] + wo, wc[3] + wo, cg, acc, ws, 1);
                }
              }
            }
          } else {
            /* channel groups straddle a conv group boundary: one channel at a time */
            for (int j = 0; j < nout; j++) {
              int32_t a1[4] = {0, 0, 0, 0}, s1[4] = {0, 0, 0, 0};
              for (int32_t ky = 0; ky < p->k_h; ky++) {
                const int32_t iy = iy0 + ky * p->dil_h;
                if (iy < 0 || iy >= p->in_h) continue;
                const int8_t *row = in + ((size_t)b * p->in_h + iy) * p->in_w * p->in_c + (size_t)gidx[j] * cg;
                for (int32_t kx = kx_lo; kx < kx_hi; kx++) {
                  const int8_t *xp = row + (size_t)(ix0 + kx * p->dil_w) * p->in_c;
                  const int8_t *wp = wc[j] + (size_t)ky * kwc + (size_t)kx * cg;
                  k_dot4_s8_mve(xp, wp, wp, wp, wp, cg, a1, s1, 1);
                }
              }
              acc[j] = a1[0];
              ws[j] = s1[0];
            }
            full = 0;
          }
          for (int j = 0; j < 4; j++)
            acc[j] = full ? (int32_t)((uint32_t)full_base[j] + (uint32_t)acc[j])
                          : (int32_t)((uint32_t)base[j] + (uint32_t)acc[j] + (uint32_t)p->input_offset * (uint32_t)ws[j]);
          int32x4_t r = k_requantize_mve(k_vec4_s32(acc), vm, vs);
          r = vminq_s32(vmaxq_s32(vaddq_s32(r, voff), vlo), vhi);
          vstrbq_p_s32(out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o0, r, pst);
        }
      }
  }
}

/* Fast path for groups == 1, pixel by pixel: each output pixel's receptive
 * field is one row of K = k_h*k_w*C bytes (OHWI order, like a weight row):
 * the input itself for 1x1 convolutions without padding, else gathered into
 * scratch (im2col). Four output channels at a time share each 16-byte input
 * load (one VLDRB of input, four of weights, four VMLAVA per 64 MACs), and
 * their four sums are requantized as one vector. Padding taps are filled with
 * -input_offset so that (x + input_offset) is 0 there, which lets the input
 * offset be applied once per channel as input_offset * sum(all its weights),
 * folded into the bias (the program's, p->beff, read in place; else computed
 * per call into scratch). */
/* Byte copy / fill with whole vectors and one predicated tail. */
static inline void copy_s8(int8_t *dst, const int8_t *src, int32_t n) {
  for (; n >= 16; n -= 16, dst += 16, src += 16) vstrbq_s8(dst, vldrbq_s8(src));
  if (n > 0) {
    const mve_pred16_t pr = vctp8q((uint32_t)n);
    vstrbq_p_s8(dst, vldrbq_z_s8(src, pr), pr);
  }
}
static inline void fill_s8(int8_t *dst, int8x16_t v, int32_t n) {
  for (; n >= 16; n -= 16, dst += 16) vstrbq_s8(dst, v);
  if (n > 0) vstrbq_p_s8(dst, v, vctp8q((uint32_t)n));
}

/* Receptive field of output pixel (b, oy, ox) as one row of K bytes (OHWI order). */
static void im2col_row(const qconv_params *p, const int8_t *in, int32_t b, int32_t oy, int32_t ox,
                       int8x16_t vpad, int8_t *dst) {
  const int32_t C = p->in_c, kwc = p->k_w * C;
  const int32_t iy0 = oy * p->stride_h - p->pad_h, ix0 = ox * p->stride_w - p->pad_w;
  const int32_t iy_last = iy0 + (p->k_h - 1) * p->dil_h, ix_last = ix0 + (p->k_w - 1) * p->dil_w;
  const int8_t *src = in + (((size_t)b * p->in_h + iy0) * p->in_w + ix0) * C;
  const size_t ystep = (size_t)p->dil_h * p->in_w * C;
  if (p->dil_w == 1 && iy0 >= 0 && ix0 >= 0 && iy_last < p->in_h && ix_last < p->in_w) {
    /* interior pixel: each kernel row is one contiguous run */
    for (int32_t ky = 0; ky < p->k_h; ky++, dst += kwc, src += ystep) copy_s8(dst, src, kwc);
    return;
  }
  int32_t kx_lo = 0, kx_hi = p->k_w;
  while (kx_lo < kx_hi && ix0 + kx_lo * p->dil_w < 0) kx_lo++;
  while (kx_hi > kx_lo && ix0 + (kx_hi - 1) * p->dil_w >= p->in_w) kx_hi--;
  for (int32_t ky = 0; ky < p->k_h; ky++, dst += kwc, src += ystep) {
    const int32_t iy = iy0 + ky * p->dil_h;
    if (iy < 0 || iy >= p->in_h || kx_lo >= kx_hi) {
      fill_s8(dst, vpad, kwc);
      continue;
    }
    fill_s8(dst, vpad, kx_lo * C);
    if (p->dil_w == 1) {
      copy_s8(dst + kx_lo * C, src + (size_t)kx_lo * C, (kx_hi - kx_lo) * C);
    } else {
      for (int32_t kx = kx_lo; kx < kx_hi; kx++)
        copy_s8(dst + kx * C, src + (size_t)kx * p->dil_w * C, C);
    }
    fill_s8(dst + kx_hi * C, vpad, (p->k_w - kx_hi) * C);
  }
}

/* Four accumulators in one vector (lanes 0..3 = a0..a3). One lane per move:
 * QEMU 7.2 and the assemblers disagree on which lane the first register of
 * the two-lane VMOV goes to, so that form is not used. */
static inline int32x4_t pack4(int32_t a0, int32_t a1, int32_t a2, int32_t a3) {
  int32x4_t v;
  __asm("vmov.32 %q0[0], %1\n\tvmov.32 %q0[1], %2\n\tvmov.32 %q0[2], %3\n\tvmov.32 %q0[3], %4"
        : "=&w"(v) : "r"(a0), "r"(a1), "r"(a2), "r"(a3));
  return v;
}

/* init[0..3] + the dot products of the K-byte row x with the four weight
 * rows w0..w3. A tail-predicated low-overhead loop (DLSTP/LETP): lanes past
 * K are inactive, so nothing beyond the rows is accumulated. In asm because
 * GCC 12 spills the pointers of the intrinsic version; VMLAVA needs even
 * accumulator registers. */
static inline int32x4_t dot4_rows(const int8_t *x, const int8_t *w0, const int8_t *w1, const int8_t *w2,
                                  const int8_t *w3, int32_t k, const int32_t *init) {
  register int32_t a0 __asm("r0");
  register int32_t a1 __asm("r2");
  register int32_t a2 __asm("r4");
  register int32_t a3 __asm("r6");
  /* k and init go through memory to leave enough registers for the loop */
  __asm volatile(
      "ldr %[a0], %[init]\n"
      "ldr %[a1], %[k]\n"
      "dlstp.8 lr, %[a1]\n"
      "ldrd %[a2], %[a3], [%[a0], #8]\n"
      "ldrd %[a0], %[a1], [%[a0]]\n"
      "1:\n"
      "vldrb.8 q0, [%[x]], #16\n"
      "vldrb.8 q1, [%[w0]], #16\n"
      "vldrb.8 q2, [%[w1]], #16\n"
      "vmlava.s8 %[a0], q0, q1\n"
      "vldrb.8 q3, [%[w2]], #16\n"
      "vmlava.s8 %[a1], q0, q2\n"
      "vldrb.8 q1, [%[w3]], #16\n"
      "vmlava.s8 %[a2], q0, q3\n"
      "vmlava.s8 %[a3], q0, q1\n"
      "letp lr, 1b\n"
      : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [x] "+r"(x), [w0] "+r"(w0),
        [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3)
      : [k] "m"(k), [init] "m"(init)
      : "q0", "q1", "q2", "q3", "lr", "memory");
  return pack4(a0, a1, a2, a3);
}

/* 1x1 stride-1 convolutions with K = C <= 16 (MobileNet's expand and
 * project layers on few channels): the four weight rows of one group of
 * output channels stay in q0-q3, and one loop walks every pixel: a
 * predicated K-byte load, four VMLAVA, requantize, clamp, store; about 26
 * instructions per four outputs. Full groups only (stores are not
 * predicated); the caller does the last partial group. */
typedef struct {
  const int8_t *x;      /* 0: first pixel */
  int8_t *out;          /* 4: first pixel's output for this group */
  int32_t npix;         /* 8 */
  int32_t k;            /* 12: bytes per pixel (= C = K) */
  int32_t oc;           /* 16: output bytes per pixel */
  int32_t off, lo, hi;  /* 20, 24, 28 */
  const int8_t *w[4];   /* 32: the group's weight rows */
  int32_t beff[4];      /* 48 */
  int32_t mult[4];      /* 64 */
  int32_t shift[4];     /* 80 */
} conv_k16_args;

K_ASM_LOOP(conv_k16_group, const conv_k16_args) {
  __asm volatile(
      K_ASM_SAVE
      "mov r12, r0\n"
      "ldr r3, [r12, #12]\n"
      "vctp.8 r3\n" /* p0: the K bytes of a row, for the whole loop */
      "ldr r1, [r12, #32]\n"
      "ldr r5, [r12, #36]\n"
      "ldr r7, [r12, #40]\n"
      "ldr r8, [r12, #44]\n"
      "vpstttt\n"
      "vldrbt.8 q0, [r1]\n"
      "vldrbt.8 q1, [r5]\n"
      "vldrbt.8 q2, [r7]\n"
      "vldrbt.8 q3, [r8]\n"
      "vldrw.32 q5, [r12, #64]\n"
      "vldrw.32 q6, [r12, #80]\n"
      "ldr r1, [r12, #0]\n"
      "ldr r5, [r12, #4]\n"
      "ldr r7, [r12, #16]\n"
      "ldr r8, [r12, #20]\n"
      "ldr r9, [r12, #24]\n"
      "ldr r10, [r12, #28]\n"
      "ldr r11, [r12, #8]\n"
      "add r12, r12, #48\n"
      "dls lr, r11\n"
      "1:\n"
      "ldrd r0, r2, [r12]\n"
      "ldrd r4, r6, [r12, #8]\n"
      "vpst\n"
      "vldrbt.8 q4, [r1]\n"
      "add r1, r3\n"
      "vmlava.s8 r0, q4, q0\n"
      "vmlava.s8 r2, q4, q1\n"
      "vmlava.s8 r4, q4, q2\n"
      "vmlava.s8 r6, q4, q3\n"
      "vmov.32 q4[0], r0\n"
      "vmov.32 q4[1], r2\n"
      "vmov.32 q4[2], r4\n"
      "vmov.32 q4[3], r6\n"
      /* k_requantize_mve: vqrdmulh, round-half-away fix-up, rounding shift */
      "vqrdmulh.s32 q4, q4, q5\n"
      "vand q7, q4, q6\n"
      "vshr.s32 q7, q7, #31\n"
      "vqadd.s32 q4, q4, q7\n"
      "vrshl.s32 q4, q4, q6\n"
      "vadd.i32 q4, q4, r8\n"
      "vdup.32 q7, r9\n"
      "vmax.s32 q4, q4, q7\n"
      "vdup.32 q7, r10\n"
      "vmin.s32 q4, q4, q7\n"
      "vstrb.32 q4, [r5]\n"
      "add r5, r7\n"
      "le lr, 1b\n"
      K_ASM_RESTORE);
}

static void conv_k16(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *mult,
                     const int32_t *shift, int8_t *out, const int32_t *beff) {
  const int32_t K = p->in_c, OC = p->out_c, OC4 = OC & ~3;
  conv_k16_args a __attribute__((aligned(16)));
  a.x = in, a.npix = p->batch * p->out_h * p->out_w, a.k = K, a.oc = OC;
  a.off = p->output_offset, a.lo = p->act_min, a.hi = p->act_max;
  for (int32_t o0 = 0; o0 < OC4; o0 += 4) {
    a.out = out + o0;
    for (int j = 0; j < 4; j++) {
      a.w[j] = w + (size_t)(o0 + j) * K;
      a.beff[j] = beff[o0 + j], a.mult[j] = mult[o0 + j], a.shift[j] = shift[o0 + j];
    }
    conv_k16_group(&a);
  }
  if (OC4 == OC) return;
  /* the last 1-3 channels: predicated stores */
  const int32_t rem = OC - OC4;
  const mve_pred16_t ptail = vctp32q((uint32_t)rem);
  const int8_t *wt = w + (size_t)OC4 * K;
  const int8_t *wt1 = rem > 1 ? wt + K : wt, *wt2 = rem > 2 ? wt + 2 * (size_t)K : wt;
  const int32x4_t vm = vldrwq_z_s32(mult + OC4, ptail), vs = vldrwq_z_s32(shift + OC4, ptail);
  const int8_t *x = in;
  int8_t *op = out + OC4;
  for (int32_t i = 0; i < a.npix; i++, x += K, op += OC) {
    int32x4_t r = k_requantize_mve(dot4_rows(x, wt, wt1, wt2, wt, K, beff + OC4), vm, vs);
    vstrbq_p_s32(op, vminq_s32(vmaxq_s32(vaddq_n_s32(r, a.off), vdupq_n_s32(a.lo)), vdupq_n_s32(a.hi)), ptail);
  }
}

/* All full groups of four output channels of one pixel, in one asm loop:
 * per group the four weight rows are consecutive K-byte rows, the sums start
 * from the folded bias, and the result is requantized, clamped and stored.
 * About 35 + 9 * ceil(K / 16) instructions per group. The pointers in the
 * argument block advance as the loop runs. */
typedef struct {
  const int8_t *x;      /* 0: the pixel's K-byte row */
  const int8_t *w;      /* 4: the group's first weight row */
  const int32_t *beff;  /* 8 */
  const int32_t *mult;  /* 12 */
  const int32_t *shift; /* 16 */
  int8_t *out;          /* 20 */
  int32_t groups;       /* 24: >= 1 */
  int32_t k;            /* 28 */
  int32_t off;          /* 32 */
  int32_t pad_[3];
  int32_t lo[4];        /* 48 */
  int32_t hi[4];        /* 64 */
} conv_pix_args;

K_ASM_LOOP(conv_pixel_groups, conv_pix_args) {
  __asm volatile(
      K_ASM_SAVE
      "mov r10, r0\n"
      "ldr r9, [r10, #28]\n"
      "ldr r12, [r10, #8]\n"
      "ldr r11, [r10, #12]\n"
      "ldr r3, [r10, #4]\n"
      "vldrw.32 q7, [r10, #48]\n"
      "1:\n"
      "add r5, r3, r9\n"
      "add r7, r5, r9\n"
      "add r8, r7, r9\n"
      "add r1, r8, r9\n"
      "str r1, [r10, #4]\n"
      "ldr r1, [r10, #0]\n"
      "ldrd r0, r2, [r12], #8\n"
      "ldrd r4, r6, [r12], #8\n"
      "dlstp.8 lr, r9\n"
      "2:\n"
      "vldrb.8 q0, [r1], #16\n"
      "vldrb.8 q1, [r3], #16\n"
      "vldrb.8 q2, [r5], #16\n"
      "vmlava.s8 r0, q0, q1\n"
      "vldrb.8 q3, [r7], #16\n"
      "vmlava.s8 r2, q0, q2\n"
      "vldrb.8 q1, [r8], #16\n"
      "vmlava.s8 r4, q0, q3\n"
      "vmlava.s8 r6, q0, q1\n"
      "letp lr, 2b\n"
      "vmov.32 q4[0], r0\n"
      "vmov.32 q4[1], r2\n"
      "vmov.32 q4[2], r4\n"
      "vmov.32 q4[3], r6\n"
      "vldrw.32 q5, [r11], #16\n"
      "ldr r0, [r10, #16]\n"
      "vldrw.32 q6, [r0], #16\n"
      "str r0, [r10, #16]\n"
      /* k_requantize_mve: vqrdmulh, round-half-away fix-up, rounding shift */
      "vqrdmulh.s32 q4, q4, q5\n"
      "vand q5, q4, q6\n"
      "vshr.s32 q5, q5, #31\n"
      "vqadd.s32 q4, q4, q5\n"
      "vrshl.s32 q4, q4, q6\n"
      "ldr r0, [r10, #32]\n"
      "vadd.i32 q4, q4, r0\n"
      "vmax.s32 q4, q4, q7\n"
      "vldrw.32 q5, [r10, #64]\n"
      "vmin.s32 q4, q4, q5\n"
      "ldr r0, [r10, #20]\n"
      "vstrb.32 q4, [r0], #4\n"
      "str r0, [r10, #20]\n"
      "ldr r3, [r10, #4]\n"
      "ldr r0, [r10, #24]\n"
      "subs r0, #1\n"
      "str r0, [r10, #24]\n"
      "bne 1b\n"
      K_ASM_RESTORE);
}

static void conv_fast(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *mult,
                      const int32_t *shift, int8_t *out, const int32_t *beff, int8_t *row) {
  const int32_t K = p->k_h * p->k_w * p->in_c, OC = p->out_c, C = p->in_c;
  const int32_t IH = p->in_h, IW = p->in_w, OH = p->out_h, OW = p->out_w, SH = p->stride_h, SW = p->stride_w;
  const int direct = conv_direct(p);
  const int8x16_t vpad = vdupq_n_s8((int8_t)-p->input_offset);
  const int32_t OC4 = OC & ~3, rem = OC - OC4;
  const mve_pred16_t ptail = vctp32q((uint32_t)rem);
  /* weight rows of the last partial group: spare lanes repeat its first row */
  const int8_t *wt = w + (size_t)OC4 * K;
  const int8_t *wt1 = rem > 1 ? wt + K : wt, *wt2 = rem > 2 ? wt + 2 * (size_t)K : wt;
  conv_pix_args a __attribute__((aligned(16)));
  a.k = K, a.off = p->output_offset;
  for (int j = 0; j < 4; j++) a.lo[j] = p->act_min, a.hi[j] = p->act_max;
  int8_t *op = out;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < OH; oy++)
      for (int32_t ox = 0; ox < OW; ox++, op += OC) {
        const int8_t *x = row;
        if (direct) x = in + (((size_t)b * IH + (size_t)oy * SH) * IW + (size_t)ox * SW) * C;
        else im2col_row(p, in, b, oy, ox, vpad, row);
        if (OC4) {
          a.x = x, a.w = w, a.beff = beff, a.mult = mult, a.shift = shift, a.out = op, a.groups = OC4 / 4;
          conv_pixel_groups(&a);
        }
        if (rem) {
          int32x4_t r = dot4_rows(x, wt, wt1, wt2, wt, K, beff + OC4);
          r = k_requantize_mve(r, vldrwq_z_s32(mult + OC4, ptail), vldrwq_z_s32(shift + OC4, ptail));
          r = vminq_s32(vmaxq_s32(vaddq_n_s32(r, a.off), vldrwq_s32(a.lo)), vldrwq_s32(a.hi));
          vstrbq_p_s32(op + OC4, r, ptail);
        }
      }
}

k_status qconv2d_s8_mve(const qconv_params *p, const int8_t *in, const int8_t *w,
                        const int32_t *bias, const int32_t *mult, const int32_t *shift,
                        int8_t *out, void *scratch, size_t scratch_size) {
  for (int32_t o = 0; o < p->out_c; o++)
    if (!k_requant_vec_ok(mult[o], shift[o])) {
      qconv2d_s8_ref(p, in, w, bias, mult, shift, out);
      return K_OK;
    }
  if (!conv_fast_ok(p)) {
    conv_mve_general(p, in, w, bias, mult, shift, out);
    return K_OK;
  }
  if (scratch_size < qconv2d_s8_get_buffer_size(p) || ((uintptr_t)scratch & 3)) return K_ERR_SCRATCH;
  const int32_t K = p->k_h * p->k_w * p->in_c, OC = p->out_c;
  int8_t *row = (int8_t *)scratch + ((size_t)OC + 3) / 4 * 16;
  /* The start values, read in whole vectors (out_c rounded up to 4): the
   * program's folded bias (emlkit/passes/window_bias.py, padded there), or with
   * a zero offset (emlkit/passes/fold_input_offset.py) the bias itself where
   * out_c is a multiple of 4; else built here. */
  const int32_t *beff = p->beff;
  if (!beff && p->input_offset == 0 && bias && (OC & 3) == 0) beff = bias;
  if (!beff) {
    int32_t *b = (int32_t *)scratch;
    if (p->input_offset == 0)
      for (int32_t o = 0; o < OC; o++) b[o] = bias ? bias[o] : 0;
    else
      for (int32_t o = 0; o < OC; o++)
        b[o] = (int32_t)((bias ? (uint32_t)bias[o] : 0u) +
                         (uint32_t)p->input_offset * (uint32_t)k_sum_s8_mve(w + (size_t)o * K, K));
    for (int32_t o = OC; o < (OC + 3) / 4 * 4; o++) b[o] = 0;
    beff = b;
  }
  if (conv_direct(p) && p->stride_h == 1 && p->stride_w == 1 && p->in_c <= 16)
    conv_k16(p, in, w, mult, shift, out, beff);
  else
    conv_fast(p, in, w, mult, shift, out, beff, row);
  return K_OK;
}
#endif

#if FW_HAVE_DSP
/* DSP extension (Cortex-M4/M7/M33), groups == 1 with an input offset in the
 * int8 pad range, the same scratch as the MVE path: the per-channel bias with
 * input_offset * sum(weights) folded in, then one im2col row whose padding
 * taps hold -input_offset (so that they contribute nothing). Each output
 * pixel's K-byte row (the input itself for 1x1 convolutions without padding;
 * for interior pixels with dil_w == 1 the k_h input runs of k_w*C bytes, no
 * copy) is multiplied with four weight rows at a time (k_dot4_s8_dsp:
 * SXTB16 + SMLAD). Other cases run the portable code. */
static void im2col_row_dsp(const qconv_params *p, const int8_t *in, int32_t b, int32_t oy, int32_t ox,
                           int8_t pad, int8_t *dst) {
  const int32_t C = p->in_c, kwc = p->k_w * C;
  const int32_t iy0 = oy * p->stride_h - p->pad_h, ix0 = ox * p->stride_w - p->pad_w;
  int32_t kx_lo = 0, kx_hi = p->k_w;
  while (kx_lo < kx_hi && ix0 + kx_lo * p->dil_w < 0) kx_lo++;
  while (kx_hi > kx_lo && ix0 + (kx_hi - 1) * p->dil_w >= p->in_w) kx_hi--;
  for (int32_t ky = 0; ky < p->k_h; ky++, dst += kwc) {
    const int32_t iy = iy0 + ky * p->dil_h;
    if (iy < 0 || iy >= p->in_h || kx_lo >= kx_hi) {
      memset(dst, pad, (size_t)kwc);
      continue;
    }
    memset(dst, pad, (size_t)kx_lo * C);
    const int8_t *row = in + ((size_t)b * p->in_h + iy) * p->in_w * C;
    if (p->dil_w == 1) {
      memcpy(dst + kx_lo * C, row + (size_t)(ix0 + kx_lo) * C, (size_t)(kx_hi - kx_lo) * C);
    } else {
      for (int32_t kx = kx_lo; kx < kx_hi; kx++)
        memcpy(dst + kx * C, row + (size_t)(ix0 + kx * p->dil_w) * C, (size_t)C);
    }
    memset(dst + kx_hi * C, pad, (size_t)(p->k_w - kx_hi) * C);
  }
}

/* 1x1 stride-1 convolutions without padding (MobileNet's expand and project
 * layers): the pixels are consecutive K-byte rows, like the weight rows, so
 * two pixels by two output channels share each load (k_dot2x2_s8_dsp); an
 * odd last pixel takes four channels at a time, an odd last channel one.
 * Instantiated twice with a constant `fast`: when every channel has
 * mult >= 0 and shift <= -2 (k_rq_fast_ok, checked once per layer) each
 * output is requantized by k_requantize_dsp's SMLAL branch alone, without
 * the per-output range tests, and the channel pairs are the outer loop, so
 * that each pair's multipliers, rounding constants and shifts are set up
 * once for all pixels (pw_fin_fast) instead of once per output. Out of line
 * so that the loops get the registers to themselves. */
/* k_requantize_dsp_fast with hq = 2^(rs-2) and sh1 = rs-1 precomputed
 * (rs = -shift >= 2), then the output offset and the clamp. */
static inline int8_t pw_fin_fast(int32_t acc, int32_t m, int32_t hq, int32_t sh1, int32_t off, int32_t lo,
                                 int32_t hi) {
  const int64_t t = (int64_t)acc * m + (int64_t)(((uint64_t)(uint32_t)hq << 32) | (1u << 30));
  int32_t h = (int32_t)(t >> 32);
  if (h < hq) h = h - 1 + (int32_t)((uint32_t)t >> 31);
  return (int8_t)k_clamp((int32_t)((uint32_t)(h >> sh1) + (uint32_t)off), lo, hi);
}
#define PW_FIN(A, O) (fast ? k_finish_fast_s8(A, mult[O], shift[O], off, lo, hi) : k_finish_s8(A, mult[O], shift[O], off, lo, hi))
static inline __attribute__((always_inline)) void conv_dsp_pointwise_body(const qconv_params *p, const int8_t *in,
                                                                          const int8_t *w, const int32_t *mult,
                                                                          const int32_t *shift, int8_t *out,
                                                                          const int32_t *beff, const int fast) {
  const int32_t K = p->in_c, OC = p->out_c, OC2 = OC & ~1, OC4 = OC & ~3;
  const int32_t npix = p->batch * p->out_h * p->out_w;
  const int32_t off = p->output_offset, lo = p->act_min, hi = p->act_max;
  int32_t i = 0;
  if (fast) {
    const int32_t npix2 = npix & ~1;
    for (int32_t o = 0; o < OC2; o += 2) {
      const int32_t m0 = mult[o], m1 = mult[o + 1], b0 = beff[o], b1 = beff[o + 1];
      const int32_t q0 = 1 << (-shift[o] - 2), q1 = 1 << (-shift[o + 1] - 2);
      const int32_t r0 = -shift[o] - 1, r1 = -shift[o + 1] - 1;
      const int8_t *wo = w + (size_t)o * K;
      for (int32_t j = 0; j < npix2; j += 2) {
        int32_t acc[4] = {b0, b1, b0, b1};
        k_dot2x2_s8_dsp(in + (size_t)j * K, wo, K, K, acc);
        int8_t *op = out + (size_t)j * OC + o;
        const int8_t v00 = pw_fin_fast(acc[0], m0, q0, r0, off, lo, hi);
        const int8_t v01 = pw_fin_fast(acc[1], m1, q1, r1, off, lo, hi);
        const int8_t v10 = pw_fin_fast(acc[2], m0, q0, r0, off, lo, hi);
        const int8_t v11 = pw_fin_fast(acc[3], m1, q1, r1, off, lo, hi);
        op[0] = v00, op[1] = v01, op[OC] = v10, op[OC + 1] = v11;
      }
    }
    if (OC2 < OC)
      for (int32_t j = 0; j < npix2; j++) {
        int32_t acc = beff[OC2];
        k_dot1_s8_dsp(in + (size_t)j * K, w + (size_t)OC2 * K, K, &acc, 0, 0);
        out[(size_t)j * OC + OC2] = PW_FIN(acc, OC2);
      }
    i = npix2;
  }
  for (; !fast && i + 2 <= npix; i += 2) {
    const int8_t *x = in + (size_t)i * K;
    int8_t *op = out + (size_t)i * OC;
    for (int32_t o = 0; o < OC2; o += 2) {
      int32_t acc[4] = {beff[o], beff[o + 1], beff[o], beff[o + 1]};
      k_dot2x2_s8_dsp(x, w + (size_t)o * K, K, K, acc);
      op[o] = PW_FIN(acc[0], o);
      op[o + 1] = PW_FIN(acc[1], o + 1);
      op[OC + o] = PW_FIN(acc[2], o);
      op[OC + o + 1] = PW_FIN(acc[3], o + 1);
    }
    if (OC2 < OC) {
      const int32_t o = OC2;
      for (int j = 0; j < 2; j++) {
        int32_t acc = beff[o];
        k_dot1_s8_dsp(x + (size_t)j * K, w + (size_t)o * K, K, &acc, 0, 0);
        op[(size_t)j * OC + o] = PW_FIN(acc, o);
      }
    }
  }
  if (i < npix) {
    const int8_t *x = in + (size_t)i * K;
    int8_t *op = out + (size_t)i * OC;
    for (int32_t o0 = 0; o0 < OC4; o0 += 4) {
      int32_t acc[4] = {beff[o0], beff[o0 + 1], beff[o0 + 2], beff[o0 + 3]};
      k_dot4_s8_dsp(x, w + (size_t)o0 * K, K, K, acc, 0, 0);
      for (int j = 0; j < 4; j++) op[o0 + j] = PW_FIN(acc[j], o0 + j);
    }
    for (int32_t o = OC4; o < OC; o++) {
      int32_t acc = beff[o];
      k_dot1_s8_dsp(x, w + (size_t)o * K, K, &acc, 0, 0);
      op[o] = PW_FIN(acc, o);
    }
  }
}
#undef PW_FIN
static __attribute__((noinline)) void conv_dsp_pointwise_fast(const qconv_params *p, const int8_t *in,
                                                              const int8_t *w, const int32_t *mult,
                                                              const int32_t *shift, int8_t *out, const int32_t *beff) {
  conv_dsp_pointwise_body(p, in, w, mult, shift, out, beff, 1);
}
static __attribute__((noinline)) void conv_dsp_pointwise_gen(const qconv_params *p, const int8_t *in,
                                                             const int8_t *w, const int32_t *mult,
                                                             const int32_t *shift, int8_t *out, const int32_t *beff) {
  conv_dsp_pointwise_body(p, in, w, mult, shift, out, beff, 0);
}
static void conv_dsp_pointwise(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *mult,
                               const int32_t *shift, int8_t *out, const int32_t *beff) {
  if (k_rq_fast_ok(mult, shift, p->out_c))
    conv_dsp_pointwise_fast(p, in, w, mult, shift, out, beff);
  else
    conv_dsp_pointwise_gen(p, in, w, mult, shift, out, beff);
}

k_status qconv2d_s8_dsp(const qconv_params *p, const int8_t *in, const int8_t *w,
                        const int32_t *bias, const int32_t *mult, const int32_t *shift,
                        int8_t *out, void *scratch, size_t scratch_size) {
  if (!conv_fast_ok(p)) {
    qconv2d_s8_ref(p, in, w, bias, mult, shift, out);
    return K_OK;
  }
  if (scratch_size < qconv2d_s8_get_buffer_size(p) || ((uintptr_t)scratch & 3)) return K_ERR_SCRATCH;
  const int32_t C = p->in_c, K = p->k_h * p->k_w * C, kwc = p->k_w * C, OC = p->out_c;
  const int32_t OC4 = OC & ~3;
  int32_t *beff = (int32_t *)scratch;
  int8_t *row = (int8_t *)scratch + ((size_t)OC + 3) / 4 * 16;
  if (p->beff && p->input_offset) /* folded at compile time (emlkit/passes/window_bias.py) */
    for (int32_t o = 0; o < OC; o++) beff[o] = p->beff[o];
  else
    for (int32_t o = 0; o < OC; o++)
      beff[o] = (int32_t)((bias ? (uint32_t)bias[o] : 0u) +
                          (p->input_offset ? (uint32_t)p->input_offset * (uint32_t)k_sum_s8_dsp(w + (size_t)o * K, K)
                                           : 0u));
  const int32_t oo = p->output_offset, lo = p->act_min, hi = p->act_max; /* *p may alias the output */
  const int direct = conv_direct(p);
  if (direct && p->stride_h == 1 && p->stride_w == 1) {
    conv_dsp_pointwise(p, in, w, mult, shift, out, beff);
    return K_OK;
  }
  const size_t ystep = (size_t)p->dil_h * p->in_w * C;
  int8_t *op = out;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const int32_t iy0 = oy * p->stride_h - p->pad_h;
      const int rows_in = iy0 >= 0 && iy0 + (p->k_h - 1) * p->dil_h < p->in_h;
      for (int32_t ox = 0; ox < p->out_w; ox++, op += OC) {
        const int32_t ix0 = ox * p->stride_w - p->pad_w;
        /* the row as nseg runs of seg bytes, ystep apart in the input */
        const int8_t *x;
        int32_t nseg = 1, seg = K;
        size_t xstep = 0;
        if (direct) {
          x = in + (((size_t)b * p->in_h + iy0) * p->in_w + ix0) * C;
        } else if (p->dil_w == 1 && rows_in && ix0 >= 0 && ix0 + p->k_w <= p->in_w) {
          x = in + (((size_t)b * p->in_h + iy0) * p->in_w + ix0) * C;
          nseg = p->k_h, seg = kwc, xstep = ystep;
        } else {
          im2col_row_dsp(p, in, b, oy, ox, (int8_t)-p->input_offset, row);
          x = row;
        }
        for (int32_t o0 = 0; o0 < OC4; o0 += 4) {
          int32_t acc[4] = {beff[o0], beff[o0 + 1], beff[o0 + 2], beff[o0 + 3]};
          const int8_t *wr = w + (size_t)o0 * K, *xs = x;
          for (int32_t s = 0; s < nseg; s++, xs += xstep) k_dot4_s8_dsp(xs, wr + (size_t)s * seg, K, seg, acc, 0, 0);
          for (int j = 0; j < 4; j++)
            op[o0 + j] = k_finish_s8(acc[j], mult[o0 + j], shift[o0 + j], oo, lo, hi);
        }
        for (int32_t o = OC4; o < OC; o++) {
          int32_t acc = beff[o];
          const int8_t *wr = w + (size_t)o * K, *xs = x;
          for (int32_t s = 0; s < nseg; s++, xs += xstep) k_dot1_s8_dsp(xs, wr + (size_t)s * seg, seg, &acc, 0, 0);
          op[o] = k_finish_s8(acc, mult[o], shift[o], oo, lo, hi);
        }
      }
    }
  return K_OK;
}
#endif

k_status qconv2d_s8(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                    const int32_t *mult, const int32_t *shift, int8_t *out, void *scratch, size_t scratch_size) {
  K_CONV_DISPATCH(qconv2d_s8, p, in, w, bias, mult, shift, out, scratch, scratch_size);
}
