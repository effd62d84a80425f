/* 2-D pooling and resizing of (N, C, H, W) or (C, H, W) tensors in any dim
 * order: max_pool2d_with_indices (padding, dilation, ceil_mode; float32 and
 * the integer dtypes too: a maximum is exact on int8 codes), avg_pool2d
 * (ceil_mode, count_include_pad, divisor_override), _adaptive_avg_pool2d,
 * adaptive_max_pool2d, upsample_bilinear2d.vec (align_corners either way)
 * and upsample_nearest2d.vec (any dtype: it copies elements). Windows,
 * source indices and weights follow PyTorch's CPU kernels (float32 sums,
 * PyTorch's index arithmetic); indices are the flat h * W + w of the input
 * plane, the last NaN of a window winning as in PyTorch. */
#include "aten_float.h"

/* ---- geometry ---- */

/* A pair argument (kernel_size, stride, padding, dilation): 1 or 2 entries,
 * stride also 0 (= kernel_size). Values in [lo, 65535]. */
ET_PREPARE static et_status pool_pair(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, const char *name, int32_t lo,
                                      bool empty_ok) {
  uint32_t n = 0;
  et_status st;
  if ((st = af_int_list(ctx, op, args, i, false, &n))) return st;
  if (n > 2 || (n == 0 && !empty_ok)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s needs 1 or 2 entries, got %u", op, name, (unsigned)n);
  for (uint32_t k = 0; k < n; k++) {
    const int64_t v = et_list_int(args[i], k);
    if (v < lo || v > 65535) return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s[%u] = %lld is outside [%lld, 65535]", op, name, (unsigned)k, (long long)v, (long long)lo);
  }
  return ET_OK;
}
/* Unchecked: entry k (0: H, 1: W) of a pair, `dflt` when empty. */
static int32_t pair_at(const et_value *v, uint32_t k, int32_t dflt) {
  if (v->u.list.len == 0) return dflt;
  return (int32_t)et_list_int(v, v->u.list.len == 1 ? 0 : k);
}

typedef struct {
  int32_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil;
} pool_geom;
/* Argument slots: max_pool2d_with_indices.out (self, kernel_size, stride, padding, dilation, ceil_mode, *, out,
 * indices) and avg_pool2d.out (self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
 * *, out): the first four are common. */
enum { POOL_SELF, POOL_KERNEL_SIZE, POOL_STRIDE, POOL_PADDING };
enum { MAXP_DILATION = POOL_PADDING + 1, MAXP_CEIL_MODE, MAXP_OUT, MAXP_INDICES };
enum { AVGP_CEIL_MODE = POOL_PADDING + 1, AVGP_COUNT_INCLUDE_PAD, AVGP_DIVISOR_OVERRIDE, AVGP_OUT };

/* (self, kernel_size, stride, padding[, dilation], ceil_mode, ...) */
static void pool_geom_get(et_value **args, bool has_dilation, pool_geom *g) {
  g->kh = pair_at(args[POOL_KERNEL_SIZE], 0, 1), g->kw = pair_at(args[POOL_KERNEL_SIZE], 1, 1);
  g->sh = pair_at(args[POOL_STRIDE], 0, g->kh), g->sw = pair_at(args[POOL_STRIDE], 1, g->kw);
  g->ph = pair_at(args[POOL_PADDING], 0, 0), g->pw = pair_at(args[POOL_PADDING], 1, 0);
  g->dh = has_dilation ? pair_at(args[MAXP_DILATION], 0, 1) : 1, g->dw = has_dilation ? pair_at(args[MAXP_DILATION], 1, 1) : 1;
  g->ceil = args[has_dilation ? MAXP_CEIL_MODE : AVGP_CEIL_MODE]->u.b;
}
/* PyTorch's pooling_output_shape. */
static int64_t pool_out(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil_mode) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--;
  return o;
}

/* Input 3-D or 4-D, out (and indices) of its rank with H, W = oh, ow. */
ET_PREPARE static et_status pool_shapes(et_kernel_ctx *ctx, const char *op, const et_tensor *a, const et_tensor *out,
                                        const et_tensor *indices, int64_t oh, int64_t ow) {
  et_status st;
  if (a->dim != 3 && a->dim != 4) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input must be 3-D or 4-D, got %u-D", op, a->dim);
  if (oh < 1 || ow < 1) return et_fail(ctx, ET_E_INVALID_ARG, "%s: output size %lldx%lld is empty", op, (long long)oh, (long long)ow);
  int32_t want[4];
  memcpy(want, a->sizes, sizeof want);
  want[a->dim - 2] = (int32_t)oh, want[a->dim - 1] = (int32_t)ow;
  if ((st = af_shape(ctx, op, out, "out", a->dim, want))) return st;
  if (indices && ((st = af_dtype(ctx, op, indices, "indices", indices->dtype == ET_DT_LONG, "int64")) ||
                  (st = af_shape(ctx, op, indices, "indices", a->dim, want))))
    return st;
  return ET_OK;
}
/* The dtypes a maximum handles: float32 and the integers. */
ET_PREPARE static et_status max_dtypes(et_kernel_ctx *ctx, const char *op, const et_tensor *a, const et_tensor *out) {
  const bool ok = a->dtype == ET_DT_FLOAT || (aten_is_int_dt(a->dtype) && a->dtype != ET_DT_BOOL);
  et_status st = af_dtype(ctx, op, a, "self", ok, "float32 or an integer");
  if (st == ET_OK && out->dtype != a->dtype)
    st = et_fail(ctx, ET_E_INVALID_ARG, "%s: dtype %s in, %s out", op, et_dtype_name(a->dtype), et_dtype_name(out->dtype));
  return st;
}

/* The maximum of plane (n, c) over rows [h0, h1) step dh and columns [w0, w1) step dw (a non-empty window):
 * out[oo] = it, indices[io] = its h * W + w. */
static void window_max(const et_tensor *a, const af_nchw *x, int32_t n, int32_t c, int32_t h0, int32_t h1, int32_t dh, int32_t w0,
                       int32_t w1, int32_t dw, et_tensor *out, size_t oo, et_tensor *indices, size_t io) {
  const size_t base = (size_t)n * x->sn + (size_t)c * x->sc;
  int64_t at = (int64_t)h0 * x->w + w0;
  if (a->dtype == ET_DT_FLOAT) {
    const float *p = (const float *)a->data + base;
    float best = -INFINITY;
    for (int32_t ih = h0; ih < h1; ih += dh)
      for (int32_t iw = w0; iw < w1; iw += dw) {
        const float v = p[(size_t)ih * x->sh + (size_t)iw * x->sw];
        if (v > best || v != v) best = v, at = (int64_t)ih * x->w + iw;
      }
    ((float *)out->data)[oo] = best;
  } else {
    int64_t best = INT64_MIN;
    for (int32_t ih = h0; ih < h1; ih += dh)
      for (int32_t iw = w0; iw < w1; iw += dw) {
        const int64_t v = aten_i64(a->dtype, a->data, base + (size_t)ih * x->sh + (size_t)iw * x->sw);
        if (v > best) best = v, at = (int64_t)ih * x->w + iw;
      }
    aten_store_i64(out->dtype, out->data, oo, best);
  }
  if (indices) ((int64_t *)indices->data)[io] = at;
}

/* Every output position of (n, c, oh, ow): the callback's window. */
#define FOR_EACH_OUTPUT(o)                        \
  for (int32_t n = 0; n < (o).n; n++)             \
    for (int32_t c = 0; c < (o).c; c++)           \
      for (int32_t oh = 0; oh < (o).h; oh++)      \
        for (int32_t ow = 0; ow < (o).w; ow++)

/* Eval's input (slot iself) and out (slot iout) of a pool or resize, and their N, C, H, W views; returns out. */
static et_tensor *nchw_args(et_value **args, uint32_t iself, uint32_t iout, bool unbatched, const et_tensor **a, af_nchw *x,
                            af_nchw *o) {
  et_tensor *const out = args[iout]->u.t;
  *a = args[iself]->u.t;
  af_nchw_of(*a, unbatched, x);
  af_nchw_of(out, unbatched, o);
  return out;
}

/* ---- max and average pooling ---- */

ET_PREPARE static et_status pool_prepare(et_kernel_ctx *ctx, const char *op, bool is_max, et_value **args, uint32_t nargs) {
  et_tensor *a = NULL, *out = NULL, *indices = NULL;
  bool b = false;
  et_status st;
  const uint32_t iout = is_max ? MAXP_OUT : AVGP_OUT;
  if ((st = aten_self_out(ctx, op, args, nargs, 9, iout, &a, &out)) ||
      (st = pool_pair(ctx, op, args, POOL_KERNEL_SIZE, "kernel_size", 1, false)) ||
      (st = pool_pair(ctx, op, args, POOL_STRIDE, "stride", 1, true)) || (st = pool_pair(ctx, op, args, POOL_PADDING, "padding", 0, false)))
    return st;
  if (is_max) {
    if ((st = pool_pair(ctx, op, args, MAXP_DILATION, "dilation", 1, false)) || (st = af_bool(ctx, op, args, MAXP_CEIL_MODE, &b)) ||
        (st = aten_tensor(ctx, op, args, MAXP_INDICES, &indices)) || (st = max_dtypes(ctx, op, a, out)))
      return st;
  } else {
    if ((st = af_bool(ctx, op, args, AVGP_CEIL_MODE, &b)) || (st = af_bool(ctx, op, args, AVGP_COUNT_INCLUDE_PAD, &b)) ||
        (st = af_f32(ctx, op, a, "self")) || (st = af_f32(ctx, op, out, "out")))
      return st;
    const et_value *const dv = args[AVGP_DIVISOR_OVERRIDE];
    if (dv->tag != ET_TAG_NONE && (dv->tag != ET_TAG_INT || dv->u.i == 0))
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: divisor_override must be None or a nonzero int", op);
  }
  pool_geom g;
  pool_geom_get(args, is_max, &g);
  if (g.ph > g.kh / 2 || g.pw > g.kw / 2) return et_fail(ctx, ET_E_INVALID_ARG, "%s: padding must be at most half the kernel size", op);
  if (a->dim != 3 && a->dim != 4) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input must be 3-D or 4-D, got %u-D", op, a->dim);
  const int32_t H = a->sizes[a->dim - 2], W = a->sizes[a->dim - 1];
  return pool_shapes(ctx, op, a, out, indices, pool_out(H, g.kh, g.ph, g.sh, g.dh, g.ceil), pool_out(W, g.kw, g.pw, g.sw, g.dw, g.ceil));
}

OP_PREPARE(aten_max_pool2d_with_indices_out, pool_prepare, "aten::max_pool2d_with_indices.out", true)
et_status aten_max_pool2d_with_indices_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  pool_geom g;
  pool_geom_get(args, true, &g);
  const et_tensor *a;
  af_nchw x, o, ix;
  et_tensor *const out = nchw_args(args, POOL_SELF, MAXP_OUT, true, &a, &x, &o), *const indices = args[MAXP_INDICES]->u.t;
  af_nchw_of(indices, true, &ix);
  FOR_EACH_OUTPUT(o) {
    int32_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    const int32_t h1 = h0 + (g.kh - 1) * g.dh + 1 < x.h ? h0 + (g.kh - 1) * g.dh + 1 : x.h;
    const int32_t w1 = w0 + (g.kw - 1) * g.dw + 1 < x.w ? w0 + (g.kw - 1) * g.dw + 1 : x.w;
    while (h0 < 0) h0 += g.dh;
    while (w0 < 0) w0 += g.dw;
    window_max(a, &x, n, c, h0, h1, g.dh, w0, w1, g.dw, out, af_nchw_at(&o, n, c, oh, ow),
               indices, af_nchw_at(&ix, n, c, oh, ow));
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* The float32 sum of plane (n, c) over [h0, h1) x [w0, w1). */
static float window_sum(const float *p, const af_nchw *x, int32_t n, int32_t c, int32_t h0, int32_t h1, int32_t w0, int32_t w1) {
  const float *q = p + (size_t)n * x->sn + (size_t)c * x->sc;
  float s = 0.0f;
  for (int32_t ih = h0; ih < h1; ih++)
    for (int32_t iw = w0; iw < w1; iw++) s += q[(size_t)ih * x->sh + (size_t)iw * x->sw];
  return s;
}

OP_PREPARE(aten_avg_pool2d_out, pool_prepare, "aten::avg_pool2d.out", false)
et_status aten_avg_pool2d_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  pool_geom g;
  pool_geom_get(args, false, &g);
  const bool include_pad = args[AVGP_COUNT_INCLUDE_PAD]->u.b;
  const int64_t divisor = args[AVGP_DIVISOR_OVERRIDE]->tag == ET_TAG_INT ? args[AVGP_DIVISOR_OVERRIDE]->u.i : 0;
  const et_tensor *a;
  af_nchw x, o;
  et_tensor *const out = nchw_args(args, POOL_SELF, AVGP_OUT, true, &a, &x, &o);
  float *po = out->data;
  FOR_EACH_OUTPUT(o) {
    int32_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    int32_t h1 = h0 + g.kh < x.h + g.ph ? h0 + g.kh : x.h + g.ph, w1 = w0 + g.kw < x.w + g.pw ? w0 + g.kw : x.w + g.pw;
    const int64_t pool_size = (int64_t)(h1 - h0) * (w1 - w0);
    h0 = h0 > 0 ? h0 : 0, w0 = w0 > 0 ? w0 : 0, h1 = h1 < x.h ? h1 : x.h, w1 = w1 < x.w ? w1 : x.w;
    float v = 0.0f;
    if (h0 < h1 && w0 < w1) {
      const int64_t div = divisor ? divisor : include_pad ? pool_size : (int64_t)(h1 - h0) * (w1 - w0);
      v = window_sum(a->data, &x, n, c, h0, h1, w0, w1) / (float)div;
    }
    po[af_nchw_at(&o, n, c, oh, ow)] = v;
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* ---- adaptive pooling: window i of n over `in` is [floor(i in / n), ceil((i + 1) in / n)) ---- */

static inline int32_t ad_start(int32_t i, int32_t in, int32_t n) { return (int32_t)(((int64_t)i * in) / n); }
static inline int32_t ad_end(int32_t i, int32_t in, int32_t n) { return (int32_t)(((int64_t)(i + 1) * in + n - 1) / n); }

/* Argument slots: _adaptive_avg_pool2d.out (self, output_size, *, out), adaptive_max_pool2d.out (..., out, indices). */
enum { ADAPT_SELF, ADAPT_OUTPUT_SIZE, ADAPT_OUT, ADAPT_INDICES };

ET_PREPARE static et_status adaptive_prepare(et_kernel_ctx *ctx, const char *op, bool is_max, et_value **args, uint32_t nargs) {
  et_tensor *a = NULL, *out = NULL, *indices = NULL;
  uint32_t n = 0;
  et_status st;
  if ((st = aten_self_out(ctx, op, args, nargs, is_max ? 5 : 4, ADAPT_OUT, &a, &out)) ||
      (st = af_int_list(ctx, op, args, ADAPT_OUTPUT_SIZE, false, &n)))
    return st;
  if (is_max) {
    if ((st = aten_tensor(ctx, op, args, ADAPT_INDICES, &indices)) || (st = max_dtypes(ctx, op, a, out))) return st;
  } else if ((st = af_f32(ctx, op, a, "self")) || (st = af_f32(ctx, op, out, "out"))) {
    return st;
  }
  if (n != 2) return et_fail(ctx, ET_E_INVALID_ARG, "%s: output_size needs 2 entries, got %u", op, (unsigned)n);
  if (a->dim >= 3 && (a->sizes[a->dim - 2] == 0 || a->sizes[a->dim - 1] == 0)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: empty input plane", op);
  return pool_shapes(ctx, op, a, out, indices, et_list_int(args[ADAPT_OUTPUT_SIZE], 0), et_list_int(args[ADAPT_OUTPUT_SIZE], 1));
}

OP_PREPARE(aten_adaptive_avg_pool2d_out, adaptive_prepare, "aten::_adaptive_avg_pool2d.out", false)
et_status aten_adaptive_avg_pool2d_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *a;
  af_nchw x, o;
  et_tensor *const out = nchw_args(args, ADAPT_SELF, ADAPT_OUT, true, &a, &x, &o);
  float *po = out->data;
  FOR_EACH_OUTPUT(o) {
    const int32_t h0 = ad_start(oh, x.h, o.h), h1 = ad_end(oh, x.h, o.h), w0 = ad_start(ow, x.w, o.w), w1 = ad_end(ow, x.w, o.w);
    po[af_nchw_at(&o, n, c, oh, ow)] =
        window_sum(a->data, &x, n, c, h0, h1, w0, w1) / (float)((h1 - h0) * (w1 - w0));
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}

OP_PREPARE(aten_adaptive_max_pool2d_out, adaptive_prepare, "aten::adaptive_max_pool2d.out", true)
et_status aten_adaptive_max_pool2d_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *a;
  af_nchw x, o, ix;
  et_tensor *const out = nchw_args(args, ADAPT_SELF, ADAPT_OUT, true, &a, &x, &o), *const indices = args[ADAPT_INDICES]->u.t;
  af_nchw_of(indices, true, &ix);
  FOR_EACH_OUTPUT(o) {
    window_max(a, &x, n, c, ad_start(oh, x.h, o.h), ad_end(oh, x.h, o.h), 1, ad_start(ow, x.w, o.w), ad_end(ow, x.w, o.w), 1, out,
               af_nchw_at(&o, n, c, oh, ow), indices,
               af_nchw_at(&ix, n, c, oh, ow));
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* ---- upsampling: (input, output_size?, [align_corners,] scale_factors?, out) ---- */

/* Argument slots: upsample_nearest2d.vec_out (input, output_size?, scale_factors?, *, out) and
 * upsample_bilinear2d.vec_out (input, output_size?, align_corners, scale_factors?, *, out). */
enum { UP_INPUT, UP_OUTPUT_SIZE };
enum { UPN_SCALE_FACTORS = UP_OUTPUT_SIZE + 1, UPN_OUT };
enum { UPB_ALIGN_CORNERS = UP_OUTPUT_SIZE + 1, UPB_SCALE_FACTORS, UPB_OUT };

/* Checks output_size / scale_factors (exactly one given) against out, which must be 4-D. */
ET_PREPARE static et_status upsample_prepare(et_kernel_ctx *ctx, const char *op, bool bilinear, et_value **args, uint32_t nargs) {
  et_tensor *a = NULL, *out = NULL;
  const uint32_t want = (bilinear ? UPB_OUT : UPN_OUT) + 2u, isc = bilinear ? UPB_SCALE_FACTORS : UPN_SCALE_FACTORS;
  uint32_t n = 0;
  bool ac = false;
  et_status st;
  if ((st = aten_self_out(ctx, op, args, nargs, want, ATEN_OUT_SLOT(want), &a, &out)) ||
      (st = af_int_list(ctx, op, args, UP_OUTPUT_SIZE, true, &n)))
    return st;
  if (bilinear && ((st = af_bool(ctx, op, args, UPB_ALIGN_CORNERS, &ac)) || (st = af_f32(ctx, op, a, "input")) || (st = af_f32(ctx, op, out, "out"))))
    return st;
  if (!bilinear && out->dtype != a->dtype)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dtype %s in, %s out", op, et_dtype_name(a->dtype), et_dtype_name(out->dtype));
  if (a->dim != 4) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input must be 4-D, got %u-D", op, a->dim);
  const et_value *sv = args[isc];
  int64_t oh = 0, ow = 0;
  if (n == 2 && sv->tag == ET_TAG_NONE) {
    oh = et_list_int(args[UP_OUTPUT_SIZE], 0), ow = et_list_int(args[UP_OUTPUT_SIZE], 1);
  } else if (n == 0 && args[UP_OUTPUT_SIZE]->tag == ET_TAG_NONE && sv->tag == ET_TAG_DOUBLE_LIST && sv->u.list.len == 2) {
    const double sh = et_list_double(sv, 0), sw = et_list_double(sv, 1);
    if (!(sh > 0 && sw > 0 && sh < 65536 && sw < 65536)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: scale factors must be positive", op);
    oh = (int64_t)((double)a->sizes[2] * sh), ow = (int64_t)((double)a->sizes[3] * sw);
  } else {
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: needs output_size (2 entries) or scale_factors (2 entries), not both", op);
  }
  if (a->sizes[2] < 1 || a->sizes[3] < 1) return et_fail(ctx, ET_E_INVALID_ARG, "%s: empty input plane", op);
  return pool_shapes(ctx, op, a, out, NULL, oh, ow);
}

/* PyTorch's compute_scales_value: 1 / scale_factor when one was given, else in / out (float). */
static float scale_of(const et_value *sv, uint32_t k, int32_t in, int32_t out) {
  if (sv->tag == ET_TAG_DOUBLE_LIST) {
    const double s = et_list_double(sv, k);
    if (s > 0) return (float)(1.0 / s);
  }
  return (float)in / (float)out;
}
static inline int32_t nearest_src(int32_t o, int32_t in, int32_t out, float scale) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const int32_t s = (int32_t)floorf((float)o * scale);
  return s < in - 1 ? s : in - 1;
}

OP_PREPARE(aten_upsample_nearest2d_vec_out, upsample_prepare, "aten::upsample_nearest2d.vec_out", false)
et_status aten_upsample_nearest2d_vec_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *a;
  af_nchw x, o;
  et_tensor *const out = nchw_args(args, UP_INPUT, UPN_OUT, false, &a, &x, &o);
  const float fh = scale_of(args[UPN_SCALE_FACTORS], 0, x.h, o.h), fw = scale_of(args[UPN_SCALE_FACTORS], 1, x.w, o.w);
  const size_t es = et_dtype_size(out->dtype);
  const uint8_t *pa = a->data;
  uint8_t *po = out->data;
  FOR_EACH_OUTPUT(o) {
    const int32_t ih = nearest_src(oh, x.h, o.h, fh), iw = nearest_src(ow, x.w, o.w, fw);
    memcpy(po + af_nchw_at(&o, n, c, oh, ow) * es,
           pa + af_nchw_at(&x, n, c, ih, iw) * es, es);
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* Source index and weight of the next row/column (PyTorch's linear index computation, in float). */
static inline void linear_src(int32_t o, int32_t in, float scale, bool align_corners, int32_t *i0, int32_t *step, float *l1) {
  float src = align_corners ? scale * (float)o : scale * ((float)o + 0.5f) - 0.5f;
  if (!align_corners && src < 0) src = 0;
  const int32_t i = (int32_t)floorf(src) < in - 1 ? (int32_t)floorf(src) : in - 1;
  float l = src - (float)i;
  l = l < 0 ? 0 : l > 1 ? 1 : l;
  *i0 = i, *step = i < in - 1 ? 1 : 0, *l1 = l;
}

OP_PREPARE(aten_upsample_bilinear2d_vec_out, upsample_prepare, "aten::upsample_bilinear2d.vec_out", true)
et_status aten_upsample_bilinear2d_vec_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const bool ac = args[UPB_ALIGN_CORNERS]->u.b;
  const et_tensor *a;
  af_nchw x, o;
  et_tensor *const out = nchw_args(args, UP_INPUT, UPB_OUT, false, &a, &x, &o);
  /* align_corners: (in - 1) / (out - 1) (0 for one output), else as nearest */
  const float fh = ac ? (o.h > 1 ? (float)(x.h - 1) / (float)(o.h - 1) : 0.0f) : scale_of(args[UPB_SCALE_FACTORS], 0, x.h, o.h);
  const float fw = ac ? (o.w > 1 ? (float)(x.w - 1) / (float)(o.w - 1) : 0.0f) : scale_of(args[UPB_SCALE_FACTORS], 1, x.w, o.w);
  const float *pa = a->data;
  float *po = out->data;
  FOR_EACH_OUTPUT(o) {
    int32_t h0, hs, w0, ws;
    float lh, lw;
    linear_src(oh, x.h, fh, ac, &h0, &hs, &lh);
    linear_src(ow, x.w, fw, ac, &w0, &ws, &lw);
    const float *p = pa + (size_t)n * x.sn + (size_t)c * x.sc;
    const size_t r0 = (size_t)h0 * x.sh, r1 = (size_t)(h0 + hs) * x.sh, c0 = (size_t)w0 * x.sw, c1 = (size_t)(w0 + ws) * x.sw;
    const float top = (1.0f - lw) * p[r0 + c0] + lw * p[r0 + c1], bottom = (1.0f - lw) * p[r1 + c0] + lw * p[r1 + c1];
    po[af_nchw_at(&o, n, c, oh, ow)] = (1.0f - lh) * top + lh * bottom;
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}
