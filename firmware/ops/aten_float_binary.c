/* Elementwise aten ops of two or three operands with PyTorch broadcasting:
 * maximum, minimum, div with a rounding mode (floor_divide), pow (tensor or
 * scalar base), atan2, fmod, remainder; the comparisons gt,
 * ge, lt, le, eq, ne (tensor or scalar other, any output dtype: bool as a
 * rule); logical_and/or/xor; bitwise_and/or/xor; where(condition, self,
 * other) and clamp with tensor bounds. Float outputs compute in float32 as
 * PyTorch's CPU kernels do; integer outputs and comparisons of integers are
 * exact (int64). Any dim order on every operand. */
#include "aten_float.h"

typedef enum {
  B_MAX, B_MIN, B_DIV_TRUE, B_DIV_TRUNC, B_DIV_FLOOR, B_FMOD, B_REM, /* float32 or integer output */
  B_POW, B_ATAN2,                                                    /* float32 only */
  B_GT, B_GE, B_LT, B_LE, B_EQ, B_NE,                                /* comparisons */
  B_LAND, B_LOR, B_LXOR,                                             /* logical */
  B_BAND, B_BOR, B_BXOR                                              /* bitwise, integers and bools */
} bkind;

/* Argument slots (the operators' schemas). The two-operand overloads are (self, other[, rounding_mode], out, ret):
 * out is ATEN_OUT_SLOT(nargs), counted from the end. */
enum { BIN_SELF, BIN_OTHER, BIN_ROUNDING_MODE };
enum { WHERE_CONDITION, WHERE_SELF, WHERE_OTHER, WHERE_OUT };
enum { CLAMPT_SELF, CLAMPT_MIN, CLAMPT_MAX, CLAMPT_OUT };

static inline bool is_cmp(bkind k) { return k >= B_GT && k <= B_NE; }
static inline bool is_logic(bkind k) { return k >= B_LAND && k <= B_LXOR; }
static inline bool is_bitwise(bkind k) { return k >= B_BAND; }

/* One operand: a tensor, or a scalar (t NULL) broadcast everywhere. */
typedef struct {
  const et_tensor *t;
  double s;
} operand;

static inline operand operand_of(const et_value *v) {
  operand o = {NULL, 0};
  if (v->tag == ET_TAG_TENSOR) o.t = v->u.t;
  else o.s = aten_scalar_get(v, NULL);
  return o;
}
static inline bool operand_f32(const operand *o) { return o->t ? o->t->dtype == ET_DT_FLOAT : o->s != (double)(int64_t)o->s; }
static inline float get_f(const operand *o, size_t off) {
  if (o->t == NULL) return (float)o->s;
  return o->t->dtype == ET_DT_FLOAT ? ((const float *)o->t->data)[off] : (float)aten_i64(o->t->dtype, o->t->data, off);
}
static inline int64_t get_i(const operand *o, size_t off) {
  return o->t ? aten_i64(o->t->dtype, o->t->data, off) : (int64_t)o->s;
}

/* Comparisons run in float32 when either side is float32 (a non-integral
 * scalar promotes integers to float32, as in PyTorch), else in int64; the
 * arithmetic ops in the output's type. */
static inline bool float_math(bkind k, const operand *a, const operand *b, const et_tensor *out) {
  if (is_cmp(k)) return operand_f32(a) || operand_f32(b);
  return !is_bitwise(k) && out->dtype == ET_DT_FLOAT;
}

/* floor division as PyTorch computes it for floats (div_floor_floating). */
static inline float div_floor_f(float a, float b) {
  if (b == 0) return a / b;
  const float mod = fmodf(a, b);
  float div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1.0f;
  if (div == 0) return copysignf(0.0f, a / b);
  float fl = floorf(div);
  if (div - fl > 0.5f) fl += 1.0f;
  return fl;
}

static inline float arith_f(bkind k, float x, float y) {
  switch (k) {
    case B_MAX: return (x != x || y != y) ? NAN : (x > y ? x : y);
    case B_MIN: return (x != x || y != y) ? NAN : (x < y ? x : y);
    case B_DIV_TRUE: return x / y;
    case B_DIV_TRUNC: return truncf(x / y);
    case B_DIV_FLOOR: return div_floor_f(x, y);
    case B_FMOD: return fmodf(x, y);
    case B_REM: return af_rem_f(x, y);
    case B_POW: return powf(x, y);
    default: return atan2f(x, y);
  }
}
/* A comparison from the operands' order (all false for a NaN: only ne holds). */
static inline bool cmp_of(bkind k, bool lt, bool eq, bool gt) {
  switch (k) {
    case B_GT: return gt;
    case B_GE: return gt || eq;
    case B_LT: return lt;
    case B_LE: return lt || eq;
    case B_EQ: return eq;
    default: return !eq;
  }
}
static inline bool cmp_f(bkind k, float x, float y) { return cmp_of(k, x < y, x == y, x > y); }
static inline bool cmp_i(bkind k, int64_t x, int64_t y) { return cmp_of(k, x < y, x == y, x > y); }
/* Integer arithmetic (exact, wrapping; a zero divisor was refused by the caller). */
static inline int64_t arith_i(bkind k, int64_t x, int64_t y) {
  switch (k) {
    case B_MAX: return x > y ? x : y;
    case B_MIN: return x < y ? x : y;
    case B_BAND: return x & y;
    case B_BOR: return x | y;
    case B_BXOR: return x ^ y;
    default: break;
  }
  if (y == -1) return (int64_t)(0u - (uint64_t)x); /* x / -1, without INT64_MIN / -1 */
  const int64_t q = x / y, r = x - q * y;
  const bool adjust = r != 0 && ((r < 0) != (y < 0));
  switch (k) {
    case B_DIV_TRUNC: return q;
    case B_DIV_FLOOR: return adjust ? q - 1 : q;
    case B_FMOD: return r;
    default: return adjust ? r + y : r; /* B_REM */
  }
}
static inline void store_f(et_tensor *out, size_t off, float v) {
  if (out->dtype == ET_DT_FLOAT) ((float *)out->data)[off] = v;
  else aten_store(out->dtype, out->data, off, v);
}

/* t (NULL: a scalar) has out's shape and memory layout: element i of one is element i of the other. */
static inline bool same_layout(const et_tensor *t, const et_tensor *out) {
  return t == NULL || (aten_same_shape(t, out) && et_same_dim_order(t, out));
}

/* An iterator over out with slots 0 (out), 1 (a) and 2 (b), a scalar operand at stride 0. */
static void bcast_iter(et_kernel_ctx *ctx, const char *op, const operand *a, const operand *b, et_tensor *out, af_iter *it) {
  size_t sa[ET_MAX_DIM] = {0}, sb[ET_MAX_DIM] = {0};
  if (a->t) af_bcast_get(ctx, op, a->t, out, sa); /* checked at prepare */
  if (b->t) af_bcast_get(ctx, op, b->t, out, sb);
  af_iter_init(it, out->dim, out->sizes);
  (void)af_iter_tensor(it, out);
  (void)af_iter_add(it, sa, 0);
  (void)af_iter_add(it, sb, 0);
}

/* Float32 arithmetic: every tensor operand is float32 (prepare), a scalar one is used as float. Inlined into
 * each op's entry point with k constant, so an op's image holds its own math only (powf, atan2f, fmodf). */
static inline __attribute__((always_inline)) et_status arith_eval(et_kernel_ctx *ctx, const char *op, bkind k, const operand *a,
                                                                  const operand *b, et_tensor *out) {
  const float *pa = a->t ? a->t->data : NULL, *pb = b->t ? b->t->data : NULL, xa = (float)a->s, xb = (float)b->s;
  float *po = out->data;
  const size_t n = et_tensor_numel(out);
  if (same_layout(a->t, out) && same_layout(b->t, out)) { /* one pass over the buffers */
    for (size_t e = 0; e < n; e++) po[e] = arith_f(k, pa ? pa[e] : xa, pb ? pb[e] : xb);
    return ET_OK;
  }
  af_iter it;
  bcast_iter(ctx, op, a, b, out, &it);
  const uint8_t io = 0, ia = 1, ib = 2;
  for (size_t e = 0; e < n; e++, af_iter_next(&it))
    po[it.off[io]] = arith_f(k, pa ? pa[it.off[ia]] : xa, pb ? pb[it.off[ib]] : xb);
  return ET_OK;
}

/* Logic ops of bools (bool tensors or scalars, a bool output): the bytes read and written directly, a row of the
 * innermost dim at a time. Attention joins its masks this way (a [B, 1, 1, T] view OR a [T, T] table): the
 * generic loop below, with its per-element dtype dispatch, costs about four times as much. */
static et_status logic_bool_eval(et_kernel_ctx *ctx, const char *op, bkind k, const operand *a, const operand *b,
                                 et_tensor *out) {
  af_iter it;
  bcast_iter(ctx, op, a, b, out, &it);
  const size_t n = et_tensor_numel(out);
  if (n == 0) return ET_OK;
  const uint8_t xa = a->s != 0, xb = b->s != 0;
  const uint8_t *pa = a->t ? a->t->data : &xa, *pb = b->t ? b->t->data : &xb;
  uint8_t *po = out->data;
  size_t run = 1, so = 0, sa = 0, sb = 0;
  if (out->dim > 0) {
    const uint8_t last = (uint8_t)(out->dim - 1);
    run = (size_t)it.sizes[last], so = it.stride[0][last], sa = it.stride[1][last], sb = it.stride[2][last];
    it.sizes[last] = 1;
  }
  for (size_t r = 0; r < n / run; r++, af_iter_next(&it)) {
    uint8_t *o = po + it.off[0];
    const uint8_t *x = pa + it.off[1], *y = pb + it.off[2];
    for (size_t j = 0; j < run; j++) {
      const uint8_t u = x[j * sa] != 0, v = y[j * sb] != 0;
      o[j * so] = (uint8_t)(k == B_LAND ? (u & v) : k == B_LOR ? (u | v) : (u ^ v));
    }
  }
  return ET_OK;
}

static inline bool bool_or_scalar(const operand *o) { return o->t == NULL || o->t->dtype == ET_DT_BOOL; }

/* The rest, shared by the ops: comparisons, logical and bitwise ops, integer arithmetic (exact). */
static et_status binary_eval(et_kernel_ctx *ctx, const char *op, bkind k, const operand *a, const operand *b, et_tensor *out) {
  if (is_logic(k) && out->dtype == ET_DT_BOOL && bool_or_scalar(a) && bool_or_scalar(b))
    return logic_bool_eval(ctx, op, k, a, b, out);
  af_iter it;
  bcast_iter(ctx, op, a, b, out, &it);
  const uint8_t io = 0, ia = 1, ib = 2;
  const size_t n = et_tensor_numel(out);
  const bool flt = float_math(k, a, b, out);
  /* a float32 comparison laid out as out (a tensor or scalar other): one pass over the buffers */
  if (flt && is_cmp(k) && out->dtype == ET_DT_BOOL && a->t && a->t->dtype == ET_DT_FLOAT && (!b->t || b->t->dtype == ET_DT_FLOAT) &&
      same_layout(a->t, out) && same_layout(b->t, out)) {
    const float *pa = a->t->data, *pb = b->t ? b->t->data : NULL, s = (float)b->s;
    uint8_t *po = out->data;
    for (size_t e = 0; e < n; e++) po[e] = cmp_f(k, pa[e], pb ? pb[e] : s);
    return ET_OK;
  }
  for (size_t e = 0; e < n; e++, af_iter_next(&it)) {
    const size_t oa = it.off[ia], ob = it.off[ib], oo = it.off[io];
    if (is_logic(k)) {
      const bool x = operand_f32(a) ? get_f(a, oa) != 0 : get_i(a, oa) != 0;
      const bool y = operand_f32(b) ? get_f(b, ob) != 0 : get_i(b, ob) != 0;
      const bool r = k == B_LAND ? x && y : k == B_LOR ? x || y : x != y;
      store_f(out, oo, r ? 1.0f : 0.0f);
    } else if (is_cmp(k)) {
      const bool r = flt ? cmp_f(k, get_f(a, oa), get_f(b, ob)) : cmp_i(k, get_i(a, oa), get_i(b, ob));
      store_f(out, oo, r ? 1.0f : 0.0f);
    } else {
      const int64_t y = get_i(b, ob);
      if (y == 0 && !is_bitwise(k) && k != B_MAX && k != B_MIN)
        return et_fail(ctx, ET_E_INVALID_ARG, "%s: integer division by zero", op);
      aten_store_i64(out->dtype, out->data, oo, arith_i(k, get_i(a, oa), y));
    }
  }
  return ET_OK;
}

ET_PREPARE static et_status check_operand(et_kernel_ctx *ctx, const char *op, bkind k, et_value **args, uint32_t i,
                                          const char *name, const et_tensor *out) {
  size_t st_[ET_MAX_DIM];
  et_status st;
  if (args[i]->tag != ET_TAG_TENSOR) return af_scalar(ctx, op, args, i);
  const et_tensor *t = args[i]->u.t;
  if ((st = aten_bcast_strides(ctx, op, t, out, st_))) return st;
  const bool flt_out = out->dtype == ET_DT_FLOAT;
  if (is_cmp(k) || is_logic(k)) return af_dtype(ctx, op, t, name, t->dtype == ET_DT_FLOAT || aten_is_int_dt(t->dtype), "float32, an integer or bool");
  if (is_bitwise(k)) return af_dtype(ctx, op, t, name, aten_is_int_dt(t->dtype), "an integer or bool");
  if (k >= B_POW || k == B_DIV_TRUE || flt_out) return af_f32(ctx, op, t, name);
  return af_dtype(ctx, op, t, name, aten_is_int_dt(t->dtype), "an integer (the output is)");
}

/* (self, other[, rounding_mode], out, ret): each of self and other a tensor
 * or a scalar as the overload says. */
ET_PREPARE static et_status binary_prepare(et_kernel_ctx *ctx, const char *op, bkind k, bool has_mode, et_value **args, uint32_t nargs) {
  et_tensor *out = NULL;
  et_status st;
  const uint32_t want = has_mode ? 5 : 4;
  if ((st = aten_nargs(ctx, op, nargs, want)) || (st = aten_tensor(ctx, op, args, ATEN_OUT_SLOT(want), &out))) return st;
  if (is_cmp(k) || is_logic(k))
    st = af_dtype(ctx, op, out, "out", out->dtype == ET_DT_FLOAT || aten_is_int_dt(out->dtype), "float32, an integer or bool");
  else if (is_bitwise(k))
    st = af_dtype(ctx, op, out, "out", aten_is_int_dt(out->dtype), "an integer or bool");
  else if (k >= B_POW || k == B_DIV_TRUE)
    st = af_f32(ctx, op, out, "out");
  else
    st = af_dtype(ctx, op, out, "out", out->dtype == ET_DT_FLOAT || aten_is_int_dt(out->dtype), "float32, an integer or bool");
  if (st || (st = check_operand(ctx, op, k, args, BIN_SELF, "self", out)) ||
      (st = check_operand(ctx, op, k, args, BIN_OTHER, "other", out)))
    return st;
  if (args[BIN_SELF]->tag != ET_TAG_TENSOR && args[BIN_OTHER]->tag != ET_TAG_TENSOR)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: argument 0 is not a tensor", op);
  if (has_mode) {
    int w;
    if ((st = af_word(ctx, op, args, BIN_ROUNDING_MODE, "trunc", "floor", true, &w))) return st;
    if (args[BIN_ROUNDING_MODE]->tag == ET_TAG_NONE && out->dtype != ET_DT_FLOAT)
      return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: integer output for true division", op);
  }
  return ET_OK;
}

/* Inlined into each entry point (k and has_mode constant): float arithmetic runs its own specialised loops. */
static inline __attribute__((always_inline)) et_status binary_adapter(et_kernel_ctx *ctx, const char *op, bkind k, bool has_mode,
                                                                      et_value **args, uint32_t nargs) {
  const operand a = operand_of(args[BIN_SELF]), b = operand_of(args[BIN_OTHER]);
  et_tensor *const out = args[ATEN_OUT_SLOT(nargs)]->u.t;
  const et_value *const mode = has_mode ? args[BIN_ROUNDING_MODE] : NULL;
  const bool flt = !is_cmp(k) && !is_logic(k) && !is_bitwise(k) && out->dtype == ET_DT_FLOAT;
  if (has_mode && flt) {
    if (mode->tag == ET_TAG_NONE) return arith_eval(ctx, op, B_DIV_TRUE, &a, &b, out);
    if (af_word_is(mode, "floor")) return arith_eval(ctx, op, B_DIV_FLOOR, &a, &b, out);
    return arith_eval(ctx, op, B_DIV_TRUNC, &a, &b, out);
  }
  if (has_mode) k = af_word_is(mode, "floor") ? B_DIV_FLOOR : B_DIV_TRUNC; /* integers (no true division: prepare) */
  if (flt) return arith_eval(ctx, op, k, &a, &b, out);
  return binary_eval(ctx, op, k, &a, &b, out);
}

/* Each overload's entry points (named in aten_float_ops.def): eval fn, prepare fn##_prepare. */
#define BINARY_OP(fn, name, k, has_mode) OP_ENTRIES(fn, binary_adapter, binary_prepare, name, k, has_mode)
BINARY_OP(aten_maximum_out, "aten::maximum.out", B_MAX, false)
BINARY_OP(aten_minimum_out, "aten::minimum.out", B_MIN, false)
BINARY_OP(aten_div_out_mode, "aten::div.out_mode", B_DIV_TRUNC, true)
BINARY_OP(aten_fmod_tensor_out, "aten::fmod.Tensor_out", B_FMOD, false)
BINARY_OP(aten_remainder_tensor_out, "aten::remainder.Tensor_out", B_REM, false)
BINARY_OP(aten_pow_tensor_tensor_out, "aten::pow.Tensor_Tensor_out", B_POW, false)
BINARY_OP(aten_pow_scalar_out, "aten::pow.Scalar_out", B_POW, false)
BINARY_OP(aten_atan2_out, "aten::atan2.out", B_ATAN2, false)
BINARY_OP(aten_gt_tensor_out, "aten::gt.Tensor_out", B_GT, false)
BINARY_OP(aten_ge_tensor_out, "aten::ge.Tensor_out", B_GE, false)
BINARY_OP(aten_lt_tensor_out, "aten::lt.Tensor_out", B_LT, false)
BINARY_OP(aten_le_tensor_out, "aten::le.Tensor_out", B_LE, false)
BINARY_OP(aten_eq_tensor_out, "aten::eq.Tensor_out", B_EQ, false)
BINARY_OP(aten_ne_tensor_out, "aten::ne.Tensor_out", B_NE, false)
BINARY_OP(aten_gt_scalar_out, "aten::gt.Scalar_out", B_GT, false)
BINARY_OP(aten_ge_scalar_out, "aten::ge.Scalar_out", B_GE, false)
BINARY_OP(aten_lt_scalar_out, "aten::lt.Scalar_out", B_LT, false)
BINARY_OP(aten_le_scalar_out, "aten::le.Scalar_out", B_LE, false)
BINARY_OP(aten_eq_scalar_out, "aten::eq.Scalar_out", B_EQ, false)
BINARY_OP(aten_ne_scalar_out, "aten::ne.Scalar_out", B_NE, false)
BINARY_OP(aten_logical_and_out, "aten::logical_and.out", B_LAND, false)
BINARY_OP(aten_logical_or_out, "aten::logical_or.out", B_LOR, false)
BINARY_OP(aten_logical_xor_out, "aten::logical_xor.out", B_LXOR, false)
BINARY_OP(aten_bitwise_and_tensor_out, "aten::bitwise_and.Tensor_out", B_BAND, false)
BINARY_OP(aten_bitwise_or_tensor_out, "aten::bitwise_or.Tensor_out", B_BOR, false)
BINARY_OP(aten_bitwise_xor_tensor_out, "aten::bitwise_xor.Tensor_out", B_BXOR, false)

/* Three operands: where(condition, self, other) and clamp(self, min, max). */
ET_PREPARE et_status aten_where_self_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::where.self_out";
  et_tensor *c = NULL, *a = NULL, *b = NULL, *out = NULL;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, 5)) || (st = aten_tensor(ctx, op, args, WHERE_CONDITION, &c)) ||
      (st = aten_tensor(ctx, op, args, WHERE_SELF, &a)) || (st = aten_tensor(ctx, op, args, WHERE_OTHER, &b)) ||
      (st = aten_tensor(ctx, op, args, WHERE_OUT, &out)))
    return st;
  if ((st = af_dtype(ctx, op, c, "condition", c->dtype == ET_DT_BOOL || c->dtype == ET_DT_BYTE, "bool or uint8"))) return st;
  if (a->dtype != out->dtype || b->dtype != out->dtype)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dtype %s in, %s out", op, et_dtype_name(a->dtype != out->dtype ? a->dtype : b->dtype),
                   et_dtype_name(out->dtype));
  if (et_dtype_size(out->dtype) == 0) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: dtype %s not supported", op, et_dtype_name(out->dtype));
  if ((st = af_bcast(ctx, op, c, out)) || (st = af_bcast(ctx, op, a, out)) || (st = af_bcast(ctx, op, b, out))) return st;
  return ET_OK;
}
et_status aten_where_self_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)nargs;
  const char *op = "aten::where.self_out";
  const et_tensor *const c = args[WHERE_CONDITION]->u.t, *const a = args[WHERE_SELF]->u.t, *const b = args[WHERE_OTHER]->u.t;
  et_tensor *const out = args[WHERE_OUT]->u.t;
  size_t sc[ET_MAX_DIM], sa[ET_MAX_DIM], sb[ET_MAX_DIM];
  af_bcast_get(ctx, op, c, out, sc);
  af_bcast_get(ctx, op, a, out, sa);
  af_bcast_get(ctx, op, b, out, sb);
  af_iter it;
  af_iter_init(&it, out->dim, out->sizes);
  const uint8_t io = af_iter_tensor(&it, out), ic = af_iter_add(&it, sc, 0), ia = af_iter_add(&it, sa, 0), ib = af_iter_add(&it, sb, 0);
  const size_t n = et_tensor_numel(out), es = et_dtype_size(out->dtype);
  const uint8_t *pc = c->data, *pa = a->data, *pb = b->data;
  uint8_t *po = out->data;
  if (es == 4 && same_layout(c, out) && same_layout(a, out) && same_layout(b, out)) { /* one pass, word copies */
    for (size_t e = 0; e < n; e++) memcpy(po + 4 * e, (pc[e] ? pa : pb) + 4 * e, 4);
    return ET_OK;
  }
  for (size_t e = 0; e < n; e++, af_iter_next(&it)) {
    const uint8_t *src = pc[it.off[ic]] ? pa + it.off[ia] * es : pb + it.off[ib] * es;
    memcpy(po + it.off[io] * es, src, es);
  }
  return ET_OK;
}

ET_PREPARE et_status aten_clamp_tensor_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::clamp.Tensor_out";
  et_tensor *a = NULL, *out = NULL;
  et_status st;
  if ((st = af_f32_self_out(ctx, op, args, nargs, 5, CLAMPT_OUT, &a, "self", &out)) || (st = af_bcast(ctx, op, a, out)) ||
      (st = af_opt_f32_bcast_arg(ctx, op, args, CLAMPT_MIN, "min", out)))
    return st;
  return af_opt_f32_bcast_arg(ctx, op, args, CLAMPT_MAX, "max", out);
}
et_status aten_clamp_tensor_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::clamp.Tensor_out";
  const et_tensor *const a = args[CLAMPT_SELF]->u.t;
  const et_tensor *const lo = af_opt_tensor_get(args[CLAMPT_MIN]);
  const et_tensor *const hi = af_opt_tensor_get(args[CLAMPT_MAX]);
  et_tensor *const out = args[CLAMPT_OUT]->u.t;
  size_t sa[ET_MAX_DIM], sl[ET_MAX_DIM] = {0}, sh[ET_MAX_DIM] = {0};
  af_bcast_get(ctx, op, a, out, sa);
  if (lo) af_bcast_get(ctx, op, lo, out, sl);
  if (hi) af_bcast_get(ctx, op, hi, out, sh);
  af_iter it;
  af_iter_init(&it, out->dim, out->sizes);
  const uint8_t io = af_iter_tensor(&it, out), ia = af_iter_add(&it, sa, 0), il = af_iter_add(&it, sl, 0), ih = af_iter_add(&it, sh, 0);
  const size_t n = et_tensor_numel(out);
  const float *pa = a->data, *pl = lo ? lo->data : NULL, *ph = hi ? hi->data : NULL;
  float *po = out->data;
  for (size_t e = 0; e < n; e++, af_iter_next(&it)) {
    float x = pa[it.off[ia]];
    if (x == x) { /* NaN stays NaN */
      if (pl && x < pl[it.off[il]]) x = pl[it.off[il]];
      if (ph && x > ph[it.off[ih]]) x = ph[it.off[ih]];
    }
    po[it.off[io]] = x;
  }
  (void)nargs;
  return ET_OK;
}
