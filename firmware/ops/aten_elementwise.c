/* Elementwise aten ops (float and integer, PyTorch broadcasting): add, sub,
 * mul, div, and the float activations relu, hardtanh, clamp, sigmoid, tanh.
 * Float outputs compute in float like PyTorch's CPU kernels; integer outputs
 * compute in int64 and wrap to the output type, as PyTorch does. */
#include "aten_util.h"

static bool is_float_dt(int dt) { return dt == ET_DT_FLOAT || dt == ET_DT_DOUBLE; }

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV } binop;

/* Argument slots (the operators' schemas, then ret): add/sub/mul/div .out and .Scalar_out (self, other[, alpha],
 * out): out is ATEN_OUT_SLOT(nargs); relu, sigmoid, tanh (self, out); hardtanh (self, min_val, max_val, out) and
 * clamp (self, min, max, out). */
enum { BIN_SELF, BIN_OTHER, BIN_ALPHA };
enum { UN_SELF, UN_OUT };
enum { BOUND_SELF, BOUND_MIN, BOUND_MAX, BOUND_OUT };

/* Prepare's checks of out = a (op) alpha*b. */
ET_PREPARE static et_status binary_check(et_kernel_ctx *ctx, const char *op, binop k, const et_tensor *a, const et_tensor *b, double bs,
                              double alpha, const et_tensor *out) {
  et_status st;
  size_t sa[ET_MAX_DIM], sb[ET_MAX_DIM] = {0};
  if ((st = aten_bcast_strides(ctx, op, a, out, sa))) return st;
  if (b && (st = aten_bcast_strides(ctx, op, b, out, sb))) return st;
  bool flt = is_float_dt(out->dtype);
  if (!flt && !aten_is_int_dt(out->dtype)) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: dtype %s not supported", op, et_dtype_name(out->dtype));
  if (!flt && (is_float_dt(a->dtype) || (b && is_float_dt(b->dtype))))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: float input with integer output %s", op, et_dtype_name(out->dtype));
  if (!flt && k == OP_DIV) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: integer output for true division", op);
  if (!flt && (alpha != (double)(int64_t)alpha || (!b && bs != (double)(int64_t)bs)))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: float scalar with integer tensors", op);
  return ET_OK;
}

/* out = a (op) alpha*b, with b either a tensor or the scalar `bs` (checked). */
static et_status binary(et_kernel_ctx *ctx, const char *op, binop k, const et_tensor *a, const et_tensor *b, double bs,
                        double alpha, et_tensor *out) {
  size_t sa[ET_MAX_DIM], sb[ET_MAX_DIM] = {0};
  (void)aten_bcast_strides(ctx, op, a, out, sa); /* checked at prepare: computes the strides */
  if (b) (void)aten_bcast_strides(ctx, op, b, out, sb);
  const bool flt = is_float_dt(out->dtype);
  size_t os[ET_MAX_DIM];
  et_tensor_strides(out, os);
  et_iter io, ia, ib;
  et_iter_custom(&io, out->dim, out->sizes, os, 0);
  et_iter_custom(&ia, out->dim, out->sizes, sa, 0);
  et_iter_custom(&ib, out->dim, out->sizes, sb, 0);
  size_t n = et_tensor_numel(out);
  if (out->dtype == ET_DT_FLOAT && a->dtype == ET_DT_FLOAT && (!b || b->dtype == ET_DT_FLOAT)) {
    const float *pa = a->data, *pb = b ? b->data : NULL;
    float *po = out->data, fal = (float)alpha, fbs = (float)bs;
    for (size_t e = 0; e < n; e++) {
      float x = pa[ia.off], y = pb ? pb[ib.off] : fbs, r;
      switch (k) {
        case OP_ADD: r = fal == 1.0f ? x + y : x + fal * y; break;
        case OP_SUB: r = fal == 1.0f ? x - y : x - fal * y; break;
        case OP_MUL: r = x * y; break;
        default: r = x / y; break;
      }
      po[io.off] = r;
      et_iter_next(&io), et_iter_next(&ia), et_iter_next(&ib);
    }
    return ET_OK;
  }
  for (size_t e = 0; e < n; e++) {
    if (flt) {
      double x = et_elem_as_double(a->dtype, a->data, ia.off);
      double y = b ? et_elem_as_double(b->dtype, b->data, ib.off) : bs, r;
      switch (k) {
        case OP_ADD: r = x + alpha * y; break;
        case OP_SUB: r = x - alpha * y; break;
        case OP_MUL: r = x * y; break;
        default: r = x / y; break;
      }
      et_elem_from_double(out->dtype, out->data, io.off, r);
    } else {
      /* unsigned arithmetic: wraps like PyTorch's integer kernels, no UB */
      uint64_t x = (uint64_t)aten_i64(a->dtype, a->data, ia.off);
      uint64_t y = b ? (uint64_t)aten_i64(b->dtype, b->data, ib.off) : (uint64_t)(int64_t)bs, al = (uint64_t)(int64_t)alpha, r;
      switch (k) {
        case OP_ADD: r = x + al * y; break;
        case OP_SUB: r = x - al * y; break;
        default: r = x * y; break;
      }
      aten_store_i64(out->dtype, out->data, io.off, (int64_t)r);
    }
    et_iter_next(&io), et_iter_next(&ia), et_iter_next(&ib);
  }
  return ET_OK;
}

/* Tensor-Tensor: [self, other, (alpha,) out, ret]; Tensor-Scalar: [self, other, (alpha,) out, ret]. */
ET_PREPARE static et_status binary_prepare(et_kernel_ctx *ctx, const char *op, binop k, bool has_alpha, bool scalar_other,
                                et_value **args, uint32_t nargs) {
  et_tensor *a = NULL, *b = NULL, *out = NULL;
  double alpha = 1, bs = 0;
  et_status st;
  uint32_t want = has_alpha ? 5 : 4;
  if ((st = aten_self_out(ctx, op, args, nargs, want, ATEN_OUT_SLOT(want), &a, &out))) return st;
  if (scalar_other) st = aten_scalar(ctx, op, args, BIN_OTHER, &bs, NULL);
  else st = aten_tensor(ctx, op, args, BIN_OTHER, &b);
  if (st) return st;
  if (has_alpha && (st = aten_scalar(ctx, op, args, BIN_ALPHA, &alpha, NULL))) return st;
  return binary_check(ctx, op, k, a, b, bs, alpha, out);
}

static et_status binary_adapter(et_kernel_ctx *ctx, const char *op, binop k, bool has_alpha, bool scalar_other,
                                et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[BIN_SELF]->u.t, *const b = scalar_other ? NULL : args[BIN_OTHER]->u.t;
  const double bs = scalar_other ? aten_scalar_get(args[BIN_OTHER], NULL) : 0;
  const double alpha = has_alpha ? aten_scalar_get(args[BIN_ALPHA], NULL) : 1;
  return binary(ctx, op, k, a, b, bs, alpha, args[ATEN_OUT_SLOT(nargs)]->u.t);
}

/* Each overload's entry points (named in aten_ops.def): adapter fn, prepare fn##_prepare. */
#define BINARY_OP(fn, name, k, has_alpha, scalar_other) \
  OP_ENTRIES(fn, binary_adapter, binary_prepare, name, k, has_alpha, scalar_other)
BINARY_OP(aten_add_out, "aten::add.out", OP_ADD, true, false)
BINARY_OP(aten_sub_out, "aten::sub.out", OP_SUB, true, false)
BINARY_OP(aten_mul_out, "aten::mul.out", OP_MUL, false, false)
BINARY_OP(aten_div_out, "aten::div.out", OP_DIV, false, false)
BINARY_OP(aten_add_scalar_out, "aten::add.Scalar_out", OP_ADD, true, true)
BINARY_OP(aten_sub_scalar_out, "aten::sub.Scalar_out", OP_SUB, true, true)
BINARY_OP(aten_mul_scalar_out, "aten::mul.Scalar_out", OP_MUL, false, true)
BINARY_OP(aten_div_scalar_out, "aten::div.Scalar_out", OP_DIV, false, true)

typedef enum { U_CLAMP, U_SIGMOID, U_TANH } unop;

/* Prepare's checks of out = f(self). */
ET_PREPARE static et_status unary_check(et_kernel_ctx *ctx, const char *op, unop k, const et_tensor *a, const et_tensor *out) {
  if (!aten_same_shape(a, out)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: input and output shapes differ", op);
  if (a->dtype != out->dtype) return et_fail(ctx, ET_E_INVALID_ARG, "%s: input and output dtypes differ", op);
  if (k != U_CLAMP && !is_float_dt(out->dtype))
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: dtype %s not supported (float only)", op, et_dtype_name(out->dtype));
  if (!is_float_dt(out->dtype) && !aten_is_int_dt(out->dtype))
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: dtype %s not supported", op, et_dtype_name(out->dtype));
  return ET_OK;
}

/* relu, sigmoid, tanh: (self, out). */
ET_PREPARE static et_status unary_prepare(et_kernel_ctx *ctx, const char *op, unop k, et_value **args, uint32_t nargs) {
  et_tensor *a = NULL, *out = NULL;
  et_status st;
  if ((st = aten_self_out(ctx, op, args, nargs, 3, UN_OUT, &a, &out))) return st;
  return unary_check(ctx, op, k, a, out);
}

/* out = f(self) elementwise; same shape, any dim orders (checked). */
static et_status unary(unop k, const et_tensor *a, et_tensor *out, double lo, bool has_lo, double hi, bool has_hi) {
  et_iter io, ia;
  et_iter_init(&io, out);
  et_iter_init(&ia, a);
  size_t n = et_tensor_numel(out);
  for (size_t e = 0; e < n; e++) {
    double x = et_elem_as_double(a->dtype, a->data, ia.off), r = x;
    if (out->dtype == ET_DT_FLOAT) {
      float f = (float)x, fr = f;
      switch (k) {
        case U_CLAMP:
          /* NaN propagates, as in PyTorch */
          if (has_lo && fr < (float)lo) fr = (float)lo;
          if (has_hi && fr > (float)hi) fr = (float)hi;
          break;
        case U_SIGMOID: fr = 1.0f / (1.0f + expf(-f)); break;
        default: fr = tanhf(f); break;
      }
      r = fr;
    } else {
      switch (k) {
        case U_CLAMP:
          if (has_lo && r < lo) r = lo;
          if (has_hi && r > hi) r = hi;
          break;
        case U_SIGMOID: r = 1.0 / (1.0 + exp(-x)); break;
        default: r = tanh(x); break;
      }
    }
    aten_store(out->dtype, out->data, io.off, r);
    et_iter_next(&io), et_iter_next(&ia);
  }
  return ET_OK;
}

OP_PREPARE(aten_relu_out, unary_prepare, "aten::relu", U_CLAMP)
et_status aten_relu_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  return unary(U_CLAMP, args[UN_SELF]->u.t, args[UN_OUT]->u.t, 0, true, 0, false);
}

/* hardtanh and clamp: (self, lo, hi, out); hardtanh's bounds are required, clamp's may be None */
ET_PREPARE static et_status bounded_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs, const char *op,
                                            bool optional_bounds) {
  et_tensor *a = NULL, *out = NULL;
  double lo = 0, hi = 0;
  bool has_lo, has_hi;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, 5)) || (st = aten_tensor(ctx, op, args, BOUND_SELF, &a)) ||
      (st = aten_scalar(ctx, op, args, BOUND_MIN, &lo, optional_bounds ? &has_lo : NULL)) ||
      (st = aten_scalar(ctx, op, args, BOUND_MAX, &hi, optional_bounds ? &has_hi : NULL)) ||
      (st = aten_tensor(ctx, op, args, BOUND_OUT, &out)))
    return st;
  return unary_check(ctx, op, U_CLAMP, a, out);
}
/* A bound that is None is absent; hardtanh's prepare refused None, so its
 * bounds are always present. */
static et_status bounded(et_value **args) {
  bool has_lo, has_hi;
  const double lo = aten_scalar_get(args[BOUND_MIN], &has_lo), hi = aten_scalar_get(args[BOUND_MAX], &has_hi);
  return unary(U_CLAMP, args[BOUND_SELF]->u.t, args[BOUND_OUT]->u.t, lo, has_lo, hi, has_hi);
}

ET_PREPARE et_status aten_hardtanh_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  return bounded_prepare(ctx, args, nargs, "aten::hardtanh", false);
}
et_status aten_hardtanh_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return bounded(args); }

ET_PREPARE et_status aten_clamp_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  return bounded_prepare(ctx, args, nargs, "aten::clamp", true);
}
et_status aten_clamp_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return bounded(args); }

OP_PREPARE(aten_sigmoid_out, unary_prepare, "aten::sigmoid", U_SIGMOID)
et_status aten_sigmoid_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  return unary(U_SIGMOID, args[UN_SELF]->u.t, args[UN_OUT]->u.t, 0, false, 0, false);
}

OP_PREPARE(aten_tanh_out, unary_prepare, "aten::tanh", U_TANH)
et_status aten_tanh_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  return unary(U_TANH, args[UN_SELF]->u.t, args[UN_OUT]->u.t, 0, false, 0, false);
}

