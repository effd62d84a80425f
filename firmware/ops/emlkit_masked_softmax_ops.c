/* Adapter for emlkit::masked_softmax (semantics: emlkit/emlkit_ops.py): emlkit::softmax with a bool mask broadcast
 * to the input. prepare checks every bound the kernel relies on; eval builds the row walk (the softmax dim last,
 * the others in the input's memory order, the mask's steps 0 where it is broadcast). */
#include "cortex_m_util.h"
#include "emlkit_kernels.h"

/* Argument slots (the schema in emlkit/emlkit_ops.py, out last). */
enum { EMSM_IN, EMSM_MASK, EMSM_EXP_TABLE, EMSM_DIM, EMSM_OUT_ZP, EMSM_MULT, EMSM_SHIFT, EMSM_OUT };

#define EMLKIT_EXP_ONE (1 << 22)

/* The walk over the rows of `in` (rank dims, each logical dim d at walk position pos[d]); false when the mask does
 * not broadcast to in's sizes. */
static bool masked_walk(const et_tensor *in, const et_tensor *mask, int32_t dim, emlkit_row_walk *w) {
  size_t xs[ET_MAX_DIM], ms[ET_MAX_DIM];
  if (mask->dim > in->dim) return false;
  et_tensor_strides(in, xs);
  et_tensor_strides(mask, ms);
  const uint8_t lead = (uint8_t)(in->dim - mask->dim);
  int32_t k = 0;
  w->rank = in->dim;
  for (uint8_t j = 0; j <= in->dim; j++) { /* memory order, then dim itself last */
    const int32_t d = j < in->dim ? in->dim_order[j] : dim;
    if (j < in->dim && d == dim) continue;
    const int32_t s = d < lead ? 1 : mask->sizes[d - lead];
    if (s != 1 && s != in->sizes[d]) return false;
    w->size[k] = in->sizes[d];
    w->x_step[k] = (int32_t)xs[d];
    w->m_step[k] = s == 1 ? 0 : (int32_t)ms[d - lead];
    k++;
  }
  return true;
}

/* emlkit::masked_softmax.out(input, mask, exp_table, dim, output_zero_point, output_multiplier, output_shift, out) */
ET_PREPARE et_status op_emlkit_masked_softmax_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::masked_softmax";
  et_tensor *in, *mask, *table, *out;
  int32_t dim, zp;
  emlkit_row_walk w;
  static const cm_tensor_arg ts[] = {{EMSM_IN, "input", false}, {EMSM_MASK, "mask", false},
                                     {EMSM_EXP_TABLE, "exp_table", false}, {EMSM_OUT, "out", false}};
  CM_TRY(cm_tensors(ctx, op, args, nargs, EMSM_OUT, ts, 4, (et_tensor **const[]){&in, &mask, &table, &out}));
  CM_TRY(cm_int(ctx, op, args, EMSM_DIM, "dim", -EMLKIT_MASKED_SOFTMAX_MAX_DIMS, EMLKIT_MASKED_SOFTMAX_MAX_DIMS - 1,
                &dim));
  CM_TRY(cm_int(ctx, op, args, EMSM_OUT_ZP, "output_zero_point", -128, 127, &zp));
  CM_TRY(cm_requant_args(ctx, op, args, EMSM_MULT));
  CM_TRY(cm_dtype(ctx, op, in, "input", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, mask, "mask", ET_DT_BOOL));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, table, "exp_table", ET_DT_INT));
  if (in->dim < 1 || in->dim > EMLKIT_MASKED_SOFTMAX_MAX_DIMS)
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: the input must have 1 to %d dims, got %u", op,
                   EMLKIT_MASKED_SOFTMAX_MAX_DIMS, (unsigned)in->dim);
  CM_TRY(cm_softmax_shapes(ctx, op, in, out, dim));
  if (!masked_walk(in, mask, dim < 0 ? dim + in->dim : dim, &w))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: mask does not broadcast to the input's sizes", op);
  /* emlkit::softmax's table bounds (emlkit_qparams_ops.c): s fits in 2^22 * len, e << 31 in 2^53 */
  if (et_tensor_numel(table) != 256 || !table->data)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: exp_table must have 256 entries, got %u", op,
                   (unsigned)et_tensor_numel(table));
  const int32_t *t = (const int32_t *)table->data;
  if (t[0] < 1 || t[0] > EMLKIT_EXP_ONE)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: exp_table[0] = %ld must be in [1, 2^22]", op, (long)t[0]);
  for (int k = 1; k < 256; k++)
    if (t[k] < 0 || t[k] > EMLKIT_EXP_ONE)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: exp_table[%d] = %ld must be in [0, 2^22]", op, k, (long)t[k]);
  return ET_OK;
}

et_status op_emlkit_masked_softmax_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *in;
  et_tensor *out;
  if (!cm_io(args, EMSM_IN, EMSM_OUT, &in, &out)) return ET_OK;
  const et_tensor *mask = args[EMSM_MASK]->u.t;
  const int32_t dim = cm_i(args, EMSM_DIM);
  emlkit_row_walk w;
  (void)masked_walk(in, mask, dim < 0 ? dim + in->dim : dim, &w); /* prepare has checked it */
  emk_emlkit_masked_softmax_s8((const int8_t *)in->data, (const uint8_t *)mask->data, (int8_t *)out->data, &w,
                               (const int32_t *)args[EMSM_EXP_TABLE]->u.t->data, cm_i(args, EMSM_OUT_ZP),
                               cm_i(args, EMSM_MULT), cm_i(args, EMSM_SHIFT));
  return ET_OK;
}
