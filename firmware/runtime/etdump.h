/* Profiling records of method runs, written out as an ExecuTorch ETDump
 * (devtools/etdump/etdump_schema_flatcc.fbs, file identifier "ED00", size
 * prefixed, as ExecuTorch's ETDumpGen writes it), so ExecuTorch's Inspector
 * reads it and maps every event to the graph through the ETRecord.
 *
 * What is recorded, per run (one RunData each, named "<method> (<unit>)" so
 * the counter's unit travels with the data):
 *   "Method::execute"   the whole run (chain and instruction -1);
 *   "<op>.<overload>"   every kernel call, with its chain and instruction index;
 *   "DELEGATE_CALL"     every delegate call (the Inspector names the backend
 *                       from the ETRecord's delegate map).
 * start_time/end_time are the method's clock (cycles or instructions).
 *
 * Memory: `cap` records in caller memory, no allocation. A run that does not
 * fit is dropped whole (counted in dropped_runs), never written in part.
 *
 * Debug capture (et_etdump_debug_init): during the next recorded run, the
 * output of every kernel and delegate call (its last argument, when a tensor)
 * is copied in logical order (contiguous, dims as in PyTorch) into a debug
 * buffer and recorded as a DebugEvent holding a Tensor at that buffer offset,
 * as ExecuTorch's ETDumpGen logs intermediate outputs; the Inspector reads it
 * with the buffer (debug_buffer_path). One run only: intermediate tensors are
 * big, and one input is what a layer-by-layer comparison needs. */
#ifndef ET_ETDUMP_H
#define ET_ETDUMP_H

#include "runtime.h"

typedef struct {
  const char *name;     /* operator name in the program, or a fixed event name */
  const char *overload; /* operator overload, NULL for other events */
  int32_t chain, instr; /* -1, -1 for the run record */
  int32_t bundled;      /* run record: bundled input index, -1 when none */
  uint8_t is_run;       /* the record that opens a run */
  uint32_t name_ref, ref; /* scratch for et_etdump_serialize */
  uint64_t start, end;
} et_etdump_event;

typedef struct {
  int32_t chain, instr;
  uint32_t run_ev;      /* index of its run's record in ev */
  int8_t dtype;
  uint8_t dim;
  int32_t sizes[ET_MAX_DIM];
  uint32_t offset;      /* of its data in the debug buffer */
  uint32_t ref;         /* scratch for et_etdump_serialize */
} et_etdump_debug;

typedef struct {
  et_etdump_event *ev;
  uint32_t cap, n;
  uint32_t run_start;   /* index of the open run's record */
  bool in_run, overflow;
  uint32_t runs, dropped_runs;
  const char *unit;     /* the clock's unit: "cycles" or "instructions" */
  /* debug capture (all zero when off) */
  et_etdump_debug *dbg;
  uint32_t dbg_cap, ndbg, dbg_run_start;
  uint8_t *dbuf;
  size_t dbuf_cap, dbuf_used, dbuf_run_start;
  bool dbg_armed, dbg_active;
  uint32_t dbg_missed;  /* outputs that did not fit (records or buffer) */
} et_etdump;

void et_etdump_init(et_etdump *d, et_etdump_event *records, uint32_t cap, const char *unit);
/* Forget every recorded run. */
void et_etdump_clear(et_etdump *d);
/* Captures every call's output during the next recorded run: `records` for
 * one event per call, `buf` for their data (et_etdump_debug_bytes sizes it). */
void et_etdump_debug_init(et_etdump *d, et_etdump_debug *records, uint32_t cap, void *buf, size_t buf_cap);
/* The debug buffer bytes and records one run of method m takes (its calls' output tensors, each 16-aligned). */
size_t et_etdump_debug_bytes(const et_method *m, uint32_t *records);
/* Brackets one run; `ok` false (the run failed) drops it. */
void et_etdump_run_begin(et_etdump *d, uint64_t now, int32_t bundled_index);
void et_etdump_run_end(et_etdump *d, uint64_t now, bool ok);
/* The et_method.on_instr hook; `user` is the et_etdump. */
void et_etdump_on_instr(void *user, uint32_t chain, uint32_t index, const et_instr *ins, const et_op_slot *op,
                        uint64_t t0, uint64_t t1);

/* Serialises every recorded run of method `method`. buf == NULL measures:
 * *len is then the bytes needed. Otherwise the ETDump ends at buf + cap and
 * starts at *data. ET_E_ARENA_TOO_SMALL when cap is short. */
et_status et_etdump_serialize(et_etdump *d, const char *method, void *buf, size_t cap, const uint8_t **data, size_t *len);

#endif
