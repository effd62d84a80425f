/* Plain C kernels for the cortex_m:: operators.
 *
 * Conventions shared by every kernel here:
 *  - No runtime types: pointers, sizes and integers only, so the kernels can be
 *    called from the ctypes tests and from the MVE self-test image directly.
 *  - Inputs are pre-validated by the operator adapters (firmware/ops). Kernels
 *    that need scratch memory have `<name>_get_buffer_size` (bytes, from the
 *    shape; the same on every build) and take the scratch as arguments; they
 *    return a k_status (K_ERR_SCRATCH when it is too small). Scratch comes from
 *    the caller's planned memory, never from the stack.
 *  - 4-D activations are NHWC in memory (the channels-last dim order of the
 *    default flow); conv weights are OHWI, depthwise weights are 1HWO.
 *  - Each op family has `<name>_ref` (portable C, bit-exact with the Python
 *    reference in executorch/backends/cortex_m/ops/operators.py), `<name>_mve`
 *    (Helium, only when compiled with MVE, bit-exact with `_ref`), for conv,
 *    depthwise conv, fully connected, add, mul, average and max pool and the
 *    activation table `<name>_dsp` (the DSP extension's
 *    SIMD32 instructions through ACLE intrinsics, only when compiled for a
 *    core with DSP and without MVE: Cortex-M4/M7/M33), and a dispatcher
 *    `<name>` that picks MVE, else DSP, when available.
 *  - Names: every public kernel is `emk_<op>_<type>[_ref|_mve|_dsp]`: <op> the
 *    operator (conv2d, depthwise_conv2d, add, avg_pool2d, ...; emlkit_<op> for
 *    our own emlkit:: operators), <type> the element type (s8, s16, f32 for the
 *    float side of quantize/dequantize, `any` for the kernels given the dtype
 *    or element size as an argument); the plain name is the dispatcher, and
 *    `emk_<op>_<type>_get_buffer_size` sits beside a kernel that needs scratch.
 *    Files are named after the kernel they hold (conv2d_s8.c); a family with
 *    variants large enough to split has one file per variant (conv2d_s8_ref.c,
 *    conv2d_s8_mve.c, conv2d_s8_dsp.c) and an internal header (conv2d_s8.h)
 *    with the set-up they share as static inline functions.
 *  - Requantization parameters are restricted by the adapters to
 *    multiplier in [0, 2^31) and shift in [-31, 31]; see k_requantize.
 */
#ifndef FW_KERNELS_H
#define FW_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define FW_HAVE_MVE 1
#else
#define FW_HAVE_MVE 0
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
#define FW_HAVE_MVE_FP 1
#else
#define FW_HAVE_MVE_FP 0
#endif

/* DSP-extension (SIMD32) variants: cores with __ARM_FEATURE_DSP and no MVE.
 * The portable-kernel image (FW_NO_MVE, e.g. Cortex-M55 +nomve) and
 * FW_NO_DSP keep the plain C kernels. */
#if !FW_HAVE_MVE && defined(__ARM_FEATURE_DSP) && !defined(FW_NO_MVE) && !defined(FW_NO_DSP)
#define FW_HAVE_DSP 1
#else
#define FW_HAVE_DSP 0
#endif

/* Element types the generic kernels handle (values chosen to equal
 * executorch's ScalarType so adapters can pass dtypes through). */
typedef enum {
  K_U8 = 0,
  K_S8 = 1,
  K_S16 = 2,
  K_S32 = 3,
  K_F32 = 6,
} k_dtype;

/* Status of the kernels that can fail (those given scratch memory). */
typedef enum {
  K_OK = 0,
  K_ERR_SCRATCH = 1, /* scratch smaller than <name>_get_buffer_size, or misaligned */
} k_status;

/* ---- requantization: mirrors passes_utils.requantize_cmsis exactly ----
 * The reference works in int64 (value << left_shift, * multiplier, + 2^30,
 * >> 31, then CMSIS's round-half-away divide by 2^right_shift) and finally
 * truncates to int32; unsigned arithmetic below reproduces its wrap-around. */
static inline int32_t k_requantize(int32_t val, int32_t mult, int32_t shift) {
  const int ls = shift > 0 ? shift : 0;
  const int rs = shift < 0 ? -shift : 0;
  const uint64_t v = (uint64_t)(int64_t)val << ls;
  int64_t res = (int64_t)(v * (uint64_t)(int64_t)mult + (1ull << 30)) >> 31;
  if (rs) {
    const int64_t mask = ((int64_t)1 << rs) - 1;
    const int64_t rem = res & mask;
    res >>= rs;
    const int64_t thr = (mask >> 1) + (res < 0 ? 1 : 0);
    res += rem > thr ? 1 : 0;
  }
  return (int32_t)(uint32_t)(uint64_t)res;
}

static inline int32_t k_clamp(int32_t v, int32_t lo, int32_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

/* The variant a dispatcher `<name>` calls: `<name>_mve`, else `<name>_dsp`,
 * else `<name>_ref` (for the families that have all three). */
#if FW_HAVE_MVE
#define K_BEST(name) name##_mve
#elif FW_HAVE_DSP
#define K_BEST(name) name##_dsp
#else
#define K_BEST(name) name##_ref
#endif

/* Asm text of a counted loop for the hand-scheduled inner loops (Armv7-M, DSP): BODY, again while the asm
 * operand named N (a register), decremented after each pass, is not zero; at least one pass. */
#define K_ASM_REPEAT(N, BODY) "1:\n\t" BODY "subs %[" N "], %[" N "], #1\n\t" "bne 1b\n\t"

/* Elementwise broadcast (add, mul): the output has max(a_len, b_len)
 * elements and the shorter operand repeats with period min(a_len, b_len),
 * which divides the longer length (see above); both lengths non-zero (no
 * check here: in the MVE kernels one more live value costs GCC 12 three
 * instructions per block). Calls blk on each period-long block; the _mve
 * and _dsp kernels share it, inlined so blk becomes a direct call. */
typedef void k_elem_block(const int8_t *a, const int8_t *b, int8_t *out, int32_t len, const void *ctx);
/* NAME##_fast and NAME##_gen: k_elem_block copies, out of line, of the always-inline block function
 * NAME(a, b, out, len, (const T *)ctx, fast), one per constant `fast` (which then folds away in each copy). */
#define K_ELEM_BLOCK_FAST_GEN(NAME, T)                                                                              \
  static __attribute__((noinline)) void NAME##_fast(const int8_t *a, const int8_t *b, int8_t *out, int32_t len,   \
                                                    const void *ctx) {                                            \
    NAME(a, b, out, len, (const T *)ctx, 1);                                                                      \
  }                                                                                                               \
  static __attribute__((noinline)) void NAME##_gen(const int8_t *a, const int8_t *b, int8_t *out, int32_t len,    \
                                                   const void *ctx) {                                             \
    NAME(a, b, out, len, (const T *)ctx, 0);                                                                      \
  }
static inline __attribute__((always_inline)) void k_bcast_blocks(const int8_t *a, size_t a_len, const int8_t *b,
                                                                 size_t b_len, int8_t *out, k_elem_block *blk,
                                                                 const void *ctx) {
  const size_t n = a_len > b_len ? a_len : b_len;
  const size_t per = a_len < b_len ? a_len : b_len;
  for (size_t s = 0; s < n; s += per) blk(a_len == n ? a + s : a, b_len == n ? b + s : b, out + s, (int32_t)per, ctx);
}

/* Largest of len int8 values `inner` apart (one softmax row). */
static inline int32_t k_max_strided_s8(const int8_t *x, int32_t len, int32_t inner) {
  int32_t m = x[0];
  for (int32_t j = 1; j < len; j++)
    if (x[(size_t)j * inner] > m) m = x[(size_t)j * inner];
  return m;
}

/* A row's largest code (*max) and the sum of table[max - x] over the row: the denominator of emlkit::softmax and
 * emlkit::log_softmax, whose tables hold exp(-d * s_in) for a code difference d in 0..255. */
static inline uint64_t k_exp_sum_strided_s8(const int8_t *x, int32_t len, int32_t inner, const int32_t *table,
                                            int32_t *max) {
  const int32_t m = k_max_strided_s8(x, len, inner);
  uint64_t s = 0;
  for (int32_t j = 0; j < len; j++) s += (uint32_t)table[m - x[(size_t)j * inner]];
  *max = m;
  return s;
}

/* ---- quantize_per_tensor / dequantize_per_tensor (quantize_f32.c) ----
 * quantize: out = clamp(rint(x * (float)(1/scale)) + zp, qmin, qmax), in float32
 * like the edge-dialect reference; out_dtype is K_U8, K_S8, K_S16 or K_S32.
 * dequantize: out = ((float)q - zp) * (float)scale. */
void emk_quantize_f32_ref(const float *in, size_t n, double scale, int32_t zp,
                      int32_t qmin, int32_t qmax, k_dtype out_dtype, void *out);
void emk_quantize_f32(const float *in, size_t n, double scale, int32_t zp,
                  int32_t qmin, int32_t qmax, k_dtype out_dtype, void *out);
void emk_dequantize_f32_ref(const void *in, k_dtype in_dtype, size_t n, double scale,
                        int32_t zp, float *out);
void emk_dequantize_f32(const void *in, k_dtype in_dtype, size_t n, double scale,
                    int32_t zp, float *out);

/* ---- elementwise add / mul (add_s8.c, mul_s8.c) ----
 * `a` has a_len elements and `b` b_len; the output has n = max(a_len, b_len).
 * The shorter operand is either as long as the output or repeats with its own
 * length as period (the channel broadcast of NHWC data: [1,C,1,1] vs [N,C,H,W]). */
typedef struct {
  int32_t a_zp, a_mult, a_shift;
  int32_t b_zp, b_mult, b_shift;
  int32_t out_zp, out_mult, out_shift;
  int32_t act_min, act_max;
} qadd_params;
void emk_add_s8_ref(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qadd_params *p);
void emk_add_s8(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
             int8_t *out, const qadd_params *p);

typedef struct {
  int32_t a_zp, b_zp;
  int32_t out_zp, out_mult, out_shift;
} qmul_params;
void emk_mul_s8_ref(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qmul_params *p);
void emk_mul_s8(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
             int8_t *out, const qmul_params *p);

/* ---- quantized_div (div.c): float32 quotient like the reference ----
 * out = clamp(rint(((a-za)/(b-zb)) * (float)scale) + out_zp); 0 quotient when b==zb. */
void emk_div_s8_ref(const int8_t *a, const int8_t *b, int8_t *out, size_t n,
                 int32_t a_zp, int32_t b_zp, int32_t out_zp, double out_scale);
void emk_div_s16_ref(const int16_t *a, const int16_t *b, int16_t *out, size_t n,
                  int32_t a_zp, int32_t b_zp, int32_t out_zp, double out_scale);
void emk_div_s8(const int8_t *a, const int8_t *b, int8_t *out, size_t n,
             int32_t a_zp, int32_t b_zp, int32_t out_zp, double out_scale);
void emk_div_s16(const int16_t *a, const int16_t *b, int16_t *out, size_t n,
              int32_t a_zp, int32_t b_zp, int32_t out_zp, double out_scale);

/* ---- quantized_activation (lut_s8.c): out[i] = lut[in[i] + 128] ---- */
void emk_lut_s8_ref(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]);
void emk_lut_s8(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]);

/* ---- conv family (conv2d_s8*.c, depthwise_conv2d_s8*.c,
 * transpose_conv2d_s8.c). NHWC in/out, per-output-channel requant. */
typedef struct {
  int32_t batch;
  int32_t in_h, in_w, in_c;
  int32_t out_h, out_w, out_c;
  int32_t k_h, k_w;
  int32_t stride_h, stride_w;
  int32_t pad_h, pad_w;
  int32_t dil_h, dil_w;
  int32_t groups;      /* conv: in_c / weight's I; depthwise: in_c; transpose: 1 */
  int32_t input_offset, output_offset;
  int32_t act_min, act_max;
  /* NULL, or per output channel bias + input_offset * sum(all the channel's
   * weights), computed at compile time (emlkit/passes/window_bias.py); the conv
   * paths (fast and general) and the depth-multiplier-1 depthwise start full
   * windows from it instead of summing the weights on every call. Conv: out_c
   * entries rounded up to a multiple of 4, zero past out_c (the MVE fast path
   * reads whole vectors of it in place); depthwise: out_c entries. */
  const int32_t *beff;
  /* NULL, or (depth multiplier 1 only) per 16 channels 48 int32: the 16
   * channels' beff, multipliers and shifts, zero past out_c, also computed
   * at compile time, given with beff: the MVE depthwise loops read all three
   * from one pointer (without it they build these blocks in scratch on every
   * call). */
  const int32_t *dwblk;
} qconv_params;

/* The family's signatures: the portable `_ref` form, the weight-free
 * scratch size, and the form with scratch (dispatcher, `_mve`, `_dsp`). */
typedef void k_conv_ref_fn(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                           const int32_t *mult, const int32_t *shift, int8_t *out);
typedef size_t k_conv_size_fn(const qconv_params *p);
typedef k_status k_conv_fn(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias,
                           const int32_t *mult, const int32_t *shift, int8_t *out, void *scratch,
                           size_t scratch_size);
/* weight OHWI [out_c][k_h][k_w][in_c/groups]; bias may be NULL. */
k_conv_ref_fn emk_conv2d_s8_ref;
k_conv_size_fn emk_conv2d_s8_get_buffer_size;
k_conv_fn emk_conv2d_s8;
/* weight 1HWO [k_h][k_w][out_c]; out channel o reads input channel o / (out_c/in_c). */
k_conv_ref_fn emk_depthwise_conv2d_s8_ref;
k_conv_size_fn emk_depthwise_conv2d_s8_get_buffer_size;
k_conv_fn emk_depthwise_conv2d_s8;
/* In place with a lead: the bytes by which the output of the call P must start before its input, the output
 * allowed to start further before it by whole multiples of *step bytes (a pixel); -1 when the call cannot
 * overlap them (depthwise_conv2d_s8.c says which). */
int64_t emk_depthwise_conv2d_s8_in_place_lead(const qconv_params *p, uint32_t *step);
/* Transposed conv; weight OHWI [out_c][k_h][k_w][in_c]; out_h/out_w already
 * include output_padding. Accumulates exactly in int32 (the reference does it
 * in float32, which is exact while partial sums stay below 2^24). No scratch. */
k_conv_ref_fn emk_transpose_conv2d_s8_ref, emk_transpose_conv2d_s8;

/* The dispatcher `name` of a convolution family (k_conv_fn) for the builds that pick `variant` (K_BEST),
 * written in the variant's own file: GCC may then inline the variant into it, as when a family's variants
 * shared one file, so the code (and the instruction counts) stay the same. The portable dispatchers,
 * which take no scratch, are written out in the `_ref` files. */
#define K_CONV_DISPATCHER(name, variant)                                                                        \
  k_status name(const qconv_params *p, const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *mult, \
                const int32_t *shift, int8_t *out, void *scratch, size_t scratch_size) {                         \
    return variant(p, in, w, bias, mult, shift, out, scratch, scratch_size);                                     \
  }

/* ---- quantized_linear (linear_s8.c) ----
 * in [rows][k], w [n][k]. With kernel_sum (the MVE flow):
 *   acc = sum(in*w) + sum(in)*filter_offset + kernel_sum[o]   (bias, input_offset unused)
 * without: acc = sum((in+input_offset)*(w+filter_offset)) + bias[o] (bias may be NULL).
 * Per-tensor requant, then + output_offset, clamp. */
typedef struct {
  int32_t rows, k, n;
  int32_t input_offset, filter_offset, output_offset;
  int32_t mult, shift;
  int32_t act_min, act_max;
} qlinear_params;
void emk_linear_s8_ref(const qlinear_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *kernel_sum, int8_t *out);
void emk_linear_s8(const qlinear_params *p, const int8_t *in, const int8_t *w,
                const int32_t *bias, const int32_t *kernel_sum, int8_t *out);

/* ---- quantized_batch_matmul (batch_matmul_s8.c) ----
 * lhs [b][m][k], rhs_t [b][n][k], out [b][m][n];
 * acc = sum((l + lhs_offset)(r + rhs_offset)), exact int32 (the reference
 * uses float32 bmm: equal while partial sums stay below 2^24). */
typedef struct {
  int32_t batch, m, n, k;
  int32_t lhs_offset, rhs_offset, out_zp, mult, shift;
} qbmm_params;
void emk_batch_matmul_s8_ref(const qbmm_params *p, const int8_t *lhs, const int8_t *rhs_t, int8_t *out);
void emk_batch_matmul_s8(const qbmm_params *p, const int8_t *lhs, const int8_t *rhs_t, int8_t *out);

/* ---- pooling (avg_pool2d_s8.c, max_pool2d_s8.c), NHWC ---- */
typedef struct {
  int32_t batch, in_h, in_w, c, out_h, out_w;
  int32_t k_h, k_w, stride_h, stride_w, pad_h, pad_w;
} qpool_params;
/* Valid taps [lo, hi) of pooling window o along one axis, clipped to the
 * input (padding never counts). */
typedef struct {
  int32_t lo, hi;
} k_span;
static inline k_span k_pool_span(int32_t o, int32_t stride, int32_t pad, int32_t k, int32_t n) {
  const int32_t s = o * stride - pad, e = s + k;
  return (k_span){s < 0 ? 0 : s, e > n ? n : e};
}
/* avg: float32 like the reference (dequantize with scale = mult*2^shift/2^31,
 * sum the window in row-major order, divide by the count of valid taps,
 * quantize with rint); out_h/out_w already reflect ceil_mode. */
void emk_avg_pool2d_s8_ref(const qpool_params *p, const int8_t *in, int8_t *out,
                     int32_t zp, int32_t mult, int32_t shift);
size_t emk_avg_pool2d_s8_get_buffer_size(const qpool_params *p);
k_status emk_avg_pool2d_s8(const qpool_params *p, const int8_t *in, int8_t *out,
                     int32_t zp, int32_t mult, int32_t shift, void *scratch, size_t scratch_size);
/* max over valid taps (padding never wins), then clamp to [act_min, act_max]. */
void emk_max_pool2d_s8_ref(const qpool_params *p, const int8_t *in, int8_t *out,
                     int32_t act_min, int32_t act_max);
void emk_max_pool2d_s8(const qpool_params *p, const int8_t *in, int8_t *out,
                 int32_t act_min, int32_t act_max);

/* ---- softmax (softmax_s8.c) ----
 * Element (o, j, i) of the [outer][len][inner] view; softmax over j.
 * Float32 like the reference; see softmax_s8.c for how close it gets. */
void emk_softmax_s8_ref(const int8_t *in, int8_t *out, int32_t outer, int32_t len,
                    int32_t inner, int32_t in_zp, int32_t out_zp, int32_t mult,
                    int32_t shift);
void emk_softmax_s8(const int8_t *in, int8_t *out, int32_t outer, int32_t len,
                int32_t inner, int32_t in_zp, int32_t out_zp, int32_t mult,
                int32_t shift);

/* ---- minimum / maximum (minmax.c): strided broadcast over <= 8 dims ----
 * shape[]: output sizes in the output's memory order; a_str/b_str: element
 * strides of each input for those dims (0 where broadcast). */
#define K_MAX_DIM 8
void emk_minmax_any_ref(k_dtype dt, int is_max, int ndim, const int32_t *shape,
                 const void *a, const int32_t *a_str, const void *b,
                 const int32_t *b_str, void *out);
void emk_minmax_any(k_dtype dt, int is_max, int ndim, const int32_t *shape,
             const void *a, const int32_t *a_str, const void *b,
             const int32_t *b_str, void *out);

/* ---- pad (pad.c): constant pad of a <= 4-D tensor in its physical order ----
 * in_shape: input sizes in memory order (4 entries, leading 1s), pre/post in
 * the same order; the output is (in_shape + pre + post), dense. */
void emk_pad_any_ref(size_t elem_size, const int32_t in_shape[4], const int32_t pre[4],
              const int32_t post[4], const void *in, const void *value, void *out);
void emk_pad_any(size_t elem_size, const int32_t in_shape[4], const int32_t pre[4],
          const int32_t post[4], const void *in, const void *value, void *out);

/* ---- transpose (transpose.c): strided copy over <= 8 dims ----
 * Walks the output densely in memory order; in_str[d] is the input element
 * stride to step for output memory dim d. */
void emk_transpose_any_ref(size_t elem_size, int ndim, const int32_t *out_shape,
                  const int32_t *in_str, const void *in, void *out);
void emk_transpose_any(size_t elem_size, int ndim, const int32_t *out_shape,
              const int32_t *in_str, const void *in, void *out);

#if FW_HAVE_MVE
void emk_add_s8_mve(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qadd_params *p);
void emk_mul_s8_mve(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qmul_params *p);
void emk_lut_s8_mve(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]);
k_conv_fn emk_conv2d_s8_mve, emk_depthwise_conv2d_s8_mve;
void emk_linear_s8_mve(const qlinear_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *kernel_sum, int8_t *out);
void emk_batch_matmul_s8_mve(const qbmm_params *p, const int8_t *lhs, const int8_t *rhs_t, int8_t *out);
void emk_max_pool2d_s8_mve(const qpool_params *p, const int8_t *in, int8_t *out,
                     int32_t act_min, int32_t act_max);
#endif
#if FW_HAVE_DSP
k_conv_fn emk_conv2d_s8_dsp, emk_depthwise_conv2d_s8_dsp;
void emk_linear_s8_dsp(const qlinear_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *bias, const int32_t *kernel_sum, int8_t *out);
void emk_add_s8_dsp(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qadd_params *p);
k_status emk_avg_pool2d_s8_dsp(const qpool_params *p, const int8_t *in, int8_t *out, int32_t zp,
                         int32_t mult, int32_t shift, void *scratch, size_t scratch_size);
void emk_mul_s8_dsp(const int8_t *a, size_t a_len, const int8_t *b, size_t b_len,
                 int8_t *out, const qmul_params *p);
void emk_max_pool2d_s8_dsp(const qpool_params *p, const int8_t *in, int8_t *out,
                     int32_t act_min, int32_t act_max);
void emk_lut_s8_dsp(const int8_t *in, int8_t *out, size_t n, const int8_t lut[256]);
void emk_batch_matmul_s8_dsp(const qbmm_params *p, const int8_t *lhs, const int8_t *rhs_t, int8_t *out);
#endif
#if FW_HAVE_MVE_FP
void emk_quantize_f32_mve(const float *in, size_t n, double scale, int32_t zp, int32_t qmin, int32_t qmax,
                      k_dtype out_dtype, void *out);
void emk_dequantize_f32_mve(const void *in, k_dtype in_dtype, size_t n, double scale, int32_t zp, float *out);
k_status emk_avg_pool2d_s8_mve(const qpool_params *p, const int8_t *in, int8_t *out,
                         int32_t zp, int32_t mult, int32_t shift, void *scratch, size_t scratch_size);
#endif

#endif
