/* Runner: load the .bpte the platform provides, place the planned arenas in
 * the platform's memory regions, run a warm-up plus every bundled test case,
 * and print ONE JSON result line. Exit 0 pass, 1 mismatch, 2 error.
 * Strictly portable: all I/O, clock and memory come through platform.h. */
#include <inttypes.h>

#include "et_fmt.h"
#include "backend.h"
#include "etdump.h"
#include "place.h"
#include "platform.h"
#include "runner_npu.h"
#include "registry.h"
#include "runtime.h"
#include "schema_ids.h"

#ifndef RUNNER_SCRATCH_BYTES
#define RUNNER_SCRATCH_BYTES 4096u /* et_kernel_ctx scratch; ops' own scratch is planned */
#endif
#define MAX_REGIONS 8
/* per-output diff records (2 x 24 B each): boards with little RAM set fewer in their cflags */
#ifndef RUNNER_MAX_OUTPUTS
#define RUNNER_MAX_OUTPUTS 32
#endif
#define MAX_OUTPUTS RUNNER_MAX_OUTPUTS
#define STR_(x) #x
#define STR(x) STR_(x)

static et_program g_prog;
static et_bundle g_bundle;
static et_method g_method;
static et_output_diff g_diff[MAX_OUTPUTS], g_case_diff[MAX_OUTPUTS];
static et_etdump g_etdump;

/* ---- output ---- */

static void out_json_string(const char *s) {
  char buf[2 * ET_MSG_CAP + 8];
  size_t n = 0;
  buf[n++] = '"';
  for (; *s && n < sizeof buf - 8; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') buf[n++] = '\\', buf[n++] = (char)c;
    else if (c < 0x20) n += (size_t)et_snprintf(buf + n, 7, "\\u%04x", c);
    else buf[n++] = (char)c;
  }
  buf[n++] = '"';
  plat_write(buf, n);
}

static void print_arena_bytes(const et_method_needs *needs) {
  plat_printf(", \"arena_bytes\": [0");
  for (uint32_t k = 0; k < needs->n_arenas; k++) plat_printf(", %" PRIu64, needs->arena_bytes[k]);
  plat_printf("]");
}

static et_status g_last_status = ET_E_INVALID_PROGRAM; /* status behind the next fail_error */
static const char *g_stage = "load";                     /* "load" until the first test case runs */

static void __attribute__((noreturn)) fail_error(const char *msg, const et_method_needs *needs) {
  plat_printf("{\"status\": \"error\", \"stage\": \"%s\", \"code\": \"%s\", \"error\": ", g_stage,
              et_status_name(g_last_status));
  out_json_string(msg);
  if (needs) print_arena_bytes(needs);
  plat_printf(", \"stack_bytes\": %lu}\n", (unsigned long)plat_stack_used());
  plat_exit(2);
}

/* ---- placement of arenas and buffers in the platform's regions (runtime/place.h) ---- */
static const plat_region *g_region_info;
static et_block g_regions[MAX_REGIONS];
static uint32_t g_nregions;

static uint8_t *place(size_t size) { return et_place(g_regions, g_nregions, size); }

static void __attribute__((noreturn)) fail_placement(const char *what, size_t size, const et_method_needs *needs) {
  char msg[ET_MSG_CAP];
  g_last_status = ET_E_ARENA_TOO_SMALL;
  size_t n = (size_t)et_snprintf(msg, sizeof msg, "cannot place %s (%lu bytes): program needs arenas [", what, (unsigned long)size);
  for (uint32_t k = 0; k < needs->n_arenas && n < sizeof msg; k++)
    n += (size_t)et_snprintf(msg + n, sizeof msg - n, "%s%" PRIu64, k ? ", " : "", needs->arena_bytes[k]);
  if (n < sizeof msg) n += (size_t)et_snprintf(msg + n, sizeof msg - n, "] + %lu runtime bytes; regions:", (unsigned long)needs->runtime_bytes);
  for (size_t i = 0; i < g_nregions && n < sizeof msg; i++)
    n += (size_t)et_snprintf(msg + n, sizeof msg - n, " %s %lu (%lu free)", g_region_info[i].name, (unsigned long)g_regions[i].size,
                          (unsigned long)(g_regions[i].size - g_regions[i].used));
  fail_error(msg, needs);
}

static bool outputs_equal(const et_method *m, const uint8_t *copy) {
  size_t off = 0;
  for (uint32_t i = 0; i < et_method_num_outputs(m); i++) {
    const et_value *v = et_method_output(m, i);
    if (v->tag != ET_TAG_TENSOR) continue;
    if (memcmp(copy + off, v->u.t->data, v->u.t->nbytes) != 0) return false;
    off += v->u.t->nbytes;
  }
  return true;
}

/* Status check: remembers the code for the result line. */
static bool failed(et_status st) {
  if (st != ET_OK) g_last_status = st;
  return st != ET_OK;
}

static void run_case(uint32_t c, const et_method_needs *needs) {
  if (failed(et_bundle_set_inputs(&g_bundle, c, &g_method))) fail_error(g_bundle.msg, needs);
  if (failed(et_method_execute(&g_method))) fail_error(g_method.msg, needs);
}

/* Every call's output of the first measured run (test case 0), into the ETDump's debug events. */
static void debug_capture(const et_method_needs *needs) {
  uint32_t nrec;
  size_t bytes = et_etdump_debug_bytes(&g_method, &nrec);
  et_etdump_debug *rec = (et_etdump_debug *)(void *)place((size_t)(nrec ? nrec : 1u) * sizeof(et_etdump_debug));
  if (rec == NULL) fail_placement("debug event records", (size_t)nrec * sizeof(et_etdump_debug), needs);
  uint8_t *buf = place(bytes ? bytes : 1u);
  if (buf == NULL) fail_placement("the debug buffer (every call's output)", bytes, needs);
  et_etdump_debug_init(&g_etdump, rec, nrec, buf, bytes);
}

#ifdef FW_LOAD_CHECK
/* The registry's entries and their per-call state bytes, for the compiler: which operators this firmware
 * implements, and how much runtime memory each call of one takes. */
static void __attribute__((noreturn)) list_ops(void) {
  plat_printf("{\"ops\": [");
  const char *overload;
  for (uint32_t i = 0;; i++) {
    const char *name = et_registry_entry(i, &overload);
    if (name == NULL) break;
    if (overload == NULL) overload = "";
    uint32_t state = 0;
    (void)et_registry_find(name, (uint32_t)strlen(name), overload, (uint32_t)strlen(overload), NULL, &state);
    plat_printf("%s[", i ? ", " : "");
    out_json_string(name);
    plat_printf(", ");
    out_json_string(overload);
    plat_printf(", %" PRIu32 "]", state);
  }
  plat_printf("]}\n");
  plat_exit(0);
}
#endif

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
  if (plat_model(&data, &size) != 0) g_last_status = ET_E_INVALID_ARG, fail_error("platform has no model to run", NULL);
  if (failed(et_bundle_load(&g_bundle, data, size))) fail_error(g_bundle.msg, NULL);
  if (failed(et_program_load(&g_prog, g_bundle.program, g_bundle.program_len))) fail_error(g_prog.msg, NULL);
  /* The device is brought up only if a delegate needs it (below); the backend's
   * needs() reads the delegate data alone. */
#ifdef FW_LOAD_CHECK
  if (load_only && failed(runner_npu_register_load_only())) fail_error("cannot register the Ethos-U backend", NULL);
#endif
  if (!load_only && failed(runner_npu_register())) fail_error("cannot register the Ethos-U backend", NULL);
  et_method_needs needs;
  if (failed(et_method_needs_get(&g_prog, g_bundle.method_name, &needs))) fail_error(g_prog.msg, NULL);
  if (needs.delegate_bytes > 0 && !load_only) runner_npu_init();

  size_t nregions = plat_regions(&g_region_info);
  g_nregions = nregions > MAX_REGIONS ? MAX_REGIONS : (uint32_t)nregions;
  for (uint32_t i = 0; i < g_nregions; i++)
    g_regions[i] = (et_block){.base = (uintptr_t)g_region_info[i].base, .size = g_region_info[i].size, .used = 0};

  /* The board's arena regions are the ones its NPU can reach (board.toml [arenas]). */
  et_method_memory mem;
  et_piece nofit;
  if (failed(et_place_method(g_regions, g_nregions, &needs, RUNNER_SCRATCH_BYTES, &mem, &nofit))) {
    static const char *const piece[] = {"arena", "runtime memory", "kernel scratch", "delegate memory"};
    char what[32];
    if (nofit.kind == ET_PIECE_ARENA) et_snprintf(what, sizeof what, "arena %" PRIu32, nofit.arena + 1);
    else et_snprintf(what, sizeof what, "%s", piece[nofit.kind]);
    fail_placement(what, nofit.size, &needs);
  }
  if (failed(et_method_init(&g_method, &g_prog, g_bundle.method_name, mem.runtime, needs.runtime_bytes, mem.arena_base,
                            mem.arena_size, needs.n_arenas, mem.scratch, RUNNER_SCRATCH_BYTES, mem.delegate, needs.delegate_bytes)))
    fail_error(g_method.msg, &needs);
  uint32_t nout = et_method_num_outputs(&g_method);
  if (nout > MAX_OUTPUTS) g_last_status = ET_E_NOT_SUPPORTED, fail_error("method has more outputs than this runner build reports (" STR(MAX_OUTPUTS) ", RUNNER_MAX_OUTPUTS)", &needs);
  uint32_t ncases = et_bundle_num_cases(&g_bundle);
  if (ncases == 0) fail_error("bundled program has no test cases: bundle at least one", &needs);
#ifdef FW_LOAD_CHECK
  if (load_only) {
    /* A plan with moves prepares each call right before it runs: one run of case 0 prepares them all.
     * Delegates run only on a board with the NPU, so their programs stop at the load. */
    if (g_method.prepare_each_call && needs.delegate_bytes == 0) run_case(0, &needs);
    plat_printf("{\"status\": \"loaded\", \"prepared_at_load\": %s", g_method.prepare_each_call ? "false" : "true");
    print_arena_bytes(&needs);
    plat_printf(", \"runtime_bytes\": %lu, \"delegate_bytes\": %lu}\n", (unsigned long)needs.runtime_bytes,
                (unsigned long)needs.delegate_bytes);
    plat_exit(0);
  }
#endif

  /* Warm-up, then the same case again: outputs must be bit-identical. */
  size_t out_bytes = 0;
  for (uint32_t i = 0; i < nout; i++) {
    const et_value *v = et_method_output(&g_method, i);
    if (v->tag == ET_TAG_TENSOR) out_bytes += v->u.t->nbytes;
  }
  uint8_t *copy = place(out_bytes ? out_bytes : 1);
  if (copy == NULL) fail_placement("warm-up output copy", out_bytes, &needs);
  g_stage = "run";
  run_case(0, &needs);
  size_t off = 0;
  for (uint32_t i = 0; i < nout; i++) {
    const et_value *v = et_method_output(&g_method, i);
    if (v->tag != ET_TAG_TENSOR) continue;
    memcpy(copy + off, v->u.t->data, v->u.t->nbytes);
    off += v->u.t->nbytes;
  }

  /* Measured runs: one per test case; profile counts add up over them. When
   * the host asks for an ETDump, every instruction of these runs is recorded
   * (the recording adds to the total, not to the per-operator counts). */
  g_method.clock = plat_counter;
  et_method_reset_stats(&g_method);
  bool etdump = plat_etdump_wanted() != 0;
  if (etdump) {
    uint32_t per_run = g_method.chain_start[g_method.nchains] + 1u;
    size_t bytes = (size_t)per_run * ncases * sizeof(et_etdump_event);
    et_etdump_event *rec = (et_etdump_event *)(void *)place(bytes);
    if (rec == NULL) fail_placement("ETDump records", bytes, &needs);
    et_etdump_init(&g_etdump, rec, per_run * ncases, plat_counter_unit());
    g_method.on_instr = et_etdump_on_instr;
    g_method.on_instr_user = &g_etdump;
    if (plat_debug_wanted()) debug_capture(&needs);
  }
  uint64_t total = 0;
  bool pass = true;
  size_t stack_inference = 0; /* deepest stack of one inference (et_method_execute), over the cases */
  for (uint32_t c = 0; c < ncases; c++) {
    if (failed(et_bundle_set_inputs(&g_bundle, c, &g_method))) fail_error(g_bundle.msg, &needs);
    plat_stack_repaint();
    uint64_t t0 = plat_counter();
    if (etdump) et_etdump_run_begin(&g_etdump, t0, (int32_t)c);
    et_status st = et_method_execute(&g_method);
    uint64_t t1 = plat_counter();
    if (etdump) et_etdump_run_end(&g_etdump, t1, st == ET_OK);
    total += t1 - t0;
    const size_t s_used = plat_stack_used();
    if (s_used > stack_inference) stack_inference = s_used;
    if (failed(st)) fail_error(g_method.msg, &needs);
    if (c == 0) {
      if (!outputs_equal(&g_method, copy))
        g_last_status = ET_E_INTERNAL, fail_error("outputs of two runs of test case 0 differ: a kernel reads uninitialised or stale memory", &needs);
      for (uint32_t i = 0; i < nout; i++) {
        const et_value *v = et_method_output(&g_method, i);
        if (v->tag == ET_TAG_TENSOR) plat_save_output(i, v->u.t->data, v->u.t->nbytes);
      }
    }
    if (failed(et_bundle_compare(&g_bundle, c, &g_method, g_case_diff))) fail_error(g_bundle.msg, &needs);
    for (uint32_t i = 0; i < nout; i++) {
      et_output_diff *d = &g_diff[i], *e = &g_case_diff[i];
      if (c == 0) *d = *e;
      else {
        if (e->max_abs > d->max_abs) d->max_abs = e->max_abs;
        if (e->max_steps > d->max_steps) d->max_steps = e->max_steps;
        d->nan_mismatch |= e->nan_mismatch;
        d->pass &= e->pass;
      }
      pass &= e->pass;
    }
  }

  size_t etdump_bytes = 0;
  if (etdump) {
    const uint8_t *none, *data;
    if (failed(et_etdump_serialize(&g_etdump, g_method.name, NULL, 0, &none, &etdump_bytes)))
      fail_error("cannot size the ETDump", &needs);
    uint8_t *buf = place(etdump_bytes);
    if (buf == NULL) fail_placement("the ETDump", etdump_bytes, &needs);
    if (failed(et_etdump_serialize(&g_etdump, g_method.name, buf, etdump_bytes, &data, &etdump_bytes)))
      fail_error("cannot write the ETDump", &needs);
    plat_save_etdump(data, etdump_bytes);
    if (g_etdump.dbuf) plat_save_debug(g_etdump.dbuf, g_etdump.dbuf_used);
  }

  const char *unit = plat_counter_unit();
  plat_printf("{\"status\": \"%s\", \"cases\": %" PRIu32 ", \"outputs\": [", pass ? "pass" : "fail", ncases);
  for (uint32_t i = 0; i < nout; i++) {
    const et_output_diff *d = &g_diff[i];
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
  plat_printf("], \"%s\": %" PRIu64 ", \"unit\": \"%s\", \"per_op\": [", unit, total, unit);
  /* One entry per operator name (overloads merged), in program order. */
  bool first = true;
  for (uint32_t i = 0; i < g_method.nops; i++) {
    const et_op_slot *o = &g_method.ops[i];
    bool seen = false;
    for (uint32_t j = 0; j < i && !seen; j++) seen = strcmp(g_method.ops[j].name, o->name) == 0;
    if (seen) continue;
    uint64_t calls = 0, count = 0;
    for (uint32_t j = i; j < g_method.nops; j++)
      if (strcmp(g_method.ops[j].name, o->name) == 0) calls += g_method.ops[j].calls, count += g_method.ops[j].count;
    plat_printf("%s{\"op\": ", first ? "" : ", ");
    out_json_string(o->name);
    plat_printf(", \"calls\": %" PRIu64 ", \"count\": %" PRIu64 "}", calls, count);
    first = false;
  }
  /* Delegate calls, one entry per backend. */
  uint32_t ninstr = g_method.chain_start[g_method.nchains];
  for (uint32_t i = 0; i < ninstr; i++) {
    const et_instr *ins = &g_method.instrs[i];
    if (ins->kind != FBPU_InstructionArguments__DelegateCall) continue;
    bool seen = false;
    for (uint32_t j = 0; j < i && !seen; j++) seen = g_method.instrs[j].kind == ins->kind && g_method.instrs[j].backend == ins->backend;
    if (seen) continue;
    uint64_t calls = 0, count = 0;
    for (uint32_t j = i; j < ninstr; j++)
      if (g_method.instrs[j].kind == ins->kind && g_method.instrs[j].backend == ins->backend)
        calls += g_method.instrs[j].calls, count += g_method.instrs[j].count;
    plat_printf("%s{\"op\": \"delegate:%s\", \"calls\": %" PRIu64 ", \"count\": %" PRIu64 "}", first ? "" : ", ",
            ins->backend->id, calls, count);
    first = false;
  }
  plat_printf("]");
  print_arena_bytes(&needs);
  runner_npu_print();
  if (etdump) plat_printf(", \"etdump_bytes\": %lu", (unsigned long)etdump_bytes);
  if (g_etdump.dbuf) plat_printf(", \"debug_bytes\": %lu, \"debug_missed\": %" PRIu32, (unsigned long)g_etdump.dbuf_used, g_etdump.dbg_missed);
  /* stack_bytes: one inference, from the stack top (the runner's frames above it included);
   * stack_bytes_runner: the whole run's high-water mark (start-up, printing) */
  plat_printf(", \"runtime_bytes\": %lu, \"delegate_bytes\": %lu, \"stack_bytes\": %lu, \"stack_bytes_runner\": %lu}\n",
              (unsigned long)needs.runtime_bytes, (unsigned long)needs.delegate_bytes, (unsigned long)stack_inference,
              (unsigned long)plat_stack_used());
  plat_exit(pass ? 0 : 1);
}
