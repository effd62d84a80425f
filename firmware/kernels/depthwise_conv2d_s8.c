/* cortex_m::quantized_depthwise_conv2d (and _nhwc): NHWC input, 1HWO weights
 * [k_h][k_w][out_c]; output channel o reads input channel o / depth_multiplier
 * (operators.py: F.conv2d with groups = in_c; CMSIS-NN arm_depthwise_conv_s8).
 *
 * The family is split by variant: depthwise_conv2d_s8_ref.c (portable C), depthwise_conv2d_s8_mve.c
 * (Helium), depthwise_conv2d_s8_dsp.c (DSP extension); what they share is depthwise_conv2d_s8.h. The
 * dispatcher emk_depthwise_conv2d_s8 and emk_depthwise_conv2d_s8_get_buffer_size are defined in the file of
 * the variant the build picks (K_BEST in kernels.h; this file for the builds without MVE or DSP): there GCC
 * compiles them together with that variant as when the family was one file (it inlines the variant into the
 * dispatcher, or the scratch size into the variant, as before), so the code and the instruction counts stay
 * the same. The variants are named here so that `emlkit export`, which follows the identifiers a file
 * names, copies each of their files. */
#include "depthwise_conv2d_s8.h"

k_conv_ref_fn emk_depthwise_conv2d_s8_ref;
k_conv_fn emk_depthwise_conv2d_s8_mve, emk_depthwise_conv2d_s8_dsp;
/* One-input-channel layers run as convolutions (the scratch size included): that family too. */
k_conv_fn emk_conv2d_s8;

/* In place with a lead (every build). At stride 1, dilation 1, depth multiplier 1 and an output of the input's
 * H x W x C, output pixel q (raster order) reads input pixels q - L + ky * W + kx only, L = pad_h * W + pad_w:
 * none before q - L. With the output starting D = L * C + k * C bytes (k >= 0) before the input, output pixel q
 * channel c lies on input pixel q - L - k channel c. Every variant writes a channel of an output pixel after
 * it has read that channel over the whole window, and takes the pixels in raster order (the pair of windows
 * of the portable kernel writes pixel q + 1 channel c before it reads channel c + 1 of both windows; the MVE
 * interior runs take one 16-channel group over a row's pixels, then the next group): what a write reaches,
 * input pixel q - L - k at a channel already read for every window that still needs that pixel, is never read
 * again. The MVE kernel's border-column runs, which write pixels of later rows before the rows above them are
 * read, are not taken when the output overlaps the input: its border columns then go row by row, in raster
 * order (dw_edge_cols in depthwise_conv2d_s8_mve.c). A whole number of
 * pixels of lead keeps channel c on channel c: a lead with a part pixel would put a group's writes on channels
 * the next group still reads. */
int64_t emk_depthwise_conv2d_s8_in_place_lead(const qconv_params *p, uint32_t *step) {
  *step = p->in_c > 0 ? (uint32_t)p->in_c : 1u;
  if (p->in_c <= 0 || p->out_c != p->in_c || p->stride_h != 1 || p->stride_w != 1 || p->dil_h != 1 ||
      p->dil_w != 1 || p->out_h != p->in_h || p->out_w != p->in_w || p->pad_h < 0 || p->pad_w < 0)
    return -1;
  return ((int64_t)p->pad_h * p->in_w + p->pad_w) * p->in_c;
}

/* The builds without MVE or DSP. */
#if !FW_HAVE_MVE && !FW_HAVE_DSP
#include "kernels_dsp.h" /* the plain-C requantization helpers */

DEPTHWISE_CONV2D_S8_GET_BUFFER_SIZE

/* Portable fast path (Cortex-M0+/M3, the host), depth multiplier 1: per output pixel, four channels at a
 * time over the window's valid taps (the tap's four input and four weight bytes at fixed offsets from two
 * pointers), the accumulators in registers. Windows inside the input start from bias + input_offset *
 * sum(weights) (the program's p->beff, else computed per call into scratch) and add plain products; border
 * windows start from the bias and add the offset per tap. Sums modulo 2^32, as the reference's. Outputs
 * are requantized by the 32-bit form when every channel allows it (checked once per layer). */
typedef struct {
  const int32_t *start, *mult, *shift;
  int32_t C, xstep, ystep, kw, oo, lo, hi, off, fast;
} dw_c_ctx;

/* One output pixel: x and w at its first valid tap, nky x nkx valid taps; start: per-channel start values;
 * off: the input offset added per tap (0 for windows inside the input, whose start values hold it); fast: the
 * 32-bit requantization applies to every channel (a constant in each out-of-line copy below). */
static inline __attribute__((always_inline)) void dw_c_pixel_body(const dw_c_ctx *g, const int8_t *x, const int8_t *w,
                                                                 int32_t nky, int32_t nkx, const int32_t *start,
                                                                 int32_t off, int8_t *op, const int fast) {
  /* locals: the int8 stores below may alias *g */
  const int32_t C = g->C, xstep = g->xstep, xadj = g->ystep - nkx * xstep, wadj = (g->kw - nkx) * C;
  const int32_t oo = g->oo, lo = g->lo, hi = g->hi, ystep = g->ystep;
  const int32_t *const mult = g->mult, *const shift = g->shift;
  const int row3 = nkx == 3 && g->kw == 3;
#define DW_C_FIN(A, J)                                                                                 \
  (fast ? k_finish_fast_s8((int32_t)(A), mult[J], shift[J], oo, lo, hi)                                \
        : k_finish_s8((int32_t)(A), mult[J], shift[J], oo, lo, hi))
/* One tap of four channels (X, W: the tap's input and weight pointers) into a0..a3. */
#define DW_C_TAP4(X, W)                          \
  do {                                           \
    a0 += (uint32_t)(((X)[0] + off) * (W)[0]);   \
    a1 += (uint32_t)(((X)[1] + off) * (W)[1]);   \
    a2 += (uint32_t)(((X)[2] + off) * (W)[2]);   \
    a3 += (uint32_t)(((X)[3] + off) * (W)[3]);   \
  } while (0)
  int32_t c = 0;
  for (; c + 4 <= C; c += 4) {
    uint32_t a0 = start ? (uint32_t)start[c] : 0u, a1 = start ? (uint32_t)start[c + 1] : 0u;
    uint32_t a2 = start ? (uint32_t)start[c + 2] : 0u, a3 = start ? (uint32_t)start[c + 3] : 0u;
    const int8_t *xp = x + c, *wp = w + c;
    if (row3) /* three taps per kernel row, unrolled: the pointers move once per row */
      for (int32_t ky = 0; ky < nky; ky++, xp += ystep, wp += 3 * C) {
        const int8_t *x1 = xp + xstep, *x2 = xp + 2 * xstep, *w1 = wp + C, *w2 = wp + 2 * C;
        DW_C_TAP4(xp, wp);
        DW_C_TAP4(x1, w1);
        DW_C_TAP4(x2, w2);
      }
    else
      for (int32_t ky = 0; ky < nky; ky++, xp += xadj, wp += wadj)
        for (int32_t kx = 0; kx < nkx; kx++, xp += xstep, wp += C) DW_C_TAP4(xp, wp);
    op[c] = DW_C_FIN(a0, c);
    op[c + 1] = DW_C_FIN(a1, c + 1);
    op[c + 2] = DW_C_FIN(a2, c + 2);
    op[c + 3] = DW_C_FIN(a3, c + 3);
  }
  for (; c < C; c++) {
    uint32_t a = start ? (uint32_t)start[c] : 0u;
    const int8_t *xp = x + c, *wp = w + c;
    for (int32_t ky = 0; ky < nky; ky++, xp += xadj, wp += wadj)
      for (int32_t kx = 0; kx < nkx; kx++, xp += xstep, wp += C) a += (uint32_t)((*xp + off) * *wp);
    op[c] = DW_C_FIN(a, c);
  }
#undef DW_C_FIN
#undef DW_C_TAP4
}
/* Out of line: windows inside the input (offset constant 0, so their loop carries no add) and border windows,
 * each with the requantization chosen per layer. */
#define DW_C_PIXEL_FN(NAME, FAST)                                                                              \
  static __attribute__((noinline)) void NAME##_inside(const dw_c_ctx *g, const int8_t *x, const int8_t *w,       \
                                                      int32_t nky, int32_t nkx, int8_t *op) {                    \
    dw_c_pixel_body(g, x, w, nky, nkx, g->start, 0, op, FAST);                                                  \
  }                                                                                                              \
  static __attribute__((noinline)) void NAME##_border(const dw_c_ctx *g, const int8_t *x, const int8_t *w,       \
                                                      int32_t nky, int32_t nkx, const int32_t *bias, int8_t *op) { \
    dw_c_pixel_body(g, x, w, nky, nkx, bias, g->off, op, FAST);                                                 \
  }
DW_C_PIXEL_FN(dw_c_fast, 1)
DW_C_PIXEL_FN(dw_c_gen, 0)
#undef DW_C_PIXEL_FN

#if !defined(__ARM_ARCH_6M__)
/* Two horizontally adjacent 3x3 windows (dilation 1, stride S = 1 or 2) whose rows are inside the input, one
 * channel at a time: the two windows share each kernel row's three weights and 3 - S of its input bytes, so a
 * row takes 3 + 3 + S loads for six products where the four-channel loop above takes twelve. E: 0 both windows
 * inside the input; 1 the first window's first column is left padding (x is then at its second column); 2 the
 * second window's last column is right padding. A padding byte is -input_offset: with the start value of a
 * window inside the input (bias + input_offset * sum(weights)) its product cancels that tap's share, as the
 * reference's padding contributes nothing. Sums modulo 2^32. Not on Armv6-M: the micro:bit's flash. */
static inline __attribute__((always_inline)) void dw_c_pair3_body(const dw_c_ctx *g, const int8_t *x, const int8_t *w,
                                                                 int8_t *op, const int32_t S, const int E,
                                                                 const int fast) {
  /* locals: the int8 stores below may alias *g */
  const int32_t C = g->C, oo = g->oo, lo = g->lo, hi = g->hi, pad = -g->off;
  const int32_t *const mult = g->mult, *const shift = g->shift, *const start = g->start;
  const int L = E == 1, R = E == 2;
#if defined(__thumb2__) && defined(__ARM_ARCH_7M__)
  /* Armv7-M: the three rows in asm, the offsets C, 2C, 3C (and 4C) in registers: 15 instructions a row at stride
   * 1 where GCC makes about 20 (it keeps a pointer per tap, and spills them). Row templates: W loads the row's
   * weights; X(J) loads input column J; A(K) / B(K) add it times weight K to the first / second window; PA0 and
   * PB2 add the padding byte's product. */
  const int32_t c1 = C, c2 = 2 * C, c3 = 3 * C, c4 = 4 * C, ys = g->ystep;
#define DW_W                                     \
  "ldrsb %[w0], [%[q]]\n"                        \
  "ldrsb %[w1], [%[q], %[c1]]\n"                 \
  "ldrsb %[w2], [%[q], %[c2]]\n"                 \
  "add %[q], %[q], %[c3]\n"
#define DW_X0 "ldrsb %[t], [%[p]]\n"
#define DW_X(J) "ldrsb %[t], [%[p], %[c" #J "]]\n"
#define DW_A(K) "mla %[a0], %[t], %[w" #K "], %[a0]\n"
#define DW_B(K) "mla %[a1], %[t], %[w" #K "], %[a1]\n"
#define DW_PA0 "mla %[a0], %[pad], %[w0], %[a0]\n"
#define DW_PB2 "mla %[a1], %[pad], %[w2], %[a1]\n"
#define DW_NEXT "add %[p], %[p], %[ys]\n"
#define DW_ROW_1_0 DW_W DW_X0 DW_A(0) DW_X(1) DW_A(1) DW_B(0) DW_X(2) DW_A(2) DW_B(1) DW_X(3) DW_B(2) DW_NEXT
#define DW_ROW_1_1 DW_W DW_PA0 DW_X0 DW_A(1) DW_B(0) DW_X(1) DW_A(2) DW_B(1) DW_X(2) DW_B(2) DW_NEXT
#define DW_ROW_1_2 DW_W DW_X0 DW_A(0) DW_X(1) DW_A(1) DW_B(0) DW_X(2) DW_A(2) DW_B(1) DW_PB2 DW_NEXT
#define DW_ROW_2_0 DW_W DW_X0 DW_A(0) DW_X(1) DW_A(1) DW_X(2) DW_A(2) DW_B(0) DW_X(3) DW_B(1) DW_X(4) DW_B(2) DW_NEXT
#define DW_ROW_2_1 DW_W DW_PA0 DW_X0 DW_A(1) DW_X(1) DW_A(2) DW_B(0) DW_X(2) DW_B(1) DW_X(3) DW_B(2) DW_NEXT
#define DW_ROW_2_2 DW_W DW_X0 DW_A(0) DW_X(1) DW_A(1) DW_X(2) DW_A(2) DW_B(0) DW_X(3) DW_B(1) DW_PB2 DW_NEXT
#define DW_OUTS [a0] "+r"(a0), [a1] "+r"(a1), [p] "+r"(xr), [q] "+r"(wr), [w0] "=&r"(w0), [w1] "=&r"(w1), \
                [w2] "=&r"(w2), [t] "=&r"(t)
  for (int32_t c = 0; c < C; c++) {
    const int8_t *xr = x + c, *wr = w + c;
    uint32_t a0 = (uint32_t)start[c], a1 = a0;
    int32_t w0, w1, w2, t;
    if (S == 1 && E == 0)
      __asm(DW_ROW_1_0 DW_ROW_1_0 DW_ROW_1_0 : DW_OUTS : [c1] "r"(c1), [c2] "r"(c2), [c3] "r"(c3), [ys] "r"(ys) : "memory");
    else if (S == 1 && E == 1)
      __asm(DW_ROW_1_1 DW_ROW_1_1 DW_ROW_1_1 : DW_OUTS : [c1] "r"(c1), [c2] "r"(c2), [c3] "r"(c3), [ys] "r"(ys),
            [pad] "r"(pad) : "memory");
    else if (S == 1)
      __asm(DW_ROW_1_2 DW_ROW_1_2 DW_ROW_1_2 : DW_OUTS : [c1] "r"(c1), [c2] "r"(c2), [c3] "r"(c3), [ys] "r"(ys),
            [pad] "r"(pad) : "memory");
    else if (E == 0)
      __asm(DW_ROW_2_0 DW_ROW_2_0 DW_ROW_2_0 : DW_OUTS : [c1] "r"(c1), [c2] "r"(c2), [c3] "r"(c3), [c4] "r"(c4),
            [ys] "r"(ys) : "memory");
    else if (E == 1)
      __asm(DW_ROW_2_1 DW_ROW_2_1 DW_ROW_2_1 : DW_OUTS : [c1] "r"(c1), [c2] "r"(c2), [c3] "r"(c3), [ys] "r"(ys),
            [pad] "r"(pad) : "memory");
    else
      __asm(DW_ROW_2_2 DW_ROW_2_2 DW_ROW_2_2 : DW_OUTS : [c1] "r"(c1), [c2] "r"(c2), [c3] "r"(c3), [ys] "r"(ys),
            [pad] "r"(pad) : "memory");
    (void)L, (void)R, (void)c4;
#else
  int32_t c1 = C, ys = g->ystep, w3 = 3 * C;
  for (int32_t c = 0; c < C; c++) {
    /* the offsets opaque to GCC: else it keeps a pointer per tap */
    __asm("" : "+r"(c1), "+r"(ys), "+r"(w3));
    const int8_t *xr = x + c, *wr = w + c;
    uint32_t a0 = (uint32_t)start[c], a1 = a0;
    for (int32_t ky = 0; ky < 3; ky++, xr += ys, wr += w3) {
#define DW_X(J) ((int32_t)xr[(J) * c1])
      const int32_t w0 = wr[0], w1 = wr[c1], w2 = wr[2 * c1];
      const int32_t xa0 = L ? pad : DW_X(0), xa1 = DW_X(1 - L), xa2 = DW_X(2 - L);
      const int32_t xb0 = DW_X(S - L), xb1 = DW_X(S + 1 - L), xb2 = R ? pad : DW_X(S + 2 - L);
#undef DW_X
      a0 += (uint32_t)(xa0 * w0) + (uint32_t)(xa1 * w1) + (uint32_t)(xa2 * w2);
      a1 += (uint32_t)(xb0 * w0) + (uint32_t)(xb1 * w1) + (uint32_t)(xb2 * w2);
    }
#endif
    op[c] = fast ? k_finish_fast_s8((int32_t)a0, mult[c], shift[c], oo, lo, hi)
                 : k_finish_s8((int32_t)a0, mult[c], shift[c], oo, lo, hi);
    op[C + c] = fast ? k_finish_fast_s8((int32_t)a1, mult[c], shift[c], oo, lo, hi)
                     : k_finish_s8((int32_t)a1, mult[c], shift[c], oo, lo, hi);
  }
}
#if defined(__thumb2__) && defined(__ARM_ARCH_7M__)
#undef DW_W
#undef DW_X0
#undef DW_X
#undef DW_A
#undef DW_B
#undef DW_PA0
#undef DW_PB2
#undef DW_NEXT
#undef DW_ROW_1_0
#undef DW_ROW_1_1
#undef DW_ROW_1_2
#undef DW_ROW_2_0
#undef DW_ROW_2_1
#undef DW_ROW_2_2
#undef DW_OUTS
#endif
typedef void dw_c_pair_fn(const dw_c_ctx *g, const int8_t *x, const int8_t *w, int8_t *op);
#define DW_C_PAIR3_FN(S, E)                                                                                  \
  static __attribute__((noinline)) void dw_c_pair3_##S##_##E##_fast(const dw_c_ctx *g, const int8_t *x,       \
                                                                    const int8_t *w, int8_t *op) {            \
    dw_c_pair3_body(g, x, w, op, S, E, 1);                                                                    \
  }                                                                                                           \
  static __attribute__((noinline)) void dw_c_pair3_##S##_##E##_gen(const dw_c_ctx *g, const int8_t *x,        \
                                                                   const int8_t *w, int8_t *op) {             \
    dw_c_pair3_body(g, x, w, op, S, E, 0);                                                                    \
  }
DW_C_PAIR3_FN(1, 0)
DW_C_PAIR3_FN(1, 1)
DW_C_PAIR3_FN(1, 2)
DW_C_PAIR3_FN(2, 0)
DW_C_PAIR3_FN(2, 1)
DW_C_PAIR3_FN(2, 2)
#undef DW_C_PAIR3_FN
/* [stride - 1][E][fast] */
static dw_c_pair_fn *const dw_c_pair3[2][3][2] = {
    {{dw_c_pair3_1_0_gen, dw_c_pair3_1_0_fast}, {dw_c_pair3_1_1_gen, dw_c_pair3_1_1_fast},
     {dw_c_pair3_1_2_gen, dw_c_pair3_1_2_fast}},
    {{dw_c_pair3_2_0_gen, dw_c_pair3_2_0_fast}, {dw_c_pair3_2_1_gen, dw_c_pair3_2_1_fast},
     {dw_c_pair3_2_2_gen, dw_c_pair3_2_2_fast}}};
#endif

static void dw_c_valid(int32_t o, int32_t stride, int32_t pad, int32_t dil, int32_t k, int32_t n, int32_t *lo,
                       int32_t *hi) {
  const int32_t i0 = o * stride - pad;
  int32_t a = 0, b = k;
  while (a < b && i0 + a * dil < 0) a++;
  while (b > a && i0 + (b - 1) * dil >= n) b--;
  *lo = a, *hi = b;
}

/* The dispatcher of the builds without MVE or DSP. */
k_status emk_depthwise_conv2d_s8(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                                 const int32_t *mult, const int32_t *shift, int8_t *out, void *scratch,
                                 size_t scratch_size) {
  if (scratch_size < emk_depthwise_conv2d_s8_get_buffer_size(p) || ((uintptr_t)scratch & 3)) return K_ERR_SCRATCH;
  if (dw_as_conv(p)) DW_AS_CONV(emk_conv2d_s8);
  if (p->out_c != p->in_c) {
    emk_depthwise_conv2d_s8_ref(p, in, w, bias, mult, shift, out);
    return K_OK;
  }
  const int32_t C = p->in_c, taps = p->k_h * p->k_w;
  const int32_t *start = p->beff; /* folded at compile time (emlkit/passes/window_bias.py), else computed here */
  if (!start) {
    int32_t *s = (int32_t *)scratch;
    for (int32_t c = 0; c < C; c++) {
      uint32_t ws = 0;
      for (int32_t t = 0; t < taps; t++) ws += (uint32_t)w[(size_t)t * C + c];
      s[c] = (int32_t)((bias ? (uint32_t)bias[c] : 0u) + (uint32_t)p->input_offset * ws);
    }
    start = s;
  }
  const dw_c_ctx g = {start, mult, shift, C, p->dil_w * C, p->dil_h * p->in_w * C, p->k_w, p->output_offset,
                      p->act_min, p->act_max, p->input_offset, k_rq_fast_ok(mult, shift, C)};
  /* locals: the int8 stores may alias *p */
  const int32_t B = p->batch, OH = p->out_h, OW = p->out_w, IH = p->in_h, IW = p->in_w, KH = p->k_h, KW = p->k_w;
  const int32_t SH = p->stride_h, SW = p->stride_w, PH = p->pad_h, PW = p->pad_w, DH = p->dil_h, DW = p->dil_w;
  int8_t *op = out;
#if !defined(__ARM_ARCH_6M__)
  /* the two-window kernels for 3x3 windows at stride 1 or 2, dilation 1 */
  const int pairs = KH == 3 && KW == 3 && DH == 1 && DW == 1 && (SW == 1 || SW == 2);
#endif
  for (int32_t b = 0; b < B; b++)
    for (int32_t oy = 0; oy < OH; oy++) {
      int32_t ky_lo, ky_hi;
      dw_c_valid(oy, SH, PH, DH, KH, IH, &ky_lo, &ky_hi);
      const int32_t iy0 = oy * SH - PH + ky_lo * DH;
      for (int32_t ox = 0; ox < OW; ox++, op += C) {
#if !defined(__ARM_ARCH_6M__)
        /* windows ox and ox + 1 with their rows inside the input and at most one padding column */
        const int32_t ca = ox * SW - PW, cb = (ox + 1) * SW - PW + 2; /* first and last column */
        if (pairs && ky_hi - ky_lo == 3 && ox + 1 < OW && ca >= -1 && cb <= IW && (ca >= 0 || cb < IW)) {
          const int e = ca < 0 ? 1 : cb == IW ? 2 : 0;
          dw_c_pair3[SW - 1][e][g.fast](&g, in + (((size_t)b * IH + (size_t)iy0) * IW + (size_t)(ca + (e == 1))) * C, w,
                                        op);
          ox++, op += C;
          continue;
        }
#endif
        int32_t kx_lo, kx_hi;
        dw_c_valid(ox, SW, PW, DW, KW, IW, &kx_lo, &kx_hi);
        const int32_t nky = ky_hi - ky_lo, nkx = kx_hi - kx_lo;
        const int32_t ix0 = ox * SW - PW + kx_lo * DW;
        /* first valid tap, as an integer offset: no pointer outside the input is formed */
        const int8_t *x0 = in + (size_t)b * IH * IW * C + (nky > 0 && nkx > 0 ? ((ptrdiff_t)iy0 * IW + ix0) * C : 0);
        const int8_t *w0 = w + ((size_t)ky_lo * KW + kx_lo) * C;
        /* a window with no valid tap is its bias alone (nky or nkx 0: no tap is read) */
        const int32_t nb = nky > 0 && nkx > 0 ? nky : 0;
        if (nky == KH && nkx == KW)
          (g.fast ? dw_c_fast_inside : dw_c_gen_inside)(&g, x0, w0, nky, nkx, op);
        else
          (g.fast ? dw_c_fast_border : dw_c_gen_border)(&g, x0, w0, nb, nkx, bias, op);
      }
    }
  return K_OK;
}
#endif
