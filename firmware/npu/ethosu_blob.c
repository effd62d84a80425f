/* Vela bin stream parser: see ethosu_blob.h for the layout. */
#include "et_fmt.h"
#include "ethosu_blob.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#define BLOCK_HEADER 32u
#define NAME_LEN 16u
#define IO_ENTRY 36u

/* Driver actions that may precede the command stream in cmd_data (the "COP1" header). */
#define DA_CONFIG 0x01u
#define DA_CMDSTREAM 0x02u
#define DA_READAPB 0x03u
#define DA_DUMPSHRAM 0x04u
#define DA_NOP 0x05u

static et_status bad(char *msg, size_t cap, et_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static et_status bad(char *msg, size_t cap, et_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  et_vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
  return st;
}
#define CORRUPT(...) bad(msg, cap, ET_E_DELEGATE_CORRUPT, __VA_ARGS__)

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

const char *ethosu_product_name(uint32_t product) {
  switch (product) {
    case ETHOSU_PRODUCT_U55: return "Ethos-U55";
    case ETHOSU_PRODUCT_U65: return "Ethos-U65";
    case ETHOSU_PRODUCT_U85: return "Ethos-U85";
    default: return "an unknown Ethos-U";
  }
}

typedef struct {
  const uint8_t *data;
  uint32_t len;
  bool seen;
} block;

enum { B_CMD, B_WEIGHTS, B_SCRATCH, B_INPUTS, B_OUTPUTS, B_COUNT };
static const char *const k_names[B_COUNT] = {"cmd_data", "weight_data", "scratch_size", "inputs", "outputs"};

static bool name_is(const uint8_t *raw, const char *want) {
  size_t n = strlen(want);
  if (memcmp(raw, want, n) != 0) return false;
  for (size_t i = n; i < NAME_LEN; i++)
    if (raw[i] != 0) return false;
  return true;
}

static et_status split_blocks(const uint8_t *data, size_t len, block *blocks, char *msg, size_t cap) {
  size_t pos = 0;
  bool started = false;
  for (;;) {
    if (pos >= len) return CORRUPT("Ethos-U delegate data truncated: no 'vela_end_stream' block in its %lu bytes", (unsigned long)len);
    if (len - pos < BLOCK_HEADER)
      return CORRUPT("Ethos-U delegate data truncated: block header at byte %lu needs %u bytes, %lu left",
                     (unsigned long)pos, BLOCK_HEADER, (unsigned long)(len - pos));
    const uint8_t *h = data + pos;
    uint32_t plen = rd32(h + NAME_LEN);
    uint8_t external = h[NAME_LEN + 4];
    pos += BLOCK_HEADER;
    if (!started) {
      if (!name_is(h, "vela_bin_stream"))
        return CORRUPT("not Ethos-U delegate data: the first block is not 'vela_bin_stream' (recompile the model)");
      started = true;
    }
    if (plen > len - pos)
      return CORRUPT("Ethos-U delegate data truncated: a block declares %" PRIu32 " bytes at offset %lu, %lu present",
                     plen, (unsigned long)pos, (unsigned long)(len - pos));
    if (external)
      return bad(msg, cap, ET_E_NOT_SUPPORTED,
                 "Ethos-U delegate block stored as an external reference: compile without external data placement");
    if (name_is(h, "vela_end_stream")) break;
    for (int k = 0; k < B_COUNT; k++) {
      if (!name_is(h, k_names[k])) continue;
      if (blocks[k].seen) return CORRUPT("Ethos-U delegate data has two '%s' blocks", k_names[k]);
      blocks[k].data = data + pos;
      blocks[k].len = plen;
      blocks[k].seen = true;
    }
    size_t padded = ((size_t)plen + 15u) & ~(size_t)15u;
    if (padded > len - pos) padded = len - pos;
    pos += padded;
  }
  for (int k = 0; k < B_COUNT; k++)
    if (!blocks[k].seen) return CORRUPT("Ethos-U delegate data lacks its '%s' block (not written by ExecuTorch's Arm backend)", k_names[k]);
  return ET_OK;
}

/* Skip the COP1 driver actions; sets the command stream and the config words. */
static et_status driver_header(const block *cmd, ethosu_blob *b, char *msg, size_t cap) {
  if (cmd->len % 4u) return CORRUPT("Ethos-U cmd_data is %" PRIu32 " bytes, not whole 32-bit words", cmd->len);
  uint32_t nwords = cmd->len / 4u;
  const uint8_t *w = cmd->data;
  if (nwords == 0) return CORRUPT("Ethos-U cmd_data is empty");
  if (memcmp(w, "COP1", 4) != 0) { /* a raw stream without driver header */
    b->cmd = (const uint32_t *)(const void *)w;
    b->cmd_words = nwords;
    return ET_OK;
  }
  uint32_t i = 1;
  while (i < nwords) {
    uint32_t tag = rd32(w + 4u * i);
    uint32_t kind = tag & 0xFFu, param = tag >> 16;
    switch (kind) {
      case DA_CONFIG:
        if (nwords - i < 3) return CORRUPT("Ethos-U cmd_data truncated inside its driver config");
        b->has_config = true;
        b->config = rd32(w + 4u * (i + 1));
        b->arch_id = rd32(w + 4u * (i + 2));
        i += 3;
        break;
      case DA_NOP:
      case DA_READAPB:
      case DA_DUMPSHRAM:
        i += 1;
        break;
      case DA_CMDSTREAM: {
        uint32_t n = param | (((tag >> 8) & 0xFFu) << 16);
        if (n == 0 || n > nwords - (i + 1))
          return CORRUPT("Ethos-U cmd_data truncated: the driver header announces %" PRIu32 " command words, %" PRIu32 " present",
                         n, nwords - (i + 1));
        b->cmd = (const uint32_t *)(const void *)(w + 4u * (i + 1));
        b->cmd_words = n;
        return ET_OK;
      }
      default:
        return CORRUPT("Ethos-U cmd_data: unknown driver action 0x%02" PRIx32 " at word %" PRIu32, kind, i);
    }
  }
  return CORRUPT("Ethos-U cmd_data has a COP1 header but no command stream");
}

static et_status io_list(const block *blk, const char *what, uint32_t *count, ethosu_io *io, uint32_t room, char *msg,
                         size_t cap) {
  if (blk->len < 4) return CORRUPT("Ethos-U '%s' block is %" PRIu32 " bytes, too short for its count", what, blk->len);
  uint32_t n = rd32(blk->data);
  if (n > (blk->len - 4u) / IO_ENTRY || 4u + n * IO_ENTRY != blk->len)
    return CORRUPT("Ethos-U '%s' block: %" PRIu32 " entries do not fit its %" PRIu32 " bytes", what, n, blk->len);
  if (n > room)
    return bad(msg, cap, ET_E_NOT_SUPPORTED, "Ethos-U delegate has more than %d inputs and outputs", ETHOSU_MAX_IO);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = blk->data + 4u + IO_ENTRY * i;
    ethosu_io *t = &io[i];
    uint64_t nbytes = 1;
    for (int d = 0; d < 6; d++) {
      int32_t v = (int32_t)rd32(e + 4u * d);
      if (v < 0) return CORRUPT("Ethos-U '%s' entry %" PRIu32 " has a negative dimension", what, i);
      nbytes *= (uint64_t)v;
      if (nbytes > UINT32_MAX) return CORRUPT("Ethos-U '%s' entry %" PRIu32 " is impossibly large", what, i);
    }
    int32_t es = (int32_t)rd32(e + 24), off = (int32_t)rd32(e + 28), region = (int32_t)rd32(e + 32);
    if (es != 1 && es != 2 && es != 4)
      return CORRUPT("Ethos-U '%s' entry %" PRIu32 " has element size %" PRId32 " (1, 2 or 4 expected)", what, i, es);
    if (off < 0 || region < 0 || region > 7)
      return CORRUPT("Ethos-U '%s' entry %" PRIu32 " has offset %" PRId32 " in region %" PRId32, what, i, off, region);
    nbytes *= (uint64_t)es;
    if (nbytes > UINT32_MAX) return CORRUPT("Ethos-U '%s' entry %" PRIu32 " is impossibly large", what, i);
    t->elem_size = (uint32_t)es;
    t->offset = (uint32_t)off;
    t->region = (uint32_t)region;
    t->nbytes = (uint32_t)nbytes;
  }
  *count = n;
  return ET_OK;
}

et_status ethosu_blob_parse(const uint8_t *data, size_t len, ethosu_blob *b, char *msg, size_t cap) {
  memset(b, 0, sizeof *b);
  if (data == NULL || len == 0) return CORRUPT("Ethos-U delegate data is empty");
  if (((uintptr_t)data % ETHOSU_ALIGN) != 0)
    return CORRUPT("Ethos-U delegate data is not %u-byte aligned in the program (the NPU needs it): re-export the program",
                   ETHOSU_ALIGN);
  block blocks[B_COUNT];
  memset(blocks, 0, sizeof blocks);
  et_status st = split_blocks(data, len, blocks, msg, cap);
  if (st != ET_OK) return st;
  if ((st = driver_header(&blocks[B_CMD], b, msg, cap)) != ET_OK) return st;
  if (((uintptr_t)b->cmd % ETHOSU_ALIGN) != 0)
    return CORRUPT("Ethos-U command stream is not %u-byte aligned", ETHOSU_ALIGN);
  b->weights = blocks[B_WEIGHTS].data;
  b->weights_len = blocks[B_WEIGHTS].len;
  if (blocks[B_SCRATCH].len != 4)
    return CORRUPT("Ethos-U 'scratch_size' block is %" PRIu32 " bytes, 4 expected", blocks[B_SCRATCH].len);
  b->scratch_size = rd32(blocks[B_SCRATCH].data);
  if ((st = io_list(&blocks[B_INPUTS], "inputs", &b->n_inputs, b->io, ETHOSU_MAX_IO, msg, cap)) != ET_OK) return st;
  if ((st = io_list(&blocks[B_OUTPUTS], "outputs", &b->n_outputs, b->io + b->n_inputs, ETHOSU_MAX_IO - b->n_inputs, msg, cap)) !=
      ET_OK)
    return st;
  if (b->n_outputs == 0) return CORRUPT("Ethos-U delegate has no outputs");
  return ET_OK;
}
