/* Bare-metal self-test of the DSP-extension kernels (Cortex-M4 under QEMU
 * mps2-an386; start-up and link script shared with tests/mve_selftest): each
 * *_dsp kernel runs against its portable *_ref twin on random shapes (odd
 * channel counts, K not a multiple of 4, borders, strides, dilations, depth
 * multipliers, grouped convolutions, a depthwise writing over its own input; unaligned operands for add, mul, max
 * pool and the table lookup; the LSTM and GRU gate matmuls), data and quantization parameters; the
 * outputs must match byte for byte and the scratch canary must survive.
 * Prints "PASS <kernel> <trials>" or "FAIL <kernel> trial <i> ..." per kernel
 * and exits with the number of failing kernels.
 *
 * Built with -DBENCH it times the portable and DSP kernels on fixed shapes
 * ("BENCH <name> <ref> <dsp>", instructions under -icount shift=0 through the
 * FPGAIO counter: one tick = 40 instructions). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels.h"
#include "kernels_dsp.h"

#if !FW_HAVE_DSP
int main(void) {
  printf("FAIL: self-test built without the DSP extension (or with MVE)\n");
  return 1;
}
#else
#define BUF 40000
static int8_t g_in[BUF] __attribute__((aligned(16))), g_w[BUF], g_a[BUF], g_b[BUF];
static int32_t g_bias[1024], g_mult[1024], g_shift[1024], g_ksum[1024];
#define SCRATCH_CAP 16384
#define SELFTEST_SEED 0x9E3779B9u
#define SELFTEST_TITLE "DSP self-test: *_dsp vs *_ref"
#include "../mve_selftest/selftest_common.h"
#define SELFTEST_VARIANT(name) name##_dsp
#include "../mve_selftest/selftest_rnn.h"

/* any multiplier in [0, 2^31), shifts -31..6 (positive ones included) */
static UNUSED_FN void rq(int32_t *m, int32_t *s) {
  *m = (rnd() & 3) ? (int32_t)((1u << 30) + (rnd() >> 2)) : (int32_t)(rnd() >> 1);
  *s = (rnd() & 7) == 0 ? rr(1, 6) : rr(-31, 0);
}
static UNUSED_FN void rq_n(int n) {
  for (int i = 0; i < n; i++) rq(&g_mult[i], &g_shift[i]);
}
static UNUSED_FN void fill_bias(int n) {
  for (int i = 0; i < n; i++) g_bias[i] = (rnd() & 15) ? rr(-20000, 20000) : (int32_t)rnd();
}

/* t selects the flavour: pointwise, 5x5, grouped, offsets outside the pad range, wide */
static void random_conv(qconv_params *p, int depthwise, int t) {
  for (;;) {
    random_conv_window(p);
    if (!depthwise && t % 7 == 0) p->k_h = 5, p->k_w = rr(1, 5);
    p->dil_h = (rnd() & 3) ? 1 : 2, p->dil_w = (rnd() & 3) ? 1 : 2;
    if (t % 4 == 1) p->k_h = p->k_w = 1, p->pad_h = p->pad_w = 0; /* pointwise */
    if (depthwise) {
      p->in_c = t % 5 == 0 ? rr(60, 200) : rr(1, 40);
      p->out_c = p->in_c;
      if (t % 6 == 3) p->in_c = 1, p->out_c = rr(2, 70);           /* one-channel input: runs as a conv */
      else if (t % 6 == 5) p->in_c = rr(1, 5), p->out_c = p->in_c * rr(2, 4); /* other multipliers */
      p->groups = p->in_c;
    } else {
      p->groups = t % 9 == 4 ? rr(2, 3) : 1;
      p->in_c = rr(1, t % 5 == 0 ? 70 : 24) * p->groups;
      p->out_c = rr(1, t % 3 == 0 ? 40 : 13) * p->groups;
      /* pointwise, whole groups of four input channels, out_c >= in_c: with the program's beff (below), the
         1x1 path's split weight rows fit the scratch */
      if (t % 24 == 1) p->groups = 1, p->in_c = 4 * rr(1, 16), p->out_c = p->in_c + rr(0, 9);
    }
    p->input_offset = (t % 8 == 3) ? rr(129, 255) : rr(-127, 128);
    /* folded away by the compiler: the bias is the start (pointwise; others in k_rq_mm's range, with a bias) */
    if (!depthwise && (t % 48 == 25 || t % 24 == 7)) p->input_offset = 0;
    p->output_offset = rr(-128, 127);
    p->act_min = rr(-128, 0), p->act_max = rr(0, 127);
    if ((t / 12) % 2 == 1) p->act_min = -128, p->act_max = 127; /* the whole int8 range (1x1 SSAT clamp) */
    const size_t nin = (size_t)p->batch * p->in_h * p->in_w * p->in_c;
    const size_t nw = (size_t)p->out_c * p->k_h * p->k_w * (depthwise ? 1 : p->in_c / p->groups);
    if (conv_output(p) && nin <= BUF && nw <= BUF && (size_t)p->batch * p->out_h * p->out_w * p->out_c <= BUF)
      return;
  }
}

#define TRIALS 150
static UNUSED_FN long conv_trial(int t, int depthwise) {
  qconv_params p;
  random_conv(&p, depthwise, t);
  fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.in_c);
  fill(g_w, (size_t)p.out_c * p.k_h * p.k_w * (depthwise ? 1 : p.in_c / p.groups));
  fill_bias(p.out_c);
  rq_n(p.out_c);
  if (t % 3 == 2) /* every channel in the fast requantization range (shift <= -2), ties included */
    for (int32_t i = 0; i < p.out_c; i++) {
      g_shift[i] = -rr(2, 31);
      if (t % 9 == 5) g_mult[i] = (int32_t)(1u << 30);
    }
  if (t % 3 == 1) /* every channel in k_rq_mm's range (2^30 < mult, shift -1..-22, moderate biases), as real layers */
    for (int32_t i = 0; i < p.out_c; i++) {
      g_mult[i] = (int32_t)((1u << 30) + 1 + (rnd() >> 2)), g_shift[i] = -rr(1, 22);
      g_bias[i] = rr(-20000, 20000);
    }
  const int32_t *bias = (t & 1) ? g_bias : NULL;
  if (((t >> 1) & 1) || t % 24 == 1) p.beff = window_bias(&p, g_w, bias, depthwise); /* as the compiler stores it */
  /* with the MVE blocks too (a program compiled for an MVE core): the DSP reads beff, no scratch */
  if (p.beff && depthwise && p.out_c == p.in_c && ((t >> 2) & 1)) p.dwblk = dw_blocks(&p, p.beff, g_mult, g_shift);
  const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.out_c;
  poison(g_a, g_b, n);
  k_status st;
  if (depthwise) {
    emk_depthwise_conv2d_s8_ref(&p, g_in, g_w, bias, g_mult, g_shift, g_a);
    void *s = scratch_for(emk_depthwise_conv2d_s8_get_buffer_size(&p));
    st = emk_depthwise_conv2d_s8_dsp(&p, g_in, g_w, bias, g_mult, g_shift, g_b, s, g_scratch_n);
  } else {
    emk_conv2d_s8_ref(&p, g_in, g_w, bias, g_mult, g_shift, g_a);
    void *s = scratch_for(emk_conv2d_s8_get_buffer_size(&p));
    st = emk_conv2d_s8_dsp(&p, g_in, g_w, bias, g_mult, g_shift, g_b, s, g_scratch_n);
  }
  long d = first_diff(g_a, g_b, n);
  if (st != K_OK || !scratch_intact()) d = d < 0 ? 0 : d;
  if (d >= 0 && g_bad < 0) print_conv(&p);
  return d;
}
static UNUSED_FN long trial_conv(int t) { return conv_trial(t, 0); }
static UNUSED_FN long trial_dwconv(int t) { return conv_trial(t, 1); }

#define IN_PLACE_RQ(n) rq_n(n)
#include "../mve_selftest/selftest_in_place.h"

static UNUSED_FN long trial_add(int t) {
  qadd_params p = {rr(-128, 127), 0, 0, rr(-128, 127), 0, 0, rr(-128, 127), 0, 0, rr(-128, 0), rr(0, 127)};
  rq(&p.a_mult, &p.a_shift);
  rq(&p.b_mult, &p.b_shift);
  rq(&p.out_mult, &p.out_shift);
  if (t % 4 == 1) p.a_shift = rr(-2, 0), p.b_shift = rr(-2, 0), p.out_shift = rr(-22, -15); /* realistic add */
  if (t % 4 == 3) p.a_shift = rr(-31, -2), p.b_shift = rr(-31, -2), p.out_shift = rr(-31, -2); /* all fast */
  if (t % 5 == 4) p.a_zp = rr(-70000, 70000), p.b_zp = rr(-70000, 70000); /* outside int16 */
  size_t an, bn;
  const size_t n = bcast_case(t, g_in, g_w, 0, &an, &bn) + 8;
  poison(g_a, g_b, n);
  emk_add_s8_ref(g_in + (t & 3), an, g_w, bn, g_a, &p);
  emk_add_s8_dsp(g_in + (t & 3), an, g_w, bn, g_b, &p); /* unaligned operands too */
  return first_diff(g_a, g_b, n);
}

static UNUSED_FN long trial_avgpool(int t) {
  qpool_params p;
  do {
    /* most cases wide enough for the table path (taps x channels >= 256) */
    random_pool(&p, t % 3 == 0 ? rr(1, 40) : rr(40, 240));
    if (t % 5 == 1) p.out_h++, p.out_w++; /* ceil mode: windows past the input, some empty */
    if (t % 7 == 3) p.k_h = p.in_h, p.k_w = p.in_w, p.pad_h = p.pad_w = 0, p.out_h = p.out_w = 1; /* global */
  } while (p.out_h < 1 || p.out_w < 1);
  fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.c);
  const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.c;
  int32_t m, sh, zp = rr(-128, 127);
  rq(&m, &sh);
  if (t % 2) m = 1 << 30, sh = rr(-12, 0); /* averages on exact .5 ties */
  poison(g_a, g_b, n);
  emk_avg_pool2d_s8_ref(&p, g_in, g_a, zp, m, sh);
  void *s = scratch_for(emk_avg_pool2d_s8_get_buffer_size(&p));
  const int ok = emk_avg_pool2d_s8_dsp(&p, g_in, g_b, zp, m, sh, s, g_scratch_n) == K_OK && scratch_intact();
  return ok ? first_diff(g_a, g_b, n) : 0;
}

static UNUSED_FN long trial_mul(int t) {
  qmul_params p = {rr(-128, 127), rr(-128, 127), rr(-128, 127), 0, 0};
  rq(&p.out_mult, &p.out_shift);
  if (t % 4 == 1) p.out_shift = rr(-12, -2); /* realistic: the fast requantization */
  if (t % 4 == 3) p.out_shift = rr(-1, 0), p.out_mult = (int32_t)(rnd() >> 9); /* rs 0 or 1 */
  if (t % 7 == 5) p.a_zp = rr(-33000, 33000), p.b_zp = rr(-33000, 33000); /* partly outside the SIMD path */
  size_t an, bn;
  const size_t n = bcast_case(t, g_in, g_w, 4, &an, &bn) + 12;
  const size_t ia = (size_t)(t & 3), ib = (size_t)((t >> 2) & 3), io = (size_t)((t >> 4) & 3);
  poison(g_a, g_b, n);
  emk_mul_s8_ref(g_in + ia, an, g_w + ib, bn, g_a + io, &p);
  emk_mul_s8_dsp(g_in + ia, an, g_w + ib, bn, g_b + io, &p); /* unaligned operands and output */
  return first_diff(g_a, g_b, n);
}

static UNUSED_FN long trial_maxpool(int t) {
  qpool_params p;
  while (!random_pool(&p, t % 3 == 0 ? rr(1, 15) : rr(16, 200))) {
    /* no output: draw again */
  }
  int32_t lo = -128, hi = 127; /* no fused activation */
  if (t % 4 == 1) lo = rr(-128, 0), hi = rr(0, 127);                       /* fused ReLU / ReLU6 ranges */
  if (t % 8 == 3) lo = rr(-300, -129), hi = rr(128, 300);                 /* outside int8: portable path */
  if (t % 8 == 7) lo = rr(-20, 20), hi = lo - rr(1, 20);                  /* empty range: portable path */
  const size_t ii = (size_t)(t & 3), io = (size_t)((t >> 2) & 3);
  fill(g_in, (size_t)p.batch * p.in_h * p.in_w * p.c + 4);
  const size_t n = (size_t)p.batch * p.out_h * p.out_w * p.c + 8;
  poison(g_a, g_b, n);
  emk_max_pool2d_s8_ref(&p, g_in + ii, g_a + io, lo, hi);
  emk_max_pool2d_s8_dsp(&p, g_in + ii, g_b + io, lo, hi); /* unaligned input and output */
  return first_diff(g_a, g_b, n);
}

static UNUSED_FN long trial_lut(int t) {
  static int8_t lut[256];
  fill(lut, 256);
  const size_t n = t % 5 == 0 ? (size_t)rr(0, 9) : (size_t)rr(10, 3000);
  const size_t ii = (size_t)(t & 3), io = (size_t)((t >> 2) & 3);
  fill(g_in, n + 4);
  poison(g_a, g_b, n + 8);
  emk_lut_s8_ref(g_in + ii, g_a + io, n, lut);
  if (t % 6 == 5) { /* in place, as a planner may alias input and output */
    memcpy(g_b + io, g_in + ii, n);
    emk_lut_s8_dsp(g_b + io, g_b + io, n, lut);
  } else {
    emk_lut_s8_dsp(g_in + ii, g_b + io, n, lut); /* unaligned input and output */
  }
  return first_diff(g_a, g_b, n + 8);
}

static UNUSED_FN long trial_linear(int t) {
  qlinear_params p = {rr(1, 3), t % 4 == 0 ? rr(200, 700) : rr(1, 100), rr(1, 21), rr(-127, 128),
                      (t % 5 == 0) ? 0 : rr(-10, 10), rr(-128, 127), 0, 0, rr(-128, 0), rr(0, 127)};
  if (t % 11 == 7) p.input_offset = rr(-40000, 40000); /* outside int16 with the input: portable path */
  rq(&p.mult, &p.shift);
  if ((size_t)p.n * p.k > BUF) p.n = BUF / p.k;
  fill(g_in, (size_t)p.rows * p.k);
  fill(g_w, (size_t)p.n * p.k);
  fill_bias(p.n);
  for (int i = 0; i < p.n; i++) g_ksum[i] = (int32_t)rnd();
  const int mode = t % 3; /* kernel_sum, bias, neither */
  const int32_t *bias = mode == 1 ? g_bias : NULL, *ks = mode == 0 ? g_ksum : NULL;
  const size_t n = (size_t)p.rows * p.n;
  poison(g_a, g_b, n);
  emk_linear_s8_ref(&p, g_in, g_w, bias, ks, g_a);
  emk_linear_s8_dsp(&p, g_in, g_w, bias, ks, g_b);
  return first_diff(g_a, g_b, n);
}

static UNUSED_FN long trial_bmm(int t) {
  qbmm_params p = {rr(1, 3), rr(1, 6), rr(1, 11), t % 2 ? rr(1, 20) : rr(1, 70), rr(-127, 128), rr(-127, 128),
                   rr(-128, 127), 0, 0};
  rq(&p.mult, &p.shift);
  fill(g_in, (size_t)p.batch * p.m * p.k);
  fill(g_w, (size_t)p.batch * p.n * p.k);
  const size_t n = (size_t)p.batch * p.m * p.n;
  poison(g_a, g_b, n);
  emk_batch_matmul_s8_ref(&p, g_in, g_w, g_a);
  emk_batch_matmul_s8_dsp(&p, g_in, g_w, g_b);
  return first_diff(g_a, g_b, n);
}

/* k_requantize_dsp against k_requantize: random values, multipliers and
 * shifts (positive ones included), extreme values, and exact rounding ties
 * (multiplier 2^30 halves the value, so r1 = (val + 1) >> 1 lands on
 * q * 2^rs + 2^(rs-1) by construction). */
static UNUSED_FN void test_requantize(void) {
  const int n = 200000;
  long bad = -1;
  for (int t = 0; t < n && bad < 0; t++) {
    int32_t v = (int32_t)rnd(), m = (int32_t)(rnd() >> 1), s = -rr(0, 31);
    switch (t % 5) {
      case 0: v = rr(-100000, 100000); break;
      case 1: v = (int32_t)(0x7FFFFFF0u + (rnd() & 15)); break;
      case 2: m = (int32_t)(1u << 30), s = -rr(1, 20), v = 2 * (rr(-500, 500) * (1 << -s) + (1 << (-s - 1))) - (int32_t)(rnd() & 1); break;
      case 3: s = rr(1, 6), v = rr(-100000, 100000); break;
      default: break;
    }
    if (k_requantize_dsp(v, m, s) != k_requantize(v, m, s)) bad = t;
  }
  /* k_rq_mm (offset included) in its range: 2^30 < m, 1 <= rs <= 22, |v| < 2^30; ties as above (m = 2^30 + 1
     moves r1 off a tie only for large v), the extremes of v, m = 2^31 - 1 */
  for (int t = 0; t < n && bad < 0; t++) {
    int32_t v = rr(-100000, 100000), m = (int32_t)((1u << 30) + 1 + (rnd() % ((1u << 30) - 1))), s = -rr(1, 22);
    const int32_t off = rr(-128, 127);
    switch (t % 5) {
      case 0: v = (int32_t)(rnd() % ((1u << 31) - 1)) - (1 << 30) + 1; break;
      case 1: v = (t & 2) ? (1 << 30) - 1 - (int32_t)(rnd() & 15) : -(1 << 30) + 1 + (int32_t)(rnd() & 15); break;
      case 2: /* |v| < 2^30: rs up to 18 */
        m = (int32_t)(1u << 30) + 1, s = -rr(1, 18);
        v = 2 * (rr(-500, 500) * (1 << -s) + (1 << (-s - 1))) - (int32_t)(rnd() & 1);
        break;
      case 3: m = 0x7FFFFFFF; break;
      default: break;
    }
    if (k_rq_mm(v, m, k_rq_mm_c(s, off), -s) != (int32_t)((uint32_t)k_requantize(v, m, s) + (uint32_t)off)) bad = n + t;
  }
  report("k_requantize_dsp", 2 * n, (int)bad, 0);
}

#ifdef BENCH
/* AN386 FPGAIO COUNTER (base + 0x18): 25 MHz, one tick = 40 instructions under -icount shift=0 */
#define COUNTER (*(volatile uint32_t *)0x40028018u)
static uint32_t instrs(uint32_t t0) { return (COUNTER - t0) * 40u; }
#define TIME(call, out)           \
  do {                            \
    const uint32_t t0_ = COUNTER; \
    call;                         \
    (out) = instrs(t0_);          \
  } while (0)
static void bench(void) {
  for (size_t i = 0; i < N_BENCH_LAYERS; i++) {
    const bench_layer *b = &g_bench_layers[i];
    if (!(b->on & BENCH_ON_DSP)) continue;
    bench_conv_inputs(&b->c, g_in, g_w, fill_bias, g_mult, g_shift);
    k_conv_ref_fn *ref = b->dw ? emk_depthwise_conv2d_s8_ref : emk_conv2d_s8_ref;
    k_conv_fn *dsp = b->dw ? emk_depthwise_conv2d_s8_dsp : emk_conv2d_s8_dsp;
    uint32_t tr, td;
    TIME(ref(&b->c, g_in, g_w, g_bias, g_mult, g_shift, g_a), tr);
    TIME((void)dsp(&b->c, g_in, g_w, g_bias, g_mult, g_shift, g_b, g_scratch, SCRATCH_CAP), td);
    printf("BENCH %s %lu %lu\n", b->name, (unsigned long)tr, (unsigned long)td);
  }
  qlinear_params l = {1, 640, 48, 128, 0, -5, 1 << 30, -9, -128, 127};
  fill(g_in, 640), fill(g_w, 640 * 48), fill_bias(48);
  uint32_t tr, td;
  TIME(emk_linear_s8_ref(&l, g_in, g_w, g_bias, NULL, g_a), tr);
  TIME(emk_linear_s8_dsp(&l, g_in, g_w, g_bias, NULL, g_b), td);
  printf("BENCH fc_640_48 %lu %lu\n", (unsigned long)tr, (unsigned long)td);
  qadd_params ad = {-3, 1518500250, -1, 7, 1073741824, 0, -2, 1276310592, -19, -128, 127}; /* realistic */
  fill(g_in, 8192), fill(g_w, 8192);
  TIME(emk_add_s8_ref(g_in, 8192, g_w, 8192, g_a, &ad), tr);
  TIME(emk_add_s8_dsp(g_in, 8192, g_w, 8192, g_b, &ad), td);
  printf("BENCH add_8192 %lu %lu\n", (unsigned long)tr, (unsigned long)td);
  qpool_params gp = {1, 3, 3, 1280, 1, 1, 3, 3, 1, 1, 0, 0}; /* mobilenet_v2's global pool */
  fill(g_in, 9 * 1280);
  TIME(emk_avg_pool2d_s8_ref(&gp, g_in, g_a, -3, 1518500250, -8), tr);
  TIME((void)emk_avg_pool2d_s8_dsp(&gp, g_in, g_b, -3, 1518500250, -8, g_scratch, SCRATCH_CAP), td);
  printf("BENCH avgpool_3x3x1280 %lu %lu\n", (unsigned long)tr, (unsigned long)td);
  qmul_params mp = {3, -7, -5, 1518500250, -7}; /* realistic: fast requantization */
  fill(g_in, 8192), fill(g_w, 8192);
  TIME(emk_mul_s8_ref(g_in, 8192, g_w, 8192, g_a, &mp), tr);
  TIME(emk_mul_s8_dsp(g_in, 8192, g_w, 8192, g_b, &mp), td);
  printf("BENCH mul_8192 %lu %lu\n", (unsigned long)tr, (unsigned long)td);
  static const struct { const char *name; qpool_params q; } mps[] = {
      {"maxpool2x2s2_24x24x32", {1, 24, 24, 32, 12, 12, 2, 2, 2, 2, 0, 0}},
      {"maxpool3x3s2p1_16x16x24", {1, 16, 16, 24, 8, 8, 3, 3, 2, 2, 1, 1}},
  };
  for (size_t i = 0; i < sizeof mps / sizeof mps[0]; i++) {
    const qpool_params *q = &mps[i].q;
    fill(g_in, (size_t)q->in_h * q->in_w * q->c);
    TIME(emk_max_pool2d_s8_ref(q, g_in, g_a, -128, 127), tr);
    TIME(emk_max_pool2d_s8_dsp(q, g_in, g_b, -128, 127), td);
    printf("BENCH %s %lu %lu\n", mps[i].name, (unsigned long)tr, (unsigned long)td);
  }
  static int8_t lut[256];
  fill(lut, 256), fill(g_in, 8192);
  TIME(emk_lut_s8_ref(g_in, g_a, 8192, lut), tr);
  TIME(emk_lut_s8_dsp(g_in, g_b, 8192, lut), td);
  printf("BENCH lut_8192 %lu %lu\n", (unsigned long)tr, (unsigned long)td);
}
#endif

#include "../mve_selftest/selftest_shared.h"
static UNUSED_FN void selftest(void) {
  test_requantize();
  run_shared_trials(TRIALS, TRIALS);
  run_trials("emk_depthwise_conv2d_s8_in_place", 2 * TRIALS, trial_dwconv_in_place);
  run_trials("emk_batch_matmul_s8", TRIALS, trial_bmm);
}
#endif
