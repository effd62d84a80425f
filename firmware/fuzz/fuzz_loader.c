/* libFuzzer target for the loader: bundled-program and program
 * verification, method construction and (when the plan fits in a small pool)
 * one execution of the first test case. Any crash, sanitizer report or hang
 * is a bug; error statuses are the expected outcome for garbage.
 * Built by scripts/bench_fuzz.py (clang -fsanitize=fuzzer,address,undefined). */
#include <stdlib.h>

#include "backend.h"
#include "ethosu_backend.h"
#include "runtime.h"

#define POOL_BYTES (4u << 20)
#define INPUT_MAX (1u << 20)

static _Alignas(64) uint8_t g_input[INPUT_MAX];
static _Alignas(64) uint8_t g_pool[POOL_BYTES];
static _Alignas(16) uint8_t g_scratch[4096];
static et_bundle g_b;
static et_program g_p;
static et_method g_m;

static ethosu_device g_npu; /* never initialised: Ethos-U delegates are parsed and checked, then refused */

static void run_program(const uint8_t *data, size_t size, et_bundle *b) {
  (void)et_backend_register(ethosu_backend(&g_npu, "no NPU in the fuzzer"));
  if (et_program_load(&g_p, data, size) != ET_OK) return;
  et_method_needs needs;
  if (et_method_needs_get(&g_p, b ? b->method_name : NULL, &needs) != ET_OK) return;
  size_t used = (needs.runtime_bytes + 63) & ~(size_t)63;
  if (used > POOL_BYTES) return;
  const uint8_t *base[ET_MAX_ARENAS] = {0};
  size_t sizes[ET_MAX_ARENAS] = {0};
  for (uint32_t k = 0; k < needs.n_arenas; k++) {
    if (needs.arena_bytes[k] > POOL_BYTES - used) return;
    base[k] = g_pool + used;
    sizes[k] = (size_t)needs.arena_bytes[k];
    used += (sizes[k] + 63) & ~(size_t)63;
    if (used > POOL_BYTES) return;
  }
  if (needs.delegate_bytes > POOL_BYTES - used) return;
  uint8_t *dmem = needs.delegate_bytes ? g_pool + used : NULL;
  if (et_method_init(&g_m, &g_p, b ? b->method_name : NULL, g_pool, needs.runtime_bytes, base, sizes, needs.n_arenas,
                     g_scratch, sizeof g_scratch, dmem, needs.delegate_bytes) != ET_OK)
    return;
  if (b == NULL || et_bundle_num_cases(b) == 0) return;
  if (et_bundle_set_inputs(b, 0, &g_m) != ET_OK) return;
  if (et_method_execute(&g_m) != ET_OK) return;
  et_output_diff diffs[64];
  if (et_method_num_outputs(&g_m) <= 64) et_bundle_compare(b, 0, &g_m, diffs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > INPUT_MAX) return 0;
  /* Aligned copy, as the runner's platforms provide. */
  memcpy(g_input, data, size);
  if (size >= 8 && memcmp(g_input + 4, "ET12", 4) == 0) {
    run_program(g_input, size, NULL);
    return 0;
  }
  if (et_bundle_load(&g_b, g_input, size) != ET_OK) return 0;
  run_program(g_b.program, g_b.program_len, &g_b);
  return 0;
}
