/* The host library the toolkit asks about the firmware's own rules (emlkit/hostfw.py, through ctypes), so
 * that Python restates none of them:
 *   - what a program needs from the runtime (et_method_needs_get), with a device image's struct sizes;
 *   - which part of a board's regions the runner may use (boards/common/cortexm/region_bounds.h) and where
 *     it would place the program there (runtime/place.h);
 *   - the scratch each kernel asks for (the kernels' *_get_buffer_size) and the MVE path's kernel.
 * Every function writes its answer into the caller's buffer and returns 0, or a status and a message. */
#include <inttypes.h>

#include "et_fmt.h"
#include "backend.h"
#include "conv2d_s8.h"
#include "depthwise_conv2d_s8.h"
#include "ethosu_backend.h"
#include "kernels.h"
#include "place.h"
#include "runtime.h"
#include "../common/cortexm/region_bounds.h"

#define EXPORT __attribute__((visibility("default")))

static et_status register_backends(char *msg, size_t cap) {
  static bool done;
  static char npu_error[ET_MSG_CAP];
  if (done) return ET_OK;
  et_status st = et_backend_register(ethosu_backend(NULL, npu_error));
  if (st != ET_OK) et_snprintf(msg, cap, "cannot register the Ethos-U backend");
  done = st == ET_OK;
  return st;
}

/* What method 0 of the program `pte` (16-byte aligned) needs, as JSON, with the entry sizes `abi` (value,
 * tensor, op_slot, instr, pointer: a device image's, emlkit/deploy/fit.py) or NULL for this build. */
EXPORT int emq_program_needs(const uint8_t *pte, size_t len, const uint32_t *abi, char *out, size_t cap) {
  static et_program prog;
  et_status st = register_backends(out, cap);
  if (st != ET_OK) return (int)st;
  et_method_needs needs;
  st = et_program_load(&prog, pte, len);
  if (st == ET_OK) st = et_method_needs_get(&prog, NULL, &needs);
  if (st != ET_OK) {
    et_snprintf(out, cap, "%s", prog.msg);
    return (int)st;
  }
  const et_abi_sizes sizes = abi ? (et_abi_sizes){abi[0], abi[1], abi[2], abi[3], abi[4]} : (et_abi_sizes){0};
  const et_plan_counts *c = &needs.counts;
  size_t n = (size_t)et_snprintf(out, cap, "{\"arenas\": [");
  for (uint32_t k = 0; k < needs.n_arenas && n < cap; k++)
    n += (size_t)et_snprintf(out + n, cap - n, "%s%" PRIu64, k ? ", " : "", needs.arena_bytes[k]);
  if (n < cap)
    n += (size_t)et_snprintf(out + n, cap - n,
                             "], \"values\": %" PRIu32 ", \"tensors\": %" PRIu32 ", \"operators\": %" PRIu32
                             ", \"instructions\": %" PRIu32 ", \"arguments\": %" PRIu32 ", \"kernel_state\": %lu"
                             ", \"delegate_bytes\": %lu, \"runtime_bytes\": %lu}",
                             c->values, c->tensors, c->ops, c->instrs, c->args, (unsigned long)c->kernel_state,
                             (unsigned long)needs.delegate_bytes,
                             (unsigned long)et_runtime_bytes(c, abi ? &sizes : NULL));
  if (n >= cap) {
    et_snprintf(out, cap, "answer longer than %lu bytes", (unsigned long)cap);
    return (int)ET_E_INTERNAL;
  }
  return 0;
}

/* The runtime memory of a method with these counts (values, tensors, ops, instrs, args), kernel state and
 * entry sizes `abi` (as emq_program_needs). */
EXPORT uint64_t emq_runtime_bytes(const uint32_t *counts, uint64_t kernel_state, const uint32_t *abi) {
  const et_plan_counts c = {counts[0], counts[1], counts[2], counts[3], counts[4], (size_t)kernel_state};
  const et_abi_sizes sizes = {abi[0], abi[1], abi[2], abi[3], abi[4]};
  return et_runtime_bytes(&c, &sizes);
}

/* The runner's placement of a method with `n_arenas` planned arenas and the given runtime, scratch and
 * delegate bytes, then `after[n_after]` further blocks (the runner's warm-up output copy, ...), into the
 * regions (base, size) in order. where[i] gets each piece's region index, or -1 where none had room (the
 * pieces after it are still placed, so that a report can say what else would not fit); kind[i] and size[i]
 * name the piece: 0 arena (arena[i] its memory id - 1), 1 runtime, 2 scratch, 3 delegate, 4 a block of
 * `after`; for a piece without room, roomiest[i] is the region with the most bytes left then (where the report
 * charges it: there it comes closest to fitting). Returns the number of pieces. */
EXPORT uint32_t emq_place(const uint64_t *base, const uint64_t *size, uint32_t n_regions, const uint64_t *arena_bytes,
                          uint32_t n_arenas, uint64_t runtime, uint64_t scratch, uint64_t delegate, const uint64_t *after,
                          uint32_t n_after, int32_t *where, int32_t *kind, uint32_t *arena, uint64_t *piece_size,
                          int32_t *roomiest) {
  et_block blocks[16];
  if (n_regions > 16) n_regions = 16;
  for (uint32_t i = 0; i < n_regions; i++) blocks[i] = (et_block){(uintptr_t)base[i], (size_t)size[i], 0};
  et_method_needs needs = {.runtime_bytes = (size_t)runtime, .delegate_bytes = (size_t)delegate,
                           .n_arenas = n_arenas > ET_MAX_ARENAS ? ET_MAX_ARENAS : n_arenas};
  for (uint32_t k = 0; k < needs.n_arenas; k++) needs.arena_bytes[k] = arena_bytes[k];
  et_piece pieces[ET_MAX_PIECES];
  uint32_t np = et_method_pieces(&needs, (size_t)scratch, pieces), out = 0;
  for (uint32_t i = 0; i < np + n_after; i++, out++) {
    const size_t sz = i < np ? pieces[i].size : (size_t)after[i - np];
    size_t used[16];
    for (uint32_t r = 0; r < n_regions; r++) used[r] = blocks[r].used;
    const bool placed = et_place(blocks, n_regions, sz) != NULL;
    where[out] = roomiest[out] = -1;
    for (uint32_t r = 0; placed && r < n_regions; r++)
      if (blocks[r].used != used[r]) where[out] = (int32_t)r;
    for (uint32_t r = 0; !placed && r < n_regions; r++)
      if (roomiest[out] < 0 || blocks[r].size - blocks[r].used > blocks[roomiest[out]].size - blocks[roomiest[out]].used)
        roomiest[out] = (int32_t)r;
    kind[out] = i < np ? (int32_t)pieces[i].kind : 4;
    arena[out] = i < np ? pieces[i].arena : 0;
    piece_size[out] = sz;
  }
  return out;
}

/* The free part [*base, *end) of a Cortex-M board region (region_bounds.h); 0 when nothing is free. */
EXPORT int emq_region_bounds(int32_t shared, uint64_t model_used, uint64_t heap_end, uint64_t stack_limit, uint64_t *base,
                             uint64_t *end) {
  uintptr_t b = (uintptr_t)*base, e = (uintptr_t)*end;
  const int any = cortexm_region_bounds(shared, (uintptr_t)model_used, (uintptr_t)heap_end, (uintptr_t)stack_limit, &b, &e);
  *base = b, *end = e;
  return any;
}

static qconv_params conv_shape(int32_t in_c, int32_t out_c, int32_t k_h, int32_t k_w, int32_t stride_h, int32_t stride_w,
                               int32_t pad_h, int32_t pad_w, int32_t groups, int32_t input_offset) {
  qconv_params p = {0};
  p.in_c = in_c, p.out_c = out_c, p.k_h = k_h, p.k_w = k_w, p.stride_h = stride_h, p.stride_w = stride_w;
  p.pad_h = pad_h, p.pad_w = pad_w, p.dil_h = p.dil_w = 1, p.groups = groups, p.input_offset = input_offset;
  return p;
}

/* emk_conv2d_s8's scratch bytes and its MVE path's kernel for a shape. */
EXPORT uint64_t emq_conv2d_s8(int32_t in_c, int32_t out_c, int32_t k_h, int32_t k_w, int32_t stride_h, int32_t stride_w,
                              int32_t pad_h, int32_t pad_w, int32_t groups, int32_t input_offset, const char **path) {
  static const char *const names[] = {"conv_mve_general", "conv_k16 (weights in registers)", "conv_rows (direct)",
                                      "conv_rows (im2col)", "conv_xq (pixel row in registers)",
                                      "conv_xp (two pixels per weight load)"};
  const qconv_params p = conv_shape(in_c, out_c, k_h, k_w, stride_h, stride_w, pad_h, pad_w, groups, input_offset);
  *path = names[conv_mve_path_of(&p)];
  return emk_conv2d_s8_get_buffer_size(&p);
}

/* emk_depthwise_conv2d_s8's scratch bytes and MVE kernel; `folded` when the program carries the folded bias
 * and the per-16-channel blocks (emlkit/passes/window_bias.py). */
EXPORT uint64_t emq_depthwise_conv2d_s8(int32_t in_c, int32_t out_c, int32_t k_h, int32_t k_w, int32_t stride_h,
                                        int32_t stride_w, int32_t pad_h, int32_t pad_w, int32_t input_offset, int32_t folded,
                                        const char **path) {
  static const char *const names[] = {"dw_reference (depth multiplier not 1 or a multiple of 4)",
                                      "dw_as_conv (one input channel)", "dw_mult4 (depth multiplier)", "dw_16ch"};
  static const int32_t some = 0;
  qconv_params p = conv_shape(in_c, out_c, k_h, k_w, stride_h, stride_w, pad_h, pad_w, in_c, input_offset);
  if (folded) p.beff = p.dwblk = &some; /* only whether they are given counts */
  *path = names[dw_mve_path_of(&p)];
  return emk_depthwise_conv2d_s8_get_buffer_size(&p);
}

/* In place with a lead: the bytes by which a depthwise call's output must start before its input, and in
 * *step the whole steps by which it may start further before it (-1: it may not overlap the input), as the
 * loader checks it (firmware/ops/cortex_m_conv.c, emk_depthwise_conv2d_s8_in_place_lead). */
EXPORT int64_t emq_depthwise_conv2d_s8_lead(int32_t batch, int32_t in_h, int32_t in_w, int32_t in_c, int32_t out_h,
                                            int32_t out_w, int32_t out_c, int32_t k_h, int32_t k_w, int32_t stride_h,
                                            int32_t stride_w, int32_t pad_h, int32_t pad_w, int32_t dil_h, int32_t dil_w,
                                            uint32_t *step) {
  qconv_params p = conv_shape(in_c, out_c, k_h, k_w, stride_h, stride_w, pad_h, pad_w, in_c, 0);
  p.batch = batch, p.in_h = in_h, p.in_w = in_w, p.out_h = out_h, p.out_w = out_w, p.dil_h = dil_h, p.dil_w = dil_w;
  return emk_depthwise_conv2d_s8_in_place_lead(&p, step);
}

/* emk_avg_pool2d_s8's scratch bytes for a window over c channels. */
EXPORT uint64_t emq_avg_pool2d_s8(int32_t k_h, int32_t k_w, int32_t c) {
  qpool_params p = {0};
  p.k_h = k_h, p.k_w = k_w, p.c = c;
  return emk_avg_pool2d_s8_get_buffer_size(&p);
}
