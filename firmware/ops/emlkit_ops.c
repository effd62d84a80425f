/* Adapters for our own emlkit:: operators (schemas and Python references:
 * emlkit/emlkit_ops.py; the outputs match those references bit for bit). */
#include "aten_util.h"

/* Argument slots (the operators' schemas in emlkit/emlkit_ops.py, out last). */
enum { UPSAMPLE_IN, UPSAMPLE_SCALE_H, UPSAMPLE_SCALE_W, UPSAMPLE_OUT };
enum { UPIDX_IN, UPIDX_ROWS, UPIDX_COLS, UPIDX_OUT };
enum { LAYER_NORM_IN, LAYER_NORM_GAIN, LAYER_NORM_BIAS, LAYER_NORM_EPS_TERM, LAYER_NORM_SHIFT, LAYER_NORM_OUT_ZP, LAYER_NORM_OUT };

/* ---------------------------------------------------------------- upsample_nearest2d
 * out[n, c, h, w] = x[n, c, h / sh, w / sw] for integer factors: pure data
 * movement on any dtype (int8 codes keep their qparams). When both tensors
 * are NCHW or both channels-last, the output is written one output row per
 * input row: each input "unit" (a whole pixel of C elements when
 * channels-last, one element when NCHW) is repeated sw times, then that row is
 * copied sh - 1 times with block copies. Other dim-order pairs (e.g. a
 * channels-last input with one channel and an NCHW output: the same bytes)
 * go element by element through both tensors' strides. */

static const uint8_t k_nhwc[4] = {0, 2, 3, 1};

static bool is_nhwc(const et_tensor *t) { return memcmp(t->dim_order, k_nhwc, sizeof k_nhwc) == 0; }

ET_PREPARE et_status emlkit_upsample_nearest2d_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::upsample_nearest2d";
  aten_self_ints a;
  const et_status st = aten_self_ints_out(ctx, op, args, nargs, &a);
  if (st) return st;
  if (a.self->dim != 4 || a.out->dim != 4) return et_fail(ctx, ET_E_INVALID_ARG, "%s: tensors must be 4-D", op);
  if (a.x < 1 || a.y < 1 || a.x > 4096 || a.y > 4096)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: factors %ld x %ld out of range [1, 4096]", op, (long)a.x, (long)a.y);
  if (a.out->sizes[0] != a.self->sizes[0] || a.out->sizes[1] != a.self->sizes[1] || (int64_t)a.out->sizes[2] != a.self->sizes[2] * a.x ||
      (int64_t)a.out->sizes[3] != a.self->sizes[3] * a.y)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: output shape is not the input's scaled by %ld x %ld", op, (long)a.x, (long)a.y);
  return ET_OK;
}

/* Repeat each of `units` units of `ub` bytes `rep` times from s into d. */
static void repeat_units(uint8_t *d, const uint8_t *s, size_t units, size_t ub, size_t rep) {
  if (ub == 1) { /* one byte per unit (NCHW int8): no memcpy call per element */
    for (size_t u = 0; u < units; u++) {
      const uint8_t v = s[u];
      for (size_t r = 0; r < rep; r++) *d++ = v;
    }
    return;
  }
  for (size_t u = 0; u < units; u++, s += ub)
    for (size_t r = 0; r < rep; r++, d += ub) memcpy(d, s, ub);
}

/* Source row or column of output row or column k: from the index table when there is one (the _index
 * op), else k / f (integer factor f). */
static inline size_t src_of(const et_value *table, size_t k, size_t f) {
  return table ? (size_t)et_list_int(table, (uint32_t)k) : k / f;
}

/* Any pair of dim orders: one element at a time through the strides. */
static void upsample_strided(const et_tensor *self, et_tensor *out, size_t sh, size_t sw, const et_value *rows,
                             const et_value *cols, size_t es) {
  size_t si[ET_MAX_DIM], so[ET_MAX_DIM];
  et_tensor_strides(self, si);
  et_tensor_strides(out, so);
  const uint8_t *s = self->data;
  uint8_t *d = out->data;
  for (int32_t n = 0; n < out->sizes[0]; n++)
    for (int32_t c = 0; c < out->sizes[1]; c++)
      for (int32_t y = 0; y < out->sizes[2]; y++)
        for (int32_t x = 0; x < out->sizes[3]; x++) {
          const size_t io = (size_t)n * si[0] + (size_t)c * si[1] + src_of(rows, (size_t)y, sh) * si[2] +
                            src_of(cols, (size_t)x, sw) * si[3];
          const size_t oo = (size_t)n * so[0] + (size_t)c * so[1] + (size_t)y * so[2] + (size_t)x * so[3];
          memcpy(d + oo * es, s + io * es, es);
        }
}

et_status emlkit_upsample_nearest2d_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *const self = args[UPSAMPLE_IN]->u.t;
  et_tensor *const out = args[UPSAMPLE_OUT]->u.t;
  const size_t sh = (size_t)args[UPSAMPLE_SCALE_H]->u.i, sw = (size_t)args[UPSAMPLE_SCALE_W]->u.i;
  const size_t es = et_dtype_size(self->dtype);
  if (!et_same_dim_order(self, out) || !(et_dim_order_is_identity(self) || is_nhwc(self))) {
    upsample_strided(self, out, sh, sw, NULL, NULL, es);
    return ET_OK;
  }
  const size_t n = (size_t)self->sizes[0], c = (size_t)self->sizes[1];
  const size_t h = (size_t)self->sizes[2], w = (size_t)self->sizes[3];
  const bool nhwc = is_nhwc(self) && !et_dim_order_is_identity(self);
  const size_t outer = nhwc ? n : n * c; /* planes of h rows */
  const size_t ub = nhwc ? c * es : es;  /* bytes per repeated unit */
  const size_t in_row = w * ub, out_row = w * sw * ub;
  const uint8_t *s = self->data;
  uint8_t *d = out->data;
  for (size_t p = 0; p < outer; p++) {
    for (size_t y = 0; y < h; y++, s += in_row) {
      repeat_units(d, s, w, ub, sw);
      for (size_t r = 1; r < sh; r++) memcpy(d + r * out_row, d, out_row);
      d += sh * out_row;
    }
  }
  return ET_OK;
}

/* ---------------------------------------------------------------- upsample_nearest2d_index
 * out[n, c, i, j] = x[n, c, rows[i], cols[j]]: nearest resizing to any size, any dtype, with the index
 * tables the compiler took from torch's own kernel (emlkit/passes/int8_upsample.py: torch's float index
 * rule is not integer division). Prepare checks every index once; eval trusts them. Same dim order on
 * both sides (NCHW or channels-last): one output row at a time from its source row, and a row whose
 * source row is the previous row's is a block copy of that row. Other pairs: through the strides. */

ET_PREPARE et_status emlkit_upsample_nearest2d_index_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::upsample_nearest2d_index";
  et_tensor *self, *out;
  const et_status st = aten_self_out(ctx, op, args, nargs, 5, UPIDX_OUT, &self, &out);
  if (st) return st;
  if (self->dtype != out->dtype)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dtype %s in, %s out", op, et_dtype_name(self->dtype),
                   et_dtype_name(out->dtype));
  if (self->dim != 4 || out->dim != 4) return et_fail(ctx, ET_E_INVALID_ARG, "%s: tensors must be 4-D", op);
  if (out->sizes[0] != self->sizes[0] || out->sizes[1] != self->sizes[1])
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: output batch and channels are not the input's", op);
  for (uint32_t k = UPIDX_ROWS; k <= UPIDX_COLS; k++) {
    const char *name = k == UPIDX_ROWS ? "rows" : "cols";
    if (args[k]->tag != ET_TAG_INT_LIST)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u (%s) must be an int list", op, (unsigned)k, name);
    const uint32_t len = args[k]->u.list.len;
    const int64_t lim = self->sizes[k + 1];
    if ((int64_t)len != (int64_t)out->sizes[k + 1])
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s has %u entries for an output of %ld", op, name, (unsigned)len,
                     (long)out->sizes[k + 1]);
    for (uint32_t i = 0; i < len; i++) {
      const int64_t v = et_list_int(args[k], i);
      if (v < 0 || v >= lim)
        return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s[%u] = %lld is outside [%lld, %lld]", op, name, (unsigned)i,
                       (long long)v, 0LL, (long long)(lim - 1));
    }
  }
  return ET_OK;
}

et_status emlkit_upsample_nearest2d_index_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *const self = args[UPIDX_IN]->u.t;
  const et_value *const rows = args[UPIDX_ROWS], *const cols = args[UPIDX_COLS];
  et_tensor *const out = args[UPIDX_OUT]->u.t;
  const size_t es = et_dtype_size(self->dtype);
  if (!et_same_dim_order(self, out) || !(et_dim_order_is_identity(self) || is_nhwc(self))) {
    upsample_strided(self, out, 1, 1, rows, cols, es);
    return ET_OK;
  }
  const size_t n = (size_t)self->sizes[0], c = (size_t)self->sizes[1];
  const size_t h = (size_t)self->sizes[2], w = (size_t)self->sizes[3];
  const size_t oh = (size_t)out->sizes[2], ow = (size_t)out->sizes[3];
  const bool nhwc = is_nhwc(self) && !et_dim_order_is_identity(self);
  const size_t outer = nhwc ? n : n * c; /* planes of h rows */
  const size_t ub = nhwc ? c * es : es;  /* bytes per unit (a pixel when channels-last, else an element) */
  const size_t in_row = w * ub, out_row = ow * ub;
  const uint8_t *s = self->data;
  uint8_t *d = out->data;
  for (size_t p = 0; p < outer; p++, s += h * in_row) {
    for (size_t i = 0; i < oh; i++, d += out_row) {
      const size_t r = src_of(rows, i, 1);
      if (i > 0 && r == src_of(rows, i - 1, 1)) {
        memcpy(d, d - out_row, out_row);
        continue;
      }
      const uint8_t *const src = s + r * in_row;
      if (ub == 1) {
        for (size_t j = 0; j < ow; j++) d[j] = src[src_of(cols, j, 1)];
      } else {
        for (size_t j = 0; j < ow; j++) memcpy(d + j * ub, src + src_of(cols, j, 1) * ub, ub);
      }
    }
  }
  return ET_OK;
}

/* ---------------------------------------------------------------- quantized_layer_norm
 * int8 layer norm over rows of numel(gain) codes consecutive in memory (the
 * last dim, or the normalised dims when they are innermost in x's dim order),
 * in integer arithmetic, step for step the
 * Python reference (emlkit/emlkit_ops.py, quantized_layer_norm_reference):
 * row sums in int32/int64, 1/sqrt of the scaled variance from an integer
 * square root and one 64-bit division per row, Q16 normalised values, then a
 * per-channel int32 gain and bias with one rounding shift. No float, so a core
 * without an FPU gets the same bits. */

/* floor(sqrt(v)) for v < 2^62, bit by bit. */
static uint64_t isqrt64(uint64_t v) {
  uint64_t r = 0, bit = (uint64_t)1 << 62;
  while (bit > v) bit >>= 2;
  while (bit) {
    if (v >= r + bit) {
      v -= r + bit;
      r = (r >> 1) + bit;
    } else {
      r >>= 1;
    }
    bit >>= 2;
  }
  return r;
}

static int bit_length(uint64_t v) {
  int n = 0;
  while (v) n++, v >>= 1;
  return n;
}

/* Arithmetic shift right of a signed value (floor division by 2^s), without relying on how >> treats negatives. */
static inline int64_t asr64(int64_t v, int s) { return v >= 0 ? (int64_t)((uint64_t)v >> s) : -(int64_t)(((uint64_t)(-(v + 1)) >> s)) - 1; }

ET_PREPARE et_status emlkit_quantized_layer_norm_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::quantized_layer_norm";
  et_tensor *x = NULL, *gain = NULL, *bias = NULL, *out = NULL;
  int64_t eps_term = 0, shift = 0, zp = 0;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, 8)) || (st = aten_tensor(ctx, op, args, LAYER_NORM_IN, &x)) ||
      (st = aten_tensor(ctx, op, args, LAYER_NORM_GAIN, &gain)) || (st = aten_tensor(ctx, op, args, LAYER_NORM_BIAS, &bias)) ||
      (st = aten_int(ctx, op, args, LAYER_NORM_EPS_TERM, &eps_term)) || (st = aten_int(ctx, op, args, LAYER_NORM_SHIFT, &shift)) ||
      (st = aten_int(ctx, op, args, LAYER_NORM_OUT_ZP, &zp)) || (st = aten_tensor(ctx, op, args, LAYER_NORM_OUT, &out)))
    return st;
  if (x->dtype != ET_DT_CHAR || out->dtype != ET_DT_CHAR || gain->dtype != ET_DT_INT || bias->dtype != ET_DT_INT)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: needs int8 input and output, int32 gain and bias", op);
  if (x->dim < 1 || !aten_same_shape(x, out) || !et_same_dim_order(x, out))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: input and output must be of one shape and dim order", op);
  /* Rows are n = numel(gain) codes consecutive in memory: x's innermost dims in its dim order. */
  const size_t n = et_tensor_numel(gain);
  size_t inner = 1;
  for (int32_t k = (int32_t)x->dim - 1; k >= 0 && inner < n; k--) inner *= (size_t)x->sizes[x->dim_order[k]];
  if (n == 0 || n > 65536 || inner != n || et_tensor_numel(bias) != n)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: %lu gain/bias entries (at most 65536) are not x's innermost dims", op,
                   (unsigned long)n);
  if (eps_term < 1 || eps_term > ((int64_t)1 << 40) || shift < 0 || shift > 30 || zp < -128 || zp > 127)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: eps_term, shift or zero point out of range", op);
  return ET_OK;
}

et_status emlkit_quantized_layer_norm_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *const x = args[LAYER_NORM_IN]->u.t;
  const int32_t *const gain = args[LAYER_NORM_GAIN]->u.t->data;
  const int32_t *const bias = args[LAYER_NORM_BIAS]->u.t->data;
  const int64_t eps_term = args[LAYER_NORM_EPS_TERM]->u.i;
  const int shift = (int)args[LAYER_NORM_SHIFT]->u.i;
  const int32_t zp = (int32_t)args[LAYER_NORM_OUT_ZP]->u.i;
  et_tensor *const out = args[LAYER_NORM_OUT]->u.t;
  const size_t n = et_tensor_numel(args[LAYER_NORM_GAIN]->u.t);
  const size_t rows = n ? et_tensor_numel(x) / n : 0;
  const int8_t *in = x->data;
  int8_t *o = out->data;
  const int out_shift = 16 + shift;
  const int64_t half = (int64_t)1 << (out_shift - 1);
  for (size_t r = 0; r < rows; r++, in += n, o += n) {
    int32_t s = 0;
    int64_t ss = 0;
    for (size_t i = 0; i < n; i++) {
      const int32_t q = in[i];
      s += q;
      ss += q * q;
    }
    /* N^2 * (variance + eps) in squared codes; >= 1 since eps_term >= 1 */
    const uint64_t total = (uint64_t)((int64_t)n * ss - (int64_t)s * s + eps_term);
    const int k = (62 - bit_length(total)) / 2;
    const uint64_t t = isqrt64(total << (2 * k)); /* in [2^30, 2^31) */
    const int64_t inv = (int64_t)(((uint64_t)1 << 62) / t);
    const int rs = 46 - k;
    const int64_t rhalf = (int64_t)1 << (rs - 1);
    for (size_t i = 0; i < n; i++) {
      const int64_t d = (int64_t)n * in[i] - s;
      const int64_t norm = asr64(d * inv + rhalf, rs); /* Q16 */
      const int64_t acc = norm * gain[i] + (int64_t)bias[i] * 65536;
      int64_t v = asr64(acc + half, out_shift) + zp;
      o[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
    }
  }
  return ET_OK;
}
