/* Helpers shared by the portable float32 kernels (aten_float_*.c): argument
 * checks with one message each, an iterator that walks
 * an output in logical order with up to AF_MAX_OPS operands (each with its own
 * strides: any dim order, broadcast dims with stride 0), and N, C, H, W views
 * of 3-D and 4-D tensors. All static inline: no file depends on another. */
#ifndef ATEN_FLOAT_H
#define ATEN_FLOAT_H

#include "aten_util.h"

#define AF_MAX_OPS 5

/* ---- argument checks (prepare) ---- */

/* `t` (argument `name`) must be of the dtypes `want` describes: FMT_DTYPE. */
ET_PREPARE static inline et_status af_dtype(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name, bool ok,
                                            const char *want) {
  if (ok) return ET_OK;
  return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %s must be %s, got %s", op, name, want, et_dtype_name(t->dtype));
}
ET_PREPARE static inline et_status af_f32(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name) {
  return af_dtype(ctx, op, t, name, t->dtype == ET_DT_FLOAT, "float32");
}
/* An index tensor: int64 or int32. */
ET_PREPARE static inline et_status af_index_dtype(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name) {
  return af_dtype(ctx, op, t, name, t->dtype == ET_DT_LONG || t->dtype == ET_DT_INT, "int64 or int32");
}
ET_PREPARE static inline et_status af_bool(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, bool *v) {
  if (args[i]->tag != ET_TAG_BOOL) return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u is not a bool", op, (unsigned)i);
  *v = args[i]->u.b;
  return ET_OK;
}
/* A Tensor? argument: NULL for None. */
ET_PREPARE static inline et_status af_opt_tensor(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, et_tensor **t) {
  *t = NULL;
  if (args[i]->tag == ET_TAG_NONE) return ET_OK;
  return aten_tensor(ctx, op, args, i, t);
}
/* A tensor argument that must be float32. */
ET_PREPARE static inline et_status af_f32_arg(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, const char *name,
                                              et_tensor **t) {
  et_status st;
  if ((st = aten_tensor(ctx, op, args, i, t))) return st;
  return af_f32(ctx, op, *t, name);
}
/* The (self, ..., out) head of a float32 operator: aten_self_out, then self (called `name`) and out float32. */
ET_PREPARE static inline et_status af_f32_self_out(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs, uint32_t want,
                                                   uint32_t iout, et_tensor **self, const char *name, et_tensor **out) {
  et_status st;
  if ((st = aten_self_out(ctx, op, args, nargs, want, iout, self, out)) || (st = af_f32(ctx, op, *self, name))) return st;
  return af_f32(ctx, op, *out, "out");
}
/* A Tensor? argument that, when given, must be float32: NULL for None. */
ET_PREPARE static inline et_status af_opt_f32_arg(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, const char *name,
                                                  et_tensor **t) {
  et_status st;
  if ((st = af_opt_tensor(ctx, op, args, i, t)) || *t == NULL) return st;
  return af_f32(ctx, op, *t, name);
}
/* Unchecked form for eval: a Tensor? argument, NULL for None. */
static inline const et_tensor *af_opt_tensor_get(const et_value *v) { return v->tag == ET_TAG_TENSOR ? v->u.t : NULL; }
/* An int[] argument (int[]? too when `optional`: *n = 0 for None). */
ET_PREPARE static inline et_status af_int_list(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, bool optional,
                                               uint32_t *n) {
  if (n) *n = 0; /* n NULL: only the kind is checked */
  if (optional && args[i]->tag == ET_TAG_NONE) return ET_OK;
  if (args[i]->tag != ET_TAG_INT_LIST) return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u is not an int list", op, (unsigned)i);
  if (n) *n = args[i]->u.list.len;
  return ET_OK;
}
/* `t` must have rank `dim` and these sizes. */
ET_PREPARE static inline et_status af_shape(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name, uint8_t dim,
                                            const int32_t *sizes) {
  if (t->dim != dim) return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s has rank %u, expected %u", op, name, t->dim, dim);
  for (uint8_t d = 0; d < dim; d++)
    if (t->sizes[d] != sizes[d])
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s has size %d in dim %u, expected %d", op, name, (int)t->sizes[d], d,
                     (int)sizes[d]);
  return ET_OK;
}
ET_PREPARE static inline et_status af_same_shape(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const char *name,
                                                 const et_tensor *like) {
  return af_shape(ctx, op, t, name, like->dim, like->sizes);
}
/* A scalar argument that must be present, as float. */
ET_PREPARE static inline et_status af_scalar(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i) {
  double v;
  return aten_scalar(ctx, op, args, i, &v, NULL);
}
/* A string argument equal to one of two words: *which = 0 or 1 (None counts as the first when allowed). */
ET_PREPARE static inline et_status af_word(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, const char *w0,
                                           const char *w1, bool none_ok, int *which) {
  const et_value *v = args[i];
  *which = 0;
  if (none_ok && v->tag == ET_TAG_NONE) return ET_OK;
  if (v->tag == ET_TAG_STRING) {
    if (v->u.s.len == strlen(w0) && memcmp(v->u.s.ptr, w0, v->u.s.len) == 0) return ET_OK;
    *which = 1;
    if (v->u.s.len == strlen(w1) && memcmp(v->u.s.ptr, w1, v->u.s.len) == 0) return ET_OK;
  }
  return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: argument %u must be '%s' or '%s'", op, (unsigned)i, w0, w1);
}
/* The dims of an int[] argument `v` as a bit mask of dims in [0, rank); a dim given twice is refused. */
ET_PREPARE static inline et_status af_dim_list_mask(et_kernel_ctx *ctx, const char *op, const et_value *v, uint8_t rank,
                                                    unsigned *mask) {
  et_status st;
  uint8_t d = 0;
  for (uint32_t i = 0; i < v->u.list.len; i++) {
    if ((st = aten_dim(ctx, op, et_list_int(v, i), rank, &d))) return st;
    if ((*mask >> d) & 1u) return et_fail(ctx, ET_E_INVALID_ARG, "%s: dim %u appears twice", op, d);
    *mask |= 1u << d;
  }
  return ET_OK;
}
/* `t` broadcasts to `out` (prepare's check; eval computes the strides with af_bcast_get). */
ET_PREPARE static inline et_status af_bcast(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const et_tensor *out) {
  size_t s[ET_MAX_DIM];
  return aten_bcast_strides(ctx, op, t, out, s);
}
/* A Tensor? argument that, when given, must be float32 and broadcast to out (clamp's bounds). */
ET_PREPARE static inline et_status af_opt_f32_bcast_arg(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i,
                                                        const char *name, const et_tensor *out) {
  et_tensor *t = NULL;
  et_status st;
  if ((st = af_opt_f32_arg(ctx, op, args, i, name, &t)) || t == NULL) return st;
  return af_bcast(ctx, op, t, out);
}
/* Unchecked form for eval: t's strides seen from out (prepare checked that t broadcasts). */
static inline void af_bcast_get(et_kernel_ctx *ctx, const char *op, const et_tensor *t, const et_tensor *out, size_t *st) {
  (void)aten_bcast_strides(ctx, op, t, out, st);
}
/* Eval's tensor at slot isrc and out at slot iout, with src's strides seen from out in *st (prepare checked that
 * src broadcasts); returns out. */
static inline et_tensor *af_bcast_args(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t isrc, uint32_t iout,
                                       const et_tensor **src, size_t *st) {
  et_tensor *const out = args[iout]->u.t;
  *src = args[isrc]->u.t;
  af_bcast_get(ctx, op, *src, out, st);
  return out;
}
/* Unchecked form for eval: whether the string argument is w1 (prepare checked it is w0, w1 or None). */
static inline bool af_word_is(const et_value *v, const char *w1) {
  return v->tag == ET_TAG_STRING && v->u.s.len == strlen(w1) && memcmp(v->u.s.ptr, w1, v->u.s.len) == 0;
}

/* ---- iteration ---- */

/* Walks `sizes` in row-major logical order; each operand k keeps its element
 * offset off[k] through its own strides. */
typedef struct {
  uint8_t dim, nops;
  int32_t sizes[ET_MAX_DIM], idx[ET_MAX_DIM];
  size_t stride[AF_MAX_OPS][ET_MAX_DIM];
  size_t off[AF_MAX_OPS];
} af_iter;

static inline void af_iter_init(af_iter *it, uint8_t dim, const int32_t *sizes) {
  memset(it, 0, sizeof *it);
  it->dim = dim;
  for (uint8_t d = 0; d < dim; d++) it->sizes[d] = sizes[d];
}
/* Adds an operand (returns its number) with `stride` per logical dim, starting at `base`. */
static inline uint8_t af_iter_add(af_iter *it, const size_t *stride, size_t base) {
  const uint8_t k = it->nops++;
  for (uint8_t d = 0; d < it->dim; d++) it->stride[k][d] = stride[d];
  it->off[k] = base;
  return k;
}
/* Adds tensor t (same logical sizes as the walk) in its own dim order. */
static inline uint8_t af_iter_tensor(af_iter *it, const et_tensor *t) {
  size_t s[ET_MAX_DIM];
  et_tensor_strides(t, s);
  return af_iter_add(it, s, 0);
}
static inline void af_iter_next(af_iter *it) {
  for (int d = (int)it->dim - 1; d >= 0; d--) {
    if (++it->idx[d] < it->sizes[d]) {
      for (uint8_t k = 0; k < it->nops; k++) it->off[k] += it->stride[k][d];
      return;
    }
    for (uint8_t k = 0; k < it->nops; k++) it->off[k] -= it->stride[k][d] * (size_t)(it->sizes[d] - 1);
    it->idx[d] = 0;
  }
}

/* Element offset of logical index idx[] through strides. */
static inline size_t af_offset(uint8_t dim, const int32_t *idx, const size_t *stride) {
  size_t o = 0;
  for (uint8_t d = 0; d < dim; d++) o += (size_t)idx[d] * stride[d];
  return o;
}

/* ---- N, C, H, W views ---- */

typedef struct {
  int32_t n, c, h, w;
  size_t sn, sc, sh, sw;
} af_nchw;

/* A 4-D tensor as N, C, H, W; a 3-D one as (C, H, W) with N = 1 when
 * `unbatched`, else as (N, C, W) with H = 1 (a 1-D convolution's input). */
static inline void af_nchw_of(const et_tensor *t, bool unbatched, af_nchw *v) {
  size_t s[ET_MAX_DIM];
  et_tensor_strides(t, s);
  if (t->dim == 4) {
    *v = (af_nchw){t->sizes[0], t->sizes[1], t->sizes[2], t->sizes[3], s[0], s[1], s[2], s[3]};
  } else if (unbatched) {
    *v = (af_nchw){1, t->sizes[0], t->sizes[1], t->sizes[2], 0, s[0], s[1], s[2]};
  } else {
    *v = (af_nchw){t->sizes[0], t->sizes[1], 1, t->sizes[2], s[0], s[1], 0, s[2]};
  }
}

/* Element offset of (n, c, h, w) in a view. */
static inline size_t af_nchw_at(const af_nchw *v, int32_t n, int32_t c, int32_t h, int32_t w) {
  return (size_t)n * v->sn + (size_t)c * v->sc + (size_t)h * v->sh + (size_t)w * v->sw;
}

/* Element `off` of an index tensor (int64 or int32, checked at prepare). */
static inline int64_t af_index_at(const et_tensor *t, size_t off) { return aten_i64(t->dtype, t->data, off); }

/* A data-dependent index check (eval) for ops that take no negative index (index_select, gather, embedding). */
static inline et_status af_index_in(et_kernel_ctx *ctx, const char *op, int64_t i, int32_t size) {
  if (i >= 0 && i < size) return ET_OK;
  return et_fail(ctx, ET_E_INVALID_ARG, "%s: index %lld is out of range for size %d", op, (long long)i, (int)size);
}
/* The same where negative indices count from the end (advanced indexing). */
static inline et_status af_wrap_index(et_kernel_ctx *ctx, const char *op, int64_t i, int32_t size, int64_t *out) {
  *out = i < 0 ? i + size : i;
  if (*out >= 0 && *out < size) return ET_OK;
  return af_index_in(ctx, op, i, size); /* out of range: fails, naming the index as given */
}

/* Python's remainder (aten::remainder): the result takes the divisor's sign. */
static inline float af_rem_f(float x, float d) {
  float m = fmodf(x, d);
  if (m != 0 && ((d < 0) != (m < 0))) m += d;
  return m;
}

/* Copy a block of `sizes` (dim dims) of es-byte elements between element
 * strides ds (destination) and ss (source); a stride may be a negative number
 * as size_t (flip), the offsets wrap back into range. The innermost dim moves
 * with one memcpy when it is contiguous on both sides. */
static inline void af_copy_block(uint8_t *dst, const size_t *ds, const uint8_t *src, const size_t *ss, uint8_t dim,
                                 const int32_t *sizes, size_t es) {
  size_t n = 1;
  for (uint8_t d = 0; d < dim; d++) n *= (size_t)sizes[d];
  if (n == 0) return;
  if (dim == 0) {
    memcpy(dst, src, es);
    return;
  }
  const uint8_t last = (uint8_t)(dim - 1);
  const size_t run = (ds[last] == 1 && ss[last] == 1) ? (size_t)sizes[last] : 1;
  af_iter it;
  af_iter_init(&it, dim, sizes);
  if (run > 1) it.sizes[last] = 1;
  af_iter_add(&it, ds, 0);
  af_iter_add(&it, ss, 0);
  for (size_t e = 0; e < n / run; e++, af_iter_next(&it)) memcpy(dst + it.off[0] * es, src + it.off[1] * es, run * es);
}

#endif
