/* The application of a project written by `emlkit export`.
 *
 * It runs the model linked into this image (model/model_data.c: the program
 * as a 16-byte aligned constant array in the board's model memory, plus one
 * test input and the output the device must reproduce bit for bit), checks
 * the result, and reports on the board's UART:
 *   - the inputs and outputs (dtype, shape, quantization),
 *   - every output's difference from the expected one,
 *   - the count per inference and per operator (the board's counter: cycles
 *     from the DWT on a board or an FVP, instructions under QEMU),
 *   - with EMLKIT_PRINT_ETDUMP, the ETDump of the runs as base64 between
 *     "ETDUMP BEGIN" and "ETDUMP END" (`emlkit inspect --log` reads it),
 *   - last, one line "RESULT: PASS" or "RESULT: FAIL <why>".
 *
 * To use your own data: set each input from your buffer (eml_set_input), run
 * (eml_run), read each output (eml_output) and drop the comparison. Every call
 * goes through emlkit.h (the C API) or platform.h (this board: UART, counter,
 * memory regions, NPU). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emlkit.h"
#include "model_data.h"
#include "et_fmt.h"
#include "platform.h"

#define MAX_MEMORY 8

static eml_context g_ctx;

/* Formatted text on the console (the board's UART). */
#define say plat_printf

static void console(void *user, const char *s, size_t n) {
  (void)user;
  plat_write(s, n);
}

static int failed(const char *call, eml_status st) {
  say("%s: %s: %s\n", call, eml_status_name(st), eml_last_error(&g_ctx));
  say("RESULT: FAIL %s returned %s\n", call, eml_status_name(st));
  return 2;
}

static void describe(const char *what, uint32_t i, const eml_tensor_info *t) {
  char shape[64];
  size_t n = 0;
  for (uint32_t d = 0; d < t->ndim && n < sizeof shape - 12; d++)
    n += (size_t)et_snprintf(shape + n, sizeof shape - n, "%s%" PRId32, d ? "x" : "", t->shape[d]);
  shape[n] = 0;
  say("%s %" PRIu32 ": dtype %d, shape %s, %lu bytes", what, i, (int)t->dtype, shape, (unsigned long)t->nbytes);
  if (t->quantized) say(", int8 domain: scale %.9g, zero point %" PRId32, t->scale, t->zero_point);
  say("\n");
}

/* Elements that differ from the expected output, and the largest difference
 * in quantization steps (float outputs with a known scale) or in units. */
static uint32_t compare(const eml_tensor_info *t, const void *got, const void *want, double *max_diff) {
  uint32_t bad = 0;
  *max_diff = 0;
  if (t->dtype != EML_FLOAT32) {
    for (size_t k = 0; k < t->nbytes; k++) bad += ((const uint8_t *)got)[k] != ((const uint8_t *)want)[k];
    return bad;
  }
  for (size_t k = 0; k < t->nbytes / sizeof(float); k++) {
    float a, b;
    memcpy(&a, (const uint8_t *)got + 4 * k, 4);
    memcpy(&b, (const uint8_t *)want + 4 * k, 4);
    if (memcmp(&a, &b, 4) == 0) continue;
    bad++;
    double d = a > b ? (double)a - (double)b : (double)b - (double)a;
    if (t->quantized && t->scale > 0) d /= t->scale;
    if (d > *max_diff || d != d) *max_diff = d;
  }
  return bad;
}

/* 1-2. The context over the board's free RAM (tensors, tables, NPU buffers) and, where the program uses it,
 * the Ethos-U NPU as the board describes it (board/board_config.h). The configuration stays in static memory. */
static int init_context(void) {
  static eml_memory mem[MAX_MEMORY];
  const plat_region *regions;
  size_t nreg = plat_regions(&regions);
  uint32_t nmem = 0;
  for (size_t i = 0; i < nreg && nmem < MAX_MEMORY; i++) mem[nmem++] = (eml_memory){regions[i].base, regions[i].size};
  eml_config cfg = {.memory = mem, .n_memory = nmem, .clock = plat_counter, .clock_unit = plat_counter_unit()};
#if EMLKIT_PRINT_ETDUMP
  cfg.profile_events = EMLKIT_MODEL_INSTRUCTIONS + 1u; /* one run: every instruction and the run itself */
#endif
#if EMLKIT_MODEL_USES_NPU
  static eml_npu_config npu_cfg;
  plat_npu npu;
  if (plat_npu_info(&npu) == 0) {
    npu_cfg = (eml_npu_config){.base = npu.base, .irq = npu.irq, .secure = npu.secure != 0, .privileged = npu.privileged != 0,
                               .timeout_us = npu.timeout_us, .time_us = plat_time_us, .irq_save = plat_irq_save,
                               .irq_restore = plat_irq_restore, .wait_for_interrupt = plat_wait_for_interrupt,
                               .irq_attach = plat_irq_attach, .dcache_clean = plat_dcache_clean,
                               .dcache_invalidate = plat_dcache_invalidate};
    cfg.npu = &npu_cfg;
  }
#endif
  eml_status st = eml_init(&g_ctx, &cfg);
  return st == EML_OK ? 0 : failed("eml_init", st);
}

/* 3. The program, used in place where the linker put it; its inputs described. */
static int load_program(uint32_t *nin, uint32_t *nout) {
  eml_status st = eml_load(&g_ctx, emlkit_model, emlkit_model_size);
  if (st != EML_OK) return failed("eml_load", st);
  if ((st = eml_num_inputs(&g_ctx, nin)) != EML_OK) return failed("eml_num_inputs", st);
  if ((st = eml_num_outputs(&g_ctx, nout)) != EML_OK) return failed("eml_num_outputs", st);
  if (*nin != EMLKIT_NUM_INPUTS || *nout != EMLKIT_NUM_OUTPUTS) {
    say("RESULT: FAIL the program has %" PRIu32 " inputs and %" PRIu32 " outputs, the test data %u and %u\n", *nin,
        *nout, EMLKIT_NUM_INPUTS, EMLKIT_NUM_OUTPUTS);
    return 2;
  }
  eml_tensor_info info;
  for (uint32_t i = 0; i < *nin; i++) {
    if ((st = eml_input_info(&g_ctx, i, &info)) != EML_OK) return failed("eml_input_info", st);
    describe("input", i, &info);
  }
#ifdef EMLKIT_INPUT0_SCALE
  /* --io int8: the program has no quantize at its inputs; model_data.h gives how to quantize them */
  say("input 0 takes int8 codes: q = round(x / %.9g) + %d (model_data.h)\n", EMLKIT_INPUT0_SCALE,
      EMLKIT_INPUT0_ZERO_POINT);
#endif
  return 0;
}

/* 4. Two runs, a warm-up and a measured one (its count in *COUNT); inputs are set before each, since a run may
 * reuse their memory. */
static int run_twice(uint32_t nin, uint64_t *count) {
  eml_status st;
  for (int run = 0; run < 2; run++) {
    for (uint32_t i = 0; i < nin; i++) {
      st = eml_set_input(&g_ctx, i, emlkit_inputs[i].data, emlkit_inputs[i].nbytes);
      if (st != EML_OK) return failed("eml_set_input", st);
    }
    if (run == 1 && (st = eml_profile_reset(&g_ctx)) != EML_OK) return failed("eml_profile_reset", st);
    /* a --streaming-state program's LSTM/GRU state: the measured run starts, as the expected output, from zero */
    if (run == 1 && (st = eml_reset_state(&g_ctx)) != EML_OK) return failed("eml_reset_state", st);
    uint64_t t0 = plat_counter();
    st = eml_run(&g_ctx);
    *count = plat_counter() - t0;
    if (st != EML_OK) return failed("eml_run", st);
  }
  return 0;
}

/* 5. Every output against the expected one, bit for bit: *BAD_OUTPUTS counts those that differ. */
static int check_outputs(uint32_t nout, uint32_t *bad_outputs) {
  eml_status st;
  eml_tensor_info info;
  *bad_outputs = 0;
  for (uint32_t i = 0; i < nout; i++) {
    const void *data;
    size_t nbytes;
    if ((st = eml_output_info(&g_ctx, i, &info)) != EML_OK) return failed("eml_output_info", st);
    describe("output", i, &info);
    if ((st = eml_output(&g_ctx, i, &data, &nbytes)) != EML_OK) return failed("eml_output", st);
    if (nbytes != emlkit_expected[i].nbytes) {
      say("output %" PRIu32 ": %lu bytes, the expected output has %lu\n", i, (unsigned long)nbytes,
          (unsigned long)emlkit_expected[i].nbytes);
      (*bad_outputs)++;
      continue;
    }
    double diff;
    uint32_t bad = compare(&info, data, emlkit_expected[i].data, &diff);
    say("output %" PRIu32 ": %" PRIu32 " of %lu elements differ from the expected output (max %.3g %s)\n", i, bad,
        (unsigned long)(info.nbytes / (info.dtype == EML_FLOAT32 ? 4u : 1u)), diff, info.quantized ? "steps" : "");
    *bad_outputs += bad != 0;
  }
  return 0;
}

/* 6. Where the time went (the measured run), and the memory used. */
static int report_profile(uint64_t count) {
  eml_status st;
  say("%" PRIu64 " %s per inference\n", count, plat_counter_unit());
  uint32_t nprof = 0;
  if ((st = eml_profile_count(&g_ctx, &nprof)) != EML_OK) return failed("eml_profile_count", st);
  for (uint32_t i = 0; i < nprof; i++) {
    eml_op_profile e;
    if ((st = eml_profile_entry(&g_ctx, i, &e)) != EML_OK) return failed("eml_profile_entry", st);
    say("  %-40s %4" PRIu64 " calls %12" PRIu64 " %s\n", e.name, e.calls, e.count, plat_counter_unit());
  }
  eml_stats stats;
  if ((st = eml_stats_get(&g_ctx, &stats)) == EML_OK)
    say("memory used %lu bytes (planned tensors %lu, NPU %lu), stack %lu bytes\n", (unsigned long)stats.memory_used,
        (unsigned long)stats.arena_bytes, (unsigned long)stats.delegate_bytes, (unsigned long)plat_stack_used());
#if EMLKIT_PRINT_ETDUMP
  if ((st = eml_etdump_text(&g_ctx, console, NULL)) != EML_OK) return failed("eml_etdump_text", st);
#endif
  return 0;
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  plat_init(0, NULL);
  say("emlkit: %s compiled for %s, on %s\n", EMLKIT_MODEL_NAME, EMLKIT_MODEL_TARGET, EMLKIT_BOARD_NAME);
  uint32_t nin, nout, bad_outputs;
  uint64_t count = 0;
  int rc;
  if ((rc = init_context()) != 0 || (rc = load_program(&nin, &nout)) != 0 || (rc = run_twice(nin, &count)) != 0 ||
      (rc = check_outputs(nout, &bad_outputs)) != 0 || (rc = report_profile(count)) != 0)
    return rc;
  if (bad_outputs) {
    say("RESULT: FAIL %" PRIu32 " output(s) differ from the expected output\n", bad_outputs);
    return 1;
  }
  say("RESULT: PASS %s %" PRIu64 " %s\n", EMLKIT_MODEL_NAME, count, plat_counter_unit());
  return 0;
}
