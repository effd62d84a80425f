/* Elementwise unary aten ops in float32, as PyTorch's CPU kernels compute
 * them (float math: expf, log1pf, erff, ...): abs, neg, exp, expm1, log,
 * log2, log10, log1p, sqrt, rsqrt, reciprocal, ceil, floor, round (half to
 * even; also with decimals), trunc, sign, erf, gelu (none, tanh), elu,
 * leaky_relu, hardswish, hardsigmoid, silu, softplus, threshold, pow with a
 * scalar exponent, fmod and remainder by a scalar, glu; and on integers and
 * bools too: abs, neg, sign, ceil, floor, round, trunc, fmod and remainder by an
 * integer (exact), bitwise_not and logical_not. Any dim order on either side. */
#include "aten_float.h"

typedef enum {
  U_ABS, U_NEG, U_EXP, U_EXPM1, U_LOG, U_LOG2, U_LOG10, U_LOG1P, U_SQRT, U_RSQRT, U_RECIP, U_CEIL, U_FLOOR, U_ROUND,
  U_TRUNC, U_SIGN, U_ERF, U_GELU, U_ELU, U_LEAKY, U_HARDSWISH, U_HARDSIGMOID, U_SILU, U_SOFTPLUS, U_THRESHOLD, U_POW,
  U_ROUND_DEC, U_FMOD, U_REM, U_BNOT, U_LNOT
} ukind;

/* What an op takes besides self and out: scalar parameters (U_GELU: its
 * approximate string, U_ROUND_DEC: an int), and which dtypes. */
typedef enum { DT_F32, DT_F32_INT, DT_INT, DT_ANY } udtypes;
typedef struct {
  uint8_t nparams, dtypes;
} uinfo;
static const uinfo k_info[] = {
    [U_ABS] = {0, DT_F32_INT}, [U_NEG] = {0, DT_F32_INT}, [U_EXP] = {0, DT_F32}, [U_EXPM1] = {0, DT_F32},
    [U_LOG] = {0, DT_F32}, [U_LOG2] = {0, DT_F32}, [U_LOG10] = {0, DT_F32}, [U_LOG1P] = {0, DT_F32},
    [U_SQRT] = {0, DT_F32}, [U_RSQRT] = {0, DT_F32}, [U_RECIP] = {0, DT_F32}, [U_CEIL] = {0, DT_F32_INT},
    [U_FLOOR] = {0, DT_F32_INT}, [U_ROUND] = {0, DT_F32_INT}, [U_TRUNC] = {0, DT_F32_INT}, [U_SIGN] = {0, DT_F32_INT},
    [U_ERF] = {0, DT_F32}, [U_GELU] = {1, DT_F32}, [U_ELU] = {3, DT_F32}, [U_LEAKY] = {1, DT_F32},
    [U_HARDSWISH] = {0, DT_F32}, [U_HARDSIGMOID] = {0, DT_F32}, [U_SILU] = {0, DT_F32}, [U_SOFTPLUS] = {2, DT_F32},
    [U_THRESHOLD] = {2, DT_F32}, [U_POW] = {1, DT_F32}, [U_ROUND_DEC] = {1, DT_F32}, [U_FMOD] = {1, DT_F32_INT},
    [U_REM] = {1, DT_F32_INT}, [U_BNOT] = {0, DT_INT}, [U_LNOT] = {0, DT_ANY},
};

/* Argument slots: (self, param_0 .. param_{nparams-1}, out, ret): the parameters follow self (gelu: approximate,
 * round.decimals_out: decimals, elu: alpha, scale, input_scale, ...); out is ATEN_OUT_SLOT(nargs). */
enum { UN_SELF, UN_PARAM0 };
#define UN_PARAM(i) ((uint32_t)UN_PARAM0 + (uint32_t)(i))
enum { GLU_SELF, GLU_DIM, GLU_OUT }; /* glu(self, dim, out) */

/* x ** e for a float32 tensor, with PyTorch's exact forms of the common exponents. */
static inline float pow_f(float x, float e) {
  if (e == 2.0f) return x * x;
  if (e == 3.0f) return x * x * x;
  if (e == 0.5f) return sqrtf(x);
  if (e == -0.5f) return 1.0f / sqrtf(x);
  if (e == -1.0f) return 1.0f / x;
  if (e == -2.0f) return 1.0f / (x * x);
  if (e == 1.0f) return x;
  if (e == 0.0f) return 1.0f;
  return powf(x, e);
}
/* round(x, decimals): p[0] = 10^|decimals|, p[1] < 0 for negative decimals. */
static inline float round_dec_f(float x, const float *p) {
  return p[1] < 0 ? nearbyintf(x / p[0]) * p[0] : nearbyintf(x * p[0]) / p[0];
}
static inline float gelu_f(float x, float tanh_form) {
  if (tanh_form != 0) {
    const float beta = (float)(1.4142135623730951 * 1.1283791670955126 * 0.5), kappa = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(beta * (x + kappa * x * x * x)));
  }
  return x * 0.5f * (1.0f + erff(x * (float)0.70710678118654752));
}
static inline float hsig_f(float x) { return fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f; }

/* The float32 forms (x: the input element, p: the op's parameters). */
#define UNARY_F32(X)                                                       \
  X(U_ABS, fabsf(x))                                                       \
  X(U_NEG, -x)                                                             \
  X(U_EXP, expf(x))                                                        \
  X(U_EXPM1, expm1f(x))                                                    \
  X(U_LOG, logf(x))                                                        \
  X(U_LOG2, log2f(x))                                                      \
  X(U_LOG10, log10f(x))                                                    \
  X(U_LOG1P, log1pf(x))                                                    \
  X(U_SQRT, sqrtf(x))                                                      \
  X(U_RSQRT, 1.0f / sqrtf(x))                                              \
  X(U_RECIP, 1.0f / x)                                                     \
  X(U_CEIL, ceilf(x))                                                      \
  X(U_FLOOR, floorf(x))                                                    \
  X(U_ROUND, nearbyintf(x))                                                \
  X(U_TRUNC, truncf(x))                                                    \
  X(U_SIGN, (float)((0.0f < x) - (x < 0.0f)))                              \
  X(U_ERF, erff(x))                                                        \
  X(U_GELU, gelu_f(x, p[0]))                                               \
  X(U_ELU, x > 0 ? x * p[1] : expm1f(x * p[2]) * p[0])                     \
  X(U_LEAKY, x > 0 ? x : x * p[0])                                         \
  X(U_HARDSWISH, x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f)            \
  X(U_HARDSIGMOID, hsig_f(x))                                              \
  X(U_SILU, x / (1.0f + expf(-x)))                                         \
  X(U_SOFTPLUS, x * p[0] > p[1] ? x : log1pf(expf(x * p[0])) / p[0])       \
  X(U_THRESHOLD, x <= p[0] ? p[1] : x)                                     \
  X(U_POW, pow_f(x, p[0]))                                                 \
  X(U_ROUND_DEC, round_dec_f(x, p))                                        \
  X(U_FMOD, fmodf(x, p[0]))                                                \
  X(U_REM, af_rem_f(x, p[0]))

#define U_CASE_ONE(K, EXPR) \
  case K: return (EXPR);
static inline __attribute__((always_inline)) float unary_one(ukind k, float x, const float *p) {
  switch (k) {
    UNARY_F32(U_CASE_ONE)
    default: return x;
  }
}
#undef U_CASE_ONE

/* The op's parameters as float32, as PyTorch converts its scalars. Inlined into each op's entry point
 * with k constant, as unary_eval is: an op's image holds its own math only (exp, erf, pow, ...). */
static inline __attribute__((always_inline)) void unary_params(ukind k, et_value **args, float *p) {
  p[0] = p[1] = p[2] = 0;
  for (uint8_t i = 0; i < k_info[k].nparams && k != U_GELU; i++) p[i] = (float)aten_scalar_get(args[UN_PARAM(i)], NULL);
  switch (k) {
    case U_GELU: p[0] = af_word_is(args[UN_PARAM(0)], "tanh") ? 1.0f : 0.0f; break;
    case U_ELU: /* (alpha, scale, input_scale) -> negative coefficient, scale, input_scale */
      p[0] = p[0] * p[1];
      break;
    case U_ROUND_DEC: { /* 10^|decimals| (prepare: at most 30), in double like PyTorch's std::pow */
      const int64_t d = args[UN_PARAM(0)]->u.i;
      double t = 1.0;
      for (int64_t i = 0; i < (d < 0 ? -d : d); i++) t *= 10.0;
      p[1] = d < 0 ? -1.0f : 1.0f;
      p[0] = (float)t;
      break;
    }
    default: break;
  }
}

ET_PREPARE static et_status unary_prepare(et_kernel_ctx *ctx, const char *op, ukind k, et_value **args, uint32_t nargs) {
  const uinfo in = k_info[k];
  et_tensor *a = NULL, *out = NULL;
  et_status st;
  const uint32_t want = UN_PARAM(in.nparams) + 2u;
  if ((st = aten_self_out(ctx, op, args, nargs, want, ATEN_OUT_SLOT(want), &a, &out))) return st;
  for (uint32_t i = UN_PARAM(0); i < UN_PARAM(in.nparams); i++) {
    if (k == U_GELU) {
      int w;
      st = af_word(ctx, op, args, i, "none", "tanh", false, &w);
    } else if (k == U_ROUND_DEC) {
      int64_t d = 0;
      if ((st = aten_int(ctx, op, args, i, &d)) == ET_OK && (d < -30 || d > 30))
        st = et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: decimals %lld outside [-30, 30]", op, (long long)d);
    } else {
      st = af_scalar(ctx, op, args, i);
    }
    if (st) return st;
  }
  if ((st = af_same_shape(ctx, op, out, "out", a))) return st;
  switch (in.dtypes) {
    case DT_F32:
      if ((st = af_f32(ctx, op, a, "self")) || (st = af_f32(ctx, op, out, "out"))) return st;
      break;
    case DT_F32_INT:
    case DT_INT: {
      const bool ints = in.dtypes == DT_INT;
      const char *want = ints ? "an integer or bool" : "float32, an integer or bool";
      if ((st = af_dtype(ctx, op, a, "self", aten_is_int_dt(a->dtype) || (!ints && a->dtype == ET_DT_FLOAT), want))) return st;
      if (out->dtype != a->dtype) return et_fail(ctx, ET_E_INVALID_ARG, "%s: input and output dtypes differ", op);
      if ((k == U_FMOD || k == U_REM) && a->dtype != ET_DT_FLOAT) { /* an integer divisor, not 0 (torch raises) */
        const double d = aten_scalar_get(args[UN_PARAM(0)], NULL);
        if (d != (double)(int64_t)d || d == 0)
          return et_fail(ctx, ET_E_INVALID_ARG, "%s: an integer tensor needs a nonzero integer divisor", op);
      }
      break;
    }
    default: { /* logical_not: any input, a bool, integer or float32 output */
      const char *want = "float32, an integer or bool";
      if ((st = af_dtype(ctx, op, a, "self", aten_is_int_dt(a->dtype) || a->dtype == ET_DT_FLOAT, want)) ||
          (st = af_dtype(ctx, op, out, "out", aten_is_int_dt(out->dtype) || out->dtype == ET_DT_FLOAT, want)))
        return st;
      break;
    }
  }
  return ET_OK;
}

/* Integer and bool elements (and logical_not of anything): exact, in int64. */
static __attribute__((noinline)) void unary_int(ukind k, const et_tensor *a, et_tensor *out, int64_t d) {
  af_iter it;
  af_iter_init(&it, out->dim, out->sizes);
  const uint8_t io = af_iter_tensor(&it, out), ia = af_iter_tensor(&it, a);
  const size_t n = et_tensor_numel(out);
  for (size_t e = 0; e < n; e++, af_iter_next(&it)) {
    if (k == U_LNOT) {
      const bool z = a->dtype == ET_DT_FLOAT ? ((const float *)a->data)[it.off[ia]] == 0.0f : aten_i64(a->dtype, a->data, it.off[ia]) == 0;
      if (out->dtype == ET_DT_FLOAT) ((float *)out->data)[it.off[io]] = z ? 1.0f : 0.0f;
      else aten_store_i64(out->dtype, out->data, it.off[io], z);
      continue;
    }
    const int64_t v = aten_i64(a->dtype, a->data, it.off[ia]);
    uint64_t r = (uint64_t)v;
    switch (k) {
      case U_ABS: r = v < 0 ? 0u - (uint64_t)v : (uint64_t)v; break;
      case U_NEG: r = 0u - (uint64_t)v; break;
      case U_SIGN: r = (uint64_t)(int64_t)((v > 0) - (v < 0)); break;
      case U_BNOT: r = a->dtype == ET_DT_BOOL ? (uint64_t)(v == 0) : ~(uint64_t)v; break;
      case U_FMOD: /* C's % truncates as fmod does; remainder takes the divisor's sign (d != 0: prepare) */
      case U_REM: {
        int64_t m = d == -1 ? 0 : v % d;
        if (k == U_REM && m != 0 && ((m < 0) != (d < 0))) m += d;
        r = (uint64_t)m;
        break;
      }
      default: break; /* ceil, floor, round, trunc of an integer: itself */
    }
    aten_store_i64(out->dtype, out->data, it.off[io], (int64_t)r);
  }
}

static inline __attribute__((always_inline)) et_status unary_eval(et_kernel_ctx *ctx, const char *op, ukind k, et_value **args, uint32_t nargs) {
  (void)ctx, (void)op;
  const et_tensor *const a = args[UN_SELF]->u.t;
  et_tensor *const out = args[ATEN_OUT_SLOT(nargs)]->u.t;
  if (a->dtype != ET_DT_FLOAT || out->dtype != ET_DT_FLOAT) {
    unary_int(k, a, out, k == U_FMOD || k == U_REM ? (int64_t)aten_scalar_get(args[UN_PARAM(0)], NULL) : 0);
    return ET_OK;
  }
  float p[3];
  unary_params(k, args, p);
  const float *pa = a->data;
  float *po = out->data;
  const size_t n = et_tensor_numel(out);
  if (et_same_dim_order(a, out)) { /* one loop per op over the whole buffer */
#define U_CASE_LOOP(K, EXPR)                                \
  case K:                                                   \
    for (size_t i = 0; i < n; i++) {                        \
      const float x = pa[i];                                \
      po[i] = (EXPR);                                       \
    }                                                       \
    break;
    switch (k) {
      UNARY_F32(U_CASE_LOOP)
      default: break;
    }
#undef U_CASE_LOOP
    return ET_OK;
  }
  af_iter it;
  af_iter_init(&it, out->dim, out->sizes);
  const uint8_t io = af_iter_tensor(&it, out), ia = af_iter_tensor(&it, a);
  for (size_t e = 0; e < n; e++, af_iter_next(&it)) po[it.off[io]] = unary_one(k, pa[it.off[ia]], p);
  return ET_OK;
}

/* Each overload's entry points (named in aten_float_ops.def): eval fn, prepare fn##_prepare. */
#define UNARY_OP(fn, name, k) OP_ENTRIES(fn, unary_eval, unary_prepare, name, k)
UNARY_OP(aten_abs_out, "aten::abs.out", U_ABS)
UNARY_OP(aten_neg_out, "aten::neg.out", U_NEG)
UNARY_OP(aten_exp_out, "aten::exp.out", U_EXP)
UNARY_OP(aten_expm1_out, "aten::expm1.out", U_EXPM1)
UNARY_OP(aten_log_out, "aten::log.out", U_LOG)
UNARY_OP(aten_log2_out, "aten::log2.out", U_LOG2)
UNARY_OP(aten_log10_out, "aten::log10.out", U_LOG10)
UNARY_OP(aten_log1p_out, "aten::log1p.out", U_LOG1P)
UNARY_OP(aten_sqrt_out, "aten::sqrt.out", U_SQRT)
UNARY_OP(aten_rsqrt_out, "aten::rsqrt.out", U_RSQRT)
UNARY_OP(aten_reciprocal_out, "aten::reciprocal.out", U_RECIP)
UNARY_OP(aten_ceil_out, "aten::ceil.out", U_CEIL)
UNARY_OP(aten_floor_out, "aten::floor.out", U_FLOOR)
UNARY_OP(aten_round_out, "aten::round.out", U_ROUND)
UNARY_OP(aten_round_decimals_out, "aten::round.decimals_out", U_ROUND_DEC)
UNARY_OP(aten_trunc_out, "aten::trunc.out", U_TRUNC)
UNARY_OP(aten_sign_out, "aten::sign.out", U_SIGN)
UNARY_OP(aten_erf_out, "aten::erf.out", U_ERF)
UNARY_OP(aten_gelu_out, "aten::gelu.out", U_GELU)
UNARY_OP(aten_elu_out, "aten::elu.out", U_ELU)
UNARY_OP(aten_leaky_relu_out, "aten::leaky_relu.out", U_LEAKY)
UNARY_OP(aten_hardswish_out, "aten::hardswish.out", U_HARDSWISH)
UNARY_OP(aten_hardsigmoid_out, "aten::hardsigmoid.out", U_HARDSIGMOID)
UNARY_OP(aten_silu_out, "aten::silu.out", U_SILU)
UNARY_OP(aten_softplus_out, "aten::softplus.out", U_SOFTPLUS)
UNARY_OP(aten_threshold_out, "aten::threshold.out", U_THRESHOLD)
UNARY_OP(aten_pow_tensor_scalar_out, "aten::pow.Tensor_Scalar_out", U_POW)
UNARY_OP(aten_fmod_scalar_out, "aten::fmod.Scalar_out", U_FMOD)
UNARY_OP(aten_remainder_scalar_out, "aten::remainder.Scalar_out", U_REM)
UNARY_OP(aten_bitwise_not_out, "aten::bitwise_not.out", U_BNOT)
UNARY_OP(aten_logical_not_out, "aten::logical_not.out", U_LNOT)

/* glu(self, dim, out): the first half along dim times the sigmoid of the second. */
ET_PREPARE et_status aten_glu_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::glu.out";
  et_tensor *a = NULL, *out = NULL;
  uint8_t dim = 0;
  et_status st;
  if ((st = aten_self_dim_out(ctx, op, args, nargs, 4, GLU_DIM, GLU_OUT, &a, &out, &dim)) || (st = af_f32(ctx, op, a, "self")) ||
      (st = af_f32(ctx, op, out, "out")))
    return st;
  if (a->dim == 0 || a->sizes[dim] % 2 != 0)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dim %u has odd size %d", op, dim, a->dim ? (int)a->sizes[dim] : 0);
  int32_t want[ET_MAX_DIM];
  memcpy(want, a->sizes, sizeof want);
  want[dim] /= 2;
  return af_shape(ctx, op, out, "out", a->dim, want);
}
et_status aten_glu_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[GLU_SELF]->u.t;
  et_tensor *const out = args[GLU_OUT]->u.t;
  const uint8_t dim = aten_dim_get(args[GLU_DIM]->u.i, a->dim);
  size_t as[ET_MAX_DIM];
  et_tensor_strides(a, as);
  af_iter it;
  af_iter_init(&it, out->dim, out->sizes);
  const uint8_t io = af_iter_tensor(&it, out), ia = af_iter_add(&it, as, 0);
  const size_t half = (size_t)out->sizes[dim] * as[dim], n = et_tensor_numel(out);
  const float *pa = a->data;
  float *po = out->data;
  for (size_t e = 0; e < n; e++, af_iter_next(&it)) {
    const float x = pa[it.off[ia]], g = pa[it.off[ia] + half];
    po[it.off[io]] = x * (1.0f / (1.0f + expf(-g)));
  }
  return ET_OK;
}
