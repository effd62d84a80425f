/* Adapters for our own emlkit:: operators (schemas and Python references:
 * aot/emlkit_ops.py; the outputs match those references bit for bit). */
#include "aten_util.h"

/* ---------------------------------------------------------------- upsample_nearest2d
 * out[n, c, h, w] = x[n, c, h / sh, w / sw] for integer factors: pure data
 * movement on any dtype (int8 codes keep their qparams). Both tensors are
 * NCHW or both channels-last. The output is written one output row per input
 * row: each input "unit" (a whole pixel of C elements when channels-last, one
 * element when NCHW) is repeated sw times, then that row is copied sh - 1
 * times with block copies. */

static const uint8_t k_nhwc[4] = {0, 2, 3, 1};

static bool is_nhwc(const et_tensor *t) { return memcmp(t->dim_order, k_nhwc, sizeof k_nhwc) == 0; }

ET_PREPARE et_status emlkit_upsample_nearest2d_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "emlkit::upsample_nearest2d";
  et_tensor *self = NULL, *out = NULL;
  int64_t sh = 0, sw = 0;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, 5)) || (st = aten_tensor(ctx, op, args, 0, &self)) ||
      (st = aten_int(ctx, op, args, 1, &sh)) || (st = aten_int(ctx, op, args, 2, &sw)) ||
      (st = aten_tensor(ctx, op, args, 3, &out)))
    return st;
  if (self->dtype != out->dtype)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dtype %s in, %s out", op, et_dtype_name(self->dtype), et_dtype_name(out->dtype));
  if (self->dim != 4 || out->dim != 4) return et_fail(ctx, ET_E_INVALID_ARG, "%s: tensors must be 4-D", op);
  if (sh < 1 || sw < 1 || sh > 4096 || sw > 4096)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: factors %ld x %ld out of range [1, 4096]", op, (long)sh, (long)sw);
  if (out->sizes[0] != self->sizes[0] || out->sizes[1] != self->sizes[1] || (int64_t)out->sizes[2] != self->sizes[2] * sh ||
      (int64_t)out->sizes[3] != self->sizes[3] * sw)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: output shape is not the input's scaled by %ld x %ld", op, (long)sh, (long)sw);
  if (!et_same_dim_order(self, out) || !(et_dim_order_is_identity(self) || is_nhwc(self)))
    return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: input and output must both be NCHW or both channels-last", op);
  return ET_OK;
}

/* Repeat each of `units` units of `ub` bytes `rep` times from s into d. */
static void repeat_units(uint8_t *d, const uint8_t *s, size_t units, size_t ub, size_t rep) {
  if (ub == 1) { /* one byte per unit (NCHW int8): no memcpy call per element */
    for (size_t u = 0; u < units; u++) {
      const uint8_t v = s[u];
      for (size_t r = 0; r < rep; r++) *d++ = v;
    }
    return;
  }
  for (size_t u = 0; u < units; u++, s += ub)
    for (size_t r = 0; r < rep; r++, d += ub) memcpy(d, s, ub);
}

et_status emlkit_upsample_nearest2d_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)nargs;
  const et_tensor *const self = args[0]->u.t;
  et_tensor *const out = args[3]->u.t;
  const size_t sh = (size_t)args[1]->u.i, sw = (size_t)args[2]->u.i;
  const size_t es = et_dtype_size(self->dtype);
  const size_t n = (size_t)self->sizes[0], c = (size_t)self->sizes[1];
  const size_t h = (size_t)self->sizes[2], w = (size_t)self->sizes[3];
  const bool nhwc = is_nhwc(self) && !et_dim_order_is_identity(self);
  const size_t outer = nhwc ? n : n * c; /* planes of h rows */
  const size_t ub = nhwc ? c * es : es;  /* bytes per repeated unit */
  const size_t in_row = w * ub, out_row = w * sw * ub;
  const uint8_t *s = self->data;
  uint8_t *d = out->data;
  for (size_t p = 0; p < outer; p++) {
    for (size_t y = 0; y < h; y++, s += in_row) {
      repeat_units(d, s, w, ub, sw);
      for (size_t r = 1; r < sh; r++) memcpy(d + r * out_row, d, out_row);
      d += sh * out_row;
    }
  }
  return ET_OK;
}
