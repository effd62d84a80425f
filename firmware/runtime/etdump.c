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

void et_etdump_run_begin(et_etdump *d, uint64_t now, int32_t bundled_index) {
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
  if (!ok || d->overflow) {
    d->n = d->run_start;
    d->dropped_runs++;
    return;
  }
  d->ev[d->run_start].end = now;
  d->runs++;
}

void et_etdump_on_instr(void *user, uint32_t chain, uint32_t index, const et_instr *ins, const et_op_slot *op,
                        uint64_t t0, uint64_t t1) {
  et_etdump *d = user;
  if (!d->in_run || d->overflow) return;
  if (op == NULL && ins->kind != FBPU_InstructionArguments__DelegateCall) return; /* moves, jumps, frees */
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

static fbw_ref event_ref(const void *ctx, uint32_t i) {
  const span *s = ctx;
  return s->d->ev[s->first + i].ref;
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
    fbw_ref events = fbw_ref_vector(&w, s.count, event_ref, &s);
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
