/* Adapters for the elementwise cortex_m:: ops: quantized_add, quantized_mul,
 * quantized_div, quantized_activation, minimum, maximum. */
#include "cortex_m_util.h"

/* Argument slots (the operators' schemas, out last). */
enum {
  ADD_SELF, ADD_SELF_ZP, ADD_SELF_MULT, ADD_SELF_SHIFT, ADD_OTHER, ADD_OTHER_ZP, ADD_OTHER_MULT, ADD_OTHER_SHIFT,
  ADD_OUT_ZP, ADD_OUT_MULT, ADD_OUT_SHIFT, ADD_ACT_MIN, ADD_ACT_MAX, ADD_OUT
};
enum { MUL_SELF, MUL_SELF_ZP, MUL_OTHER, MUL_OTHER_ZP, MUL_OUT_ZP, MUL_OUT_MULT, MUL_OUT_SHIFT, MUL_OUT };
enum { DIV_SELF, DIV_SELF_ZP, DIV_OTHER, DIV_OTHER_ZP, DIV_OUT_ZP, DIV_OUT_SCALE, DIV_OUT };
enum { LUT_IN, LUT_TABLE, LUT_OUT };
enum { MINMAX_SELF, MINMAX_OTHER, MINMAX_OUT };

/* add/mul operands: equal sizes and layout, or one operand holding only the
 * channels of an NHWC (or 1-element) other: the kernels then repeat it with
 * period C along memory. */
ET_PREPARE static et_status bcast(et_kernel_ctx *ctx, const char *op, const et_tensor *a, const et_tensor *b,
                       const et_tensor *out) {
  CM_TRY(cm_dtype(ctx, op, a, "self", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, b, "other", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  const size_t alen = et_tensor_numel(a), blen = et_tensor_numel(b);
  const et_tensor *big = alen >= blen ? a : b, *small = alen >= blen ? b : a;
  if (!cm_same_sizes(big, out) || !cm_layout_is(out, big->dim_order))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out must have the sizes and dim order of the larger operand", op);
  if (alen == 0 || blen == 0) return ET_OK;
  if (cm_same_sizes(a, b)) {
    if (!cm_layout_is(a, b->dim_order))
      return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: self and other have different dim orders", op);
    return ET_OK;
  }
  const size_t sn = et_tensor_numel(small);
  if (sn == 1) return ET_OK;
  /* channel broadcast: small is [1,C,1,1]-like, big is 4-D with C innermost in memory */
  if (big->dim == 4 && small->dim == 4 && small->sizes[1] == big->sizes[1] && (int32_t)sn == small->sizes[1] &&
      cm_layout_is(big, cm_nhwc_order))
    return ET_OK;
  return et_fail(ctx, ET_E_NOT_SUPPORTED,
                 "%s: broadcasting supported only for equal shapes or a per-channel operand of a channels-last tensor",
                 op);
}

/* The end of add's and mul's prepare: the operands' shapes checked, then the checked
 * parameters kept in the call's state (cortex_m_ops.def gives each the size of its
 * params struct), so eval hands them to the kernel with no unpacking per inference. */
ET_PREPARE static et_status operands_then_keep(et_kernel_ctx *ctx, const char *op, const et_tensor *a, const et_tensor *b,
                                               const et_tensor *out, const void *p, size_t size) {
  CM_TRY(bcast(ctx, op, a, b, out));
  if (!ctx->state || ctx->state_size < size)
    return et_fail(ctx, ET_E_INTERNAL, "%s: the registry gives %u bytes of state, the plan needs %u", op,
                   (unsigned)(ctx->state ? ctx->state_size : 0), (unsigned)size);
  memcpy(ctx->state, p, size);
  return ET_OK;
}
_Static_assert(sizeof(qadd_params) == 44, "cortex_m_ops.def gives cortex_m::quantized_add 44 bytes of state");
_Static_assert(sizeof(qmul_params) == 20, "cortex_m_ops.def gives cortex_m::quantized_mul 20 bytes of state");

/* add/mul eval: the int8 operands (self at 0, other at `other`, out at `iout`)
 * and their lengths; false when one is empty (nothing to compute). */
typedef struct {
  const int8_t *a, *b;
  int8_t *out;
  size_t alen, blen;
} operands_s8;

static inline bool operands(et_value **args, uint32_t other, uint32_t iout, operands_s8 *o) {
  o->a = (const int8_t *)args[ADD_SELF]->u.t->data, o->alen = et_tensor_numel(args[ADD_SELF]->u.t); /* = MUL_SELF */
  o->b = (const int8_t *)args[other]->u.t->data, o->blen = et_tensor_numel(args[other]->u.t);
  o->out = (int8_t *)args[iout]->u.t->data;
  return o->alen != 0 && o->blen != 0;
}

/* A (zero_point, multiplier, shift) triple of arguments at slots izp, izp + 1, izp + 2 (named name[0..2]):
 * zero point in [-128, 127], multiplier in [mult_min, INT32_MAX], shift in [-31, 31]. */
ET_PREPARE static et_status requant(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t izp, const char *const name[3],
                                    int32_t mult_min, int32_t *zp, int32_t *mult, int32_t *shift) {
  CM_TRY(cm_int(ctx, op, args, izp, name[0], -128, 127, zp));
  CM_TRY(cm_int(ctx, op, args, izp + 1, name[1], mult_min, INT32_MAX, mult));
  return cm_int(ctx, op, args, izp + 2, name[2], -31, 31, shift);
}
static const char *const k_self_rq[3] = {"self_zero_point", "self_multiplier", "self_shift"};
static const char *const k_other_rq[3] = {"other_zero_point", "other_multiplier", "other_shift"};
static const char *const k_out_rq[3] = {"output_zero_point", "output_multiplier", "output_shift"};
_Static_assert(ADD_SELF_SHIFT == ADD_SELF_ZP + 2 && ADD_OTHER_SHIFT == ADD_OTHER_ZP + 2 && ADD_OUT_SHIFT == ADD_OUT_ZP + 2 &&
                   MUL_OUT_SHIFT == MUL_OUT_ZP + 2,
               "requant's triples are consecutive slots");

ET_PREPARE et_status op_cortex_m_quantized_add_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::quantized_add";
  et_tensor *a, *b, *out;
  qadd_params p;
  CM_TRY(cm_binary(ctx, op, args, nargs, ADD_OUT, ADD_OTHER, &a, &b, &out));
  CM_TRY(requant(ctx, op, args, ADD_SELF_ZP, k_self_rq, INT32_MIN, &p.a_zp, &p.a_mult, &p.a_shift));
  CM_TRY(requant(ctx, op, args, ADD_OTHER_ZP, k_other_rq, INT32_MIN, &p.b_zp, &p.b_mult, &p.b_shift));
  CM_TRY(requant(ctx, op, args, ADD_OUT_ZP, k_out_rq, INT32_MIN, &p.out_zp, &p.out_mult, &p.out_shift));
  CM_TRY(cm_int(ctx, op, args, ADD_ACT_MIN, "activation_min", -128, 127, &p.act_min));
  CM_TRY(cm_int(ctx, op, args, ADD_ACT_MAX, "activation_max", -128, 127, &p.act_max));
  CM_TRY(cm_act(ctx, op, p.act_min, p.act_max));
  return operands_then_keep(ctx, op, a, b, out, &p, sizeof p);
}

ET_PREPARE et_status op_cortex_m_quantized_mul_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::quantized_mul";
  et_tensor *a, *b, *out;
  qmul_params p;
  CM_TRY(cm_binary(ctx, op, args, nargs, MUL_OUT, MUL_OTHER, &a, &b, &out));
  CM_TRY(cm_int(ctx, op, args, MUL_SELF_ZP, "self_zero_point", -128, 127, &p.a_zp));
  CM_TRY(cm_int(ctx, op, args, MUL_OTHER_ZP, "other_zero_point", -128, 127, &p.b_zp));
  CM_TRY(requant(ctx, op, args, MUL_OUT_ZP, k_out_rq, 0, &p.out_zp, &p.out_mult, &p.out_shift));
  return operands_then_keep(ctx, op, a, b, out, &p, sizeof p);
}

/* add's and mul's eval: the kernel on the two operands (other at `iother`, out at
 * `iout`), with the parameters prepare kept in the call's state. */
#define BINARY_EVAL(name, iother, iout, kernel, params_t)                                                       \
  et_status name(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {                                       \
    operands_s8 o;                                                                                            \
    if (operands(args, iother, iout, &o)) kernel(o.a, o.alen, o.b, o.blen, o.out, (const params_t *)ctx->state); \
    return (void)nargs, ET_OK;                                                                                \
  }
BINARY_EVAL(op_cortex_m_quantized_add_out, ADD_OTHER, ADD_OUT, emk_add_s8, qadd_params)
BINARY_EVAL(op_cortex_m_quantized_mul_out, MUL_OTHER, MUL_OUT, emk_mul_s8, qmul_params)

ET_PREPARE et_status op_cortex_m_quantized_div_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::quantized_div";
  et_tensor *a, *b, *out;
  int32_t za, zb, zo;
  double scale;
  CM_TRY(cm_binary(ctx, op, args, nargs, DIV_OUT, DIV_OTHER, &a, &b, &out));
  CM_TRY(cm_int(ctx, op, args, DIV_SELF_ZP, "self_zero_point", -32768, 32767, &za));
  CM_TRY(cm_int(ctx, op, args, DIV_OTHER_ZP, "other_zero_point", -32768, 32767, &zb));
  CM_TRY(cm_int(ctx, op, args, DIV_OUT_ZP, "output_zero_point", -32768, 32767, &zo));
  CM_TRY(cm_double(ctx, op, args, DIV_OUT_SCALE, "output_scale", &scale));
  if (a->dtype != ET_DT_CHAR && a->dtype != ET_DT_SHORT)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: self must be int8 or int16, got %s", op, et_dtype_name(a->dtype));
  CM_TRY(cm_dtype(ctx, op, b, "other", a->dtype));
  CM_TRY(cm_dtype(ctx, op, out, "out", a->dtype));
  if (!cm_same_sizes(a, b) || !cm_same_sizes(a, out))
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: self, other and out must have equal sizes (no broadcasting)", op);
  if (!cm_layout_is(b, a->dim_order) || !cm_layout_is(out, a->dim_order))
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: self, other and out must share one dim order", op);
  return ET_OK;
}

et_status op_cortex_m_quantized_div_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const a = args[DIV_SELF]->u.t, *const b = args[DIV_OTHER]->u.t;
  et_tensor *const out = args[DIV_OUT]->u.t;
  const int32_t za = cm_i(args, DIV_SELF_ZP), zb = cm_i(args, DIV_OTHER_ZP), zo = cm_i(args, DIV_OUT_ZP);
  const double scale = cm_d(args, DIV_OUT_SCALE);
  if (a->dtype == ET_DT_CHAR)
    emk_div_s8((const int8_t *)a->data, (const int8_t *)b->data, (int8_t *)out->data, et_tensor_numel(a), za, zb, zo, scale);
  else
    emk_div_s16((const int16_t *)a->data, (const int16_t *)b->data, (int16_t *)out->data, et_tensor_numel(a), za, zb, zo,
             scale);
  return ET_OK;
}

ET_PREPARE et_status op_cortex_m_quantized_activation_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "cortex_m::quantized_activation";
  et_tensor *in, *lut, *out;
  CM_TRY(cm_nargs(ctx, op, nargs, LUT_OUT));
  CM_TRY(cm_tensor(ctx, op, args, LUT_IN, "input", false, &in));
  CM_TRY(cm_tensor(ctx, op, args, LUT_TABLE, "lut", false, &lut));
  CM_TRY(cm_tensor(ctx, op, args, LUT_OUT, "out", false, &out));
  CM_TRY(cm_dtype(ctx, op, in, "input", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, lut, "lut", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  if (et_tensor_numel(lut) != 256)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: lut must have 256 int8 entries, got %u", op,
                   (unsigned)et_tensor_numel(lut));
  if (!cm_same_sizes(in, out) || !cm_layout_is(out, in->dim_order))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out must have the input's sizes and dim order", op);
  return ET_OK;
}

et_status op_cortex_m_quantized_activation_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const in = args[LUT_IN]->u.t, *const lut = args[LUT_TABLE]->u.t;
  et_tensor *const out = args[LUT_OUT]->u.t;
  emk_lut_s8((const int8_t *)in->data, (int8_t *)out->data, et_tensor_numel(in), (const int8_t *)lut->data);
  return ET_OK;
}

/* t, its dims aligned right to out's, has out's size or 1 (or no dim) at out's dim d. */
ET_PREPARE static bool broadcasts_at(const et_tensor *t, const et_tensor *out, int d) {
  const int dt = d - (out->dim - t->dim);
  const int32_t nt = dt >= 0 ? t->sizes[dt] : 1;
  return nt == out->sizes[d] || nt == 1;
}
/* torch.minimum/maximum broadcasting, any dim orders: per-input element
 * strides along the output's memory order (0 on broadcast dims). */
ET_PREPARE static et_status minmax_prepare(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs) {
  et_tensor *a, *b, *out;
  CM_TRY(cm_binary(ctx, op, args, nargs, MINMAX_OUT, MINMAX_OTHER, &a, &b, &out));
  if (a->dtype != ET_DT_CHAR && a->dtype != ET_DT_BYTE && a->dtype != ET_DT_SHORT && a->dtype != ET_DT_INT &&
      a->dtype != ET_DT_FLOAT)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: dtype %s not supported (int8, uint8, int16, int32, float32)", op,
                   et_dtype_name(a->dtype));
  CM_TRY(cm_dtype(ctx, op, b, "other", a->dtype));
  CM_TRY(cm_dtype(ctx, op, out, "out", a->dtype));
  if (a->dim > out->dim || b->dim > out->dim)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out has fewer dims than an input", op);
  for (int j = 0; j < out->dim; j++) { /* in out's memory order: the first dim that does not broadcast is named */
    const int d = out->dim_order[j];
    if (!broadcasts_at(a, out, d) || !broadcasts_at(b, out, d))
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: input sizes do not broadcast to out's size %d at dim %d", op, (int)out->sizes[d], d);
  }
  return ET_OK;
}

static et_status minmax(et_value **args, int is_max) {
  const et_tensor *const a = args[MINMAX_SELF]->u.t, *const b = args[MINMAX_OTHER]->u.t;
  et_tensor *const out = args[MINMAX_OUT]->u.t;
  if (et_tensor_numel(out) == 0) return ET_OK;
  int32_t sa[ET_MAX_DIM], sb[ET_MAX_DIM], shape[K_MAX_DIM], astr[K_MAX_DIM], bstr[K_MAX_DIM];
  cm_logical_strides(a, sa);
  cm_logical_strides(b, sb);
  const int nd = out->dim;
  for (int j = 0; j < nd; j++) {
    const int d = out->dim_order[j];
    const int da = d - (nd - a->dim), db = d - (nd - b->dim);
    const int32_t n = out->sizes[d];
    const int32_t na = da >= 0 ? a->sizes[da] : 1, nb = db >= 0 ? b->sizes[db] : 1;
    shape[j] = n;
    astr[j] = (da >= 0 && na == n) ? sa[da] : 0;
    bstr[j] = (db >= 0 && nb == n) ? sb[db] : 0;
  }
  emk_minmax_any((k_dtype)a->dtype, is_max, nd, shape, a->data, astr, b->data, bstr, out->data);
  return ET_OK;
}

OP_PREPARE(op_cortex_m_minimum_out, minmax_prepare, "cortex_m::minimum")
et_status op_cortex_m_minimum_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return minmax(args, 0); }

OP_PREPARE(op_cortex_m_maximum_out, minmax_prepare, "cortex_m::maximum")
et_status op_cortex_m_maximum_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return minmax(args, 1); }
