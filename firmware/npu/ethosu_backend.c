/* EthosUBackend: see ethosu_backend.h. */
#include "ethosu_backend.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "ethosu_blob.h"
#include "ethosu_stream.h"

#define NBASES 3u /* 0 weights, 1 scratch, 2 fast scratch: the regions ExecuTorch's Vela output uses */

typedef struct {
  ethosu_blob blob;
  ethosu_arch arch;
  uint64_t limit[ETHOSU_REGIONS];
  uint8_t written;
  uint8_t *region[NBASES];
  uint64_t bases[NBASES];
} state;

static ethosu_device *g_dev;
static const char *g_init_error;

/* The host's load check (builds with FW_LOAD_CHECK) binds no device: init checks the delegate data and
 * the call, not the NPU's configuration, and execute refuses. Device images keep the device checks only. */
#ifdef FW_LOAD_CHECK
#define LOAD_CHECK_ONLY (g_dev == NULL)
#else
#define LOAD_CHECK_ONLY 0
#endif


static size_t align16(size_t n) { return (n + 15u) & ~(size_t)15u; }

static ethosu_arch arch_of(const ethosu_blob *b) {
  uint32_t product = b->has_config ? ETHOSU_CFG_PRODUCT(b->config) : (g_dev && g_dev->ready ? g_dev->product : ETHOSU_PRODUCT_U55);
  return product == ETHOSU_PRODUCT_U85 ? ETHOSU_ARCH_U85 : ETHOSU_ARCH_U55;
}

/* Parse, bound-check the stream, size the regions. */
static et_status analyse(const uint8_t *data, size_t len, state *s, size_t *bytes, char *msg, size_t cap) {
  et_status st = ethosu_blob_parse(data, len, &s->blob, msg, cap);
  if (st != ET_OK) return st;
  s->arch = arch_of(&s->blob);
  memset(s->limit, 0, sizeof s->limit);
  s->limit[0] = s->blob.weights_len;
  s->limit[1] = s->blob.scratch_size;
  s->limit[2] = UINT64_MAX; /* measured: the fast scratch is as large as the stream uses */
  ethosu_stream_info info;
  st = ethosu_stream_check(s->blob.cmd, s->blob.cmd_words, s->arch, s->limit, &info, msg, cap);
  if (st != ET_OK) return st;
  if (info.used[2] > UINT32_MAX) return et_msgf(msg, cap, ET_E_NPU_STREAM, "Ethos-U command stream uses more than 4 GiB of fast scratch");
  s->limit[2] = info.used[2];
  s->written = info.written;
  for (uint32_t i = 0; i < s->blob.n_inputs + s->blob.n_outputs; i++) {
    const ethosu_io *io = &s->blob.io[i];
    bool out = i >= s->blob.n_inputs;
    uint32_t k = out ? i - s->blob.n_inputs : i;
    if (io->region != 1 && io->region != 2)
      return et_msgf(msg, cap, ET_E_DELEGATE_CORRUPT, "Ethos-U %s %" PRIu32 " lives in region %" PRIu32 " (1 or 2 expected)",
                  out ? "output" : "input", k, io->region);
    if ((uint64_t)io->offset + io->nbytes > s->limit[io->region])
      return et_msgf(msg, cap, ET_E_DELEGATE_CORRUPT,
                  "Ethos-U %s %" PRIu32 " (%" PRIu32 " bytes at offset %" PRIu32 ") lies outside region %" PRIu32 " (%" PRIu64
                  " bytes)",
                  out ? "output" : "input", k, io->nbytes, io->offset, io->region, s->limit[io->region]);
  }
  *bytes = align16(sizeof(state)) + align16(s->blob.scratch_size) + align16((size_t)s->limit[2]);
  return ET_OK;
}

static et_status b_needs(const uint8_t *data, size_t len, size_t *bytes, char *msg, size_t cap) {
  state s; /* a few hundred bytes, only at method load */
  return analyse(data, len, &s, bytes, msg, cap);
}

static et_status b_init(void *mem, size_t bytes, const uint8_t *data, size_t len, et_value *const *args, uint32_t nargs,
                        char *msg, size_t cap) {
  state *s = mem;
  size_t need;
  et_status st = analyse(data, len, s, &need, msg, cap);
  if (st != ET_OK) return st;
  if (need > bytes) return et_msgf(msg, cap, ET_E_ARENA_TOO_SMALL, "Ethos-U delegate needs %lu bytes, got %lu", (unsigned long)need,
                                (unsigned long)bytes);
  if (!LOAD_CHECK_ONLY) {
    if (g_dev == NULL || !g_dev->ready)
      return et_msgf(msg, cap, ET_E_NPU_CONFIG, "%s",
                  g_init_error && g_init_error[0] ? g_init_error : "this build has no Ethos-U device attached");
    if (s->blob.has_config && (st = ethosu_check(g_dev, s->blob.config, s->blob.arch_id, msg, cap)) != ET_OK) return st;
  }
  uint32_t nio = s->blob.n_inputs + s->blob.n_outputs;
  if (nargs != nio)
    return et_msgf(msg, cap, ET_E_DELEGATE_CORRUPT, "the call passes %" PRIu32 " values, the Ethos-U delegate has %" PRIu32
                " inputs and %" PRIu32 " outputs", nargs, s->blob.n_inputs, s->blob.n_outputs);
  for (uint32_t i = 0; i < nio; i++) {
    const ethosu_io *io = &s->blob.io[i];
    bool out = i >= s->blob.n_inputs;
    uint32_t k = out ? i - s->blob.n_inputs : i;
    const et_value *v = args[i];
    if (v->tag != ET_TAG_TENSOR)
      return et_msgf(msg, cap, ET_E_DELEGATE_CORRUPT, "Ethos-U delegate %s %" PRIu32 " is not a tensor", out ? "output" : "input", k);
    const et_tensor *t = v->u.t;
    if (t->nbytes != io->nbytes || et_dtype_size(t->dtype) != io->elem_size)
      return et_msgf(msg, cap, ET_E_DELEGATE_CORRUPT,
                  "Ethos-U delegate %s %" PRIu32 ": the method's tensor is %lu bytes of %s, the command stream expects %" PRIu32
                  " bytes of %" PRIu32 "-byte elements",
                  out ? "output" : "input", k, (unsigned long)t->nbytes, et_dtype_name(t->dtype), io->nbytes, io->elem_size);
    if (out && t->data == NULL)
      return et_msgf(msg, cap, ET_E_DELEGATE_CORRUPT, "Ethos-U delegate output %" PRIu32 " has no planned memory", k);
  }
  uint8_t *p = (uint8_t *)mem + align16(sizeof(state));
  s->region[0] = (uint8_t *)(uintptr_t)s->blob.weights;
  s->region[1] = p;
  s->region[2] = s->limit[2] ? p + align16(s->blob.scratch_size) : NULL;
  for (uint32_t r = 0; r < NBASES; r++) s->bases[r] = (uintptr_t)s->region[r];
  /* The stream and weights never change: write them back to memory once. */
  if (!LOAD_CHECK_ONLY && g_dev->hal.dcache_clean) {
    g_dev->hal.dcache_clean(s->blob.cmd, 4u * s->blob.cmd_words);
    g_dev->hal.dcache_clean(s->blob.weights, s->blob.weights_len);
  }
  return ET_OK;
}

static et_status b_execute(void *mem, et_value *const *args, uint32_t nargs, char *msg, size_t cap) {
  state *s = mem;
#ifdef FW_LOAD_CHECK
  if (g_dev == NULL) return et_msgf(msg, cap, ET_E_NPU_CONFIG, "loaded for checking only: no Ethos-U device is bound");
#endif
  const ethosu_hal *hal = &g_dev->hal;
  for (uint32_t i = 0; i < s->blob.n_inputs; i++) {
    const ethosu_io *io = &s->blob.io[i];
    uint8_t *dst = s->region[io->region] + io->offset;
    memcpy(dst, args[i]->u.t->data, io->nbytes);
    if (hal->dcache_clean) hal->dcache_clean(dst, io->nbytes);
  }
  et_status st = ethosu_run(g_dev, s->blob.cmd, s->blob.cmd_words, s->bases, NBASES, msg, cap);
  if (st != ET_OK) return st;
  if (hal->dcache_invalidate)
    for (uint32_t r = 1; r < NBASES; r++)
      if ((s->written >> r) & 1u) hal->dcache_invalidate(s->region[r], (size_t)s->limit[r]);
  for (uint32_t j = 0; j < s->blob.n_outputs; j++) {
    const ethosu_io *io = &s->blob.io[s->blob.n_inputs + j];
    memcpy(args[s->blob.n_inputs + j]->u.t->data, s->region[io->region] + io->offset, io->nbytes);
  }
  (void)nargs;
  return ET_OK;
}

static const et_backend k_backend = {"EthosUBackend", b_needs, b_init, b_execute};

const et_backend *ethosu_backend(ethosu_device *dev, const char *init_error) {
  g_dev = dev;
  g_init_error = init_error;
  return &k_backend;
}
