/* emk_conv2d_s8_mve: the Helium (MVE) variant of cortex_m::quantized_conv2d (conv2d_s8.c). */
#include "conv2d_s8.h"
#include "kernels_mve.h"

#if FW_HAVE_MVE
/* The scratch size, defined here on the builds that pick this variant (conv2d_s8.c says why). */
CONV2D_S8_GET_BUFFER_SIZE

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

#define K16_LOOP(FIX)                                                       \
      "mov r12, r0\n" \
      "ldr r3, [r12, #12]\n" \
      "vctp.8 r3\n" /* p0: the K bytes of a row, for the whole loop */ \
      "ldr r1, [r12, #32]\n" \
      "ldr r5, [r12, #36]\n" \
      "ldr r7, [r12, #40]\n" \
      "ldr r8, [r12, #44]\n" \
      "vpstttt\n" \
      "vldrbt.8 q0, [r1]\n" \
      "vldrbt.8 q1, [r5]\n" \
      "vldrbt.8 q2, [r7]\n" \
      "vldrbt.8 q3, [r8]\n" \
      "vldrw.32 q5, [r12, #64]\n" \
      "vldrw.32 q6, [r12, #80]\n" \
      "ldr r1, [r12, #0]\n" \
      "ldr r5, [r12, #4]\n" \
      "ldr r7, [r12, #16]\n" \
      "ldr r8, [r12, #20]\n" \
      "ldr r9, [r12, #24]\n" \
      "ldr r10, [r12, #28]\n" \
      "ldr r11, [r12, #8]\n" \
      "add r12, r12, #48\n" \
      "dls lr, r11\n" \
      "1:\n" \
      "ldrd r0, r2, [r12]\n" \
      "ldrd r4, r6, [r12, #8]\n" \
      "vpst\n" \
      "vldrbt.8 q4, [r1]\n" \
      "add r1, r3\n" \
      "vmlava.s8 r0, q4, q0\n" \
      "vmlava.s8 r2, q4, q1\n" \
      "vmlava.s8 r4, q4, q2\n" \
      "vmlava.s8 r6, q4, q3\n" \
      "vmov.32 q4[0], r0\n" \
      "vmov.32 q4[1], r2\n" \
      "vmov.32 q4[2], r4\n" \
      "vmov.32 q4[3], r6\n" \
      /* k_requantize_mve: vqrdmulh, round-half-away fix-up, rounding shift */ \
      "vqrdmulh.s32 q4, q4, q5\n" \
      FIX("q4", "q6", "q7") \
      "vrshl.s32 q4, q4, q6\n" \
      "vadd.i32 q4, q4, r8\n" \
      "vdup.32 q7, r9\n" \
      "vmax.s32 q4, q4, q7\n" \
      "vdup.32 q7, r10\n" \
      "vmin.s32 q4, q4, q7\n" \
      "vstrb.32 q4, [r5]\n" \
      "add r5, r7\n" \
      "le lr, 1b\n"
K_ASM_LOOPS(conv_k16_group, const conv_k16_args, K16_LOOP)
#undef K16_LOOP

static void conv_k16(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *mult,
                     const int32_t *shift, int8_t *out, const int32_t *beff, int neg) {
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
    (neg ? conv_k16_group_neg : conv_k16_group)(&a);
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

/* 1x1 stride-1 convolutions with 16 < K <= 64 and out_c a multiple of 4:
 * each pixel's K-byte row is loaded once into q0-q3 and every output channel
 * reads only its weights, one load and one VMLAVA per 16 bytes; the weight
 * rows are consecutive, so one pointer walks them all. When K is not a
 * multiple of 16 the last vector of each row is a predicated load of the
 * tail's T bytes (inactive lanes read as zero, nothing past the row is read)
 * and the pointers move on by T. Per group of four channels about
 * 20 + 8 * ceil(K / 16) instructions (+ 8 with a tail), all pointers in
 * registers. */
typedef struct {
  const int8_t *x;      /* 0: first pixel */
  const int8_t *w;      /* 4 */
  const int32_t *beff;  /* 8 */
  const int32_t *mult;  /* 12 */
  const int32_t *shift; /* 16 */
  int8_t *out;          /* 20 */
  int32_t groups;       /* 24: out_c / 4 */
  int32_t npix;         /* 28: >= 1; counts down as the loop runs */
  int32_t off;          /* 32 */
  int32_t tail;         /* 36: K - 16 * (ceil(K / 16) - 1), 1..16 */
  int32_t pad_[2];
  int32_t lo[4];        /* 48 */
  int32_t hi[4];        /* 64 */
  /* the im2col variants' (conv_xqi*): each pixel's row gathered as in conv_run_groups */
  int32_t kh;           /* 80: runs to gather, 0: the row is src itself */
  int32_t kwc;          /* 84: bytes per run */
  int32_t rstep;        /* 88: input bytes between runs */
  const int8_t *src;    /* 92: first pixel's first tap (or row); moves on by srcstep */
  int32_t srcstep;      /* 96 */
  int8_t *row;          /* 100: the K-byte scratch row */
} conv_xq_args;

/* One output channel's sum into accumulator A from row vector Q (q4: the weights). */
#define XQ_V(A, Q) "vldrb.8 q4, [r1], #16\n" "vmlava.s8 " A ", " Q ", q4\n"
/* The same for the row's predicated last vector (P0: its T = r11 bytes). */
#define XQ_T(A, Q) "vpst\n" "vldrbt.8 q4, [r1]\n" "add r1, r11\n" "vmlava.s8 " A ", " Q ", q4\n"
#define XQ_CH2(A) XQ_V(A, "q0") XQ_V(A, "q1")
#define XQ_CH3(A) XQ_CH2(A) XQ_V(A, "q2")
#define XQ_CH4(A) XQ_CH3(A) XQ_V(A, "q3")
#define XQ_CHT2(A) XQ_V(A, "q0") XQ_T(A, "q1")
#define XQ_CHT3(A) XQ_CH2(A) XQ_T(A, "q2")
#define XQ_CHT4(A) XQ_CH3(A) XQ_T(A, "q3")
#define XQ_LOAD2 "vldrb.8 q0, [r12], #16\n" "vldrb.8 q1, [r12], #16\n"
#define XQ_LOAD3 XQ_LOAD2 "vldrb.8 q2, [r12], #16\n"
#define XQ_LOAD4 XQ_LOAD3 "vldrb.8 q3, [r12], #16\n"
#define XQ_LOADT2 "vldrb.8 q0, [r12], #16\n" "vpst\n" "vldrbt.8 q1, [r12]\n" "add r12, r11\n"
#define XQ_LOADT3 XQ_LOAD2 "vpst\n" "vldrbt.8 q2, [r12]\n" "add r12, r11\n"
#define XQ_LOADT4 XQ_LOAD3 "vpst\n" "vldrbt.8 q3, [r12]\n" "add r12, r11\n"
#define XQ_LOOP(LOAD, CH, PIX, NEXT, FIX)                                   \
  "mov r10, r0\n"                                                           \
  "ldr r12, [r10, #0]\n"                                                    \
  "ldr r3, [r10, #20]\n"                                                    \
  "ldr r9, [r10, #32]\n"                                                    \
  "ldr r11, [r10, #36]\n"                                                   \
  "vctp.8 r11\n"                                                            \
  "vldrw.32 q7, [r10, #48]\n" /* lo, for the whole loop */               \
  "4:\n" /* pixel: its row into q0.. */                                    \
  PIX                                                                       \
  LOAD                                                                      \
  "ldr r1, [r10, #4]\n"                                                     \
  "ldr r8, [r10, #8]\n"                                                     \
  "ldr r5, [r10, #12]\n"                                                    \
  "ldr r7, [r10, #16]\n"                                                    \
  "ldr r0, [r10, #24]\n"                                                    \
  "dls lr, r0\n"                                                            \
  "1:\n" /* group of four channels */                                      \
  "ldrd r0, r2, [r8], #8\n"                                                 \
  "ldrd r4, r6, [r8], #8\n"                                                 \
  CH("r0") CH("r2") CH("r4") CH("r6")                                       \
  "vmov.32 q4[0], r0\n"                                                     \
  "vmov.32 q4[1], r2\n"                                                     \
  "vmov.32 q4[2], r4\n"                                                     \
  "vmov.32 q4[3], r6\n"                                                     \
  "vldrw.32 q5, [r5], #16\n"                                                \
  "vldrw.32 q6, [r7], #16\n"                                                \
  /* k_requantize_mve: vqrdmulh, round-half-away fix-up, rounding shift */ \
  "vqrdmulh.s32 q4, q4, q5\n"                                               \
  FIX("q4", "q6", "q5")                                                     \
  "vrshl.s32 q4, q4, q6\n"                                                  \
  "vadd.i32 q4, q4, r9\n"                                                   \
  "vmax.s32 q4, q4, q7\n"                                                   \
  "vldrw.32 q5, [r10, #64]\n"                                               \
  "vmin.s32 q4, q4, q5\n"                                                   \
  "vstrb.32 q4, [r3], #4\n"                                                 \
  "le lr, 1b\n"                                                             \
  NEXT                                                                      \
  "ldr r0, [r10, #28]\n"                                                    \
  "subs r0, #1\n"                                                           \
  "str r0, [r10, #28]\n"                                                    \
  "bne 4b\n"
/* im2col: gather the pixel's kh runs of kwc bytes from src into the row (then
 * r12), or take src itself (kh 0); the loop's tail predication leaves P0
 * alone, but it is set again to be sure. */
#define XQ_GATHER                                                           \
  "ldr r1, [r10, #92]\n"                                                    \
  "ldr r4, [r10, #80]\n"                                                    \
  "mov r12, r1\n"                                                           \
  "cbz r4, 9f\n"                                                            \
  "ldr r12, [r10, #100]\n"                                                  \
  "mov r7, r12\n"                                                           \
  "ldr r2, [r10, #84]\n"                                                    \
  "ldr r5, [r10, #88]\n"                                                    \
  "6:\n"                                                                    \
  "mov r6, r1\n"                                                            \
  "mov r8, r7\n"                                                            \
  "dlstp.8 lr, r2\n"                                                        \
  "8:\n"                                                                    \
  "vldrb.8 q0, [r6], #16\n"                                                 \
  "vstrb.8 q0, [r8], #16\n"                                                 \
  "letp lr, 8b\n"                                                           \
  "add r7, r2\n"                                                            \
  "add r1, r5\n"                                                            \
  "subs r4, #1\n"                                                           \
  "bne 6b\n"                                                                \
  "9:\n"                                                                    \
  "vctp.8 r11\n"
#define XQ_NEXT "ldr r1, [r10, #92]\n" "ldr r2, [r10, #96]\n" "add r1, r2\n" "str r1, [r10, #92]\n"
/* Each loop twice: NAME for any requantization shift, NAMEn where every shift of the call is negative. */
#define XQ_VARIANTS(name, load, ch, gather, next)                                       \
  K_ASM_LOOP(name, conv_xq_args, XQ_LOOP(load, ch, gather, next, K_FIX_ANY)) \
  K_ASM_LOOP(name##n, conv_xq_args, XQ_LOOP(load, ch, gather, next, K_FIX_NEG))
XQ_VARIANTS(conv_xq2, XQ_LOAD2, XQ_CH2, "", "")
XQ_VARIANTS(conv_xq3, XQ_LOAD3, XQ_CH3, "", "")
XQ_VARIANTS(conv_xq4, XQ_LOAD4, XQ_CH4, "", "")
XQ_VARIANTS(conv_xqt2, XQ_LOADT2, XQ_CHT2, "", "")
XQ_VARIANTS(conv_xqt3, XQ_LOADT3, XQ_CHT3, "", "")
XQ_VARIANTS(conv_xqt4, XQ_LOADT4, XQ_CHT4, "", "")
XQ_VARIANTS(conv_xqi2, XQ_LOAD2, XQ_CH2, XQ_GATHER, XQ_NEXT)
XQ_VARIANTS(conv_xqi3, XQ_LOAD3, XQ_CH3, XQ_GATHER, XQ_NEXT)
XQ_VARIANTS(conv_xqi4, XQ_LOAD4, XQ_CH4, XQ_GATHER, XQ_NEXT)
XQ_VARIANTS(conv_xqit2, XQ_LOADT2, XQ_CHT2, XQ_GATHER, XQ_NEXT)
XQ_VARIANTS(conv_xqit3, XQ_LOADT3, XQ_CHT3, XQ_GATHER, XQ_NEXT)
XQ_VARIANTS(conv_xqit4, XQ_LOADT4, XQ_CHT4, XQ_GATHER, XQ_NEXT)
#undef XQ_NEXT
#undef XQ_GATHER
#undef XQ_LOOP
#undef XQ_LOADT4
#undef XQ_LOADT3
#undef XQ_LOADT2
#undef XQ_LOAD4
#undef XQ_LOAD3
#undef XQ_LOAD2
#undef XQ_CHT4
#undef XQ_CHT3
#undef XQ_CHT2
#undef XQ_CH4
#undef XQ_CH3
#undef XQ_CH2
#undef XQ_T
#undef XQ_V

/* The variants by [im2col][K not a multiple of 16][ceil(K / 16) - 2][all shifts negative (K_FIX_NEG)]. */
typedef void conv_xq_fn(conv_xq_args *);
static conv_xq_fn *const conv_xq_fns[2][2][3][2] = {
    {{{conv_xq2, conv_xq2n}, {conv_xq3, conv_xq3n}, {conv_xq4, conv_xq4n}},
     {{conv_xqt2, conv_xqt2n}, {conv_xqt3, conv_xqt3n}, {conv_xqt4, conv_xqt4n}}},
    {{{conv_xqi2, conv_xqi2n}, {conv_xqi3, conv_xqi3n}, {conv_xqi4, conv_xqi4n}},
     {{conv_xqit2, conv_xqit2n}, {conv_xqit3, conv_xqit3n}, {conv_xqit4, conv_xqit4n}}}};
static inline conv_xq_fn *conv_xq_pick(int im2col, int32_t K, int neg) {
  return conv_xq_fns[im2col][K % 16 != 0][(K + 15) / 16 - 2][neg != 0];
}

/* 1x1 with K = 64 and out_c a multiple of 16, two pixels (A, B) at a time: every weight vector loaded
 * serves both pixels, 13 instructions per channel and pair (four weight loads, eight VMLAV(A), one
 * reload) rather than 16. A's row stays in q0-q3 and B's first three vectors in q4-q6; q7 takes the
 * weights, and B's last vector goes through q6 in turn, which is why odd channels walk their vectors
 * backwards: q6 is B's last vector after an even channel and B's third after an odd one, each time
 * the vector the next channel starts with. Per 16 channels the 32 sums go to buf (the int32 sums as the
 * reference computes them, without the folded bias), then one vector pass adds the bias and
 * requantizes, clamps and stores both pixels with the group's multipliers and shifts loaded once. */
typedef struct {
  const int8_t *x;      /* 0: pixel A's row; B's follows it; moves on by two rows per pair */
  const int8_t *w;      /* 4: first weight row */
  const int32_t *beff;  /* 8 */
  const int32_t *mult;  /* 12 */
  const int32_t *shift; /* 16 */
  int8_t *out;          /* 20: A's outputs; moves on as the loop stores */
  int32_t chunks;       /* 24: out_c / 16 */
  int32_t npairs;       /* 28: >= 1; counts down as the loop runs */
  int32_t off;          /* 32 */
  int32_t oc;           /* 36: output bytes per pixel */
  int32_t cleft;        /* 40: the loop's: chunks left */
  int32_t pad_;         /* 44 */
  int32_t lo[4];        /* 48 */
  int32_t hi[4];        /* 64 */
  int32_t buf[32];      /* 80: A's 16 sums, then B's */
} conv_xp_args;

/* Two channels (even: forward, odd: backward) of both pixels: sums r0 / r2 (even channel, A / B) and
 * r4 / r6 (odd), stored to buf at r5. */
#define XP_PAIR                                                             \
  "vldrb.8 q7, [r1]\n"                                                      \
  "vmlav.s8 r0, q0, q7\n"                                                   \
  "vmlav.s8 r2, q4, q7\n"                                                   \
  "vldrb.8 q7, [r1, #16]\n"                                                 \
  "vmlava.s8 r0, q1, q7\n"                                                  \
  "vmlava.s8 r2, q5, q7\n"                                                  \
  "vldrb.8 q7, [r1, #32]\n"                                                 \
  "vmlava.s8 r0, q2, q7\n"                                                  \
  "vmlava.s8 r2, q6, q7\n"                                                  \
  "vldrb.8 q7, [r1, #48]\n"                                                 \
  "vmlava.s8 r0, q3, q7\n"                                                  \
  "vldrb.8 q6, [r3, #48]\n" /* B's last vector */                          \
  "vmlava.s8 r2, q6, q7\n"                                                  \
  "vldrb.8 q7, [r1, #112]\n"                                                \
  "vmlav.s8 r4, q3, q7\n"                                                   \
  "vmlav.s8 r6, q6, q7\n"                                                   \
  "vldrb.8 q7, [r1, #96]\n"                                                 \
  "vmlava.s8 r4, q2, q7\n"                                                  \
  "vldrb.8 q6, [r3, #32]\n" /* B's third vector again */                   \
  "vmlava.s8 r6, q6, q7\n"                                                  \
  "vldrb.8 q7, [r1, #80]\n"                                                 \
  "vmlava.s8 r4, q1, q7\n"                                                  \
  "vmlava.s8 r6, q5, q7\n"                                                  \
  "vldrb.8 q7, [r1, #64]\n"                                                 \
  "vmlava.s8 r4, q0, q7\n"                                                  \
  "vmlava.s8 r6, q4, q7\n"                                                  \
  "add r1, #128\n"                                                          \
  "strd r2, r6, [r5, #64]\n"                                                \
  "strd r0, r4, [r5], #8\n"
/* Four channels of both pixels from buf (r5): bias, requantize (k_requantize_mve), output offset (r0),
 * clamp (q7 / q6), store at r4 (A) and r7 (B): the narrowing stores take low registers only. */
#define XP_RQ4(FIX)                                                         \
  "vldrw.32 q0, [r8], #16\n"                                                \
  "vldrw.32 q1, [r9], #16\n"                                                \
  "vldrw.32 q2, [r10], #16\n"                                               \
  "vldrw.32 q4, [r5, #64]\n"                                                \
  "vldrw.32 q3, [r5], #16\n"                                                \
  "vadd.i32 q3, q3, q0\n"                                                   \
  "vadd.i32 q4, q4, q0\n"                                                   \
  "vqrdmulh.s32 q3, q3, q1\n"                                               \
  "vqrdmulh.s32 q4, q4, q1\n"                                               \
  FIX("q3", "q2", "q5")                                                     \
  FIX("q4", "q2", "q5")                                                     \
  "vrshl.s32 q3, q3, q2\n"                                                  \
  "vrshl.s32 q4, q4, q2\n"                                                  \
  "vadd.i32 q3, q3, r0\n"                                                   \
  "vadd.i32 q4, q4, r0\n"                                                   \
  "vmax.s32 q3, q3, q7\n"                                                   \
  "vmax.s32 q4, q4, q7\n"                                                   \
  "vmin.s32 q3, q3, q6\n"                                                   \
  "vmin.s32 q4, q4, q6\n"                                                   \
  "vstrb.32 q3, [r4], #4\n"                                                 \
  "vstrb.32 q4, [r7], #4\n"
#define XP_LOOP(FIX)                                                        \
  "mov r12, r0\n"                                                           \
  "1:\n" /* pair */                                                        \
  "ldr r3, [r12, #0]\n"                                                     \
  "add r3, #64\n" /* B's row */                                            \
  "ldr r1, [r12, #4]\n"                                                     \
  "ldr r8, [r12, #8]\n"                                                     \
  "ldr r9, [r12, #12]\n"                                                    \
  "ldr r10, [r12, #16]\n"                                                   \
  "ldr r11, [r12, #20]\n"                                                   \
  "ldr r0, [r12, #24]\n"                                                    \
  "str r0, [r12, #40]\n"                                                    \
  "2:\n" /* 16 channels */                                                 \
  "vldrb.8 q0, [r3, #-64]\n"                                                \
  "vldrb.8 q1, [r3, #-48]\n"                                                \
  "vldrb.8 q2, [r3, #-32]\n"                                                \
  "vldrb.8 q3, [r3, #-16]\n"                                                \
  "vldrb.8 q4, [r3]\n"                                                      \
  "vldrb.8 q5, [r3, #16]\n"                                                 \
  "vldrb.8 q6, [r3, #32]\n"                                                 \
  "add r5, r12, #80\n"                                                      \
  "movs r7, #8\n"                                                           \
  "dls lr, r7\n"                                                            \
  "3:\n" XP_PAIR "le lr, 3b\n"                                              \
  "vldrw.32 q7, [r12, #48]\n"                                               \
  "vldrw.32 q6, [r12, #64]\n"                                               \
  "ldr r0, [r12, #32]\n"                                                    \
  "ldr r7, [r12, #36]\n"                                                    \
  "add r7, r11\n" /* B's outputs */                                        \
  "add r5, r12, #80\n"                                                      \
  "mov r4, r11\n"                                                           \
  XP_RQ4(FIX) XP_RQ4(FIX) XP_RQ4(FIX) XP_RQ4(FIX)                           \
  "mov r11, r4\n"                                                           \
  K_ASM_COUNT_DOWN("r12", 40)                                               \
  "bne 2b\n"                                                                \
  "ldr r2, [r12, #36]\n" /* r11: B's outputs, the next pair's are past them */ \
  "add r11, r2\n"                                                           \
  "str r11, [r12, #20]\n"                                                   \
  "ldr r2, [r12, #0]\n"                                                     \
  "add r2, #128\n"                                                          \
  "str r2, [r12, #0]\n"                                                     \
  K_ASM_COUNT_DOWN("r12", 28)                                               \
  "bne 1b\n"
K_ASM_LOOPS(conv_xp64, conv_xp_args, XP_LOOP)
#undef XP_LOOP
#undef XP_PAIR

/* The same for gathered rows of 32 < K <= 48 (DS-CNN's first layer: 10x4 taps of one channel), one pair
 * per call: both rows (im2col, 48 bytes apart) in q0-q2 and q3-q5, the weights' third vector a predicated
 * load of its K - 32 bytes (P0). 11 instructions per channel and pair rather than 16. The two pixels need
 * not be neighbours (outB is separate): an odd pixel out goes as A and B at once. */
typedef struct {
  const int8_t *w;      /* 0: first weight row */
  const int32_t *beff;  /* 4 */
  const int32_t *mult;  /* 8 */
  const int32_t *shift; /* 12 */
  int8_t *outa;         /* 16 */
  int8_t *outb;         /* 20: moves on as the loop stores */
  int32_t chunks;       /* 24: out_c / 16 */
  int32_t off;          /* 28 */
  int32_t k;            /* 32: 33..48 */
  int32_t cleft;        /* 36: the loop's: chunks left */
  int32_t pad_[2];      /* 40 */
  int32_t lo[4];        /* 48 */
  int32_t hi[4];        /* 64 */
  int32_t buf[32];      /* 80: A's 16 sums, then B's */
  int8_t row[96];       /* 208: A's gathered row, B's at +48 */
} conv_xr_args;

/* One channel of both pixels: sums A (pixel A) and B. */
#define XR_CH(A, B)                                                         \
  "vldrb.8 q7, [r1]\n"                                                      \
  "vmlav.s8 " A ", q0, q7\n"                                                \
  "vmlav.s8 " B ", q3, q7\n"                                                \
  "vldrb.8 q7, [r1, #16]\n"                                                 \
  "vmlava.s8 " A ", q1, q7\n"                                               \
  "vmlava.s8 " B ", q4, q7\n"                                               \
  "vpst\n"                                                                  \
  "vldrbt.8 q7, [r1, #32]\n"                                                \
  "vmlava.s8 " A ", q2, q7\n"                                               \
  "vmlava.s8 " B ", q5, q7\n"                                               \
  "add r1, r7\n"
#define XR_LOOP(FIX)                                                        \
  "mov r12, r0\n"                                                           \
  "ldr r1, [r12, #0]\n"                                                     \
  "ldr r8, [r12, #4]\n"                                                     \
  "ldr r9, [r12, #8]\n"                                                     \
  "ldr r10, [r12, #12]\n"                                                   \
  "ldr r11, [r12, #16]\n"                                                   \
  "ldr r0, [r12, #24]\n"                                                    \
  "str r0, [r12, #36]\n"                                                    \
  "ldr r0, [r12, #32]\n"                                                    \
  "subs r0, #32\n"                                                          \
  "vctp.8 r0\n" /* P0: the third vector's bytes, for the whole call */     \
  "2:\n" /* 16 channels */                                                 \
  "add r3, r12, #208\n"                                                     \
  "vldrb.8 q0, [r3]\n"                                                      \
  "vldrb.8 q1, [r3, #16]\n"                                                 \
  "vldrb.8 q2, [r3, #32]\n"                                                 \
  "vldrb.8 q3, [r3, #48]\n"                                                 \
  "vldrb.8 q4, [r3, #64]\n"                                                 \
  "vldrb.8 q5, [r3, #80]\n"                                                 \
  "ldr r7, [r12, #32]\n"                                                    \
  "add r5, r12, #80\n"                                                      \
  "movs r3, #8\n"                                                           \
  "dls lr, r3\n"                                                            \
  "3:\n" XR_CH("r0", "r2") XR_CH("r4", "r6")                                \
  "strd r2, r6, [r5, #64]\n"                                                \
  "strd r0, r4, [r5], #8\n"                                                 \
  "le lr, 3b\n"                                                             \
  "vldrw.32 q7, [r12, #48]\n"                                               \
  "vldrw.32 q6, [r12, #64]\n"                                               \
  "ldr r0, [r12, #28]\n"                                                    \
  "ldr r7, [r12, #20]\n"                                                    \
  "add r5, r12, #80\n"                                                      \
  "mov r4, r11\n"                                                           \
  XP_RQ4(FIX) XP_RQ4(FIX) XP_RQ4(FIX) XP_RQ4(FIX)                           \
  "mov r11, r4\n"                                                           \
  "str r7, [r12, #20]\n"                                                    \
  K_ASM_COUNT_DOWN("r12", 36)                                               \
  "bne 2b\n"
K_ASM_LOOPS(conv_xr48, conv_xr_args, XR_LOOP)
#undef XR_LOOP
#undef XR_CH
#undef XP_RQ4

/* The receptive fields of conv_xr, when a window spans less than 256 bytes of input (DS-CNN's first layer:
 * 10 rows of 10 one-channel pixels): a pixel's row is gathered 16 taps at a time (VLDRB gather with 8-bit
 * offsets). Windows inside the input read from their origin, unpredicated (the lanes past K read the origin
 * and meet zero weights); border windows read from their first valid tap, the taps in the padding
 * predicated off and replaced by the pad byte. Wider windows take im2col_row. */
typedef struct {
  uint8_t off[48];  /* byte offset of each tap from the window's origin (0 past K) */
  uint8_t ky[48];   /* its row within the window, ky * dil_h */
  uint8_t kx[48];   /* its column, kx * dil_w */
} conv_xr_taps;

static int conv_xr_gathers(const qconv_params *p) {
  return ((int64_t)(p->k_h - 1) * p->dil_h * p->in_w + (int64_t)(p->k_w - 1) * p->dil_w + 1) * p->in_c <= 255 &&
         p->pad_h <= 127 && p->pad_w <= 127;
}

static inline __attribute__((always_inline)) void conv_xr_row(const qconv_params *p, const conv_xr_taps *t,
                                                              const int8_t *in, int32_t b, int32_t oy, int32_t ox,
                                                              int8x16_t vpad, int8_t *dst) {
  const int32_t IH = p->in_h, IW = p->in_w, C = p->in_c, K = p->k_h * p->k_w * C;
  const int32_t iy0 = oy * p->stride_h - p->pad_h, ix0 = ox * p->stride_w - p->pad_w;
  const int8_t *img = in + (size_t)b * IH * IW * C;
  if (iy0 >= 0 && ix0 >= 0 && iy0 + (p->k_h - 1) * p->dil_h < IH && ix0 + (p->k_w - 1) * p->dil_w < IW) {
    const int8_t *org = img + ((size_t)iy0 * IW + (size_t)ix0) * C;
    for (int32_t v = 0; v < K; v += 16) vstrbq_s8(dst + v, vldrbq_gather_offset_s8(org, vldrbq_u8(t->off + v)));
    return;
  }
  /* valid rows: iy0 + ky in [0, IH), i.e. ky in [ylo, yhi]; columns likewise (the bounds fit a byte: the
   * window spans less than 256 bytes, pads are below 128) */
  const int32_t ylo = iy0 < 0 ? -iy0 : 0, xlo = ix0 < 0 ? -ix0 : 0;
  const int32_t yhi = IH - iy0 > 256 ? 255 : IH - iy0 - 1, xhi = IW - ix0 > 256 ? 255 : IW - ix0 - 1;
  const int32_t ky_lo = (ylo + p->dil_h - 1) / p->dil_h, kx_lo = (xlo + p->dil_w - 1) / p->dil_w;
  if (ky_lo * p->dil_h > yhi || kx_lo * p->dil_w > xhi || ky_lo >= p->k_h || kx_lo >= p->k_w) {
    for (int32_t v = 0; v < K; v += 16) vstrbq_s8(dst + v, vpad); /* no valid tap */
    return;
  }
  const int32_t delta = (ky_lo * p->dil_h * IW + kx_lo * p->dil_w) * C; /* the first valid tap */
  const int8_t *first = img + ((size_t)(iy0 + ky_lo * p->dil_h) * IW + (size_t)(ix0 + kx_lo * p->dil_w)) * C;
  const uint8x16_t vyhi = vdupq_n_u8((uint8_t)yhi), vxhi = vdupq_n_u8((uint8_t)xhi);
  for (int32_t v = 0; v < K; v += 16) {
    const uint8x16_t ky = vldrbq_u8(t->ky + v), kx = vldrbq_u8(t->kx + v);
    const mve_pred16_t pr = vctp8q((uint32_t)(K - v)) & vcmpcsq_n_u8(ky, (uint8_t)ylo) & vcmpcsq_u8(vyhi, ky) &
                            vcmpcsq_n_u8(kx, (uint8_t)xlo) & vcmpcsq_u8(vxhi, kx);
    const uint8x16_t o = vsubq_n_u8(vldrbq_u8(t->off + v), (uint8_t)delta);
    vstrbq_s8(dst + v, vpselq_s8(vldrbq_gather_offset_z_s8(first, o, pr), vpad, pr));
  }
}

/* Every pixel through conv_xr48, two at a time in raster order. */
static void conv_xr(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *mult,
                    const int32_t *shift, int8_t *out, const int32_t *beff, int neg) {
  conv_xr_args a __attribute__((aligned(16)));
  a.w = w, a.beff = beff, a.mult = mult, a.shift = shift, a.chunks = p->out_c / 16, a.off = p->output_offset;
  a.k = p->k_h * p->k_w * p->in_c;
  for (int j = 0; j < 4; j++) a.lo[j] = p->act_min, a.hi[j] = p->act_max;
  for (int j = 0; j < 96; j++) a.row[j] = 0; /* the bytes past K: read, times zero weights */
  conv_xr_taps t;
  const int32_t C = p->in_c, kwc = p->k_w * C;
  const int gathers = conv_xr_gathers(p);
  for (int32_t i = 0; i < 48 && gathers; i++) {
    const int32_t ky = i < a.k ? i / kwc : 0, kx = i < a.k ? i % kwc / C : 0, c = i < a.k ? i % C : 0;
    t.off[i] = (uint8_t)((ky * p->dil_h * p->in_w + kx * p->dil_w) * C + c);
    t.ky[i] = (uint8_t)(ky * p->dil_h), t.kx[i] = (uint8_t)(kx * p->dil_w);
  }
  const int8x16_t vpad = vdupq_n_s8((int8_t)-p->input_offset);
  const int32_t OH = p->out_h, OW = p->out_w, OC = p->out_c;
  int32_t b = 0, oy = 0, ox = 0; /* pixel A */
  const int32_t npix = p->batch * OH * OW;
  for (int32_t i = 0; i < npix; i += 2) {
    if (gathers) conv_xr_row(p, &t, in, b, oy, ox, vpad, a.row);
    else im2col_row(p, in, b, oy, ox, vpad, a.row);
    a.outa = out + (size_t)i * OC;
    if (++ox == OW) {
      ox = 0;
      if (++oy == OH) oy = 0, b++;
    }
    if (i + 1 < npix) { /* pixel B */
      if (gathers) conv_xr_row(p, &t, in, b, oy, ox, vpad, a.row + 48);
      else im2col_row(p, in, b, oy, ox, vpad, a.row + 48);
      a.outb = a.outa + OC;
      if (++ox == OW) {
        ox = 0;
        if (++oy == OH) oy = 0, b++;
      }
    } else { /* an odd pixel out: A twice */
      copy_s8(a.row + 48, a.row, a.k);
      a.outb = a.outa;
    }
    (neg ? conv_xr48_neg : conv_xr48)(&a);
  }
}

static void conv_xq(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *mult,
                    const int32_t *shift, int8_t *out, const int32_t *beff, int neg) {
  const int32_t K = p->in_c, nv = (K + 15) / 16;
  conv_xq_args a __attribute__((aligned(16)));
  a.x = in, a.w = w, a.beff = beff, a.mult = mult, a.shift = shift, a.out = out;
  a.groups = p->out_c / 4, a.npix = p->batch * p->out_h * p->out_w, a.off = p->output_offset;
  a.tail = K - 16 * (nv - 1);
  for (int j = 0; j < 4; j++) a.lo[j] = p->act_min, a.hi[j] = p->act_max;
  if (K == 64 && p->out_c % 16 == 0 && a.npix >= 2) {
    conv_xp_args b __attribute__((aligned(16)));
    b.x = in, b.w = w, b.beff = beff, b.mult = mult, b.shift = shift, b.out = out;
    b.chunks = p->out_c / 16, b.npairs = a.npix / 2, b.off = p->output_offset, b.oc = p->out_c;
    for (int j = 0; j < 4; j++) b.lo[j] = p->act_min, b.hi[j] = p->act_max;
    (neg ? conv_xp64_neg : conv_xp64)(&b);
    if (!(a.npix & 1)) return;
    /* the odd pixel out */
    a.x = in + (size_t)(a.npix - 1) * K, a.out = out + (size_t)(a.npix - 1) * p->out_c, a.npix = 1;
  }
  conv_xq_pick(0, K, neg)(&a);
}

/* A run of output pixels, every full group of four output channels of each,
 * in one asm loop (out_c a multiple of 4, so that each pixel's outputs follow
 * the previous pixel's). Per pixel, with kh > 0, its receptive field is first
 * gathered into the K-byte row at x: kh runs of kwc bytes from src, rstep
 * apart (windows inside the input, dil_w 1); with kh == 0 the row is src
 * itself (1x1 without padding). Per group the four weight rows are
 * consecutive K-byte rows, the sums start from the folded bias, and the result
 * is requantized, clamped and stored. About 35 + 9 * ceil(K / 16)
 * instructions per group, plus the gathering and ~20 per pixel. The fields
 * past 96 are the loop's own. */
typedef struct {
  const int8_t *x;      /* 0: the K-byte row (im2col scratch; set per pixel when kh == 0) */
  const int8_t *w;      /* 4: first weight row */
  const int32_t *beff;  /* 8 */
  const int32_t *mult;  /* 12 */
  const int32_t *shift; /* 16 */
  int8_t *out;          /* 20: the first pixel's outputs; moves on as the loop stores */
  int32_t groups;       /* 24: >= 1 */
  int32_t k;            /* 28 */
  int32_t off;          /* 32 */
  int32_t npix;         /* 36: >= 1 */
  const int8_t *src;    /* 40: first pixel's first tap (or row) */
  int32_t srcstep;      /* 44: input bytes between pixels */
  int32_t lo[4];        /* 48 */
  int32_t hi[4];        /* 64 */
  int32_t kh;           /* 80: rows to gather, 0 for none */
  int32_t kwc;          /* 84: bytes per gathered run */
  int32_t rstep;        /* 88: input bytes between runs */
  int32_t pad_;         /* 92 */
  const int8_t *wcur;   /* 96: the loop's: next group's first weight row */
  const int32_t *scur;  /* 100: next group's shifts */
  int32_t gleft;        /* 104: groups left */
} conv_run_args;

#define RUN_LOOP(FIX, SAVE_NEXT, NEXT_ROW, LOAD_NEXT) \
      "mov r10, r0\n" \
      "ldr r9, [r10, #28]\n" \
      "vldrw.32 q7, [r10, #48]\n" \
      "4:\n" /* pixel */ \
      "ldr r1, [r10, #40]\n" \
      "ldr r4, [r10, #80]\n" \
      "cbnz r4, 5f\n" \
      "str r1, [r10, #0]\n" /* the row is the input itself */ \
      "b 7f\n" \
      "5:\n" /* gather kh runs of kwc bytes from r1 into the row */ \
      "ldr r7, [r10, #0]\n" \
      "ldr r2, [r10, #84]\n" \
      "ldr r5, [r10, #88]\n" \
      "6:\n" \
      "mov r6, r1\n" \
      "mov r3, r7\n" \
      "dlstp.8 lr, r2\n" \
      "8:\n" \
      "vldrb.8 q0, [r6], #16\n" \
      "vstrb.8 q0, [r3], #16\n" \
      "letp lr, 8b\n" \
      "add r7, r2\n" \
      "add r1, r5\n" \
      "subs r4, #1\n" \
      "bne 6b\n" \
      "7:\n" /* the pixel's groups */ \
      "ldr r12, [r10, #8]\n" \
      "ldr r11, [r10, #12]\n" \
      "ldr r3, [r10, #16]\n" \
      "str r3, [r10, #100]\n" \
      "ldr r3, [r10, #24]\n" \
      "str r3, [r10, #104]\n" \
      "ldr r3, [r10, #4]\n" \
      "1:\n" \
      "add r5, r3, r9\n" \
      "add r7, r5, r9\n" \
      "add r8, r7, r9\n" \
      SAVE_NEXT \
      "ldr r1, [r10, #0]\n" \
      "ldrd r0, r2, [r12], #8\n" \
      "ldrd r4, r6, [r12], #8\n" \
      "dlstp.8 lr, r9\n" \
      "2:\n" \
      "vldrb.8 q0, [r1], #16\n" \
      "vldrb.8 q1, [r3], #16\n" \
      "vldrb.8 q2, [r5], #16\n" \
      "vmlava.s8 r0, q0, q1\n" \
      "vldrb.8 q3, [r7], #16\n" \
      "vmlava.s8 r2, q0, q2\n" \
      "vldrb.8 q1, [r8], #16\n" \
      "vmlava.s8 r4, q0, q3\n" \
      "vmlava.s8 r6, q0, q1\n" \
      "letp lr, 2b\n" \
      NEXT_ROW \
      "vmov.32 q4[0], r0\n" \
      "vmov.32 q4[1], r2\n" \
      "vmov.32 q4[2], r4\n" \
      "vmov.32 q4[3], r6\n" \
      "vldrw.32 q5, [r11], #16\n" \
      "ldr r0, [r10, #100]\n" \
      "vldrw.32 q6, [r0], #16\n" \
      "str r0, [r10, #100]\n" \
      /* k_requantize_mve: vqrdmulh, round-half-away fix-up, rounding shift */ \
      "vqrdmulh.s32 q4, q4, q5\n" \
      FIX("q4", "q6", "q5") \
      "vrshl.s32 q4, q4, q6\n" \
      "ldr r0, [r10, #32]\n" \
      "vadd.i32 q4, q4, r0\n" \
      "vmax.s32 q4, q4, q7\n" \
      "vldrw.32 q5, [r10, #64]\n" \
      "vmin.s32 q4, q4, q5\n" \
      "ldr r0, [r10, #20]\n" \
      "vstrb.32 q4, [r0], #4\n" \
      "str r0, [r10, #20]\n" \
      LOAD_NEXT \
      "ldr r0, [r10, #104]\n" \
      "subs r0, #1\n" \
      "str r0, [r10, #104]\n" \
      "bne 1b\n" \
      "ldr r1, [r10, #40]\n" /* next pixel */ \
      "ldr r2, [r10, #44]\n" \
      "add r1, r2\n" \
      "str r1, [r10, #40]\n" \
      "ldr r0, [r10, #36]\n" \
      "subs r0, #1\n" \
      "str r0, [r10, #36]\n" \
      "bne 4b\n"
/* The next group's first weight row: kept in wcur; with K a multiple of 16 it
 * is where the last row's pointer stops (no partial step), moved to r3 there. */
#define RUN_SAVE "add r1, r8, r9\n" "str r1, [r10, #96]\n"
#define RUN_LOAD "ldr r3, [r10, #96]\n"
#define RUN_NEXT16 "mov r3, r8\n"
K_ASM_LOOP(conv_run_groups, conv_run_args, RUN_LOOP(K_FIX_ANY, RUN_SAVE, "", RUN_LOAD))
K_ASM_LOOP(conv_run_groups_neg, conv_run_args, RUN_LOOP(K_FIX_NEG, RUN_SAVE, "", RUN_LOAD))
K_ASM_LOOP(conv_run_groups16, conv_run_args, RUN_LOOP(K_FIX_ANY, "", RUN_NEXT16, ""))
K_ASM_LOOP(conv_run_groups16_neg, conv_run_args, RUN_LOOP(K_FIX_NEG, "", RUN_NEXT16, ""))
#undef RUN_NEXT16
#undef RUN_LOAD
#undef RUN_SAVE
/* The variant for K and the shifts (all negative: K_FIX_NEG). */
static inline void conv_run(conv_run_args *a, int neg) {
  if (a->k % 16 == 0) (neg ? conv_run_groups16_neg : conv_run_groups16)(a);
  else (neg ? conv_run_groups_neg : conv_run_groups)(a);
}
#undef RUN_LOOP

/* The last 1-3 output channels of one pixel's K-byte row x (out_c not a multiple of 4). */
static void conv_rem(const qconv_params *p, const int8_t *x, const int8_t *w, const int32_t *mult,
                     const int32_t *shift, const int32_t *beff, int8_t *op) {
  const int32_t K = p->k_h * p->k_w * p->in_c, OC = p->out_c, OC4 = OC & ~3, rem = OC - OC4;
  const mve_pred16_t ptail = vctp32q((uint32_t)rem);
  /* weight rows of the last partial group: spare lanes repeat its first row */
  const int8_t *wt = w + (size_t)OC4 * K;
  const int8_t *wt1 = rem > 1 ? wt + K : wt, *wt2 = rem > 2 ? wt + 2 * (size_t)K : wt;
  int32x4_t r = dot4_rows(x, wt, wt1, wt2, wt, K, beff + OC4);
  r = k_requantize_mve(r, vldrwq_z_s32(mult + OC4, ptail), vldrwq_z_s32(shift + OC4, ptail));
  r = vminq_s32(vmaxq_s32(vaddq_n_s32(r, p->output_offset), vdupq_n_s32(p->act_min)), vdupq_n_s32(p->act_max));
  vstrbq_p_s32(op + OC4, r, ptail);
}

static void conv_fast(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *mult,
                      const int32_t *shift, int8_t *out, const int32_t *beff, int8_t *row, int neg) {
  const int32_t K = p->k_h * p->k_w * p->in_c, OC = p->out_c, C = p->in_c;
  const int32_t IH = p->in_h, IW = p->in_w, OH = p->out_h, OW = p->out_w, SH = p->stride_h, SW = p->stride_w;
  const int direct = conv_direct(p);
  const int8x16_t vpad = vdupq_n_s8((int8_t)-p->input_offset);
  const int32_t OC4 = OC & ~3, rem = OC - OC4;
  conv_run_args a __attribute__((aligned(16)));
  a.w = w, a.beff = beff, a.mult = mult, a.shift = shift, a.groups = OC4 / 4;
  a.k = K, a.off = p->output_offset;
  for (int j = 0; j < 4; j++) a.lo[j] = p->act_min, a.hi[j] = p->act_max;
  a.kwc = p->k_w * C, a.rstep = p->dil_h * IW * C;
  /* output columns whose windows lie inside the input horizontally: [ox_a, ox_b) */
  int32_t ox_a = 0, ox_b = OW;
  while (ox_a < ox_b && ox_a * SW - p->pad_w < 0) ox_a++;
  while (ox_b > ox_a && (ox_b - 1) * SW - p->pad_w + (p->k_w - 1) * p->dil_w >= IW) ox_b--;
  /* whole rows in one call: all pixels for direct ones, the interior run when the taps of a kernel row
   * are contiguous (dil_w 1); out_c a multiple of 4 so that the loop's stores run on from pixel to pixel */
  const int runs = !rem && OC4 && (direct || p->dil_w == 1);
  /* 16 < K <= 64 with whole groups, gathered rows: the pixel's row in registers (conv_xq) */
  const int xq = !rem && !direct && K > 16 && K <= 64;
  conv_xq_args qa __attribute__((aligned(16)));
  if (xq) {
    qa.x = row, qa.w = w, qa.beff = beff, qa.mult = mult, qa.shift = shift, qa.groups = OC4 / 4, qa.off = p->output_offset;
    qa.tail = K - 16 * ((K + 15) / 16 - 1), qa.kwc = a.kwc, qa.rstep = a.rstep, qa.row = row, qa.srcstep = SW * C;
    for (int j = 0; j < 4; j++) qa.lo[j] = p->act_min, qa.hi[j] = p->act_max;
  }
  int8_t *op = out;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < OH; oy++) {
      const int32_t iy0 = oy * SH - p->pad_h;
      const int row_in = iy0 >= 0 && iy0 + (p->k_h - 1) * p->dil_h < IH;
      for (int32_t ox = 0; ox < OW; ox++, op += OC) {
        if (runs && (direct || (row_in && ox == ox_a && ox_b > ox_a))) {
          const int32_t n = direct ? OW : ox_b - ox_a;
          a.npix = n, a.out = op, a.x = row, a.kh = direct ? 0 : p->k_h;
          a.src = in + (((size_t)b * IH + iy0) * IW + (size_t)(ox * SW - p->pad_w)) * C;
          a.srcstep = SW * C;
          if (xq) {
            qa.npix = n, qa.out = op, qa.kh = p->k_h, qa.src = a.src;
            conv_xq_pick(1, K, neg)(&qa);
          } else {
            conv_run(&a, neg);
          }
          ox += n - 1, op += (size_t)(n - 1) * OC;
          continue;
        }
        const int8_t *x = row;
        if (direct) x = in + (((size_t)b * IH + (size_t)oy * SH) * IW + (size_t)ox * SW) * C;
        else im2col_row(p, in, b, oy, ox, vpad, row);
        if (xq) {
          qa.npix = 1, qa.out = op, qa.kh = 0, qa.src = x;
          conv_xq_pick(1, K, neg)(&qa);
        } else if (OC4) {
          a.npix = 1, a.out = op, a.x = x, a.kh = 0, a.src = x, a.srcstep = 0;
          conv_run(&a, neg);
        }
        if (rem) conv_rem(p, x, w, mult, shift, beff, op);
      }
    }
}

k_status emk_conv2d_s8_mve(const qconv_params *p, const int8_t *in, const int8_t *w,
                        const int32_t *bias, const int32_t *mult, const int32_t *shift,
                        int8_t *out, void *scratch, size_t scratch_size) {
  int neg = 1; /* all shifts negative: the asm loops' shorter fix-up (K_FIX_NEG) */
  for (int32_t o = 0; o < p->out_c; o++) {
    if (!k_requant_vec_ok(mult[o], shift[o])) {
      emk_conv2d_s8_ref(p, in, w, bias, mult, shift, out);
      return K_OK;
    }
    neg &= shift[o] < 0;
  }
  if (!conv_fast_ok(p)) {
    conv_mve_general(p, in, w, bias, mult, shift, out);
    return K_OK;
  }
  if (scratch_size < emk_conv2d_s8_get_buffer_size(p) || ((uintptr_t)scratch & 3)) return K_ERR_SCRATCH;
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
  if (CONV_MVE_IS_K16(p))
    conv_k16(p, in, w, mult, shift, out, beff, neg);
  else if (CONV_MVE_IS_XQ(p))
    conv_xq(p, in, w, mult, shift, out, beff, neg);
  else if (CONV_MVE_IS_XP(p))
    conv_xr(p, in, w, mult, shift, out, beff, neg);
  else
    conv_fast(p, in, w, mult, shift, out, beff, row, neg);
  return K_OK;
}

/* The dispatcher of the builds that pick this variant (kernels.h: K_CONV_DISPATCHER). */
K_CONV_DISPATCHER(emk_conv2d_s8, emk_conv2d_s8_mve)
#endif
