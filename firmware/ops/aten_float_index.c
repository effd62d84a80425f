/* Data movement and indexing on any dtype and dim order (float32 programs
 * use them around their float ops, masks and index tensors around those):
 * expand_copy, repeat, flip, constant_pad_nd, copy, slice_scatter,
 * split_with_sizes_copy; index_select, index.Tensor (advanced indexing with
 * up to 4 index tensors), index_put (assign or accumulate), embedding,
 * _embedding_bag (sum, mean, max), gather; full, full_like, scalar_tensor,
 * arange and dim_order_ops::_empty_dim_order. Indices are int64 or int32 (negative ones
 * count from the end in index and index_put only, as in PyTorch); one outside
 * its dim stops the program with the index named: a data-dependent check,
 * made as the op runs. Copies move whole innermost runs where both sides are
 * contiguous. */
#include "aten_float.h"

#define MAX_INDEX_TENSORS (AF_MAX_OPS - 1)

ET_PREPARE static et_status same_dtype(et_kernel_ctx *ctx, const char *op, const et_tensor *a, const et_tensor *out) {
  if (a->dtype == out->dtype && et_dtype_size(out->dtype) != 0) return ET_OK;
  return et_fail(ctx, ET_E_INVALID_ARG, "%s: dtype %s in, %s out", op, et_dtype_name(a->dtype), et_dtype_name(out->dtype));
}
/* (self, ..., out, ret) with out of self's dtype. */
ET_PREPARE static et_status self_out_same(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs, uint32_t want,
                                          et_tensor **self, et_tensor **out) {
  et_status st;
  if ((st = aten_self_out(ctx, op, args, nargs, want, ATEN_OUT_SLOT(want), self, out))) return st;
  return same_dtype(ctx, op, *self, *out);
}
/* The (self, int[] list, ..., out, ret) head of expand_copy, repeat, flip and constant_pad_nd: out of self's
 * dtype, n the list's length. */
typedef struct {
  et_tensor *self, *out;
  uint32_t n;
} self_list;
ET_PREPARE static et_status self_list_out(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs, uint32_t want,
                                          uint32_t ilist, self_list *h) {
  et_status st;
  memset(h, 0, sizeof *h);
  if ((st = self_out_same(ctx, op, args, nargs, want, &h->self, &h->out))) return st;
  return af_int_list(ctx, op, args, ilist, false, &h->n);
}
/* The whole of src copied into dst through src's broadcast strides (same logical sizes as dst). */
static void copy_all(et_tensor *dst, const et_tensor *src, const size_t *ss) {
  size_t ds[ET_MAX_DIM];
  et_tensor_strides(dst, ds);
  af_copy_block(dst->data, ds, src->data, ss, dst->dim, dst->sizes, et_dtype_size(dst->dtype));
}

/* Argument slots (the operators' schemas, out last; ret after it): expand_copy, repeat, flip, constant_pad_nd,
 * copy, slice_scatter, split_with_sizes_copy, index_select and gather (common head), embedding, _embedding_bag,
 * index.Tensor, index_put, full, full_like, scalar_tensor, arange.out and arange.start_out, _empty_dim_order. */
enum { EXPAND_SELF, EXPAND_SIZE, EXPAND_IMPLICIT, EXPAND_OUT };
enum { REPEAT_SELF, REPEAT_REPEATS, REPEAT_OUT };
enum { FLIP_SELF, FLIP_DIMS, FLIP_OUT };
enum { PAD_SELF, PAD_PAD, PAD_VALUE, PAD_OUT };
enum { COPY_SELF, COPY_SRC, COPY_NON_BLOCKING, COPY_OUT };
enum { SSC_SELF, SSC_SRC, SSC_DIM, SSC_START, SSC_END, SSC_STEP, SSC_OUT };
enum { SPLIT_SELF, SPLIT_SIZES, SPLIT_DIM, SPLIT_OUT };
enum { DIMIDX_SELF, DIMIDX_DIM, DIMIDX_INDEX }; /* index_select and gather */
enum { INDEX_SELECT_OUT = DIMIDX_INDEX + 1 };
enum { GATHER_SPARSE_GRAD = DIMIDX_INDEX + 1, GATHER_OUT };
enum { EMB_WEIGHT, EMB_INDICES, EMB_PADDING_IDX, EMB_SCALE_GRAD_BY_FREQ, EMB_SPARSE, EMB_OUT };
enum { EB_WEIGHT, EB_INDICES, EB_OFFSETS, EB_SCALE_GRAD_BY_FREQ, EB_MODE, EB_SPARSE, EB_PER_SAMPLE_WEIGHTS, EB_INCLUDE_LAST_OFFSET, EB_PADDING_IDX, EB_OUT0, EB_OUT1, EB_OUT2, EB_OUT3 };
enum { INDEX_SELF, INDEX_INDICES, INDEX_OUT };
enum { PUT_SELF, PUT_INDICES, PUT_VALUES, PUT_ACCUMULATE, PUT_OUT };
enum { FULL_SIZE, FULL_FILL_VALUE, FULL_OUT };
enum { FULL_LIKE_SELF, FULL_LIKE_FILL_VALUE, FULL_LIKE_MEMORY_FORMAT, FULL_LIKE_OUT };
enum { SCALAR_TENSOR_S, SCALAR_TENSOR_OUT };
enum { ARANGE_END, ARANGE_OUT };
enum { ARANGE_START_START, ARANGE_START_END, ARANGE_START_STEP, ARANGE_START_OUT };
enum { EMPTY_SIZE, EMPTY_DIM_ORDER, EMPTY_OUT };

/* ---- expand, repeat, flip, pad, copy ---- */

/* expand_copy(self, size, implicit, out): size entries -1 keep self's size. */
ET_PREPARE et_status aten_expand_copy_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::expand_copy.out";
  self_list h;
  const et_status st = self_list_out(ctx, op, args, nargs, 5, EXPAND_SIZE, &h);
  if (st) return st;
  if (h.n != h.out->dim || h.n < h.self->dim) return et_fail(ctx, ET_E_INVALID_ARG, "%s: size has %u entries for a rank-%u input", op, (unsigned)h.n, h.self->dim);
  for (uint32_t d = 0; d < h.n; d++) {
    const int64_t want = et_list_int(args[EXPAND_SIZE], d);
    const int64_t from = d >= h.n - h.self->dim ? h.self->sizes[d - (h.n - h.self->dim)] : -2;
    if (h.out->sizes[d] != (want == -1 ? from : want)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: output shape does not match size", op);
  }
  return af_bcast(ctx, op, h.self, h.out);
}
et_status aten_expand_copy_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *a;
  size_t s[ET_MAX_DIM];
  et_tensor *const out = af_bcast_args(ctx, "aten::expand_copy.out", args, EXPAND_SELF, EXPAND_OUT, &a, s);
  copy_all(out, a, s);
  (void)nargs;
  return ET_OK;
}

/* repeat(self, repeats, out): one block copy of self per tile. */
ET_PREPARE et_status aten_repeat_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::repeat.out";
  self_list h;
  const et_status st = self_list_out(ctx, op, args, nargs, 4, REPEAT_REPEATS, &h);
  if (st) return st;
  const et_tensor *const a = h.self, *const out = h.out;
  const uint32_t n = h.n;
  int32_t want[ET_MAX_DIM];
  if (n < a->dim || n > ET_MAX_DIM) return et_fail(ctx, ET_E_INVALID_ARG, "%s: %u repeats for a rank-%u input", op, (unsigned)n, a->dim);
  for (uint32_t d = 0; d < n; d++) {
    const int64_t r = et_list_int(args[REPEAT_REPEATS], d), s = d >= n - a->dim ? a->sizes[d - (n - a->dim)] : 1;
    if (r < 0) return et_fail(ctx, ET_E_INVALID_ARG, "%s: negative repeat", op);
    want[d] = (int32_t)(r * s);
  }
  return af_shape(ctx, op, out, "out", (uint8_t)n, want);
}
et_status aten_repeat_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[REPEAT_SELF]->u.t;
  et_tensor *const out = args[REPEAT_OUT]->u.t;
  const uint8_t n = out->dim, lead = (uint8_t)(n - a->dim);
  size_t os[ET_MAX_DIM], as[ET_MAX_DIM], ss[ET_MAX_DIM], tstride[ET_MAX_DIM];
  int32_t sz[ET_MAX_DIM], reps[ET_MAX_DIM];
  et_tensor_strides(out, os);
  et_tensor_strides(a, as);
  size_t tiles = 1;
  for (uint8_t d = 0; d < n; d++) {
    sz[d] = d < lead ? 1 : a->sizes[d - lead];
    ss[d] = d < lead ? 0 : as[d - lead];
    reps[d] = (int32_t)et_list_int(args[REPEAT_REPEATS], d);
    tstride[d] = (size_t)sz[d] * os[d]; /* one tile further along d */
    tiles *= (size_t)reps[d];
  }
  if (et_tensor_numel(out) == 0) return ET_OK;
  const size_t es = et_dtype_size(out->dtype);
  af_iter t; /* over the tiles: operand 0 the tile's first output element */
  af_iter_init(&t, n, reps);
  af_iter_add(&t, tstride, 0);
  for (size_t k = 0; k < tiles; k++, af_iter_next(&t))
    af_copy_block((uint8_t *)out->data + t.off[0] * es, os, a->data, ss, n, sz, es);
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* flip(self, dims, out): the flipped dims read backwards (negative strides). */
ET_PREPARE et_status aten_flip_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::flip.out";
  self_list h;
  unsigned seen = 0;
  et_status st;
  if ((st = self_list_out(ctx, op, args, nargs, 4, FLIP_DIMS, &h)) || (st = af_same_shape(ctx, op, h.out, "out", h.self))) return st;
  return af_dim_list_mask(ctx, op, args[FLIP_DIMS], h.self->dim, &seen);
}
et_status aten_flip_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[FLIP_SELF]->u.t;
  et_tensor *const out = args[FLIP_OUT]->u.t;
  size_t s[ET_MAX_DIM], base = 0;
  et_tensor_strides(a, s);
  for (uint32_t i = 0; i < args[FLIP_DIMS]->u.list.len; i++) {
    const uint8_t d = aten_dim_get(et_list_int(args[FLIP_DIMS], i), a->dim);
    if (a->sizes[d] == 0) return ET_OK;
    base += (size_t)(a->sizes[d] - 1) * s[d];
    s[d] = 0u - s[d];
  }
  size_t os[ET_MAX_DIM];
  et_tensor_strides(out, os);
  const size_t es = et_dtype_size(out->dtype);
  af_copy_block(out->data, os, (const uint8_t *)a->data + base * es, s, out->dim, out->sizes, es);
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* The fill value of `out`'s dtype (float32 as float, integers wrapped like PyTorch's cast). */
static void fill_value(et_tensor *out, double v) {
  const size_t es = et_dtype_size(out->dtype), n = et_tensor_numel(out);
  uint8_t one[8];
  if (out->dtype == ET_DT_FLOAT || out->dtype == ET_DT_DOUBLE || out->dtype == ET_DT_BOOL) et_elem_from_double(out->dtype, one, 0, v);
  else aten_store_i64(out->dtype, one, 0, (int64_t)v);
  uint8_t *p = out->data;
  if (es == 1) {
    memset(p, one[0], n);
    return;
  }
  for (size_t i = 0; i < n; i++) memcpy(p + i * es, one, es);
}

/* constant_pad_nd(self, pad, value, out): pad pairs from the last dim back; negative pads crop. */
ET_PREPARE et_status aten_constant_pad_nd_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::constant_pad_nd.out";
  self_list h;
  et_status st = self_list_out(ctx, op, args, nargs, 5, PAD_PAD, &h);
  if (st || (st = af_scalar(ctx, op, args, PAD_VALUE))) return st;
  const et_tensor *const a = h.self, *const out = h.out;
  const uint32_t n = h.n;
  int32_t want[ET_MAX_DIM];
  if (n % 2 != 0 || n / 2 > a->dim) return et_fail(ctx, ET_E_INVALID_ARG, "%s: pad has %u entries for a rank-%u input", op, (unsigned)n, a->dim);
  memcpy(want, a->sizes, sizeof want);
  for (uint32_t i = 0; i < n / 2; i++) {
    const int64_t s = want[a->dim - 1 - i] + et_list_int(args[PAD_PAD], 2 * i) + et_list_int(args[PAD_PAD], 2 * i + 1);
    if (s < 0) return et_fail(ctx, ET_E_INVALID_ARG, "%s: padding makes dim %u negative", op, (unsigned)(a->dim - 1 - i));
    want[a->dim - 1 - i] = (int32_t)s;
  }
  return af_shape(ctx, op, out, "out", a->dim, want);
}
et_status aten_constant_pad_nd_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[PAD_SELF]->u.t;
  et_tensor *const out = args[PAD_OUT]->u.t;
  const uint8_t dim = a->dim;
  int32_t before[ET_MAX_DIM] = {0}, sz[ET_MAX_DIM];
  size_t as[ET_MAX_DIM], os[ET_MAX_DIM];
  bool crop = true; /* no padding added: every output element is copied, none filled */
  for (uint32_t i = 0; i < args[PAD_PAD]->u.list.len; i++) crop = crop && et_list_int(args[PAD_PAD], i) <= 0;
  for (uint32_t i = 0; i < args[PAD_PAD]->u.list.len / 2; i++) before[dim - 1 - i] = (int32_t)et_list_int(args[PAD_PAD], 2 * i);
  if (!crop) fill_value(out, aten_scalar_get(args[PAD_VALUE], NULL));
  const size_t es = et_dtype_size(out->dtype);
  bool same = true;
  for (uint8_t j = 0; j < dim; j++) same = same && a->dim_order[j] == out->dim_order[j];
  if (crop && same) {
    /* Rows cut along the outermost dim (in memory order) that is not 1, the dims inside it whole: the
     * kept part is one run of bytes (patch-based execution cuts row bands of NHWC maps this way). */
    uint8_t k = 0;
    while (k < dim && a->sizes[a->dim_order[k]] == 1 && out->sizes[out->dim_order[k]] == 1) k++;
    bool run = true;
    for (uint8_t j = (uint8_t)(k + 1); j < dim; j++) run = run && a->sizes[a->dim_order[j]] == out->sizes[out->dim_order[j]];
    if (run && k < dim) {
      size_t inner = es;
      for (uint8_t j = (uint8_t)(k + 1); j < dim; j++) inner *= (size_t)a->sizes[a->dim_order[j]];
      memcpy(out->data, (const uint8_t *)a->data + (size_t)(-before[a->dim_order[k]]) * inner, out->nbytes);
      (void)ctx, (void)nargs;
      return ET_OK;
    }
  }
  /* the kept part: out[max(before, 0) ...] = a[max(-before, 0) ...] */
  et_tensor_strides(a, as);
  et_tensor_strides(out, os);
  size_t ob = 0, ab = 0;
  for (uint8_t d = 0; d < dim; d++) {
    const int32_t o0 = before[d] > 0 ? before[d] : 0, a0 = before[d] < 0 ? -before[d] : 0;
    const int32_t n = a->sizes[d] - a0 < out->sizes[d] - o0 ? a->sizes[d] - a0 : out->sizes[d] - o0;
    sz[d] = n > 0 ? n : 0;
    ob += (size_t)o0 * os[d], ab += (size_t)a0 * as[d];
  }
  af_copy_block((uint8_t *)out->data + ob * es, os, (const uint8_t *)a->data + ab * es, as, dim, sz, es);
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* copy(self, src, non_blocking, out): src broadcast to self's shape, converted to out's dtype. */
ET_PREPARE et_status aten_copy_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::copy.out";
  et_tensor *a = NULL, *src = NULL, *out = NULL;
  et_status st;
  if ((st = aten_self_out(ctx, op, args, nargs, 5, COPY_OUT, &a, &out)) || (st = aten_tensor(ctx, op, args, COPY_SRC, &src)) ||
      (st = af_same_shape(ctx, op, out, "out", a)) || (st = af_bcast(ctx, op, src, out)))
    return st;
  const bool ok = src->dtype == ET_DT_FLOAT || aten_is_int_dt(src->dtype);
  if ((st = af_dtype(ctx, op, src, "src", ok || src->dtype == out->dtype, "float32, an integer or bool"))) return st;
  return af_dtype(ctx, op, out, "out", out->dtype == src->dtype || out->dtype == ET_DT_FLOAT || aten_is_int_dt(out->dtype),
                  "float32, an integer or bool");
}
et_status aten_copy_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *src;
  size_t s[ET_MAX_DIM];
  et_tensor *const out = af_bcast_args(ctx, "aten::copy.out", args, COPY_SRC, COPY_OUT, &src, s);
  if (src->dtype == out->dtype) {
    copy_all(out, src, s);
    return ET_OK;
  }
  af_iter it;
  af_iter_init(&it, out->dim, out->sizes);
  const uint8_t io = af_iter_tensor(&it, out), is = af_iter_add(&it, s, 0);
  const size_t n = et_tensor_numel(out);
  for (size_t e = 0; e < n; e++, af_iter_next(&it)) {
    if (src->dtype == ET_DT_FLOAT || out->dtype == ET_DT_FLOAT)
      aten_store(out->dtype, out->data, it.off[io], et_elem_as_double(src->dtype, src->data, it.off[is]));
    else aten_store_i64(out->dtype, out->data, it.off[io], aten_i64(src->dtype, src->data, it.off[is]));
  }
  (void)nargs;
  return ET_OK;
}

/* ---- slices: slice_scatter, split_with_sizes_copy ---- */

/* PyTorch's slice bounds: None is the start/end, negatives count from the end, then clamped. */
static void slice_bounds(const et_value *sv, const et_value *ev, int64_t n, int64_t step, int64_t *start, int64_t *len) {
  int64_t s = sv->tag == ET_TAG_INT ? sv->u.i : 0, e = ev->tag == ET_TAG_INT ? ev->u.i : n;
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = s < 0 ? 0 : s > n ? n : s;
  e = e < s ? s : e > n ? n : e;
  *start = s;
  *len = (e - s + step - 1) / step;
}

/* slice_scatter(self, src, dim, start?, end?, step, out): out = self with out[slice] = src. */
ET_PREPARE et_status aten_slice_scatter_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::slice_scatter.out";
  et_tensor *a = NULL, *src = NULL, *out = NULL;
  int64_t step = 0, start = 0, len = 0;
  uint8_t dim = 0;
  et_status st;
  if ((st = self_out_same(ctx, op, args, nargs, 8, &a, &out)) || (st = aten_tensor(ctx, op, args, SSC_SRC, &src)) ||
      (st = same_dtype(ctx, op, src, out)) || (st = aten_dim_arg(ctx, op, args, SSC_DIM, a->dim, &dim)) ||
      (st = aten_int(ctx, op, args, SSC_STEP, &step)) || (st = af_same_shape(ctx, op, out, "out", a)))
    return st;
  if (a->dim == 0 || step <= 0) return et_fail(ctx, ET_E_INVALID_ARG, "%s: needs rank >= 1 and step > 0", op);
  for (uint32_t i = SSC_START; i <= SSC_END; i++)
    if (args[i]->tag != ET_TAG_INT && args[i]->tag != ET_TAG_NONE) return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument %u is not an int", op, (unsigned)i);
  slice_bounds(args[SSC_START], args[SSC_END], a->sizes[dim], step, &start, &len);
  int32_t want[ET_MAX_DIM];
  memcpy(want, a->sizes, sizeof want);
  want[dim] = (int32_t)len;
  return af_shape(ctx, op, src, "src", a->dim, want);
}
et_status aten_slice_scatter_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[SSC_SELF]->u.t, *const src = args[SSC_SRC]->u.t;
  et_tensor *const out = args[SSC_OUT]->u.t;
  const uint8_t dim = aten_dim_get(args[SSC_DIM]->u.i, a->dim);
  const int64_t step = args[SSC_STEP]->u.i;
  int64_t start, len;
  slice_bounds(args[SSC_START], args[SSC_END], a->sizes[dim], step, &start, &len);
  size_t as[ET_MAX_DIM], os[ET_MAX_DIM], ss[ET_MAX_DIM];
  et_tensor_strides(a, as);
  if (out->data != a->data) copy_all(out, a, as);
  et_tensor_strides(out, os);
  et_tensor_strides(src, ss);
  const size_t es = et_dtype_size(out->dtype), base = (size_t)start * os[dim];
  os[dim] *= (size_t)step;
  af_copy_block((uint8_t *)out->data + base * es, os, src->data, ss, src->dim, src->sizes, es);
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* split_with_sizes_copy(self, split_sizes, dim, out[]): consecutive pieces along dim. */
ET_PREPARE et_status aten_split_with_sizes_copy_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::split_with_sizes_copy.out";
  et_tensor *a = NULL;
  uint8_t dim = 0;
  uint32_t n = 0;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, 5)) || (st = aten_tensor(ctx, op, args, SPLIT_SELF, &a)) || (st = af_int_list(ctx, op, args, SPLIT_SIZES, false, &n)) ||
      (st = aten_dim_arg(ctx, op, args, SPLIT_DIM, a->dim, &dim)))
    return st;
  if (args[SPLIT_OUT]->tag != ET_TAG_TENSOR_LIST || args[SPLIT_OUT]->u.list.len != n)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out is not a list of %u tensors", op, (unsigned)n);
  if (a->dim == 0) return et_fail(ctx, ET_E_INVALID_ARG, "%s: input is 0-D", op);
  int64_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    const et_tensor *t = et_list_tensor(args[SPLIT_OUT], i);
    const int64_t s = et_list_int(args[SPLIT_SIZES], i);
    if (t == NULL) return et_fail(ctx, ET_E_INVALID_ARG, "%s: list item %u is not a tensor", op, (unsigned)i);
    if (s < 0 || (st = same_dtype(ctx, op, a, t))) return st ? st : et_fail(ctx, ET_E_INVALID_ARG, "%s: negative split size", op);
    int32_t want[ET_MAX_DIM];
    memcpy(want, a->sizes, sizeof want);
    want[dim] = (int32_t)s;
    if ((st = af_shape(ctx, op, t, "out", a->dim, want))) return st;
    at += s;
  }
  if (at != a->sizes[dim]) return et_fail(ctx, ET_E_INVALID_ARG, "%s: split sizes add up to %lld, dim %u has %d", op, (long long)at, dim, (int)a->sizes[dim]);
  return ET_OK;
}
et_status aten_split_with_sizes_copy_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[SPLIT_SELF]->u.t;
  const uint8_t dim = aten_dim_get(args[SPLIT_DIM]->u.i, a->dim);
  const size_t es = et_dtype_size(a->dtype);
  size_t as[ET_MAX_DIM], os[ET_MAX_DIM], at = 0;
  et_tensor_strides(a, as);
  for (uint32_t i = 0; i < args[SPLIT_OUT]->u.list.len; i++) {
    et_tensor *t = et_list_tensor(args[SPLIT_OUT], i);
    et_tensor_strides(t, os);
    af_copy_block(t->data, os, (const uint8_t *)a->data + at * as[dim] * es, as, t->dim, t->sizes, es);
    at += (size_t)t->sizes[dim];
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* ---- index_select, embedding, gather ---- */

/* (self, dim, index, ..., out): out of self's dtype, dim in range, an int64 or int32 index. */
ET_PREPARE static et_status dim_index_head(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs, uint32_t want,
                                           et_tensor **a, uint8_t *dim, et_tensor **idx, et_tensor **out) {
  et_status st;
  if ((st = self_out_same(ctx, op, args, nargs, want, a, out)) || (st = aten_dim_arg(ctx, op, args, DIMIDX_DIM, (*a)->dim, dim)) ||
      (st = aten_tensor(ctx, op, args, DIMIDX_INDEX, idx)))
    return st;
  return af_index_dtype(ctx, op, *idx, "index");
}

/* index_select(self, dim, index, out): out's slice i along dim is self's slice index[i]. */
ET_PREPARE et_status aten_index_select_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::index_select.out";
  et_tensor *a = NULL, *idx = NULL, *out = NULL;
  uint8_t dim = 0;
  et_status st;
  if ((st = dim_index_head(ctx, op, args, nargs, 5, &a, &dim, &idx, &out))) return st;
  if (idx->dim > 1) return et_fail(ctx, ET_E_INVALID_ARG, "%s: index must be 0-D or 1-D", op);
  int32_t want[ET_MAX_DIM];
  memcpy(want, a->sizes, sizeof want);
  if (a->dim) want[dim] = (int32_t)et_tensor_numel(idx);
  return af_shape(ctx, op, out, "out", a->dim, want);
}
/* out[..., i, ...] = a[..., index[i], ...] for every i of the index (a: dim `dim` of size `size`). */
static et_status select_slices(et_kernel_ctx *ctx, const char *op, const et_tensor *a, uint8_t dim, const et_tensor *idx, et_tensor *out) {
  size_t as[ET_MAX_DIM], os[ET_MAX_DIM];
  int32_t sz[ET_MAX_DIM];
  et_tensor_strides(a, as);
  et_tensor_strides(out, os);
  memcpy(sz, out->sizes, sizeof sz);
  const size_t es = et_dtype_size(out->dtype), n = et_tensor_numel(idx);
  const int32_t size = a->dim ? a->sizes[dim] : 1;
  if (a->dim) sz[dim] = 1;
  for (size_t i = 0; i < n; i++) {
    const int64_t k = af_index_at(idx, i);
    et_status st = af_index_in(ctx, op, k, size);
    if (st) return st;
    const size_t src = a->dim ? (size_t)k * as[dim] : 0, dst = a->dim ? i * os[dim] : 0;
    af_copy_block((uint8_t *)out->data + dst * es, os, (const uint8_t *)a->data + src * es, as, out->dim, sz, es);
  }
  return ET_OK;
}
et_status aten_index_select_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[DIMIDX_SELF]->u.t;
  (void)nargs;
  return select_slices(ctx, "aten::index_select.out", a, aten_dim_get(args[DIMIDX_DIM]->u.i, a->dim), args[DIMIDX_INDEX]->u.t, args[INDEX_SELECT_OUT]->u.t);
}

/* embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse, out): out[i..., :] = weight[indices[i...], :]. */
ET_PREPARE et_status aten_embedding_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::embedding.out";
  et_tensor *w = NULL, *idx = NULL, *out = NULL;
  et_status st;
  if ((st = self_out_same(ctx, op, args, nargs, 7, &w, &out)) || (st = aten_tensor(ctx, op, args, EMB_INDICES, &idx)) ||
      (st = af_index_dtype(ctx, op, idx, "indices")))
    return st;
  if (w->dim != 2 || idx->dim + 1 > ET_MAX_DIM) return et_fail(ctx, ET_E_INVALID_ARG, "%s: weight must be 2-D", op);
  int32_t want[ET_MAX_DIM];
  memcpy(want, idx->sizes, sizeof want);
  want[idx->dim] = w->sizes[1];
  if ((st = af_shape(ctx, op, out, "out", (uint8_t)(idx->dim + 1), want))) return st;
  /* out's rows must be whole runs of its memory: the rows of indices in logical order */
  size_t os[ET_MAX_DIM];
  et_tensor_strides(out, os);
  if (out->sizes[idx->dim] > 1 && os[idx->dim] != 1) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: out's last dim is not contiguous", op);
  return ET_OK;
}
et_status aten_embedding_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::embedding.out";
  const et_tensor *const w = args[EMB_WEIGHT]->u.t, *const idx = args[EMB_INDICES]->u.t;
  et_tensor *const out = args[EMB_OUT]->u.t;
  size_t ws[ET_MAX_DIM], os[ET_MAX_DIM];
  et_tensor_strides(w, ws);
  et_tensor_strides(out, os);
  const size_t es = et_dtype_size(out->dtype), n = et_tensor_numel(idx);
  af_iter it; /* the index positions: operand 0 indices, 1 the out row */
  af_iter_init(&it, idx->dim, idx->sizes);
  af_iter_tensor(&it, idx);
  af_iter_add(&it, os, 0);
  for (size_t i = 0; i < n; i++, af_iter_next(&it)) {
    const int64_t k = af_index_at(idx, it.off[0]);
    et_status st = af_index_in(ctx, op, k, w->sizes[0]);
    if (st) return st;
    af_copy_block((uint8_t *)out->data + it.off[1] * es, os + idx->dim, (const uint8_t *)w->data + (size_t)k * ws[0] * es, ws + 1, 1,
                  w->sizes + 1, es);
  }
  (void)nargs;
  return ET_OK;
}

/* _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights?,
 * include_last_offset, padding_idx, out0, out1, out2, out3): out0[b] = the sum (mode 0), mean (1) or maximum
 * (2) of weight's rows indices[offsets[b] .. offsets[b + 1]) (rows equal to padding_idx left out; an empty
 * bag gives zeros); out1 = each index's bag, out2 = each bag's size, out3 = the maximum's rows (mode 2). */
ET_PREPARE et_status aten_embedding_bag_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::_embedding_bag.out";
  et_tensor *w = NULL, *idx = NULL, *offs = NULL, *psw = NULL, *o[4] = {NULL};
  int64_t mode = 0, pad = 0;
  bool b = false, last = false;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, 14)) || (st = aten_tensor(ctx, op, args, EB_WEIGHT, &w)) || (st = aten_tensor(ctx, op, args, EB_INDICES, &idx)) ||
      (st = aten_tensor(ctx, op, args, EB_OFFSETS, &offs)) || (st = af_bool(ctx, op, args, EB_SCALE_GRAD_BY_FREQ, &b)) || (st = aten_int(ctx, op, args, EB_MODE, &mode)) ||
      (st = af_bool(ctx, op, args, EB_SPARSE, &b)) || (st = af_opt_tensor(ctx, op, args, EB_PER_SAMPLE_WEIGHTS, &psw)) || (st = af_bool(ctx, op, args, EB_INCLUDE_LAST_OFFSET, &last)) ||
      (st = aten_int(ctx, op, args, EB_PADDING_IDX, &pad)) || (st = af_f32(ctx, op, w, "weight")) || (st = af_index_dtype(ctx, op, idx, "indices")) ||
      (st = af_index_dtype(ctx, op, offs, "offsets")))
    return st;
  for (uint32_t k = 0; k < 4; k++)
    if ((st = aten_tensor(ctx, op, args, EB_OUT0 + k, &o[k])) || (k && (st = af_dtype(ctx, op, o[k], "out", o[k]->dtype == ET_DT_LONG || o[k]->dtype == ET_DT_INT, "int64 or int32"))))
      return st;
  if (mode < 0 || mode > 2) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: mode %lld is not sum, mean or max", op, (long long)mode);
  if (psw && (mode != 0 || (st = af_f32(ctx, op, psw, "per_sample_weights")) || et_tensor_numel(psw) != et_tensor_numel(idx)))
    return st ? st : et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: per_sample_weights need mode sum and one weight per index", op);
  if (w->dim != 2 || idx->dim != 1 || offs->dim != 1 || (last && offs->sizes[0] < 1))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: needs 2-D weight, 1-D indices and offsets", op);
  const int32_t bags = last ? offs->sizes[0] - 1 : offs->sizes[0], want[2] = {bags, w->sizes[1]};
  return af_shape(ctx, op, o[0], "out", 2, want);
}
et_status aten_embedding_bag_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::_embedding_bag.out";
  const et_tensor *const w = args[EB_WEIGHT]->u.t, *const idx = args[EB_INDICES]->u.t, *const offs = args[EB_OFFSETS]->u.t;
  const et_tensor *const psw = af_opt_tensor_get(args[EB_PER_SAMPLE_WEIGHTS]);
  const int64_t mode = args[EB_MODE]->u.i, pad = args[EB_PADDING_IDX]->u.i, n = (int64_t)et_tensor_numel(idx);
  et_tensor *const out = args[EB_OUT0]->u.t, *const bag_of = args[EB_OUT1]->u.t, *const bag_size = args[EB_OUT2]->u.t, *const max_at = args[EB_OUT3]->u.t;
  const int32_t bags = out->sizes[0], D = out->sizes[1];
  size_t ws[ET_MAX_DIM], os[ET_MAX_DIM];
  et_tensor_strides(w, ws);
  et_tensor_strides(out, os);
  const float *pw = w->data;
  float *po = out->data;
  for (int32_t b = 0; b < bags; b++) {
    int64_t lo = af_index_at(offs, (size_t)b), hi = b + 1 < offs->sizes[0] ? af_index_at(offs, (size_t)b + 1) : n, cnt = 0;
    if (lo < 0 || hi > n || lo > hi) return et_fail(ctx, ET_E_INVALID_ARG, "%s: offsets[%d] = %lld is out of order or range", op, (int)b, (long long)lo);
    for (int32_t d = 0; d < D; d++) po[(size_t)b * os[0] + (size_t)d * os[1]] = 0.0f;
    for (int64_t i = lo; i < hi; i++) {
      const int64_t row = af_index_at(idx, (size_t)i);
      et_status st = af_index_in(ctx, op, row, w->sizes[0]);
      if (st) return st;
      if (et_tensor_numel(bag_of) == (size_t)n) aten_store_i64(bag_of->dtype, bag_of->data, (size_t)i, b);
      if (row == pad) continue;
      const float sw = psw ? ((const float *)psw->data)[i] : 1.0f;
      for (int32_t d = 0; d < D; d++) {
        float *y = &po[(size_t)b * os[0] + (size_t)d * os[1]];
        const float v = pw[(size_t)row * ws[0] + (size_t)d * ws[1]];
        if (mode != 2) *y += psw ? v * sw : v;
        else if (cnt == 0 || v > *y) {
          *y = v;
          if (et_tensor_numel(max_at) == (size_t)bags * (size_t)D) aten_store_i64(max_at->dtype, max_at->data, (size_t)b * (size_t)D + (size_t)d, row);
        }
      }
      cnt++;
    }
    if (mode == 1 && cnt > 0)
      for (int32_t d = 0; d < D; d++) po[(size_t)b * os[0] + (size_t)d * os[1]] /= (float)cnt;
    if (et_tensor_numel(bag_size) == (size_t)bags) aten_store_i64(bag_size->dtype, bag_size->data, (size_t)b, cnt);
  }
  (void)nargs;
  return ET_OK;
}

/* gather(self, dim, index, sparse_grad, out): out[p] = self[p with dim = index[p]]. */
ET_PREPARE et_status aten_gather_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::gather.out";
  et_tensor *a = NULL, *idx = NULL, *out = NULL;
  uint8_t dim = 0;
  et_status st;
  if ((st = dim_index_head(ctx, op, args, nargs, 6, &a, &dim, &idx, &out)) || (st = af_same_shape(ctx, op, out, "out", idx))) return st;
  if (idx->dim != a->dim) return et_fail(ctx, ET_E_INVALID_ARG, "%s: index rank differs from self's", op);
  for (uint8_t d = 0; d < a->dim; d++)
    if (d != dim && idx->sizes[d] > a->sizes[d]) return et_fail(ctx, ET_E_INVALID_ARG, "%s: index is larger than self in dim %u", op, d);
  return ET_OK;
}
et_status aten_gather_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::gather.out";
  const et_tensor *const a = args[DIMIDX_SELF]->u.t, *const idx = args[DIMIDX_INDEX]->u.t;
  et_tensor *const out = args[GATHER_OUT]->u.t;
  const uint8_t dim = aten_dim_get(args[DIMIDX_DIM]->u.i, a->dim);
  size_t as[ET_MAX_DIM];
  et_tensor_strides(a, as);
  const size_t sd = a->dim ? as[dim] : 0;
  if (a->dim) as[dim] = 0;
  af_iter it;
  af_iter_init(&it, out->dim, out->sizes);
  const uint8_t io = af_iter_tensor(&it, out), ii = af_iter_tensor(&it, idx), ia = af_iter_add(&it, as, 0);
  const size_t n = et_tensor_numel(out), es = et_dtype_size(out->dtype);
  for (size_t e = 0; e < n; e++, af_iter_next(&it)) {
    const int64_t k = af_index_at(idx, it.off[ii]);
    et_status st = af_index_in(ctx, op, k, a->dim ? a->sizes[dim] : 1);
    if (st) return st;
    memcpy((uint8_t *)out->data + it.off[io] * es, (const uint8_t *)a->data + (it.off[ia] + (size_t)k * sd) * es, es);
  }
  (void)nargs;
  return ET_OK;
}

/* ---- advanced indexing: index.Tensor and index_put ---- */

/* self[indices]: the non-None index tensors (int64/int32) broadcast to one
 * shape B; the result is the non-indexed dims with B in place of the indexed
 * ones (where they were if they are adjacent, else first). */
typedef struct {
  uint8_t nidx, which[MAX_INDEX_TENSORS]; /* index tensors and the self dim each indexes */
  const et_tensor *idx[MAX_INDEX_TENSORS];
  uint8_t bdim, pos, nn, rdim;             /* rank of B, where B sits in the result, non-indexed dims, result rank */
  int32_t bsz[ET_MAX_DIM];
  uint8_t ndims[ET_MAX_DIM];               /* the non-indexed self dims, in order */
  int32_t rsz[ET_MAX_DIM];                 /* the result's shape */
} index_geom;

/* Fills g from self and the indices list; prepare reports every error, so eval's call cannot fail. */
static et_status index_geom_make(et_kernel_ctx *ctx, const char *op, const et_tensor *a, const et_value *list, index_geom *g) {
  memset(g, 0, sizeof *g);
  if (list->tag != ET_TAG_OPT_TENSOR_LIST && list->tag != ET_TAG_TENSOR_LIST)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: indices is not a tensor list", op);
  const uint32_t L = list->u.list.len;
  if (L > a->dim) return et_fail(ctx, ET_E_INVALID_ARG, "%s: %u indices for a rank-%u tensor", op, (unsigned)L, a->dim);
  int first = -1, last = -1;
  unsigned indexed = 0;
  for (uint32_t k = 0; k < L; k++) {
    const et_tensor *t = et_list_tensor(list, k);
    if (t == NULL) continue;
    if (t->dtype == ET_DT_BOOL || t->dtype == ET_DT_BYTE) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: boolean mask indices are not supported", op);
    et_status st = af_index_dtype(ctx, op, t, "indices");
    if (st) return st;
    if (g->nidx == MAX_INDEX_TENSORS) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: more than %d index tensors", op, MAX_INDEX_TENSORS);
    g->which[g->nidx] = (uint8_t)k, g->idx[g->nidx++] = t;
    if (first < 0) first = (int)k;
    last = (int)k;
    indexed |= 1u << k;
    if (t->dim > g->bdim) g->bdim = t->dim;
  }
  for (uint8_t d = 0; d < g->bdim; d++) g->bsz[d] = 1;
  for (uint8_t j = 0; j < g->nidx; j++) { /* B: the index shapes broadcast, aligned right */
    const et_tensor *t = g->idx[j];
    for (uint8_t d = 0; d < t->dim; d++) {
      int32_t *b = &g->bsz[g->bdim - t->dim + d];
      if (t->sizes[d] != 1 && *b != 1 && *b != t->sizes[d]) return et_fail(ctx, ET_E_INVALID_ARG, "%s: index shapes do not broadcast", op);
      if (t->sizes[d] != 1) *b = t->sizes[d];
    }
  }
  const bool adjacent = g->nidx > 0 && last - first + 1 == g->nidx;
  for (uint8_t d = 0; d < a->dim; d++) {
    if ((indexed >> d) & 1u) continue;
    if (adjacent && (int)d < first) g->pos++;
    g->ndims[g->nn++] = d;
  }
  g->rdim = (uint8_t)(g->nn + g->bdim);
  if (g->rdim > ET_MAX_DIM) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: the result has more than %d dims", op, ET_MAX_DIM);
  for (uint8_t i = 0, r = 0; i < g->nn + 1; i++) { /* non-indexed dims before pos, B, the rest */
    if (i == g->pos)
      for (uint8_t d = 0; d < g->bdim; d++) g->rsz[r++] = g->bsz[d];
    if (i < g->nn) g->rsz[r++] = a->sizes[g->ndims[i]];
  }
  return ET_OK;
}
/* Strides of the result's dims in a tensor of the result's shape (or broadcast to it): B dims, then the others. */
static void result_split(const index_geom *g, const size_t *rs, size_t *bstr, size_t *nstr) {
  for (uint8_t d = 0; d < g->bdim; d++) bstr[d] = rs[g->pos + d];
  for (uint8_t i = 0; i < g->nn; i++) nstr[i] = rs[i < g->pos ? i : i + g->bdim];
}

/* index: out (the result) = a[...]; put: out (a copy of a) [...] = values (broadcast to the result), or += it. */
static et_status index_walk(et_kernel_ctx *ctx, const char *op, const et_tensor *a, const index_geom *g, et_tensor *out,
                            const et_tensor *values, bool accumulate) {
  size_t as[ET_MAX_DIM], rs[ET_MAX_DIM], bstr[ET_MAX_DIM], nstr[ET_MAX_DIM], sstr[ET_MAX_DIM];
  int32_t nsz[ET_MAX_DIM];
  et_tensor_strides(values ? out : a, as); /* where the index values point: a, or out for a put */
  if (values) { /* values' strides over the result's dims */
    et_tensor r = *out;
    r.dim = g->rdim;
    memcpy(r.sizes, g->rsz, sizeof r.sizes);
    af_bcast_get(ctx, op, values, &r, rs); /* checked at prepare */
  } else {
    et_tensor_strides(out, rs);
  }
  result_split(g, rs, bstr, nstr);
  for (uint8_t i = 0; i < g->nn; i++) nsz[i] = a->sizes[g->ndims[i]], sstr[i] = as[g->ndims[i]];
  af_iter it; /* over B: operand 0 the result side (out or values), 1.. the index tensors */
  af_iter_init(&it, g->bdim, g->bsz);
  af_iter_add(&it, bstr, 0);
  for (uint8_t j = 0; j < g->nidx; j++) {
    et_tensor b = *g->idx[j];
    size_t s[ET_MAX_DIM];
    b.dim = g->bdim;
    for (uint8_t d = 0; d < g->bdim; d++) b.sizes[d] = g->bsz[d];
    af_bcast_get(ctx, op, g->idx[j], &b, s); /* index j's strides over B (broadcast at prepare) */
    af_iter_add(&it, s, 0);
  }
  size_t nb = 1;
  for (uint8_t d = 0; d < g->bdim; d++) nb *= (size_t)g->bsz[d];
  const size_t es = et_dtype_size(out->dtype);
  for (size_t e = 0; e < nb; e++, af_iter_next(&it)) {
    size_t base = 0; /* the indexed element of a (or out) */
    for (uint8_t j = 0; j < g->nidx; j++) {
      int64_t k;
      et_status st = af_wrap_index(ctx, op, af_index_at(g->idx[j], it.off[1 + j]), a->sizes[g->which[j]], &k);
      if (st) return st;
      base += (size_t)k * as[g->which[j]];
    }
    if (!values) {
      af_copy_block((uint8_t *)out->data + it.off[0] * es, nstr, (const uint8_t *)a->data + base * es, sstr, g->nn, nsz, es);
    } else if (!accumulate) {
      af_copy_block((uint8_t *)out->data + base * es, sstr, (const uint8_t *)values->data + it.off[0] * es, nstr, g->nn, nsz, es);
    } else { /* out[...] += values[...] over the non-indexed dims */
      af_iter in;
      af_iter_init(&in, g->nn, nsz);
      af_iter_add(&in, sstr, base);
      af_iter_add(&in, nstr, it.off[0]);
      size_t m = 1;
      for (uint8_t i = 0; i < g->nn; i++) m *= (size_t)nsz[i];
      for (size_t i = 0; i < m; i++, af_iter_next(&in)) {
        if (out->dtype == ET_DT_FLOAT) ((float *)out->data)[in.off[0]] += ((const float *)values->data)[in.off[1]];
        else
          aten_store_i64(out->dtype, out->data, in.off[0],
                         (int64_t)((uint64_t)aten_i64(out->dtype, out->data, in.off[0]) + (uint64_t)aten_i64(values->dtype, values->data, in.off[1])));
      }
    }
  }
  return ET_OK;
}

/* index.Tensor(self, indices, out) */
ET_PREPARE et_status aten_index_tensor_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::index.Tensor_out";
  et_tensor *a = NULL, *out = NULL;
  index_geom g;
  et_status st;
  if ((st = self_out_same(ctx, op, args, nargs, 4, &a, &out)) || (st = index_geom_make(ctx, op, a, args[INDEX_INDICES], &g))) return st;
  return af_shape(ctx, op, out, "out", g.rdim, g.rsz);
}
et_status aten_index_tensor_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::index.Tensor_out";
  index_geom g;
  (void)index_geom_make(ctx, op, args[INDEX_SELF]->u.t, args[INDEX_INDICES], &g); /* checked at prepare */
  (void)nargs;
  return index_walk(ctx, op, args[INDEX_SELF]->u.t, &g, args[INDEX_OUT]->u.t, NULL, false);
}

/* index_put(self, indices, values, accumulate, out) */
ET_PREPARE et_status aten_index_put_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::index_put.out";
  et_tensor *a = NULL, *v = NULL, *out = NULL;
  index_geom g;
  bool acc = false;
  et_status st;
  if ((st = self_out_same(ctx, op, args, nargs, 6, &a, &out)) || (st = aten_tensor(ctx, op, args, PUT_VALUES, &v)) ||
      (st = same_dtype(ctx, op, v, out)) || (st = af_bool(ctx, op, args, PUT_ACCUMULATE, &acc)) || (st = af_same_shape(ctx, op, out, "out", a)) ||
      (st = index_geom_make(ctx, op, a, args[PUT_INDICES], &g)))
    return st;
  if (acc && (st = af_dtype(ctx, op, out, "out", out->dtype == ET_DT_FLOAT || aten_is_int_dt(out->dtype), "float32, an integer or bool")))
    return st;
  et_tensor r = *out;
  r.dim = g.rdim;
  memcpy(r.sizes, g.rsz, sizeof r.sizes);
  return af_bcast(ctx, op, v, &r);
}
et_status aten_index_put_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::index_put.out";
  const et_tensor *const a = args[PUT_SELF]->u.t;
  et_tensor *const out = args[PUT_OUT]->u.t;
  index_geom g;
  (void)index_geom_make(ctx, op, a, args[PUT_INDICES], &g); /* checked at prepare */
  if (out->data != a->data) {
    size_t as[ET_MAX_DIM];
    et_tensor_strides(a, as);
    copy_all(out, a, as);
  }
  (void)nargs;
  return index_walk(ctx, op, a, &g, out, args[PUT_VALUES]->u.t, args[PUT_ACCUMULATE]->u.b);
}

/* ---- creation: full, full_like, scalar_tensor, arange, _empty_dim_order ---- */

ET_PREPARE static et_status fill_check(et_kernel_ctx *ctx, const char *op, const et_tensor *out) {
  const bool ok = out->dtype == ET_DT_FLOAT || out->dtype == ET_DT_DOUBLE || aten_is_int_dt(out->dtype);
  return af_dtype(ctx, op, out, "out", ok, "float32, float64, an integer or bool");
}
/* An int[] size argument equal to out's shape. */
ET_PREPARE static et_status size_is(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, const et_tensor *out) {
  uint32_t n = 0;
  et_status st;
  if ((st = af_int_list(ctx, op, args, i, false, &n))) return st;
  bool ok = n == out->dim;
  for (uint32_t d = 0; ok && d < n; d++) ok = et_list_int(args[i], d) == out->sizes[d];
  return ok ? ET_OK : et_fail(ctx, ET_E_INVALID_ARG, "%s: output shape does not match size", op);
}

/* full(size, fill_value, out), full_like(self, fill_value, memory_format, out), scalar_tensor(s, out):
 * out filled with the value; its shape is size's, self's or one element. */
typedef enum { FILL_SIZE, FILL_LIKE, FILL_ONE } fill_shape;
ET_PREPARE static et_status fill_prepare(et_kernel_ctx *ctx, const char *op, uint32_t want, uint32_t ivalue, fill_shape how,
                                         et_value **args, uint32_t nargs) {
  et_tensor *out = NULL, *a = NULL;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, want)) || (st = aten_tensor(ctx, op, args, ATEN_OUT_SLOT(want), &out)) || (st = af_scalar(ctx, op, args, ivalue)))
    return st;
  if (how == FILL_SIZE) st = size_is(ctx, op, args, FULL_SIZE, out);
  else if (how == FILL_LIKE && (st = aten_tensor(ctx, op, args, FULL_LIKE_SELF, &a)) == ET_OK) st = af_same_shape(ctx, op, out, "out", a);
  else if (et_tensor_numel(out) != 1) st = et_fail(ctx, ET_E_INVALID_ARG, "%s: out must have one element", op);
  return st ? st : fill_check(ctx, op, out);
}
static et_status fill_eval(et_value **args, uint32_t nargs, uint32_t ivalue) {
  fill_value(args[ATEN_OUT_SLOT(nargs)]->u.t, aten_scalar_get(args[ivalue], NULL));
  return ET_OK;
}
OP_PREPARE(aten_full_out, fill_prepare, "aten::full.out", FULL_OUT + 2u, FULL_FILL_VALUE, FILL_SIZE)
et_status aten_full_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return fill_eval(args, nargs, FULL_FILL_VALUE); }
OP_PREPARE(aten_full_like_out, fill_prepare, "aten::full_like.out", FULL_LIKE_OUT + 2u, FULL_LIKE_FILL_VALUE, FILL_LIKE)
et_status aten_full_like_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return fill_eval(args, nargs, FULL_LIKE_FILL_VALUE); }
OP_PREPARE(aten_scalar_tensor_out, fill_prepare, "aten::scalar_tensor.out", SCALAR_TENSOR_OUT + 2u, SCALAR_TENSOR_S, FILL_ONE)
et_status aten_scalar_tensor_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return fill_eval(args, nargs, SCALAR_TENSOR_S); }

/* arange: start + i * step (computed in double, or exactly in int64 for integer outputs).
 * Argument slots: arange.out(end, out) and arange.start_out(start, end, step, out). */
ET_PREPARE static et_status arange_check(et_kernel_ctx *ctx, const char *op, bool has_start, et_value **args, uint32_t nargs) {
  const uint32_t want = (has_start ? ARANGE_START_OUT : ARANGE_OUT) + 2u;
  et_tensor *out = NULL;
  double start = 0, end = 0, step = 1;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, want)) || (st = aten_tensor(ctx, op, args, ATEN_OUT_SLOT(want), &out))) return st;
  if (has_start && ((st = aten_scalar(ctx, op, args, ARANGE_START_START, &start, NULL)) ||
                    (st = aten_scalar(ctx, op, args, ARANGE_START_END, &end, NULL)) ||
                    (st = aten_scalar(ctx, op, args, ARANGE_START_STEP, &step, NULL))))
    return st;
  if (!has_start && (st = aten_scalar(ctx, op, args, ARANGE_END, &end, NULL))) return st;
  if (step == 0 || (end - start) / step < 0) return et_fail(ctx, ET_E_INVALID_ARG, "%s: step has the wrong sign or is 0", op);
  const double n = ceil((end - start) / step);
  if (out->dim != 1 || (double)out->sizes[0] != n) return et_fail(ctx, ET_E_INVALID_ARG, "%s: out is not 1-D of the range's length", op);
  return af_dtype(ctx, op, out, "out", out->dtype == ET_DT_FLOAT || out->dtype == ET_DT_LONG || out->dtype == ET_DT_INT, "float32, int64 or int32");
}
/* arange(end, out) or arange(start, end, step, out): has_start names the overload. */
static et_status arange_fill(et_kernel_ctx *ctx, const char *op, bool has_start, et_value **args, uint32_t nargs) {
  (void)ctx, (void)op;
  et_tensor *const out = args[ATEN_OUT_SLOT(nargs)]->u.t;
  const et_value *s = has_start ? args[ARANGE_START_START] : NULL, *st = has_start ? args[ARANGE_START_STEP] : NULL;
  const bool ints = out->dtype != ET_DT_FLOAT && (!s || s->tag == ET_TAG_INT) && (!st || st->tag == ET_TAG_INT);
  const double start = s ? aten_scalar_get(s, NULL) : 0, step = st ? aten_scalar_get(st, NULL) : 1;
  for (int32_t i = 0; i < out->sizes[0]; i++) {
    if (ints) aten_store_i64(out->dtype, out->data, (size_t)i, (int64_t)start + (int64_t)i * (int64_t)step);
    else aten_store(out->dtype, out->data, (size_t)i, start + step * (double)i);
  }
  return ET_OK;
}
/* Both overloads' entry points (named in aten_float_ops.def): prepare fn##_prepare, eval fn. */
#define ARANGE_OP(fn, name, has_start) OP_ENTRIES(fn, arange_fill, arange_check, name, has_start)
ARANGE_OP(aten_arange_out, "aten::arange.out", false)
ARANGE_OP(aten_arange_start_out, "aten::arange.start_out", true)

/* dim_order_ops::_empty_dim_order(size, dim_order?, out): an uninitialised tensor in PyTorch; zeros here. */
ET_PREPARE et_status aten_empty_dim_order_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "dim_order_ops::_empty_dim_order.out";
  et_tensor *out = NULL;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, 4)) || (st = aten_tensor(ctx, op, args, EMPTY_OUT, &out)) || (st = size_is(ctx, op, args, EMPTY_SIZE, out))) return st;
  if (args[EMPTY_DIM_ORDER]->tag != ET_TAG_NONE && args[EMPTY_DIM_ORDER]->tag != ET_TAG_INT_LIST) return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument 1 is not an int list", op);
  return ET_OK;
}
et_status aten_empty_dim_order_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  et_tensor *const out = args[EMPTY_OUT]->u.t;
  if (out->nbytes) memset(out->data, 0, out->nbytes);
  (void)ctx, (void)nargs;
  return ET_OK;
}
