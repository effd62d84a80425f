/* Core value types shared by the runtime, the operator adapters and the kernels.
 *
 * This header is the contract between firmware/runtime (which builds values
 * from the program flatbuffer) and firmware/ops (which unpacks them for the
 * kernels). Kernels in firmware/kernels never see these types: they take plain
 * pointers and integers so they can be tested in isolation.
 */
#ifndef ET_TYPES_H
#define ET_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "et_fmt.h"
#include "status.h"

#define ET_MAX_DIM 8

/* Values of executorch's ScalarType (exir/_serialize/scalar_type.fbs). */
typedef enum {
  ET_DT_BYTE = 0,   /* uint8 */
  ET_DT_CHAR = 1,   /* int8 */
  ET_DT_SHORT = 2,  /* int16 */
  ET_DT_INT = 3,    /* int32 */
  ET_DT_LONG = 4,   /* int64 */
  ET_DT_HALF = 5,
  ET_DT_FLOAT = 6,
  ET_DT_DOUBLE = 7,
  ET_DT_BOOL = 11,
} et_dtype;

/* Size in bytes of one element, 0 for dtypes the runtime does not handle. */
size_t et_dtype_size(int dtype);
const char *et_dtype_name(int dtype);

typedef struct {
  int8_t dtype;                   /* et_dtype */
  uint8_t dim;
  int32_t sizes[ET_MAX_DIM];      /* logical sizes, as in PyTorch */
  uint8_t dim_order[ET_MAX_DIM];  /* memory order of the dims, outermost first */
  void *data;                     /* planned arena, constant buffer or input */
  size_t nbytes;                  /* numel * element size */
} et_tensor;

static inline size_t et_tensor_numel(const et_tensor *t) {
  size_t n = 1;
  for (uint8_t i = 0; i < t->dim; i++) n *= (size_t)t->sizes[i];
  return n;
}

/* Tags follow the order of the KernelTypes union in program.fbs (Null = 1). */
typedef enum {
  ET_TAG_NONE = 1,
  ET_TAG_INT = 2,
  ET_TAG_BOOL = 3,
  ET_TAG_DOUBLE = 4,
  ET_TAG_TENSOR = 5,
  ET_TAG_STRING = 6,
  ET_TAG_INT_LIST = 7,
  ET_TAG_DOUBLE_LIST = 8,
  ET_TAG_BOOL_LIST = 9,
  ET_TAG_TENSOR_LIST = 10,
  ET_TAG_OPT_TENSOR_LIST = 11,
} et_tag;

struct et_value;

/* A list as stored in the program: `items` points at `len` little-endian
 * elements inside the (verified) flatbuffer. For INT_LIST, TENSOR_LIST and
 * OPT_TENSOR_LIST the elements are indices into `values` (int64 for INT_LIST,
 * int32 for the tensor lists), already range-checked by the loader. For
 * DOUBLE_LIST and BOOL_LIST they are the literal values. */
typedef struct {
  const struct et_value *values;
  const uint8_t *items;
  uint32_t len;
} et_list;

typedef struct et_value {
  uint8_t tag; /* et_tag */
  union {
    int64_t i;
    bool b;
    double d;
    et_tensor *t;
    struct {
      const char *ptr;
      uint32_t len;
    } s;
    et_list list;
  } u;
} et_value;

/* Element access for lists; these read unaligned little-endian data safely. */
static inline int64_t et_list_int(const et_value *v, uint32_t i) {
  int64_t idx;
  memcpy(&idx, v->u.list.items + 8u * i, 8);
  return v->u.list.values[idx].u.i;
}
static inline double et_list_double(const et_value *v, uint32_t i) {
  double d;
  memcpy(&d, v->u.list.items + 8u * i, 8);
  return d;
}
static inline bool et_list_bool(const et_value *v, uint32_t i) {
  return v->u.list.items[i] != 0;
}
/* Tensor lists: NULL for a None entry of an optional tensor list. */
static inline et_tensor *et_list_tensor(const et_value *v, uint32_t i) {
  int32_t idx;
  memcpy(&idx, v->u.list.items + 4u * i, 4);
  if (idx < 0) return NULL;
  const et_value *e = &v->u.list.values[idx];
  return e->tag == ET_TAG_TENSOR ? e->u.t : NULL;
}

/* What a kernel may use besides its arguments. */
typedef struct {
  char *msg;          /* error text buffer, owned by the runtime */
  size_t msg_cap;
  void *scratch;      /* per-call scratch memory from the caller's arenas */
  size_t scratch_size;
  /* This kernel call's own state in the runtime memory (the registry entry's
   * state bytes, zeroed at load; NULL when it declares none): prepare plans
   * into it, eval reads the plan. state_size is set for prepare, which
   * refuses a state smaller than its plan; eval trusts a non-NULL state. */
  void *state;
  size_t state_size;
} et_kernel_ctx;

/* An operator adapter: unpacks `args` (in schema order, out tensor last) and
 * calls the kernel. Returns ET_OK or a status after writing ctx->msg. */
typedef et_status (*et_op_fn)(et_kernel_ctx *ctx, et_value **args, uint32_t nargs);

/* An adapter's prepare step (TFLite Micro's Prepare/Eval split): called once
 * per kernel call at method load, after the values are built and before the
 * first execute. It checks everything about the arguments that does not
 * depend on activation data (kinds, dtypes, ranks, shapes, dim orders,
 * quantization parameters, constant per-channel parameters, the planned
 * scratch against what the kernel needs) and writes ctx->msg on failure; the
 * eval function (et_op_fn) then only unpacks and computes. Tensors bound
 * later (caller-kept inputs) have their metadata but no data yet, so prepare
 * reads data only of constants. Data-dependent checks stay in eval. */
typedef et_status (*et_op_prepare_fn)(et_kernel_ctx *ctx, et_value **args, uint32_t nargs);

/* Prepare functions and their helpers run once per load: optimised for size,
 * kept out of the eval path's code (GCC's `cold`). */
#define ET_PREPARE __attribute__((cold))

/* Write a formatted message into ctx->msg and return `st` (for `return et_fail(...)`). */
et_status et_fail(et_kernel_ctx *ctx, et_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same into a caller's buffer of `cap` bytes (backends, the NPU driver). */
et_status et_msgf(char *msg, size_t cap, et_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
