/* emk_depthwise_conv2d_s8_dsp: the DSP-extension (SIMD32) variant of
 * cortex_m::quantized_depthwise_conv2d (depthwise_conv2d_s8.c). */
#include "depthwise_conv2d_s8.h"
#include "kernels_dsp.h"

#if FW_HAVE_DSP
/* The scratch size, defined here on the builds that pick this variant (depthwise_conv2d_s8.c says why). */
DEPTHWISE_CONV2D_S8_GET_BUFFER_SIZE

/* DSP extension (Cortex-M4/M7/M33). Depth multiplier 1: four channels per
 * step; per valid tap one LDR of input and one of weights, SXTB16 splits
 * each into the even and odd channels' int16 halves (SXTAB16 adds the input
 * offset to the input halves in the same instruction: x + offset fits int16), and SMLABB / SMLATT
 * accumulate the four channels' products. Windows inside the input skip the
 * offset: their offset term is folded into a per-channel start value, the
 * program's (p->beff) or computed per call into scratch.
 * The last 1-3 channels run the portable arithmetic. A one-channel input with a depth multiplier runs as a
 * convolution (weights transposed into scratch, then emk_conv2d_s8_dsp), as on
 * MVE; other depth multipliers run the portable code. */
static void dw_dsp_valid(int32_t o, int32_t stride, int32_t pad, int32_t dil, int32_t k, int32_t n,
                         int32_t *lo, int32_t *hi) {
  const int32_t i0 = o * stride - pad;
  int32_t a = 0, b = k;
  while (a < b && i0 + a * dil < 0) a++;
  while (b > a && i0 + (b - 1) * dil >= n) b--;
  *lo = a, *hi = b;
}

/* Four channels' sums over the window's valid taps (nky rows of nkx taps;
 * after each row the pointers move on by xadj / wadj), starting from a[0..3].
 * With use_off the input offset is added to the input halves (SXTAB16);
 * without, the caller folded it into a[] (windows inside the input).
 * Inlined with a constant use_off into the two functions below, which stay
 * out of line so that their loops get the registers to themselves. */
static inline __attribute__((always_inline)) void dw_dsp_taps4(const int8_t *xp, const int8_t *wp, int32_t nky,
                                                               int32_t nkx, int32_t xstep, int32_t wstep,
                                                               int32_t xadj, int32_t wadj, int32_t a[4],
                                                               const int use_off, int32_t off2) {
  int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
  for (int32_t ky = 0; ky < nky; ky++, xp += xadj, wp += wadj)
    for (int32_t kx = 0; kx < nkx; kx++, xp += xstep, wp += wstep) {
      const int32_t vx = k_rd32(xp), vw = k_rd32(wp);
      /* border windows: the offset added by the sign extension itself (SXTAB16) */
      const int32_t xl = use_off ? k_lo16_add(vx, off2) : k_lo16(vx), xh = use_off ? k_hi16_add(vx, off2) : k_hi16(vx);
      const int32_t wl = k_lo16(vw), wh = k_hi16(vw);
      a0 = __smlabb(xl, wl, a0);
      a2 = __smlatt(xl, wl, a2);
      a1 = __smlabb(xh, wh, a1);
      a3 = __smlatt(xh, wh, a3);
    }
  a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3;
}

/* Windows inside the input with k_w == 3 (MobileNet's and DS-CNN's 3x3
 * layers): every whole group of four channels of one output pixel, the three
 * taps of a kernel row unrolled, the offset folded into beff; requantized
 * and stored here, out of line so that the loops get the registers. */
/* Requantize, offset, clamp and store four channels c..c+3 (m, sh: their
 * multipliers and shifts; oo, lo, hi: locals of the caller, since the int8
 * stores may alias the parameter block); fast: 1 k_rq_fast_ok held for the layer, 2 (3: clamped to the whole
 * int8 range, one SSAT) k_rq_mm_ok held, with each channel's SMMLAR constant and shift in rq (pairs). */
#define DW_FIN1(A, J)                                                                                    \
  op[c + (J)] = fast >= 2 ? DW_MM(A, J)                                                                  \
                : fast ? k_finish_fast_s8(A, m[J], sh[J], oo, lo, hi) : k_finish_s8(A, m[J], sh[J], oo, lo, hi)
#define DW_MM(A, J)                                                                                      \
  (fast == 3 ? (int8_t)__ssat(k_rq_mm(A, m[J], rq[2 * (J)], rq[2 * (J) + 1]), 8)                        \
             : (int8_t)k_clamp(k_rq_mm(A, m[J], rq[2 * (J)], rq[2 * (J) + 1]), lo, hi))
#define DW_FIN4(A0, A1, A2, A3) \
  do {                          \
    DW_FIN1(A0, 0);             \
    DW_FIN1(A1, 1);             \
    DW_FIN1(A2, 2);             \
    DW_FIN1(A3, 3);             \
  } while (0)

typedef struct {
  const int32_t *beff, *bias, *mult, *shift, *rq;
  int32_t c4, c, xstep, ystep, k_h, k_w;
  int32_t oo, lo, hi, off2, fast;
} dw_dsp_row3;

/* One tap of four channels in asm (the same arithmetic as dw_dsp_taps4 without the offset): X and W the
 * address operands of its input and weight words. */
#define DW_TAP_ASM(X, W)                                  \
  "ldr    %[vx], " X "\n\t"                              \
  "ldr    %[vw], " W "\n\t"                              \
  "sxtb16 %[xl], %[vx]\n\t"                              \
  "sxtb16 %[wl], %[vw]\n\t"                              \
  "sxtb16 %[vx], %[vx], ror #8\n\t"                      \
  "sxtb16 %[vw], %[vw], ror #8\n\t"                      \
  "smlabb %[a0], %[xl], %[wl], %[a0]\n\t"                \
  "smlatt %[a2], %[xl], %[wl], %[a2]\n\t"                \
  "smlabb %[a1], %[vx], %[vw], %[a1]\n\t"                \
  "smlatt %[a3], %[vx], %[vw], %[a3]\n\t"
/* A kernel row of three taps at [p], [p + C], [p + 2 C] (input and weights alike: dil_w == 1). */
#define DW_ROW3                                                     \
  DW_TAP_ASM("[%[xp]]", "[%[wp]]")                                  \
  DW_TAP_ASM("[%[xp], %[cs]]", "[%[wp], %[cs]]")                    \
  DW_TAP_ASM("[%[xp], %[cs], lsl #1]", "[%[wp], %[cs], lsl #1]")

/* Border windows: a kernel row of two or three valid taps with the input offset added by SXTAB16 (o2: the
 * offset in both halves), one asm block per row so that the block needs no row step. */
#define DW_TAP_ASM_OFF(X, W)                              \
  "ldr    %[vx], " X "\n\t"                              \
  "ldr    %[vw], " W "\n\t"                              \
  "sxtab16 %[xl], %[o2], %[vx]\n\t"                      \
  "sxtb16 %[wl], %[vw]\n\t"                              \
  "sxtab16 %[vx], %[o2], %[vx], ror #8\n\t"              \
  "sxtb16 %[vw], %[vw], ror #8\n\t"                      \
  "smlabb %[a0], %[xl], %[wl], %[a0]\n\t"                \
  "smlatt %[a2], %[xl], %[wl], %[a2]\n\t"                \
  "smlabb %[a1], %[vx], %[vw], %[a1]\n\t"                \
  "smlatt %[a3], %[vx], %[vw], %[a3]\n\t"
#define DW_ROW2_OFF DW_TAP_ASM_OFF("[%[xp]]", "[%[wp]]") DW_TAP_ASM_OFF("[%[xp], %[cs]]", "[%[wp], %[cs]]")
#define DW_ROW3_OFF DW_ROW2_OFF DW_TAP_ASM_OFF("[%[xp], %[cs], lsl #1]", "[%[wp], %[cs], lsl #1]")
#define DW_ROW_OFF_OPERANDS                                                                                    \
  : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [vx] "=&r"(vx), [vw] "=&r"(vw), [xl] "=&r"(xl), \
    [wl] "=&r"(wl)                                                                                             \
  : [xp] "r"(xp), [wp] "r"(wp), [cs] "r"(cs), [o2] "r"(off2)                                                   \
  : "memory"

static inline __attribute__((always_inline)) void dw_dsp_pixel3(const dw_dsp_row3 *g, const int8_t *x,
                                                                const int8_t *w, int8_t *op, const int fast) {
  const int32_t xstep = g->xstep, wstep = g->c, ystep = g->ystep;
  const int32_t c4 = g->c4, k_h = g->k_h, oo = g->oo, lo = g->lo, hi = g->hi;
  const int32_t *const beff = g->beff, *const mult = g->mult, *const shift = g->shift;
  for (int32_t c = 0; c < c4; c += 4) {
    int32_t a0 = beff[c], a1 = beff[c + 1], a2 = beff[c + 2], a3 = beff[c + 3];
    const int8_t *xp = x + c, *wp = w + c;
    if (k_h == 3 && xstep == wstep) {
      /* the whole 3x3 window (dil_w == 1: one step C for input and weights) in one asm block: GCC keeps
         too few of the steps in registers for the unrolled kernel rows and reloads them from the stack
         (44 instructions per row of three taps against the 30 of the taps themselves); here every
         pointer and step stays in a register (3 taps by [p], [p, C], [p, C, lsl #1]; 32 instructions
         per row) */
      int32_t vx, vw, xl, wl;
      __asm volatile(DW_ROW3 "add %[xp], %[xp], %[ys]\n\t"
                     "add %[wp], %[wp], %[cs], lsl #1\n\t"
                     "add %[wp], %[wp], %[cs]\n\t" DW_ROW3 "add %[xp], %[xp], %[ys]\n\t"
                     "add %[wp], %[wp], %[cs], lsl #1\n\t"
                     "add %[wp], %[wp], %[cs]\n\t" DW_ROW3
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [xp] "+r"(xp), [wp] "+r"(wp),
                       [vx] "=&r"(vx), [vw] "=&r"(vw), [xl] "=&r"(xl), [wl] "=&r"(wl)
                     : [cs] "r"(wstep), [ys] "r"(ystep)
                     : "memory");
    } else {
      for (int32_t ky = k_h; ky > 0; ky--, xp += ystep, wp += 3 * wstep) {
#define DW_TAP(XO, WO)                                            \
  do {                                                            \
    const int32_t vx = k_rd32(xp + (XO)), vw = k_rd32(wp + (WO)); \
    const int32_t xl = k_lo16(vx), xh = k_hi16(vx);               \
    const int32_t wl = k_lo16(vw), wh = k_hi16(vw);               \
    a0 = __smlabb(xl, wl, a0);                                    \
    a2 = __smlatt(xl, wl, a2);                                    \
    a1 = __smlabb(xh, wh, a1);                                    \
    a3 = __smlatt(xh, wh, a3);                                    \
  } while (0)
        DW_TAP(0, 0);
        DW_TAP(xstep, wstep);
        DW_TAP(2 * xstep, 2 * wstep);
#undef DW_TAP
      }
    }
    const int32_t *m = mult + c, *sh = shift + c, *rq = g->rq + 2 * c;
    (void)sh, (void)rq;
    DW_FIN4(a0, a1, a2, a3);
  }
}
static __attribute__((noinline)) void dw_dsp_pixel3_folded(const dw_dsp_row3 *g, const int8_t *x, const int8_t *w,
                                                           int8_t *op) {
  dw_dsp_pixel3(g, x, w, op, 0);
}
static __attribute__((noinline)) void dw_dsp_pixel3_folded_fast(const dw_dsp_row3 *g, const int8_t *x,
                                                                const int8_t *w, int8_t *op) {
  dw_dsp_pixel3(g, x, w, op, 1);
}
static __attribute__((noinline)) void dw_dsp_pixel3_folded_mm(const dw_dsp_row3 *g, const int8_t *x,
                                                              const int8_t *w, int8_t *op) {
  dw_dsp_pixel3(g, x, w, op, 2);
}
static __attribute__((noinline)) void dw_dsp_pixel3_folded_mm_sat8(const dw_dsp_row3 *g, const int8_t *x,
                                                                   const int8_t *w, int8_t *op) {
  dw_dsp_pixel3(g, x, w, op, 3);
}

/* Every whole group of four channels of one output pixel over its nky x nkx
 * valid taps, requantized and stored: one call per pixel (not per group),
 * the start values from beff (use_off 0: window inside the input) or from
 * the bias with the offset added per tap (use_off 1: border windows). */
static inline __attribute__((always_inline)) void dw_dsp_pixel(const dw_dsp_row3 *g, const int8_t *x,
                                                               const int8_t *w, int32_t nky, int32_t nkx,
                                                               int8_t *op, const int use_off, const int fast) {
  const int32_t xstep = g->xstep, wstep = g->c;
  const int32_t xadj = g->ystep - nkx * xstep, wadj = (g->k_w - nkx) * wstep;
  const int32_t *b = use_off ? g->bias : g->beff;
  /* locals: the int8 stores below may alias *g */
  const int32_t c4 = g->c4, off2 = g->off2, oo = g->oo, lo = g->lo, hi = g->hi;
  const int32_t *const mult = g->mult, *const shift = g->shift;
  const int32_t ystep = g->ystep; /* a local: the asm's memory clobber would reload *g */
  const int rows_asm = use_off && g->k_w == 3 && xstep == wstep && (nkx == 2 || nkx == 3);
  for (int32_t c = 0; c < c4; c += 4) {
    int32_t a[4] = {0, 0, 0, 0};
    if (b) a[0] = b[c], a[1] = b[c + 1], a[2] = b[c + 2], a[3] = b[c + 3];
    if (rows_asm) {
      /* border windows of 3-wide kernels with dil_w == 1 (input and weight taps C bytes apart): the rows
         in asm, where GCC's generic tap loop takes 16 instructions per tap (10 here) and about as many
         per row to reload its steps */
      int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], vx, vw, xl, wl;
      const int8_t *xp = x + c, *wp = w + c;
      const int32_t cs = wstep, ys = ystep;
      for (int32_t ky = nky; ky > 0; ky--, xp += ys, wp += 3 * cs) {
        if (nkx == 3)
          __asm volatile(DW_ROW3_OFF DW_ROW_OFF_OPERANDS);
        else
          __asm volatile(DW_ROW2_OFF DW_ROW_OFF_OPERANDS);
      }
      a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3;
    } else {
      dw_dsp_taps4(x + c, w + c, nky, nkx, xstep, wstep, xadj, wadj, a, use_off, off2);
    }
    const int32_t *m = mult + c, *sh = shift + c, *rq = g->rq + 2 * c;
    (void)sh, (void)rq;
    DW_FIN4(a[0], a[1], a[2], a[3]);
  }
}
/* Out-of-line forms with use_off constant, the fast requantization chosen per layer. */
#define DW_DSP_PIXEL_FN(NAME, USE_OFF)                                                                     \
  static __attribute__((noinline)) void NAME(const dw_dsp_row3 *g, const int8_t *x, const int8_t *w,       \
                                             int32_t nky, int32_t nkx, int8_t *op) {                       \
    if (g->fast >= 2)                                                                                      \
      dw_dsp_pixel(g, x, w, nky, nkx, op, USE_OFF, 2);                                                     \
    else if (g->fast)                                                                                      \
      dw_dsp_pixel(g, x, w, nky, nkx, op, USE_OFF, 1);                                                     \
    else                                                                                                   \
      dw_dsp_pixel(g, x, w, nky, nkx, op, USE_OFF, 0);                                                     \
  }
DW_DSP_PIXEL_FN(dw_dsp_pixel_folded, 0)
DW_DSP_PIXEL_FN(dw_dsp_pixel_off, 1)
#undef DW_DSP_PIXEL_FN

/* beff: per channel, the bias plus input_offset * sum(all taps' weights), the
 * start value of windows that lie inside the input (computed per call into
 * scratch, unless the program carries it); after it, room permitting (every
 * case but a program that carries both beff and the MVE blocks: no scratch),
 * k_rq_mm's constant and shift per channel. */
static void dw_dsp_dm1(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                       const int32_t *mult, const int32_t *shift, int8_t *out, int32_t *beff, size_t nscratch) {
  const int32_t C = p->in_c, C4 = C & ~3, off = p->input_offset, taps = p->k_h * p->k_w;
  /* locals: stores through int8_t pointers may alias *p */
  const int32_t oo = p->output_offset, lo = p->act_min, hi = p->act_max;
  const int32_t off2 = (int32_t)(((uint32_t)(uint16_t)off << 16) | (uint16_t)off);
  const int32_t xstep = p->dil_w * C, ystep = p->dil_h * p->in_w * C;
  if (!p->beff) /* else folded at compile time (emlkit/passes/window_bias.py) */
    for (int32_t c = 0; c < C; c++) {
      uint32_t ws = 0;
      for (int32_t t = 0; t < taps; t++) ws += (uint32_t)w[(size_t)t * C + c];
      beff[c] = (int32_t)((bias ? (uint32_t)bias[c] : 0u) + (uint32_t)off * ws);
    }
  dw_dsp_row3 g3;
  g3.beff = p->beff ? p->beff : beff, g3.mult = mult, g3.shift = shift, g3.c4 = C4, g3.c = C, g3.xstep = xstep, g3.ystep = ystep;
  g3.k_h = p->k_h, g3.k_w = p->k_w, g3.oo = oo, g3.lo = lo, g3.hi = hi, g3.bias = bias, g3.off2 = off2;
  g3.fast = k_rq_fast_ok(mult, shift, C4);
  int32_t *rq = p->beff ? beff : beff + C;
  /* every sum: a start value (beff inside the input, the bias at the borders) plus at most taps products
     of |x + offset| <= 128 + |offset| and |w| <= 128 */
  const int64_t span = (int64_t)taps * 128 * (128 + (off < 0 ? -(int64_t)off : off));
  if ((size_t)(rq - beff + 2 * C4) * 4 <= nscratch && k_rq_mm_ok(mult, shift, g3.beff, bias, C4, span)) {
    for (int32_t c = 0; c < C4; c++) rq[2 * c] = k_rq_mm_c(shift[c], oo), rq[2 * c + 1] = -shift[c];
    g3.fast = lo == -128 && hi == 127 ? 3 : 2;
  }
  g3.rq = rq;
  int8_t *op = out;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      int32_t ky_lo, ky_hi;
      dw_dsp_valid(oy, p->stride_h, p->pad_h, p->dil_h, p->k_h, p->in_h, &ky_lo, &ky_hi);
      const int32_t iy0 = oy * p->stride_h - p->pad_h + ky_lo * p->dil_h;
      for (int32_t ox = 0; ox < p->out_w; ox++, op += C) {
        int32_t kx_lo, kx_hi;
        dw_dsp_valid(ox, p->stride_w, p->pad_w, p->dil_w, p->k_w, p->in_w, &kx_lo, &kx_hi);
        const int32_t nky = ky_hi - ky_lo, nkx = kx_hi - kx_lo;
        const int full = nky == p->k_h && nkx == p->k_w;
        const int32_t ix0 = ox * p->stride_w - p->pad_w + kx_lo * p->dil_w;
        /* first valid tap, as an integer offset: no pointer outside the input is formed */
        const int8_t *x0 = in + ((size_t)b * p->in_h * p->in_w) * C +
                           (nky > 0 && nkx > 0 ? ((ptrdiff_t)iy0 * p->in_w + ix0) * C : 0);
        const int8_t *w0 = w + ((size_t)ky_lo * p->k_w + kx_lo) * C;
        const int32_t xadj = ystep - nkx * xstep, wadj = (p->k_w - nkx) * C;
        if (full && nkx == 3 && g3.fast == 3)
          dw_dsp_pixel3_folded_mm_sat8(&g3, x0, w0, op);
        else if (full && nkx == 3 && g3.fast == 2)
          dw_dsp_pixel3_folded_mm(&g3, x0, w0, op);
        else if (full && nkx == 3 && g3.fast)
          dw_dsp_pixel3_folded_fast(&g3, x0, w0, op);
        else if (full && nkx == 3)
          dw_dsp_pixel3_folded(&g3, x0, w0, op);
        else if (full)
          dw_dsp_pixel_folded(&g3, x0, w0, nky, nkx, op);
        else if (nky > 0 && nkx > 0)
          dw_dsp_pixel_off(&g3, x0, w0, nky, nkx, op);
        else
          for (int32_t c = 0; c < C4; c++) op[c] = k_finish_s8(bias ? bias[c] : 0, mult[c], shift[c], oo, lo, hi);
        for (int32_t c = C4; c < C; c++) {
          uint32_t acc = bias ? (uint32_t)bias[c] : 0u;
          const int8_t *xp = x0 + c, *wp = w0 + c;
          for (int32_t ky = 0; ky < nky; ky++, xp += xadj, wp += wadj)
            for (int32_t kx = 0; kx < nkx; kx++, xp += xstep, wp += C) acc += (uint32_t)((*xp + off) * *wp);
          op[c] = k_finish_s8((int32_t)acc, mult[c], shift[c], oo, lo, hi);
        }
      }
    }
}

k_status emk_depthwise_conv2d_s8_dsp(const qconv_params *p, const int8_t *in, const int8_t *w,
                          const int32_t *bias, const int32_t *mult, const int32_t *shift,
                          int8_t *out, void *scratch, size_t scratch_size) {
  if (scratch_size < emk_depthwise_conv2d_s8_get_buffer_size(p) || ((uintptr_t)scratch & 3)) return K_ERR_SCRATCH;
  if (dw_as_conv(p)) DW_AS_CONV(emk_conv2d_s8_dsp);
  if (p->out_c != p->in_c || p->input_offset < -32640 || p->input_offset > 32639) {
    emk_depthwise_conv2d_s8_ref(p, in, w, bias, mult, shift, out);
    return K_OK;
  }
  dw_dsp_dm1(p, in, w, bias, mult, shift, out, (int32_t *)scratch, scratch_size);
  return K_OK;
}

/* The dispatcher of the builds that pick this variant (kernels.h: K_CONV_DISPATCHER). */
K_CONV_DISPATCHER(emk_depthwise_conv2d_s8, emk_depthwise_conv2d_s8_dsp)
#endif
