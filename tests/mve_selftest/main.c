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

static uint32_t g_rng = 0x12345678u;
static uint32_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return g_rng;
}
static int32_t rr(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); }
static void fill(int8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (int8_t)rnd();
}
/* Mostly realistic requant pairs; 1 in 8 has a positive shift, which the MVE
 * kernels must hand to their scalar path. */
static void rq(int32_t *m, int32_t *s) {
  *m = (int32_t)((1u << 30) + (rnd() >> 2));
  *s = (rnd() & 7) == 0 ? rr(1, 3) : rr(-14, 0);
}
static inline void rq_n(int n) {
  for (int i = 0; i < n; i++) rq(&g_mult[i], &g_shift[i]);
}
/* The folded window bias the compiler stores (aot/passes/window_bias.py): per
 * output channel bias + input_offset * sum(all its weights), int32 wrap. */
static int32_t g_beff[1024];
static __attribute__((unused)) const int32_t *window_bias(const qconv_params *p, const int8_t *w, const int32_t *bias, int depthwise) {
  const int32_t k = p->k_h * p->k_w * (depthwise ? 1 : p->in_c / p->groups);
  for (int32_t o = 0; o < p->out_c; o++) {
    uint32_t s = 0;
    for (int32_t t = 0; t < k; t++) s += (uint32_t)(depthwise ? w[(size_t)t * p->out_c + o] : w[(size_t)o * k + t]);
    g_beff[o] = (int32_t)((bias ? (uint32_t)bias[o] : 0u) + (uint32_t)p->input_offset * s);
  }
  return g_beff;
}

static void fill_bias(int n) {
  for (int i = 0; i < n; i++) g_bias[i] = rr(-20000, 20000);
}

static inline int32_t conv_out(int32_t n, int32_t k, int32_t s, int32_t p, int32_t d) {
  return (n + 2 * p - d * (k - 1) - 1) / s + 1;
}

static int g_failed_kernels;
static inline int report(const char *name, int trials, int bad_trial, size_t bad_at) {
  if (bad_trial >= 0) {
    printf("FAIL %s trial %d first difference at byte %u\n", name, bad_trial, (unsigned)bad_at);
    g_failed_kernels++;
    return 1;
  }
  printf("PASS %s %d\n", name, trials);
  return 0;
}
static inline long first_diff(const int8_t *a, const int8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return (long)i;
  return -1;
}

#if FW_HAVE_MVE
/* Scratch for the kernels that take it: exactly <name>_get_buffer_size bytes,
 * followed by canary bytes that must survive the call. */
#define SCRATCH_CAP 8192
static uint8_t g_scratch[SCRATCH_CAP + 64] __attribute__((aligned(16)));
static size_t g_scratch_n;
static __attribute__((unused)) void *scratch_for(size_t n) {
  if (n > SCRATCH_CAP) {
    printf("FAIL scratch: %u bytes asked, the self-test has %u\n", (unsigned)n, (unsigned)SCRATCH_CAP);
    g_failed_kernels++;
    n = SCRATCH_CAP;
  }
  g_scratch_n = n;
  memset(g_scratch, 0xA5, sizeof g_scratch);
  return g_scratch;
}
static __attribute__((unused)) int scratch_intact(void) {
  for (size_t i = g_scratch_n; i < sizeof g_scratch; i++)
    if (g_scratch[i] != 0xA5) return 0;
  return 1;
}
/* the bench passes the whole scratch: no canary work inside the timing */
#define CONV_BENCH(fn, p, bias, out) \
  (void)fn##_mve((p), g_in, g_w, (bias), g_mult, g_shift, (out), g_scratch, SCRATCH_CAP)

#define POOL_MVE(p, zp, m, s)                                                                          \
  do {                                                                                                 \
    void *s_ = scratch_for(qavgpool_s8_get_buffer_size(p));                                            \
    if (qavgpool_s8_mve((p), g_in, g_b, (zp), (m), (s), s_, g_scratch_n) != K_OK || !scratch_intact()) \
      memset(g_b, 0x77, 16);                                                                           \
  } while (0)
#define CONV_MVE(fn, p, bias, out)                                                                     \
  do {                                                                                                 \
    void *s_ = scratch_for(fn##_get_buffer_size(p));                                                   \
    if (fn##_mve((p), g_in, g_w, (bias), g_mult, g_shift, (out), s_, g_scratch_n) != K_OK ||           \
        !scratch_intact())                                                                             \
      memset((out), 0x77, 16); /* reported as a difference */                                          \
  } while (0)

#endif

#if FW_HAVE_MVE && !defined(BENCH)
#define TRIALS 60
#define CHECK(name, n, call_ref, call_mve)                  \
  do {                                                      \
    memset(g_a, 0x55, (n));                                 \
    memset(g_b, 0x55, (n));                                 \
    call_ref;                                               \
    call_mve;                                               \
    const long d_ = first_diff(g_a, g_b, (n));              \
    if (d_ >= 0 && bad < 0) bad = t, bad_at = (size_t)d_;   \
  } while (0)

/* the shape of the first failing case, to reproduce it */
static void print_conv(const qconv_params *p) {
  printf("  shape: n%ld %ldx%ldx%ld -> %ldx%ldx%ld k%ldx%ld s%ld,%ld p%ld,%ld d%ld,%ld g%ld in_off %ld\n",
         (long)p->batch, (long)p->in_h, (long)p->in_w, (long)p->in_c, (long)p->out_h, (long)p->out_w,
         (long)p->out_c, (long)p->k_h, (long)p->k_w, (long)p->stride_h, (long)p->stride_w, (long)p->pad_h,
         (long)p->pad_w, (long)p->dil_h, (long)p->dil_w, (long)p->groups, (long)p->input_offset);
}

static void random_conv(qconv_params *p, int depthwise) {
  for (;;) {
    memset(p, 0, sizeof *p);
    p->batch = rr(1, 2);
    p->in_h = rr(1, 9), p->in_w = rr(1, 9);
    p->k_h = rr(1, 3), p->k_w = rr(1, 3);
    p->stride_h = rr(1, 2), p->stride_w = rr(1, 2);
    p->pad_h = rr(0, 2), p->pad_w = rr(0, 2);
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
    p->out_h = conv_out(p->in_h, p->k_h, p->stride_h, p->pad_h, p->dil_h);
    p->out_w = conv_out(p->in_w, p->k_w, p->stride_w, p->pad_w, p->dil_w);
    if (p->out_h >= 1 && p->out_w >= 1) return;
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
    memset(p, 0, sizeof *p);
    p->batch = rr(1, 2);
    p->in_h = rr(1, 9), p->in_w = rr(1, 9);
    p->k_h = rr(1, 3), p->k_w = rr(1, 3);
    if (!depthwise && t % 6 == 0) p->k_h = 5, p->k_w = 5;
    p->stride_h = rr(1, 2), p->stride_w = rr(1, 2);
    p->pad_h = rr(0, 2), p->pad_w = rr(0, 2);
    p->dil_h = rr(1, 2), p->dil_w = rr(1, 2);
    if (t % 4 == 1) p->k_h = p->k_w = 1, p->pad_h = p->pad_w = 0; /* pointwise */
    if (depthwise) {
      p->in_c = t % 5 == 0 ? rr(250, 300) : rr(1, 80);
      p->out_c = p->in_c;
      if (t % 5 == 3) p->in_c = rr(1, 3), p->out_c = p->in_c * 4 * rr(1, 17); /* depth multiplier 4..68 */
      p->groups = p->in_c;
    } else {
      p->groups = 1;
      p->in_c = rr(1, 48);
      p->out_c = rr(1, 80);
    }
    p->input_offset = (t % 8 == 3) ? rr(129, 255) : rr(-127, 128);
    p->output_offset = rr(-128, 127);
    p->act_min = rr(-128, 0), p->act_max = rr(0, 127);
    p->out_h = conv_out(p->in_h, p->k_h, p->stride_h, p->pad_h, p->dil_h);
    p->out_w = conv_out(p->in_w, p->k_w, p->stride_w, p->pad_w, p->dil_w);
    if (p->out_h >= 1 && p->out_w >= 1) return;
  }
}
static void rq_vec_n(int n) {
  for (int i = 0; i < n; i++) g_mult[i] = (int32_t)((1u << 30) + (rnd() >> 2)), g_shift[i] = rr(-14, 0);
}

static void selftest(void) {
  int bad;
  size_t bad_at;

  bad = -1, bad_at = 0;
  for (int t = 0; t < TRIALS; t++) {
    qconv_params p;
    random_conv(&p, 0);
    fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.in_c);
    fill(g_w, (size_t)p.out_c * p.k_h * p.k_w * (p.in_c / p.groups));
    fill_bias(p.out_c);
    rq_n(p.out_c);
    const int32_t *bias = (t & 1) ? g_bias : NULL;
    const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.out_c;
    CHECK("conv", n, qconv2d_s8_ref(&p, g_in, g_w, bias, g_mult, g_shift, g_a),
          CONV_MVE(qconv2d_s8, &p, bias, g_b));
    if (bad == t) print_conv(&p);
  }
  for (int t = TRIALS; t < 2 * TRIALS; t++) {
    qconv_params p;
    random_conv_wide(&p, 0, t);
    fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.in_c);
    fill(g_w, (size_t)p.out_c * p.k_h * p.k_w * p.in_c);
    fill_bias(p.out_c);
    rq_vec_n(p.out_c);
    const int32_t *bias = (t & 1) ? g_bias : NULL;
    if ((t >> 1) & 1) p.beff = window_bias(&p, g_w, bias, 0); /* as the compiler stores it */
    const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.out_c;
    CHECK("conv", n, qconv2d_s8_ref(&p, g_in, g_w, bias, g_mult, g_shift, g_a),
          CONV_MVE(qconv2d_s8, &p, bias, g_b));
    if (bad == t) print_conv(&p);
  }
  report("qconv2d_s8", 2 * TRIALS, bad, bad_at);

  bad = -1, bad_at = 0;
  for (int t = 0; t < TRIALS; t++) {
    qconv_params p;
    random_conv(&p, 1);
    fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.in_c);
    fill(g_w, (size_t)p.k_h * p.k_w * p.out_c);
    fill_bias(p.out_c);
    rq_n(p.out_c);
    const int32_t *bias = (t & 1) ? g_bias : NULL;
    const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.out_c;
    CHECK("dw", n, qdwconv2d_s8_ref(&p, g_in, g_w, bias, g_mult, g_shift, g_a),
          CONV_MVE(qdwconv2d_s8, &p, bias, g_b));
  }
  for (int t = TRIALS; t < 2 * TRIALS; t++) {
    qconv_params p;
    random_conv_wide(&p, 1, t);
    fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.in_c);
    fill(g_w, (size_t)p.k_h * p.k_w * p.out_c);
    fill_bias(p.out_c);
    rq_vec_n(p.out_c);
    const int32_t *bias = (t & 1) ? g_bias : NULL;
    if ((t >> 1) & 1) p.beff = window_bias(&p, g_w, bias, 1); /* as the compiler stores it */
    const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.out_c;
    CHECK("dw", n, qdwconv2d_s8_ref(&p, g_in, g_w, bias, g_mult, g_shift, g_a),
          CONV_MVE(qdwconv2d_s8, &p, bias, g_b));
  }
  report("qdwconv2d_s8", 2 * TRIALS, bad, bad_at);

  bad = -1, bad_at = 0;
  for (int t = 0; t < TRIALS; t++) {
    qlinear_params p = {rr(1, 3), rr(1, 100), rr(1, 13), rr(-127, 128), rr(-10, 10), rr(-128, 127), 0, 0,
                        rr(-128, 0), rr(0, 127)};
    rq(&p.mult, &p.shift);
    fill(g_in, (size_t)p.rows * p.k);
    fill(g_w, (size_t)p.n * p.k);
    fill_bias(p.n);
    for (int i = 0; i < p.n; i++) g_ksum[i] = rr(-50000, 50000);
    const int mode = t % 3; /* kernel_sum, bias, neither */
    const int32_t *bias = mode == 1 ? g_bias : NULL, *ks = mode == 0 ? g_ksum : NULL;
    CHECK("fc", (size_t)p.rows * p.n, qlinear_s8_ref(&p, g_in, g_w, bias, ks, g_a),
          qlinear_s8_mve(&p, g_in, g_w, bias, ks, g_b));
  }
  report("qlinear_s8", TRIALS, bad, bad_at);

  bad = -1, bad_at = 0;
  for (int t = 0; t < TRIALS; t++) {
    qbmm_params p = {rr(1, 3), rr(1, 6), rr(1, 9), rr(1, 60), rr(-127, 128), rr(-127, 128), rr(-128, 127), 0, 0};
    rq(&p.mult, &p.shift);
    fill(g_in, (size_t)p.batch * p.m * p.k);
    fill(g_in2, (size_t)p.batch * p.n * p.k);
    CHECK("bmm", (size_t)p.batch * p.m * p.n, qbmm_s8_ref(&p, g_in, g_in2, g_a), qbmm_s8_mve(&p, g_in, g_in2, g_b));
  }
  report("qbmm_s8", TRIALS, bad, bad_at);

  bad = -1, bad_at = 0;
  for (int t = 0; t < TRIALS; t++) {
    qadd_params p = {rr(-128, 127), 0, 0, rr(-128, 127), 0, 0, rr(-128, 127), 0, 0, rr(-128, 0), rr(0, 127)};
    rq(&p.a_mult, &p.a_shift);
    rq(&p.b_mult, &p.b_shift);
    rq(&p.out_mult, &p.out_shift);
    if (t & 1) p.a_shift = rr(-2, 0), p.b_shift = rr(-2, 0), p.out_shift = rr(-22, -15); /* realistic add */
    const size_t n = (size_t)rr(1, 300), c = (size_t)rr(1, 20);
    const size_t an = (t % 3 == 1) ? c : n * c, bn = (t % 3 == 2) ? c : n * c;
    fill(g_in, an);
    fill(g_in2, bn);
    CHECK("add", n * c, qadd_s8_ref(g_in, an, g_in2, bn, g_a, &p), qadd_s8_mve(g_in, an, g_in2, bn, g_b, &p));
  }
  report("qadd_s8", TRIALS, bad, bad_at);

  bad = -1, bad_at = 0;
  for (int t = 0; t < TRIALS; t++) {
    qmul_params p = {rr(-128, 127), rr(-128, 127), rr(-128, 127), 0, 0};
    rq(&p.out_mult, &p.out_shift);
    const size_t n = (size_t)rr(1, 300), c = (size_t)rr(1, 20);
    const size_t an = (t % 3 == 1) ? c : n * c, bn = (t % 3 == 2) ? c : n * c;
    fill(g_in, an);
    fill(g_in2, bn);
    CHECK("mul", n * c, qmul_s8_ref(g_in, an, g_in2, bn, g_a, &p), qmul_s8_mve(g_in, an, g_in2, bn, g_b, &p));
  }
  report("qmul_s8", TRIALS, bad, bad_at);

  bad = -1, bad_at = 0;
  for (int t = 0; t < TRIALS; t++) {
    const size_t n = (size_t)rr(1, 1000);
    fill(g_in, n);
    fill(g_lut, 256);
    CHECK("lut", n, qlut_s8_ref(g_in, g_a, n, g_lut), qlut_s8_mve(g_in, g_b, n, g_lut));
  }
  report("qlut_s8", TRIALS, bad, bad_at);

#if FW_HAVE_MVE_FP
  {
    /* float32 edges: random values with NaN, infinities, denormals, halfway cases and out-of-range ones */
    /* in the existing buffers: .bss is nearly as large as the data memory */
    float *f = (float *)(void *)g_in, *fa = (float *)(void *)g_a, *fb = (float *)(void *)g_b;
    int32_t *qa = (int32_t *)(void *)g_a, *qb = (int32_t *)(void *)g_b;
    bad = -1, bad_at = 0;
    for (int t = 0; t < TRIALS; t++) {
      const size_t n = (size_t)rr(1, 1200);
      const double scale = (double)rr(1, 100000) / (double)rr(1, 3000000);
      const k_dtype dts[4] = {K_U8, K_S8, K_S16, K_S32};
      const k_dtype dt = dts[t % 4];
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
      memset(qa, 0x55, 4800), memset(qb, 0x55, 4800);
      quantize_f32_ref(f, n, scale, zp, qmin, qmax, dt, qa);
      quantize_f32_mve(f, n, scale, zp, qmin, qmax, dt, qb);
      const long d = first_diff((const int8_t *)qa, (const int8_t *)qb, 4800);
      if (d >= 0 && bad < 0) bad = t, bad_at = (size_t)d;
    }
    report("quantize_f32", TRIALS, bad, bad_at);
    bad = -1, bad_at = 0;
    for (int t = 0; t < TRIALS; t++) {
      const size_t n = (size_t)rr(1, 1200);
      const k_dtype dts[4] = {K_U8, K_S8, K_S16, K_S32};
      const k_dtype dt = dts[t % 4];
      for (size_t i = 0; i < n; i++) ((int32_t *)(void *)g_in2)[i] = (int32_t)rnd();
      const double scale = (double)rr(1, 100000) / (double)rr(1, 3000000);
      const int32_t zp = rr(-100, 100);
      memset(fa, 0x55, 4800), memset(fb, 0x55, 4800);
      dequantize_f32_ref(g_in2, dt, n, scale, zp, fa);
      dequantize_f32_mve(g_in2, dt, n, scale, zp, fb);
      const long d = first_diff((const int8_t *)fa, (const int8_t *)fb, 4800);
      if (d >= 0 && bad < 0) bad = t, bad_at = (size_t)d;
    }
    report("dequantize_f32", TRIALS, bad, bad_at);
  }
#endif

  for (int avg = 0; avg < 2; avg++) {
    bad = -1, bad_at = 0;
    for (int t = 0; t < TRIALS; t++) {
      qpool_params p;
      /* every third case wide enough for the table path (taps x channels >= 256) */
      p.batch = rr(1, 2), p.in_h = rr(1, 9), p.in_w = rr(1, 9), p.c = t % 3 == 2 ? rr(40, 300) : rr(1, 40);
      p.k_h = rr(1, 4), p.k_w = rr(1, 4), p.stride_h = rr(1, 3), p.stride_w = rr(1, 3);
      p.pad_h = rr(0, p.k_h / 2), p.pad_w = rr(0, p.k_w / 2);
      p.out_h = (p.in_h + 2 * p.pad_h - p.k_h) / p.stride_h + 1;
      p.out_w = (p.in_w + 2 * p.pad_w - p.k_w) / p.stride_w + 1;
      if (p.out_h < 1 || p.out_w < 1) {
        t--;
        continue;
      }
      fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.c);
      const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.c;
      if (avg) {
        int32_t m, s, zp = rr(-128, 127);
        rq(&m, &s);
        /* power-of-two scales make averages land exactly on .5: the ties the
           vector finish must hand to the scalar divisions */
        if (t % 2) m = 1 << 30, s = rr(-12, 0);
        CHECK("avg", n, qavgpool_s8_ref(&p, g_in, g_a, zp, m, s), POOL_MVE(&p, zp, m, s));
      } else {
        const int32_t lo = rr(-128, 0), hi = rr(0, 127);
        CHECK("max", n, qmaxpool_s8_ref(&p, g_in, g_a, lo, hi), qmaxpool_s8_mve(&p, g_in, g_b, lo, hi));
      }
    }
    report(avg ? "qavgpool_s8" : "qmaxpool_s8", TRIALS, bad, bad_at);
  }

  /* emlkit::quantized_avg_pool2d: no padding, every window whole; channel
     counts around the 16-lane tail, global and strided windows */
  bad = -1, bad_at = 0;
  for (int t = 0; t < TRIALS; t++) {
    qpool_params p;
    p.batch = rr(1, 2), p.in_h = rr(1, 9), p.in_w = rr(1, 9), p.c = t % 3 == 2 ? rr(40, 300) : rr(1, 40);
    p.k_h = t % 4 == 0 ? p.in_h : rr(1, p.in_h), p.k_w = t % 4 == 0 ? p.in_w : rr(1, p.in_w);
    p.stride_h = rr(1, 3), p.stride_w = rr(1, 3), p.pad_h = 0, p.pad_w = 0;
    p.out_h = (p.in_h - p.k_h) / p.stride_h + 1, p.out_w = (p.in_w - p.k_w) / p.stride_w + 1;
    fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.c);
    const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.c;
    const int32_t izp = rr(-128, 127), ozp = rr(-128, 127), m = rr(1 << 30, 0x7fffffff), s = rr(20, 40);
    CHECK("emlkit_avg", n, emlkit_avgpool_s8_ref(&p, g_in, g_a, izp, ozp, m, s),
          emlkit_avgpool_s8_mve(&p, g_in, g_b, izp, ozp, m, s));
  }
  report("emlkit_avgpool_s8", TRIALS, bad, bad_at);
}
#endif

/* ---------------------------------------------------------------- bench */
#ifdef BENCH
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
  qconv_params c;
  /* conv 3x3, 16x16x16 -> 32, pad 1 */
  c = (qconv_params){1, 16, 16, 16, 16, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 128, -5, -128, 127, NULL};
  fill(g_in, 16 * 16 * 16), fill(g_w, 32 * 9 * 16), fill_bias(32);
  for (int i = 0; i < 32; i++) g_mult[i] = (int32_t)((1u << 30) + (rnd() >> 2)), g_shift[i] = -8;
  BENCH2("conv3x3_16x16x16_32", 1, qconv2d_s8_ref(&c, g_in, g_w, g_bias, g_mult, g_shift, g_a),
         CONV_BENCH(qconv2d_s8, &c, g_bias, g_b));
  /* depthwise 3x3 on 25x5x64, pad 1 */
  c = (qconv_params){1, 25, 5, 64, 25, 5, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64, 128, -5, -128, 127, NULL};
  fill(g_in, 25 * 5 * 64), fill(g_w, 9 * 64), fill_bias(64);
  for (int i = 0; i < 64; i++) g_mult[i] = (int32_t)((1u << 30) + (rnd() >> 2)), g_shift[i] = -8;
  BENCH2("dwconv3x3_25x5x64", 1, qdwconv2d_s8_ref(&c, g_in, g_w, g_bias, g_mult, g_shift, g_a),
         CONV_BENCH(qdwconv2d_s8, &c, g_bias, g_b));
  /* 1x1 conv 25x5x64 -> 64 */
  c = (qconv_params){1, 25, 5, 64, 25, 5, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1, 128, -5, -128, 127, NULL};
  fill(g_w, 64 * 64);
  BENCH2("conv1x1_25x5x64_64", 1, qconv2d_s8_ref(&c, g_in, g_w, g_bias, g_mult, g_shift, g_a),
         CONV_BENCH(qconv2d_s8, &c, g_bias, g_b));
  /* fully connected 640 -> 128 (kernel_sum form, as the M55 flow emits) */
  qlinear_params l = {1, 640, 128, 128, 0, -5, 1 << 30, -9, -128, 127};
  fill(g_in, 640), fill(g_w, 640 * 128);
  for (int i = 0; i < 128; i++) g_ksum[i] = rr(-50000, 50000);
  BENCH2("fc_640_128", 4, qlinear_s8_ref(&l, g_in, g_w, NULL, g_ksum, g_a),
         qlinear_s8_mve(&l, g_in, g_w, NULL, g_ksum, g_b));
  /* add of 8192 int8 */
  qadd_params a = {-32, 1073741824, 0, -27, 1207176104, -1, -30, 1782644083, -19, -128, 127};
  fill(g_in, 8192), fill(g_in2, 8192);
  BENCH2("add_8192", 4, qadd_s8_ref(g_in, 8192, g_in2, 8192, g_a, &a), qadd_s8_mve(g_in, 8192, g_in2, 8192, g_b, &a));
  /* average pool over an 8x8x64 input (global: 8x8 window -> 1x1x64) */
  qpool_params p = {1, 8, 8, 64, 1, 1, 8, 8, 8, 8, 0, 0};
  fill(g_in, 8 * 8 * 64);
#if FW_HAVE_MVE_FP
  BENCH2("avgpool_8x8x64", 10, qavgpool_s8_ref(&p, g_in, g_a, -3, 1319009920, -6),
         (void)qavgpool_s8_mve(&p, g_in, g_b, -3, 1319009920, -6, g_scratch, SCRATCH_CAP));
#else
  BENCH2("avgpool_8x8x64", 10, qavgpool_s8_ref(&p, g_in, g_a, -3, 1319009920, -6),
         (void)qavgpool_s8(&p, g_in, g_b, -3, 1319009920, -6, NULL, 0));
#endif
  /* softmax 1x1000 (portable only: no MVE variant) */
  fill(g_in, 1000);
  {
    uint32_t t;
    TIME(1, softmax_s8_ref(g_in, g_a, 1, 1000, 1, -55, -128, 1272620416, 19), t);
    printf("BENCH softmax_1x1000 %lu -\n", (unsigned long)t);
  }
#if FW_HAVE_MVE
  /* MobileNetV2 (96x96) and DS-CNN layer shapes where tiles, weight sums and
     per-call set-up dominate: MVE variant only (scripts/bench_cmsis_nn.py compares
     the whole model against CMSIS-NN) */
  {
    static const struct { const char *name; qconv_params c; int dw; } mv2[] = {
        {"mv2_conv1x1_48x48x16_8", {1, 48, 48, 16, 48, 48, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, 128, -5, -128, 127, NULL}, 0},
        {"mv2_conv1x1_3x3x56_336", {1, 3, 3, 56, 3, 3, 336, 1, 1, 1, 1, 0, 0, 1, 1, 1, 128, -5, -128, 127, NULL}, 0},
        {"mv2_conv1x1_3x3x336_56", {1, 3, 3, 336, 3, 3, 56, 1, 1, 1, 1, 0, 0, 1, 1, 1, 128, -5, -128, 127, NULL}, 0},
        {"mv2_conv1x1_12x12x96_16", {1, 12, 12, 96, 12, 12, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, 128, -5, -128, 127, NULL}, 0},
        {"mv2_dw3x3_3x3x336", {1, 3, 3, 336, 3, 3, 336, 3, 3, 1, 1, 1, 1, 1, 1, 336, 128, -5, -128, 127, NULL}, 1},
        {"mv2_dw3x3s2_6x6x192", {1, 6, 6, 192, 3, 3, 192, 3, 3, 2, 2, 1, 1, 1, 1, 192, 128, -5, -128, 127, NULL}, 1},
        {"mv2_dw3x3s2_12x12x96", {1, 12, 12, 96, 6, 6, 96, 3, 3, 2, 2, 1, 1, 1, 1, 96, 128, -5, -128, 127, NULL}, 1},
        /* DS-CNN's first layer: a one-channel 10x4 convolution, lowered as depthwise x64 */
        {"dscnn_dw10x4s2_49x10x1_x64", {1, 49, 10, 1, 25, 5, 64, 10, 4, 2, 2, 5, 1, 1, 1, 1, 128, -5, -128, 127, NULL}, 1},
    };
    for (size_t i = 0; i < sizeof mv2 / sizeof mv2[0]; i++) {
      const qconv_params *q = &mv2[i].c;
      fill(g_in, (size_t)q->in_h * q->in_w * q->in_c);
      fill(g_w, (size_t)q->out_c * q->k_h * q->k_w * (q->in_c / q->groups));
      fill_bias(q->out_c);
      for (int j = 0; j < q->out_c; j++) g_mult[j] = (int32_t)((1u << 30) + (rnd() >> 2)), g_shift[j] = -8;
      uint32_t t;
      if (mv2[i].dw) TIME(1, CONV_BENCH(qdwconv2d_s8, q, g_bias, g_b), t);
      else TIME(1, CONV_BENCH(qconv2d_s8, q, g_bias, g_b), t);
      printf("BENCH %s - %lu\n", mv2[i].name, (unsigned long)t);
    }
  }
#endif
#if FW_HAVE_MVE_FP
  {
    qpool_params gp = {1, 3, 3, 1280, 1, 1, 3, 3, 3, 3, 0, 0};
    uint32_t t;
    fill(g_in, 3 * 3 * 1280);
    TIME(1, (void)qavgpool_s8_mve(&gp, g_in, g_b, -3, 1319009920, -6, g_scratch, SCRATCH_CAP), t);
    printf("BENCH mv2_avgpool_3x3x1280 - %lu\n", (unsigned long)t);
    qpool_params dp = {1, 25, 5, 64, 1, 1, 25, 5, 25, 5, 0, 0}; /* DS-CNN's global pool */
    fill(g_in, 25 * 5 * 64);
    TIME(1, (void)qavgpool_s8_mve(&dp, g_in, g_b, -3, 1319009920, -6, g_scratch, SCRATCH_CAP), t);
    printf("BENCH dscnn_avgpool_25x5x64 - %lu\n", (unsigned long)t);
  }
#endif
  /* table lookup, 8192 int8 */
  fill(g_in, 8192), fill(g_lut, 256);
  BENCH2("lut_8192", 4, qlut_s8_ref(g_in, g_a, 8192, g_lut), qlut_s8_mve(g_in, g_b, 8192, g_lut));
}
#endif

int main(void) {
#ifdef BENCH
  bench();
  return 0;
#else
#if FW_HAVE_MVE && !defined(BENCH)
  printf("MVE self-test: *_mve vs *_ref\n");
  selftest();
  printf("%s: %d kernel(s) failed\n", g_failed_kernels ? "FAIL" : "PASS", g_failed_kernels);
  return g_failed_kernels;
#else
  printf("FAIL: self-test built without MVE\n");
  return 1;
#endif
#endif
}
