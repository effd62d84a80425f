/* Public API of the bare-metal runtime: load a program straight from its
 * bytes, build a method in caller-given memory, run it, and check bundled
 * test cases. No dynamic allocation: all memory comes from the caller.
 * Every call that can fail returns et_status and leaves a one-line reason in
 * the object's `msg`. */
#ifndef ET_RUNTIME_H
#define ET_RUNTIME_H

#include "et_types.h"
#include "fb.h"

#define ET_MSG_CAP 240

/* Format a load/run error into an ET_MSG_CAP buffer (a program's or bundle's
 * msg) and return `st`. Defined in method.c: the loader and the bundle checker
 * both use it, and every image that runs a program links method.c. */
et_status et_errf(char *msg, et_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define ET_MAX_ARENAS 8          /* planned memory ids 1..ET_MAX_ARENAS */
#define ET_MAX_CHAINS 4
#define ET_MAX_STEPS 16000000u   /* executed instructions per run: stops corrupt jump loops */

/* ---- program (.pte) ---- */
typedef struct {
  fb_buf buf;           /* the flatbuffer part (program_size bytes) */
  const uint8_t *file;  /* the whole .pte: flatbuffer, then segments */
  size_t file_len;
  fb_table root;
  fb_vec plans;         /* [ExecutionPlan] */
  size_t seg_base;      /* absolute offset of the segment data, 0 if none */
  size_t seg_size;      /* bytes available for segments from seg_base */
  fb_vec segments;      /* [DataSegment] */
  bool const_inline;    /* constants in Program.constant_buffer */
  fb_vec const_buffers; /* [Buffer] when inline */
  fb_vec const_offsets; /* [uint64] into the constant segment otherwise */
  size_t const_seg;     /* absolute offset of the constant segment */
  size_t const_seg_size;
  char msg[ET_MSG_CAP];
} et_program;

/* Verifies identifier, schema version, extended header, segments and
 * constant tables. `data` must stay alive and unchanged while in use. */
et_status et_program_load(et_program *p, const uint8_t *data, size_t len);
/* Constant `idx` with at least `nbytes` bytes, used in place. */
et_status et_program_constant(et_program *p, uint32_t idx, size_t nbytes, const uint8_t **out);
/* The processed data of a BackendDelegate table (inline or in a segment), in place. */
et_status et_program_delegate_data(et_program *p, const fb_table *delegate, const uint8_t **data, size_t *len);

/* ---- method ---- */
struct et_backend;

/* How many entries each of the runtime's tables has for a method, and the kernel calls' state. */
typedef struct {
  uint32_t values, tensors, ops, instrs, args;
  size_t kernel_state; /* registry state bytes of every kernel call, each rounded up to 8 */
} et_plan_counts;
/* A build's sizes of the table entries (runner/layout.c records a device image's in its ELF). */
typedef struct {
  uint32_t value, tensor, op_slot, instr, pointer;
} et_abi_sizes;
/* The runtime memory a method with these counts takes on a build with these sizes (NULL: this build):
 * each table rounded up to 8 bytes, then the kernel state. The host's fit check (emlkit/deploy/fit.py) asks
 * it with a device image's sizes. */
size_t et_runtime_bytes(const et_plan_counts *counts, const et_abi_sizes *abi);

typedef struct {
  et_plan_counts counts;
  size_t runtime_bytes;                 /* for et_method_init's runtime memory */
  size_t delegate_bytes;                /* for et_method_init's delegate memory (device-visible) */
  uint32_t n_arenas;                    /* memory ids 1..n_arenas are used */
  uint64_t arena_bytes[ET_MAX_ARENAS];  /* arena_bytes[k] is memory id k+1 */
} et_method_needs;

typedef struct {
  const char *name; /* points into the program */
  const char *overload;
  et_op_fn fn;
  et_op_prepare_fn prepare; /* NULL: the adapter checks nothing at load */
  uint32_t state_bytes;     /* per kernel call (ET_OP's fifth argument), 0: none */
  uint32_t in_place;        /* inputs the output may start at (bit k: argument k; et_registry_in_place) */
  uint32_t in_place_tail;   /* inputs the output may end at (bit k: argument k; et_registry_in_place) */
  uint32_t in_place_list;   /* list inputs whose items may lie at their place in the output (list_item_in_place) */
  uint64_t calls;
  uint64_t count;   /* sum of clock deltas */
} et_op_slot;

typedef struct {
  uint8_t kind;     /* FBPU_InstructionArguments__* */
  uint32_t a, b;    /* op index / delegate index / move from,to / cond,dest / value index */
  et_value **args;
  uint32_t nargs;
  const struct et_backend *backend; /* DelegateCall: who runs it, with its state in planned memory */
  void *dstate;                     /* that state; KernelCall: the adapter's state (et_kernel_ctx.state) */
  uint64_t calls, count;            /* DelegateCall profile (kernel calls count in their op slot) */
} et_instr;

typedef struct {
  et_program *prog;
  fb_table plan;
  const char *name;
  uint32_t nvalues, ntensors, nops, nchains;
  et_value *values;
  et_tensor *tensors;
  et_op_slot *ops;
  et_instr *instrs;
  uint32_t chain_start[ET_MAX_CHAINS + 1];
  fb_vec inputs, outputs;  /* value indices (int32), range-checked */
  uint64_t (*clock)(void); /* optional profiling counter */
  uint64_t other_count;    /* clock deltas of non-kernel instructions */
  /* Optional, with `clock`: called after every instruction with its chain, its
   * index in the chain, its operator slot (NULL unless a kernel call) and the
   * clock before and after it (etdump.h records these). */
  void (*on_instr)(void *user, uint32_t chain, uint32_t index, const et_instr *ins, const et_op_slot *op,
                   uint64_t t0, uint64_t t1);
  void *on_instr_user;
  /* The plan has MoveCall instructions: values may change after load, so the
   * execute loop runs each adapter's prepare right before its eval (as one
   * call did before the Prepare/Eval split) instead of once at load. */
  bool prepare_each_call;
  et_kernel_ctx ctx;
  char kmsg[ET_MSG_CAP];   /* kernel's own message, wrapped into msg */
  char msg[ET_MSG_CAP];
} et_method;

/* Method `name` (NULL: the first) of a loaded program: what memory it needs. */
et_status et_method_needs_get(et_program *p, const char *name, et_method_needs *needs);
/* Build the method. Every kernel call's arguments are checked here, once (the
 * adapters' prepare functions): a program the kernels cannot run is refused
 * at load with "instruction N (op.overload): reason". arenas[k] backs memory id k+1 and must be at least
 * needs.arena_bytes[k]; runtime_mem at least needs.runtime_bytes; delegate_mem
 * (16-byte aligned, in memory the delegates' devices can reach, e.g. the NPU)
 * at least needs.delegate_bytes. Delegate backends must be registered
 * (backend.h) before et_method_needs_get. */
et_status et_method_init(et_method *m, et_program *p, const char *name, void *runtime_mem,
                         size_t runtime_size, const uint8_t *const *arena_base,
                         const size_t *arena_size, uint32_t n_arenas, void *scratch,
                         size_t scratch_size, void *delegate_mem, size_t delegate_size);
uint32_t et_method_num_inputs(const et_method *m);
uint32_t et_method_num_outputs(const et_method *m);
et_value *et_method_input(et_method *m, uint32_t i);
const et_value *et_method_output(const et_method *m, uint32_t i);
/* Copy `src` into input i (dtype and sizes must match; dim orders may differ). */
et_status et_method_set_input_tensor(et_method *m, uint32_t i, const et_tensor *src);
et_status et_method_execute(et_method *m);
/* Zeroes the state the method keeps across executions (kernel calls whose registry
 * entry sizes it by an argument, registry.h: streaming LSTM/GRU h and c), as at load;
 * other calls' state (plans made by prepare) is left alone. */
et_status et_method_reset_state(et_method *m);
void et_method_reset_stats(et_method *m);
/* Quantization step of output i if the graph ends in a dequantize whose
 * scale is a constant (returns false otherwise). */
bool et_method_output_step(const et_method *m, uint32_t i, double *step);

/* ---- bundled program (.bpte) ---- */
typedef struct {
  fb_buf buf;
  fb_table root;
  fb_table suite;
  fb_vec cases;
  const char *method_name;
  const uint8_t *program;
  size_t program_len;
  char msg[ET_MSG_CAP];
} et_bundle;

typedef struct {
  double max_abs;     /* output units; NAN-free: a NaN mismatch sets nan_mismatch */
  int64_t max_steps;  /* -1 when unknown (float output without a known step) */
  bool nan_mismatch;
  bool pass;
} et_output_diff;

/* Tolerances for float outputs without a known quantization step. */
#define ET_FLOAT_ATOL 1e-5
#define ET_FLOAT_RTOL 1e-4

et_status et_bundle_load(et_bundle *b, const uint8_t *data, size_t len);
uint32_t et_bundle_num_cases(const et_bundle *b);
et_status et_bundle_set_inputs(et_bundle *b, uint32_t case_idx, et_method *m);
/* diffs must hold et_method_num_outputs(m) entries. */
et_status et_bundle_compare(et_bundle *b, uint32_t case_idx, const et_method *m, et_output_diff *diffs);

/* ---- tensor helpers (tensor_util.c) ---- */
/* Element strides in memory for each logical dim, from dim_order. */
void et_tensor_strides(const et_tensor *t, size_t strides[ET_MAX_DIM]);
bool et_dim_order_is_identity(const et_tensor *t);
bool et_same_dim_order(const et_tensor *a, const et_tensor *b);
/* dst = src with dst's dim order; dtype and sizes must match (checked). */
et_status et_copy_tensor(et_kernel_ctx *ctx, et_tensor *dst, const et_tensor *src);
double et_elem_as_double(int dtype, const void *data, size_t i);
void et_elem_from_double(int dtype, void *data, size_t i, double v);

#endif
