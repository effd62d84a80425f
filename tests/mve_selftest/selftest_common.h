/* What the two bare-metal kernel self-tests share (tests/mve_selftest/main.c:
 * *_mve against *_ref on the Cortex-M55; tests/dsp_selftest/main.c: *_dsp
 * against *_ref on the Cortex-M4): the random numbers, the folded window
 * bias, the trial loop that keeps a kernel's first failing trial and the
 * PASS / FAIL lines, main(). Included once, by main.c, which defines
 * SELFTEST_TITLE first and may define SELFTEST_SEED (its own random
 * sequence) and SCRATCH_CAP (the size of its canary-guarded scratch). */
#ifndef SELFTEST_COMMON_H
#define SELFTEST_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels.h"

#ifndef SELFTEST_SEED
#define SELFTEST_SEED 0x12345678u
#endif

#define UNUSED_FN __attribute__((unused))

/* ---------------------------------------------------------------- random */
static uint32_t g_rng = SELFTEST_SEED;
static UNUSED_FN uint32_t rnd(void) { /* xorshift32 */
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return g_rng;
}
static UNUSED_FN int32_t rr(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); }
static UNUSED_FN void fill(int8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (int8_t)rnd();
}
/* The spatial part of a random convolution, the rest zero: batch 1-2,
 * input up to 9x9, kernel up to 3x3, stride 1-2, padding 0-2, no
 * dilation; the test then sets its own dilations, channels and offsets. */
static UNUSED_FN void random_conv_window(qconv_params *p) {
  memset(p, 0, sizeof *p);
  p->batch = rr(1, 2);
  p->in_h = rr(1, 9), p->in_w = rr(1, 9);
  p->k_h = rr(1, 3), p->k_w = rr(1, 3);
  p->stride_h = rr(1, 2), p->stride_w = rr(1, 2);
  p->pad_h = rr(0, 2), p->pad_w = rr(0, 2);
  p->dil_h = 1, p->dil_w = 1;
}
/* Sets out_h and out_w from the rest; 0 when the output is empty. */
static UNUSED_FN int conv_output(qconv_params *p) {
  p->out_h = (p->in_h + 2 * p->pad_h - p->dil_h * (p->k_h - 1) - 1) / p->stride_h + 1;
  p->out_w = (p->in_w + 2 * p->pad_w - p->dil_w * (p->k_w - 1) - 1) / p->stride_w + 1;
  return p->out_h >= 1 && p->out_w >= 1;
}

/* A random broadcast case of add / mul: *an and *bn elements of random
 * bytes in a and b (plus `pad` more, for unaligned views); returns the
 * output length n * c. One trial in three repeats a (length c: the channel
 * broadcast of NHWC data), one in three b. */
static UNUSED_FN size_t bcast_case(int t, int8_t *a, int8_t *b, size_t pad, size_t *an, size_t *bn) {
  const size_t n = (size_t)rr(1, 300), c = (size_t)rr(1, 20);
  *an = (t % 3 == 1) ? c : n * c;
  *bn = (t % 3 == 2) ? c : n * c;
  fill(a, *an + pad);
  fill(b, *bn + pad);
  return n * c;
}

/* The folded window bias the compiler stores (emlkit/passes/window_bias.py): per
 * output channel bias + input_offset * sum(all its weights), int32 wrap; for
 * a convolution then zeros up to a multiple of 4 channels (what its program
 * carries); junk past that, which no kernel may read. */
static int32_t g_beff[1024 + 16];
static UNUSED_FN const int32_t *window_bias(const qconv_params *p, const int8_t *w, const int32_t *bias,
                                            int depthwise) {
  const int32_t k = p->k_h * p->k_w * (depthwise ? 1 : p->in_c / p->groups);
  for (int32_t o = 0; o < p->out_c; o++) {
    uint32_t s = 0;
    for (int32_t t = 0; t < k; t++) s += (uint32_t)(depthwise ? w[(size_t)t * p->out_c + o] : w[(size_t)o * k + t]);
    g_beff[o] = (int32_t)((bias ? (uint32_t)bias[o] : 0u) + (uint32_t)p->input_offset * s);
  }
  const int32_t end = depthwise ? p->out_c : (p->out_c + 3) / 4 * 4;
  for (int32_t o = p->out_c; o < end; o++) g_beff[o] = 0;
  for (int32_t o = end; o < (int32_t)(sizeof g_beff / sizeof g_beff[0]); o++) g_beff[o] = 0x5A5A5A5A;
  return g_beff;
}
/* The depthwise blocks the compiler stores after them (dw_blocks): per 16
 * channels the start values, multipliers and shifts, zero past out_c. */
static int32_t g_dwblk[1024 / 16 * 48];
static UNUSED_FN const int32_t *dw_blocks(const qconv_params *p, const int32_t *beff, const int32_t *mult,
                                          const int32_t *shift) {
  for (int32_t c0 = 0; c0 < p->out_c; c0 += 16)
    for (int32_t j = 0; j < 16; j++) {
      const int32_t c = c0 + j, in = c < p->out_c;
      int32_t *g = g_dwblk + c0 / 16 * 48 + j;
      g[0] = in ? beff[c] : 0, g[16] = in ? mult[c] : 0, g[32] = in ? shift[c] : 0;
    }
  return g_dwblk;
}

/* A random pooling shape with c channels (windows up to 4x4, strides up to
 * 3, padding up to half the window); 0 when it has no output: draw again. */
static UNUSED_FN int random_pool(qpool_params *p, int32_t c) {
  p->batch = rr(1, 2), p->in_h = rr(1, 9), p->in_w = rr(1, 9), p->c = c;
  p->k_h = rr(1, 4), p->k_w = rr(1, 4), p->stride_h = rr(1, 3), p->stride_w = rr(1, 3);
  p->pad_h = rr(0, p->k_h / 2), p->pad_w = rr(0, p->k_w / 2);
  p->out_h = (p->in_h + 2 * p->pad_h - p->k_h) / p->stride_h + 1;
  p->out_w = (p->in_w + 2 * p->pad_w - p->k_w) / p->stride_w + 1;
  return p->out_h >= 1 && p->out_w >= 1;
}

/* The conv layers both -DBENCH images time, portable kernel and fast
 * variant: the reference shapes of NOTES.md and, `on` the DSP image only,
 * mobilenet_v2's widest depthwise layers. */
#define BENCH_ON_MVE 1
#define BENCH_ON_DSP 2
typedef struct {
  const char *name;
  qconv_params c;
  int dw, on;
} bench_layer;
static const bench_layer g_bench_layers[] = {
    {"conv3x3_16x16x16_32", {1, 16, 16, 16, 16, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 128, -5, -128, 127, NULL, NULL}, 0,
     BENCH_ON_MVE | BENCH_ON_DSP},
    {"dwconv3x3_25x5x64", {1, 25, 5, 64, 25, 5, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64, 128, -5, -128, 127, NULL, NULL}, 1,
     BENCH_ON_MVE | BENCH_ON_DSP},
    {"conv1x1_25x5x64_64", {1, 25, 5, 64, 25, 5, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1, 128, -5, -128, 127, NULL, NULL}, 0,
     BENCH_ON_MVE | BENCH_ON_DSP},
    {"dwconv3x3_3x3x960", {1, 3, 3, 960, 3, 3, 960, 3, 3, 1, 1, 1, 1, 1, 1, 960, 128, -5, -128, 127, NULL, NULL}, 1,
     BENCH_ON_DSP},
    {"dwconv3x3_6x6x384", {1, 6, 6, 384, 6, 6, 384, 3, 3, 1, 1, 1, 1, 1, 1, 384, 128, -5, -128, 127, NULL, NULL}, 1,
     BENCH_ON_DSP},
};
#define N_BENCH_LAYERS (sizeof g_bench_layers / sizeof g_bench_layers[0])

/* Inputs of a fixed bench layer, in this order: random input and weights,
 * the test's own bias fill, multipliers near 2^30 with shift -8 (inside
 * every fast path). */
static UNUSED_FN void bench_conv_inputs(const qconv_params *q, int8_t *in, int8_t *w, void (*fill_bias)(int),
                                        int32_t *mult, int32_t *shift) {
  fill(in, (size_t)q->in_h * q->in_w * q->in_c);
  fill(w, (size_t)q->out_c * q->k_h * q->k_w * (q->in_c / q->groups));
  fill_bias(q->out_c);
  for (int j = 0; j < q->out_c; j++) mult[j] = (int32_t)((1u << 30) + (rnd() >> 2)), shift[j] = -8;
}

/* ---------------------------------------------------------------- checking */
static int g_failed_kernels;
static int g_bad; /* first failing trial of the kernel under test, -1 while none */

static UNUSED_FN long first_diff(const int8_t *a, const int8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return (long)i;
  return -1;
}
/* Both outputs set to the same junk, so bytes a kernel fails to write differ only if the other writes them. */
static UNUSED_FN void poison(int8_t *a, int8_t *b, size_t n) {
  memset(a, 0x55, n);
  memset(b, 0x55, n);
}
static UNUSED_FN void report(const char *name, int trials, int bad, long at) {
  if (bad >= 0) {
    printf("FAIL %s trial %d first difference at byte %ld\n", name, bad, at);
    g_failed_kernels++;
  } else {
    printf("PASS %s %d\n", name, trials);
  }
}
/* One trial: runs both variants on case t and returns the first byte where
 * their outputs differ, or -1. */
typedef long trial_fn(int t);
/* Trials 0 .. n-1 of one kernel; reports the first failure. */
static UNUSED_FN void run_trials(const char *name, int n, trial_fn *trial) {
  long at = 0;
  g_bad = -1;
  for (int t = 0; t < n; t++) {
    const long d = trial(t);
    if (d >= 0 && g_bad < 0) g_bad = t, at = d;
  }
  report(name, n, g_bad, at);
}

/* The shape of a failing convolution, to reproduce it. */
static UNUSED_FN void print_conv(const qconv_params *p) {
  printf("  shape: n%ld %ldx%ldx%ld -> %ldx%ldx%ld k%ldx%ld s%ld,%ld p%ld,%ld d%ld,%ld g%ld in_off %ld\n",
         (long)p->batch, (long)p->in_h, (long)p->in_w, (long)p->in_c, (long)p->out_h, (long)p->out_w,
         (long)p->out_c, (long)p->k_h, (long)p->k_w, (long)p->stride_h, (long)p->stride_w, (long)p->pad_h,
         (long)p->pad_w, (long)p->dil_h, (long)p->dil_w, (long)p->groups, (long)p->input_offset);
}

/* main() of both images: with -DBENCH the timings (the test's bench()),
 * else every trial (its selftest()) and a summary line; the exit status is
 * the number of failing kernels. SELFTEST_TITLE names the comparison. */
#ifdef BENCH
static void bench(void);
#else
static void selftest(void);
#endif
int main(void) {
#ifdef BENCH
  bench();
  return 0;
#else
  printf("%s\n", SELFTEST_TITLE);
  selftest();
  printf("%s: %d kernel(s) failed\n", g_failed_kernels ? "FAIL" : "PASS", g_failed_kernels);
  return g_failed_kernels;
#endif
}

#ifdef SCRATCH_CAP
/* Scratch for the kernels that take it: exactly <name>_get_buffer_size bytes,
 * followed by canary bytes that must survive the call. */
static uint8_t g_scratch[SCRATCH_CAP + 64] __attribute__((aligned(16)));
static size_t g_scratch_n;
static UNUSED_FN void *scratch_for(size_t n) {
  if (n > SCRATCH_CAP) {
    printf("FAIL scratch: %u bytes asked, the self-test has %u\n", (unsigned)n, (unsigned)SCRATCH_CAP);
    g_failed_kernels++;
    n = SCRATCH_CAP;
  }
  g_scratch_n = n;
  memset(g_scratch, 0xA5, sizeof g_scratch);
  return g_scratch;
}
static UNUSED_FN int scratch_intact(void) {
  for (size_t i = g_scratch_n; i < sizeof g_scratch; i++)
    if (g_scratch[i] != 0xA5) return 0;
  return 1;
}
#endif

#endif
