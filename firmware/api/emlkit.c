/* The emlkit C API (include/emlkit.h) over the runtime (runtime/runtime.h):
 * memory placement in the caller's blocks, the Ethos-U backend and device,
 * tensor queries, profiling and the ETDump. Built with EMLKIT_WITH_ETHOSU
 * when the NPU sources (npu/) are part of the library. */
#include "et_fmt.h"
#include "emlkit.h"

#include <inttypes.h>
#include <stdarg.h>

#include "backend.h"
#include "etdump.h"
#include "place.h"
#include "registry.h"
#include "runtime.h"
#include "schema_ids.h"
#if defined(EMLKIT_WITH_ETHOSU)
#include "ethosu_backend.h"
#endif

#define CTX_MAGIC 0x4b4c4d45u /* "EMLK" */
#define MAX_MEMORY 8u
#define DEFAULT_SCRATCH 4096u

typedef struct {
  uint32_t magic;
  bool loaded;
  bool planned;   /* needs holds the last load's plan (also when placing it failed) */
  bool bundled;   /* bundle holds the loaded .bpte's test cases */
  int32_t run_case; /* the test case whose inputs the next run takes (-1: the caller's), for the ETDump */
  uint64_t last_ticks;
  eml_config cfg; /* cfg.memory and cfg.npu point into this struct */
  eml_npu_config npu_cfg;
  et_block mem[MAX_MEMORY]; /* the caller's memory, placed into by runtime/place.h */
  eml_memory mem_cfg[MAX_MEMORY];
  et_program prog;
  et_method method;
  et_method_needs needs;
  size_t arena_bytes;
  et_etdump etd;
  et_bundle bundle;
#if defined(EMLKIT_WITH_ETHOSU)
  ethosu_device npu;
  bool npu_up;
  char npu_error[ET_MSG_CAP];
#endif
  char msg[ET_MSG_CAP];
} ctx_t;

/* eml_compare_case hands the caller's records to the runtime as they are. */
_Static_assert(sizeof(eml_output_diff) == sizeof(et_output_diff) && offsetof(eml_output_diff, max_steps) == offsetof(et_output_diff, max_steps) &&
                   offsetof(eml_output_diff, nan_mismatch) == offsetof(et_output_diff, nan_mismatch) &&
                   offsetof(eml_output_diff, pass) == offsetof(et_output_diff, pass),
               "eml_output_diff and et_output_diff disagree");
_Static_assert(EML_MAX_ARENAS == ET_MAX_ARENAS, "eml_plan holds every arena");
_Static_assert(sizeof(ctx_t) <= EML_CONTEXT_BYTES, "eml_context is smaller than the runtime's state: raise EML_CONTEXT_BYTES");
_Static_assert(_Alignof(ctx_t) <= 16, "eml_context must be 16-byte aligned for the runtime's state");
/* Statuses pass through with the runtime's numbers. */
_Static_assert((int)EML_E_INVALID_PROGRAM == (int)ET_E_INVALID_PROGRAM && (int)EML_E_INVALID_ARG == (int)ET_E_INVALID_ARG &&
                   (int)EML_E_UNKNOWN_OP == (int)ET_E_UNKNOWN_OP && (int)EML_E_NOT_SUPPORTED == (int)ET_E_NOT_SUPPORTED &&
                   (int)EML_E_MEMORY == (int)ET_E_ARENA_TOO_SMALL && (int)EML_E_NO_BACKEND == (int)ET_E_NO_BACKEND &&
                   (int)EML_E_INTERNAL == (int)ET_E_INTERNAL && (int)EML_E_DELEGATE_CORRUPT == (int)ET_E_DELEGATE_CORRUPT &&
                   (int)EML_E_NPU_STREAM == (int)ET_E_NPU_STREAM && (int)EML_E_NPU_CONFIG == (int)ET_E_NPU_CONFIG &&
                   (int)EML_E_NPU_TIMEOUT == (int)ET_E_NPU_TIMEOUT && (int)EML_E_NPU_BUS_ERROR == (int)ET_E_NPU_BUS_ERROR &&
                   (int)EML_E_NPU_FAULT == (int)ET_E_NPU_FAULT,
               "eml_status and et_status disagree");

/* ---------------------------------------------------------------- helpers */

static ctx_t *get(eml_context *ctx) { return ctx ? (ctx_t *)(void *)ctx->opaque : NULL; }
static const ctx_t *cget(const eml_context *ctx) { return ctx ? (const ctx_t *)(const void *)ctx->opaque : NULL; }

static eml_status fail(ctx_t *c, eml_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static eml_status fail(ctx_t *c, eml_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  et_vsnprintf(c->msg, sizeof c->msg, fmt, ap);
  va_end(ap);
  return st;
}

static eml_status from_et(ctx_t *c, et_status st, const char *why) {
  if (st == ET_OK) return EML_OK;
  et_snprintf(c->msg, sizeof c->msg, "%s", why && why[0] ? why : et_status_str(st));
  return st == ET_E_MISMATCH ? EML_E_INTERNAL : (eml_status)st;
}

/* The context after eml_init (and eml_load when `loaded`), or NULL with the reason in *st. */
static ctx_t *ready(eml_context *ctx, bool loaded, eml_status *st) {
  ctx_t *c = get(ctx);
  if (c == NULL) {
    *st = EML_E_INVALID_ARG;
    return NULL;
  }
  if (c->magic != CTX_MAGIC) {
    *st = EML_E_STATE;
    return NULL;
  }
  if (loaded && !c->loaded) {
    *st = fail(c, EML_E_STATE, "no program loaded: call eml_load first");
    return NULL;
  }
  return c;
}
#define READY(ctx, loaded)                     \
  eml_status rst_;                             \
  ctx_t *c = ready((eml_context *)(ctx), (loaded), &rst_); \
  if (c == NULL) return rst_

/* ---------------------------------------------------------------- memory */

static uint8_t *take(ctx_t *c, size_t size) { return et_place(c->mem, c->cfg.n_memory, size); }

/* The one message for a piece of memory that does not fit: the piece, the program's plan and every
 * memory's free bytes. emlkit/verify.py and the fit check read its "cannot place" start. */
static eml_status no_room(ctx_t *c, const char *what, size_t size) {
  char *m = c->msg;
  const size_t cap = sizeof c->msg;
  size_t n = (size_t)et_snprintf(m, cap, "cannot place %s (%lu bytes): program needs arenas [", what, (unsigned long)size);
  for (uint32_t k = 0; k < c->needs.n_arenas && n < cap; k++)
    n += (size_t)et_snprintf(m + n, cap - n, "%s%" PRIu64, k ? ", " : "", c->needs.arena_bytes[k]);
  if (n < cap) n += (size_t)et_snprintf(m + n, cap - n, "] + %lu runtime bytes; regions:", (unsigned long)c->needs.runtime_bytes);
  for (uint32_t i = 0; i < c->cfg.n_memory && n < cap; i++) {
    const et_block *b = &c->mem[i];
    if (c->mem_cfg[i].name) n += (size_t)et_snprintf(m + n, cap - n, " %s", c->mem_cfg[i].name);
    else n += (size_t)et_snprintf(m + n, cap - n, " memory[%" PRIu32 "]", i);
    if (n < cap) n += (size_t)et_snprintf(m + n, cap - n, " %lu (%lu free)", (unsigned long)b->size, (unsigned long)(b->size - b->used));
  }
  return EML_E_MEMORY;
}

/* ---------------------------------------------------------------- NPU */

#if defined(EMLKIT_WITH_ETHOSU)
static const ctx_t *g_npu_owner; /* the context whose device the EthosUBackend drives */

static void bind_npu(ctx_t *c) {
  if (c->cfg.npu) {
    et_snprintf(c->npu_error, sizeof c->npu_error, "the NPU was not brought up");
  } else {
    if (g_npu_owner && g_npu_owner->magic == CTX_MAGIC && g_npu_owner->cfg.npu) return; /* another context owns it */
    et_snprintf(c->npu_error, sizeof c->npu_error, "the program has an Ethos-U delegate but eml_config.npu is NULL: describe the NPU");
  }
  g_npu_owner = c;
  et_backend_register(ethosu_backend(&c->npu, c->npu_error));
}

static eml_status npu_up(ctx_t *c) {
  if (c->npu_up || c->cfg.npu == NULL) return EML_OK; /* without one, delegate init reports it */
  const eml_npu_config *n = c->cfg.npu;
  ethosu_hal hal = {.base = n->base, .irq = n->irq, .secure = n->secure, .privileged = n->privileged,
                    .timeout_us = n->timeout_us, .time_us = n->time_us, .irq_save = n->irq_save,
                    .irq_restore = n->irq_restore, .wait_for_interrupt = n->wait_for_interrupt,
                    .irq_attach = n->irq_attach, .dcache_clean = n->dcache_clean, .dcache_invalidate = n->dcache_invalidate};
  et_status st = ethosu_init(&c->npu, &hal, c->npu_error, sizeof c->npu_error);
  if (st != ET_OK) return from_et(c, st, c->npu_error);
  c->npu_error[0] = 0;
  c->npu_up = true;
  return EML_OK;
}
#endif

/* ---------------------------------------------------------------- init / load */

eml_status eml_init(eml_context *ctx, const eml_config *cfg) {
  ctx_t *c = get(ctx);
  if (c == NULL) return EML_E_INVALID_ARG;
  memset(c, 0, sizeof *c);
  if (cfg == NULL) return fail(c, EML_E_INVALID_ARG, "eml_init: cfg is NULL");
  if (cfg->memory == NULL || cfg->n_memory == 0) return fail(c, EML_E_INVALID_ARG, "eml_config.memory is empty: give at least one block of RAM");
  if (cfg->n_memory > MAX_MEMORY) return fail(c, EML_E_INVALID_ARG, "eml_config.n_memory is %" PRIu32 ": at most %u blocks", cfg->n_memory, MAX_MEMORY);
  if (cfg->profile_events > 0 && cfg->clock == NULL)
    return fail(c, EML_E_INVALID_ARG, "eml_config.profile_events needs eml_config.clock");
  c->cfg = *cfg;
  for (uint32_t i = 0; i < cfg->n_memory; i++) {
    if (cfg->memory[i].base == NULL && cfg->memory[i].size > 0)
      return fail(c, EML_E_INVALID_ARG, "eml_config.memory[%" PRIu32 "] has no base address", i);
    c->mem_cfg[i] = cfg->memory[i];
    c->mem[i].base = (uintptr_t)cfg->memory[i].base;
    c->mem[i].size = cfg->memory[i].size;
  }
  c->cfg.memory = c->mem_cfg;
  if (c->cfg.scratch_bytes == 0) c->cfg.scratch_bytes = DEFAULT_SCRATCH;
  if (cfg->npu) {
    const eml_npu_config *n = cfg->npu;
    if (!n->time_us || !n->irq_save || !n->irq_restore || !n->wait_for_interrupt || (n->irq >= 0 && !n->irq_attach))
      return fail(c, EML_E_INVALID_ARG, "eml_config.npu: time_us, irq_save, irq_restore, wait_for_interrupt and (with an irq) irq_attach are required");
#if !defined(EMLKIT_WITH_ETHOSU)
    return fail(c, EML_E_NOT_SUPPORTED, "this emlkit library is built without Ethos-U support (EMLKIT_ETHOSU=OFF)");
#endif
    c->npu_cfg = *n;
    c->cfg.npu = &c->npu_cfg;
  }
#if defined(EMLKIT_WITH_ETHOSU)
  bind_npu(c);
#endif
  c->magic = CTX_MAGIC;
  return EML_OK;
}

/* Plans, places and builds `method` (NULL: the first) of the program bytes. */
static eml_status load(ctx_t *c, const uint8_t *program, size_t size, const char *method) {
  et_status st = et_program_load(&c->prog, program, size);
  if (st == ET_OK) st = et_method_needs_get(&c->prog, method, &c->needs);
  if (st != ET_OK) return from_et(c, st, c->prog.msg);
  c->planned = true;
  c->arena_bytes = 0;
  for (uint32_t k = 0; k < c->needs.n_arenas; k++) c->arena_bytes += (size_t)c->needs.arena_bytes[k];
  size_t profile_bytes = (size_t)c->cfg.profile_events * sizeof(et_etdump_event);
#if defined(EMLKIT_WITH_ETHOSU)
  if (c->needs.delegate_bytes > 0) {
    eml_status es = npu_up(c);
    if (es != EML_OK) return es;
  }
#endif

  et_method_memory m;
  et_piece nofit;
  if (et_place_method(c->mem, c->cfg.n_memory, &c->needs, c->cfg.scratch_bytes, &m, &nofit) != ET_OK) {
    static const char *const piece[] = {"arena", "runtime memory", "kernel scratch", "delegate memory"};
    char what[32];
    if (nofit.kind == ET_PIECE_ARENA) et_snprintf(what, sizeof what, "arena %" PRIu32, nofit.arena + 1);
    else et_snprintf(what, sizeof what, "%s", piece[nofit.kind]);
    return no_room(c, what, nofit.size);
  }
  et_etdump_event *records = NULL;
  if (profile_bytes > 0 && (records = (et_etdump_event *)(void *)take(c, profile_bytes)) == NULL)
    return no_room(c, "profile records", profile_bytes);

  st = et_method_init(&c->method, &c->prog, method, m.runtime, c->needs.runtime_bytes, m.arena_base, m.arena_size,
                      c->needs.n_arenas, m.scratch, c->cfg.scratch_bytes, m.delegate, c->needs.delegate_bytes);
  if (st != ET_OK) return from_et(c, st, c->method.msg);
  c->method.clock = c->cfg.clock;
  et_etdump_init(&c->etd, records, c->cfg.profile_events, c->cfg.clock_unit);
  if (records) {
    c->method.on_instr = et_etdump_on_instr;
    c->method.on_instr_user = &c->etd;
  }
  c->msg[0] = 0;
  c->loaded = true;
  return EML_OK;
}

/* Forgets the loaded program and frees the caller's memories for the next. */
static void unload(ctx_t *c) {
  c->loaded = c->planned = c->bundled = false;
  c->run_case = -1;
  c->last_ticks = 0;
  for (uint32_t i = 0; i < c->cfg.n_memory; i++) c->mem[i].used = 0;
}

eml_status eml_load(eml_context *ctx, const void *program, size_t size) {
  READY(ctx, false);
  unload(c);
  if (program == NULL) return fail(c, EML_E_INVALID_ARG, "eml_load: program is NULL");
  return load(c, program, size, NULL);
}

eml_status eml_load_bundled(eml_context *ctx, const void *bundle, size_t size) {
  READY(ctx, false);
  unload(c);
  if (bundle == NULL) return fail(c, EML_E_INVALID_ARG, "eml_load_bundled: bundle is NULL");
  et_status st = et_bundle_load(&c->bundle, bundle, size);
  if (st != ET_OK) return from_et(c, st, c->bundle.msg);
  eml_status es = load(c, c->bundle.program, c->bundle.program_len, c->bundle.method_name);
  c->bundled = es == EML_OK;
  return es;
}

eml_status eml_plan_get(const eml_context *ctx, eml_plan *plan) {
  READY(ctx, false);
  if (plan == NULL) return fail(c, EML_E_INVALID_ARG, "eml_plan_get: plan is NULL");
  if (!c->planned) return fail(c, EML_E_STATE, "no memory plan: eml_load did not read a program");
  memset(plan, 0, sizeof *plan);
  plan->n_arenas = c->needs.n_arenas;
  memcpy(plan->arena_bytes, c->needs.arena_bytes, sizeof plan->arena_bytes);
  plan->runtime_bytes = c->needs.runtime_bytes;
  plan->delegate_bytes = c->needs.delegate_bytes;
  plan->prepared_at_load = c->loaded && !c->method.prepare_each_call;
  return EML_OK;
}

eml_status eml_take(eml_context *ctx, const char *what, size_t size, void **data) {
  READY(ctx, true);
  if (data == NULL) return fail(c, EML_E_INVALID_ARG, "eml_take: data is NULL");
  *data = take(c, size ? size : 1u);
  return *data ? EML_OK : no_room(c, what ? what : "eml_take's block", size);
}

/* ---------------------------------------------------------------- test cases */

static ctx_t *with_cases(eml_context *ctx, eml_status *st) {
  ctx_t *c = ready(ctx, true, st);
  if (c && !c->bundled) {
    *st = fail(c, EML_E_STATE, "the loaded program has no test cases: load a .bpte with eml_load_bundled");
    return NULL;
  }
  return c;
}

eml_status eml_num_cases(const eml_context *ctx, uint32_t *n) {
  eml_status st;
  ctx_t *c = with_cases((eml_context *)ctx, &st);
  if (c == NULL) return st;
  if (n == NULL) return fail(c, EML_E_INVALID_ARG, "eml_num_cases: n is NULL");
  *n = et_bundle_num_cases(&c->bundle);
  return EML_OK;
}

eml_status eml_set_case_inputs(eml_context *ctx, uint32_t i) {
  eml_status st;
  ctx_t *c = with_cases(ctx, &st);
  if (c == NULL) return st;
  st = from_et(c, et_bundle_set_inputs(&c->bundle, i, &c->method), c->bundle.msg);
  c->run_case = st == EML_OK ? (int32_t)i : -1;
  return st;
}

eml_status eml_compare_case(eml_context *ctx, uint32_t i, eml_output_diff *diffs, uint32_t n_diffs) {
  eml_status st;
  ctx_t *c = with_cases(ctx, &st);
  if (c == NULL) return st;
  const uint32_t nout = et_method_num_outputs(&c->method);
  if (diffs == NULL || n_diffs < nout)
    return fail(c, EML_E_INVALID_ARG, "eml_compare_case: diffs must hold %" PRIu32 " records (the outputs)", nout);
  return from_et(c, et_bundle_compare(&c->bundle, i, &c->method, (et_output_diff *)(void *)diffs), c->bundle.msg);
}

/* ---------------------------------------------------------------- inputs and outputs */

eml_status eml_num_inputs(const eml_context *ctx, uint32_t *n) {
  READY(ctx, true);
  if (n == NULL) return fail(c, EML_E_INVALID_ARG, "eml_num_inputs: n is NULL");
  *n = et_method_num_inputs(&c->method);
  return EML_OK;
}

eml_status eml_num_outputs(const eml_context *ctx, uint32_t *n) {
  READY(ctx, true);
  if (n == NULL) return fail(c, EML_E_INVALID_ARG, "eml_num_outputs: n is NULL");
  *n = et_method_num_outputs(&c->method);
  return EML_OK;
}

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), t = strlen(tail);
  return n >= t && memcmp(s + n - t, tail, t) == 0;
}

/* scale and zero point from a (de)quantize_per_tensor(x, scale, zero_point, qmin, qmax, dtype, out) call. */
static bool quant_args(const et_instr *ins, double *scale, int32_t *zp) {
  if (ins->nargs < 7 || ins->args[1]->tag != ET_TAG_DOUBLE || ins->args[2]->tag != ET_TAG_INT) return false;
  *scale = ins->args[1]->u.d;
  *zp = (int32_t)ins->args[2]->u.i;
  return true;
}

static void quant_of(const et_method *m, const et_value *v, bool is_input, eml_tensor_info *info) {
  uint32_t n = m->chain_start[m->nchains];
  for (uint32_t k = 0; k < n; k++) {
    /* inputs: the first quantize reading v; outputs: the last call writing v */
    const et_instr *ins = &m->instrs[is_input ? k : n - 1 - k];
    if (ins->kind != FBPU_InstructionArguments__KernelCall || ins->nargs == 0) continue;
    const char *name = m->ops[ins->a].name;
    if (is_input) {
      if (ins->args[0] == v && ends_with(name, "::quantize_per_tensor")) {
        info->quantized = quant_args(ins, &info->scale, &info->zero_point);
        return;
      }
    } else if (ins->args[ins->nargs - 1] == v) {
      if (ends_with(name, "quantize_per_tensor")) info->quantized = quant_args(ins, &info->scale, &info->zero_point);
      return;
    }
  }
}

static eml_status tensor_info(ctx_t *c, const et_value *v, uint32_t i, bool is_input, eml_tensor_info *info) {
  const char *what = is_input ? "input" : "output";
  if (info == NULL) return fail(c, EML_E_INVALID_ARG, "%s info: info is NULL", what);
  if (v == NULL) return fail(c, EML_E_INVALID_ARG, "%s %" PRIu32 " does not exist", what, i);
  if (v->tag != ET_TAG_TENSOR) return fail(c, EML_E_NOT_SUPPORTED, "%s %" PRIu32 " is not a tensor", what, i);
  const et_tensor *t = v->u.t;
  memset(info, 0, sizeof *info);
  info->dtype = (eml_dtype)t->dtype;
  info->ndim = t->dim;
  for (uint32_t d = 0; d < t->dim && d < EML_MAX_DIMS; d++) info->shape[d] = t->sizes[d], info->dim_order[d] = t->dim_order[d];
  info->nbytes = t->nbytes;
  quant_of(&c->method, v, is_input, info);
  return EML_OK;
}

eml_status eml_input_info(const eml_context *ctx, uint32_t i, eml_tensor_info *info) {
  READY(ctx, true);
  return tensor_info(c, et_method_input(&c->method, i), i, true, info);
}

eml_status eml_output_info(const eml_context *ctx, uint32_t i, eml_tensor_info *info) {
  READY(ctx, true);
  return tensor_info(c, et_method_output(&c->method, i), i, false, info);
}

eml_status eml_set_input(eml_context *ctx, uint32_t i, const void *data, size_t nbytes) {
  READY(ctx, true);
  const et_value *v = et_method_input(&c->method, i);
  if (v == NULL) return fail(c, EML_E_INVALID_ARG, "input %" PRIu32 " does not exist", i);
  if (v->tag != ET_TAG_TENSOR) return fail(c, EML_E_NOT_SUPPORTED, "input %" PRIu32 " is not a tensor", i);
  if (data == NULL) return fail(c, EML_E_INVALID_ARG, "input %" PRIu32 ": data is NULL", i);
  if (nbytes != v->u.t->nbytes)
    return fail(c, EML_E_INVALID_ARG, "input %" PRIu32 " takes %lu bytes, got %lu", i, (unsigned long)v->u.t->nbytes,
                (unsigned long)nbytes);
  c->run_case = -1;
  et_tensor src = *v->u.t;
  src.data = (void *)(uintptr_t)data; /* read only: copied, or used in place when unplanned */
  return from_et(c, et_method_set_input_tensor(&c->method, i, &src), c->method.msg);
}

eml_status eml_run(eml_context *ctx) {
  READY(ctx, true);
  const bool rec = c->etd.cap > 0;
  uint64_t (*const clock)(void) = c->cfg.clock;
  const uint64_t t0 = clock ? clock() : 0;
  if (rec) et_etdump_run_begin(&c->etd, t0, c->run_case);
  et_status st = et_method_execute(&c->method);
  const uint64_t t1 = clock ? clock() : 0;
  if (rec) et_etdump_run_end(&c->etd, t1, st == ET_OK);
  c->last_ticks = t1 - t0;
  c->run_case = -1; /* a run consumes its inputs */
  return from_et(c, st, c->method.msg);
}

eml_status eml_reset_state(eml_context *ctx) {
  READY(ctx, true);
  return from_et(c, et_method_reset_state(&c->method), c->method.msg);
}

eml_status eml_output(const eml_context *ctx, uint32_t i, const void **data, size_t *nbytes) {
  READY(ctx, true);
  const et_value *v = et_method_output(&c->method, i);
  if (data == NULL || nbytes == NULL) return fail(c, EML_E_INVALID_ARG, "eml_output: data or nbytes is NULL");
  if (v == NULL) return fail(c, EML_E_INVALID_ARG, "output %" PRIu32 " does not exist", i);
  if (v->tag != ET_TAG_TENSOR) return fail(c, EML_E_NOT_SUPPORTED, "output %" PRIu32 " is not a tensor", i);
  *data = v->u.t->data;
  *nbytes = v->u.t->nbytes;
  return EML_OK;
}

/* ---------------------------------------------------------------- profiling */

eml_status eml_stats_get(const eml_context *ctx, eml_stats *stats) {
  READY(ctx, false);
  if (stats == NULL) return fail(c, EML_E_INVALID_ARG, "eml_stats_get: stats is NULL");
  memset(stats, 0, sizeof *stats);
  for (uint32_t i = 0; i < c->cfg.n_memory; i++) stats->memory_used += c->mem[i].used;
  if (c->loaded) {
    stats->arena_bytes = c->arena_bytes;
    stats->delegate_bytes = c->needs.delegate_bytes;
    stats->profile_runs = c->etd.runs;
    stats->profile_dropped = c->etd.dropped_runs;
    stats->last_run_ticks = c->last_ticks;
  }
  return EML_OK;
}

/* Profile entries: operators by name (overloads merged) in program order, then
 * one per delegate backend. visit(i) returns entry i, or false past the end. */
static bool op_entry(const et_method *m, uint32_t want, eml_op_profile *e) {
  uint32_t idx = 0;
  for (uint32_t i = 0; i < m->nops; i++) {
    bool seen = false;
    for (uint32_t j = 0; j < i && !seen; j++) seen = strcmp(m->ops[j].name, m->ops[i].name) == 0;
    if (seen) continue;
    if (idx++ != want) continue;
    e->name = m->ops[i].name;
    e->delegate = false;
    e->calls = e->count = 0;
    for (uint32_t j = i; j < m->nops; j++)
      if (strcmp(m->ops[j].name, m->ops[i].name) == 0) e->calls += m->ops[j].calls, e->count += m->ops[j].count;
    return true;
  }
  uint32_t n = m->chain_start[m->nchains];
  for (uint32_t i = 0; i < n; i++) {
    const et_instr *ins = &m->instrs[i];
    if (ins->kind != FBPU_InstructionArguments__DelegateCall) continue;
    bool seen = false;
    for (uint32_t j = 0; j < i && !seen; j++) seen = m->instrs[j].kind == ins->kind && m->instrs[j].backend == ins->backend;
    if (seen) continue;
    if (idx++ != want) continue;
    e->name = ins->backend->id;
    e->delegate = true;
    e->calls = e->count = 0;
    for (uint32_t j = i; j < n; j++)
      if (m->instrs[j].kind == ins->kind && m->instrs[j].backend == ins->backend)
        e->calls += m->instrs[j].calls, e->count += m->instrs[j].count;
    return true;
  }
  return false;
}

eml_status eml_profile_count(const eml_context *ctx, uint32_t *n) {
  READY(ctx, true);
  if (n == NULL) return fail(c, EML_E_INVALID_ARG, "eml_profile_count: n is NULL");
  eml_op_profile e;
  uint32_t k = 0;
  while (op_entry(&c->method, k, &e)) k++;
  *n = k;
  return EML_OK;
}

eml_status eml_profile_entry(const eml_context *ctx, uint32_t i, eml_op_profile *entry) {
  READY(ctx, true);
  if (entry == NULL) return fail(c, EML_E_INVALID_ARG, "eml_profile_entry: entry is NULL");
  if (!op_entry(&c->method, i, entry)) return fail(c, EML_E_INVALID_ARG, "profile entry %" PRIu32 " does not exist", i);
  return EML_OK;
}

eml_status eml_profile_reset(eml_context *ctx) {
  READY(ctx, true);
  et_method_reset_stats(&c->method);
  et_etdump_clear(&c->etd);
  return EML_OK;
}

eml_status eml_record_runs(eml_context *ctx, uint32_t runs, bool debug_outputs) {
  READY(ctx, true);
  if (c->cfg.clock == NULL) return fail(c, EML_E_INVALID_ARG, "eml_record_runs needs eml_config.clock");
  if (runs == 0) return fail(c, EML_E_INVALID_ARG, "eml_record_runs: record at least one run");
  const et_method *m = &c->method;
  const uint32_t per_run = m->chain_start[m->nchains] + 1u; /* every instruction, and the run itself */
  const size_t bytes = (size_t)per_run * runs * sizeof(et_etdump_event);
  et_etdump_event *rec = (et_etdump_event *)(void *)take(c, bytes);
  if (rec == NULL) return no_room(c, "ETDump records", bytes);
  et_etdump_init(&c->etd, rec, per_run * runs, c->cfg.clock_unit);
  c->method.on_instr = et_etdump_on_instr;
  c->method.on_instr_user = &c->etd;
  if (!debug_outputs) return EML_OK;
  uint32_t nrec;
  const size_t dbytes = et_etdump_debug_bytes(m, &nrec);
  et_etdump_debug *drec = (et_etdump_debug *)(void *)take(c, (size_t)(nrec ? nrec : 1u) * sizeof(et_etdump_debug));
  if (drec == NULL) return no_room(c, "debug event records", (size_t)nrec * sizeof(et_etdump_debug));
  uint8_t *buf = take(c, dbytes ? dbytes : 1u);
  if (buf == NULL) return no_room(c, "the debug buffer (every call's output)", dbytes);
  et_etdump_debug_init(&c->etd, drec, nrec, buf, dbytes);
  return EML_OK;
}

eml_status eml_debug_outputs(const eml_context *ctx, const uint8_t **data, size_t *size, uint32_t *missed) {
  READY(ctx, true);
  if (data == NULL || size == NULL || missed == NULL) return fail(c, EML_E_INVALID_ARG, "eml_debug_outputs: data, size or missed is NULL");
  if (c->etd.dbuf == NULL) return fail(c, EML_E_STATE, "no debug capture: call eml_record_runs with debug_outputs");
  *data = c->etd.dbuf;
  *size = c->etd.dbuf_used;
  *missed = c->etd.dbg_missed;
  return EML_OK;
}

eml_status eml_etdump(eml_context *ctx, const uint8_t **data, size_t *size) {
  READY(ctx, true);
  if (data == NULL || size == NULL) return fail(c, EML_E_INVALID_ARG, "eml_etdump: data or size is NULL");
  if (c->etd.cap == 0) return fail(c, EML_E_STATE, "no profile records: set eml_config.profile_events and clock");
  size_t need;
  const uint8_t *none;
  et_status st = et_etdump_serialize(&c->etd, c->method.name, NULL, 0, &none, &need);
  if (st != ET_OK) return from_et(c, st, "cannot size the ETDump");
  /* The largest free tail of the caller's memories holds it; nothing else lives there. */
  et_block *best = NULL;
  size_t best_free = 0;
  for (uint32_t i = 0; i < c->cfg.n_memory; i++) {
    uintptr_t end = c->mem[i].base + c->mem[i].size;
    uintptr_t start = (c->mem[i].base + c->mem[i].used + 7u) & ~(uintptr_t)7u;
    size_t fr = start < end ? (size_t)(end - start) & ~(size_t)7u : 0;
    if (fr > best_free) best = &c->mem[i], best_free = fr;
  }
  if (best == NULL || best_free < need) return no_room(c, "the ETDump", need);
  uint8_t *start = (uint8_t *)((best->base + best->used + 7u) & ~(uintptr_t)7u);
  st = et_etdump_serialize(&c->etd, c->method.name, start, best_free, data, size);
  return from_et(c, st, "cannot write the ETDump");
}

static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

eml_status eml_etdump_text(eml_context *ctx, void (*write)(void *user, const char *s, size_t n), void *user) {
  READY(ctx, true);
  if (write == NULL) return fail(c, EML_E_INVALID_ARG, "eml_etdump_text: write is NULL");
  const uint8_t *data;
  size_t size;
  eml_status st = eml_etdump(ctx, &data, &size);
  if (st != EML_OK) return st;
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char line[80];
  int n = et_snprintf(line, sizeof line, "ETDUMP BEGIN bytes=%lu crc32=%08" PRIx32 "\n", (unsigned long)size,
                   crc32_update(0, data, size));
  write(user, line, (size_t)n);
  size_t len = 0;
  for (size_t i = 0; i < size; i += 3) {
    uint32_t v = (uint32_t)data[i] << 16;
    if (i + 1 < size) v |= (uint32_t)data[i + 1] << 8;
    if (i + 2 < size) v |= data[i + 2];
    line[len++] = b64[(v >> 18) & 63u];
    line[len++] = b64[(v >> 12) & 63u];
    line[len++] = i + 1 < size ? b64[(v >> 6) & 63u] : '=';
    line[len++] = i + 2 < size ? b64[v & 63u] : '=';
    if (len == 64 || i + 3 >= size) {
      line[len++] = '\n';
      write(user, line, len);
      len = 0;
    }
  }
  write(user, "ETDUMP END\n", 11);
  return EML_OK;
}

/* ---------------------------------------------------------------- the build's operators */

eml_status eml_operator(uint32_t i, eml_operator_info *info) {
  if (info == NULL) return EML_E_INVALID_ARG;
  const char *overload;
  const char *name = et_registry_entry(i, &overload);
  if (name == NULL) return EML_E_INVALID_ARG;
  if (overload == NULL) overload = "";
  info->name = name;
  info->overload = overload;
  info->state_bytes = 0;
  (void)et_registry_find(name, (uint32_t)strlen(name), overload, (uint32_t)strlen(overload), NULL, &info->state_bytes);
  /* sized per call by one of its arguments (registry.h): no fixed figure; the plan's runtime bytes count it */
  if (info->state_bytes & ET_STATE_ARG_FLAG) info->state_bytes = 0;
  info->in_place = et_registry_in_place(name, (uint32_t)strlen(name), overload, (uint32_t)strlen(overload),
                                        &info->in_place_tail, &info->in_place_list);
  info->in_place_ahead = et_registry_in_place_ahead(name, (uint32_t)strlen(name), overload, (uint32_t)strlen(overload),
                                                    NULL);
  return EML_OK;
}

/* ---------------------------------------------------------------- errors */

const char *eml_last_error(const eml_context *ctx) {
  const ctx_t *c = cget(ctx);
  if (c == NULL) return "the context is NULL";
  if (c->magic != CTX_MAGIC) return c->msg[0] ? c->msg : "the context is not initialised: call eml_init";
  return c->msg;
}

const char *eml_status_name(eml_status st) {
  switch (st) {
    case EML_E_MEMORY: return "memory";
    case EML_E_STATE: return "state";
    default: return et_status_name((et_status)st);
  }
}
