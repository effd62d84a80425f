/* Reductions, scans and normalizations: sum, mean (all dims), amax, amin,
 * argmax, argmin, max/min over a dim (values and indices), any, prod,
 * cumsum, var, median, _log_softmax, native_layer_norm, native_group_norm and the
 * two batch norms ExecuTorch programs keep (_native_batch_norm_legit_no_
 * training for eval BatchNorm, _native_batch_norm_legit.no_stats for
 * InstanceNorm). Sums and moments accumulate in double and round to float32
 * once (PyTorch's CPU reductions are as exact); element math is float32.
 * Indices (argmax, max.dim) are exact int64: the first extreme, a NaN
 * counting as the extreme, as in PyTorch. Any dim order on every tensor. */
#include "aten_float.h"

/* ---- reductions over a set of dims ---- */

/* The dims of `a` split into kept ones (outer: operand 0 the input, 1.. the
 * outputs, which have a's rank with size-1 reduced dims when keepdim, else
 * the kept dims only) and the reduced ones (inner, from the input's offset). */
typedef struct {
  af_iter outer;
  et_iter inner;
  size_t kn, rn;
} red_plan;

static void red_plan_make(red_plan *p, const et_tensor *a, unsigned mask, bool keep, et_tensor *const *outs, uint8_t nouts) {
  size_t as[ET_MAX_DIM], ka[ET_MAX_DIM], ra[ET_MAX_DIM];
  int32_t ksz[ET_MAX_DIM], rsz[ET_MAX_DIM];
  uint8_t nk = 0, nr = 0;
  et_tensor_strides(a, as);
  for (uint8_t d = 0; d < a->dim; d++) {
    if ((mask >> d) & 1u) rsz[nr] = a->sizes[d], ra[nr++] = as[d];
    else ksz[nk] = a->sizes[d], ka[nk++] = as[d];
  }
  af_iter_init(&p->outer, nk, ksz);
  af_iter_add(&p->outer, ka, 0);
  for (uint8_t j = 0; j < nouts; j++) { /* each output's strides of the kept dims */
    et_tensor_strides(outs[j], as);
    const uint8_t k = af_iter_add(&p->outer, ka, 0);
    uint8_t od = 0, i = 0;
    for (uint8_t d = 0; d < a->dim; d++) {
      if ((mask >> d) & 1u) od += keep;
      else p->outer.stride[k][i++] = as[od++];
    }
  }
  et_iter_custom(&p->inner, nr, rsz, ra, 0);
  p->kn = p->rn = 1;
  for (uint8_t i = 0; i < nk; i++) p->kn *= (size_t)ksz[i];
  for (uint8_t i = 0; i < nr; i++) p->rn *= (size_t)rsz[i];
}
/* Restart the inner walk at the current outer position. */
static inline void red_inner(red_plan *p) {
  memset(p->inner.idx, 0, sizeof p->inner.idx);
  p->inner.off = p->outer.off[0];
}

/* The reduced dims of an int[]? / int? / None dim argument (None or an empty list: all). */
static unsigned red_mask_get(const et_value *v, uint8_t rank) {
  if (v->tag == ET_TAG_INT) return 1u << aten_dim_get(v->u.i, rank);
  if (v->tag != ET_TAG_INT_LIST || v->u.list.len == 0) return (1u << rank) - 1u;
  unsigned m = 0;
  for (uint32_t i = 0; i < v->u.list.len; i++) m |= 1u << aten_dim_get(et_list_int(v, i), rank);
  return m;
}
ET_PREPARE static et_status red_mask(et_kernel_ctx *ctx, const char *op, const et_value *v, uint8_t rank, unsigned *mask) {
  et_status st;
  uint8_t d = 0;
  *mask = 0;
  if (v->tag == ET_TAG_INT) {
    if ((st = aten_dim(ctx, op, v->u.i, rank, &d))) return st;
  } else if (v->tag == ET_TAG_INT_LIST) {
    if ((st = af_dim_list_mask(ctx, op, v, rank, mask))) return st;
  } else if (v->tag != ET_TAG_NONE) {
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dim is not an int list", op);
  }
  *mask = red_mask_get(v, rank);
  return ET_OK;
}
/* Each output's shape for the reduction (keepdim: a's rank, size 1 where reduced). */
ET_PREPARE static et_status red_check(et_kernel_ctx *ctx, const char *op, const et_tensor *a, unsigned mask, bool keep,
                                      et_tensor *const *outs, uint8_t nouts) {
  int32_t want[ET_MAX_DIM];
  uint8_t n = 0;
  et_status st;
  for (uint8_t d = 0; d < a->dim; d++) {
    if (!((mask >> d) & 1u)) want[n++] = a->sizes[d];
    else if (keep) want[n++] = 1;
  }
  for (uint8_t j = 0; j < nouts; j++)
    if ((st = af_shape(ctx, op, outs[j], j ? "indices" : "out", n, want))) return st;
  return ET_OK;
}
/* A ScalarType? dtype argument: None or the output's dtype. */
ET_PREPARE static et_status red_dtype_arg(et_kernel_ctx *ctx, const char *op, const et_value *v, const et_tensor *out) {
  if (v->tag == ET_TAG_NONE || (v->tag == ET_TAG_INT && v->u.i == out->dtype)) return ET_OK;
  return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: dtype argument differs from the output's %s", op, et_dtype_name(out->dtype));
}

typedef enum { R_SUM, R_MEAN, R_PROD, R_AMAX, R_AMIN, R_ARGMAX, R_ARGMIN, R_MAX, R_MIN, R_ANY, R_VAR, R_MEDIAN } rkind;

typedef struct {
  unsigned mask;
  bool keep;
  double correction; /* var */
} red_args;

/* The lower median ((n - 1) / 2-th smallest) of the inner walk and its index: the first NaN if there is one
 * (as PyTorch), else the first element with as many smaller ones as the rank asks. O(n^2), no scratch. */
static void red_median(red_plan *p, const float *pa, double *value, int64_t *index) {
  const size_t k = p->rn ? (p->rn - 1) / 2 : 0;
  red_inner(p);
  const et_iter start = p->inner;
  for (size_t r = 0; r < p->rn; r++, et_iter_next(&p->inner))
    if (pa[p->inner.off] != pa[p->inner.off]) {
      *value = NAN, *index = (int64_t)r;
      return;
    }
  p->inner = start;
  for (size_t r = 0; r < p->rn; r++, et_iter_next(&p->inner)) {
    const float x = pa[p->inner.off];
    size_t less = 0, leq = 0;
    et_iter b = start;
    for (size_t s = 0; s < p->rn; s++, et_iter_next(&b)) less += pa[b.off] < x, leq += pa[b.off] <= x;
    if (less <= k && k < leq) {
      *value = x, *index = (int64_t)r;
      return;
    }
  }
  *value = NAN, *index = 0; /* empty: refused at prepare */
}

/* One reduction of a[ri] (the plan's inner walk from its outer position). */
static void red_float(rkind k, red_plan *p, const float *pa, const red_args *ra, double *value, int64_t *index) {
  if (k == R_MEDIAN) {
    red_median(p, pa, value, index);
    return;
  }
  double acc = k == R_PROD ? 1.0 : 0.0, m2 = 0.0;
  float best = 0;
  int64_t at = 0;
  red_inner(p);
  for (size_t r = 0; r < p->rn; r++, et_iter_next(&p->inner)) {
    const float x = pa[p->inner.off];
    switch (k) {
      case R_SUM: case R_MEAN: acc += x; break;
      case R_PROD: acc *= x; break;
      case R_VAR: { /* Welford, in double */
        const double dx = x - acc;
        acc += dx / (double)(r + 1);
        m2 += dx * (x - acc);
        break;
      }
      default: { /* extremes: the first NaN wins and stays */
        const bool hi = k == R_AMAX || k == R_ARGMAX || k == R_MAX;
        if (r == 0 || (best == best && (x != x || (hi ? x > best : x < best)))) best = x, at = (int64_t)r;
        break;
      }
    }
  }
  if (k == R_MEAN) acc = p->rn ? acc / (double)p->rn : NAN;
  if (k == R_VAR) {
    const double div = (double)p->rn - ra->correction;
    acc = m2 / (div > 0 ? div : 0.0);
  }
  *value = (k >= R_AMAX && k <= R_MIN) ? (double)best : acc;
  *index = at;
}
/* The lower median of integers (int8 codes after emlkit/passes/median_on_codes.py: the code of the median,
 * dequantization being increasing) and its index, by red_median's rule (the first element equal to it). The
 * (n - 1) / 2-th smallest is the least v with more than that many elements <= v: a bisection over
 * [min, max], one counting walk per halving (8 walks for int8 codes), no scratch. */
static size_t red_int_count_le(red_plan *p, const et_tensor *a, int64_t v) {
  size_t le = 0;
  red_inner(p);
  for (size_t r = 0; r < p->rn; r++, et_iter_next(&p->inner)) le += aten_i64(a->dtype, a->data, p->inner.off) <= v;
  return le;
}
static void red_int_median(red_plan *p, const et_tensor *a, int64_t *value, int64_t *index) {
  const size_t k = p->rn ? (p->rn - 1) / 2 : 0;
  int64_t lo = 0, hi = 0;
  red_inner(p);
  for (size_t r = 0; r < p->rn; r++, et_iter_next(&p->inner)) {
    const int64_t x = aten_i64(a->dtype, a->data, p->inner.off);
    if (r == 0 || x < lo) lo = x;
    if (r == 0 || x > hi) hi = x;
  }
  while (lo < hi) { /* the answer stays in [lo, hi] */
    const int64_t mid = lo + (int64_t)(((uint64_t)hi - (uint64_t)lo) / 2u);
    if (red_int_count_le(p, a, mid) > k) hi = mid;
    else lo = mid + 1;
  }
  *value = lo, *index = 0;
  red_inner(p);
  for (size_t r = 0; r < p->rn; r++, et_iter_next(&p->inner))
    if (aten_i64(a->dtype, a->data, p->inner.off) == lo) {
      *index = (int64_t)r;
      return;
    }
}

/* The same on integers and bools, exact in int64 (wrapping sums and products). */
static void red_int(rkind k, red_plan *p, const et_tensor *a, int64_t *value, int64_t *index) {
  if (k == R_MEDIAN) {
    red_int_median(p, a, value, index);
    return;
  }
  uint64_t acc = k == R_PROD ? 1u : 0u;
  int64_t best = 0, at = 0;
  red_inner(p);
  for (size_t r = 0; r < p->rn; r++, et_iter_next(&p->inner)) {
    const int64_t x = aten_i64(a->dtype, a->data, p->inner.off);
    switch (k) {
      case R_SUM: acc += (uint64_t)x; break;
      case R_PROD: acc *= (uint64_t)x; break;
      case R_ANY: acc |= x != 0; break;
      default: {
        const bool hi = k == R_AMAX || k == R_ARGMAX || k == R_MAX;
        if (r == 0 || (hi ? x > best : x < best)) best = x, at = (int64_t)r;
        break;
      }
    }
  }
  *value = (k >= R_AMAX && k <= R_MIN) ? best : (int64_t)acc;
  *index = at;
}

/* out (and indices for max/min over a dim) of every kept position. */
static void reduce(rkind k, const et_tensor *a, const red_args *ra, et_tensor *out, et_tensor *indices) {
  et_tensor *outs[2] = {out, indices};
  red_plan p;
  red_plan_make(&p, a, ra->mask, ra->keep, outs, indices ? 2 : 1);
  const bool argk = k == R_ARGMAX || k == R_ARGMIN;
  for (size_t e = 0; e < p.kn; e++, af_iter_next(&p.outer)) {
    int64_t iv = 0, at = 0;
    double fv = 0;
    if (k == R_ANY && a->dtype == ET_DT_FLOAT) { /* any of floats: nonzero (NaN included) */
      red_inner(&p);
      for (size_t r = 0; r < p.rn && !iv; r++, et_iter_next(&p.inner)) iv = ((const float *)a->data)[p.inner.off] != 0.0f;
    } else if (a->dtype == ET_DT_FLOAT) {
      red_float(k, &p, a->data, ra, &fv, &at);
    } else {
      red_int(k, &p, a, &iv, &at);
      fv = (double)iv;
    }
    const size_t oo = p.outer.off[1];
    if (argk) aten_store_i64(out->dtype, out->data, oo, at);
    else if (out->dtype == ET_DT_FLOAT) ((float *)out->data)[oo] = (float)fv;
    else aten_store_i64(out->dtype, out->data, oo, iv);
    if (indices) aten_store_i64(indices->dtype, indices->data, p.outer.off[2], at);
  }
}

/* Dtype rules: float32 in -> float32 out (argmax/argmin: int64 out; any:
 * bool out); integers and bools too for sum and prod (an integer out), the
 * extremes and median (out of the input's dtype) and any. */
ET_PREPARE static et_status red_dtypes(et_kernel_ctx *ctx, const char *op, rkind k, const et_tensor *a, const et_tensor *out,
                                       const et_tensor *indices) {
  et_status st;
  const bool ints_ok = k != R_MEAN && k != R_VAR;
  const char *want = ints_ok ? "float32, an integer or bool" : "float32";
  if ((st = af_dtype(ctx, op, a, "self", a->dtype == ET_DT_FLOAT || (ints_ok && aten_is_int_dt(a->dtype)), want))) return st;
  if (k == R_ARGMAX || k == R_ARGMIN) return af_dtype(ctx, op, out, "out", out->dtype == ET_DT_LONG, "int64");
  if (indices && (st = af_dtype(ctx, op, indices, "indices", indices->dtype == ET_DT_LONG, "int64"))) return st;
  if (k == R_ANY) return af_dtype(ctx, op, out, "out", out->dtype == ET_DT_BOOL || out->dtype == ET_DT_BYTE, "bool or uint8");
  if (k == R_SUM || k == R_PROD) {
    const bool ok = a->dtype == ET_DT_FLOAT ? out->dtype == ET_DT_FLOAT : out->dtype == ET_DT_LONG || out->dtype == ET_DT_INT;
    return af_dtype(ctx, op, out, "out", ok, a->dtype == ET_DT_FLOAT ? "float32" : "int64 or int32");
  }
  if (out->dtype != a->dtype) return et_fail(ctx, ET_E_INVALID_ARG, "%s: dtype %s in, %s out", op, et_dtype_name(a->dtype), et_dtype_name(out->dtype));
  return ET_OK;
}

/* Argument slots of the reduction overloads (their schemas; self first in all of them):
 * sum.IntList_out and prod.int_out (self, dim, keepdim, *, dtype, out); mean.dtype_out (self, *, dtype, out);
 * amax, amin, argmax, argmin, any.out, any.dims_out (self, dim, keepdim, out); max.dim_max, min.dim_min,
 * median.dim_values (self, dim, keepdim, *, values, indices); var.correction_out (self, dim, *, correction,
 * keepdim, out); any.all_out and median.out (self, out). */
enum { RED_SELF };
enum { SUM_SELF, SUM_DIM, SUM_KEEPDIM, SUM_DTYPE, SUM_OUT };
enum { MEAN_SELF, MEAN_DTYPE, MEAN_OUT };
enum { DIMRED_SELF, DIMRED_DIM, DIMRED_KEEPDIM, DIMRED_OUT };
enum { VALIDX_SELF, VALIDX_DIM, VALIDX_KEEPDIM, VALIDX_VALUES, VALIDX_INDICES };
enum { VAR_SELF, VAR_DIM, VAR_CORRECTION, VAR_KEEPDIM, VAR_OUT };
enum { ALLRED_SELF, ALLRED_OUT };
#define NO_SLOT (-1)

/* Argument slots of each reduction overload: dim (NO_SLOT: all dims), keepdim
 * (NO_SLOT: false), dtype, correction (NO_SLOT: none), the outputs. */
typedef struct {
  int8_t dim, keep, dtype, corr, out, indices;
} red_layout;
/* One layout per schema shape above. */
#define SUM_LAYOUT {SUM_DIM, SUM_KEEPDIM, SUM_DTYPE, NO_SLOT, SUM_OUT, NO_SLOT}
#define MEAN_LAYOUT {NO_SLOT, NO_SLOT, MEAN_DTYPE, NO_SLOT, MEAN_OUT, NO_SLOT}
#define DIMRED_LAYOUT {DIMRED_DIM, DIMRED_KEEPDIM, NO_SLOT, NO_SLOT, DIMRED_OUT, NO_SLOT}
#define VALIDX_LAYOUT {VALIDX_DIM, VALIDX_KEEPDIM, NO_SLOT, NO_SLOT, VALIDX_VALUES, VALIDX_INDICES}
#define VAR_LAYOUT {VAR_DIM, VAR_KEEPDIM, NO_SLOT, VAR_CORRECTION, VAR_OUT, NO_SLOT}
static const red_layout k_layout[] = {
    [R_SUM] = SUM_LAYOUT,       [R_MEAN] = MEAN_LAYOUT,      [R_PROD] = SUM_LAYOUT,      [R_AMAX] = DIMRED_LAYOUT,
    [R_AMIN] = DIMRED_LAYOUT,   [R_ARGMAX] = DIMRED_LAYOUT,  [R_ARGMIN] = DIMRED_LAYOUT, [R_MAX] = VALIDX_LAYOUT,
    [R_MIN] = VALIDX_LAYOUT,    [R_ANY] = DIMRED_LAYOUT,     [R_VAR] = VAR_LAYOUT,       [R_MEDIAN] = VALIDX_LAYOUT,
};

static void red_unpack(rkind k, et_value **args, const et_tensor *a, red_args *ra, bool all_dims) {
  const red_layout l = k_layout[k];
  ra->mask = (l.dim < 0 || all_dims) ? (1u << a->dim) - 1u : red_mask_get(args[l.dim], a->dim);
  ra->keep = !all_dims && l.keep >= 0 && args[l.keep]->u.b;
  ra->correction = 1.0;
  if (l.corr >= 0 && args[l.corr]->tag != ET_TAG_NONE) ra->correction = aten_scalar_get(args[l.corr], NULL);
}

ET_PREPARE static et_status reduce_prepare(et_kernel_ctx *ctx, const char *op, rkind k, bool all_dims, et_value **args,
                                           uint32_t nargs) {
  const red_layout l = k_layout[k];
  const uint32_t want = (uint32_t)(l.indices >= 0 ? l.indices : l.out) + 2;
  et_tensor *a = NULL, *out = NULL, *indices = NULL;
  unsigned mask = 0;
  bool keep = false;
  et_status st;
  if (all_dims) { /* any.all_out(self, out), median.out(self, out) */
    if ((st = aten_self_out(ctx, op, args, nargs, 3, ALLRED_OUT, &a, &out))) return st;
    mask = (1u << a->dim) - 1u;
  } else {
    if ((st = aten_self_out(ctx, op, args, nargs, want, (uint32_t)l.out, &a, &out))) return st;
    if (l.indices >= 0 && (st = aten_tensor(ctx, op, args, (uint32_t)l.indices, &indices))) return st;
    if (l.keep >= 0 && (st = af_bool(ctx, op, args, (uint32_t)l.keep, &keep))) return st;
    if (l.dim >= 0) {
      if ((st = red_mask(ctx, op, args[l.dim], a->dim, &mask))) return st;
    } else {
      mask = (1u << a->dim) - 1u;
    }
    if (l.dtype >= 0 && (st = red_dtype_arg(ctx, op, args[l.dtype], out))) return st;
    if (l.corr >= 0 && args[l.corr]->tag != ET_TAG_NONE && (st = af_scalar(ctx, op, args, (uint32_t)l.corr))) return st;
  }
  if ((st = red_dtypes(ctx, op, k, a, out, indices))) return st;
  et_tensor *outs[2] = {out, indices};
  if ((st = red_check(ctx, op, a, mask, keep, outs, indices ? 2 : 1))) return st;
  if (et_tensor_numel(a) == 0 && k != R_SUM && k != R_PROD && k != R_ANY && k != R_MEAN)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: empty input", op);
  return ET_OK;
}

static et_status reduce_adapter(et_kernel_ctx *ctx, const char *op, rkind k, bool all_dims, et_value **args, uint32_t nargs) {
  (void)ctx, (void)op, (void)nargs;
  const et_tensor *const a = args[RED_SELF]->u.t;
  const red_layout l = k_layout[k];
  red_args ra;
  red_unpack(k, args, a, &ra, all_dims);
  et_tensor *const out = args[all_dims ? ALLRED_OUT : l.out]->u.t;
  reduce(k, a, &ra, out, !all_dims && l.indices >= 0 ? args[l.indices]->u.t : NULL);
  return ET_OK;
}

/* The reductions over a dim list (named in aten_float_ops.def), then the two over every element. */
#define REDUCE_OP(fn, name, k) OP_ENTRIES(fn, reduce_adapter, reduce_prepare, name, k, false)
#define REDUCE_ALL_OP(fn, name, k) OP_ENTRIES(fn, reduce_adapter, reduce_prepare, name, k, true)
REDUCE_OP(aten_sum_intlist_out, "aten::sum.IntList_out", R_SUM)
REDUCE_OP(aten_mean_dtype_out, "aten::mean.dtype_out", R_MEAN)
REDUCE_OP(aten_prod_int_out, "aten::prod.int_out", R_PROD)
REDUCE_OP(aten_amax_out, "aten::amax.out", R_AMAX)
REDUCE_OP(aten_amin_out, "aten::amin.out", R_AMIN)
REDUCE_OP(aten_argmax_out, "aten::argmax.out", R_ARGMAX)
REDUCE_OP(aten_argmin_out, "aten::argmin.out", R_ARGMIN)
REDUCE_OP(aten_max_dim_max, "aten::max.dim_max", R_MAX)
REDUCE_OP(aten_min_dim_min, "aten::min.dim_min", R_MIN)
REDUCE_OP(aten_any_out, "aten::any.out", R_ANY)
REDUCE_OP(aten_any_dims_out, "aten::any.dims_out", R_ANY)
REDUCE_OP(aten_var_correction_out, "aten::var.correction_out", R_VAR)
REDUCE_OP(aten_median_dim_values, "aten::median.dim_values", R_MEDIAN)
REDUCE_ALL_OP(aten_any_all_out, "aten::any.all_out", R_ANY)
REDUCE_ALL_OP(aten_median_out, "aten::median.out", R_MEDIAN)

/* ---- along one dim: cumsum and _log_softmax ---- */

/* Rows along `dim`: the outer walk over every other dim (operand 0 input,
 * 1 output), the row's length and each side's stride along dim. */
typedef struct {
  af_iter outer;
  size_t len, sa, so, rows;
} dim_rows;
static void dim_rows_make(dim_rows *r, const et_tensor *a, const et_tensor *out, uint8_t dim) {
  size_t as[ET_MAX_DIM], os[ET_MAX_DIM];
  int32_t sizes[ET_MAX_DIM];
  et_tensor_strides(a, as);
  et_tensor_strides(out, os);
  memcpy(sizes, a->sizes, sizeof sizes);
  r->len = a->dim ? (size_t)a->sizes[dim] : 1;
  r->sa = a->dim ? as[dim] : 0, r->so = a->dim ? os[dim] : 0;
  if (a->dim) sizes[dim] = 1;
  af_iter_init(&r->outer, a->dim, sizes);
  af_iter_add(&r->outer, as, 0);
  af_iter_add(&r->outer, os, 0);
  r->rows = 1;
  for (uint8_t d = 0; d < a->dim; d++) r->rows *= (size_t)sizes[d];
}

/* Argument slots of cumsum.out (self, dim, *, dtype, out) and _log_softmax.out (self, dim, half_to_float, out). */
enum { ALONG_SELF, ALONG_DIM, ALONG_DTYPE, ALONG_OUT };
#define ALONG_HALF_TO_FLOAT ALONG_DTYPE

/* The rows of a (self, dim, ..., out) call: self along dim into out. */
static void dim_rows_of(et_value **args, dim_rows *r) {
  const et_tensor *const a = args[ALONG_SELF]->u.t;
  dim_rows_make(r, a, args[ALONG_OUT]->u.t, aten_dim_get(args[ALONG_DIM]->u.i, a->dim));
}

/* (self, dim, <dtype | half_to_float>, out, ret) */
ET_PREPARE static et_status along_prepare(et_kernel_ctx *ctx, const char *op, bool scan, et_value **args, uint32_t nargs) {
  et_tensor *a = NULL, *out = NULL;
  uint8_t dim = 0;
  bool h2f = false;
  et_status st;
  if ((st = aten_self_dim_out(ctx, op, args, nargs, 5, ALONG_DIM, ALONG_OUT, &a, &out, &dim)) ||
      (st = af_same_shape(ctx, op, out, "out", a)))
    return st;
  if (scan) {
    if ((st = red_dtype_arg(ctx, op, args[ALONG_DTYPE], out))) return st;
    const bool ok = a->dtype == ET_DT_FLOAT ? out->dtype == ET_DT_FLOAT : aten_is_int_dt(a->dtype) && out->dtype == ET_DT_LONG;
    if ((st = af_dtype(ctx, op, a, "self", a->dtype == ET_DT_FLOAT || aten_is_int_dt(a->dtype), "float32, an integer or bool")))
      return st;
    return af_dtype(ctx, op, out, "out", ok, a->dtype == ET_DT_FLOAT ? "float32" : "int64");
  }
  if ((st = af_bool(ctx, op, args, ALONG_HALF_TO_FLOAT, &h2f)) || (st = af_f32(ctx, op, a, "self")) || (st = af_f32(ctx, op, out, "out"))) return st;
  return ET_OK;
}

OP_PREPARE(aten_cumsum_out, along_prepare, "aten::cumsum.out", true)
et_status aten_cumsum_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[ALONG_SELF]->u.t;
  et_tensor *const out = args[ALONG_OUT]->u.t;
  dim_rows r;
  dim_rows_of(args, &r);
  for (size_t k = 0; k < r.rows; k++, af_iter_next(&r.outer)) {
    const size_t ia = r.outer.off[0], io = r.outer.off[1];
    if (a->dtype == ET_DT_FLOAT) {
      double s = 0;
      for (size_t i = 0; i < r.len; i++) {
        s += ((const float *)a->data)[ia + i * r.sa];
        ((float *)out->data)[io + i * r.so] = (float)s;
      }
    } else {
      uint64_t s = 0;
      for (size_t i = 0; i < r.len; i++) {
        s += (uint64_t)aten_i64(a->dtype, a->data, ia + i * r.sa);
        aten_store_i64(out->dtype, out->data, io + i * r.so, (int64_t)s);
      }
    }
  }
  return ET_OK;
}

OP_PREPARE(aten_log_softmax_out, along_prepare, "aten::_log_softmax.out", false)
/* x - max - log(sum(exp(x - max))) per row */
et_status aten_log_softmax_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const float *pa = args[ALONG_SELF]->u.t->data;
  float *po = args[ALONG_OUT]->u.t->data;
  dim_rows r;
  dim_rows_of(args, &r);
  for (size_t k = 0; k < r.rows; k++, af_iter_next(&r.outer)) {
    const float *x = pa + r.outer.off[0];
    float *y = po + r.outer.off[1];
    float mx = -INFINITY;
    for (size_t i = 0; i < r.len; i++)
      if (x[i * r.sa] > mx || x[i * r.sa] != x[i * r.sa]) mx = x[i * r.sa];
    double sum = 0;
    for (size_t i = 0; i < r.len; i++) sum += expf(x[i * r.sa] - mx);
    const float lse = logf((float)sum);
    for (size_t i = 0; i < r.len; i++) y[i * r.so] = x[i * r.sa] - mx - lse;
  }
  return ET_OK;
}

/* ---- normalizations ---- */

/* Argument slots: native_layer_norm, native_group_norm, _native_batch_norm_legit_no_training,
 * _native_batch_norm_legit.no_stats (schemas at each op below). */
enum { LN_INPUT, LN_NORMALIZED_SHAPE, LN_WEIGHT, LN_BIAS, LN_EPS, LN_OUT0, LN_OUT1, LN_OUT2 };
enum { GN_INPUT, GN_WEIGHT, GN_BIAS, GN_N, GN_C, GN_HXW, GN_GROUP, GN_EPS, GN_OUT0, GN_OUT1, GN_OUT2 };
enum { BN_INPUT, BN_WEIGHT, BN_BIAS, BN_RUNNING_MEAN, BN_RUNNING_VAR, BN_MOMENTUM, BN_EPS, BN_OUT0, BN_OUT1, BN_OUT2 };
enum { BNS_INPUT, BNS_WEIGHT, BNS_BIAS, BNS_TRAINING, BNS_MOMENTUM, BNS_EPS, BNS_OUT, BNS_SAVE_MEAN, BNS_SAVE_INVSTD };

/* A walk over the dims of t set in `mask` (logical order), from `base`. */
static void sub_iter(const et_tensor *t, unsigned mask, size_t base, et_iter *it) {
  size_t s[ET_MAX_DIM], st[ET_MAX_DIM];
  int32_t sz[ET_MAX_DIM];
  uint8_t n = 0;
  et_tensor_strides(t, s);
  for (uint8_t d = 0; d < t->dim; d++)
    if ((mask >> d) & 1u) sz[n] = t->sizes[d], st[n++] = s[d];
  et_iter_custom(it, n, sz, st, base);
}
/* Mean and 1/sqrt(biased variance + eps) of the elements a walk visits (two passes, in double). */
static void moments(const float *x, const et_iter *start, size_t n, double eps, float *mean, float *rstd) {
  et_iter it = *start;
  double s = 0, q = 0;
  for (size_t i = 0; i < n; i++, et_iter_next(&it)) s += x[it.off];
  const double m = n ? s / (double)n : 0;
  it = *start;
  for (size_t i = 0; i < n; i++, et_iter_next(&it)) q += (x[it.off] - m) * (x[it.off] - m);
  *mean = (float)m;
  *rstd = (float)(1.0 / sqrt((n ? q / (double)n : 0) + eps));
}
static inline float opt_at(const et_tensor *t, size_t i, float dflt) { return t ? ((const float *)t->data)[i] : dflt; }

/* Weight and bias: None or float32 vectors of `n` entries. */
ET_PREPARE static et_status affine_check(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t iw, et_tensor **w, et_tensor **b,
                                         int32_t n) {
  et_status st;
  if ((st = af_opt_f32_arg(ctx, op, args, iw, "weight", w)) || (st = af_opt_f32_arg(ctx, op, args, iw + 1, "bias", b))) return st;
  if (*w && (st = af_shape(ctx, op, *w, "weight", 1, &n))) return st;
  return *b ? af_shape(ctx, op, *b, "bias", 1, &n) : ET_OK;
}
/* The head of the normalizations: input float32 of rank >= 2 (layer norm: >= 1), out0 its shape. */
ET_PREPARE static et_status norm_head(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs, uint32_t want, uint32_t iout,
                                      uint8_t min_rank, et_tensor **a, et_tensor **out) {
  et_status st;
  if ((st = af_f32_self_out(ctx, op, args, nargs, want, iout, a, "input", out)) || (st = af_same_shape(ctx, op, *out, "out", *a))) return st;
  if ((*a)->dim < min_rank) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input rank %u below %u", op, (*a)->dim, min_rank);
  return ET_OK;
}
/* The statistics outputs: float32 of `n` elements (0: not written). */
ET_PREPARE static et_status stats_check(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, size_t n, bool empty_ok) {
  et_tensor *t = NULL;
  et_status st;
  for (uint32_t k = i; k < i + 2; k++) {
    if ((st = af_f32_arg(ctx, op, args, k, k == i ? "mean" : "rstd", &t))) return st;
    const size_t got = et_tensor_numel(t);
    if (got != n && !(empty_ok && got == 0))
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: statistics output %u has %lu elements, expected %lu", op, (unsigned)k,
                     (unsigned long)got, (unsigned long)n);
  }
  return ET_OK;
}

/* native_layer_norm(input, normalized_shape, weight?, bias?, eps, out0, out1, out2): over the last dims. */
ET_PREPARE et_status aten_native_layer_norm_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::native_layer_norm.out";
  et_tensor *a = NULL, *out = NULL;
  uint32_t k = 0;
  et_status st = norm_head(ctx, op, args, nargs, 9, LN_OUT0, 1, &a, &out);
  if (st || (st = af_int_list(ctx, op, args, LN_NORMALIZED_SHAPE, false, &k)) || (st = af_scalar(ctx, op, args, LN_EPS)))
    return st;
  if (k == 0 || k > a->dim) return et_fail(ctx, ET_E_INVALID_ARG, "%s: normalized_shape has %u dims for a rank-%u input", op, (unsigned)k, a->dim);
  int32_t m = 1;
  for (uint32_t i = 0; i < k; i++) {
    const int64_t s = et_list_int(args[LN_NORMALIZED_SHAPE], i);
    if (s != a->sizes[a->dim - k + i]) return et_fail(ctx, ET_E_INVALID_ARG, "%s: normalized_shape does not match the input's last dims", op);
    m *= (int32_t)s;
  }
  for (uint32_t i = LN_WEIGHT; i <= LN_BIAS; i++) { /* weight and bias: None or normalized_shape, in logical order */
    et_tensor *t = NULL;
    const char *name = i == LN_WEIGHT ? "weight" : "bias";
    if ((st = af_opt_f32_arg(ctx, op, args, i, name, &t))) return st;
    if (t && (st = af_shape(ctx, op, t, name, (uint8_t)k, a->sizes + (a->dim - k)))) return st;
    if (t && !et_dim_order_is_identity(t)) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: %s is not contiguous", op, name);
  }
  return stats_check(ctx, op, args, LN_OUT1, et_tensor_numel(a) / (m ? (size_t)m : 1), false);
}
et_status aten_native_layer_norm_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[LN_INPUT]->u.t, *const w = af_opt_tensor_get(args[LN_WEIGHT]);
  const et_tensor *const b = af_opt_tensor_get(args[LN_BIAS]);
  et_tensor *const out = args[LN_OUT0]->u.t, *const mean = args[LN_OUT1]->u.t, *const rstd = args[LN_OUT2]->u.t;
  const uint8_t k = (uint8_t)args[LN_NORMALIZED_SHAPE]->u.list.len, lead = (uint8_t)(a->dim - k);
  const unsigned rowmask = ((1u << a->dim) - 1u) & ~((1u << lead) - 1u);
  et_tensor *outs[3] = {out, mean, rstd};
  red_plan p; /* outer: the rows (input, out, mean, rstd); inner: a row of the input */
  red_plan_make(&p, a, rowmask, true, outs, 3);
  et_iter ro;
  const double eps = args[LN_EPS]->u.d;
  const float *x = a->data;
  float *y = out->data;
  for (size_t e = 0; e < p.kn; e++, af_iter_next(&p.outer)) {
    float mu, rs;
    red_inner(&p);
    moments(x, &p.inner, p.rn, eps, &mu, &rs);
    ((float *)mean->data)[p.outer.off[2]] = mu;
    ((float *)rstd->data)[p.outer.off[3]] = rs;
    sub_iter(out, rowmask, p.outer.off[1], &ro);
    for (size_t i = 0; i < p.rn; i++, et_iter_next(&p.inner), et_iter_next(&ro))
      y[ro.off] = (x[p.inner.off] - mu) * rs * opt_at(w, i, 1.0f) + opt_at(b, i, 0.0f);
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* Per channel c (dim 1) over the batch and spatial dims, or per (n, channel
 * group) over its channels and the spatial dims: out = (x - mean) * rstd *
 * weight[c] + bias[c]. `scale`/`shift` per channel replace the statistics
 * when given (batch norm with running statistics). */
static void norm_apply(const et_tensor *a, et_tensor *out, int32_t n, int32_t c, const et_tensor *w, const et_tensor *b, float mu,
                       float rs) {
  size_t as[ET_MAX_DIM], os[ET_MAX_DIM];
  et_iter ia, io;
  et_tensor_strides(a, as);
  et_tensor_strides(out, os);
  const unsigned spatial = ((1u << a->dim) - 1u) & ~3u;
  sub_iter(a, spatial, (size_t)n * as[0] + (size_t)c * as[1], &ia);
  sub_iter(out, spatial, (size_t)n * os[0] + (size_t)c * os[1], &io);
  size_t hw = 1;
  for (uint8_t d = 2; d < a->dim; d++) hw *= (size_t)a->sizes[d];
  const float g = opt_at(w, (size_t)c, 1.0f) * rs, sh = opt_at(b, (size_t)c, 0.0f);
  const float *x = a->data;
  float *y = out->data;
  for (size_t i = 0; i < hw; i++, et_iter_next(&ia), et_iter_next(&io)) y[io.off] = (x[ia.off] - mu) * g + sh;
}

/* native_group_norm(input, weight?, bias?, N, C, HxW, group, eps, out0, out1, out2) */
ET_PREPARE et_status aten_native_group_norm_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::native_group_norm.out";
  et_tensor *a = NULL, *out = NULL, *w = NULL, *b = NULL;
  int64_t n = 0, c = 0, hw = 0, g = 0;
  et_status st;
  if ((st = norm_head(ctx, op, args, nargs, 12, GN_OUT0, 2, &a, &out)) || (st = aten_int(ctx, op, args, GN_N, &n)) ||
      (st = aten_int(ctx, op, args, GN_C, &c)) || (st = aten_int(ctx, op, args, GN_HXW, &hw)) ||
      (st = aten_int(ctx, op, args, GN_GROUP, &g)) || (st = af_scalar(ctx, op, args, GN_EPS)) ||
      (st = affine_check(ctx, op, args, GN_WEIGHT, &w, &b, a->sizes[1])))
    return st;
  if (n != a->sizes[0] || c != a->sizes[1] || hw * n * c != (int64_t)et_tensor_numel(a) || g <= 0 || c % g != 0)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: N, C, HxW or group do not match the input", op);
  return stats_check(ctx, op, args, GN_OUT1, (size_t)(n * g), false);
}
et_status aten_native_group_norm_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[GN_INPUT]->u.t, *const w = af_opt_tensor_get(args[GN_WEIGHT]);
  const et_tensor *const b = af_opt_tensor_get(args[GN_BIAS]);
  et_tensor *const out = args[GN_OUT0]->u.t;
  float *const mean = args[GN_OUT1]->u.t->data, *const rstd = args[GN_OUT2]->u.t->data;
  const int32_t n = a->sizes[0], c = a->sizes[1], g = (int32_t)args[GN_GROUP]->u.i, cg = c / g;
  size_t as[ET_MAX_DIM], ms[ET_MAX_DIM], rss[ET_MAX_DIM];
  et_tensor_strides(a, as);
  et_tensor_strides(args[GN_OUT1]->u.t, ms);
  et_tensor_strides(args[GN_OUT2]->u.t, rss);
  /* a group's elements: its channels and the spatial dims as one walk (dims 1.. from channel g * cg) */
  for (int32_t i = 0; i < n; i++)
    for (int32_t k = 0; k < g; k++) {
      et_iter it;
      sub_iter(a, ((1u << a->dim) - 1u) & ~1u, (size_t)i * as[0] + (size_t)(k * cg) * as[1], &it);
      it.sizes[0] = cg; /* dim 1 of the walk: only this group's channels */
      size_t cnt = (size_t)cg;
      for (uint8_t d = 2; d < a->dim; d++) cnt *= (size_t)a->sizes[d];
      float mu, rs;
      moments(a->data, &it, cnt, args[GN_EPS]->u.d, &mu, &rs);
      mean[(size_t)i * ms[0] + (size_t)k * ms[1]] = mu, rstd[(size_t)i * rss[0] + (size_t)k * rss[1]] = rs;
      for (int32_t ch = k * cg; ch < (k + 1) * cg; ch++) norm_apply(a, out, i, ch, w, b, mu, rs);
    }
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var, momentum, eps, out0, out1, out2) */
ET_PREPARE et_status aten_native_batch_norm_legit_no_training_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::_native_batch_norm_legit_no_training.out";
  et_tensor *a = NULL, *out = NULL, *w = NULL, *b = NULL;
  et_status st;
  if ((st = norm_head(ctx, op, args, nargs, 11, BN_OUT0, 2, &a, &out)) ||
      (st = affine_check(ctx, op, args, BN_WEIGHT, &w, &b, a->sizes[1])) ||
      (st = affine_check(ctx, op, args, BN_RUNNING_MEAN, &w, &b, a->sizes[1])) || (st = af_scalar(ctx, op, args, BN_MOMENTUM)) ||
      (st = af_scalar(ctx, op, args, BN_EPS)))
    return st;
  if (w == NULL || b == NULL) return et_fail(ctx, ET_E_INVALID_ARG, "%s: running_mean and running_var are required", op);
  return stats_check(ctx, op, args, BN_OUT1, (size_t)a->sizes[1], true);
}
et_status aten_native_batch_norm_legit_no_training_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[BN_INPUT]->u.t, *const w = af_opt_tensor_get(args[BN_WEIGHT]);
  const et_tensor *const b = af_opt_tensor_get(args[BN_BIAS]);
  const float *rm = args[BN_RUNNING_MEAN]->u.t->data, *rv = args[BN_RUNNING_VAR]->u.t->data;
  const float eps = (float)args[BN_EPS]->u.d;
  et_tensor *const out = args[BN_OUT0]->u.t, *const sm = args[BN_OUT1]->u.t, *const si = args[BN_OUT2]->u.t;
  for (int32_t c = 0; c < a->sizes[1]; c++) {
    const float rs = 1.0f / sqrtf(rv[c] + eps);
    if (et_tensor_numel(sm)) ((float *)sm->data)[c] = rm[c], ((float *)si->data)[c] = rs;
    for (int32_t n = 0; n < a->sizes[0]; n++) norm_apply(a, out, n, c, w, b, rm[c], rs);
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps, out, save_mean, save_invstd):
 * per-channel statistics of this batch (InstanceNorm runs as this on a (1, N*C, ...) view). */
ET_PREPARE et_status aten_native_batch_norm_legit_no_stats_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::_native_batch_norm_legit.no_stats_out";
  et_tensor *a = NULL, *out = NULL, *w = NULL, *b = NULL;
  bool training = false;
  et_status st;
  if ((st = norm_head(ctx, op, args, nargs, 10, BNS_OUT, 2, &a, &out)) ||
      (st = affine_check(ctx, op, args, BNS_WEIGHT, &w, &b, a->sizes[1])) || (st = af_bool(ctx, op, args, BNS_TRAINING, &training)) ||
      (st = af_scalar(ctx, op, args, BNS_MOMENTUM)) || (st = af_scalar(ctx, op, args, BNS_EPS)))
    return st;
  if (!training) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: training=False without running statistics", op);
  return stats_check(ctx, op, args, BNS_SAVE_MEAN, (size_t)a->sizes[1], false);
}
et_status aten_native_batch_norm_legit_no_stats_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[BNS_INPUT]->u.t, *const w = af_opt_tensor_get(args[BNS_WEIGHT]);
  const et_tensor *const b = af_opt_tensor_get(args[BNS_BIAS]);
  et_tensor *const out = args[BNS_OUT]->u.t;
  float *const sm = args[BNS_SAVE_MEAN]->u.t->data, *const si = args[BNS_SAVE_INVSTD]->u.t->data;
  size_t as[ET_MAX_DIM], cnt = et_tensor_numel(a) / (size_t)(a->sizes[1] ? a->sizes[1] : 1);
  et_tensor_strides(a, as);
  for (int32_t c = 0; c < a->sizes[1]; c++) {
    et_iter it; /* channel c over the batch and spatial dims */
    sub_iter(a, ((1u << a->dim) - 1u) & ~2u, (size_t)c * as[1], &it);
    float mu, rs;
    moments(a->data, &it, cnt, args[BNS_EPS]->u.d, &mu, &rs);
    sm[c] = mu, si[c] = rs;
    for (int32_t n = 0; n < a->sizes[0]; n++) norm_apply(a, out, n, c, w, b, mu, rs);
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}
