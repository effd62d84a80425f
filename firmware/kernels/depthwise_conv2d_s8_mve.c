/* emk_depthwise_conv2d_s8_mve: the Helium (MVE) variant of cortex_m::quantized_depthwise_conv2d
 * (depthwise_conv2d_s8.c). */
#include "depthwise_conv2d_s8.h"
#include "kernels_mve.h"

#if FW_HAVE_MVE
/* The scratch size, defined here on the builds that pick this variant (depthwise_conv2d_s8.c says why). */
DEPTHWISE_CONV2D_S8_GET_BUFFER_SIZE

/* depth_multiplier 1 (the common case): 16 channels per step in four int32
 * vectors; per 4 lanes one widening load of input and of weights, a multiply
 * and an add (MVE has no vector-by-vector integer VMLA). For windows that lie
 * inside the input, the input offset is applied once as
 * input_offset * sum(all taps' weights), folded into a per-channel bias
 * precomputed per call; windows cut by the border add the offset per tap.
 * The last partial group of channels uses predicated loads and stores.
 * Other multipliers and scalar-only requant parameters use the portable code. */

/* The valid taps of one output pixel's window: nky rows of nkx taps; after a
 * row the pointers move on by xadj / wadj. The asm below reads nkx, xadj and
 * wadj at byte offsets 4, 16 and 20. */
typedef struct {
  int32_t nky, nkx;
  int32_t xstep, wstep, xadj, wadj;
  int32_t off;
} dw_window;

/* Requantize 8 channels held as even / odd lanes (e, o; dw_run16 says why),
 * add the output offset, narrow to int16 in channel order (saturating, which
 * the int8 clamp makes exact), clamp, store 8 bytes. */
static inline __attribute__((always_inline)) void dw_out8(const qconv_params *p, int32x4_t e, int32x4_t o,
                                                         const int32_t *mult, const int32_t *shift, int8_t *op) {
  const int32x4x2_t m = vld2q_s32(mult), s = vld2q_s32(shift);
  e = vaddq_n_s32(k_requantize_mve(e, m.val[0], s.val[0]), p->output_offset);
  o = vaddq_n_s32(k_requantize_mve(o, m.val[1], s.val[1]), p->output_offset);
  int16x8_t r = vqmovntq_s32(vqmovnbq_s32(vdupq_n_s16(0), e), o);
  r = vminq_s16(vmaxq_s16(r, vdupq_n_s16((int16_t)p->act_min)), vdupq_n_s16((int16_t)p->act_max));
  vstrbq_s16(op, r);
}

/* 16 channels of one output pixel, requantized and stored; xp / wp point at
 * the first valid tap, init at 16 per-channel start values (or NULL for
 * zeros). Each tap as in dw_run16: int16 lanes, VMULLB / VMULLT into even /
 * odd accumulators; border windows add the input offset to the int16 input
 * lanes (x + offset lies within +-255, its products with int8 weights within
 * int16 x int16 -> int32). */
static inline __attribute__((always_inline)) void dw_pixel16(const qconv_params *p, const dw_window *g,
                                                            const int8_t *xp, const int8_t *wp,
                                                            const int32_t *init, const int32_t *mult,
                                                            const int32_t *shift, int8_t *op,
                                                            const int full) {
  int32x4_t a0, a1, a2, a3, t2; /* a0 / a1: channels 0-7 even / odd, a2 / a3: channels 8-15 */
  int16x8_t t0, t1;
  int32_t t;
  if (init) {
    int32x4x2_t v = vld2q_s32(init);
    a0 = v.val[0], a1 = v.val[1];
    v = vld2q_s32(init + 8);
    a2 = v.val[0], a3 = v.val[1];
  } else {
    a0 = a1 = a2 = a3 = vdupq_n_s32(0);
  }
  int32_t nky = g->nky;
  /* in asm because GCC 12 keeps the loaded vectors live and spills the
   * accumulators to the stack */
  if (nky > 0 && g->nkx > 0) {
/* One tap of 8 channels at byte offset OFS into accumulators E / O (ADD:
 * the input offset for border windows, or nothing). */
#define DW_PTAP8(OFS, E, O, ADD)                   \
  "vldrb.s16 %q[t0], [%[x]" OFS "]\n"             \
  ADD                                              \
  "vldrb.s16 %q[t1], [%[w]" OFS "]\n"             \
  "vmullb.s16 %q[t2], %q[t0], %q[t1]\n"           \
  "vadd.i32 %q[" E "], %q[" E "], %q[t2]\n"       \
  "vmullt.s16 %q[t2], %q[t0], %q[t1]\n"           \
  "vadd.i32 %q[" O "], %q[" O "], %q[t2]\n"
/* The window's valid taps: rows of nkx taps, 16 channels per tap. */
#define DW_TAPS(ADD, ...)                                                                     \
  __asm volatile("2:\n"                                                                     \
                 "ldr %[t], [%[g], #4]\n"                                                   \
                 "dls lr, %[t]\n"                                                           \
                 "1:\n" DW_PTAP8("", "a0", "a1", ADD) DW_PTAP8(", #8", "a2", "a3", ADD)     \
                 "add %[x], %[xs]\n"                                                        \
                 "add %[w], %[ws]\n"                                                        \
                 "le lr, 1b\n"                                                              \
                 "ldr %[t], [%[g], #16]\n"                                                  \
                 "add %[x], %[t]\n"                                                         \
                 "ldr %[t], [%[g], #20]\n"                                                  \
                 "add %[w], %[t]\n"                                                         \
                 "subs %[nky], #1\n"                                                        \
                 "bne 2b\n"                                                                 \
                 : [a0] "+w"(a0), [a1] "+w"(a1), [a2] "+w"(a2), [a3] "+w"(a3), [t0] "=&w"(t0), \
                   [t1] "=&w"(t1), [t2] "=&w"(t2), [x] "+l"(xp), [w] "+l"(wp), [nky] "+r"(nky), \
                   [t] "=&r"(t)                                                             \
                 : [g] "r"(g), [xs] "r"(g->xstep), [ws] "r"(g->wstep) __VA_ARGS__            \
                 : "lr", "memory", "cc")
    if (full) DW_TAPS("", );
    else DW_TAPS("vadd.i16 %q[t0], %q[t0], %[off]\n", , [off] "r"(g->off));
#undef DW_TAPS
#undef DW_PTAP8
  }
  dw_out8(p, a0, a1, mult, shift, op);
  dw_out8(p, a2, a3, mult + 8, shift + 8, op + 8);
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

/* Per 16-channel group: the folded bias for full windows, then the group's
 * multipliers and shifts (zero past the last channel), so that one pointer
 * reaches all three with immediate offsets. The program's own (p->dwblk,
 * emlkit/passes/window_bias.py), else built in scratch per call. */
#define DW_BLOCK 48 /* int32 per group */

/* A run of output pixels of one row whose windows lie inside the input, one
 * 16-channel group, in one asm loop. Each tap widens 8 channels of input and
 * weights to int16 (VLDRB.S16) and multiplies them with VMULLB / VMULLT, whose
 * int32 products are those of the even and of the odd channels: 6
 * instructions per 8 multiply-adds rather than 8 with int32 lanes. The
 * accumulators thus hold even / odd channels; the block's bias, multipliers
 * and shifts are read the same way by the de-interleaving loads VLD20 / VLD21,
 * and VQMOVNB / VQMOVNT put the requantized lanes back in channel order as
 * int16, saturated, which the int8 clamp then makes exact (clamping a value
 * saturated to int16 to [lo, hi], within int8, gives the int32 clamp). About
 * 50 + kh * (5 + 15 * kw) instructions per pixel. */
typedef struct {
  const int8_t *x;   /* 0: first tap of the first pixel (group's first channel) */
  const int8_t *w;   /* 4: first tap's weights (group's first channel) */
  int8_t *out;       /* 8 */
  int32_t npix;      /* 12: >= 1 */
  int32_t xpix;      /* 16: input bytes between output pixels */
  int32_t opix;      /* 20: output bytes between pixels (C) */
  int32_t kw, kh;    /* 24, 28: >= 1 */
  int32_t xstep;     /* 32: dil_w * C */
  int32_t wstep;     /* 36: C */
  int32_t xadj;      /* 40: next tap row: dil_h * in_w * C - kw * xstep */
  const int32_t *g;  /* 44: the group's block */
  int32_t off;       /* 48 */
  const int32_t *init; /* 52: the start values: the block (windows inside), the bias (dw_col16) */
  int32_t wadj;      /* 56: dw_col16: next tap row, weights: (k_w - kw) * C */
  int32_t ioff;      /* 60: dw_col16: input offset */
  int16_t lo[8];     /* 64 */
  int16_t hi[8];     /* 80 */
} dw_run_args;

/* Requantize the even / odd accumulators QE / QO of 8 channels (multipliers
 * de-interleaved from r2 and shifts from r5, each moving on by 32 bytes),
 * narrow to int16 in channel order (saturating), add the output offset
 * (saturating: exact, as the int8 clamp that follows absorbs the saturation;
 * the offset is r12's low half), clamp, store 8 bytes at r3 + OFS. Uses q4-q6;
 * q7 holds the lower clamp (lo, from r0 + 64) for the whole loop. */
/* FIX(Q, S, T): k_requantize_mve's round-half-away fix-up of Q for shifts S.
 * K_FIX_ANY is its own three instructions; K_FIX_NEG, for calls whose shifts
 * are all negative, is x + (x >> 31), two (kernels_mve.h says why both are
 * exact). */
#define DW_RQ8(QE, QO, OFS, FIX)                  \
  "vld20.32 {q4, q5}, [r2]\n"                     \
  "vld21.32 {q4, q5}, [r2]!\n"                    \
  "vqrdmulh.s32 " QE ", " QE ", q4\n"             \
  "vqrdmulh.s32 " QO ", " QO ", q5\n"             \
  "vld20.32 {q4, q5}, [r5]\n"                     \
  "vld21.32 {q4, q5}, [r5]!\n"                    \
  FIX(QE, "q4", "q6")                                    \
  "vrshl.s32 " QE ", " QE ", q4\n"                \
  FIX(QO, "q5", "q6")                                    \
  "vrshl.s32 " QO ", " QO ", q5\n"                \
  "vqmovnb.s32 q4, " QE "\n"                      \
  "vqmovnt.s32 q4, " QO "\n"                      \
  "vqadd.s16 q4, q4, r12\n"                       \
  "vmax.s16 q4, q4, q7\n"                         \
  "vldrh.16 q6, [r0, #80]\n"                      \
  "vmin.s16 q4, q4, q6\n"                         \
  "vstrb.16 q4, [r3" OFS "]\n"

/* One tap of 8 channels at byte offset OFS into the even / odd accumulators QE / QO. */
#define DW_TAP8(OFS, QE, QO)                      \
  "vldrb.s16 q4, [r5" OFS "]\n"                   \
  "vldrb.s16 q5, [r6" OFS "]\n"                   \
  "vmullb.s16 q6, q4, q5\n"                       \
  "vadd.i32 " QE ", " QE ", q6\n"                 \
  "vmullt.s16 q6, q4, q5\n"                       \
  "vadd.i32 " QO ", " QO ", q6\n"

/* The run loop around TAPS, the window's taps (r5 / r6: the first tap's
 * input and weights; r7, lr and r2 free). */
#define DW_RUN(TAPS, FIX, PRE, NEXT)                                             \
  "vldrh.16 q7, [r0, #64]\n"                                                     \
  "ldr r1, [r0, #0]\n"                                                           \
  "ldr r3, [r0, #8]\n"                                                           \
  PRE                                                                            \
  "ldr r8, [r0, #32]\n"                                                          \
  "ldr r9, [r0, #36]\n"                                                          \
  "ldr r10, [r0, #40]\n"                                                         \
  "ldr r11, [r0, #44]\n"                                                         \
  "ldr r12, [r0, #48]\n"                                                         \
  "1:\n" /* pixel: q0 / q1 channels 0-7 even / odd, q2 / q3 channels 8-15 */    \
  "ldr r2, [r0, #52]\n"                                                          \
  "vld20.32 {q0, q1}, [r2]\n"                                                    \
  "vld21.32 {q0, q1}, [r2]!\n"                                                   \
  "vld20.32 {q2, q3}, [r2]\n"                                                    \
  "vld21.32 {q2, q3}, [r2]\n"                                                    \
  "mov r5, r1\n"                                                                 \
  "ldr r6, [r0, #4]\n"                                                           \
  TAPS                                                                           \
  /* multipliers at +64, shifts at +128 (r5: the taps are done) */             \
  "add r2, r11, #64\n"                                                           \
  "add r5, r11, #128\n"                                                          \
  DW_RQ8("q0", "q1", "", FIX)                                                    \
  DW_RQ8("q2", "q3", ", #8", FIX)                                                \
  NEXT
/* Any window: the pixel count in r4, the steps read per pixel (r7 and lr are the taps'). */
#define DW_PRE_ANY "ldr r4, [r0, #12]\n"
#define DW_NEXT_ANY "ldr r2, [r0, #16]\n" "add r1, r2\n" "ldr r2, [r0, #20]\n" "add r3, r2\n" "subs r4, #1\n" "bne 1b\n"
/* 3x3 (no tap loops): the input / output steps in r7 / r4, the pixels counted by a low-overhead loop. */
#define DW_PRE_3X3 "ldr r7, [r0, #16]\n" "ldr r4, [r0, #20]\n" "ldr lr, [r0, #12]\n" "dls lr, lr\n"
#define DW_NEXT_3X3 "add r1, r7\n" "add r3, r4\n" "le lr, 1b\n"
/* One tap of 16 channels, the pointers moved on to the next tap. */
#define DW_TAP16 DW_TAP8("", "q0", "q1") DW_TAP8(", #8", "q2", "q3") "add r5, r8\n" "add r6, r9\n"
/* Any kh x kw window: rows of kw taps. */
#define DW_TAPS_ANY                                                              \
  "ldr r7, [r0, #28]\n"                                                          \
  "2:\n" /* tap row */                                                           \
  "ldr r2, [r0, #24]\n"                                                          \
  "dls lr, r2\n"                                                                 \
  "3:\n" /* tap */                                                               \
  DW_TAP16                                                                       \
  "le lr, 3b\n"                                                                  \
  "add r5, r10\n"                                                                \
  "subs r7, #1\n"                                                                \
  "bne 2b\n"
/* One tap of 8 channels at byte offset OFS, the input offset (r2) added to its input lanes (dw_col16's windows
 * cut by the border, below, and dw_edge16's). */
#define DW_TAPO8(OFS, QE, QO)                     \
  "vldrb.s16 q4, [r5" OFS "]\n"                   \
  "vadd.i16 q4, q4, r2\n"                         \
  "vldrb.s16 q5, [r6" OFS "]\n"                   \
  "vmullb.s16 q6, q4, q5\n"                       \
  "vadd.i32 " QE ", " QE ", q6\n"                 \
  "vmullt.s16 q6, q4, q5\n"                       \
  "vadd.i32 " QO ", " QO ", q6\n"
/* dw_col16's windows, cut by the border: the weights moved on by wadj after each row. */
#define DW_TAPS_CUT                                                              \
  "ldr r7, [r0, #28]\n"                                                          \
  "2:\n" /* tap row */                                                           \
  "ldr r2, [r0, #24]\n"                                                          \
  "dls lr, r2\n"                                                                 \
  "ldr r2, [r0, #60]\n"                                                          \
  "3:\n" /* tap */                                                               \
  DW_TAPO8("", "q0", "q1") DW_TAPO8(", #8", "q2", "q3")                          \
  "add r5, r8\n"                                                                 \
  "add r6, r9\n"                                                                 \
  "le lr, 3b\n"                                                                  \
  "add r5, r10\n"                                                                \
  "ldr r2, [r0, #56]\n"                                                          \
  "add r6, r2\n"                                                                 \
  "subs r7, #1\n"                                                                \
  "bne 2b\n"
/* 3x3 windows written out: no loop counters, the weights' pointer runs on
 * from row to row (kw * C bytes per row), the input's moves on by xadj. */
#define DW_TAPS_3X3                                                              \
  DW_TAP16 DW_TAP16 DW_TAP16 "add r5, r10\n"                                     \
  DW_TAP16 DW_TAP16 DW_TAP16 "add r5, r10\n"                                     \
  DW_TAP16 DW_TAP16 DW_TAP16
K_ASM_LOOP(dw_run16, const dw_run_args, DW_RUN(DW_TAPS_ANY, K_FIX_ANY, DW_PRE_ANY, DW_NEXT_ANY))
K_ASM_LOOP(dw_run16_neg, const dw_run_args, DW_RUN(DW_TAPS_ANY, K_FIX_NEG, DW_PRE_ANY, DW_NEXT_ANY))
K_ASM_LOOP(dw_run16_3x3, const dw_run_args, DW_RUN(DW_TAPS_3X3, K_FIX_ANY, DW_PRE_3X3, DW_NEXT_3X3))
K_ASM_LOOP(dw_run16_3x3_neg, const dw_run_args, DW_RUN(DW_TAPS_3X3, K_FIX_NEG, DW_PRE_3X3, DW_NEXT_3X3))
/* A run of pixels whose windows are cut the same way by the border (a border column of the rows whose windows
 * lie inside vertically: xpix / opix step a row down), from the plain bias. */
K_ASM_LOOP(dw_col16, const dw_run_args, DW_RUN(DW_TAPS_CUT, K_FIX_ANY, DW_PRE_ANY, DW_NEXT_ANY))
K_ASM_LOOP(dw_col16_neg, const dw_run_args, DW_RUN(DW_TAPS_CUT, K_FIX_NEG, DW_PRE_ANY, DW_NEXT_ANY))
#undef DW_TAPS_CUT
#undef DW_NEXT_3X3
#undef DW_PRE_3X3
#undef DW_NEXT_ANY
#undef DW_PRE_ANY
#undef DW_TAPS_3X3
#undef DW_TAPS_ANY
#undef DW_TAP16
#undef DW_RUN
#undef DW_TAP8

/* One border pixel (its window cut by the padding), every whole 16-channel
 * group in one asm loop: the valid taps only (nky rows of nkx), the input
 * offset added to each int16 input lane (x + offset lies within int16, see
 * dw_mve_offset_ok), the sums starting from the plain bias (16 per group,
 * de-interleaved like the blocks), requantized as in dw_run16. The fields up
 * to 56 and lo / hi are read by the asm at these offsets; w moves on by 16
 * per group as the loop runs. Blocks with next set chain further pixels into
 * the same call, each taken whole before the next (dw_edge_cols). */
typedef struct {
  const int8_t *x;      /* 0: first valid tap (channel 0) */
  const int8_t *w;      /* 4: its weights (channel 0) */
  int8_t *out;          /* 8: the pixel's output (channel 0) */
  int32_t groups;       /* 12: whole 16-channel groups, >= 1 */
  int32_t nky, nkx;     /* 16, 20: valid tap rows and taps per row, >= 1 */
  int32_t xstep;        /* 24: dil_w * C */
  int32_t wstep;        /* 28: C */
  int32_t xadj;         /* 32: next tap row, input: dil_h * in_w * C - nkx * xstep */
  int32_t wadj;         /* 36: next tap row, weights: (k_w - nkx) * C */
  const int32_t *init;  /* 40: the bias */
  const int32_t *g;     /* 44: the first group's block (multipliers at +64, shifts at +128) */
  int32_t off;          /* 48: output offset */
  int32_t ioff;         /* 52: input offset */
  int32_t next;         /* 56: non-zero: another pixel's block follows (96 bytes on), taken in the same call */
  int32_t xcol;         /* 60: dw_edge_cols: the column's first valid tap, bytes from the row's start */
  int16_t lo[8];        /* 64 */
  int16_t hi[8];        /* 80 */
} dw_edge_args;
_Static_assert(sizeof(dw_edge_args) == 96, "DW_EDGE steps from one pixel's block to the next by 96 bytes");

/* Any window: nky rows of nkx taps, counted. */
#define DW_ETAPS_ANY                                                             \
  "ldr r7, [r0, #16]\n"                                                          \
  "2:\n" /* tap row */                                                           \
  "ldr lr, [r0, #20]\n"                                                          \
  "dls lr, lr\n"                                                                 \
  "3:\n" /* tap */                                                               \
  DW_TAPO8("", "q0", "q1") DW_TAPO8(", #8", "q2", "q3")                          \
  "add r5, r8\n"                                                                 \
  "add r6, r9\n"                                                                 \
  "le lr, 3b\n"                                                                  \
  "ldr lr, [r0, #32]\n"                                                          \
  "add r5, lr\n"                                                                 \
  "ldr lr, [r0, #36]\n"                                                          \
  "add r6, lr\n"                                                                 \
  "subs r7, #1\n"                                                                \
  "bne 2b\n"
/* 3 rows of 2 taps (a 3x3 window's border column), written out: the steps to the next row (xadj + xstep,
 * wadj + wstep, as only one tap step is taken per row) in r7 / lr for the pixel. */
#define DW_EPIX_3X2 "ldr r7, [r0, #32]\n" "add r7, r8\n" "ldr lr, [r0, #36]\n" "add lr, r9\n"
#define DW_ETAP16 DW_TAPO8("", "q0", "q1") DW_TAPO8(", #8", "q2", "q3")
#define DW_ETAPS_3X2                                                             \
  DW_ETAP16 "add r5, r8\n" "add r6, r9\n" DW_ETAP16 "add r5, r7\n" "add r6, lr\n"   \
  DW_ETAP16 "add r5, r8\n" "add r6, r9\n" DW_ETAP16 "add r5, r7\n" "add r6, lr\n"   \
  DW_ETAP16 "add r5, r8\n" "add r6, r9\n" DW_ETAP16
#define DW_EDGE(PIX, TAPS, FIX)                                                  \
  "0:\n" /* pixel */                                                             \
  "vldrh.16 q7, [r0, #64]\n"                                                     \
  "ldr r1, [r0, #0]\n"                                                           \
  "ldr r3, [r0, #8]\n"                                                           \
  "ldr r4, [r0, #12]\n"                                                          \
  "ldr r8, [r0, #24]\n"                                                          \
  "ldr r9, [r0, #28]\n"                                                          \
  "ldr r10, [r0, #40]\n"                                                         \
  "ldr r11, [r0, #44]\n"                                                         \
  "ldr r12, [r0, #48]\n"                                                         \
  PIX                                                                            \
  "1:\n" /* group: q0 / q1 channels 0-7 even / odd, q2 / q3 channels 8-15 */    \
  "vld20.32 {q0, q1}, [r10]\n"                                                   \
  "vld21.32 {q0, q1}, [r10]!\n"                                                  \
  "vld20.32 {q2, q3}, [r10]\n"                                                   \
  "vld21.32 {q2, q3}, [r10]!\n"                                                  \
  "mov r5, r1\n"                                                                 \
  "ldr r6, [r0, #4]\n"                                                           \
  "ldr r2, [r0, #52]\n"                                                          \
  TAPS                                                                           \
  "add r2, r11, #64\n"                                                           \
  "add r5, r11, #128\n"                                                          \
  DW_RQ8("q0", "q1", "", FIX)                                                    \
  DW_RQ8("q2", "q3", ", #8", FIX)                                                \
  "add r11, #192\n" /* next block (DW_BLOCK int32) */                           \
  "add r3, #16\n"                                                                \
  "add r1, #16\n"                                                                \
  "ldr r2, [r0, #4]\n"                                                           \
  "add r2, #16\n"                                                                \
  "str r2, [r0, #4]\n"                                                           \
  "subs r4, #1\n"                                                                \
  "bne 1b\n"                                                                     \
  "ldr r4, [r0, #56]\n"                                                          \
  "add r0, #96\n"                                                                \
  "cmp r4, #0\n"                                                                 \
  "bne 0b\n"
#define DW_EDGE_ANY(FIX) DW_EDGE(, DW_ETAPS_ANY, FIX)
#define DW_EDGE_3X2(FIX) DW_EDGE(DW_EPIX_3X2, DW_ETAPS_3X2, FIX)
K_ASM_LOOPS(dw_edge16, dw_edge_args, DW_EDGE_ANY)
K_ASM_LOOPS(dw_edge16_3x2, dw_edge_args, DW_EDGE_3X2)
/* By [nky == 3 && nkx == 2 for every pixel of the call][all shifts negative]. */
static void (*const dw_edge_fn[2][2])(dw_edge_args *) = {{dw_edge16, dw_edge16_neg},
                                                        {dw_edge16_3x2, dw_edge16_3x2_neg}};
#undef DW_EDGE_3X2
#undef DW_EDGE_ANY
#undef DW_ETAPS_3X2
#undef DW_ETAP16
#undef DW_EPIX_3X2
#undef DW_ETAPS_ANY
#undef DW_EDGE
#undef DW_TAPO8
#undef DW_RQ8

/* Valid kernel rows [lo, hi) of output row/column o. */
static inline void dw_valid(int32_t o, int32_t stride, int32_t pad, int32_t dil, int32_t k, int32_t n,
                            int32_t *lo, int32_t *hi) {
  const int32_t i0 = o * stride - pad;
  int32_t l = 0, h = k;
  while (l < h && i0 + l * dil < 0) l++;
  while (h > l && i0 + (h - 1) * dil >= n) h--;
  *lo = l, *hi = h;
}

/* The border columns of the rows whose windows lie inside vertically, row by row: in place (the output
 * overlapping the input, emk_depthwise_conv2d_s8_in_place_lead), where the column runs (dw_col16) would write
 * rows below the ones the row runs have still to read, and for 3x2 windows, where this is the faster. Per row
 * one dw_edge16 call for the left border pixels (each pixel's every group before the next pixel's), the
 * interior run (group by group over the row), one call for the right ones; rows in order. So for every group
 * the pixels are written in raster order, each after its own window has read that group. In place, output
 * pixel q lies on input pixel q - L - k, which only output pixels up to q - k read (depthwise_conv2d_s8.c):
 * done by then, so no write reaches input still to be read. Per column the window's cut is fixed: its block
 * (e[i], left columns first) is set once per call, only x, w and out per row. */
#define DW_EDGE_COLS 4
typedef struct {
  dw_edge_args e[DW_EDGE_COLS];
  const int8_t *w0[DW_EDGE_COLS];
  int32_t ocol[DW_EDGE_COLS];
  int32_t nl, n; /* left columns, all border columns */
  int k32[2];    /* the left / right columns all 3x2 windows (dw_edge16_3x2) */
} dw_edge_cols;

/* The blocks of the border columns (outside [ox_a, ox_b)); 0 if there are more than DW_EDGE_COLS. */
static int dw_edge_cols_init(dw_edge_cols *t, const qconv_params *p, const dw_edge_args *ea, const int8_t *w,
                             int32_t ox_a, int32_t ox_b) {
  const int32_t C = p->in_c, ystep = p->dil_h * p->in_w * C;
  if (p->out_w - (ox_b - ox_a) > DW_EDGE_COLS) return 0;
  t->nl = ox_a, t->n = 0, t->k32[0] = t->k32[1] = p->k_h == 3;
  for (int32_t ox = 0; ox < p->out_w; ox++) {
    if (ox == ox_a) ox = ox_b; /* the interior columns: the row runs */
    if (ox >= p->out_w) break;
    int32_t kx_lo, kx_hi;
    dw_valid(ox, p->stride_w, p->pad_w, p->dil_w, p->k_w, p->in_w, &kx_lo, &kx_hi);
    dw_edge_args *e = &t->e[t->n];
    *e = *ea;
    e->nky = p->k_h, e->nkx = kx_hi - kx_lo, e->xadj = ystep - e->nkx * ea->xstep, e->wadj = (p->k_w - e->nkx) * C;
    e->xcol = (ox * p->stride_w - p->pad_w + kx_lo * p->dil_w) * C;
    e->next = t->n + 1 != t->nl && ox + 1 < p->out_w;
    t->w0[t->n] = w + (size_t)kx_lo * C, t->ocol[t->n] = ox * C;
    t->k32[t->n >= t->nl] &= e->nkx == 2;
    t->n++;
  }
  return 1;
}

/* Border pixels [i0, i1) of dw_edge_cols on the row whose first input row is xrow and whose output is orow. */
static inline void dw_edge_row(dw_edge_cols *t, int32_t i0, int32_t i1, const int8_t *xrow, int8_t *orow, int neg) {
  if (i0 >= i1) return;
  for (int32_t i = i0; i < i1; i++) t->e[i].x = xrow + t->e[i].xcol, t->e[i].w = t->w0[i], t->e[i].out = orow + t->ocol[i];
  dw_edge_fn[t->k32[i0 >= t->nl]][neg](&t->e[i0]);
}

/* Depth multiplier a multiple of 4 (a convolution of a one-channel input is
 * lowered this way, e.g. DS-CNN's first layer): each vector of four output
 * channels reads one input channel, so a tap is the broadcast value
 * (x + input_offset) times a weight vector, one VMLA by scalar per four
 * outputs. Per pixel and input channel the window's values are gathered once
 * into scratch (0 for taps in the padding, which contribute nothing), then
 * every 16 outputs walk the taps with their weights in order. */
static void dw_mult4(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                     const int32_t *mult, const int32_t *shift, int8_t *out, int32_t *xv) {
  const int32_t C = p->in_c, OC = p->out_c, dm = OC / C, off = p->input_offset;
  const int32_t KH = p->k_h, KW = p->k_w, taps = KH * KW;
  const int32x4_t vlo = vdupq_n_s32(p->act_min), vhi = vdupq_n_s32(p->act_max);
  int8_t *op = out;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const int32_t iy0 = oy * p->stride_h - p->pad_h;
      for (int32_t ox = 0; ox < p->out_w; ox++, op += OC) {
        const int32_t ix0 = ox * p->stride_w - p->pad_w;
        int32_t kx_lo, kx_hi;
        dw_valid(ox, p->stride_w, p->pad_w, p->dil_w, KW, p->in_w, &kx_lo, &kx_hi);
        const size_t xs = (size_t)p->dil_w * C;
        for (int32_t c = 0; c < C; c++) {
          int32_t *t = xv;
          for (int32_t ky = 0; ky < KH; ky++, t += KW) {
            const int32_t iy = iy0 + ky * p->dil_h;
            int32_t kx = 0;
            if (iy >= 0 && iy < p->in_h) {
              for (; kx < kx_lo; kx++) t[kx] = 0;
              const int8_t *xp = in + (((size_t)b * p->in_h + iy) * p->in_w + (size_t)(ix0 + kx_lo * p->dil_w)) * C + c;
              for (; kx < kx_hi; kx++, xp += xs) t[kx] = *xp + off;
            }
            for (; kx < KW; kx++) t[kx] = 0;
          }
          for (int32_t j0 = 0; j0 < dm; j0 += 16) {
            const int32_t o0 = c * dm + j0, nv = dm - j0 >= 16 ? 4 : (dm - j0) / 4;
            int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0;
            if (bias) {
              a0 = vldrwq_s32(bias + o0);
              if (nv > 1) a1 = vldrwq_s32(bias + o0 + 4);
              if (nv > 2) a2 = vldrwq_s32(bias + o0 + 8);
              if (nv > 3) a3 = vldrwq_s32(bias + o0 + 12);
            }
            const int8_t *wp = w + o0;
            if (nv == 4) {
              for (int32_t k = 0; k < taps; k++, wp += OC) {
                const int32_t x = xv[k];
                a0 = vmlaq_n_s32(a0, vldrbq_s32(wp), x);
                a1 = vmlaq_n_s32(a1, vldrbq_s32(wp + 4), x);
                a2 = vmlaq_n_s32(a2, vldrbq_s32(wp + 8), x);
                a3 = vmlaq_n_s32(a3, vldrbq_s32(wp + 12), x);
              }
            } else {
              for (int32_t k = 0; k < taps; k++, wp += OC) {
                const int32_t x = xv[k];
                a0 = vmlaq_n_s32(a0, vldrbq_s32(wp), x);
                if (nv > 1) a1 = vmlaq_n_s32(a1, vldrbq_s32(wp + 4), x);
                if (nv > 2) a2 = vmlaq_n_s32(a2, vldrbq_s32(wp + 8), x);
              }
            }
#define DWM_OUT(A, V)                                                                                    \
  vstrbq_s32(op + o0 + 4 * (V),                                                                          \
             vminq_s32(vmaxq_s32(vaddq_n_s32(k_requantize_mve(A, vldrwq_s32(mult + o0 + 4 * (V)),         \
                                                              vldrwq_s32(shift + o0 + 4 * (V))),          \
                                             p->output_offset),                                          \
                                 vlo),                                                                   \
                       vhi))
            DWM_OUT(a0, 0);
            if (nv > 1) DWM_OUT(a1, 1);
            if (nv > 2) DWM_OUT(a2, 2);
            if (nv > 3) DWM_OUT(a3, 3);
#undef DWM_OUT
          }
        }
      }
    }
}

/* The blocks built per call, for programs that do not carry them (compiled
 * by ExecuTorch's own flow, or older ones): into scratch, from the folded
 * bias the program gives (p->beff) or from the weights. Out of line: inlined,
 * it costs the pixel loops below registers. */
static __attribute__((noinline)) const int32_t *dw_blocks(const qconv_params *p, const int8_t *w,
                                                          const int32_t *bias, const int32_t *mult,
                                                          const int32_t *shift, int32_t *blocks) {
  const int32_t C = p->in_c, taps = p->k_h * p->k_w;
  for (int32_t c0 = 0; c0 < C; c0 += 16) {
    int32_t *g = blocks + (c0 / 16) * DW_BLOCK;
    for (int v = 0; v < 4; v++) {
      const int32_t c = c0 + 4 * v;
      const mve_pred16_t pr = vctp32q((uint32_t)(C - c > 0 ? C - c : 0));
      if (p->beff) { /* folded at compile time (emlkit/passes/window_bias.py) */
        vstrwq_s32(g + 4 * v, vldrwq_z_s32(p->beff + c, pr));
      } else {
        int32x4_t ws = vdupq_n_s32(0);
        for (int32_t t = 0; t < taps; t++) ws = vaddq_s32(ws, vldrbq_z_s32(w + (size_t)t * C + c, pr));
        const int32x4_t vb = bias ? vldrwq_z_s32(bias + c, pr) : vdupq_n_s32(0);
        vstrwq_s32(g + 4 * v, vpselq_s32(vmlaq_n_s32(vb, ws, p->input_offset), vdupq_n_s32(0), pr));
      }
      vstrwq_s32(g + 16 + 4 * v, vldrwq_z_s32(mult + c, pr));
      vstrwq_s32(g + 32 + 4 * v, vldrwq_z_s32(shift + c, pr));
    }
  }
  return blocks;
}

/* The border columns of the rows [oy_a, oy_b), each as one run per group down the column (dw_col16); the
 * output apart from the input (their writes run ahead of the row runs' reads). ra: the row runs' arguments,
 * whose fields the row runs set again. */
static void dw_cols(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias, int8_t *out,
                    const int32_t *blocks, dw_run_args *ra, int32_t oy_a, int32_t oy_b, int32_t ox_a, int32_t ox_b,
                    int neg) {
  const int32_t C = p->in_c, xstep = p->dil_w * C, ystep = p->dil_h * p->in_w * C;
  ra->npix = oy_b - oy_a, ra->xpix = p->stride_h * p->in_w * C, ra->opix = p->out_w * C;
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t ox = 0; ox < p->out_w; ox++) {
      if (ox == ox_a && ox_b > ox_a) ox = ox_b; /* the interior columns: the row runs below */
      if (ox >= p->out_w) break;
      int32_t kx_lo, kx_hi;
      dw_valid(ox, p->stride_w, p->pad_w, p->dil_w, p->k_w, p->in_w, &kx_lo, &kx_hi);
      ra->kw = kx_hi - kx_lo, ra->xadj = ystep - ra->kw * xstep, ra->wadj = (p->k_w - ra->kw) * C;
      const size_t x0 = (((size_t)b * p->in_h + (size_t)(oy_a * p->stride_h - p->pad_h)) * p->in_w +
                         (size_t)(ox * p->stride_w - p->pad_w + kx_lo * p->dil_w)) * C;
      for (int32_t c0 = 0; c0 < C; c0 += 16) {
        ra->x = in + x0 + c0, ra->w = w + (size_t)kx_lo * C + c0, ra->init = bias + c0;
        ra->out = out + (((size_t)b * p->out_h + oy_a) * p->out_w + ox) * C + c0;
        ra->g = blocks + (c0 / 16) * DW_BLOCK;
        (neg ? dw_col16_neg : dw_col16)(ra);
      }
    }
}

k_status emk_depthwise_conv2d_s8_mve(const qconv_params *p, const int8_t *in, const int8_t *w,
                          const int32_t *bias, const int32_t *mult, const int32_t *shift,
                          int8_t *out, void *scratch, size_t scratch_size) {
  const int32_t dm = p->out_c / p->in_c;
  const int rq = k_requant_vec_flags(mult, shift, p->out_c);
  const int neg = (rq & K_RQ_NEG) != 0; /* all shifts negative: the run loops' shorter fix-up (K_FIX_NEG) */
  const int ok = dw_mve_multiplier_ok(p, dm) && dw_mve_offset_ok(p) && (rq & K_RQ_OK);
  if (!ok) {
    emk_depthwise_conv2d_s8_ref(p, in, w, bias, mult, shift, out);
    return K_OK;
  }
  if (scratch_size < emk_depthwise_conv2d_s8_get_buffer_size(p) || ((uintptr_t)scratch & 3)) return K_ERR_SCRATCH;
  if (dw_as_conv(p)) DW_AS_CONV(emk_conv2d_s8_mve);
  if (dm > 1) {
    dw_mult4(p, in, w, bias, mult, shift, out, (int32_t *)scratch + ((size_t)p->out_c + 15) / 16 * DW_BLOCK);
    return K_OK;
  }
  const int32_t C = p->in_c, C16 = C & ~15;
  const int32_t xstep = p->dil_w * C, ystep = p->dil_h * p->in_w * C;
  const int32_t *blocks = p->dwblk ? p->dwblk : dw_blocks(p, w, bias, mult, shift, (int32_t *)scratch);
  dw_run_args ra __attribute__((aligned(16)));
  ra.kh = p->k_h, ra.xstep = xstep, ra.wstep = C, ra.off = p->output_offset, ra.ioff = p->input_offset;
  for (int j = 0; j < 8; j++) ra.lo[j] = (int16_t)p->act_min, ra.hi[j] = (int16_t)p->act_max;
  dw_edge_args ea __attribute__((aligned(16))); /* border pixels: the fields fixed per call */
  ea.groups = C16 / 16, ea.xstep = xstep, ea.wstep = C, ea.init = bias, ea.g = blocks;
  ea.off = p->output_offset, ea.ioff = p->input_offset, ea.next = 0;
  for (int j = 0; j < 8; j++) ea.lo[j] = ra.lo[j], ea.hi[j] = ra.hi[j];
  /* output columns whose windows lie inside the input horizontally: [ox_a, ox_b) */
  int32_t ox_a = 0, ox_b = p->out_w;
  while (ox_a < ox_b && ox_a * p->stride_w - p->pad_w < 0) ox_a++;
  while (ox_b > ox_a && (ox_b - 1) * p->stride_w - p->pad_w + (p->k_w - 1) * p->dil_w >= p->in_w) ox_b--;
  /* rows whose windows lie inside the input vertically: [oy_a, oy_b); their border columns (all columns
   * outside [ox_a, ox_b)) each go as one run per group down the column (dw_col16) or row by row
   * (dw_edge_cols), when the channels are whole groups, there is a bias to start from and every such column
   * has a valid tap */
  int32_t oy_a = 0, oy_b = p->out_h;
  while (oy_a < oy_b && oy_a * p->stride_h - p->pad_h < 0) oy_a++;
  while (oy_b > oy_a && (oy_b - 1) * p->stride_h - p->pad_h + (p->k_h - 1) * p->dil_h >= p->in_h) oy_b--;
  /* the column runs not when the output overlaps the input (in place with a lead,
   * emk_depthwise_conv2d_s8_in_place_lead): they write rows below the ones the row runs have still to read */
  const uintptr_t ia = (uintptr_t)in, oa = (uintptr_t)out;
  const int apart = oa + (size_t)p->batch * p->out_h * p->out_w * C <= ia || ia + (size_t)p->batch * p->in_h * p->in_w * C <= oa;
  int cols = C16 == C && C16 && bias && oy_b > oy_a;
  for (int32_t ox = 0; ox < p->out_w && cols; ox++) {
    int32_t kx_lo, kx_hi;
    dw_valid(ox, p->stride_w, p->pad_w, p->dil_w, p->k_w, p->in_w, &kx_lo, &kx_hi);
    cols = kx_hi > kx_lo;
  }
  /* row by row in place, and where that is the faster (3x2 windows: dw_edge16_3x2) */
  dw_edge_cols ec;
  const int rows = cols && dw_edge_cols_init(&ec, p, &ea, w, ox_a, ox_b) && (!apart || (ec.k32[0] && ec.k32[1]));
  cols = cols && apart && !rows;
  if (cols) dw_cols(p, in, w, bias, out, blocks, &ra, oy_a, oy_b, ox_a, ox_b, neg);
  ra.opix = C, ra.kw = p->k_w, ra.xadj = ystep - p->k_w * xstep, ra.xpix = p->stride_w * C; /* the row runs */
  for (int32_t b = 0; b < p->batch; b++)
    for (int32_t oy = 0; oy < p->out_h; oy++) {
      const int32_t iy0 = oy * p->stride_h - p->pad_h;
      int32_t ky_lo, ky_hi;
      dw_valid(oy, p->stride_h, p->pad_h, p->dil_h, p->k_h, p->in_h, &ky_lo, &ky_hi);
      const int row_full = ky_lo == 0 && ky_hi == p->k_h;
      const int edge_rows = rows && row_full;
      if (edge_rows) dw_edge_row(&ec, 0, ec.nl, in + ((size_t)b * p->in_h + iy0) * p->in_w * C,
                                 out + ((size_t)b * p->out_h + oy) * p->out_w * C, neg);
      for (int32_t ox = 0; ox < p->out_w; ox++) {
        int8_t *op = out + (((size_t)b * p->out_h + oy) * p->out_w + ox) * C;
        if (row_full && ox == ox_a && ox_b > ox_a && C16) {
          /* the interior run of this row, all whole 16-channel groups */
          ra.npix = ox_b - ox_a;
          for (int32_t c0 = 0; c0 < C16; c0 += 16) {
            ra.x = in + (((size_t)b * p->in_h + iy0) * p->in_w + (size_t)(ox_a * p->stride_w - p->pad_w)) * C + c0;
            ra.w = w + c0, ra.out = op + c0, ra.g = blocks + (c0 / 16) * DW_BLOCK, ra.init = ra.g;
            if (p->k_h == 3 && p->k_w == 3) (neg ? dw_run16_3x3_neg : dw_run16_3x3)(&ra);
            else (neg ? dw_run16_neg : dw_run16)(&ra);
          }
          if (C16 == C) {
            ox = ox_b - 1;
            continue;
          }
          /* the channels past the last whole group, pixel by pixel below */
          for (int32_t ox2 = ox_a; ox2 < ox_b; ox2++) {
            int8_t *op2 = out + (((size_t)b * p->out_h + oy) * p->out_w + ox2) * C;
            dw_window g;
            g.nky = p->k_h, g.nkx = p->k_w, g.xstep = xstep, g.wstep = C, g.off = p->input_offset;
            g.xadj = ystep - g.nkx * xstep, g.wadj = 0;
            const int8_t *x0 = in + (((size_t)b * p->in_h + iy0) * p->in_w + (size_t)(ox2 * p->stride_w - p->pad_w)) * C;
            const int32_t *gb = blocks + (C16 / 16) * DW_BLOCK;
            dw_store_tail(p, dw_taps_tail(&g, x0 + C16, w + C16, gb, C - C16, 1), gb + 16, gb + 32, op2 + C16,
                          C - C16);
          }
          ox = ox_b - 1;
          continue;
        }
        if ((cols || rows) && row_full) continue; /* a border column: done above, or after the row */
        const int32_t ix0 = ox * p->stride_w - p->pad_w;
        int32_t kx_lo, kx_hi;
        dw_valid(ox, p->stride_w, p->pad_w, p->dil_w, p->k_w, p->in_w, &kx_lo, &kx_hi);
        const int full = row_full && kx_lo == 0 && kx_hi == p->k_w;
        dw_window g;
        g.nky = ky_hi - ky_lo, g.nkx = kx_hi - kx_lo;
        g.xstep = xstep, g.wstep = C, g.off = p->input_offset;
        g.xadj = ystep - g.nkx * xstep, g.wadj = (p->k_w - g.nkx) * C;
        /* first valid tap, as an integer offset so that no pointer outside
         * the input is ever formed */
        const int8_t *x0 = in + ((size_t)b * p->in_h * p->in_w) * C +
                           (((ptrdiff_t)(iy0 + ky_lo * p->dil_h) * p->in_w + ix0 + kx_lo * p->dil_w) * C);
        const int8_t *w0 = w + ((size_t)ky_lo * p->k_w + kx_lo) * C;
        int32_t c0 = 0;
        if (C16 && bias && g.nky > 0 && g.nkx > 0) { /* the whole groups in one asm call */
          ea.x = x0, ea.w = w0, ea.out = op, ea.nky = g.nky, ea.nkx = g.nkx, ea.xadj = g.xadj, ea.wadj = g.wadj;
          dw_edge_fn[g.nky == 3 && g.nkx == 2][neg](&ea);
          c0 = C16;
        }
        for (; c0 + 16 <= C; c0 += 16) {
          /* the block's multipliers and shifts: one pointer for all three */
          const int32_t *gb = blocks + (c0 / 16) * DW_BLOCK;
          dw_pixel16(p, &g, x0 + c0, w0 + c0, full ? gb : (bias ? bias + c0 : NULL), gb + 16, gb + 32, op + c0,
                     full);
        }
        if (c0 < C) {
          const int32_t *gb = blocks + (c0 / 16) * DW_BLOCK;
          dw_store_tail(p, dw_taps_tail(&g, x0 + c0, w0 + c0, full ? gb : (bias ? bias + c0 : NULL), C - c0, full),
                        gb + 16, gb + 32, op + c0, C - c0);
        }
      }
      if (edge_rows) dw_edge_row(&ec, ec.nl, ec.n, in + ((size_t)b * p->in_h + iy0) * p->in_w * C,
                                 out + ((size_t)b * p->out_h + oy) * p->out_w * C, neg);
    }
  return K_OK;
}

/* The dispatcher of the builds that pick this variant (kernels.h: K_CONV_DISPATCHER). */
K_CONV_DISPATCHER(emk_depthwise_conv2d_s8, emk_depthwise_conv2d_s8_mve)
#endif
