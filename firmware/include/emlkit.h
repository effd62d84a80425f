/* emlkit C API: run an emlkit-compiled ExecuTorch program (.pte) on a
 * microcontroller, with Cortex-M kernels and optionally an Ethos-U NPU.
 *
 *   static eml_context ctx;                       // ~4 KiB, caller-owned
 *   eml_memory mem[] = {{sram, sizeof sram}};     // where tensors and tables go
 *   eml_config cfg = {.memory = mem, .n_memory = 1};
 *   eml_init(&ctx, &cfg);
 *   eml_load(&ctx, model_pte, model_pte_size);   // used in place: keep it alive
 *   eml_set_input(&ctx, 0, input, input_bytes);  // before every run
 *   eml_run(&ctx);
 *   eml_output(&ctx, 0, &out, &out_bytes);
 *
 * Rules:
 * - No dynamic allocation. The library takes every byte it needs from the
 *   memories given in eml_config, in the order given: the program's planned
 *   tensors (largest arena first), the method's tables, kernel scratch,
 *   delegate (NPU) buffers and the profile records. eml_load fails with
 *   EML_E_MEMORY, naming the bytes needed, when they do not fit.
 * - Every call returns an eml_status; on failure eml_last_error() holds one
 *   line saying why. Nothing here prints.
 * - The program bytes are read in place (weights are never copied) and must
 *   stay unchanged while the context uses them; align them to 16 bytes.
 * - Not thread-safe; one context per thread. The NPU is one device: the last
 *   eml_init given an NPU owns it.
 *
 * Profiling: with eml_config.clock set, every kernel and delegate call is
 * timed; with profile_events > 0 the runs are also recorded as an ExecuTorch
 * ETDump (eml_etdump), which `emlkit inspect` and ExecuTorch's Inspector read
 * together with the ETRecord that `emlkit compile` writes. */
#ifndef EMLKIT_H
#define EMLKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMLKIT_API_VERSION 2 /* 2: bundled programs (test cases), memory plan, eml_take, run recording, operators */

/* Status of every call. The numbers are stable. */
typedef enum {
  EML_OK = 0,
  EML_E_INVALID_PROGRAM = 1,  /* corrupt or truncated program, wrong file */
  EML_E_INVALID_ARG = 2,      /* bad argument: index, size, NULL pointer, dtype */
  EML_E_UNKNOWN_OP = 3,       /* the program uses an operator this build lacks */
  EML_E_NOT_SUPPORTED = 4,    /* a feature, dtype or shape no kernel handles */
  EML_E_MEMORY = 5,           /* eml_config's memories (or a buffer) are too small */
  EML_E_NO_BACKEND = 6,       /* a delegate for a backend this build lacks */
  EML_E_INTERNAL = 8,
  EML_E_DELEGATE_CORRUPT = 9, /* NPU delegate data malformed */
  EML_E_NPU_STREAM = 10,      /* NPU command stream addresses memory outside its buffers */
  EML_E_NPU_CONFIG = 11,      /* no NPU, or not the one the program was compiled for */
  EML_E_NPU_TIMEOUT = 12,     /* the NPU did not finish in time */
  EML_E_NPU_BUS_ERROR = 13,   /* the NPU reported a bus error */
  EML_E_NPU_FAULT = 14,       /* the NPU reported a command-stream or weight fault */
  EML_E_STATE = 32,           /* call out of order (e.g. eml_run before eml_load) */
} eml_status;

/* Element types, numbered as ExecuTorch's ScalarType. */
typedef enum {
  EML_UINT8 = 0,
  EML_INT8 = 1,
  EML_INT16 = 2,
  EML_INT32 = 3,
  EML_INT64 = 4,
  EML_FLOAT16 = 5,
  EML_FLOAT32 = 6,
  EML_FLOAT64 = 7,
  EML_BOOL = 11,
} eml_dtype;

/* Caller-owned state. Declare it static or global; its contents are private.
 * 4 KiB holds every build of the library; a build may define a smaller figure
 * for the library and its callers alike (the library refuses to compile with
 * one too small): about 2 KiB on a 32-bit core without the NPU part. */
#ifndef EML_CONTEXT_BYTES
#define EML_CONTEXT_BYTES 4096
#endif
#ifdef __cplusplus
#define EML_ALIGN16 alignas(16)
#else
#define EML_ALIGN16 _Alignas(16)
#endif
typedef struct {
  EML_ALIGN16 unsigned char opaque[EML_CONTEXT_BYTES];
} eml_context;

/* A block of RAM the library may use. Any alignment; the library aligns. */
typedef struct {
  void *base;
  size_t size;
  const char *name; /* optional: names the block in EML_E_MEMORY messages (NULL: "memory[i]") */
} eml_memory;

/* The Ethos-U NPU and the services its driver needs from the platform. */
typedef struct {
  uintptr_t base;           /* register block */
  int irq;                  /* interrupt line; < 0: none, the driver polls */
  bool secure, privileged;  /* the NPU's security and privilege level */
  uint32_t timeout_us;      /* per inference */
  uint64_t (*time_us)(void);                  /* monotonic microseconds */
  uint32_t (*irq_save)(void);                 /* mask interrupts, return the old state */
  void (*irq_restore)(uint32_t state);
  void (*wait_for_interrupt)(uint64_t until_us); /* sleep until an interrupt or until_us */
  int (*irq_attach)(int irq, void (*handler)(void *), void *arg); /* route + enable; 0 ok */
  void (*dcache_clean)(const void *p, size_t n);      /* may be NULL without a data cache */
  void (*dcache_invalidate)(void *p, size_t n);
} eml_npu_config;

typedef struct {
  const eml_memory *memory; /* where everything goes, in order of preference */
  uint32_t n_memory;
  size_t scratch_bytes;     /* kernel scratch; 0: 4096 */
  uint64_t (*clock)(void);  /* optional free-running counter for profiling */
  const char *clock_unit;   /* what it counts: "cycles", "instructions", ... */
  uint32_t profile_events;  /* > 0 (needs clock): record that many events for eml_etdump */
  const eml_npu_config *npu; /* NULL: no NPU (programs with an Ethos-U delegate fail to load) */
} eml_config;

#define EML_MAX_DIMS 8

typedef struct {
  eml_dtype dtype;
  uint32_t ndim;
  int32_t shape[EML_MAX_DIMS];     /* logical sizes, as in PyTorch */
  uint8_t dim_order[EML_MAX_DIMS]; /* memory order, outermost first ({0,2,3,1}: channels last) */
  size_t nbytes;                   /* bytes eml_set_input takes / eml_output gives */
  /* The int8/int16 domain the program works in at this input or output:
   * the scale and zero point of the quantize right after the input, or of the
   * dequantize right before the output (real = scale * (q - zero_point)).
   * quantized is false when the program has none there. */
  bool quantized;
  double scale;
  int32_t zero_point;
} eml_tensor_info;

/* Where the counts of one operator (or one delegate backend) went, summed
 * over every eml_run since eml_load or eml_profile_reset. */
typedef struct {
  const char *name;  /* "cortex_m::quantized_conv2d", or a backend id such as "EthosUBackend" */
  uint64_t calls;
  uint64_t count;    /* clock ticks, in eml_config.clock_unit */
  bool delegate;     /* a delegate backend: name is its id, e.g. "EthosUBackend" */
} eml_op_profile;

typedef struct {
  size_t memory_used;        /* bytes taken from eml_config's memories */
  size_t arena_bytes;        /* of which planned tensors */
  size_t delegate_bytes;     /* of which NPU buffers */
  uint32_t profile_runs;     /* runs held for eml_etdump */
  uint32_t profile_dropped;  /* runs that did not fit in profile_events */
  uint64_t last_run_ticks;   /* clock ticks of the last eml_run (0 without eml_config.clock) */
} eml_stats;

#define EML_MAX_ARENAS 8

/* The loaded program's memory plan: what eml_load placed (or failed to place). */
typedef struct {
  uint32_t n_arenas;
  uint64_t arena_bytes[EML_MAX_ARENAS]; /* planned tensors, per arena */
  size_t runtime_bytes;                 /* the method's tables and kernel state */
  size_t delegate_bytes;                /* NPU buffers */
  bool prepared_at_load;                /* false: some calls are prepared right before they run */
} eml_plan;

/* How far output i of a run is from a bundled test case's expected output. */
typedef struct {
  double max_abs;       /* largest absolute difference, in output units */
  int64_t max_steps;    /* the same in quantization steps; -1 when unknown (float output, no known step) */
  bool nan_mismatch;    /* a NaN where the other has none */
  bool pass;            /* within the case's tolerance */
} eml_output_diff;

/* One operator this build of the library implements. */
typedef struct {
  const char *name;     /* "cortex_m::quantized_conv2d" */
  const char *overload; /* "out" ("" when none) */
  uint32_t state_bytes; /* runtime memory each call of it takes (0 also for a streaming LSTM/GRU, whose
                         * state the call's arguments size: eml_plan's runtime_bytes counts it) */
  uint32_t in_place;    /* inputs its output may be planned over, from their start (bit k: argument k), 0: none */
  uint32_t in_place_tail; /* inputs its output may be planned over, ending where they end */
  uint32_t in_place_list; /* tensor-list inputs whose items may each be planned at their place in the output */
  uint32_t in_place_ahead; /* inputs its output may be planned over, starting before them by a lead each call
                            * computes (a depthwise convolution's: the host library's query gives it) */
} eml_operator_info;

/* Resets ctx and remembers cfg (the memories are not touched yet). With an
 * NPU config the Ethos-U backend is registered; the NPU itself is brought up
 * by the first eml_load of a program that uses it. */
eml_status eml_init(eml_context *ctx, const eml_config *cfg);
/* Loads a .pte from memory: verifies it, plans memory and binds every
 * operator and delegate. A second load replaces the first. */
eml_status eml_load(eml_context *ctx, const void *program, size_t size);
/* Loads a bundled program (.bpte, `emlkit compile` writes one: the program
 * and test cases of inputs with their expected outputs), as eml_load does. */
eml_status eml_load_bundled(eml_context *ctx, const void *bundle, size_t size);
/* The bundle's test cases (after eml_load_bundled). */
eml_status eml_num_cases(const eml_context *ctx, uint32_t *n);
/* Sets every input from test case i, for the next eml_run. */
eml_status eml_set_case_inputs(eml_context *ctx, uint32_t i);
/* Compares the last run's outputs with test case i's expected outputs:
 * diffs[k] for output k; n_diffs must be at least eml_num_outputs. */
eml_status eml_compare_case(eml_context *ctx, uint32_t i, eml_output_diff *diffs, uint32_t n_diffs);
/* The memory plan of the last eml_load, also after it failed to place it. */
eml_status eml_plan_get(const eml_context *ctx, eml_plan *plan);
/* size bytes of eml_config's free memory for the caller, valid until the
 * next eml_load; `what` names them in the EML_E_MEMORY message. */
eml_status eml_take(eml_context *ctx, const char *what, size_t size, void **data);
eml_status eml_num_inputs(const eml_context *ctx, uint32_t *n);
eml_status eml_num_outputs(const eml_context *ctx, uint32_t *n);
eml_status eml_input_info(const eml_context *ctx, uint32_t i, eml_tensor_info *info);
eml_status eml_output_info(const eml_context *ctx, uint32_t i, eml_tensor_info *info);
/* Copies nbytes (exactly the input's nbytes, in its dim order) into input i.
 * Set every input before each eml_run: the memory plan may reuse an input's
 * memory for later tensors, so a run consumes its inputs. An input the
 * program did not plan memory for is used in place instead: then data must
 * stay valid through eml_run and be aligned to its element. */
eml_status eml_set_input(eml_context *ctx, uint32_t i, const void *data, size_t nbytes);
eml_status eml_run(eml_context *ctx);
/* Zeroes the state a program keeps across eml_run calls (compiled with
 * --streaming-state: each LSTM/GRU layer's h and c), as eml_load leaves it:
 * the next run starts a new sequence. EML_OK also when the program has none. */
eml_status eml_reset_state(eml_context *ctx);
/* Output i of the last run, in place (valid until the next eml_run). */
eml_status eml_output(const eml_context *ctx, uint32_t i, const void **data, size_t *nbytes);

eml_status eml_stats_get(const eml_context *ctx, eml_stats *stats);
/* Per-operator profile (needs eml_config.clock): entries 0..n-1. */
eml_status eml_profile_count(const eml_context *ctx, uint32_t *n);
eml_status eml_profile_entry(const eml_context *ctx, uint32_t i, eml_op_profile *entry);
eml_status eml_profile_reset(eml_context *ctx);
/* Records the next `runs` runs, every instruction of them, for eml_etdump
 * (needs eml_config.clock; replaces profile_events' records), in free memory;
 * with debug_outputs, also every call's output of the first of them. */
eml_status eml_record_runs(eml_context *ctx, uint32_t runs, bool debug_outputs);
/* The outputs eml_record_runs(..., true) captured, as the ETDump's debug
 * events point into them, and how many did not fit. */
eml_status eml_debug_outputs(const eml_context *ctx, const uint8_t **data, size_t *size, uint32_t *missed);
/* The recorded runs as an ETDump, built in free memory from eml_config's
 * memories: *data stays valid until the next eml_load, eml_run or eml_etdump. */
eml_status eml_etdump(eml_context *ctx, const uint8_t **data, size_t *size);
/* The same ETDump as text for a console, through write(user, s, n):
 *   "ETDUMP BEGIN bytes=<n> crc32=<hex8>\n", base64 lines of 64 characters,
 *   "ETDUMP END\n". `emlkit inspect --log FILE` reads it back. */
eml_status eml_etdump_text(eml_context *ctx, void (*write)(void *user, const char *s, size_t n), void *user);

/* Operator i (from 0) of the ones this build implements; EML_E_INVALID_ARG past the last. */
eml_status eml_operator(uint32_t i, eml_operator_info *info);

/* One line on the last failure of this context (empty when none). */
const char *eml_last_error(const eml_context *ctx);
/* Stable lower-case name of a status, e.g. "npu_timeout". */
const char *eml_status_name(eml_status st);

#ifdef __cplusplus
}
#endif

#endif
