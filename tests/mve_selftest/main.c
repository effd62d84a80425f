/* Bare-metal self-test of the Helium kernels under QEMU mps3-an547: each
 * *_mve kernel runs against its portable *_ref twin on random shapes, data
 * and quantization parameters, and the outputs must match byte for byte.
 * Prints one "PASS <kernel> <trials>" or "FAIL <kernel> trial <i> ..." line
 * per kernel and exits with the number of failing kernels.
 *
 * Built with -DBENCH it instead times the reference shapes of NOTES.md
 * (SysTick from the CPU clock; under -icount shift=0 one nanosecond is one
 * instruction) and prints "BENCH <name> <ref_ns> <mve_ns>" lines, used by
 * scripts/bench_kernels.py. Built without MVE (-mcpu=cortex-m55+nomve) the
 * bench prints only the portable figure. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels.h"
#include "emlkit_kernels.h"

/* ---------------------------------------------------------------- memory */
#define BUF 96000
static int8_t g_in[BUF] __attribute__((aligned(16))), g_in2[BUF] __attribute__((aligned(16))), g_w[BUF], g_a[BUF] __attribute__((aligned(16))), g_lut[256];
static int8_t g_b[BUF] __attribute__((unused, aligned(16))); /* MVE output; unused in a no-MVE bench */
static int32_t g_bias[1024], g_mult[1024], g_shift[1024], g_ksum[1024];
#if FW_HAVE_MVE
#define SCRATCH_CAP 8192
#endif
#define SELFTEST_TITLE "MVE self-test: *_mve vs *_ref"
#include "selftest_common.h"

/* Mostly realistic requant pairs; 1 in 8 has a positive shift, which the MVE
 * kernels must hand to their scalar path. */
static UNUSED_FN void rq(int32_t *m, int32_t *s) {
  *m = (int32_t)((1u << 30) + (rnd() >> 2));
  *s = (rnd() & 7) == 0 ? rr(1, 3) : rr(-14, 0);
}
static inline void rq_n(int n) {
  for (int i = 0; i < n; i++) rq(&g_mult[i], &g_shift[i]);
}
static UNUSED_FN void fill_bias(int n) {
  for (int i = 0; i < n; i++) g_bias[i] = rr(-20000, 20000);
}


#if FW_HAVE_MVE && !defined(BENCH)
#define SELFTEST_VARIANT(name) name##_mve
#include "selftest_rnn.h"
#define TRIALS 60
/* Poisons both outputs, runs both calls (void expressions), returns the first difference. */
#define CHECK(n, call_ref, call_mve) (poison(g_a, g_b, (n)), (call_ref), (call_mve), first_diff(g_a, g_b, (n)))

/* A kernel's result on scratch of exactly its asked size, into g_b; a
 * failed status or an overwritten canary is reported as a difference. */
static void conv_mve(k_conv_fn *fn, k_conv_size_fn *size, const qconv_params *p, const int32_t *bias) {
  void *s = scratch_for(size(p));
  if (fn(p, g_in, g_w, bias, g_mult, g_shift, g_b, s, g_scratch_n) != K_OK || !scratch_intact()) memset(g_b, 0x77, 16);
}
static void avgpool_mve(const qpool_params *p, int32_t zp, int32_t m, int32_t sh) {
  void *s = scratch_for(emk_avg_pool2d_s8_get_buffer_size(p));
  if (emk_avg_pool2d_s8_mve(p, g_in, g_b, zp, m, sh, s, g_scratch_n) != K_OK || !scratch_intact()) memset(g_b, 0x77, 16);
}

static void random_conv(qconv_params *p, int depthwise) {
  for (;;) {
    random_conv_window(p);
    p->dil_h = rr(1, 2), p->dil_w = rr(1, 2);
    if (depthwise) {
      p->in_c = rr(1, 40);
      p->out_c = p->in_c * ((rnd() & 3) == 0 ? 2 : 1);
      p->groups = p->in_c;
    } else {
      p->groups = (rnd() & 3) == 0 ? 2 : 1;
      p->in_c = rr(1, 24) * p->groups;
      p->out_c = rr(1, 12) * p->groups;
    }
    p->input_offset = rr(-127, 128), p->output_offset = rr(-128, 127);
    p->act_min = rr(-128, 0), p->act_max = rr(0, 127);
    if (conv_output(p)) return;
  }
}

/* Wider shapes with vector-friendly requantization (shift <= 0 on every
 * channel), so the Helium fast paths run rather than their scalar fallbacks:
 * conv with up to 80 output channels (several per-channel chunks), K up to
 * 5*5*48 (beyond the stack im2col limit), input offsets now and then outside
 * the int8 pad range; depthwise with up to 300 channels (16-channel steps,
 * predicated tails, several channel ranges). */
static void random_conv_wide(qconv_params *p, int depthwise, int t) {
  for (;;) {
    random_conv_window(p);
    if (!depthwise && t % 6 == 0) p->k_h = 5, p->k_w = 5;
    p->dil_h = rr(1, 2), p->dil_w = rr(1, 2);
    if (t % 4 == 1) p->k_h = p->k_w = 1, p->pad_h = p->pad_w = 0; /* pointwise */
    if (depthwise) {
      p->in_c = t % 5 == 0 ? rr(250, 300) : rr(1, 80);
      p->out_c = p->in_c;
      if (t % 5 == 3) p->in_c = rr(1, 3), p->out_c = p->in_c * 4 * rr(1, 17); /* depth multiplier 4..68 */
      if (t % 10 == 7) { /* whole groups, a bias, padded columns: the border columns as runs (dw_col16) */
        p->in_c = p->out_c = 16 * rr(1, 4);
        p->k_h = 3, p->k_w = rr(2, 3), p->pad_h = rr(0, 1), p->pad_w = rr(1, 2), p->in_h = rr(3, 9), p->in_w = rr(2, 9);
      }
      p->groups = p->in_c;
    } else if (t % 6 == 5) { /* grouped: the general path */
      p->groups = rr(2, 4);
      p->in_c = rr(1, 12) * p->groups;
      p->out_c = rr(1, 20) * p->groups;
    } else {
      p->groups = 1;
      p->in_c = rr(1, 48);
      p->out_c = rr(1, 80);
      if (t % 8 == 1) { /* the kernel with the pixel's row in registers (CONV_MVE_IS_XQ) */
        p->stride_h = p->stride_w = 1;
        p->in_c = (t % 16 == 1) ? 16 * rr(2, 4) : rr(17, 64);
        p->out_c = 4 * rr(1, 20);
        if (t % 32 == 1) p->in_c = 64, p->out_c = 16 * rr(1, 5); /* two pixels at a time (conv_xp64) */
      }
      if (t % 8 == 7) { /* gathered rows of 16 < K <= 64 often (the same kernel, im2col) */
        p->k_h = 3, p->k_w = rr(2, 3);
        p->in_c = rr(2, 7);
        p->out_c = 4 * rr(1, 12);
        if (t % 16 == 15) { /* gathered rows of 32 < K <= 48 with whole 16-channel groups (conv_xr48) */
          p->k_h = rr(9, 12), p->k_w = 4, p->in_c = 1, p->in_h = rr(10, 20), p->dil_h = 1;
          p->out_c = 16 * rr(1, 4);
        }
      }
    }
    p->input_offset = (t % 8 == 3) ? rr(129, 255) : rr(-127, 128);
    p->output_offset = rr(-128, 127);
    p->act_min = rr(-128, 0), p->act_max = rr(0, 127);
    if (conv_output(p)) return;
  }
}
static void rq_vec_n(int n) {
  for (int i = 0; i < n; i++) g_mult[i] = (int32_t)((1u << 30) + (rnd() >> 2)), g_shift[i] = rr(-14, 0);
}

/* Trials [0, TRIALS) on random_conv shapes; [TRIALS, 2 * TRIALS) on the
 * wide ones with vector-friendly requantization, every other pair of them
 * with the folded window bias as the compiler stores it, half of those
 * depthwise ones with the 16-channel blocks too (no scratch for them). */
static long conv_trial(int t, int depthwise) {
  qconv_params p;
  if (t < TRIALS) random_conv(&p, depthwise);
  else random_conv_wide(&p, depthwise, t);
  fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.in_c);
  fill(g_w, (size_t)p.out_c * p.k_h * p.k_w * (depthwise ? 1 : p.in_c / p.groups));
  fill_bias(p.out_c);
  if (t < TRIALS) rq_n(p.out_c);
  else rq_vec_n(p.out_c);
  if (t % 64 == 33) /* every shift negative: the asm loops' K_FIX_NEG variants */
    for (int32_t i = 0; i < p.out_c; i++) g_shift[i] -= g_shift[i] == 0;
  const int32_t *bias = (t & 1) ? g_bias : NULL;
  if (t >= TRIALS && ((t >> 1) & 1)) p.beff = window_bias(&p, g_w, bias, depthwise);
  if (p.beff && depthwise && p.out_c == p.in_c && ((t >> 2) & 1)) p.dwblk = dw_blocks(&p, p.beff, g_mult, g_shift);
  const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.out_c;
  const long d = depthwise ? CHECK(n, emk_depthwise_conv2d_s8_ref(&p, g_in, g_w, bias, g_mult, g_shift, g_a),
                                   conv_mve(emk_depthwise_conv2d_s8_mve, emk_depthwise_conv2d_s8_get_buffer_size, &p, bias))
                           : CHECK(n, emk_conv2d_s8_ref(&p, g_in, g_w, bias, g_mult, g_shift, g_a),
                                   conv_mve(emk_conv2d_s8_mve, emk_conv2d_s8_get_buffer_size, &p, bias));
  if (d >= 0 && g_bad < 0) print_conv(&p);
  return d;
}
static long trial_conv(int t) { return conv_trial(t, 0); }
static long trial_dwconv(int t) { return conv_trial(t, 1); }

#define IN_PLACE_RQ(n) rq_vec_n(n)
#include "selftest_in_place.h"

static long trial_linear(int t) {
  qlinear_params p = {rr(1, 3), rr(1, 100), rr(1, 13), rr(-127, 128), rr(-10, 10), rr(-128, 127), 0, 0,
                      rr(-128, 0), rr(0, 127)};
  rq(&p.mult, &p.shift);
  fill(g_in, (size_t)p.rows * p.k);
  fill(g_w, (size_t)p.n * p.k);
  fill_bias(p.n);
  for (int i = 0; i < p.n; i++) g_ksum[i] = rr(-50000, 50000);
  const int mode = t % 3; /* kernel_sum, bias, neither */
  const int32_t *bias = mode == 1 ? g_bias : NULL, *ks = mode == 0 ? g_ksum : NULL;
  return CHECK((size_t)p.rows * p.n, emk_linear_s8_ref(&p, g_in, g_w, bias, ks, g_a),
               emk_linear_s8_mve(&p, g_in, g_w, bias, ks, g_b));
}

static long trial_bmm(int t) {
  qbmm_params p = {rr(1, 3), rr(1, 6), rr(1, 9), t % 2 ? rr(1, 20) : rr(1, 60), rr(-127, 128), rr(-127, 128),
                   rr(-128, 127), 0, 0}; /* odd trials: the small-k path (k <= 16) and either side of it */
  rq(&p.mult, &p.shift);
  fill(g_in, (size_t)p.batch * p.m * p.k);
  fill(g_in2, (size_t)p.batch * p.n * p.k);
  return CHECK((size_t)p.batch * p.m * p.n, emk_batch_matmul_s8_ref(&p, g_in, g_in2, g_a), emk_batch_matmul_s8_mve(&p, g_in, g_in2, g_b));
}

static long trial_add(int t) {
  qadd_params p = {rr(-128, 127), 0, 0, rr(-128, 127), 0, 0, rr(-128, 127), 0, 0, rr(-128, 0), rr(0, 127)};
  rq(&p.a_mult, &p.a_shift);
  rq(&p.b_mult, &p.b_shift);
  rq(&p.out_mult, &p.out_shift);
  if (t & 1) p.a_shift = rr(-2, 0), p.b_shift = rr(-2, 0), p.out_shift = rr(-22, -15); /* realistic add */
  size_t an, bn;
  const size_t n = bcast_case(t, g_in, g_in2, 0, &an, &bn);
  return CHECK(n, emk_add_s8_ref(g_in, an, g_in2, bn, g_a, &p), emk_add_s8_mve(g_in, an, g_in2, bn, g_b, &p));
}

static long trial_mul(int t) {
  qmul_params p = {rr(-128, 127), rr(-128, 127), rr(-128, 127), 0, 0};
  rq(&p.out_mult, &p.out_shift);
  size_t an, bn;
  const size_t n = bcast_case(t, g_in, g_in2, 0, &an, &bn);
  return CHECK(n, emk_mul_s8_ref(g_in, an, g_in2, bn, g_a, &p), emk_mul_s8_mve(g_in, an, g_in2, bn, g_b, &p));
}

static long trial_lut(int t) {
  const size_t n = (size_t)rr(1, 1000);
  fill(g_in, n);
  fill(g_lut, 256);
  return CHECK(n, emk_lut_s8_ref(g_in, g_a, n, g_lut), emk_lut_s8_mve(g_in, g_b, n, g_lut));
}

#if FW_HAVE_MVE_FP
static const k_dtype g_dtypes[4] = {K_U8, K_S8, K_S16, K_S32};
/* float32 edges: random values with NaN, infinities, denormals, halfway cases
 * and out-of-range ones, in the existing buffers (.bss is nearly as large as
 * the data memory); outputs compared as bytes */
static long trial_quantize(int t) {
  float *f = (float *)(void *)g_in;
  int32_t *qa = (int32_t *)(void *)g_a, *qb = (int32_t *)(void *)g_b;
  const size_t n = (size_t)rr(1, 1200);
  const double scale = (double)rr(1, 100000) / (double)rr(1, 3000000);
  const k_dtype dt = g_dtypes[t % 4];
  const int32_t qmin = dt == K_U8 ? 0 : dt == K_S8 ? -128 : dt == K_S16 ? -32768 : -1000000;
  const int32_t qmax = dt == K_U8 ? 255 : dt == K_S8 ? 127 : dt == K_S16 ? 32767 : 1000000;
  const int32_t zp = rr(qmin / 2, qmax / 2);
  for (size_t i = 0; i < n; i++) {
    const uint32_t k = rnd() % 16;
    uint32_t bits = rnd();
    float v;
    memcpy(&v, &bits, 4);
    if (k == 0) v = (float)(rr(-300, 300)) * (float)scale + 0.5f * (float)scale; /* ties after scaling */
    else if (k == 1) bits &= 0x807FFFFFu, memcpy(&v, &bits, 4);                   /* denormals */
    else if (k < 10) v = (float)rr(-2000000, 2000000) * (float)scale / 1000.0f;
    f[i] = v;
  }
  return CHECK(4800, emk_quantize_f32_ref(f, n, scale, zp, qmin, qmax, dt, qa),
               emk_quantize_f32_mve(f, n, scale, zp, qmin, qmax, dt, qb));
}
static long trial_dequantize(int t) {
  float *fa = (float *)(void *)g_a, *fb = (float *)(void *)g_b;
  const size_t n = (size_t)rr(1, 1200);
  const k_dtype dt = g_dtypes[t % 4];
  for (size_t i = 0; i < n; i++) ((int32_t *)(void *)g_in2)[i] = (int32_t)rnd();
  const double scale = (double)rr(1, 100000) / (double)rr(1, 3000000);
  const int32_t zp = rr(-100, 100);
  return CHECK(4800, emk_dequantize_f32_ref(g_in2, dt, n, scale, zp, fa), emk_dequantize_f32_mve(g_in2, dt, n, scale, zp, fb));
}
#endif

/* A random pooling case (redrawn until it has an output); every third wide
 * enough for the average pool's table path (taps x channels >= 256). */
static size_t pool_case(int t, qpool_params *p) {
  while (!random_pool(p, t % 3 == 2 ? rr(40, 300) : rr(1, 40))) {
    /* no output: draw again */
  }
  fill(g_in, (size_t)p->batch * p->in_h * p->in_w * p->c);
  return (size_t)p->batch * p->out_h * p->out_w * p->c;
}
static long trial_maxpool(int t) {
  qpool_params p;
  const size_t n = pool_case(t, &p);
  const int32_t lo = rr(-128, 0), hi = rr(0, 127);
  return CHECK(n, emk_max_pool2d_s8_ref(&p, g_in, g_a, lo, hi), emk_max_pool2d_s8_mve(&p, g_in, g_b, lo, hi));
}
static long trial_avgpool(int t) {
  qpool_params p;
  const size_t n = pool_case(t, &p);
  int32_t m, s, zp = rr(-128, 127);
  rq(&m, &s);
  /* power-of-two scales make averages land exactly on .5: the ties the
     vector finish must hand to the scalar divisions */
  if (t % 2) m = 1 << 30, s = rr(-12, 0);
  return CHECK(n, emk_avg_pool2d_s8_ref(&p, g_in, g_a, zp, m, s), avgpool_mve(&p, zp, m, s));
}

/* emlkit::quantized_avg_pool2d: no padding, every window whole; channel
   counts around the 16-lane tail, global and strided windows */
static long trial_emlkit_avgpool(int t) {
  qpool_params p;
  p.batch = rr(1, 2), p.in_h = rr(1, 9), p.in_w = rr(1, 9), p.c = t % 3 == 2 ? rr(40, 300) : rr(1, 40);
  p.k_h = t % 4 == 0 ? p.in_h : rr(1, p.in_h), p.k_w = t % 4 == 0 ? p.in_w : rr(1, p.in_w);
  p.stride_h = rr(1, 3), p.stride_w = rr(1, 3), p.pad_h = 0, p.pad_w = 0;
  p.out_h = (p.in_h - p.k_h) / p.stride_h + 1, p.out_w = (p.in_w - p.k_w) / p.stride_w + 1;
  fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.c);
  const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.c;
  const int32_t izp = rr(-128, 127), ozp = rr(-128, 127), m = rr(1 << 30, 0x7fffffff), s = rr(20, 40);
  return CHECK(n, emk_emlkit_avg_pool2d_s8_ref(&p, g_in, g_a, izp, ozp, m, s),
               emk_emlkit_avg_pool2d_s8_mve(&p, g_in, g_b, izp, ozp, m, s));
}

/* emlkit::upsample_bilinear2d: NHWC, channel counts around the 4-lane tail, up- and downscales; row and
   column tables with weights anywhere in [0, 2^11], end rows read twice */
#define g_rows g_mult /* the requant arrays, unused here: DTCM is nearly full */
#define g_cols g_shift
static void bilinear_table(int32_t *t, int32_t n_out, int32_t n_in) {
  for (int32_t i = 0; i < n_out; i++) {
    const int32_t i0 = rr(0, n_in - 1);
    t[3 * i] = i0, t[3 * i + 1] = i0 + 1 < n_in ? i0 + 1 : i0, t[3 * i + 2] = rr(0, EMLKIT_BILINEAR_ONE);
  }
}
static long trial_emlkit_bilinear(int t) {
  const int32_t nb = rr(1, 2), h = rr(1, 9), w = rr(1, 9), c = t % 3 == 2 ? rr(17, 90) : rr(1, 16);
  const int32_t side = c > 16 ? 16 : 32, oh = rr(1, side), ow = rr(1, side); /* outputs within BUF */
  bilinear_table(g_rows, oh, h);
  bilinear_table(g_cols, ow, w);
  fill(g_in, (size_t)nb * h * w * c);
  const size_t n = (size_t)nb * oh * ow * c;
  const int32_t izp = rr(-128, 127), ozp = rr(-128, 127), m = rr(1 << 30, 0x7fffffff), s = rr(20, 40);
  return CHECK(n, emk_emlkit_resize_bilinear_s8_ref(g_in, g_a, nb, h, w, c, oh, ow, g_rows, g_cols, izp, ozp, m, s),
               emk_emlkit_resize_bilinear_s8_mve(g_in, g_b, nb, h, w, c, oh, ow, g_rows, g_cols, izp, ozp, m, s));
}

#include "selftest_shared.h"
static void selftest(void) {
  run_shared_trials(2 * TRIALS, TRIALS);
  run_trials("emk_depthwise_conv2d_s8_in_place", 2 * TRIALS, trial_dwconv_in_place);
  run_trials("emk_batch_matmul_s8", TRIALS, trial_bmm);
#if FW_HAVE_MVE_FP
  run_trials("emk_quantize_f32", TRIALS, trial_quantize);
  run_trials("emk_dequantize_f32", TRIALS, trial_dequantize);
#endif
  run_trials("emk_emlkit_avg_pool2d_s8", TRIALS, trial_emlkit_avgpool);
  run_trials("emk_emlkit_resize_bilinear_s8", TRIALS, trial_emlkit_bilinear);
}
#endif

/* ---------------------------------------------------------------- bench */
#ifdef BENCH
/* the whole scratch: no canary work inside the timing */
#define CONV_BENCH(fn, c) (void)(fn)((c), g_in, g_w, g_bias, g_mult, g_shift, g_b, g_scratch, SCRATCH_CAP)
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define CPU_HZ 32000000u /* QEMU's AN547 CPU clock, which SysTick counts */

static void timer_start(void) {
  SYST_CSR = 0;
  SYST_RVR = 0x00FFFFFFu;
  SYST_CVR = 0;
  SYST_CSR = 5u; /* processor clock, enabled, no interrupt */
}
/* Nanoseconds since timer_start (one per instruction under -icount shift=0);
 * 24 bits of 32 MHz ticks cover 0.5 s, far more than any call here. */
static uint32_t timer_ns(void) {
  const uint32_t ticks = (0x00FFFFFFu - SYST_CVR) & 0x00FFFFFFu;
  return (uint32_t)(((uint64_t)ticks * 1000000000ull) / CPU_HZ);
}

#define TIME(reps, call, out)                      \
  do {                                             \
    timer_start();                                 \
    for (int r_ = 0; r_ < (reps); r_++) { call; }  \
    (out) = timer_ns() / (uint32_t)(reps);         \
  } while (0)

#if FW_HAVE_MVE
#define BENCH2(name, reps, ref_call, mve_call)                             \
  do {                                                                     \
    uint32_t tr_, tm_;                                                     \
    TIME(reps, ref_call, tr_);                                             \
    TIME(reps, mve_call, tm_);                                             \
    printf("BENCH %s %lu %lu\n", name, (unsigned long)tr_, (unsigned long)tm_); \
  } while (0)
#else
#define BENCH2(name, reps, ref_call, mve_call)                             \
  do {                                                                     \
    uint32_t tr_;                                                          \
    TIME(reps, ref_call, tr_);                                             \
    printf("BENCH %s %lu -\n", name, (unsigned long)tr_);                  \
  } while (0)
#endif

static void calibrate(void) {
  /* 2 instructions per iteration (SUBS + BNE) */
  uint32_t t;
  uint32_t n = 100000;
  timer_start();
  __asm volatile("1: subs %0, %0, #1\n bne 1b" : "+r"(n) : : "cc");
  t = timer_ns();
  printf("CALIB 200000 %lu\n", (unsigned long)t);
}

static void bench(void) {
  calibrate();
  for (size_t i = 0; i < N_BENCH_LAYERS; i++) {
    const bench_layer *b = &g_bench_layers[i];
    if (!(b->on & BENCH_ON_MVE)) continue;
    bench_conv_inputs(&b->c, g_in, g_w, fill_bias, g_mult, g_shift);
    k_conv_ref_fn *ref = b->dw ? emk_depthwise_conv2d_s8_ref : emk_conv2d_s8_ref;
#if FW_HAVE_MVE
    k_conv_fn *fast = b->dw ? emk_depthwise_conv2d_s8_mve : emk_conv2d_s8_mve;
#endif
    BENCH2(b->name, 1, ref(&b->c, g_in, g_w, g_bias, g_mult, g_shift, g_a), CONV_BENCH(fast, &b->c));
  }
  /* fully connected 640 -> 128 (kernel_sum form, as the M55 flow emits) */
  qlinear_params l = {1, 640, 128, 128, 0, -5, 1 << 30, -9, -128, 127};
  fill(g_in, 640), fill(g_w, 640 * 128);
  for (int i = 0; i < 128; i++) g_ksum[i] = rr(-50000, 50000);
  BENCH2("fc_640_128", 4, emk_linear_s8_ref(&l, g_in, g_w, NULL, g_ksum, g_a),
         emk_linear_s8_mve(&l, g_in, g_w, NULL, g_ksum, g_b));
  /* add of 8192 int8 */
  qadd_params a = {-32, 1073741824, 0, -27, 1207176104, -1, -30, 1782644083, -19, -128, 127};
  fill(g_in, 8192), fill(g_in2, 8192);
  BENCH2("add_8192", 4, emk_add_s8_ref(g_in, 8192, g_in2, 8192, g_a, &a), emk_add_s8_mve(g_in, 8192, g_in2, 8192, g_b, &a));
  /* average pool over an 8x8x64 input (global: 8x8 window -> 1x1x64) */
  qpool_params p = {1, 8, 8, 64, 1, 1, 8, 8, 8, 8, 0, 0};
  fill(g_in, 8 * 8 * 64);
#if FW_HAVE_MVE_FP
  BENCH2("avgpool_8x8x64", 10, emk_avg_pool2d_s8_ref(&p, g_in, g_a, -3, 1319009920, -6),
         (void)emk_avg_pool2d_s8_mve(&p, g_in, g_b, -3, 1319009920, -6, g_scratch, SCRATCH_CAP));
#else
  BENCH2("avgpool_8x8x64", 10, emk_avg_pool2d_s8_ref(&p, g_in, g_a, -3, 1319009920, -6),
         (void)emk_avg_pool2d_s8(&p, g_in, g_b, -3, 1319009920, -6, NULL, 0));
#endif
  /* softmax 1x1000 (portable only: no MVE variant) */
  fill(g_in, 1000);
  {
    uint32_t t;
    TIME(1, emk_softmax_s8_ref(g_in, g_a, 1, 1000, 1, -55, -128, 1272620416, 19), t);
    printf("BENCH softmax_1x1000 %lu -\n", (unsigned long)t);
  }
#if FW_HAVE_MVE
  /* MobileNetV2 (96x96) and DS-CNN layer shapes where tiles, weight sums and
     per-call set-up dominate: MVE variant only (scripts/bench_cmsis_nn.py compares
     the whole model against CMSIS-NN) */
  {
    static const struct { const char *name; qconv_params c; int dw; } mv2[] = {
        {"mv2_conv1x1_48x48x16_8", {1, 48, 48, 16, 48, 48, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, 128, -5, -128, 127, NULL, NULL}, 0},
        {"mv2_conv1x1_3x3x56_336", {1, 3, 3, 56, 3, 3, 336, 1, 1, 1, 1, 0, 0, 1, 1, 1, 128, -5, -128, 127, NULL, NULL}, 0},
        {"mv2_conv1x1_3x3x336_56", {1, 3, 3, 336, 3, 3, 56, 1, 1, 1, 1, 0, 0, 1, 1, 1, 128, -5, -128, 127, NULL, NULL}, 0},
        {"mv2_conv1x1_12x12x96_16", {1, 12, 12, 96, 12, 12, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, 128, -5, -128, 127, NULL, NULL}, 0},
        {"mv2_dw3x3_3x3x336", {1, 3, 3, 336, 3, 3, 336, 3, 3, 1, 1, 1, 1, 1, 1, 336, 128, -5, -128, 127, NULL, NULL}, 1},
        {"mv2_dw3x3s2_6x6x192", {1, 6, 6, 192, 3, 3, 192, 3, 3, 2, 2, 1, 1, 1, 1, 192, 128, -5, -128, 127, NULL, NULL}, 1},
        {"mv2_dw3x3s2_12x12x96", {1, 12, 12, 96, 6, 6, 96, 3, 3, 2, 2, 1, 1, 1, 1, 96, 128, -5, -128, 127, NULL, NULL}, 1},
        /* DS-CNN's first layer: a one-channel 10x4 convolution, lowered as depthwise x64 */
        {"dscnn_dw10x4s2_49x10x1_x64", {1, 49, 10, 1, 25, 5, 64, 10, 4, 2, 2, 5, 1, 1, 1, 1, 128, -5, -128, 127, NULL, NULL}, 1},
    };
    for (size_t i = 0; i < sizeof mv2 / sizeof mv2[0]; i++) {
      bench_conv_inputs(&mv2[i].c, g_in, g_w, fill_bias, g_mult, g_shift);
      k_conv_fn *fast = mv2[i].dw ? emk_depthwise_conv2d_s8_mve : emk_conv2d_s8_mve;
      uint32_t t;
      TIME(1, CONV_BENCH(fast, &mv2[i].c), t);
      printf("BENCH %s - %lu\n", mv2[i].name, (unsigned long)t);
    }
  }
#endif
#if FW_HAVE_MVE_FP
  {
    qpool_params gp = {1, 3, 3, 1280, 1, 1, 3, 3, 3, 3, 0, 0};
    uint32_t t;
    fill(g_in, 3 * 3 * 1280);
    TIME(1, (void)emk_avg_pool2d_s8_mve(&gp, g_in, g_b, -3, 1319009920, -6, g_scratch, SCRATCH_CAP), t);
    printf("BENCH mv2_avgpool_3x3x1280 - %lu\n", (unsigned long)t);
    qpool_params dp = {1, 25, 5, 64, 1, 1, 25, 5, 25, 5, 0, 0}; /* DS-CNN's global pool */
    fill(g_in, 25 * 5 * 64);
    TIME(1, (void)emk_avg_pool2d_s8_mve(&dp, g_in, g_b, -3, 1319009920, -6, g_scratch, SCRATCH_CAP), t);
    printf("BENCH dscnn_avgpool_25x5x64 - %lu\n", (unsigned long)t);
  }
#endif
  /* table lookup, 8192 int8 */
  fill(g_in, 8192), fill(g_lut, 256);
  BENCH2("lut_8192", 4, emk_lut_s8_ref(g_in, g_a, 8192, g_lut), emk_lut_s8_mve(g_in, g_b, 8192, g_lut));
}
#endif

#if !FW_HAVE_MVE && !defined(BENCH)
static void selftest(void) {
  printf("FAIL: self-test built without MVE\n");
  g_failed_kernels++;
}
#endif
