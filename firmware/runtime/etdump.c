/* ETDump recorder and writer: see etdump.h. */
#include "etdump.h"

#include "fb_build.h"
#include "schema_ids.h"

#define ETDUMP_VERSION 0u /* the version ExecuTorch's ETDumpGen writes */

static const char k_execute[] = "Method::execute";
static const char k_delegate[] = "DELEGATE_CALL";

void et_etdump_init(et_etdump *d, et_etdump_event *records, uint32_t cap, const char *unit) {
  memset(d, 0, sizeof *d);
  d->ev = records;
  d->cap = records ? cap : 0;
  d->unit = unit ? unit : "count";
}

void et_etdump_clear(et_etdump *d) {
  d->n = d->runs = d->dropped_runs = 0;
  d->in_run = d->overflow = false;
  d->ndbg = 0;
  d->dbuf_used = 0;
}

static et_etdump_event *append(et_etdump *d) {
  if (d->n >= d->cap) {
    d->overflow = true;
    return NULL;
  }
  et_etdump_event *e = &d->ev[d->n++];
  memset(e, 0, sizeof *e);
  e->bundled = -1;
  return e;
}

#define DEBUG_ALIGN 16u

void et_etdump_debug_init(et_etdump *d, et_etdump_debug *records, uint32_t cap, void *buf, size_t buf_cap) {
  d->dbg = records;
  d->dbg_cap = records ? cap : 0;
  d->dbuf = buf;
  d->dbuf_cap = buf ? buf_cap : 0;
  d->ndbg = 0;
  d->dbuf_used = 0;
  d->dbg_missed = 0;
  d->dbg_armed = records != NULL && buf != NULL;
  d->dbg_active = false;
}

/* The tensor a call wrote: its last argument (ExecuTorch's out-variant convention). */
static const et_tensor *call_output(const et_instr *ins) {
  if (ins->nargs == 0 || ins->args[ins->nargs - 1] == NULL) return NULL;
  const et_value *v = ins->args[ins->nargs - 1];
  return v->tag == ET_TAG_TENSOR ? v->u.t : NULL;
}

static bool is_call(const et_instr *ins) {
  return ins->kind == FBPU_InstructionArguments__KernelCall || ins->kind == FBPU_InstructionArguments__DelegateCall;
}

size_t et_etdump_debug_bytes(const et_method *m, uint32_t *records) {
  size_t bytes = 0;
  uint32_t n = 0, ninstr = m->chain_start[m->nchains];
  for (uint32_t i = 0; i < ninstr; i++) {
    const et_tensor *t = is_call(&m->instrs[i]) ? call_output(&m->instrs[i]) : NULL;
    if (t == NULL) continue;
    bytes += (t->nbytes + DEBUG_ALIGN - 1u) & ~(size_t)(DEBUG_ALIGN - 1u);
    n++;
  }
  *records = n;
  return bytes;
}

static void capture(et_etdump *d, uint32_t chain, uint32_t index, const et_instr *ins) {
  const et_tensor *t = call_output(ins);
  if (t == NULL) return;
  size_t at = (d->dbuf_used + DEBUG_ALIGN - 1u) & ~(size_t)(DEBUG_ALIGN - 1u);
  if (d->ndbg >= d->dbg_cap || at > d->dbuf_cap || t->nbytes > d->dbuf_cap - at || at > UINT32_MAX) {
    d->dbg_missed++;
    return;
  }
  et_etdump_debug *r = &d->dbg[d->ndbg];
  et_tensor logical = *t;
  for (uint8_t k = 0; k < t->dim; k++) logical.dim_order[k] = k;
  logical.data = d->dbuf + at;
  if (et_copy_tensor(NULL, &logical, t) != ET_OK) {
    d->dbg_missed++;
    return;
  }
  memset(r, 0, sizeof *r);
  r->chain = (int32_t)chain;
  r->instr = (int32_t)index;
  r->run_ev = d->run_start;
  r->dtype = t->dtype;
  r->dim = t->dim;
  memcpy(r->sizes, t->sizes, sizeof r->sizes);
  r->offset = (uint32_t)at;
  d->dbuf_used = at + t->nbytes;
  d->ndbg++;
}

void et_etdump_run_begin(et_etdump *d, uint64_t now, int32_t bundled_index) {
  d->dbg_active = d->dbg_armed;
  d->dbg_run_start = d->ndbg;
  d->dbuf_run_start = d->dbuf_used;
  d->in_run = true;
  d->overflow = false;
  d->run_start = d->n;
  et_etdump_event *e = append(d);
  if (e == NULL) return;
  e->name = k_execute;
  e->chain = e->instr = -1;
  e->bundled = bundled_index;
  e->is_run = 1;
  e->start = now;
}

void et_etdump_run_end(et_etdump *d, uint64_t now, bool ok) {
  if (!d->in_run) return;
  d->in_run = false;
  bool active = d->dbg_active;
  d->dbg_active = false;
  if (!ok || d->overflow) {
    d->n = d->run_start;
    d->dropped_runs++;
    d->ndbg = d->dbg_run_start; /* its outputs go with it; the next run captures them */
    d->dbuf_used = d->dbuf_run_start;
    return;
  }
  if (active) d->dbg_armed = false;
  d->ev[d->run_start].end = now;
  d->runs++;
}

void et_etdump_on_instr(void *user, uint32_t chain, uint32_t index, const et_instr *ins, const et_op_slot *op,
                        uint64_t t0, uint64_t t1) {
  et_etdump *d = user;
  if (!d->in_run || d->overflow) return;
  if (op == NULL && ins->kind != FBPU_InstructionArguments__DelegateCall) return; /* moves, jumps, frees */
  if (d->dbg_active) capture(d, chain, index, ins);
  et_etdump_event *e = append(d);
  if (e == NULL) return;
  e->name = op ? op->name : k_delegate;
  e->overload = op ? op->overload : NULL;
  e->chain = (int32_t)chain;
  e->instr = (int32_t)index;
  e->start = t0;
  e->end = t1;
}

/* ---- writer ---- */

typedef struct {
  const et_etdump *d;
  uint32_t first, count; /* a run's records */
} span;

/* A run's events: its profile records, then its debug records (dbg_first.. with run_ev == first). */
static fbw_ref event_ref(const void *ctx, uint32_t i) {
  const span *s = ctx;
  if (i < s->count) return s->d->ev[s->first + i].ref;
  i -= s->count;
  for (uint32_t k = 0; k < s->d->ndbg; k++)
    if (s->d->dbg[k].run_ev == s->first && i-- == 0) return s->d->dbg[k].ref;
  return 0;
}

/* One DebugEvent (inside its Event) per debug record of the run starting at ev[first]; returns how many. */
static uint32_t write_debug_events(fbw *w, et_etdump *d, uint32_t first) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < d->ndbg; k++) {
    et_etdump_debug *r = &d->dbg[k];
    if (r->run_ev != first) continue;
    int64_t sizes[ET_MAX_DIM], strides[ET_MAX_DIM];
    int64_t stride = 1;
    for (int j = (int)r->dim - 1; j >= 0; j--) {
      sizes[j] = r->sizes[j];
      strides[j] = stride;
      stride *= r->sizes[j];
    }
    fbw_ref vsizes = fbw_i64_vector(w, sizes, r->dim);
    fbw_ref vstrides = fbw_i64_vector(w, strides, r->dim);
    fbw_table_start(w);
    fbw_add_u64(w, FBD_Tensor__offset, r->offset);
    fbw_add_ref(w, FBD_Tensor__sizes, vsizes);
    fbw_add_ref(w, FBD_Tensor__strides, vstrides);
    fbw_add_u8(w, FBD_Tensor__scalar_type, (uint8_t)r->dtype);
    fbw_ref tensor = fbw_table_end(w);
    fbw_table_start(w);
    fbw_add_ref(w, FBD_Value__tensor, tensor);
    fbw_add_u8(w, FBD_Value__val, FBDE_ValueType__Tensor);
    fbw_ref value = fbw_table_end(w);
    fbw_table_start(w);
    fbw_add_u64(w, FBD_DebugEvent__chain_index, (uint64_t)r->chain);
    fbw_add_ref(w, FBD_DebugEvent__debug_entry, value);
    fbw_add_i32(w, FBD_DebugEvent__instruction_id, r->instr);
    fbw_ref de = fbw_table_end(w);
    fbw_table_start(w);
    fbw_add_ref(w, FBD_Event__debug_event, de);
    r->ref = fbw_table_end(w);
    n++;
  }
  return n;
}

static fbw_ref run_ref(const void *ctx, uint32_t i) {
  const et_etdump *d = ctx;
  for (uint32_t k = 0; k < d->n; k++)
    if (d->ev[k].is_run && i-- == 0) return d->ev[k].ref;
  return 0;
}

/* "<name>.<overload>" for operators, the name alone otherwise; each once. */
static void write_names(fbw *w, et_etdump *d) {
  for (uint32_t i = 0; i < d->n; i++) {
    et_etdump_event *e = &d->ev[i];
    e->name_ref = 0;
    for (uint32_t j = 0; j < i && e->name_ref == 0; j++)
      if (d->ev[j].name == e->name && d->ev[j].overload == e->overload) e->name_ref = d->ev[j].name_ref;
    if (e->name_ref) continue;
    if (e->overload && e->overload[0]) {
      /* the dot goes with the overload: write "<name>" + ".<overload>" */
      char ov[ET_MSG_CAP];
      size_t n = strlen(e->overload);
      if (n > sizeof ov - 2) n = sizeof ov - 2;
      ov[0] = '.';
      memcpy(ov + 1, e->overload, n);
      e->name_ref = fbw_string2(w, e->name, strlen(e->name), ov, n + 1);
    } else {
      e->name_ref = fbw_string2(w, e->name, strlen(e->name), NULL, 0);
    }
  }
}

et_status et_etdump_serialize(et_etdump *d, const char *method, void *buf, size_t cap, const uint8_t **data, size_t *len) {
  fbw w;
  fbw_init(&w, buf, cap);
  char suffix[40];
  size_t un = strlen(d->unit);
  if (un > sizeof suffix - 4) un = sizeof suffix - 4;
  suffix[0] = ' ', suffix[1] = '(';
  memcpy(suffix + 2, d->unit, un);
  suffix[2 + un] = ')';
  fbw_ref run_name = fbw_string2(&w, method, strlen(method), suffix, un + 3);
  write_names(&w, d);

  uint32_t nruns = 0;
  for (uint32_t i = 0; i < d->n;) {
    span s = {d, i, 1};
    while (s.first + s.count < d->n && !d->ev[s.first + s.count].is_run) s.count++;
    for (uint32_t k = 0; k < s.count; k++) {
      et_etdump_event *e = &d->ev[s.first + k];
      fbw_table_start(&w);
      fbw_add_u64(&w, FBD_ProfileEvent__start_time, e->start);
      fbw_add_u64(&w, FBD_ProfileEvent__end_time, e->end);
      fbw_add_ref(&w, FBD_ProfileEvent__name, e->name_ref);
      fbw_add_i32(&w, FBD_ProfileEvent__chain_index, e->chain);
      fbw_add_i32(&w, FBD_ProfileEvent__instruction_id, e->instr);
      fbw_ref pe = fbw_table_end(&w);
      fbw_table_start(&w);
      fbw_add_ref(&w, FBD_Event__profile_event, pe);
      e->ref = fbw_table_end(&w);
    }
    uint32_t ndebug = write_debug_events(&w, d, s.first);
    fbw_ref events = fbw_ref_vector(&w, s.count + ndebug, event_ref, &s);
    fbw_table_start(&w);
    fbw_add_ref(&w, FBD_RunData__name, run_name);
    fbw_add_i32(&w, FBD_RunData__bundled_input_index, d->ev[s.first].bundled);
    fbw_add_ref(&w, FBD_RunData__events, events);
    d->ev[s.first].ref = fbw_table_end(&w); /* its Event is in the vector already */
    nruns++;
    i = s.first + s.count;
  }
  fbw_ref runs = fbw_ref_vector(&w, nruns, run_ref, d);
  fbw_table_start(&w);
  fbw_add_u32(&w, FBD_ETDump__version, ETDUMP_VERSION);
  fbw_add_ref(&w, FBD_ETDump__run_data, runs);
  fbw_ref root = fbw_table_end(&w);
  return fbw_finish(&w, root, FBD_FILE_IDENTIFIER, true, data, len);
}
