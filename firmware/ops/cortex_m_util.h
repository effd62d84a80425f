/* Argument unpacking shared by the cortex_m:: operator adapters: every check
 * fails with a one-line message naming the op, the argument and the problem. */
#ifndef CORTEX_M_UTIL_H
#define CORTEX_M_UTIL_H

#include "et_types.h"
#include "kernels.h"
#include "op_entry.h"

/* Bounds the adapters enforce so the kernels' integer arithmetic is defined
 * and the MVE/portable twins agree (see kernels.h). */
#define CM_MAX_OFFSET 65536

/* Schema args, then `out`, then (in programs) the returned value again. */
static inline et_status cm_nargs(et_kernel_ctx *ctx, const char *op, uint32_t nargs, uint32_t nschema) {
  if (nargs != nschema + 1 && nargs != nschema + 2)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: got %u arguments, expected %u (schema args + out)", op,
                   (unsigned)nargs, (unsigned)(nschema + 1));
  return ET_OK;
}

static inline et_status cm_tensor(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i,
                                  const char *name, bool optional, et_tensor **t) {
  *t = NULL;
  if (optional && args[i]->tag == ET_TAG_NONE) return ET_OK;
  if (args[i]->tag != ET_TAG_TENSOR || !args[i]->u.t)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u (%s) must be a tensor%s", op, (unsigned)i, name,
                   optional ? " or None" : "");
  *t = args[i]->u.t;
  return ET_OK;
}

static inline et_status cm_int(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i,
                               const char *name, int64_t lo, int64_t hi, int32_t *v) {
  *v = 0; /* defined on every path (keeps -Wmaybe-uninitialized quiet in callers) */
  if (args[i]->tag != ET_TAG_INT)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u (%s) must be an int", op, (unsigned)i, name);
  const int64_t x = args[i]->u.i;
  if (x < lo || x > hi)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %s = %lld is outside the supported range [%lld, %lld]", op,
                   name, (long long)x, (long long)lo, (long long)hi);
  *v = (int32_t)x;
  return ET_OK;
}

static inline et_status cm_double(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i,
                                  const char *name, double *v) {
  *v = 0.0;
  if (args[i]->tag == ET_TAG_DOUBLE) *v = args[i]->u.d;
  else if (args[i]->tag == ET_TAG_INT) *v = (double)args[i]->u.i;
  else return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u (%s) must be a float", op, (unsigned)i, name);
  return ET_OK;
}

static inline et_status cm_bool(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i,
                                const char *name, bool *v) {
  *v = false;
  if (args[i]->tag != ET_TAG_BOOL)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u (%s) must be a bool", op, (unsigned)i, name);
  *v = args[i]->u.b;
  return ET_OK;
}

/* int[] argument into out[0..*n), at most maxn entries, each in [lo, hi]. */
static inline et_status cm_int_list(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i,
                                    const char *name, uint32_t maxn, int64_t lo, int64_t hi, int32_t *out,
                                    uint32_t *n) {
  if (args[i]->tag != ET_TAG_INT_LIST)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u (%s) must be an int list", op, (unsigned)i, name);
  const uint32_t len = args[i]->u.list.len;
  if (len > maxn)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %s has %u entries, at most %u supported", op, name,
                   (unsigned)len, (unsigned)maxn);
  for (uint32_t k = 0; k < len; k++) {
    const int64_t x = et_list_int(args[i], k);
    if (x < lo || x > hi)
      return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %s[%u] = %lld is outside [%lld, %lld]", op, name,
                     (unsigned)k, (long long)x, (long long)lo, (long long)hi);
    out[k] = (int32_t)x;
  }
  *n = len;
  return ET_OK;
}

/* A pair argument (kernel size, stride, ...): 1 entry means both. */
static inline et_status cm_pair(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i,
                                const char *name, int64_t lo, int64_t hi, int32_t out[2]) {
  uint32_t n = 0;
  et_status st = cm_int_list(ctx, op, args, i, name, 2, lo, hi, out, &n);
  if (st != ET_OK) return st;
  if (n == 1) out[1] = out[0];
  else if (n != 2)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s needs 1 or 2 entries, got %u", op, name, (unsigned)n);
  return ET_OK;
}

static inline et_status cm_dtype(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name,
                                 int want) {
  if (t->dtype != want)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %s must be %s, got %s", op, name, et_dtype_name(want),
                   et_dtype_name(t->dtype));
  return ET_OK;
}

static inline et_status cm_rank(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name,
                                uint8_t want) {
  if (t->dim != want)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %s must be %u-D, got %u-D", op, name, (unsigned)want,
                   (unsigned)t->dim);
  return ET_OK;
}

/* Whether t's bytes are laid out as if its dim order were `order`: moving a
 * size-1 dim does not change the bytes, so only the order of the other dims
 * matters (an [N,1,H,W] tensor is both NCHW and NHWC). */
static inline bool cm_layout_is(const et_tensor *t, const uint8_t *order) {
  uint8_t a[ET_MAX_DIM], b[ET_MAX_DIM], na = 0, nb = 0;
  for (uint8_t d = 0; d < t->dim; d++) {
    if (t->sizes[t->dim_order[d]] != 1) a[na++] = t->dim_order[d];
    if (t->sizes[order[d]] != 1) b[nb++] = order[d];
  }
  if (na != nb) return false;
  for (uint8_t d = 0; d < na; d++)
    if (a[d] != b[d]) return false;
  return true;
}

static const uint8_t cm_contig_order[ET_MAX_DIM] = {0, 1, 2, 3, 4, 5, 6, 7};
static const uint8_t cm_nhwc_order[4] = {0, 2, 3, 1};

static inline et_status cm_contiguous(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name) {
  if (!cm_layout_is(t, cm_contig_order))
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %s must be contiguous (dim order 0..%u)", op, name,
                   (unsigned)(t->dim ? t->dim - 1 : 0));
  return ET_OK;
}

/* 4-D activation as NHWC dims. Dim-order ops take logical NCHW sizes with
 * channels-last memory; the explicit-layout (_nhwc) ops take NHWC sizes,
 * contiguous. Either way the bytes are NHWC. */
static inline et_status cm_nhwc(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name,
                                bool nhwc_variant, int32_t d[4]) {
  et_status st = cm_rank(ctx, op, t, name, 4);
  if (st != ET_OK) return st;
  if (nhwc_variant) {
    if (!cm_layout_is(t, cm_contig_order))
      return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %s must be a contiguous NHWC tensor", op, name);
    d[0] = t->sizes[0], d[1] = t->sizes[1], d[2] = t->sizes[2], d[3] = t->sizes[3];
  } else {
    if (!cm_layout_is(t, cm_nhwc_order))
      return et_fail(ctx, ET_E_NOT_SUPPORTED,
                     "%s: %s must be channels-last (dim order 0,2,3,1); got dim order %u,%u,%u,%u", op, name,
                     t->dim_order[0], t->dim_order[1], t->dim_order[2], t->dim_order[3]);
    d[0] = t->sizes[0], d[1] = t->sizes[2], d[2] = t->sizes[3], d[3] = t->sizes[1];
  }
  return ET_OK;
}

static inline et_status cm_requant(et_kernel_ctx *ctx, const char *op, const char *what, int64_t mult,
                                   int64_t shift) {
  if (mult < 0 || mult > INT32_MAX || shift < -31 || shift > 31)
    return et_fail(ctx, ET_E_NOT_SUPPORTED,
                   "%s: %s multiplier %lld / shift %lld outside [0, 2^31) / [-31, 31]", op, what,
                   (long long)mult, (long long)shift);
  return ET_OK;
}

/* Per-channel requant tensors: int32 with `n` elements, each pair in range. */
static inline et_status cm_requant_tensors(et_kernel_ctx *ctx, const char *op, const et_tensor *m,
                                           const et_tensor *s, int32_t n) {
  et_status st;
  if ((st = cm_dtype(ctx, op, m, "requantize_multipliers", ET_DT_INT)) != ET_OK) return st;
  if ((st = cm_dtype(ctx, op, s, "requantize_shifts", ET_DT_INT)) != ET_OK) return st;
  if (et_tensor_numel(m) != (size_t)n || et_tensor_numel(s) != (size_t)n)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: requantize_multipliers/shifts need %d entries (one per output channel), got %u/%u",
                   op, (int)n, (unsigned)et_tensor_numel(m), (unsigned)et_tensor_numel(s));
  /* the values are read here, at load: they must be constants */
  if (m->data == NULL || s->data == NULL)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: requantize_multipliers/shifts must be constant tensors", op);
  const int32_t *mv = (const int32_t *)m->data, *sv = (const int32_t *)s->data;
  for (int32_t i = 0; i < n; i++)
    if ((st = cm_requant(ctx, op, "per-channel", mv[i], sv[i])) != ET_OK) return st;
  return ET_OK;
}

static inline et_status cm_act(et_kernel_ctx *ctx, const char *op, int32_t lo, int32_t hi) {
  if (lo > hi)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: activation_min %d > activation_max %d", op, (int)lo, (int)hi);
  return ET_OK;
}

static inline et_status cm_same_numel(et_kernel_ctx *ctx, const char *op, const et_tensor *a, const et_tensor *b,
                                      const char *an, const char *bn) {
  if (et_tensor_numel(a) != et_tensor_numel(b))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s has %u elements but %s has %u", op, an,
                   (unsigned)et_tensor_numel(a), bn, (unsigned)et_tensor_numel(b));
  return ET_OK;
}

/* Row-major logical strides (in elements) of t given its dim order. */
static inline void cm_logical_strides(const et_tensor *t, int32_t *str) {
  int32_t acc = 1;
  for (int d = (int)t->dim - 1; d >= 0; d--) {
    str[t->dim_order[d]] = acc;
    acc *= t->sizes[t->dim_order[d]];
  }
}

static inline bool cm_same_sizes(const et_tensor *a, const et_tensor *b) {
  if (a->dim != b->dim) return false;
  for (uint8_t d = 0; d < a->dim; d++)
    if (a->sizes[d] != b->sizes[d]) return false;
  return true;
}

/* The softmax ops' shape check: out shaped and laid out as the input, dim a
 * valid (possibly negative) index into it; a 0-D input counts as rank 1. */
static inline et_status cm_softmax_shapes(et_kernel_ctx *ctx, const char *op, const et_tensor *in,
                                          const et_tensor *out, int32_t dim) {
  if (!cm_same_sizes(in, out) || !cm_layout_is(out, in->dim_order))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out must have the input's sizes and dim order", op);
  const int rank = in->dim ? in->dim : 1;
  if (dim < -rank || dim >= rank)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dim %d out of range for rank %d", op, (int)dim, rank);
  return ET_OK;
}

/* [outer][len][inner] view of t's memory around logical dim `dim` (checked by
 * cm_softmax_shapes; negative counts from the end), following its dim order. */
static inline void cm_dim_view(const et_tensor *t, int32_t dim, int32_t *outer, int32_t *len, int32_t *inner) {
  const int rank = t->dim ? t->dim : 1;
  if (dim < 0) dim += rank;
  int pos = 0;
  *outer = 1, *len = t->dim ? t->sizes[dim] : 1, *inner = 1;
  for (int j = 0; j < t->dim; j++)
    if (t->dim_order[j] == dim) pos = j;
  for (int j = 0; j < t->dim; j++) {
    if (j < pos) *outer *= t->sizes[t->dim_order[j]];
    if (j > pos) *inner *= t->sizes[t->dim_order[j]];
  }
}

/* Unchecked access for the eval functions: prepare has checked each
 * argument's kind and range at load. */
static inline et_tensor *cm_t(et_value **args, uint32_t i) {
  return args[i]->tag == ET_TAG_TENSOR ? args[i]->u.t : NULL;
}
static inline int32_t cm_i(et_value **args, uint32_t i) { return (int32_t)args[i]->u.i; }
static inline double cm_d(et_value **args, uint32_t i) {
  return args[i]->tag == ET_TAG_DOUBLE ? args[i]->u.d : (double)args[i]->u.i;
}
static inline bool cm_b(et_value **args, uint32_t i) { return args[i]->u.b; }
/* A checked pair argument (1 entry means both). */
static inline void cm_pair_get(et_value **args, uint32_t i, int32_t out[2]) {
  out[0] = (int32_t)et_list_int(args[i], 0);
  out[1] = args[i]->u.list.len > 1 ? (int32_t)et_list_int(args[i], 1) : out[0];
}
/* NHWC dims of a checked 4-D activation (see cm_nhwc). */
static inline void cm_nhwc_get(const et_tensor *t, bool nhwc_variant, int32_t d[4]) {
  if (nhwc_variant) d[0] = t->sizes[0], d[1] = t->sizes[1], d[2] = t->sizes[2], d[3] = t->sizes[3];
  else d[0] = t->sizes[0], d[1] = t->sizes[2], d[2] = t->sizes[3], d[3] = t->sizes[1];
}

#define CM_TRY(x)                       \
  do {                                  \
    et_status cm_st_ = (x);             \
    if (cm_st_ != ET_OK) return cm_st_; \
  } while (0)

/* A binary op's tensors: self at 0, other at `other`, out after the nschema
 * schema args (the argument count is checked first). */
static inline et_status cm_binary(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs,
                                  uint32_t nschema, uint32_t other, et_tensor **a, et_tensor **b, et_tensor **out) {
  CM_TRY(cm_nargs(ctx, op, nargs, nschema));
  CM_TRY(cm_tensor(ctx, op, args, 0, "self", false, a));
  CM_TRY(cm_tensor(ctx, op, args, other, "other", false, b));
  return cm_tensor(ctx, op, args, nschema, "out", false, out);
}

/* An optional int32 per-output-channel tensor (bias, kernel_sum): n entries. */
static inline et_status cm_per_channel(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name,
                                       int32_t n) {
  if (!t) return ET_OK;
  CM_TRY(cm_dtype(ctx, op, t, name, ET_DT_INT));
  if (et_tensor_numel(t) != (size_t)n)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s has %u entries, expected %d", op, name,
                   (unsigned)et_tensor_numel(t), (int)n);
  return ET_OK;
}

/* One tensor argument of a schema: an op's table of these replaces a run of cm_tensor calls. */
typedef struct {
  uint32_t slot;
  const char *name;
  bool optional;
} cm_tensor_arg;

/* One int argument and its supported range (checked at load; eval reads it with cm_i). */
typedef struct {
  uint32_t slot;
  const char *name;
  int64_t lo, hi;
} cm_int_arg;

/* The argument count (out at slot nschema), then spec[k]'s tensor into *dst[k]. */
static inline et_status cm_tensors(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs,
                                   uint32_t nschema, const cm_tensor_arg *spec, uint32_t n, et_tensor **const *dst) {
  CM_TRY(cm_nargs(ctx, op, nargs, nschema));
  for (uint32_t k = 0; k < n; k++) CM_TRY(cm_tensor(ctx, op, args, spec[k].slot, spec[k].name, spec[k].optional, dst[k]));
  return ET_OK;
}

static inline et_status cm_ints(et_kernel_ctx *ctx, const char *op, et_value **args, const cm_int_arg *spec,
                                uint32_t n) {
  int32_t v;
  for (uint32_t k = 0; k < n; k++) CM_TRY(cm_int(ctx, op, args, spec[k].slot, spec[k].name, spec[k].lo, spec[k].hi, &v));
  return ET_OK;
}

/* multiplier at slot i and shift at i + 1 in the emlkit ops' int64 requantization ranges. */
static inline et_status cm_requant_args(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i) {
  int32_t mult, shift;
  CM_TRY(cm_int(ctx, op, args, i, "multiplier", (int64_t)1 << 30, INT32_MAX, &mult));
  return cm_int(ctx, op, args, i + 1, "shift", 1, 62, &shift);
}

/* x and out of a logical-NCHW int8 map op (pool, resize): 4-D, both channels-last (the kernels' NHWC) or both
 * contiguous NCHW, one batch and channel count. */
static inline et_status cm_s8_map_pair(et_kernel_ctx *ctx, const char *op, const et_tensor *in, const et_tensor *out) {
  CM_TRY(cm_dtype(ctx, op, in, "x", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  CM_TRY(cm_rank(ctx, op, in, "x", 4));
  CM_TRY(cm_rank(ctx, op, out, "out", 4));
  const bool nhwc = cm_layout_is(in, cm_nhwc_order) && cm_layout_is(out, cm_nhwc_order);
  if (!(nhwc || (cm_layout_is(in, cm_contig_order) && cm_layout_is(out, cm_contig_order))))
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: x and out must both be channels-last or both contiguous NCHW", op);
  if (out->sizes[0] != in->sizes[0] || out->sizes[1] != in->sizes[1])
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out's batch and channels are not x's", op);
  return ET_OK;
}

/* Eval's input and out (prepare checked them): false when out is empty, so there is nothing to compute. */
static inline bool cm_io(et_value **args, uint32_t in_slot, uint32_t out_slot, const et_tensor **in, et_tensor **out) {
  *in = args[in_slot]->u.t;
  *out = args[out_slot]->u.t;
  return et_tensor_numel(*out) != 0;
}

/* cm_io, then `in` viewed around `dim` as v = {outer, len, inner} (the dim wherever the dim order puts it). */
static inline bool cm_io_view(et_value **args, uint32_t in_slot, uint32_t out_slot, int32_t dim, const et_tensor **in,
                              et_tensor **out, int32_t v[3]) {
  if (!cm_io(args, in_slot, out_slot, in, out)) return false;
  cm_dim_view(*in, dim, &v[0], &v[1], &v[2]);
  return true;
}

/* A table-driven int8 map op's eval arguments (pools, resizes: x, rows, cols, ..., out) as the kernels' NHWC:
 * `images` maps of `c` channels (contiguous NCHW is N * C one-channel maps). */
typedef struct {
  const int8_t *in;
  int8_t *out;
  int32_t images, ih, iw, c, oh, ow;
  const int32_t *rows, *cols;
} cm_s8_map;

/* Fills *m from the pair cm_s8_map_pair checked; false when out is empty. Prepare saw one of the two layouts; a
 * tensor can be both (one channel, or a 1x1 map): ask both tensors. */
static inline bool cm_s8_map_io(et_value **args, uint32_t in_slot, uint32_t rows_slot, uint32_t cols_slot,
                                uint32_t out_slot, cm_s8_map *m) {
  const et_tensor *in;
  et_tensor *out;
  if (!cm_io(args, in_slot, out_slot, &in, &out)) return false;
  const int32_t n = in->sizes[0], c = in->sizes[1];
  const bool nhwc = cm_layout_is(in, cm_nhwc_order) && cm_layout_is(out, cm_nhwc_order);
  m->in = (const int8_t *)in->data, m->out = (int8_t *)out->data;
  m->images = nhwc ? n : n * c, m->c = nhwc ? c : 1;
  m->ih = in->sizes[2], m->iw = in->sizes[3], m->oh = out->sizes[2], m->ow = out->sizes[3];
  m->rows = (const int32_t *)args[rows_slot]->u.t->data, m->cols = (const int32_t *)args[cols_slot]->u.t->data;
  return true;
}

#endif
