/* Test shim: the firmware's Ethos-U delegate parser and command-stream checker
 * as one C call, for tests/npu_firmware_lib.py (ctypes). Not part of the firmware. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ethosu_blob.h"
#include "ethosu_stream.h"

/* Returns the et_status; fills used[8], *written, *ops, the blob's scratch size and msg.
 * fast_limit: bytes bound to region 2 (UINT64_MAX: measure). */
int npu_check(const uint8_t *data, size_t len, uint64_t fast_limit, uint64_t *used, uint8_t *written, uint32_t *ops,
              uint32_t *scratch, char *msg, size_t cap) {
  /* the parser wants the NPU's 16-byte alignment: copy like the program loader would place it */
  uint8_t *copy = aligned_alloc(16, (len + 15u) & ~(size_t)15u);
  if (copy == NULL) return -1;
  memcpy(copy, data, len);
  ethosu_blob b;
  et_status st = ethosu_blob_parse(copy, len, &b, msg, cap);
  if (st == ET_OK) {
    uint64_t limit[ETHOSU_REGIONS] = {b.weights_len, b.scratch_size, fast_limit};
    ethosu_arch arch = b.has_config && ETHOSU_CFG_PRODUCT(b.config) == ETHOSU_PRODUCT_U85 ? ETHOSU_ARCH_U85 : ETHOSU_ARCH_U55;
    ethosu_stream_info info;
    st = ethosu_stream_check(b.cmd, b.cmd_words, arch, limit, &info, msg, cap);
    if (st == ET_OK) {
      memcpy(used, info.used, sizeof info.used);
      *written = info.written;
      *ops = info.operations;
    }
    *scratch = b.scratch_size;
  }
  free(copy);
  return (int)st;
}
