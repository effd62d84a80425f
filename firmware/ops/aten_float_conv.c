/* Float32 convolutions and matrix products: aten::convolution (1-D and 2-D,
 * stride, padding, dilation, groups; transposed with output_padding), mm,
 * bmm, addmm, linear and _trilinear (nn.Bilinear). Direct loops, no scratch:
 * each output element is one float32 dot product (bias first, then the taps
 * in order), as PyTorch's CPU kernels accumulate in float. Any dim order on
 * every tensor. A 3-D convolution (5-D input) is refused at load. */
#include "aten_float.h"

/* Argument slots (the operators' schemas, out last; ret after it): convolution, mm and bmm, addmm, linear,
 * _trilinear. */
enum { CONV_INPUT, CONV_WEIGHT, CONV_BIAS, CONV_STRIDE, CONV_PADDING, CONV_DILATION, CONV_TRANSPOSED, CONV_OUTPUT_PADDING, CONV_GROUPS, CONV_OUT };
enum { MM_SELF, MM_MAT2, MM_OUT };
enum { ADDMM_SELF, ADDMM_MAT1, ADDMM_MAT2, ADDMM_BETA, ADDMM_ALPHA, ADDMM_OUT };
enum { LINEAR_INPUT, LINEAR_WEIGHT, LINEAR_BIAS, LINEAR_OUT };
enum { TRI_I1, TRI_I2, TRI_I3, TRI_EXPAND1, TRI_EXPAND2, TRI_EXPAND3, TRI_SUMDIM, TRI_UNROLL_DIM, TRI_OUT };

/* ---- convolution ---- */

typedef struct {
  int32_t sh, sw, ph, pw, dh, dw, oph, opw; /* per spatial dim; a 1-D convolution's H is 1 */
  int32_t groups;
  bool transposed;
} conv_params;

/* A spatial list (stride, padding, ...): 1 entry per spatial dim, or one for all. */
ET_PREPARE static et_status conv_list(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t i, const char *name, uint8_t ns,
                                      int64_t lo) {
  uint32_t n = 0;
  et_status st;
  if ((st = af_int_list(ctx, op, args, i, false, &n))) return st;
  if (n != ns && n != 1) return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s has %u entries for %u spatial dims", op, name, (unsigned)n, ns);
  for (uint32_t k = 0; k < n; k++) {
    const int64_t v = et_list_int(args[i], k);
    if (v < lo || v > 65535) return et_fail(ctx, ET_E_INVALID_ARG, "%s: %s[%u] = %lld is outside [%lld, 65535]", op, name, (unsigned)k, (long long)v, (long long)lo);
  }
  return ET_OK;
}
/* Unchecked: the list's value for spatial dim k of ns (a 1-D convolution's H gets `dflt`). */
static int32_t conv_at(const et_value *v, uint8_t ns, uint8_t k, int32_t dflt) {
  if (ns == 1 && k == 0) return dflt;
  return (int32_t)et_list_int(v, v->u.list.len == 1 ? 0 : (uint32_t)(k - (2 - ns)));
}
static void conv_params_get(et_value **args, uint8_t ns, conv_params *p) {
  p->sh = conv_at(args[CONV_STRIDE], ns, 0, 1), p->sw = conv_at(args[CONV_STRIDE], ns, 1, 1);
  p->ph = conv_at(args[CONV_PADDING], ns, 0, 0), p->pw = conv_at(args[CONV_PADDING], ns, 1, 0);
  p->dh = conv_at(args[CONV_DILATION], ns, 0, 1), p->dw = conv_at(args[CONV_DILATION], ns, 1, 1);
  p->transposed = args[CONV_TRANSPOSED]->u.b;
  p->oph = conv_at(args[CONV_OUTPUT_PADDING], ns, 0, 0), p->opw = conv_at(args[CONV_OUTPUT_PADDING], ns, 1, 0);
  p->groups = (int32_t)args[CONV_GROUPS]->u.i;
}
/* Output size of one spatial dim. */
static int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t op, bool transposed) {
  if (transposed) return (in - 1) * s - 2 * p + d * (k - 1) + op + 1;
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* (input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups, out) */
ET_PREPARE et_status aten_convolution_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::convolution.out";
  et_tensor *x = NULL, *w = NULL, *b = NULL, *out = NULL;
  bool tr = false;
  int64_t groups = 0;
  et_status st;
  if ((st = aten_self_out(ctx, op, args, nargs, 11, CONV_OUT, &x, &out)) || (st = aten_tensor(ctx, op, args, CONV_WEIGHT, &w)) ||
      (st = af_opt_tensor(ctx, op, args, CONV_BIAS, &b)))
    return st;
  if (x->dim == 5) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: 3-D convolution (5-D input) is not supported; 1-D and 2-D are", op);
  if ((x->dim != 3 && x->dim != 4) || w->dim != x->dim)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input and weight must be 3-D or 4-D (1-D or 2-D convolution), got %u-D and %u-D", op, x->dim, w->dim);
  const uint8_t ns = (uint8_t)(x->dim - 2);
  if ((st = af_f32(ctx, op, x, "input")) || (st = af_f32(ctx, op, w, "weight")) || (st = af_f32(ctx, op, out, "out")) ||
      (b && (st = af_f32(ctx, op, b, "bias"))) || (st = conv_list(ctx, op, args, CONV_STRIDE, "stride", ns, 1)) ||
      (st = conv_list(ctx, op, args, CONV_PADDING, "padding", ns, 0)) ||
      (st = conv_list(ctx, op, args, CONV_DILATION, "dilation", ns, 1)) || (st = af_bool(ctx, op, args, CONV_TRANSPOSED, &tr)) ||
      (st = conv_list(ctx, op, args, CONV_OUTPUT_PADDING, "output_padding", ns, 0)) || (st = aten_int(ctx, op, args, CONV_GROUPS, &groups)))
    return st;
  const int32_t cin = x->sizes[1];
  if (groups < 1 || groups > cin || cin % groups != 0) return et_fail(ctx, ET_E_INVALID_ARG, "%s: groups %lld does not divide %d input channels", op, (long long)groups, (int)cin);
  conv_params p;
  conv_params_get(args, ns, &p);
  /* weight: [C_out, C_in/groups, k...], transposed [C_in, C_out/groups, k...] */
  const int32_t cout = tr ? w->sizes[1] * (int32_t)groups : w->sizes[0];
  if ((tr ? w->sizes[0] != cin : (w->sizes[1] * groups != cin || cout % groups != 0)) || cout <= 0)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: weight shape does not fit %d input channels in %lld groups", op, (int)cin, (long long)groups);
  if (tr && (p.oph >= (p.sh > p.dh ? p.sh : p.dh) || p.opw >= (p.sw > p.dw ? p.sw : p.dw)))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: output_padding must be smaller than stride or dilation", op);
  int32_t want[4] = {x->sizes[0], cout, 1, 1};
  for (uint8_t k = 0; k < ns; k++) {
    const uint8_t d = (uint8_t)(2 + k), kk = (uint8_t)(2 - ns + k); /* kk: 0 for H, 1 for W */
    const int64_t o = conv_out_size(x->sizes[d], w->sizes[d], kk ? p.sw : p.sh, kk ? p.pw : p.ph, kk ? p.dw : p.dh,
                                    kk ? p.opw : p.oph, tr);
    if (o < 1) return et_fail(ctx, ET_E_INVALID_ARG, "%s: output size %lld in spatial dim %u is below 1", op, (long long)o, k);
    want[d] = (int32_t)o;
  }
  if ((st = af_shape(ctx, op, out, "out", x->dim, want))) return st;
  return b ? af_shape(ctx, op, b, "bias", 1, &cout) : ET_OK;
}

et_status aten_convolution_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const xt = args[CONV_INPUT]->u.t, *const wt = args[CONV_WEIGHT]->u.t;
  const et_tensor *const bt = af_opt_tensor_get(args[CONV_BIAS]);
  et_tensor *const ot = args[CONV_OUT]->u.t;
  conv_params p;
  conv_params_get(args, (uint8_t)(xt->dim - 2), &p);
  af_nchw x, w, o;
  af_nchw_of(xt, false, &x);
  af_nchw_of(wt, false, &w);
  af_nchw_of(ot, false, &o);
  const float *px = xt->data, *pw = wt->data, *pb = bt ? bt->data : NULL;
  float *po = ot->data;
  size_t bs[ET_MAX_DIM] = {0};
  if (bt) et_tensor_strides(bt, bs);
  const int32_t cin_g = x.c / p.groups, cout_g = o.c / p.groups;
  for (int32_t n = 0; n < o.n; n++)
    for (int32_t oc = 0; oc < o.c; oc++) {
      const int32_t g = oc / cout_g, ocl = oc - g * cout_g;
      const float bias = pb ? pb[(size_t)oc * bs[0]] : 0.0f;
      for (int32_t oh = 0; oh < o.h; oh++)
        for (int32_t ow = 0; ow < o.w; ow++) {
          float acc = bias;
          for (int32_t icl = 0; icl < cin_g; icl++) {
            const int32_t ic = g * cin_g + icl;
            const float *xc = px + (size_t)n * x.sn + (size_t)ic * x.sc;
            /* the weight plane of (oc, icl), or of (ic, ocl) transposed */
            const float *wc = p.transposed ? pw + (size_t)ic * w.sn + (size_t)ocl * w.sc : pw + (size_t)oc * w.sn + (size_t)icl * w.sc;
            for (int32_t kh = 0; kh < w.h; kh++) {
              int32_t ih;
              if (p.transposed) { /* oh = ih * s - p + kh * d */
                const int32_t t = oh + p.ph - kh * p.dh;
                if (t < 0 || t % p.sh != 0 || (ih = t / p.sh) >= x.h) continue;
              } else {
                ih = oh * p.sh - p.ph + kh * p.dh;
                if (ih < 0 || ih >= x.h) continue;
              }
              for (int32_t kw = 0; kw < w.w; kw++) {
                int32_t iw;
                if (p.transposed) {
                  const int32_t t = ow + p.pw - kw * p.dw;
                  if (t < 0 || t % p.sw != 0 || (iw = t / p.sw) >= x.w) continue;
                } else {
                  iw = ow * p.sw - p.pw + kw * p.dw;
                  if (iw < 0 || iw >= x.w) continue;
                }
                acc += xc[(size_t)ih * x.sh + (size_t)iw * x.sw] * wc[(size_t)kh * w.sh + (size_t)kw * w.sw];
              }
            }
          }
          po[af_nchw_at(&o, n, oc, oh, ow)] = acc;
        }
    }
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* ---- matrix products ---- */

/* One batch of out[m][n] = alpha * sum_k a[m][k] * b[k][n] + beta * c[m][n]
 * (c NULL: none), all through element strides. */
typedef struct {
  const float *a, *b, *c;
  float *o;
  size_t am, ak, bk, bn, cm, cn, om, on;
  int32_t M, N, K;
  float alpha, beta;
} mm_job;

static void mm_run(const mm_job *j) {
  const bool plain = j->alpha == 1.0f && j->beta == 1.0f;
  for (int32_t m = 0; m < j->M; m++)
    for (int32_t n = 0; n < j->N; n++) {
      const float *a = j->a + (size_t)m * j->am, *b = j->b + (size_t)n * j->bn;
      float acc = 0.0f;
      for (int32_t k = 0; k < j->K; k++) acc += a[(size_t)k * j->ak] * b[(size_t)k * j->bk];
      if (j->c) {
        const float c = j->c[(size_t)m * j->cm + (size_t)n * j->cn];
        acc = plain ? acc + c : (j->beta == 0.0f ? j->alpha * acc : j->alpha * acc + j->beta * c);
      } else if (j->alpha != 1.0f) {
        acc *= j->alpha;
      }
      j->o[(size_t)m * j->om + (size_t)n * j->on] = acc;
    }
}

/* Checks of out = a @ b with a [.., M, K], b [.., K, N], out [.., M, N] (rank r: 2, or 3 for bmm). */
ET_PREPARE static et_status mm_check(et_kernel_ctx *ctx, const char *op, const et_tensor *a, const et_tensor *b, const et_tensor *out,
                                     uint8_t r) {
  et_status st;
  if ((st = af_f32(ctx, op, a, "self")) || (st = af_f32(ctx, op, b, "mat2")) || (st = af_f32(ctx, op, out, "out"))) return st;
  if (a->dim != r || b->dim != r) return et_fail(ctx, ET_E_INVALID_ARG, "%s: operands must be %u-D, got %u-D and %u-D", op, r, a->dim, b->dim);
  if (a->sizes[r - 1] != b->sizes[r - 2] || (r == 3 && a->sizes[0] != b->sizes[0]))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: shapes do not multiply", op);
  const int32_t want[3] = {a->sizes[0], a->sizes[r - 2], b->sizes[r - 1]};
  return af_shape(ctx, op, out, "out", r, want + (3 - r));
}
/* A job for batch `i` of rank-r operands. */
static void mm_job_of(mm_job *j, const et_tensor *a, const et_tensor *b, et_tensor *out, uint8_t r, int32_t i) {
  size_t as[ET_MAX_DIM], bs[ET_MAX_DIM], os[ET_MAX_DIM];
  et_tensor_strides(a, as);
  et_tensor_strides(b, bs);
  et_tensor_strides(out, os);
  const uint8_t q = (uint8_t)(r - 2);
  j->a = (const float *)a->data + (q ? (size_t)i * as[0] : 0);
  j->b = (const float *)b->data + (q ? (size_t)i * bs[0] : 0);
  j->o = (float *)out->data + (q ? (size_t)i * os[0] : 0);
  j->am = as[q], j->ak = as[q + 1], j->bk = bs[q], j->bn = bs[q + 1], j->om = os[q], j->on = os[q + 1];
  j->M = a->sizes[q], j->K = a->sizes[q + 1], j->N = b->sizes[q + 1];
  j->c = NULL, j->cm = j->cn = 0, j->alpha = j->beta = 1.0f;
}

/* mm(self, mat2, out) and bmm(self, mat2, out): rank 2 or 3. */
ET_PREPARE static et_status mm_prepare(et_kernel_ctx *ctx, const char *op, uint8_t rank, et_value **args, uint32_t nargs) {
  et_tensor *a = NULL, *b = NULL, *out = NULL;
  et_status st;
  if ((st = aten_self_out(ctx, op, args, nargs, 4, MM_OUT, &a, &out)) || (st = aten_tensor(ctx, op, args, MM_MAT2, &b))) return st;
  return mm_check(ctx, op, a, b, out, rank);
}
static et_status mm_eval(uint8_t rank, et_value **args) {
  const et_tensor *const a = args[MM_SELF]->u.t;
  for (int32_t i = 0; i < (rank == 3 ? a->sizes[0] : 1); i++) {
    mm_job j;
    mm_job_of(&j, a, args[MM_MAT2]->u.t, args[MM_OUT]->u.t, rank, i);
    mm_run(&j);
  }
  return ET_OK;
}
OP_PREPARE(aten_mm_out, mm_prepare, "aten::mm.out", 2)
et_status aten_mm_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return mm_eval(2, args); }
OP_PREPARE(aten_bmm_out, mm_prepare, "aten::bmm.out", 3)
et_status aten_bmm_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return mm_eval(3, args); }

/* addmm(self, mat1, mat2, beta, alpha, out): beta * self + alpha * mat1 @ mat2, self broadcast to [M, N]. */
ET_PREPARE et_status aten_addmm_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::addmm.out";
  et_tensor *c = NULL, *a = NULL, *b = NULL, *out = NULL;
  et_status st;
  if ((st = aten_self_out(ctx, op, args, nargs, 7, ADDMM_OUT, &c, &out)) || (st = aten_tensor(ctx, op, args, ADDMM_MAT1, &a)) ||
      (st = aten_tensor(ctx, op, args, ADDMM_MAT2, &b)) || (st = af_scalar(ctx, op, args, ADDMM_BETA)) || (st = af_scalar(ctx, op, args, ADDMM_ALPHA)) ||
      (st = mm_check(ctx, op, a, b, out, 2)) || (st = af_f32(ctx, op, c, "self")))
    return st;
  return af_bcast(ctx, op, c, out);
}
et_status aten_addmm_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)nargs;
  const et_tensor *c;
  size_t cs[ET_MAX_DIM];
  et_tensor *const out = af_bcast_args(ctx, "aten::addmm.out", args, ADDMM_SELF, ADDMM_OUT, &c, cs);
  mm_job j;
  mm_job_of(&j, args[ADDMM_MAT1]->u.t, args[ADDMM_MAT2]->u.t, out, 2, 0);
  j.c = c->data, j.cm = cs[0], j.cn = cs[1];
  j.beta = (float)aten_scalar_get(args[ADDMM_BETA], NULL), j.alpha = (float)aten_scalar_get(args[ADDMM_ALPHA], NULL);
  mm_run(&j);
  return ET_OK;
}

/* linear(input [.., K], weight [N, K], bias? [N], out [.., N]): one row of out per row of input. */
ET_PREPARE et_status aten_linear_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::linear.out";
  et_tensor *x = NULL, *w = NULL, *b = NULL, *out = NULL;
  et_status st;
  if ((st = af_f32_self_out(ctx, op, args, nargs, 5, LINEAR_OUT, &x, "input", &out)) || (st = af_f32_arg(ctx, op, args, LINEAR_WEIGHT, "weight", &w)) ||
      (st = af_opt_f32_arg(ctx, op, args, LINEAR_BIAS, "bias", &b)))
    return st;
  if (x->dim < 1 || w->dim != 2 || w->sizes[1] != x->sizes[x->dim - 1])
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: weight must be [out_features, %d]", op, x->dim ? (int)x->sizes[x->dim - 1] : 0);
  int32_t want[ET_MAX_DIM];
  memcpy(want, x->sizes, sizeof want);
  want[x->dim - 1] = w->sizes[0];
  if ((st = af_shape(ctx, op, out, "out", x->dim, want))) return st;
  return b ? af_shape(ctx, op, b, "bias", 1, w->sizes) : ET_OK;
}
et_status aten_linear_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const x = args[LINEAR_INPUT]->u.t, *const w = args[LINEAR_WEIGHT]->u.t;
  const et_tensor *const b = af_opt_tensor_get(args[LINEAR_BIAS]);
  et_tensor *const out = args[LINEAR_OUT]->u.t;
  const uint8_t last = (uint8_t)(x->dim - 1);
  size_t xs[ET_MAX_DIM], ws[ET_MAX_DIM], os[ET_MAX_DIM], bs[ET_MAX_DIM] = {0};
  et_tensor_strides(x, xs);
  et_tensor_strides(w, ws);
  et_tensor_strides(out, os);
  if (b) et_tensor_strides(b, bs);
  /* the rows: every dim but the last; each is a [1, K] @ [K, N] product with the bias as c */
  af_iter it;
  af_iter_init(&it, last, x->sizes);
  af_iter_add(&it, xs, 0);
  af_iter_add(&it, os, 0);
  const size_t rows = et_tensor_numel(x) / (size_t)(x->sizes[last] ? x->sizes[last] : 1);
  for (size_t r = 0; r < (x->sizes[last] ? rows : 0); r++, af_iter_next(&it)) {
    const mm_job j = {(const float *)x->data + it.off[0], w->data, b ? b->data : NULL, (float *)out->data + it.off[1], 0, xs[last], ws[1],
                      ws[0], 0, bs[0], 0, os[last], 1, w->sizes[0], x->sizes[last], 1.0f, 1.0f};
    mm_run(&j);
  }
  if (x->sizes[last] == 0) { /* K = 0: the bias (or zeros) */
    af_iter_init(&it, out->dim, out->sizes);
    af_iter_add(&it, os, 0);
    for (size_t e = 0; e < et_tensor_numel(out); e++, af_iter_next(&it))
      ((float *)out->data)[it.off[0]] = b ? ((const float *)b->data)[(size_t)it.idx[last] * bs[0]] : 0.0f;
  }
  (void)ctx, (void)nargs;
  return ET_OK;
}

/* _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim, out): each input unsqueezed at its
 * expand dims to one rank T; out = the product of the three (broadcast) summed over sumdim. */
typedef struct {
  uint8_t T;
  int32_t sz[ET_MAX_DIM];          /* the broadcast size of each of the T dims */
  size_t st[3][ET_MAX_DIM];        /* each input's strides over the T dims (0: expanded or broadcast) */
  unsigned sum;                    /* sumdim mask */
} tri_geom;

static et_status tri_geom_make(et_kernel_ctx *ctx, const char *op, et_value **args, tri_geom *g) {
  memset(g, 0, sizeof *g);
  const et_tensor *t0 = args[TRI_I1]->u.t;
  g->T = (uint8_t)(t0->dim + args[TRI_EXPAND1]->u.list.len);
  if (g->T > ET_MAX_DIM) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: more than %d dims", op, ET_MAX_DIM);
  for (uint8_t d = 0; d < g->T; d++) g->sz[d] = 1;
  for (uint8_t j = 0; j < 3; j++) {
    const et_tensor *t = args[TRI_I1 + j]->u.t;
    const et_value *ex = args[TRI_EXPAND1 + j];
    unsigned em = 0;
    for (uint32_t i = 0; i < ex->u.list.len; i++) {
      const int64_t d = et_list_int(ex, i);
      if (d < 0 || d >= g->T || ((em >> d) & 1u)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: expand%u is not a set of dims below %u", op, (unsigned)j + 1, g->T);
      em |= 1u << d;
    }
    if (t->dim + ex->u.list.len != g->T) return et_fail(ctx, ET_E_INVALID_ARG, "%s: inputs do not expand to one rank", op);
    size_t s[ET_MAX_DIM];
    et_tensor_strides(t, s);
    for (uint8_t d = 0, k = 0; d < g->T; d++) {
      if ((em >> d) & 1u) continue;
      const int32_t n = t->sizes[k];
      if (n != 1 && g->sz[d] != 1 && g->sz[d] != n) return et_fail(ctx, ET_E_INVALID_ARG, "%s: input shapes do not broadcast", op);
      if (n != 1) g->sz[d] = n, g->st[j][d] = s[k];
      k++;
    }
  }
  for (uint32_t i = 0; i < args[TRI_SUMDIM]->u.list.len; i++) {
    const int64_t d = et_list_int(args[TRI_SUMDIM], i);
    if (d < 0 || d >= g->T) return et_fail(ctx, ET_E_INVALID_ARG, "%s: sumdim %lld out of range", op, (long long)d);
    g->sum |= 1u << d;
  }
  return ET_OK;
}
ET_PREPARE et_status aten_trilinear_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::_trilinear.out";
  et_tensor *out = NULL;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, 10)) || (st = af_f32_arg(ctx, op, args, TRI_OUT, "out", &out))) return st;
  for (uint32_t j = TRI_I1; j <= TRI_I3; j++) {
    et_tensor *t = NULL;
    if ((st = af_f32_arg(ctx, op, args, j, j == TRI_I1 ? "i1" : j == TRI_I2 ? "i2" : "i3", &t))) return st;
  }
  for (uint32_t j = TRI_EXPAND1; j <= TRI_SUMDIM; j++)
    if ((st = af_int_list(ctx, op, args, j, false, NULL))) return st;
  if ((st = aten_int(ctx, op, args, TRI_UNROLL_DIM, NULL))) return st; /* unroll_dim only tunes PyTorch's loop */
  tri_geom g;
  if ((st = tri_geom_make(ctx, op, args, &g))) return st;
  int32_t want[ET_MAX_DIM];
  uint8_t r = 0;
  for (uint8_t d = 0; d < g.T; d++)
    if (!((g.sum >> d) & 1u)) want[r++] = g.sz[d];
  return af_shape(ctx, op, out, "out", r, want);
}
et_status aten_trilinear_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  et_tensor *const out = args[TRI_OUT]->u.t;
  tri_geom g;
  (void)tri_geom_make(ctx, "aten::_trilinear.out", args, &g); /* checked at prepare */
  /* one walk over the T dims, kept dims first then summed ones: each run of rn steps is one output element */
  size_t os[ET_MAX_DIM], ost[ET_MAX_DIM] = {0}, s3[3][ET_MAX_DIM];
  int32_t sz[ET_MAX_DIM];
  et_tensor_strides(out, os);
  uint8_t k = 0, r = 0;
  size_t rn = 1;
  for (uint8_t pass = 0; pass < 2; pass++)
    for (uint8_t d = 0; d < g.T; d++) {
      const bool summed = (g.sum >> d) & 1u;
      if (summed != (pass == 1)) continue;
      sz[k] = g.sz[d];
      for (uint8_t j = 0; j < 3; j++) s3[j][k] = g.st[j][d];
      if (summed) rn *= (size_t)g.sz[d];
      else ost[k] = os[r++];
      k++;
    }
  af_iter it;
  af_iter_init(&it, g.T, sz);
  af_iter_add(&it, ost, 0);
  for (uint8_t j = 0; j < 3; j++) af_iter_add(&it, s3[j], 0);
  const float *p1 = args[TRI_I1]->u.t->data, *p2 = args[TRI_I2]->u.t->data, *p3 = args[TRI_I3]->u.t->data;
  float *po = out->data;
  const size_t kn = et_tensor_numel(out);
  if (rn == 0) memset(po, 0, kn * sizeof(float));
  for (size_t e = 0; e < (rn ? kn : 0); e++) {
    const size_t at = it.off[0];
    float acc = 0.0f;
    for (size_t i = 0; i < rn; i++, af_iter_next(&it)) acc += p1[it.off[1]] * p2[it.off[2]] * p3[it.off[3]];
    po[at] = acc;
  }
  (void)nargs;
  return ET_OK;
}
