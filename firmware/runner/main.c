/* Runner: load the .bpte the platform provides into the platform's memory
 * regions, run a warm-up plus every bundled test case, and print ONE JSON
 * result line. Exit 0 pass, 1 mismatch, 2 error. A client of the public C API
 * (include/emlkit.h) like any application; all I/O, clock and memory come
 * through platform.h, the NPU glue through runner_npu.h. */
#include <inttypes.h>
#include <string.h>

#include "emlkit.h"
#include "platform.h"
#include "runner_npu.h"

#ifndef RUNNER_SCRATCH_BYTES
#define RUNNER_SCRATCH_BYTES 4096u /* kernel scratch; ops' own scratch is planned */
#endif
/* memory regions handed to the library (a board's arena regions; boards with little RAM set fewer in their cflags) */
#ifndef RUNNER_MAX_REGIONS
#define RUNNER_MAX_REGIONS 8
#endif
#define MAX_REGIONS RUNNER_MAX_REGIONS
/* per-output diff records (2 x 24 B each): boards with little RAM set fewer in their cflags */
#ifndef RUNNER_MAX_OUTPUTS
#define RUNNER_MAX_OUTPUTS 32
#endif
#define MAX_OUTPUTS RUNNER_MAX_OUTPUTS
#define STR_(x) #x
#define STR(x) STR_(x)
#define MSG_CAP 240 /* the library's error lines are shorter */

static eml_context g_ctx;
static eml_memory g_mem[MAX_REGIONS];
static eml_output_diff g_diff[MAX_OUTPUTS], g_case_diff[MAX_OUTPUTS];

/* ---- output ---- */

static void out_json_string(const char *s) {
  char buf[2 * MSG_CAP + 8];
  size_t n = 0;
  buf[n++] = '"';
  for (; *s && n < sizeof buf - 8; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') buf[n++] = '\\', buf[n++] = (char)c;
    else if (c < 0x20) {
      static const char hex[] = "0123456789abcdef";
      memcpy(buf + n, "\\u00", 4);
      buf[n + 4] = hex[c >> 4], buf[n + 5] = hex[c & 15u];
      n += 6;
    } else buf[n++] = (char)c;
  }
  buf[n++] = '"';
  plat_write(buf, n);
}

/* The plan of the program eml_load read (NULL before it read one). */
static const eml_plan *plan(void) {
  static eml_plan p;
  return eml_plan_get(&g_ctx, &p) == EML_OK ? &p : NULL;
}

static void print_arena_bytes(const eml_plan *p) {
  plat_printf(", \"arena_bytes\": [0");
  for (uint32_t k = 0; k < p->n_arenas; k++) plat_printf(", %" PRIu64, p->arena_bytes[k]);
  plat_printf("]");
}

static eml_status g_last_status = EML_E_INVALID_PROGRAM; /* status behind the next fail_error */
static const char *g_stage = "load";                       /* "load" until the first test case runs */

static void __attribute__((noreturn)) fail_error(const char *msg) {
  /* the result line's codes are the runtime's names: the API calls "memory" what it calls "arena_too_small" */
  plat_printf("{\"status\": \"error\", \"stage\": \"%s\", \"code\": \"%s\", \"error\": ", g_stage,
              g_last_status == EML_E_MEMORY ? "arena_too_small" : eml_status_name(g_last_status));
  out_json_string(msg);
  const eml_plan *p = plan();
  if (p) print_arena_bytes(p);
  plat_printf(", \"stack_bytes\": %lu}\n", (unsigned long)plat_stack_used());
  plat_exit(2);
}

/* A failed call: its status and the library's line go into the result line. */
static void check(eml_status st) {
  if (st == EML_OK) return;
  g_last_status = st;
  fail_error(eml_last_error(&g_ctx));
}

static void run_case(uint32_t c) {
  check(eml_set_case_inputs(&g_ctx, c));
  check(eml_run(&g_ctx));
}

#ifdef FW_LOAD_CHECK
/* The library's operators and their per-call state bytes, for the compiler: which operators this firmware
 * implements, and how much runtime memory each call of one takes. */
static void __attribute__((noreturn)) list_ops(void) {
  plat_printf("{\"ops\": [");
  eml_operator_info op;
  for (uint32_t i = 0; eml_operator(i, &op) == EML_OK; i++) {
    plat_printf("%s[", i ? ", " : "");
    out_json_string(op.name);
    plat_printf(", ");
    out_json_string(op.overload);
    plat_printf(", %" PRIu32 ", %" PRIu32 ", %" PRIu32 ", %" PRIu32 ", %" PRIu32 "]", op.state_bytes, op.in_place,
                op.in_place_tail, op.in_place_list, op.in_place_ahead);
  }
  plat_printf("]}\n");
  plat_exit(0);
}
#endif

/* Warm-up outputs against the first measured run's, output by output (tensors only, packed in `copy`). */
static bool outputs_equal(uint8_t *copy, uint32_t nout, bool save) {
  size_t off = 0;
  bool same = true;
  for (uint32_t i = 0; i < nout; i++) {
    const void *data;
    size_t n;
    if (eml_output(&g_ctx, i, &data, &n) != EML_OK) continue; /* not a tensor */
    if (save) memcpy(copy + off, data, n);
    else same = same && memcmp(copy + off, data, n) == 0;
    off += n;
  }
  return same;
}

static void print_profile(void) {
  uint32_t n = 0;
  check(eml_profile_count(&g_ctx, &n));
  for (uint32_t i = 0; i < n; i++) {
    eml_op_profile e;
    check(eml_profile_entry(&g_ctx, i, &e));
    plat_printf("%s{\"op\": ", i ? ", " : "");
    if (e.delegate) plat_printf("\"delegate:%s\"", e.name);
    else out_json_string(e.name);
    plat_printf(", \"calls\": %" PRIu64 ", \"count\": %" PRIu64 "}", e.calls, e.count);
  }
}

/* The context over the board's arena regions (the ones its NPU can reach: board.toml [arenas]), the bundled
 * program loaded into it. */
static void init_and_load(const uint8_t *data, size_t size) {
  const plat_region *region;
  size_t nregions = plat_regions(&region);
  const uint32_t nmem = nregions > MAX_REGIONS ? MAX_REGIONS : (uint32_t)nregions;
  for (uint32_t i = 0; i < nmem; i++) g_mem[i] = (eml_memory){.base = region[i].base, .size = region[i].size, .name = region[i].name};
  const eml_config cfg = {.memory = g_mem, .n_memory = nmem, .scratch_bytes = RUNNER_SCRATCH_BYTES, .clock = plat_counter,
                          .clock_unit = plat_counter_unit()};
  check(eml_init(&g_ctx, &cfg));
  check(eml_load_bundled(&g_ctx, data, size));
}

#ifdef FW_LOAD_CHECK
static void __attribute__((noreturn)) load_only_report(const eml_plan *p) {
  /* A plan with moves prepares each call right before it runs: one run of case 0 prepares them all.
   * Delegates run only on a board with the NPU, so their programs stop at the load. */
  if (!p->prepared_at_load && p->delegate_bytes == 0) run_case(0);
  plat_printf("{\"status\": \"loaded\", \"prepared_at_load\": %s", p->prepared_at_load ? "true" : "false");
  print_arena_bytes(p);
  plat_printf(", \"runtime_bytes\": %lu, \"delegate_bytes\": %lu}\n", (unsigned long)p->runtime_bytes,
              (unsigned long)p->delegate_bytes);
  plat_exit(0);
}
#endif

/* Case C's per-output diffs (g_case_diff) folded into the run's (g_diff); whether every output of C passed. */
static bool merge_case_diff(uint32_t c, uint32_t nout) {
  bool pass = true;
  for (uint32_t i = 0; i < nout; i++) {
    eml_output_diff *d = &g_diff[i], *e = &g_case_diff[i];
    if (c == 0) *d = *e;
    else {
      if (e->max_abs > d->max_abs) d->max_abs = e->max_abs;
      if (e->max_steps > d->max_steps) d->max_steps = e->max_steps;
      d->nan_mismatch |= e->nan_mismatch;
      d->pass &= e->pass;
    }
    pass &= e->pass;
  }
  return pass;
}

/* Every test case once: its run's ticks add to *TOTAL and its deepest stack to *STACK; case 0's outputs must equal
 * the warm-up's COPY and are saved. Whether every case passed. */
static bool measured_runs(uint32_t ncases, uint32_t nout, uint8_t *copy, uint64_t *total, size_t *stack) {
  bool pass = true;
  for (uint32_t c = 0; c < ncases; c++) {
    check(eml_set_case_inputs(&g_ctx, c));
    plat_stack_repaint();
    const eml_status st = eml_run(&g_ctx);
    const size_t s_used = plat_stack_used();
    if (s_used > *stack) *stack = s_used;
    check(st);
    eml_stats stats;
    check(eml_stats_get(&g_ctx, &stats));
    *total += stats.last_run_ticks;
    if (c == 0) {
      if (!outputs_equal(copy, nout, false))
        g_last_status = EML_E_INTERNAL, fail_error("outputs of two runs of test case 0 differ: a kernel reads uninitialised or stale memory");
      for (uint32_t i = 0; i < nout; i++) {
        const void *out;
        size_t n;
        if (eml_output(&g_ctx, i, &out, &n) == EML_OK) plat_save_output(i, out, n);
      }
    }
    check(eml_compare_case(&g_ctx, c, g_case_diff, MAX_OUTPUTS));
    pass &= merge_case_diff(c, nout);
  }
  return pass;
}

static void print_outputs(uint32_t nout) {
  for (uint32_t i = 0; i < nout; i++) {
    const eml_output_diff *d = &g_diff[i];
    plat_printf("%s{", i ? ", " : "");
    if (d->nan_mismatch) plat_printf("\"max_abs\": null");
#ifdef ET_FMT_FLOAT
    else plat_printf("\"max_abs\": %.9g", d->max_abs);
#else
    /* exact, and no decimal float conversion in the image: a hex-float string (emlkit/deploy/result.py) */
    else plat_printf("\"max_abs\": \"%a\"", d->max_abs);
#endif
    if (d->max_steps >= 0) plat_printf(", \"max_steps\": %" PRId64, d->max_steps);
    else plat_printf(", \"max_steps\": null");
    plat_printf(", \"pass\": %s}", d->pass ? "true" : "false");
  }
}

int main(int argc, char **argv) {
  plat_init(argc, argv);
#ifdef FW_LOAD_CHECK
  if (plat_list_ops()) list_ops();
  const bool load_only = plat_load_only() != 0;
#else
  const bool load_only = false;
#endif
  const uint8_t *data;
  size_t size;
  if (plat_model(&data, &size) != 0) g_last_status = EML_E_INVALID_ARG, fail_error("platform has no model to run");
  /* The device is brought up only if a delegate needs it (runner/npu.c). */
  if (runner_npu_register(load_only) != 0) g_last_status = EML_E_INTERNAL, fail_error("cannot register the Ethos-U backend");

  init_and_load(data, size);
  const eml_plan *p = plan();
  uint32_t nout, ncases;
  check(eml_num_outputs(&g_ctx, &nout));
  if (nout > MAX_OUTPUTS)
    g_last_status = EML_E_NOT_SUPPORTED, fail_error("method has more outputs than this runner build reports (" STR(MAX_OUTPUTS) ", RUNNER_MAX_OUTPUTS)");
  check(eml_num_cases(&g_ctx, &ncases));
  if (ncases == 0) fail_error("bundled program has no test cases: bundle at least one");
#ifdef FW_LOAD_CHECK
  if (load_only) load_only_report(p);
#endif

  /* Warm-up, then the same case again: outputs must be bit-identical. */
  size_t out_bytes = 0;
  for (uint32_t i = 0; i < nout; i++) {
    const void *out; /* the planned tensor, before any run: only its size counts */
    size_t n;
    if (eml_output(&g_ctx, i, &out, &n) == EML_OK) out_bytes += n;
  }
  void *copy;
  check(eml_take(&g_ctx, "warm-up output copy", out_bytes, &copy));
  g_stage = "run";
  run_case(0);
  (void)outputs_equal(copy, nout, true);
  /* The measured cases then run in sequence from the state after load: a streaming program's LSTM/GRU state
   * (--streaming-state) carries from case to case, the warm-up's does not. */
  check(eml_reset_state(&g_ctx));

  /* Measured runs: one per test case; profile counts add up over them. When
   * the host asks for an ETDump, every instruction of these runs is recorded
   * (the recording adds to the total, not to the per-operator counts). */
  check(eml_profile_reset(&g_ctx));
  const bool etdump = plat_etdump_wanted() != 0;
  if (etdump) check(eml_record_runs(&g_ctx, ncases, plat_debug_wanted() != 0));
  uint64_t total = 0;
  size_t stack_inference = 0; /* deepest stack of one inference (eml_run), over the cases */
  const bool pass = measured_runs(ncases, nout, copy, &total, &stack_inference);

  size_t etdump_bytes = 0, debug_bytes = 0;
  const uint8_t *debug = NULL;
  uint32_t debug_missed = 0;
  if (etdump) {
    const uint8_t *etd;
    check(eml_etdump(&g_ctx, &etd, &etdump_bytes));
    plat_save_etdump(etd, etdump_bytes);
    if (eml_debug_outputs(&g_ctx, &debug, &debug_bytes, &debug_missed) == EML_OK) plat_save_debug(debug, debug_bytes);
  }

  const char *unit = plat_counter_unit();
  plat_printf("{\"status\": \"%s\", \"cases\": %" PRIu32 ", \"outputs\": [", pass ? "pass" : "fail", ncases);
  print_outputs(nout);
  /* One entry per operator name (overloads merged) in program order, then one per delegate backend. */
  plat_printf("], \"%s\": %" PRIu64 ", \"unit\": \"%s\", \"per_op\": [", unit, total, unit);
  print_profile();
  plat_printf("]");
  print_arena_bytes(p);
  runner_npu_print();
  if (etdump) plat_printf(", \"etdump_bytes\": %lu", (unsigned long)etdump_bytes);
  if (debug) plat_printf(", \"debug_bytes\": %lu, \"debug_missed\": %" PRIu32, (unsigned long)debug_bytes, debug_missed);
  /* stack_bytes: one inference, from the stack top (the runner's frames above it included);
   * stack_bytes_runner: the whole run's high-water mark (start-up, printing) */
  plat_printf(", \"runtime_bytes\": %lu, \"delegate_bytes\": %lu, \"stack_bytes\": %lu, \"stack_bytes_runner\": %lu}\n",
              (unsigned long)p->runtime_bytes, (unsigned long)p->delegate_bytes, (unsigned long)stack_inference,
              (unsigned long)plat_stack_used());
  plat_exit(pass ? 0 : 1);
}
