/* cortex_m::quantized_depthwise_conv2d (and _nhwc): NHWC input, 1HWO weights
 * [k_h][k_w][out_c]; output channel o reads input channel o / depth_multiplier
 * (operators.py: F.conv2d with groups = in_c; CMSIS-NN arm_depthwise_conv_s8). */
#include "kernels.h"
#include "kernels_mve.h"

void qdwconv2d_s8_ref(const qconv_params *p, const int8_t *in, const int8_t *w,
                      const int32_t *bias, const int32_t *mult, const int32_t *shift,
                      int8_t *out) {
  const int32_t dm = p->out_c / p->in_c;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++)
      for (int32_t ox = 0; ox < p->out_w; ox++)
        for (int32_t o = 0; o < p->out_c; o++) {
          const int32_t c = o / dm;
          uint32_t acc = bias ? (uint32_t)bias[o] : 0u;
          for (int32_t ky = 0; ky < p->k_h; ky++) {
            const int32_t iy = oy * p->stride_h - p->pad_h + ky * p->dil_h;
            if (iy < 0 || iy >= p->in_h) continue;
            for (int32_t kx = 0; kx < p->k_w; kx++) {
              const int32_t ix = ox * p->stride_w - p->pad_w + kx * p->dil_w;
              if (ix < 0 || ix >= p->in_w) continue;
              const int32_t x = in[(((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c + c];
              acc += (uint32_t)((x + p->input_offset) * w[((size_t)ky * p->k_w + kx) * p->out_c + o]);
            }
          }
          const int32_t r = k_requantize((int32_t)acc, mult[o], shift[o]);
          out[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o] =
              (int8_t)k_clamp((int32_t)((uint32_t)r + (uint32_t)p->output_offset), p->act_min, p->act_max);
        }
}

#if FW_HAVE_MVE
/* depth_multiplier 1 (the common case): 16 channels per step in four int32
 * vectors; per 4 lanes one widening load of input and of weights, a multiply
 * and an add (MVE has no vector-by-vector integer VMLA). For windows that lie
 * inside the input, the input offset is applied once as
 * input_offset * sum(all taps' weights), folded into a per-channel bias
 * precomputed per call; windows cut by the border add the offset per tap.
 * The last partial group of channels uses predicated loads and stores.
 * Other multipliers and scalar-only requant parameters use the portable code. */
#define DW_CAP 256 /* stack: per-channel bias + input_offset * sum(w) */

/* The valid taps of one output pixel's window: nky rows of nkx taps; after a
 * row the pointers move on by xadj / wadj. The asm below reads nkx, xadj and
 * wadj at byte offsets 4, 16 and 20. */
typedef struct {
  int32_t nky, nkx;
  int32_t xstep, wstep, xadj, wadj;
  int32_t off;
} dw_window;

/* 16 channels of one output pixel, requantized and stored; xp / wp point at
 * the first valid tap, init at 16 per-channel start values (or NULL for zeros). */
static inline __attribute__((always_inline)) void dw_pixel16(const qconv_params *p, const dw_window *g,
                                                            const int8_t *xp, const int8_t *wp,
                                                            const int32_t *init, const int32_t *mult,
                                                            const int32_t *shift, int8_t *op,
                                                            const int full) {
  int32x4_t a0, a1, a2, a3, t0, t1;
  int32_t t;
  if (init) {
    a0 = vldrwq_s32(init), a1 = vldrwq_s32(init + 4);
    a2 = vldrwq_s32(init + 8), a3 = vldrwq_s32(init + 12);
  } else {
    a0 = a1 = a2 = a3 = vdupq_n_s32(0);
  }
  int32_t nky = g->nky;
  /* in asm because GCC 12 keeps all twelve loaded vectors live and spills
   * the accumulators to the stack */
  if (nky > 0 && g->nkx > 0) {
    if (full) {
    __asm volatile(
        "2:\n"
        "ldr %[t], [%[g], #4]\n"
        "dls lr, %[t]\n"
        "1:\n"
        "vldrb.s32 %q[t0], [%[x]]\n"
        "vldrb.s32 %q[t1], [%[w]]\n"
        "vmul.i32 %q[t0], %q[t0], %q[t1]\n"
        "vadd.i32 %q[a0], %q[a0], %q[t0]\n"
        "vldrb.s32 %q[t0], [%[x], #4]\n"
        "vldrb.s32 %q[t1], [%[w], #4]\n"
        "vmul.i32 %q[t0], %q[t0], %q[t1]\n"
        "vadd.i32 %q[a1], %q[a1], %q[t0]\n"
        "vldrb.s32 %q[t0], [%[x], #8]\n"
        "vldrb.s32 %q[t1], [%[w], #8]\n"
        "vmul.i32 %q[t0], %q[t0], %q[t1]\n"
        "vadd.i32 %q[a2], %q[a2], %q[t0]\n"
        "vldrb.s32 %q[t0], [%[x], #12]\n"
        "vldrb.s32 %q[t1], [%[w], #12]\n"
        "vmul.i32 %q[t0], %q[t0], %q[t1]\n"
        "vadd.i32 %q[a3], %q[a3], %q[t0]\n"
        "add %[x], %[xs]\n"
        "add %[w], %[ws]\n"
        "le lr, 1b\n"
        "ldr %[t], [%[g], #16]\n"
        "add %[x], %[t]\n"
        "ldr %[t], [%[g], #20]\n"
        "add %[w], %[t]\n"
        "subs %[nky], #1\n"
        "bne 2b\n"
        : [a0] "+w"(a0), [a1] "+w"(a1), [a2] "+w"(a2), [a3] "+w"(a3), [t0] "=&w"(t0),
          [t1] "=&w"(t1), [x] "+l"(xp), [w] "+l"(wp), [nky] "+r"(nky), [t] "=&r"(t)
        : [g] "r"(g), [xs] "r"(g->xstep), [ws] "r"(g->wstep)
        : "lr", "memory", "cc");
    } else {
    __asm volatile(
        "2:\n"
        "ldr %[t], [%[g], #4]\n"
        "dls lr, %[t]\n"
        "1:\n"
        "vldrb.s32 %q[t0], [%[x]]\n"
        "vldrb.s32 %q[t1], [%[w]]\n"
        "vadd.i32 %q[t0], %q[t0], %[off]\n"
        "vmul.i32 %q[t0], %q[t0], %q[t1]\n"
        "vadd.i32 %q[a0], %q[a0], %q[t0]\n"
        "vldrb.s32 %q[t0], [%[x], #4]\n"
        "vldrb.s32 %q[t1], [%[w], #4]\n"
        "vadd.i32 %q[t0], %q[t0], %[off]\n"
        "vmul.i32 %q[t0], %q[t0], %q[t1]\n"
        "vadd.i32 %q[a1], %q[a1], %q[t0]\n"
        "vldrb.s32 %q[t0], [%[x], #8]\n"
        "vldrb.s32 %q[t1], [%[w], #8]\n"
        "vadd.i32 %q[t0], %q[t0], %[off]\n"
        "vmul.i32 %q[t0], %q[t0], %q[t1]\n"
        "vadd.i32 %q[a2], %q[a2], %q[t0]\n"
        "vldrb.s32 %q[t0], [%[x], #12]\n"
        "vldrb.s32 %q[t1], [%[w], #12]\n"
        "vadd.i32 %q[t0], %q[t0], %[off]\n"
        "vmul.i32 %q[t0], %q[t0], %q[t1]\n"
        "vadd.i32 %q[a3], %q[a3], %q[t0]\n"
        "add %[x], %[xs]\n"
        "add %[w], %[ws]\n"
        "le lr, 1b\n"
        "ldr %[t], [%[g], #16]\n"
        "add %[x], %[t]\n"
        "ldr %[t], [%[g], #20]\n"
        "add %[w], %[t]\n"
        "subs %[nky], #1\n"
        "bne 2b\n"
        : [a0] "+w"(a0), [a1] "+w"(a1), [a2] "+w"(a2), [a3] "+w"(a3), [t0] "=&w"(t0),
          [t1] "=&w"(t1), [x] "+l"(xp), [w] "+l"(wp), [nky] "+r"(nky), [t] "=&r"(t)
        : [g] "r"(g), [xs] "r"(g->xstep), [ws] "r"(g->wstep), [off] "r"(g->off)
        : "lr", "memory", "cc");
    }
  }
  /* straight-line requantization keeps the accumulators in registers */
  const int32x4_t vlo = vdupq_n_s32(p->act_min), vhi = vdupq_n_s32(p->act_max);
#define DW_OUT(A, OFS)                                                                        \
  vstrbq_s32(op + (OFS),                                                                      \
             vminq_s32(vmaxq_s32(vaddq_n_s32(k_requantize_mve(A, vldrwq_s32(mult + (OFS)),    \
                                                              vldrwq_s32(shift + (OFS))),     \
                                             p->output_offset),                               \
                                 vlo),                                                        \
                       vhi))
  DW_OUT(a0, 0);
  DW_OUT(a1, 4);
  DW_OUT(a2, 8);
  DW_OUT(a3, 12);
#undef DW_OUT
}

/* The last rem < 16 channels, predicated. */
static int32x4x4_t dw_taps_tail(const dw_window *g, const int8_t *xp, const int8_t *wp,
                                const int32_t *init, int32_t rem, int full) {
  mve_pred16_t pr[4];
  int32x4_t a[4];
  for (int v = 0; v < 4; v++) {
    pr[v] = vctp32q((uint32_t)(rem > 4 * v ? rem - 4 * v : 0));
    a[v] = init ? vldrwq_z_s32(init + 4 * v, pr[v]) : vdupq_n_s32(0);
  }
  for (int32_t ky = 0; ky < g->nky; ky++, xp += g->xadj, wp += g->wadj)
    for (int32_t kx = 0; kx < g->nkx; kx++, xp += g->xstep, wp += g->wstep)
      for (int v = 0; v < 4; v++) {
        int32x4_t x = vldrbq_z_s32(xp + 4 * v, pr[v]);
        if (!full) x = vaddq_n_s32(x, g->off);
        a[v] = vaddq_s32(a[v], vmulq_s32(x, vldrbq_z_s32(wp + 4 * v, pr[v])));
      }
  return (int32x4x4_t){{a[0], a[1], a[2], a[3]}};
}

/* Requantize, clamp and store the last rem < 16 channels. */
static void dw_store_tail(const qconv_params *p, int32x4x4_t a, const int32_t *mult, const int32_t *shift,
                          int8_t *op, int32_t rem) {
  const int32x4_t vlo = vdupq_n_s32(p->act_min), vhi = vdupq_n_s32(p->act_max);
  for (int v = 0; v < 4; v++) {
    const mve_pred16_t pr = vctp32q((uint32_t)(rem > 4 * v ? rem - 4 * v : 0));
    int32x4_t r = k_requantize_mve(a.val[v], vldrwq_z_s32(mult + 4 * v, pr), vldrwq_z_s32(shift + 4 * v, pr));
    vstrbq_p_s32(op + 4 * v, vminq_s32(vmaxq_s32(vaddq_n_s32(r, p->output_offset), vlo), vhi), pr);
  }
}

void qdwconv2d_s8_mve(const qconv_params *p, const int8_t *in, const int8_t *w,
                      const int32_t *bias, const int32_t *mult, const int32_t *shift,
                      int8_t *out) {
  int ok = p->out_c == p->in_c;
  for (int32_t o = 0; o < p->out_c && ok; o++) ok = k_requant_vec_ok(mult[o], shift[o]);
  if (!ok) {
    qdwconv2d_s8_ref(p, in, w, bias, mult, shift, out);
    return;
  }
  const int32_t C = p->in_c, taps = p->k_h * p->k_w;
  const int32_t xstep = p->dil_w * C, ystep = p->dil_h * p->in_w * C;
  int32_t bfull[DW_CAP] __attribute__((aligned(16)));
  /* channel ranges bound the stack used for the per-channel terms */
  for (int32_t c_lo = 0; c_lo < C; c_lo += DW_CAP) {
    const int32_t c_hi = C - c_lo < DW_CAP ? C : c_lo + DW_CAP;
    for (int32_t c = c_lo; c < c_hi; c++) {
      uint32_t ws = 0;
      for (int32_t t = 0; t < taps; t++) ws += (uint32_t)w[(size_t)t * C + c];
      bfull[c - c_lo] = (int32_t)((bias ? (uint32_t)bias[c] : 0u) + (uint32_t)p->input_offset * ws);
    }
    for (int32_t b = 0; b < p->batch; b++)
      for (int32_t oy = 0; oy < p->out_h; oy++) {
        const int32_t iy0 = oy * p->stride_h - p->pad_h;
        int32_t ky_lo = 0, ky_hi = p->k_h;
        while (ky_lo < ky_hi && iy0 + ky_lo * p->dil_h < 0) ky_lo++;
        while (ky_hi > ky_lo && iy0 + (ky_hi - 1) * p->dil_h >= p->in_h) ky_hi--;
        for (int32_t ox = 0; ox < p->out_w; ox++) {
          const int32_t ix0 = ox * p->stride_w - p->pad_w;
          int32_t kx_lo = 0, kx_hi = p->k_w;
          while (kx_lo < kx_hi && ix0 + kx_lo * p->dil_w < 0) kx_lo++;
          while (kx_hi > kx_lo && ix0 + (kx_hi - 1) * p->dil_w >= p->in_w) kx_hi--;
          const int full = ky_lo == 0 && ky_hi == p->k_h && kx_lo == 0 && kx_hi == p->k_w;
          dw_window g;
          g.nky = ky_hi - ky_lo, g.nkx = kx_hi - kx_lo;
          g.xstep = xstep, g.wstep = C, g.off = p->input_offset;
          g.xadj = ystep - g.nkx * xstep, g.wadj = (p->k_w - g.nkx) * C;
          int8_t *op = out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * C;
          /* first valid tap, as an integer offset so that no pointer outside
           * the input is ever formed */
          const int8_t *x0 = in + ((size_t)b * p->in_h * p->in_w) * C +
                             (((ptrdiff_t)(iy0 + ky_lo * p->dil_h) * p->in_w + ix0 + kx_lo * p->dil_w) * C);
          const int8_t *w0 = w + ((size_t)ky_lo * p->k_w + kx_lo) * C;
          int32_t c0 = c_lo;
          if (full) {
            for (; c0 + 16 <= c_hi; c0 += 16)
              dw_pixel16(p, &g, x0 + c0, w0 + c0, bfull + (c0 - c_lo), mult + c0, shift + c0, op + c0, 1);
          } else {
            for (; c0 + 16 <= c_hi; c0 += 16)
              dw_pixel16(p, &g, x0 + c0, w0 + c0, bias ? bias + c0 : NULL, mult + c0, shift + c0, op + c0, 0);
          }
          if (c0 < c_hi) {
            const int32_t *ib = full ? bfull + (c0 - c_lo) : (bias ? bias + c0 : NULL);
            dw_store_tail(p, dw_taps_tail(&g, x0 + c0, w0 + c0, ib, c_hi - c0, full), mult + c0, shift + c0,
                          op + c0, c_hi - c0);
          }
        }
      }
  }
}
#endif

void qdwconv2d_s8(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                  const int32_t *mult, const int32_t *shift, int8_t *out) {
#if FW_HAVE_MVE
  qdwconv2d_s8_mve(p, in, w, bias, mult, shift, out);
#else
  qdwconv2d_s8_ref(p, in, w, bias, mult, shift, out);
#endif
}
