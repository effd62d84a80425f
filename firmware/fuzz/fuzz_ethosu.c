/* libFuzzer target for the Ethos-U delegate data: the Vela bin-stream parser
 * and the command-stream bounds checker, on arbitrary bytes. Error statuses
 * are the expected outcome for garbage; a crash, sanitizer report or hang is a
 * bug. Built by scripts/bench_fuzz.py --target ethosu. */
#include <stdint.h>
#include <string.h>

#include "ethosu_blob.h"
#include "ethosu_stream.h"

#define INPUT_MAX (1u << 20)

static _Alignas(16) uint8_t g_input[INPUT_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > INPUT_MAX) return 0;
  memcpy(g_input, data, size); /* the parser requires the NPU's 16-byte alignment */
  char msg[256];
  ethosu_blob b;
  if (ethosu_blob_parse(g_input, size, &b, msg, sizeof msg) != ET_OK) return 0;
  ethosu_stream_info info;
  for (int arch = 0; arch < 2; arch++) {
    uint64_t limit[ETHOSU_REGIONS] = {b.weights_len, b.scratch_size, UINT64_MAX};
    (void)ethosu_stream_check(b.cmd, b.cmd_words, arch ? ETHOSU_ARCH_U85 : ETHOSU_ARCH_U55, limit, &info, msg, sizeof msg);
  }
  return 0;
}
