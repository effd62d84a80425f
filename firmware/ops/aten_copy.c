/* Data-movement aten ops: views that copy, permute, dim-order conversion,
 * cat, slice, squeeze/unsqueeze. All work in logical index order so any dim
 * order on either side is handled. */
#include "aten_util.h"
#include "kernels_mve.h"

/* dst[k] = src[k] for the k-th element in logical row-major order of each
 * tensor (shapes may differ, element counts may not). Converts dtype. */
ET_PREPARE static et_status copy_logical_check(et_kernel_ctx *ctx, const char *op, const et_tensor *dst, const et_tensor *src) {
  if (et_tensor_numel(dst) != et_tensor_numel(src))
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: output has %lu elements, input %lu", op, (unsigned long)et_tensor_numel(dst),
                   (unsigned long)et_tensor_numel(src));
  return ET_OK;
}
/* The bytes are in logical row-major order: the dims of size above 1 in increasing order in the dim order
 * (an unsqueeze of a channels-last [N, 1, H, W] view, say, needs no walk). */
static bool memory_is_logical(const et_tensor *t) {
  int last = -1;
  for (uint8_t k = 0; k < t->dim; k++) {
    const int d = t->dim_order[k];
    if (t->sizes[d] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

/* (element counts checked at prepare; whether the data alias is known only now) */
static et_status copy_logical(et_kernel_ctx *ctx, const char *op, et_tensor *dst, const et_tensor *src) {
  size_t n = et_tensor_numel(dst);
  size_t es = et_dtype_size(dst->dtype);
  if (dst->dtype == src->dtype && memory_is_logical(dst) && memory_is_logical(src)) {
    if (dst->data != src->data) memmove(dst->data, src->data, n * es);
    return ET_OK;
  }
  if (dst->data == src->data) return et_fail(ctx, ET_E_NOT_SUPPORTED, "%s: in-place relayout is not supported", op);
  et_iter di, si;
  et_iter_init(&di, dst);
  et_iter_init(&si, src);
  uint8_t *o = dst->data;
  const uint8_t *in = src->data;
  for (size_t k = 0; k < n; k++) {
    if (dst->dtype == src->dtype) memcpy(o + di.off * es, in + si.off * es, es);
    else aten_store(dst->dtype, o, di.off, et_elem_as_double(src->dtype, in, si.off));
    et_iter_next(&di);
    et_iter_next(&si);
  }
  return ET_OK;
}

/* One row of a block copy: Helium moves 16 bytes per load/store pair and the
 * tail under a lane predicate; elsewhere the C library's memcpy. */
static inline void copy_row(uint8_t *d, const uint8_t *s, size_t n) {
#if FW_HAVE_MVE
  for (; n >= 16; n -= 16, d += 16, s += 16) vst1q_u8(d, vld1q_u8(s));
  if (n) {
    const mve_pred16_t p = vctp8q((uint32_t)n);
    vstrbq_p_u8(d, vldrbq_z_u8(s, p), p);
  }
#else
  memcpy(d, s, n);
#endif
}

#if FW_HAVE_MVE
/* cnt rows of `bytes` bytes (a multiple of 4, word-aligned rows and steps),
 * four rows per step: a vector of the four rows' addresses walks the row a
 * word at a time, one word gather and one word scatter with address
 * write-back per 16 bytes, so short rows (a channel concat's 8-24 bytes per
 * pixel) cost about as much per byte as long ones. The last 1-3 rows run
 * under a lane predicate. */
/* One asm loop per row length: the row's NW word gathers and scatters
 * unrolled, then both address vectors step to the next four rows. */
#define COPY_WORDS_CASE(NW)                                                  \
  case NW:                                                                   \
    __asm volatile("dls lr, %[n]\n"                                          \
                   "1:\n"                                                    \
                   ".rept " #NW "\n"                                         \
                   "vldrw.u32 %q[v], [%q[s], #4]!\n"                         \
                   "vstrw.32 %q[v], [%q[d], #4]!\n"                          \
                   ".endr\n"                                                 \
                   "vadd.i32 %q[s], %q[s], %[sj]\n"                          \
                   "vadd.i32 %q[d], %q[d], %[dj]\n"                          \
                   "le lr, 1b\n"                                             \
                   : [s] "+w"(sa), [d] "+w"(da), [v] "=&w"(v)                \
                   : [n] "r"(groups), [sj] "r"(sjump), [dj] "r"(djump)       \
                   : "lr", "memory");                                        \
    break;

static __attribute__((noinline)) void copy_rows_words(uint8_t *dp, const uint8_t *sp, int32_t cnt, size_t bytes, size_t dstep, size_t sstep) {
  const int32_t nw = (int32_t)(bytes / 4), groups = cnt / 4;
  const uint32x4_t lane = vidupq_n_u32(0, 1);
  const uint32x4_t soff = vmulq_n_u32(lane, (uint32_t)sstep), doff = vmulq_n_u32(lane, (uint32_t)dstep);
  /* pre-indexed write-back adds 4 before each access: start one word early;
   * after a row the addresses have moved on by `bytes`, the jump takes them
   * to the next four rows */
  uint32x4_t sa = vaddq_n_u32(soff, (uint32_t)(uintptr_t)sp - 4u), da = vaddq_n_u32(doff, (uint32_t)(uintptr_t)dp - 4u);
  const uint32_t sjump = (uint32_t)(4 * sstep - bytes), djump = (uint32_t)(4 * dstep - bytes);
  uint32x4_t v;
  if (groups > 0) {
    /* in asm: GCC 12 rejects the write-back gather/scatter intrinsics' immediates */
    switch (nw) {
      COPY_WORDS_CASE(1) COPY_WORDS_CASE(2) COPY_WORDS_CASE(3) COPY_WORDS_CASE(4) COPY_WORDS_CASE(5)
      COPY_WORDS_CASE(6) COPY_WORDS_CASE(7) COPY_WORDS_CASE(8) COPY_WORDS_CASE(9) COPY_WORDS_CASE(10)
      COPY_WORDS_CASE(11) COPY_WORDS_CASE(12) COPY_WORDS_CASE(13) COPY_WORDS_CASE(14) COPY_WORDS_CASE(15)
      default: break; /* the caller passes 4 <= bytes < 64 */
    }
  }
  (void)v;
  const int32_t r = groups * 4;
  if (r < cnt) {
    const mve_pred16_t p = vctp32q((uint32_t)(cnt - r));
    const uint32_t *s = (const uint32_t *)(const void *)(sp + (size_t)r * sstep);
    uint32_t *d = (uint32_t *)(void *)(dp + (size_t)r * dstep);
    for (int32_t c = 0; c < nw; c++) vstrwq_scatter_offset_p_u32(d + c, doff, vldrwq_gather_offset_z_u32(s + c, soff, p), p);
  }
}
#undef COPY_WORDS_CASE
#endif

#if FW_HAVE_MVE
/* Rows of `bytes` bytes (a multiple of 4, under 64) from a contiguous source
 * to destination rows dstep apart (a channel concat's inputs): the source is
 * read with plain 16-byte loads and each vector is scattered by one word
 * scatter whose offsets, held in q1-q6, cover nv = 5 or 6 vectors; after them
 * the destination base moves on by the rows those vectors filled. About
 * (2 nv + 2) / (16 nv) instructions per byte (0.146 at nv = 6). The offsets
 * depend only on bytes and dstep, so a cat's equal inputs share one plan. */
typedef struct {
  uint32_t off[24];    /* byte offsets of each word of one loop step (VLDRW: word-aligned) */
  uint32_t bytes, dstep, nv, step_rows;           /* bytes 0: no plan yet; nv 0: no scatter form */
} scatter_plan;

static void scatter_plan_make(scatter_plan *sp, uint32_t bytes, uint32_t dstep) {
  sp->bytes = bytes, sp->dstep = dstep, sp->nv = 0;
  /* one period: k vectors fill `rows` rows exactly (16 k = rows * bytes) */
  uint32_t k = bytes, rows = 16;
  while ((k & 1u) == 0 && (rows & 1u) == 0) k >>= 1, rows >>= 1;
  if (k > 6) return;
  const uint32_t periods = 6 / k;
  sp->nv = periods * k, sp->step_rows = periods * rows;
  uint32_t *off = sp->off;
  if ((bytes & (bytes - 1)) == 0) { /* 4, 8, 16, 32: row and column of each word by shift and mask */
    const int32x4_t sh = vdupq_n_s32(-(int32_t)(31 - __builtin_clz(bytes)));
    uint32x4_t b = vidupq_n_u32(0, 4);
    for (uint32_t j = 0; j < sp->nv; j++, b = vaddq_n_u32(b, 16))
      vstrwq_u32(off + 4 * j, vaddq_u32(vmulq_n_u32(vshlq_u32(b, sh), dstep), vandq_u32(b, vdupq_n_u32(bytes - 1))));
    return;
  }
  uint32_t col = 0, base = 0;
  for (uint32_t i = 0; i < 4 * k; i++) { /* the first period word by word */
    off[i] = base + col;
    col += 4;
    if (col == bytes) col = 0, base += dstep;
  }
  for (uint32_t i = 4 * k; i < 4 * sp->nv; i++) off[i] = off[i - 4 * k] + rows * dstep; /* later periods */
}

#define SCATTER_LOOP(LIST)                                                                      \
  __asm volatile("vldrw.u32 q1, [%[t]]\n"                                                       \
                 "vldrw.u32 q2, [%[t], #16]\n"                                                  \
                 "vldrw.u32 q3, [%[t], #32]\n"                                                  \
                 "vldrw.u32 q4, [%[t], #48]\n"                                                  \
                 "vldrw.u32 q5, [%[t], #64]\n"                                                  \
                 "vldrw.u32 q6, [%[t], #80]\n"                                                  \
                 "dls lr, %[n]\n"                                                               \
                 "1:\n"                                                                         \
                 ".irp q, " LIST "\n"                                                           \
                 "vldrw.u32 q0, [%[s]], #16\n"                                                  \
                 "vstrw.32 q0, [%[d], \\q]\n"                                                   \
                 ".endr\n"                                                                      \
                 "add %[d], %[d], %[dj]\n"                                                      \
                 "le lr, 1b\n"                                                                  \
                 : [s] "+r"(s), [d] "+r"(d)                                                     \
                 : [n] "r"(steps), [t] "r"(pl->off), [dj] "r"(djump)                            \
                 : "lr", "memory", "d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", \
                   "d11", "d12", "d13")

/* All cnt rows by the plan: whole loop steps in asm, the last rows (a prefix
 * of one step) by predicated scatters with the same offsets. */
static __attribute__((noinline)) void copy_rows_scatter(const scatter_plan *pl, uint8_t *d, const uint8_t *s, int32_t cnt) {
  const int32_t steps = cnt / (int32_t)pl->step_rows;
  const uint32_t djump = pl->step_rows * pl->dstep;
  if (steps > 0) {
    if (pl->nv == 6) SCATTER_LOOP("q1, q2, q3, q4, q5, q6");
    else SCATTER_LOOP("q1, q2, q3, q4, q5"); /* 6 / k * k is 5 or 6 for k <= 6 */
  }
  uint32_t words = (uint32_t)(cnt - steps * (int32_t)pl->step_rows) * pl->bytes / 4;
  for (const uint32_t *o = pl->off; words > 0; o += 4, s += 16) {
    const mve_pred16_t p = vctp32q(words);
    vstrwq_scatter_offset_p_u32((uint32_t *)(void *)d, vldrwq_u32(o), vldrwq_z_u32((const uint32_t *)(const void *)s, p), p);
    words = words > 4 ? words - 4 : 0;
  }
}
#undef SCATTER_LOOP
#endif

/* cnt rows of `bytes` bytes, dstep and sstep bytes apart. `plan` (MVE: NULL
 * or a scatter plan that the caller keeps across calls) saves recomputing
 * the scatter offsets for rows of the same shape. */
static void copy_rows(uint8_t *dp, const uint8_t *sp, int32_t cnt, size_t bytes, size_t dstep, size_t sstep, void *plan) {
#if FW_HAVE_MVE
  /* rows under 64 bytes in word-aligned places: from a contiguous source by
   * scatters (above), else four rows per vector; longer rows move 16 bytes
   * per load/store pair anyway */
  if (bytes >= 4 && bytes < 64 && cnt >= 4 &&
      (((uintptr_t)dp | (uintptr_t)sp | (uintptr_t)dstep | (uintptr_t)sstep | (uintptr_t)bytes) & 3u) == 0) {
    if (sstep == bytes) {
      scatter_plan local, *pl = plan ? (scatter_plan *)plan : &local;
      if (plan == NULL || pl->bytes != bytes || pl->dstep != dstep) scatter_plan_make(pl, (uint32_t)bytes, (uint32_t)dstep);
      if (pl->nv) {
        copy_rows_scatter(pl, dp, sp, cnt);
        return;
      }
    }
    copy_rows_words(dp, sp, cnt, bytes, dstep, sstep);
    return;
  }
#else
  (void)plan;
#endif
  switch (bytes) {
    case 1: for (int32_t i = 0; i < cnt; i++, dp += dstep, sp += sstep) *dp = *sp; break;
    case 2: for (int32_t i = 0; i < cnt; i++, dp += dstep, sp += sstep) memcpy(dp, sp, 2); break;
    case 4: for (int32_t i = 0; i < cnt; i++, dp += dstep, sp += sstep) memcpy(dp, sp, 4); break;
    case 8: for (int32_t i = 0; i < cnt; i++, dp += dstep, sp += sstep) memcpy(dp, sp, 8); break;
    case 16: for (int32_t i = 0; i < cnt; i++, dp += dstep, sp += sstep) memcpy(dp, sp, 16); break;
    case 24: for (int32_t i = 0; i < cnt; i++, dp += dstep, sp += sstep) memcpy(dp, sp, 24); break;
    case 32: for (int32_t i = 0; i < cnt; i++, dp += dstep, sp += sstep) memcpy(dp, sp, 32); break;
    default: for (int32_t i = 0; i < cnt; i++, dp += dstep, sp += sstep) copy_row(dp, sp, bytes); break;
  }
}

/* Copy through explicit iterators (both walk the same logical sizes). The
 * dims are taken in the destination's memory order, and the innermost ones
 * that are contiguous on both sides are merged into one run, so cat, slice
 * and layout copies move whole rows; layouts with no common contiguous run
 * move rows of one element (a transposing copy). */
void aten_copy_iters(uint8_t *o, et_iter *di, const uint8_t *in, et_iter *si, size_t n, size_t es) {
  if (n == 0) return;
  const uint8_t nd = di->dim;
  uint8_t ord[ET_MAX_DIM];
  uint8_t m = 0;
  for (uint8_t d = 0; d < nd; d++)
    if (di->sizes[d] != 1) ord[m++] = d; /* size-1 dims move nothing */
  /* destination memory order: largest stride first (insertion sort, at most ET_MAX_DIM) */
  for (uint8_t i = 1; i < m; i++)
    for (uint8_t j = i; j > 0 && di->stride[ord[j]] > di->stride[ord[j - 1]]; j--) {
      const uint8_t t = ord[j];
      ord[j] = ord[j - 1], ord[j - 1] = t;
    }
  size_t run = 1;
  while (m > 0) {
    const uint8_t d = ord[m - 1];
    if (di->stride[d] != run || si->stride[d] != run) break;
    run *= (size_t)di->sizes[d];
    m--;
  }
  /* (no common contiguous run: rows of one element) outer dims that are
   * contiguous over each other on both sides walk as one (a channel concat
   * in NHWC: H and W become one loop of H*W rows) */
  uint8_t w = 0;
  int32_t osize[ET_MAX_DIM];
  size_t dstr[ET_MAX_DIM], sstr[ET_MAX_DIM];
  for (uint8_t i = 0; i < m; i++) {
    const uint8_t d = ord[i];
    if (w > 0 && dstr[w - 1] == di->stride[d] * (size_t)di->sizes[d] && sstr[w - 1] == si->stride[d] * (size_t)di->sizes[d]) {
      osize[w - 1] *= di->sizes[d];
      dstr[w - 1] = di->stride[d], sstr[w - 1] = si->stride[d];
      continue;
    }
    osize[w] = di->sizes[d], dstr[w] = di->stride[d], sstr[w] = si->stride[d];
    w++;
  }
  /* element rows (a transposing copy): the longest dim is the row loop, whatever its place in memory, so the
   * odometer steps once per row, not once per few elements (NCHW -> NHWC with 2 channels: rows of 2) */
  if (run == 1 && w >= 2) {
    uint8_t b = (uint8_t)(w - 1);
    for (uint8_t i = 0; i + 1 < w; i++)
      if (osize[i] > osize[b]) b = i;
    const int32_t ts = osize[b];
    const size_t td = dstr[b], tsr = sstr[b];
    osize[b] = osize[w - 1], dstr[b] = dstr[w - 1], sstr[b] = sstr[w - 1];
    osize[w - 1] = ts, dstr[w - 1] = td, sstr[w - 1] = tsr;
  }
  const size_t bytes = run * es;
  if (w == 0) {
    memcpy(o + di->off * es, in + si->off * es, bytes);
    return;
  }
  /* the innermost outer dim is one call of row copies; an odometer walks the dims above it */
  const int32_t cnt = osize[w - 1];
  const size_t dstep = dstr[w - 1] * es, sstep = sstr[w - 1] * es;
  int32_t idx[ET_MAX_DIM] = {0};
  size_t doff = di->off, soff = si->off;
  for (;;) {
    copy_rows(o + doff * es, in + soff * es, cnt, bytes, dstep, sstep, NULL);
    int k = (int)w - 2;
    for (; k >= 0; k--) {
      doff += dstr[k], soff += sstr[k];
      if (++idx[k] < osize[k]) break;
      doff -= dstr[k] * (size_t)osize[k], soff -= sstr[k] * (size_t)osize[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

/* Equally ordered tensors (prepare checked everything else): a copy along
 * logical dim `dim` is `outer` rows, one per index of the dims above it in
 * memory, of `inner` elements per index of `dim` (the dims below it). */
static inline void dim_rows(const et_tensor *t, uint8_t dim, size_t *outer, size_t *inner) {
  size_t a = 1, b = 1;
  uint8_t k = 0;
  for (; k < t->dim && t->dim_order[k] != dim; k++) a *= (size_t)t->sizes[t->dim_order[k]];
  for (k++; k < t->dim; k++) b *= (size_t)t->sizes[t->dim_order[k]];
  *outer = a, *inner = b;
}
static inline bool same_order(const et_tensor *a, const et_tensor *b) {
  for (uint8_t k = 0; k < a->dim; k++)
    if (a->dim_order[k] != b->dim_order[k]) return false;
  return true;
}

ET_PREPARE static et_status same_dtype(et_kernel_ctx *ctx, const char *op, const et_tensor *a, const et_tensor *b) {
  if (a->dtype != b->dtype)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dtype %s in, %s out", op, et_dtype_name(a->dtype), et_dtype_name(b->dtype));
  return ET_OK;
}

/* Argument slots (the operators' schemas, then ret). Every one-input copy takes self first; the squeeze family
 * (squeeze_copy.dims_out (self, dim[], out), .dim_out (self, dim, out), .out (self, out), unsqueeze_copy
 * (self, dim, out)) finds out at ATEN_OUT_SLOT(nargs). */
enum { ONE_IN_SELF };
enum { VIEW_SELF, VIEW_SIZE, VIEW_OUT };
enum { PERMUTE_SELF, PERMUTE_DIMS, PERMUTE_OUT };
enum { DIM_ORDER_SELF, DIM_ORDER_NON_BLOCKING, DIM_ORDER_DIM_ORDER, DIM_ORDER_OUT };
enum { CLONE_SELF, CLONE_MEMORY_FORMAT, CLONE_OUT };
enum { ALIAS_SELF, ALIAS_OUT };
enum { CAT_TENSORS, CAT_DIM, CAT_OUT };
enum { SLICE_SELF, SLICE_DIM, SLICE_START, SLICE_END, SLICE_STEP, SLICE_OUT };

/* The common head of the one-input copies: nargs, a tensor `self` first and
 * `out` at out_i, of one dtype. */
ET_PREPARE static et_status self_out_args(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs, uint32_t want,
                                          uint32_t out_i, et_tensor **self, et_tensor **out) {
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, want)) || (st = aten_tensor(ctx, op, args, ONE_IN_SELF, self)) ||
      (st = aten_tensor(ctx, op, args, out_i, out)) || (st = same_dtype(ctx, op, *self, *out)))
    return st;
  return ET_OK;
}

ET_PREPARE et_status aten_view_copy_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::view_copy";
  et_tensor *self = NULL, *out = NULL;
  et_status st;
  if ((st = self_out_args(ctx, op, args, nargs, 4, VIEW_OUT, &self, &out))) return st;
  if (args[VIEW_SIZE]->tag != ET_TAG_INT_LIST || args[VIEW_SIZE]->u.list.len != out->dim)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: size list does not match the output rank", op);
  for (uint32_t d = 0; d < out->dim; d++) {
    int64_t s = et_list_int(args[VIEW_SIZE], d);
    if (s != -1 && s != out->sizes[d]) return et_fail(ctx, ET_E_INVALID_ARG, "%s: size list disagrees with the output shape", op);
  }
  return copy_logical_check(ctx, op, out, self);
}
et_status aten_view_copy_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  return copy_logical(ctx, "aten::view_copy", args[VIEW_OUT]->u.t, args[VIEW_SELF]->u.t);
}

ET_PREPARE static et_status squeeze_like_prepare(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs, uint32_t want) {
  et_tensor *self = NULL, *out = NULL;
  et_status st;
  if ((st = self_out_args(ctx, op, args, nargs, want, ATEN_OUT_SLOT(want), &self, &out))) return st;
  return copy_logical_check(ctx, op, out, self);
}
static et_status squeeze_like(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs) {
  return copy_logical(ctx, op, args[ATEN_OUT_SLOT(nargs)]->u.t, args[ONE_IN_SELF]->u.t);
}
ET_PREPARE et_status aten_squeeze_copy_dims_out_prepare(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return squeeze_like_prepare(ctx, "aten::squeeze_copy.dims_out", a, n, 4); }
ET_PREPARE et_status aten_squeeze_copy_dim_out_prepare(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return squeeze_like_prepare(ctx, "aten::squeeze_copy.dim_out", a, n, 4); }
ET_PREPARE et_status aten_squeeze_copy_out_prepare(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return squeeze_like_prepare(ctx, "aten::squeeze_copy.out", a, n, 3); }
ET_PREPARE et_status aten_unsqueeze_copy_out_prepare(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return squeeze_like_prepare(ctx, "aten::unsqueeze_copy", a, n, 4); }
et_status aten_squeeze_copy_dims_out(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return squeeze_like(ctx, "aten::squeeze_copy.dims_out", a, n); }
et_status aten_squeeze_copy_dim_out(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return squeeze_like(ctx, "aten::squeeze_copy.dim_out", a, n); }
et_status aten_squeeze_copy_out(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return squeeze_like(ctx, "aten::squeeze_copy.out", a, n); }
et_status aten_unsqueeze_copy_out(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return squeeze_like(ctx, "aten::unsqueeze_copy", a, n); }

ET_PREPARE et_status aten_permute_copy_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::permute_copy";
  et_tensor *self = NULL, *out = NULL;
  et_status st;
  if ((st = self_out_args(ctx, op, args, nargs, 4, PERMUTE_OUT, &self, &out))) return st;
  if (args[PERMUTE_DIMS]->tag != ET_TAG_INT_LIST || args[PERMUTE_DIMS]->u.list.len != self->dim || out->dim != self->dim)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dims list does not match the rank", op);
  unsigned seen = 0;
  for (uint8_t i = 0; i < self->dim; i++) {
    uint8_t d = 0;
    if ((st = aten_dim(ctx, op, et_list_int(args[PERMUTE_DIMS], i), self->dim, &d))) return st;
    if ((seen >> d) & 1u) return et_fail(ctx, ET_E_INVALID_ARG, "%s: dims repeat", op);
    seen |= 1u << d;
    if (out->sizes[i] != self->sizes[d]) return et_fail(ctx, ET_E_INVALID_ARG, "%s: output shape does not match the permutation", op);
  }
  return ET_OK;
}
et_status aten_permute_copy_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const et_tensor *const self = args[PERMUTE_SELF]->u.t;
  et_tensor *const out = args[PERMUTE_OUT]->u.t;
  size_t ss[ET_MAX_DIM], ps[ET_MAX_DIM];
  et_tensor_strides(self, ss);
  for (uint8_t i = 0; i < self->dim; i++) ps[i] = ss[aten_dim_get(et_list_int(args[PERMUTE_DIMS], i), self->dim)];
  et_iter di, si;
  et_iter_init(&di, out);
  et_iter_custom(&si, out->dim, out->sizes, ps, 0);
  aten_copy_iters(out->data, &di, self->data, &si, et_tensor_numel(out), et_dtype_size(out->dtype));
  return ET_OK;
}

/* dim_order argument (None or int list) must describe the output's layout. */
ET_PREPARE static et_status check_dim_order_arg(et_kernel_ctx *ctx, const char *op, const et_value *v, const et_tensor *out) {
  if (v->tag == ET_TAG_NONE) {
    if (!et_dim_order_is_identity(out)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: no dim_order given but output is not contiguous", op);
    return ET_OK;
  }
  if (v->tag != ET_TAG_INT_LIST || v->u.list.len != out->dim)
    return et_fail(ctx, ET_E_INVALID_ARG, "%s: dim_order does not match the output rank", op);
  /* Equal up to size-1 dims: the emitter derives the tensor's order from strides, so a channels-last
   * [1, 1, H, W] copy asks for 0,2,3,1 and its output says 0,2,1,3 (the same bytes). */
  et_tensor want = *out;
  for (uint32_t i = 0; i < out->dim; i++) {
    const int64_t d = et_list_int(v, i);
    if (d < 0 || d >= out->dim) return et_fail(ctx, ET_E_INVALID_ARG, "%s: dim_order entry out of range", op);
    want.dim_order[i] = (uint8_t)d;
  }
  if (!et_same_dim_order(&want, out)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: dim_order disagrees with the output tensor", op);
  return ET_OK;
}

ET_PREPARE static et_status dim_order_copy_prepare(et_kernel_ctx *ctx, const char *op, et_value **args, uint32_t nargs, bool allow_cast) {
  et_tensor *self = NULL, *out = NULL;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, 5)) || (st = aten_tensor(ctx, op, args, DIM_ORDER_SELF, &self)) ||
      (st = aten_tensor(ctx, op, args, DIM_ORDER_OUT, &out)) || (st = check_dim_order_arg(ctx, op, args[DIM_ORDER_DIM_ORDER], out)))
    return st;
  if (!allow_cast && (st = same_dtype(ctx, op, self, out))) return st;
  if (!aten_same_shape(self, out)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: input and output shapes differ", op);
  return ET_OK;
}
/* dst = src in dst's dim order, same dtype and sizes (checked at prepare):
 * a relayout moves rows (aten_copy_iters) where the runtime's et_copy_tensor
 * walks element by element. */
static et_status relayout(et_kernel_ctx *ctx, et_tensor *dst, const et_tensor *src) {
  if (dst->data == src->data || et_same_dim_order(dst, src)) return et_copy_tensor(ctx, dst, src);
  et_iter di, si;
  et_iter_init(&di, dst);
  et_iter_init(&si, src);
  aten_copy_iters(dst->data, &di, src->data, &si, et_tensor_numel(dst), et_dtype_size(dst->dtype));
  return ET_OK;
}
static et_status dim_order_copy(et_kernel_ctx *ctx, const char *op, et_value **args) {
  const et_tensor *const self = args[DIM_ORDER_SELF]->u.t;
  et_tensor *const out = args[DIM_ORDER_OUT]->u.t;
  if (self->dtype == out->dtype) return relayout(ctx, out, self);
  return copy_logical(ctx, op, out, self);
}
ET_PREPARE et_status aten_clone_dim_order_out_prepare(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return dim_order_copy_prepare(ctx, "dim_order_ops::_clone_dim_order", a, n, false); }
ET_PREPARE et_status aten_to_dim_order_copy_out_prepare(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return dim_order_copy_prepare(ctx, "dim_order_ops::_to_dim_order_copy", a, n, true); }
et_status aten_clone_dim_order_out(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return dim_order_copy(ctx, "dim_order_ops::_clone_dim_order", a); }
et_status aten_to_dim_order_copy_out(et_kernel_ctx *ctx, et_value **a, uint32_t n) { return dim_order_copy(ctx, "dim_order_ops::_to_dim_order_copy", a); }

/* A copy of self into an out of the same shape (clone, alias_copy): WANT arguments, out at OUT_I. */
ET_PREPARE static et_status same_shape_copy_prepare(et_kernel_ctx *ctx, const char *op, et_value **args,
                                                    uint32_t nargs, uint32_t want, uint32_t out_i) {
  et_tensor *self = NULL, *out = NULL;
  et_status st;
  if ((st = self_out_args(ctx, op, args, nargs, want, out_i, &self, &out))) return st;
  if (!aten_same_shape(self, out)) return et_fail(ctx, ET_E_INVALID_ARG, "%s: input and output shapes differ", op);
  return ET_OK;
}
ET_PREPARE et_status aten_clone_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  return same_shape_copy_prepare(ctx, "aten::clone", args, nargs, 4, CLONE_OUT);
}
et_status aten_clone_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  return relayout(ctx, args[CLONE_OUT]->u.t, args[CLONE_SELF]->u.t);
}

/* aten::alias_copy.out(self, *, out): a copy (a view the partitioner left outside an NPU delegate). */
ET_PREPARE et_status aten_alias_copy_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  return same_shape_copy_prepare(ctx, "aten::alias_copy", args, nargs, 3, ALIAS_OUT);
}
et_status aten_alias_copy_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)nargs;
  return relayout(ctx, args[ALIAS_OUT]->u.t, args[ALIAS_SELF]->u.t);
}

/* Whether the call's state (NULL: none; eval then plans per call) holds a
 * plan of `size` bytes: the registry entry's state bytes must cover it. */
ET_PREPARE static et_status plan_state(et_kernel_ctx *ctx, const char *op, size_t size) {
  if (ctx->state && ctx->state_size < size)
    return et_fail(ctx, ET_E_INTERNAL, "%s: the registry gives %u bytes of state, the plan needs %u", op,
                   (unsigned)ctx->state_size, (unsigned)size);
  return ET_OK;
}

/* aten::cat's plan, made at load into the call's state (aten_ops.def gives
 * its bytes): the output's rows and, for the first CAT_PLANNED inputs, the
 * bytes each adds to an output row (0: an empty input) and whether it has
 * the output's dim order (then it is `outer` row copies). Inputs past those
 * are planned per call; without state the whole plan is made per call. */
#define CAT_PLANNED 4
typedef struct {
  uint32_t outer, orow, inner; /* output rows, bytes per row, bytes per index of dim */
  uint32_t row[CAT_PLANNED];
  uint8_t dim, rows_ok[CAT_PLANNED];
#if FW_HAVE_MVE
  scatter_plan sp; /* the scatter offsets of the last row shape copied */
#endif
} cat_state;
_Static_assert(sizeof(cat_state) <= 152, "aten_ops.def gives aten::cat 152 bytes of state");

/* Input t's bytes per output row and whether row copies move it. */
static inline uint32_t cat_input(const cat_state *cs, const et_tensor *t, const et_tensor *out, bool *rows_ok) {
  *rows_ok = same_order(t, out);
  return et_tensor_numel(t) == 0 ? 0u : (uint32_t)t->sizes[cs->dim] * cs->inner;
}
static void cat_plan(cat_state *cs, et_value **args) {
  const et_tensor *const out = args[CAT_OUT]->u.t;
  const uint8_t dim = aten_dim_get(args[CAT_DIM]->u.i, out->dim);
  size_t outer, inner;
  dim_rows(out, dim, &outer, &inner);
  memset(cs, 0, sizeof *cs);
  cs->dim = dim, cs->outer = (uint32_t)outer, cs->inner = (uint32_t)(inner * et_dtype_size(out->dtype));
  cs->orow = (uint32_t)out->sizes[dim] * cs->inner;
  for (uint32_t i = 0; i < args[CAT_TENSORS]->u.list.len && i < CAT_PLANNED; i++) {
    bool ok;
    cs->row[i] = cat_input(cs, et_list_tensor(args[CAT_TENSORS], i), out, &ok);
    cs->rows_ok[i] = ok;
  }
}

ET_PREPARE et_status aten_cat_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::cat";
  et_tensor *out = NULL;
  uint8_t dim = 0;
  et_status st;
  if ((st = aten_nargs(ctx, op, nargs, 4)) || (st = aten_tensor(ctx, op, args, CAT_OUT, &out)) ||
      (st = aten_dim_arg(ctx, op, args, CAT_DIM, out->dim, &dim)))
    return st;
  if (args[CAT_TENSORS]->tag != ET_TAG_TENSOR_LIST) return et_fail(ctx, ET_E_INVALID_ARG, "%s: first argument is not a tensor list", op);
  int64_t at = 0;
  for (uint32_t i = 0; i < args[CAT_TENSORS]->u.list.len; i++) {
    const et_tensor *t = et_list_tensor(args[CAT_TENSORS], i);
    if (t == NULL) return et_fail(ctx, ET_E_INVALID_ARG, "%s: list item %u is not a tensor", op, (unsigned)i);
    if (et_tensor_numel(t) == 0) continue; /* legacy empty inputs are skipped, as in PyTorch */
    if ((st = same_dtype(ctx, op, t, out))) return st;
    bool ok = t->dim == out->dim;
    for (uint8_t d = 0; ok && d < out->dim; d++) ok = d == dim || t->sizes[d] == out->sizes[d];
    if (!ok || at + t->sizes[dim] > out->sizes[dim])
      return et_fail(ctx, ET_E_INVALID_ARG, "%s: input %u shape does not fit the output", op, (unsigned)i);
    at += t->sizes[dim];
  }
  if (at != out->sizes[dim]) return et_fail(ctx, ET_E_INVALID_ARG, "%s: inputs do not fill the output", op);
  if ((st = plan_state(ctx, op, sizeof(cat_state)))) return st;
  if (ctx->state) cat_plan((cat_state *)ctx->state, args); /* eval reads the plan */
  return ET_OK;
}
et_status aten_cat_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  cat_state local, *cs = (cat_state *)ctx->state;
  if (cs == NULL) cat_plan(cs = &local, args);
  et_tensor *const out = args[CAT_OUT]->u.t;
#if FW_HAVE_MVE
#define PLAN &cs->sp
#else
#define PLAN NULL
#endif
  uint32_t col = 0; /* bytes of each output row written so far */
  for (uint32_t i = 0; i < args[CAT_TENSORS]->u.list.len; i++) {
    const et_tensor *t = et_list_tensor(args[CAT_TENSORS], i);
    bool ok = i < CAT_PLANNED ? cs->rows_ok[i] : false;
    const uint32_t row = i < CAT_PLANNED ? cs->row[i] : cat_input(cs, t, out, &ok);
    if (row == 0) continue;
    if (ok && cs->outer == 1 && (const uint8_t *)t->data == (const uint8_t *)out->data + col) {
      /* planned in place (the loader's list_item_in_place): already there */
    } else if (ok) { /* each of the outer rows: this input's row at column col */
      copy_rows((uint8_t *)out->data + col, t->data, (int32_t)cs->outer, row, cs->orow, row, PLAN);
    } else {
      const size_t es = et_dtype_size(out->dtype);
      size_t os[ET_MAX_DIM];
      et_tensor_strides(out, os);
      et_iter di, si;
      et_iter_custom(&di, t->dim, t->sizes, os, col / es);
      et_iter_init(&si, t);
      aten_copy_iters(out->data, &di, t->data, &si, et_tensor_numel(t), es);
    }
    col += row;
  }
#undef PLAN
  (void)nargs;
  return ET_OK;
}

/* The slice's clamped start and length (PyTorch semantics: negative indices
 * count from the end, then clamp). */
static void slice_range(const et_value *sv, const et_value *ev, int64_t n, int64_t step, int64_t *start_out, int64_t *len) {
  int64_t start = sv->tag == ET_TAG_INT ? sv->u.i : 0;
  int64_t end = ev->tag == ET_TAG_INT ? ev->u.i : n;
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = start < 0 ? 0 : start > n ? n : start;
  end = end < start ? start : end > n ? n : end;
  *start_out = start;
  *len = (end - start + step - 1) / step;
}

/* aten::slice_copy's plan, made at load into the call's state: a step-1
 * slice of equally ordered tensors is `outer` rows of `row` bytes, read
 * `srow` bytes apart from byte `soff` of the input; other slices (fast 0)
 * walk iterators. Without state the plan is made per call. */
typedef struct {
  uint32_t outer, row, srow, soff, fast;
} slice_state;
_Static_assert(sizeof(slice_state) <= 24, "aten_ops.def gives aten::slice_copy 24 bytes of state");
static void slice_plan(slice_state *ss, et_value **args) {
  const et_tensor *const self = args[SLICE_SELF]->u.t, *const out = args[SLICE_OUT]->u.t;
  const uint8_t dim = aten_dim_get(args[SLICE_DIM]->u.i, self->dim);
  int64_t start, len;
  slice_range(args[SLICE_START], args[SLICE_END], self->sizes[dim], args[SLICE_STEP]->u.i, &start, &len);
  memset(ss, 0, sizeof *ss);
  if (args[SLICE_STEP]->u.i != 1 || !same_order(self, out)) return;
  size_t outer, inner;
  dim_rows(self, dim, &outer, &inner);
  inner *= et_dtype_size(out->dtype);
  ss->fast = 1, ss->outer = (uint32_t)outer, ss->row = (uint32_t)((size_t)len * inner);
  ss->srow = (uint32_t)((size_t)self->sizes[dim] * inner), ss->soff = (uint32_t)((size_t)start * inner);
}

ET_PREPARE et_status aten_slice_copy_tensor_out_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  const char *op = "aten::slice_copy";
  et_tensor *self = NULL, *out = NULL;
  int64_t step = 0;
  uint8_t dim = 0;
  et_status st;
  if ((st = self_out_args(ctx, op, args, nargs, 7, SLICE_OUT, &self, &out)) || (st = aten_dim_arg(ctx, op, args, SLICE_DIM, self->dim, &dim)) ||
      (st = aten_int(ctx, op, args, SLICE_STEP, &step)))
    return st;
  if (self->dim == 0 || step <= 0) return et_fail(ctx, ET_E_INVALID_ARG, "%s: needs rank >= 1 and step > 0", op);
  int64_t start, len;
  slice_range(args[SLICE_START], args[SLICE_END], self->sizes[dim], step, &start, &len);
  bool ok = out->dim == self->dim;
  for (uint8_t d = 0; ok && d < self->dim; d++) ok = out->sizes[d] == (d == dim ? len : self->sizes[d]);
  if (!ok) return et_fail(ctx, ET_E_INVALID_ARG, "%s: output shape does not match the slice", op);
  if ((st = plan_state(ctx, op, sizeof(slice_state)))) return st;
  if (ctx->state) slice_plan((slice_state *)ctx->state, args); /* eval reads the plan */
  return ET_OK;
}
et_status aten_slice_copy_tensor_out(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  slice_state local;
  const slice_state *pl = (const slice_state *)ctx->state;
  if (pl == NULL) slice_plan(&local, args), pl = &local;
  const et_tensor *const self = args[SLICE_SELF]->u.t;
  et_tensor *const out = args[SLICE_OUT]->u.t;
  (void)nargs;
  if (pl->fast) { /* each of the outer rows: a run of the input's row */
    copy_rows(out->data, (const uint8_t *)self->data + pl->soff, (int32_t)pl->outer, pl->row, pl->row, pl->srow, NULL);
    return ET_OK;
  }
  const uint8_t dim = aten_dim_get(args[SLICE_DIM]->u.i, self->dim);
  const int64_t step = args[SLICE_STEP]->u.i;
  int64_t start, len;
  slice_range(args[SLICE_START], args[SLICE_END], self->sizes[dim], step, &start, &len);
  size_t ss[ET_MAX_DIM];
  et_tensor_strides(self, ss);
  size_t base = (size_t)start * ss[dim];
  ss[dim] *= (size_t)step;
  et_iter di, si;
  et_iter_init(&di, out);
  et_iter_custom(&si, out->dim, out->sizes, ss, base);
  aten_copy_iters(out->data, &di, self->data, &si, et_tensor_numel(out), et_dtype_size(out->dtype));
  return ET_OK;
}
