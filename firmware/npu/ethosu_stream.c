/* Command stream bounds check: see ethosu_stream.h.
 *
 * The stream sets registers and then starts operations that use whatever values
 * are in force. This walk keeps the registers that decide what memory an
 * operation touches and, at each operation, computes the exact byte range of
 * every operand in its region, the way the hardware addresses it:
 *   feature map element (y, x, c) of tile t lives at
 *     BASE[t] + y*STRIDE_Y + x*STRIDE_X + c*esize              (NHWC)
 *     BASE[t] + y*STRIDE_Y + x*16*esize + (c/16)*STRIDE_C + (c%16)*esize (NHCWB16)
 *   with tile 0 = rows < HEIGHT0 and columns < WIDTH0, tile 1 = rows < HEIGHT1
 *   right of WIDTH0, tile 2 = rows >= HEIGHT0 left of WIDTH0 (rows restart at 0),
 *   tile 3 = rows >= HEIGHT1 right of WIDTH0;
 *   weights/scales: [BASE, BASE + LENGTH); DMA: [SRC, SRC + LEN), [DST, DST + LEN).
 * The IFM size of a convolution or pool follows from the OFM size, kernel,
 * stride and padding; with IFM upscaling (U55) the IFM is half that.
 * Register and field positions: Vela's ethos_u55_regs (U55/U65) and the U85
 * register description (emlkit/npu/regs_u85.py, checked against regor). */
#include <stddef.h>
#include "et_fmt.h"
#include "ethosu_stream.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

/* ---- opcodes (10-bit codes; cmd1 commands carry a 32-bit payload word) ---- */
enum {
  OP_STOP = 0x000, OP_IRQ = 0x001, OP_CONV = 0x002, OP_DEPTHWISE = 0x003, OP_POOL = 0x005, OP_ELEMENTWISE = 0x006,
  OP_RESIZE = 0x007, OP_DMA_START = 0x010, OP_DMA_WAIT = 0x011, OP_KERNEL_WAIT = 0x012, OP_PMU_MASK = 0x013,
  SET_IFM_PAD_TOP = 0x100, SET_IFM_PAD_LEFT = 0x101, SET_IFM_PAD_RIGHT = 0x102, SET_IFM_PAD_BOTTOM = 0x103,
  SET_IFM_DEPTH_M1 = 0x104, SET_IFM_PRECISION = 0x105, SET_IFM_UPSCALE = 0x107, SET_IFM_BROADCAST = 0x108,
  SET_IFM_WIDTH0_M1 = 0x10A, SET_IFM_HEIGHT0_M1 = 0x10B, SET_IFM_HEIGHT1_M1 = 0x10C, SET_IFM_REGION = 0x10F,
  SET_OFM_WIDTH_M1 = 0x111, SET_OFM_HEIGHT_M1 = 0x112, SET_OFM_DEPTH_M1 = 0x113, SET_OFM_PRECISION = 0x114,
  SET_OFM_WIDTH0_M1 = 0x11A, SET_OFM_HEIGHT0_M1 = 0x11B, SET_OFM_HEIGHT1_M1 = 0x11C, SET_OFM_REGION = 0x11F,
  SET_KERNEL_WIDTH_M1 = 0x120, SET_KERNEL_HEIGHT_M1 = 0x121, SET_KERNEL_STRIDE = 0x122, SET_ACC_FORMAT = 0x124,
  SET_WEIGHT_REGION = 0x128, SET_SCALE_REGION = 0x129, SET_DMA0_SRC_REGION = 0x130, SET_DMA0_DST_REGION = 0x131,
  SET_IFM2_BROADCAST = 0x180, SET_IFM2_PRECISION = 0x185, SET_IFM2_WIDTH0_M1 = 0x18A, SET_IFM2_HEIGHT0_M1 = 0x18B,
  SET_IFM2_HEIGHT1_M1 = 0x18C, SET_IFM2_REGION = 0x18F,
};
enum { /* cmd1 */
  SET_IFM_BASE0 = 0x000, SET_IFM_STRIDE_X = 0x004, SET_IFM_STRIDE_Y = 0x005, SET_IFM_STRIDE_C = 0x006,
  SET_OFM_BASE0 = 0x010, SET_OFM_STRIDE_X = 0x014, SET_OFM_STRIDE_Y = 0x015, SET_OFM_STRIDE_C = 0x016,
  SET_WEIGHT_BASE = 0x020, SET_WEIGHT_LENGTH = 0x021, SET_SCALE_BASE = 0x022, SET_SCALE_LENGTH = 0x023,
  SET_DMA0_SRC = 0x030, SET_DMA0_DST = 0x031, SET_DMA0_LEN = 0x032,
  SET_IFM2_BASE0 = 0x080, SET_IFM2_STRIDE_X = 0x084, SET_IFM2_STRIDE_Y = 0x085, SET_IFM2_STRIDE_C = 0x086,
  SET_WEIGHT1_BASE = 0x090, SET_WEIGHT1_LENGTH = 0x091, SET_U55_SCALE1_BASE = 0x092, SET_U55_SCALE1_LENGTH = 0x093,
  SET_U85_WEIGHT2_BASE = 0x092, SET_U85_WEIGHT2_LENGTH = 0x093, SET_U85_WEIGHT3_BASE = 0x094,
  SET_U85_WEIGHT3_LENGTH = 0x095, U85_OP_BRANCH = 0x100,
};

/* Known opcodes per architecture (ranges inclusive). */
typedef struct {
  uint16_t lo, hi;
} code_range;
static const code_range k_u55_cmd0[] = {{0x000, 0x003}, {0x005, 0x006}, {0x010, 0x013}, {0x100, 0x105}, {0x107, 0x107},
                                        {0x109, 0x10D}, {0x10F, 0x10F}, {0x111, 0x118}, {0x11A, 0x11C}, {0x11F, 0x129},
                                        {0x12D, 0x12D}, {0x12F, 0x133}, {0x180, 0x181}, {0x185, 0x185}, {0x189, 0x18D},
                                        {0x18F, 0x18F}};
static const code_range k_u55_cmd1[] = {{0x000, 0x006}, {0x010, 0x016}, {0x020, 0x026}, {0x030, 0x034}, {0x080, 0x086},
                                        {0x090, 0x093}};
static const code_range k_u85_cmd0[] = {{0x000, 0x003}, {0x005, 0x007}, {0x010, 0x013}, {0x100, 0x105}, {0x107, 0x10C},
                                        {0x10F, 0x10F}, {0x111, 0x118}, {0x11A, 0x11C}, {0x11F, 0x122}, {0x124, 0x134},
                                        {0x180, 0x180}, {0x185, 0x185}, {0x189, 0x18C}, {0x18F, 0x18F}};
static const code_range k_u85_cmd1[] = {{0x000, 0x006}, {0x010, 0x016}, {0x020, 0x027}, {0x030, 0x039}, {0x080, 0x086},
                                        {0x090, 0x097}, {0x100, 0x100}};

static bool known(const code_range *r, size_t n, uint32_t code) {
  for (size_t i = 0; i < n; i++)
    if (code >= r[i].lo && code <= r[i].hi) return true;
  return false;
}
#define KNOWN(table, code) known(table, sizeof table / sizeof table[0], code)

/* ---- register state ---- */
typedef struct {
  uint32_t base[4];
  uint32_t stride_x, stride_y, stride_c;
  uint16_t region, precision, width0_m1, height0_m1, height1_m1, broadcast;
} fm_regs;

typedef struct {
  fm_regs ifm, ifm2, ofm;
  uint16_t ifm_depth_m1, ifm_upscale, pad_top, pad_left, pad_right, pad_bottom;
  uint16_t ofm_width_m1, ofm_height_m1, ofm_depth_m1;
  uint16_t kernel_width_m1, kernel_height_m1, kernel_stride, acc_format;
  uint16_t weight_region, scale_region, dma_src_region, dma_dst_region;
  uint32_t weight_base[4], weight_len[4], scale_base[2], scale_len[2];
  uint32_t dma_src, dma_dst, dma_len;
} regs;

typedef struct {
  ethosu_arch arch;
  const uint64_t *limit;
  ethosu_stream_info *info;
  uint32_t offset; /* byte offset of the operation being checked */
  const char *op;
  char *msg;
  size_t cap;
} ctx;

static et_status fail(ctx *c, et_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static et_status fail(ctx *c, et_status st, const char *fmt, ...) {
  char detail[160];
  va_list ap;
  va_start(ap, fmt);
  et_vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  et_snprintf(c->msg, c->cap, "Ethos-U command stream, %s at offset 0x%06" PRIx32 ": %s", c->op, c->offset, detail);
  return st;
}

/* Record [start, end) in `region`; out of the bound region -> ET_E_NPU_STREAM. */
static et_status use(ctx *c, uint32_t region, uint64_t start, uint64_t end, bool write, const char *what) {
  if (end <= start) return ET_OK;
  if (region >= ETHOSU_REGIONS) return fail(c, ET_E_NPU_STREAM, "%s uses region %" PRIu32 ", which does not exist", what, region);
  if (end > c->limit[region])
    return fail(c, ET_E_NPU_STREAM, "%s %s bytes %" PRIu64 "..%" PRIu64 " of region %" PRIu32 ", which holds %" PRIu64,
                what, write ? "writes" : "reads", start, end, region, c->limit[region]);
  if (end > c->info->used[region]) c->info->used[region] = end;
  if (write) c->info->written |= (uint8_t)(1u << region);
  return ET_OK;
}

/* Element size and layout of a feature map from its PRECISION register;
 * storage: 0 memory, 1 chained (internal buffer), 2 none (no access). */
static et_status fm_format(ctx *c, const fm_regs *f, bool ofm, uint32_t *esize, bool *brick, int *storage,
                           const char *what) {
  uint32_t p = f->precision;
  *storage = 0;
  if (c->arch == ETHOSU_ARCH_U85) {
    static const uint32_t bits[4] = {1, 2, 4, 8};
    *esize = bits[(p >> (ofm ? 1 : 2)) & 3u];
    uint32_t s = (p >> 14) & 3u;
    if (s == 2) *storage = 1;
    else if (s == 3) *storage = 2;
    else if (s == 1) return fail(c, ET_E_NOT_SUPPORTED, "%s uses storage mode 1, which this firmware cannot bound", what);
  } else if (ofm) {
    uint32_t code = p & 7u;
    *esize = code <= 1 ? 1 : code <= 3 ? 2 : code == 5 ? 4 : 0;
  } else {
    uint32_t code = p & 0xFu;
    *esize = code <= 1 ? 1 : (code == 4 || code == 5) ? 2 : code == 9 ? 4 : 0;
  }
  if (*esize == 0) return fail(c, ET_E_DELEGATE_CORRUPT, "%s precision 0x%04" PRIx32 " selects no data type", what, p);
  uint32_t fmt = (p >> 6) & 3u;
  if (fmt > 1) return fail(c, ET_E_DELEGATE_CORRUPT, "%s precision selects layout %" PRIu32, what, fmt);
  *brick = fmt == 1;
  return ET_OK;
}

/* Highest byte offset (inclusive) of channel c in 0..ch-1 relative to an element's start. */
static uint64_t channel_span(uint64_t ch, uint32_t esize, bool brick, uint32_t stride_c) {
  if (!brick) return (ch - 1) * esize;
  uint64_t last = ((ch - 1) / 16) * stride_c + ((ch - 1) % 16) * esize;
  uint64_t full = ch > 16 ? ((ch - 1) / 16 - 1) * stride_c + 15u * esize : 0; /* channel 15 of the brick before */
  return last > full ? last : full;
}

/* Check a feature map of h x w x ch elements. */
static et_status fmap(ctx *c, const fm_regs *f, bool ofm, uint64_t h, uint64_t w, uint64_t ch, bool write, const char *what) {
  uint32_t esize = 0;
  bool brick = false;
  int storage = 0;
  et_status st = fm_format(c, f, ofm, &esize, &brick, &storage, what);
  if (st != ET_OK || storage != 0 || h == 0 || w == 0 || ch == 0) return st;
  uint64_t h0 = (uint64_t)f->height0_m1 + 1, h1 = (uint64_t)f->height1_m1 + 1, w0 = (uint64_t)f->width0_m1 + 1;
  uint64_t xstep = brick ? 16u * esize : f->stride_x;
  uint64_t cspan = channel_span(ch, esize, brick, f->stride_c);
  /* rows, columns per tile */
  uint64_t left = w < w0 ? w : w0, right = w > w0 ? w - w0 : 0;
  uint64_t rows[4] = {h < h0 ? h : h0, h < h1 ? h : h1, h > h0 ? h - h0 : 0, h > h1 ? h - h1 : 0};
  uint64_t cols[4] = {left, right, left, right};
  for (int t = 0; t < 4; t++) {
    if (rows[t] == 0 || cols[t] == 0) continue;
    uint64_t start = f->base[t];
    uint64_t end = start + (rows[t] - 1) * f->stride_y + (cols[t] - 1) * xstep + cspan + esize;
    st = use(c, f->region, start, end, write, what);
    if (st != ET_OK) return st;
  }
  return ET_OK;
}

static et_status stream(ctx *c, uint32_t region, uint32_t base, uint32_t len, bool write, const char *what) {
  return use(c, region, base, (uint64_t)base + len, write, what);
}

static et_status weights_and_scales(ctx *c, const regs *r, bool scales) {
  int nweights = c->arch == ETHOSU_ARCH_U85 ? 4 : 2;
  for (int i = 0; i < nweights; i++) {
    et_status st = stream(c, r->weight_region & 7u, r->weight_base[i], r->weight_len[i], false, "weight stream");
    if (st != ET_OK) return st;
  }
  if (!scales) return ET_OK;
  int nscales = c->arch == ETHOSU_ARCH_U85 ? 1 : 2;
  for (int i = 0; i < nscales; i++) {
    et_status st = stream(c, r->scale_region & 7u, r->scale_base[i], r->scale_len[i], false, "scale stream");
    if (st != ET_OK) return st;
  }
  return ET_OK;
}

/* The OFM as stored: on the U85 the OFM may be written transposed. */
static et_status ofm(ctx *c, const regs *r) {
  uint64_t d[3] = {(uint64_t)r->ofm_height_m1 + 1, (uint64_t)r->ofm_width_m1 + 1, (uint64_t)r->ofm_depth_m1 + 1};
  if (c->arch == ETHOSU_ARCH_U85) {
    /* activation_transpose: output axes as (h, w, c) indices */
    static const uint8_t perm[8][3] = {{0, 1, 2}, {1, 0, 2}, {0, 2, 1}, {1, 2, 0}, {0, 0, 0}, {0, 0, 0}, {2, 0, 1}, {2, 1, 0}};
    uint32_t code = (r->ofm.precision >> 11) & 7u;
    if (code == 4 || code == 5) return fail(c, ET_E_DELEGATE_CORRUPT, "OFM precision selects transpose %" PRIu32, code);
    if ((r->ofm.precision >> 9) & 3u) return fail(c, ET_E_NOT_SUPPORTED, "OFM reverse mode is not supported");
    uint64_t t[3] = {d[perm[code][0]], d[perm[code][1]], d[perm[code][2]]};
    memcpy(d, t, sizeof d);
  }
  return fmap(c, &r->ofm, true, d[0], d[1], d[2], true, "OFM");
}

/* IFM rows/columns a kernel window operation reads, from the OFM size. */
static et_status ifm_window(ctx *c, const regs *r, uint64_t *ih, uint64_t *iw) {
  uint32_t ks = r->kernel_stride;
  uint64_t sx = (uint64_t)(((((ks >> 6) & 7u) << 1) | (ks & 1u)) + 1);
  uint64_t sy = (uint64_t)(((((ks >> 9) & 7u) << 1) | ((ks >> 1) & 1u)) + 1);
  int64_t h = ((int64_t)r->ofm_height_m1) * (int64_t)sy + r->kernel_height_m1 + 1 - r->pad_top - r->pad_bottom;
  int64_t w = ((int64_t)r->ofm_width_m1) * (int64_t)sx + r->kernel_width_m1 + 1 - r->pad_left - r->pad_right;
  if (h <= 0 || w <= 0) return fail(c, ET_E_DELEGATE_CORRUPT, "kernel, stride and padding leave an empty IFM");
  uint32_t up = r->ifm_upscale & 3u;
  if (up == 3) return fail(c, ET_E_DELEGATE_CORRUPT, "IFM upscale mode 3 is reserved");
  if (up && c->arch == ETHOSU_ARCH_U85) return fail(c, ET_E_NOT_SUPPORTED, "IFM upscaling on the Ethos-U85 is not supported");
  if (up) { /* the U55 doubles the IFM (nearest or zero-filled) before the kernel sees it */
    h = (h + 1) / 2;
    w = (w + 1) / 2;
  }
  *ih = (uint64_t)h;
  *iw = (uint64_t)w;
  return ET_OK;
}

/* Dimensions of an elementwise operand under its broadcast register. */
static et_status elementwise_operand(ctx *c, const fm_regs *f, uint16_t bc, uint64_t oh, uint64_t ow, uint64_t oc,
                                     bool scalar, const char *what) {
  if (scalar) return ET_OK;
  uint64_t h = (bc & 1u) ? 1 : oh, w = (bc & 2u) ? 1 : ow, ch = (bc & 4u) ? 1 : oc;
  return fmap(c, f, false, h, w, ch, false, what);
}

static et_status operation(ctx *c, const regs *r, uint32_t code, uint32_t param) {
  uint64_t oh = (uint64_t)r->ofm_height_m1 + 1, ow = (uint64_t)r->ofm_width_m1 + 1, oc = (uint64_t)r->ofm_depth_m1 + 1;
  bool u85 = c->arch == ETHOSU_ARCH_U85;
  bool global_scale = (r->ofm.precision >> 8) & 1u;
  et_status st = ET_OK;
  uint64_t ih, iw;
  c->info->operations++;
  switch (code) {
    case OP_CONV:
    case OP_DEPTHWISE:
      c->op = code == OP_CONV ? "NPU_OP_CONV" : "NPU_OP_DEPTHWISE";
      if (u85 && code == OP_CONV && (param & 1u)) { /* weights from IFM2: a matmul of two feature maps */
        uint64_t ic = (uint64_t)r->ifm_depth_m1 + 1;
        if ((st = fmap(c, &r->ifm, false, oh, ow, ic, false, "IFM")) != ET_OK) return st;
        if ((st = fmap(c, &r->ifm2, false, oh, oc, ic, false, "IFM2")) != ET_OK) return st;
        if ((st = weights_and_scales(c, r, !global_scale)) != ET_OK) return st;
        return ofm(c, r);
      }
      if ((st = ifm_window(c, r, &ih, &iw)) != ET_OK) return st;
      if ((st = fmap(c, &r->ifm, false, ih, iw, code == OP_DEPTHWISE ? oc : (uint64_t)r->ifm_depth_m1 + 1, false, "IFM")) != ET_OK)
        return st;
      if ((st = weights_and_scales(c, r, true)) != ET_OK) return st;
      return ofm(c, r);
    case OP_POOL: {
      c->op = "NPU_OP_POOL";
      if (u85 && param == 4) { /* NONE: the accumulators come from IFM2 */
        if ((st = fmap(c, &r->ifm2, false, oh, ow, oc, false, "IFM2")) != ET_OK) return st;
      } else {
        if ((st = ifm_window(c, r, &ih, &iw)) != ET_OK) return st;
        uint64_t ic = param == 2 ? (uint64_t)r->ifm_depth_m1 + 1 : oc; /* REDUCE_SUM sums the IFM's channels */
        if ((st = fmap(c, &r->ifm, false, ih, iw, ic, false, "IFM")) != ET_OK) return st;
      }
      if (u85 && !global_scale && (st = weights_and_scales(c, r, true)) != ET_OK) return st;
      return ofm(c, r);
    }
    case OP_ELEMENTWISE: {
      c->op = "NPU_OP_ELEMENTWISE";
      if (u85) {
        if ((st = elementwise_operand(c, &r->ifm, r->ifm.broadcast, oh, ow, oc, r->ifm.broadcast & 8u, "IFM")) != ET_OK)
          return st;
        if ((st = elementwise_operand(c, &r->ifm2, r->ifm2.broadcast, oh, ow, oc, r->ifm2.broadcast & 8u, "IFM2")) != ET_OK)
          return st;
        if (!global_scale && (st = weights_and_scales(c, r, true)) != ET_OK) return st;
      } else {
        if ((st = fmap(c, &r->ifm, false, oh, ow, oc, false, "IFM")) != ET_OK) return st;
        bool unary = param == 5 || param == 6 || param == 7; /* LRELU, ABS, CLZ */
        if (!unary && (st = elementwise_operand(c, &r->ifm2, r->ifm2.broadcast, oh, ow, oc, r->ifm2.broadcast & 0x80u,
                                                "IFM2")) != ET_OK)
          return st;
      }
      return ofm(c, r);
    }
    case OP_DMA_START: {
      c->op = "NPU_OP_DMA_START";
      uint32_t sr = r->dma_src_region, dr = r->dma_dst_region;
      uint32_t mode_shift = 9;
      if ((sr >> mode_shift) || (dr >> mode_shift))
        return fail(c, ET_E_NOT_SUPPORTED, "2-D/3-D or indexed DMA is not supported by this firmware");
      uint32_t rmask = u85 ? 7u : 0xFFu;
      if (!((sr >> 8) & 1u) && (st = stream(c, sr & rmask, r->dma_src, r->dma_len, false, "DMA source")) != ET_OK) return st;
      if (!((dr >> 8) & 1u) && (st = stream(c, dr & rmask, r->dma_dst, r->dma_len, true, "DMA destination")) != ET_OK)
        return st;
      return ET_OK;
    }
    case OP_RESIZE:
      c->op = "NPU_OP_RESIZE";
      if (!u85) return fail(c, ET_E_DELEGATE_CORRUPT, "RESIZE is an Ethos-U85 operation");
      /* the U85 reads an IFM of KERNEL_HEIGHT x KERNEL_WIDTH (the resize's input size) at the OFM's depth */
      if ((st = fmap(c, &r->ifm, false, (uint64_t)r->kernel_height_m1 + 1, (uint64_t)r->kernel_width_m1 + 1, oc, false,
                     "IFM")) != ET_OK)
        return st;
      if (!global_scale && (st = weights_and_scales(c, r, true)) != ET_OK) return st;
      return ofm(c, r);
    default:
      c->info->operations--;
      return ET_OK; /* STOP, IRQ, waits, PMU mask: no memory */
  }
}

/* The tile geometry and region registers sit at the same offsets in the IFM
 * (0x10_), OFM (0x11_) and IFM2 (0x18_) blocks; false: not one of them. */
static bool set_fm0(fm_regs *f, uint32_t code, uint16_t p) {
  switch (code & 0xFu) {
    case SET_IFM_WIDTH0_M1 & 0xFu: f->width0_m1 = p; return true;
    case SET_IFM_HEIGHT0_M1 & 0xFu: f->height0_m1 = p; return true;
    case SET_IFM_HEIGHT1_M1 & 0xFu: f->height1_m1 = p; return true;
    case SET_IFM_REGION & 0xFu: f->region = p; return true;
    default: return false;
  }
}

/* The 16-bit registers a cmd0 sets directly (outside the IFM/OFM/IFM2 blocks' common ones): the command's code
 * and the uint16_t field of regs it sets. */
typedef struct {
  uint16_t code, off;
} reg16_field;
#define REG16(code, field) {code, (uint16_t)offsetof(regs, field)}
static const reg16_field k_cmd0_fields[] = {
    REG16(SET_IFM_PAD_TOP, pad_top),         REG16(SET_IFM_PAD_LEFT, pad_left),
    REG16(SET_IFM_PAD_RIGHT, pad_right),     REG16(SET_IFM_PAD_BOTTOM, pad_bottom),
    REG16(SET_IFM_DEPTH_M1, ifm_depth_m1),   REG16(SET_IFM_PRECISION, ifm.precision),
    REG16(SET_IFM_UPSCALE, ifm_upscale),     REG16(SET_IFM_BROADCAST, ifm.broadcast), /* Ethos-U85 only */
    REG16(SET_OFM_WIDTH_M1, ofm_width_m1),   REG16(SET_OFM_HEIGHT_M1, ofm_height_m1),
    REG16(SET_OFM_DEPTH_M1, ofm_depth_m1),   REG16(SET_OFM_PRECISION, ofm.precision),
    REG16(SET_KERNEL_WIDTH_M1, kernel_width_m1), REG16(SET_KERNEL_HEIGHT_M1, kernel_height_m1),
    REG16(SET_KERNEL_STRIDE, kernel_stride), REG16(SET_ACC_FORMAT, acc_format),
    REG16(SET_WEIGHT_REGION, weight_region), REG16(SET_SCALE_REGION, scale_region),
    REG16(SET_DMA0_SRC_REGION, dma_src_region), REG16(SET_DMA0_DST_REGION, dma_dst_region),
    REG16(SET_IFM2_BROADCAST, ifm2.broadcast), REG16(SET_IFM2_PRECISION, ifm2.precision),
};
#undef REG16

static void set_cmd0(regs *r, ethosu_arch arch, uint32_t code, uint16_t p) {
  const uint32_t block = code & ~0xFu;
  fm_regs *const f = block == (SET_IFM_REGION & ~0xFu)    ? &r->ifm
                     : block == (SET_OFM_REGION & ~0xFu)  ? &r->ofm
                     : block == (SET_IFM2_REGION & ~0xFu) ? &r->ifm2
                                                          : NULL;
  if (f && set_fm0(f, code, p)) return;
  if (code == SET_IFM_BROADCAST && arch != ETHOSU_ARCH_U85) return;
  for (size_t i = 0; i < sizeof k_cmd0_fields / sizeof k_cmd0_fields[0]; i++)
    if (k_cmd0_fields[i].code == code) {
      *(uint16_t *)(void *)((uint8_t *)r + k_cmd0_fields[i].off) = p;
      return;
    }
  /* other codes: registers that do not decide addresses */
}

static void set_fm1(fm_regs *f, uint32_t k, uint32_t v) {
  if (k < 4) f->base[k] = v;
  else if (k == 4) f->stride_x = v;
  else if (k == 5) f->stride_y = v;
  else if (k == 6) f->stride_c = v;
}

static void set_cmd1(regs *r, ethosu_arch arch, uint32_t code, uint32_t v) {
  if (code <= SET_IFM_STRIDE_C) set_fm1(&r->ifm, code - SET_IFM_BASE0, v);
  else if (code >= SET_OFM_BASE0 && code <= SET_OFM_STRIDE_C) set_fm1(&r->ofm, code - SET_OFM_BASE0, v);
  else if (code >= SET_IFM2_BASE0 && code <= SET_IFM2_STRIDE_C) set_fm1(&r->ifm2, code - SET_IFM2_BASE0, v);
  else switch (code) {
      case SET_WEIGHT_BASE: r->weight_base[0] = v; break;
      case SET_WEIGHT_LENGTH: r->weight_len[0] = v; break;
      case SET_SCALE_BASE: r->scale_base[0] = v; break;
      case SET_SCALE_LENGTH: r->scale_len[0] = v; break;
      case SET_DMA0_SRC: r->dma_src = v; break;
      case SET_DMA0_DST: r->dma_dst = v; break;
      case SET_DMA0_LEN: r->dma_len = v; break;
      case SET_WEIGHT1_BASE: r->weight_base[1] = v; break;
      case SET_WEIGHT1_LENGTH: r->weight_len[1] = v; break;
      case 0x092:
        if (arch == ETHOSU_ARCH_U85) r->weight_base[2] = v; else r->scale_base[1] = v;
        break;
      case 0x093:
        if (arch == ETHOSU_ARCH_U85) r->weight_len[2] = v; else r->scale_len[1] = v;
        break;
      case SET_U85_WEIGHT3_BASE: r->weight_base[3] = v; break;
      case SET_U85_WEIGHT3_LENGTH: r->weight_len[3] = v; break;
      default: break;
    }
}

et_status ethosu_stream_check(const uint32_t *cmd, uint32_t nwords, ethosu_arch arch, const uint64_t limit[ETHOSU_REGIONS],
                              ethosu_stream_info *info, char *msg, size_t cap) {
  ctx c = {arch, limit, info, 0, "command", msg, cap};
  regs r;
  memset(&r, 0, sizeof r);
  memset(info, 0, sizeof *info);
  bool u85 = arch == ETHOSU_ARCH_U85;
  for (uint32_t i = 0; i < nwords;) {
    uint32_t word = cmd[i];
    uint32_t code = word & 0x3FFu, size = (word >> 14) & 3u, param = word >> 16;
    c.offset = 4u * i;
    c.op = "command";
    if ((word >> 10) & 0xFu) return fail(&c, ET_E_DELEGATE_CORRUPT, "word 0x%08" PRIx32 " has reserved bits set", word);
    if (size == 0) {
      if (!(u85 ? KNOWN(k_u85_cmd0, code) : KNOWN(k_u55_cmd0, code)))
        return fail(&c, ET_E_DELEGATE_CORRUPT, "unknown %s command 0x%03" PRIx32, u85 ? "Ethos-U85" : "Ethos-U55/U65", code);
      if (code == OP_STOP) {
        if (i + 1 != nwords)
          return fail(&c, ET_E_DELEGATE_CORRUPT, "NPU_OP_STOP before the end of the stream (%" PRIu32 " words follow)",
                      nwords - i - 1);
        return ET_OK;
      }
      if (code < 0x100) {
        et_status st = operation(&c, &r, code, param);
        if (st != ET_OK) return st;
      } else {
        set_cmd0(&r, arch, code, (uint16_t)param);
      }
      i += 1;
    } else if (size == 1) {
      if (!(u85 ? KNOWN(k_u85_cmd1, code) : KNOWN(k_u55_cmd1, code)))
        return fail(&c, ET_E_DELEGATE_CORRUPT, "unknown %s register 0x%03" PRIx32 " with payload",
                    u85 ? "Ethos-U85" : "Ethos-U55/U65", code);
      if (i + 1 >= nwords) return fail(&c, ET_E_DELEGATE_CORRUPT, "the stream ends inside a command's payload");
      if (u85 && code == U85_OP_BRANCH) {
        c.op = "NPU_OP_BRANCH";
        return fail(&c, ET_E_NOT_SUPPORTED, "command stream branches are not supported by this firmware");
      }
      set_cmd1(&r, arch, code, cmd[i + 1]);
      i += 2;
    } else {
      return fail(&c, ET_E_DELEGATE_CORRUPT, "word 0x%08" PRIx32 " has payload size %" PRIu32 " (corrupt or for another NPU)",
                  word, size);
    }
  }
  c.op = "end";
  c.offset = 4u * nwords;
  return fail(&c, ET_E_DELEGATE_CORRUPT, "the stream does not end with NPU_OP_STOP: it is truncated");
}
