/* Adapters for cortex_m::quantized_conv2d, quantized_depthwise_conv2d,
 * quantized_transpose_conv2d and their _nhwc (explicit-layout) variants.
 * Activations: NHWC bytes (dim order 0,2,3,1 on NCHW sizes, or NHWC sizes for
 * _nhwc). Weights as the AoT pass stores them: conv/transpose OHWI
 * [O][KH][KW][I], depthwise 1HWO [1][KH][KW][O], both contiguous. The
 * program's scratch tensor (planned memory, sized at compile time by
 * emlkit/passes/kernel_scratch.py) must hold <kernel>_get_buffer_size bytes. */
#include "cortex_m_util.h"

typedef enum { CONV, DEPTHWISE, TRANSPOSE } conv_kind;

/* Argument slots. The three schemas share the first five; then come transpose's output_padding, dilation,
 * depthwise's depth_multiplier, input_offset, output_offset, requantize_multipliers, requantize_shifts,
 * activation_min, activation_max (read in that order from CONV_STRIDE on), the scratch tensor and out. */
enum { CONV_IN, CONV_WEIGHT, CONV_BIAS, CONV_STRIDE, CONV_PADDING };
enum { CONV_SCRATCH = 12, CONV_OUT = 13, DEPTHWISE_SCRATCH = 13, DEPTHWISE_OUT = 14, TRANSPOSE_OUT = 15 };

/* The multipliers tensor may carry more entries after the out_c multipliers
 * (emlkit/passes/window_bias.py), told apart by its length: per channel, bias +
 * input_offset * sum(all the channel's weights), the start value of windows
 * that lie inside the input, computed at compile time (conv: padded with
 * zeros to a multiple of 4 channels, which the MVE fast path reads in whole
 * vectors; depthwise: out_c entries, then for the MVE loops, per 16 channels,
 * 48 int32: the 16 start values, multipliers and shifts, zero past out_c).
 * ExecuTorch's reference and CMSIS-NN read only the first out_c entries.
 * Checked here, once at load, against the weights, bias, multipliers and
 * shifts, so that a wrong entry fails the load instead of the outputs. */
static size_t conv_beff_len(conv_kind kind, size_t oc) { return kind == CONV ? (oc + 3) / 4 * 4 : oc; }
static size_t conv_blocks_len(size_t oc) { return (oc + 15) / 16 * 48; }

/* Whether the multipliers tensor has one of those lengths (the older
 * unpadded 2 x out_c form of a convolution included: checked, not used). */
ET_PREPARE static bool conv_extended(conv_kind kind, const qconv_params *p, const et_tensor *mt) {
  const size_t n = et_tensor_numel(mt), oc = (size_t)p->out_c;
  if (oc == 0) return false;
  if (kind == TRANSPOSE) return n == 2 * oc; /* refused by conv_window_bias, with the reason */
  return n == 2 * oc || n == oc + conv_beff_len(kind, oc) || (kind == DEPTHWISE && n == 2 * oc + conv_blocks_len(oc));
}

/* p->beff and p->dwblk from a checked multipliers tensor. */
static void conv_point_ext(conv_kind kind, qconv_params *p, const et_tensor *mt) {
  const size_t n = et_tensor_numel(mt), oc = (size_t)p->out_c;
  const int32_t *m = (const int32_t *)mt->data;
  p->beff = p->dwblk = NULL;
  if (oc == 0 || m == NULL || kind == TRANSPOSE) return;
  if (n == oc + conv_beff_len(kind, oc) || (kind == DEPTHWISE && n == 2 * oc + conv_blocks_len(oc))) p->beff = m + oc;
  if (kind == DEPTHWISE && n == 2 * oc + conv_blocks_len(oc)) p->dwblk = m + 2 * oc;
}

ET_PREPARE static et_status conv_window_bias(et_kernel_ctx *ctx, const char *op, const qconv_params *p,
                                             conv_kind kind, const et_tensor *w, const et_tensor *bias,
                                             const et_tensor *mt, const et_tensor *st) {
  const int32_t n = p->out_c;
  CM_TRY(cm_dtype(ctx, op, mt, "requantize_multipliers", ET_DT_INT));
  if (kind == TRANSPOSE || et_tensor_numel(st) != (size_t)n || mt->data == NULL || st->data == NULL ||
      w->data == NULL || (bias && bias->data == NULL) || (kind == DEPTHWISE && p->out_c != p->in_c))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: requantize_multipliers has %u entries: %d multipliers and the "
                   "folded window bias need a constant convolution or depth-multiplier-1 depthwise", op,
                   (unsigned)et_tensor_numel(mt), (int)n);
  const int32_t *mv = (const int32_t *)mt->data, *sv = (const int32_t *)st->data;
  const int32_t *tail = mv + n, *b = bias ? (const int32_t *)bias->data : NULL;
  const int8_t *wv = (const int8_t *)w->data;
  const int32_t taps = p->k_h * p->k_w, k = kind == CONV ? taps * (p->in_c / p->groups) : taps;
  for (int32_t o = 0; o < n; o++) {
    uint32_t ws = 0;
    for (int32_t t = 0; t < k; t++) ws += (uint32_t)(kind == CONV ? wv[(size_t)o * k + t] : wv[(size_t)t * n + o]);
    const int32_t want = (int32_t)((b ? (uint32_t)b[o] : 0u) + (uint32_t)p->input_offset * ws);
    if (tail[o] != want)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: folded window bias of channel %d is %ld, the weights give %ld", op,
                     (int)o, (long)tail[o], (long)want);
  }
  const size_t total = et_tensor_numel(mt);
  const int32_t nb = kind == CONV ? (int32_t)(total - (size_t)n) : n; /* conv: padded, or the older 2 x out_c */
  for (int32_t o = n; o < nb; o++)
    if (tail[o] != 0)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: folded window bias of padding channel %d is %ld, not 0", op, (int)o,
                     (long)tail[o]);
  if (kind != DEPTHWISE || total == 2 * (size_t)n) return ET_OK;
  static const char *const what[3] = {"folded window bias", "multiplier", "shift"};
  const int32_t *blk = mv + 2 * n;
  for (int32_t c0 = 0; c0 < n; c0 += 16, blk += 48)
    for (int32_t part = 0; part < 3; part++)
      for (int32_t j = 0; j < 16; j++) {
        const int32_t c = c0 + j, *src = part == 0 ? tail : (part == 1 ? mv : sv);
        const int32_t want = c < n ? src[c] : 0;
        if (blk[16 * part + j] != want)
          return et_fail(ctx, ET_E_INVALID_ARG, "%s: 16-channel block of channel %d: %s is %ld, expected %ld", op,
                         (int)c, what[part], (long)blk[16 * part + j], (long)want);
      }
  return ET_OK;
}

/* The channels, groups and output size of the weight's geometry, into P (its input and kernel sizes set). */
static et_status conv_geometry(et_kernel_ctx *ctx, const char *op, conv_kind kind, const et_tensor *w, int32_t dm,
                               const int32_t opad[2], qconv_params *p) {
  if (kind == DEPTHWISE) {
    p->out_c = w->sizes[3];
    p->groups = p->in_c;
    if (w->sizes[0] != 1 || p->out_c != p->in_c * dm)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: weight must be [1,KH,KW,C*depth_multiplier] = [1,%d,%d,%d], got [%d,%d,%d,%d]",
                     op, (int)p->k_h, (int)p->k_w, (int)(p->in_c * dm), (int)w->sizes[0], (int)w->sizes[1],
                     (int)w->sizes[2], (int)w->sizes[3]);
  } else {
    p->out_c = w->sizes[0];
    const int32_t wi = w->sizes[3];
    if (wi <= 0 || p->in_c % wi)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: input has %d channels, not a multiple of the weight's %d", op,
                     (int)p->in_c, (int)wi);
    p->groups = p->in_c / wi;
    if (kind == TRANSPOSE && p->groups != 1)
      return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: grouped transposed convolution is not supported", op);
    if (p->out_c % p->groups)
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: %d output channels do not split into %d groups", op, (int)p->out_c,
                     (int)p->groups);
  }
  if (kind == TRANSPOSE) {
    p->out_h = (p->in_h - 1) * p->stride_h - 2 * p->pad_h + p->dil_h * (p->k_h - 1) + opad[0] + 1;
    p->out_w = (p->in_w - 1) * p->stride_w - 2 * p->pad_w + p->dil_w * (p->k_w - 1) + opad[1] + 1;
  } else {
    p->out_h = (p->in_h + 2 * p->pad_h - p->dil_h * (p->k_h - 1) - 1) / p->stride_h + 1;
    p->out_w = (p->in_w + 2 * p->pad_w - p->dil_w * (p->k_w - 1) - 1) / p->stride_w + 1;
  }
  return ET_OK;
}

/* The scratch tensor holds what the kernel's *_get_buffer_size asks for P. */
static et_status conv_scratch(et_kernel_ctx *ctx, const char *op, conv_kind kind, et_value **args,
                              const qconv_params *p) {
  size_t need = 0;
  if (kind == CONV) need = emk_conv2d_s8_get_buffer_size(p);
  if (kind == DEPTHWISE) need = emk_depthwise_conv2d_s8_get_buffer_size(p);
  et_tensor *scr = NULL;
  size_t have = 0;
  if (need) {
    CM_TRY(cm_tensor(ctx, op, args, kind == CONV ? CONV_SCRATCH : DEPTHWISE_SCRATCH, "scratch", false, &scr));
    have = scr->nbytes;
    if (have < need)
      return et_fail(ctx, ET_E_INVALID_ARG,
                     "%s: scratch tensor has %u bytes, the kernel needs %u (compile the program again with this "
                     "version of emlkit)", op, (unsigned)have, (unsigned)need);
  }
  return ET_OK;
}

/* Prepare: every argument check, at load. */
ET_PREPARE static et_status conv_prepare(et_kernel_ctx *ctx, const char *op, conv_kind kind, bool nhwc, et_value **args,
                                         uint32_t nargs) {
  /* schema positions differ: depthwise has depth_multiplier after dilation,
   * transpose has output_padding after padding and an extra scratch */
  const uint32_t nschema = kind == CONV ? CONV_OUT : (kind == DEPTHWISE ? DEPTHWISE_OUT : TRANSPOSE_OUT);
  CM_TRY(cm_nargs(ctx, op, nargs, nschema));
  et_tensor *in, *w, *bias, *mt, *st, *out;
  CM_TRY(cm_tensor(ctx, op, args, CONV_IN, "input", false, &in));
  CM_TRY(cm_tensor(ctx, op, args, CONV_WEIGHT, "weight", false, &w));
  CM_TRY(cm_tensor(ctx, op, args, CONV_BIAS, "bias", true, &bias));
  CM_TRY(cm_tensor(ctx, op, args, nschema, "out", false, &out));
  int32_t stride[2], pad[2], dil[2], opad[2] = {0, 0}, dm = 1;
  uint32_t i = CONV_STRIDE;
  CM_TRY(cm_pair(ctx, op, args, i++, "stride", 1, 4096, stride));
  CM_TRY(cm_pair(ctx, op, args, i++, "padding", 0, 4096, pad));
  if (kind == TRANSPOSE) CM_TRY(cm_pair(ctx, op, args, i++, "output_padding", 0, 4096, opad));
  CM_TRY(cm_pair(ctx, op, args, i++, "dilation", 1, 4096, dil));
  if (kind == DEPTHWISE) CM_TRY(cm_int(ctx, op, args, i++, "depth_multiplier", 1, 65536, &dm));
  qconv_params p;
  p.beff = p.dwblk = NULL; /* set from the multipliers tensor once it is checked */
  CM_TRY(cm_int(ctx, op, args, i++, "input_offset", -CM_MAX_OFFSET, CM_MAX_OFFSET, &p.input_offset));
  CM_TRY(cm_int(ctx, op, args, i++, "output_offset", -CM_MAX_OFFSET, CM_MAX_OFFSET, &p.output_offset));
  CM_TRY(cm_tensor(ctx, op, args, i++, "requantize_multipliers", false, &mt));
  CM_TRY(cm_tensor(ctx, op, args, i++, "requantize_shifts", false, &st));
  CM_TRY(cm_int(ctx, op, args, i++, "activation_min", -128, 127, &p.act_min));
  CM_TRY(cm_int(ctx, op, args, i++, "activation_max", -128, 127, &p.act_max));
  CM_TRY(cm_act(ctx, op, p.act_min, p.act_max));

  CM_TRY(cm_dtype(ctx, op, in, "input", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, w, "weight", ET_DT_CHAR));
  CM_TRY(cm_dtype(ctx, op, out, "out", ET_DT_CHAR));
  int32_t di[4] = {0}, dout[4] = {0};
  CM_TRY(cm_nhwc(ctx, op, in, "input", nhwc, di));
  CM_TRY(cm_nhwc(ctx, op, out, "out", nhwc, dout));
  CM_TRY(cm_rank(ctx, op, w, "weight", 4));
  CM_TRY(cm_contiguous(ctx, op, w, "weight (OHWI / 1HWO as stored by the AoT pass)"));
  p.batch = di[0], p.in_h = di[1], p.in_w = di[2], p.in_c = di[3];
  p.k_h = w->sizes[1], p.k_w = w->sizes[2];
  p.stride_h = stride[0], p.stride_w = stride[1], p.pad_h = pad[0], p.pad_w = pad[1];
  p.dil_h = dil[0], p.dil_w = dil[1];
  CM_TRY(conv_geometry(ctx, op, kind, w, dm, opad, &p));
  if (dout[0] != p.batch || dout[1] != p.out_h || dout[2] != p.out_w || dout[3] != p.out_c)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: out is NHWC [%d,%d,%d,%d] but the geometry gives [%d,%d,%d,%d]", op,
                   (int)dout[0], (int)dout[1], (int)dout[2], (int)dout[3], (int)p.batch, (int)p.out_h, (int)p.out_w,
                   (int)p.out_c);
  CM_TRY(cm_per_channel(ctx, op, bias, "bias", p.out_c));
  if (conv_extended(kind, &p, mt)) {
    CM_TRY(cm_dtype(ctx, op, st, "requantize_shifts", ET_DT_INT));
    CM_TRY(conv_window_bias(ctx, op, &p, kind, w, bias, mt, st));
    for (int32_t o = 0; o < p.out_c; o++)
      CM_TRY(cm_requant(ctx, op, "per-channel", ((const int32_t *)mt->data)[o], ((const int32_t *)st->data)[o]));
    conv_point_ext(kind, &p, mt);
  } else {
    CM_TRY(cm_requant_tensors(ctx, op, mt, st, p.out_c));
  }
  if (et_tensor_numel(out) == 0) return ET_OK;
  return conv_scratch(ctx, op, kind, args, &p);
}

/* Eval: unpack what prepare checked and run the kernel. */
static et_status conv_eval(et_kernel_ctx *ctx, const char *op, conv_kind kind, bool nhwc, et_value **args, uint32_t nargs) {
  (void)nargs;
  const uint32_t nschema = kind == CONV ? CONV_OUT : (kind == DEPTHWISE ? DEPTHWISE_OUT : TRANSPOSE_OUT);
  et_tensor *const in = args[CONV_IN]->u.t, *const w = args[CONV_WEIGHT]->u.t, *const bias = cm_t(args, CONV_BIAS);
  et_tensor *const out = args[nschema]->u.t;
  if (et_tensor_numel(out) == 0) return ET_OK;
  int32_t stride[2], pad[2], dil[2], di[4], dout[4];
  uint32_t i = CONV_STRIDE;
  cm_pair_get(args, i++, stride);
  cm_pair_get(args, i++, pad);
  if (kind == TRANSPOSE) i++; /* output_padding: out's checked sizes include it */
  cm_pair_get(args, i++, dil);
  if (kind == DEPTHWISE) i++; /* depth_multiplier: out_c = in_c * dm, checked */
  qconv_params p;
  p.input_offset = cm_i(args, i++);
  p.output_offset = cm_i(args, i++);
  const et_tensor *const mt = args[i]->u.t, *const st = args[i + 1]->u.t;
  i += 2;
  p.act_min = cm_i(args, i++);
  p.act_max = cm_i(args, i++);
  cm_nhwc_get(in, nhwc, di);
  cm_nhwc_get(out, nhwc, dout);
  p.batch = di[0], p.in_h = di[1], p.in_w = di[2], p.in_c = di[3];
  p.out_h = dout[1], p.out_w = dout[2], p.out_c = dout[3];
  p.k_h = w->sizes[1], p.k_w = w->sizes[2];
  p.stride_h = stride[0], p.stride_w = stride[1], p.pad_h = pad[0], p.pad_w = pad[1];
  p.dil_h = dil[0], p.dil_w = dil[1];
  p.groups = kind == DEPTHWISE ? p.in_c : p.in_c / w->sizes[3];
  conv_point_ext(kind, &p, mt);
  size_t need = 0;
  if (kind == CONV) need = emk_conv2d_s8_get_buffer_size(&p);
  if (kind == DEPTHWISE) need = emk_depthwise_conv2d_s8_get_buffer_size(&p);
  const et_tensor *const scr = need ? args[kind == CONV ? CONV_SCRATCH : DEPTHWISE_SCRATCH]->u.t : NULL;
  const size_t have = scr ? scr->nbytes : 0;
  void *sp = scr ? scr->data : NULL;
  const int32_t *b = bias ? (const int32_t *)bias->data : NULL;
  const int32_t *m = (const int32_t *)mt->data, *s = (const int32_t *)st->data;
  const int8_t *x = (const int8_t *)in->data, *wt = (const int8_t *)w->data;
  int8_t *y = (int8_t *)out->data;
  k_status ks = K_OK;
  switch (kind) {
    case CONV: ks = emk_conv2d_s8(&p, x, wt, b, m, s, y, sp, have); break;
    case DEPTHWISE: ks = emk_depthwise_conv2d_s8(&p, x, wt, b, m, s, y, sp, have); break;
    case TRANSPOSE: emk_transpose_conv2d_s8(&p, x, wt, b, m, s, y); break;
  }
  if (ks != K_OK)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: the kernel refused its scratch memory (%u bytes at %p: too small or "
                   "not 4-byte aligned)", op, (unsigned)have, sp);
  return ET_OK;
}

/* In place with a lead (registry.c k_in_place, the loader's check in method.c): the bytes by which a
 * depthwise call's output must start before its input (argument CONV_IN), and *step, the whole pixels (C
 * bytes) by which it may start further before it, for the kernels' rule (emk_depthwise_conv2d_s8_in_place_lead);
 * -1 when the call cannot overlap them. The loader asks before prepare has run: what is read here is checked
 * here, and arguments that do not check out give -1 (prepare then names the problem). Depth multiplier 1
 * only, as the kernels' rule. */
ET_PREPARE static int64_t conv_dw_lead(bool nhwc, et_value **args, uint32_t nargs, uint32_t k, uint32_t *step) {
  if (k != CONV_IN || (nargs != DEPTHWISE_OUT + 1 && nargs != DEPTHWISE_OUT + 2)) return -1;
  static const uint8_t slots[3] = {CONV_IN, CONV_WEIGHT, DEPTHWISE_OUT};
  for (uint32_t i = 0; i < 3; i++)
    if (args[slots[i]]->tag != ET_TAG_TENSOR || args[slots[i]]->u.t == NULL || args[slots[i]]->u.t->dim != 4) return -1;
  int32_t g[6]; /* stride, padding, dilation: 1 or 2 entries each, within prepare's bounds */
  for (uint32_t i = 0; i < 3; i++) {
    const et_value *v = args[CONV_STRIDE + i];
    if (v->tag != ET_TAG_INT_LIST || v->u.list.len < 1 || v->u.list.len > 2) return -1;
    for (uint32_t j = 0; j < 2; j++) {
      const int64_t x = et_list_int(v, j < v->u.list.len ? j : 0);
      if (x < (i == 1 ? 0 : 1) || x > 4096) return -1;
      g[2 * i + j] = (int32_t)x;
    }
  }
  const et_value *dm = args[CONV_PADDING + 2];
  const et_tensor *in = args[CONV_IN]->u.t, *w = args[CONV_WEIGHT]->u.t, *out = args[DEPTHWISE_OUT]->u.t;
  const uint8_t *order = nhwc ? cm_contig_order : cm_nhwc_order;
  if (dm->tag != ET_TAG_INT || dm->u.i != 1 || in->dtype != ET_DT_CHAR || out->dtype != ET_DT_CHAR ||
      !cm_layout_is(in, order) || !cm_layout_is(out, order) || w->sizes[0] != 1)
    return -1;
  int32_t di[4], dout[4];
  cm_nhwc_get(in, nhwc, di);
  cm_nhwc_get(out, nhwc, dout);
  qconv_params p = {0};
  p.batch = di[0], p.in_h = di[1], p.in_w = di[2], p.in_c = di[3], p.k_h = w->sizes[1], p.k_w = w->sizes[2];
  p.stride_h = g[0], p.stride_w = g[1], p.pad_h = g[2], p.pad_w = g[3], p.dil_h = g[4], p.dil_w = g[5];
  et_kernel_ctx c = {0}; /* no message buffer: a failed check only gives -1 */
  const int32_t opad[2] = {0, 0};
  /* the output is the geometry's: what the kernels' rule takes for the call */
  if (conv_geometry(&c, "", DEPTHWISE, w, 1, opad, &p) != ET_OK || dout[0] != p.batch || dout[1] != p.out_h ||
      dout[2] != p.out_w || dout[3] != p.out_c)
    return -1;
  return emk_depthwise_conv2d_s8_in_place_lead(&p, step);
}
int64_t op_cortex_m_quantized_depthwise_conv2d_out_lead(et_value **args, uint32_t nargs, uint32_t k, uint32_t *step);
int64_t op_cortex_m_quantized_depthwise_conv2d_out_lead(et_value **args, uint32_t nargs, uint32_t k, uint32_t *step) {
  return conv_dw_lead(false, args, nargs, k, step);
}
int64_t op_cortex_m_quantized_depthwise_conv2d_nhwc_out_lead(et_value **args, uint32_t nargs, uint32_t k,
                                                              uint32_t *step);
int64_t op_cortex_m_quantized_depthwise_conv2d_nhwc_out_lead(et_value **args, uint32_t nargs, uint32_t k,
                                                              uint32_t *step) {
  return conv_dw_lead(true, args, nargs, k, step);
}

/* The registry's entry points of the six conv ops: prepare and eval of cortex_m::NAME. */
#define CONV_OP(name, kind, nhwc) OP_ENTRIES(op_cortex_m_##name##_out, conv_eval, conv_prepare, "cortex_m::" #name, kind, nhwc)
CONV_OP(quantized_conv2d, CONV, false)
CONV_OP(quantized_conv2d_nhwc, CONV, true)
CONV_OP(quantized_depthwise_conv2d, DEPTHWISE, false)
CONV_OP(quantized_depthwise_conv2d_nhwc, DEPTHWISE, true)
CONV_OP(quantized_transpose_conv2d, TRANSPOSE, false)
CONV_OP(quantized_transpose_conv2d_nhwc, TRANSPOSE, true)
