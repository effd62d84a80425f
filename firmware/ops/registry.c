/* Compile-time operator table from the X-macro .def files. An entry is
 * ET_OP("namespace::name", "overload", eval_fn), with a load-time check
 * ET_OP("namespace::name", "overload", eval_fn, prepare_fn), and with bytes
 * of per-call state for them ET_OP(..., eval_fn, prepare_fn, state_bytes).
 * registry_tables.h lists the tables (found on the include path, so a
 * program's image compiles this file against its own cut-down copies). */
#include "registry.h"

/* Stand-in prepare of entries that name none (never called). */
et_status et_no_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs);
et_status et_no_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) {
  (void)ctx, (void)args, (void)nargs;
  return ET_OK;
}

/* The optional 4th and 5th arguments: ET_OP(n, o, fn) -> prepare et_no_prepare, no state. */
#define ET_OP(name, overload, ...) ET_OP_CALL_(ET_OP_, (name, overload, __VA_ARGS__, ET_OP_DEFAULTS_(__VA_ARGS__)))
#define ET_OP_CALL_(m, args) m args /* expands the defaults into arguments before ET_OP_ splits them */
#define ET_OP_DEFAULTS_(...) ET_OP_PICK_(__VA_ARGS__, 0, 0, et_no_prepare, 0, ~)
#define ET_OP_PICK_(a, b, c, ...) __VA_ARGS__
#define ET_OP_(name, overload, fn, prep, state, ...)                     \
  et_status fn(et_kernel_ctx *ctx, et_value **args, uint32_t nargs);     \
  et_status prep(et_kernel_ctx *ctx, et_value **args, uint32_t nargs);
#include "registry_tables.h"
#undef ET_OP_

/* Both tables below are searched by (name, overload): each entry starts with one. */
typedef struct {
  const char *name;
  const char *overload;
} op_key;

typedef struct {
  op_key key;
  et_op_fn fn;
  et_op_prepare_fn prepare;
  uint32_t state_bytes;
} entry;

static const entry k_ops[] = {
#define ET_OP_(name, overload, fn, prep, state, ...) {{name, overload}, fn, prep, state},
#include "registry_tables.h"
#undef ET_OP_
#undef ET_OP
    {{NULL, NULL}, NULL, NULL, 0},
};

static int eq(const char *a, const char *b, uint32_t n) { return strlen(a) == n && memcmp(a, b, n) == 0; }

/* The entry of a table (entries `stride` bytes apart, ended by a NULL name) whose key is (name, overload). */
static const void *find_key(const void *table, size_t stride, const char *name, uint32_t name_len,
                            const char *overload, uint32_t overload_len) {
  for (const char *p = table;; p += stride) {
    const op_key *k = (const op_key *)(const void *)p;
    if (!k->name) return NULL;
    if (eq(k->name, name, name_len) && eq(k->overload, overload, overload_len)) return p;
  }
}

et_op_fn et_registry_find(const char *name, uint32_t name_len, const char *overload, uint32_t overload_len,
                          et_op_prepare_fn *prepare, uint32_t *state_bytes) {
  const entry *e = find_key(k_ops, sizeof *e, name, name_len, overload, overload_len);
  if (prepare) *prepare = e && e->prepare != et_no_prepare ? e->prepare : NULL;
  if (state_bytes) *state_bytes = e ? e->state_bytes : 0;
  return e ? e->fn : NULL;
}

/* Ops whose kernels can write their output over an input (the memory planner,
 * emlkit/memory_plan.py, asks for this table through `runner --list-ops`).
 * `args`: the output may start exactly at the input, its elements no larger.
 * `tail_args`: the output may end exactly where the input ends, as many
 * elements, each no smaller. Either way every kernel variant (portable, MVE,
 * DSP) walks memory forwards and reads element i (or the vector or word holding
 * it) before writing output element i, so a write never reaches an input byte
 * still to be read: with the ends aligned, output elements 0..i end at or below
 * where input element i + 1 starts. The masks are argument slots of the
 * adapters' schemas: quantize_per_tensor's and dequantize_per_tensor's input 0
 * (cortex_m_quantize.c QPT_IN); quantized_activation's input 0 (LUT_IN);
 * quantized_add's self 0 and other 4; quantized_mul's self 0 and other 2
 * (cortex_m_elementwise.c). A broadcast operand is shorter than the output,
 * which the loader's size rule keeps apart.
 * `ahead_args`: inputs the output may start before, by at least the lead
 * that the entry's `lead` function gives for the call (registry.h
 * et_in_place_lead_fn): depthwise convolution, whose window reads rows above
 * the one it writes (cortex_m_conv.c, the kernels' rule in
 * depthwise_conv2d_s8.c).
 * `list_args`: tensor-list inputs whose items may each lie exactly at the
 * bytes the op writes them to in its output, where those bytes are one
 * contiguous run (the loader's rule, method.c list_item_in_place): aten::cat
 * then finds each such item already in place and copies nothing for it
 * (aten_copy.c), so producers write straight into the concat, as the
 * row bands of patch-based execution do. */
typedef struct {
  op_key key;
  uint32_t args;
  uint32_t tail_args;
  uint32_t list_args;
  uint32_t ahead_args;
  et_in_place_lead_fn lead;
} in_place_entry;

/* Weak: an image cut down to a program's operators (emlkit export) may leave the adapter out; its entry is
 * then never looked up, and a NULL lead allows nothing. */
#define LEAD_FN(fn) int64_t fn(et_value **args, uint32_t nargs, uint32_t k, uint32_t *step) __attribute__((weak));
LEAD_FN(op_cortex_m_quantized_depthwise_conv2d_out_lead)
LEAD_FN(op_cortex_m_quantized_depthwise_conv2d_nhwc_out_lead)
#undef LEAD_FN

static const in_place_entry k_in_place[] = {
    {{"cortex_m::quantize_per_tensor", "out"}, 1u << 0, 0, 0, 0, NULL},
    {{"cortex_m::dequantize_per_tensor", "out"}, 0, 1u << 0, 0, 0, NULL},
    {{"cortex_m::quantized_activation", "out"}, 1u << 0, 0, 0, 0, NULL},
    {{"cortex_m::quantized_add", "out"}, (1u << 0) | (1u << 4), 0, 0, 0, NULL},
    {{"cortex_m::quantized_mul", "out"}, (1u << 0) | (1u << 2), 0, 0, 0, NULL},
    {{"aten::cat", "out"}, 0, 0, 1u << 0, 0, NULL},
    {{"cortex_m::quantized_depthwise_conv2d", "out"}, 0, 0, 0, 1u << 0, op_cortex_m_quantized_depthwise_conv2d_out_lead},
    {{"cortex_m::quantized_depthwise_conv2d_nhwc", "out"}, 0, 0, 0, 1u << 0,
     op_cortex_m_quantized_depthwise_conv2d_nhwc_out_lead},
    {{NULL, NULL}, 0, 0, 0, 0, NULL},
};

uint32_t et_registry_in_place(const char *name, uint32_t name_len, const char *overload, uint32_t overload_len,
                              uint32_t *tail_args, uint32_t *list_args) {
  const in_place_entry *e = find_key(k_in_place, sizeof *e, name, name_len, overload, overload_len);
  if (tail_args) *tail_args = e ? e->tail_args : 0;
  if (list_args) *list_args = e ? e->list_args : 0;
  return e ? e->args : 0;
}

uint32_t et_registry_in_place_ahead(const char *name, uint32_t name_len, const char *overload, uint32_t overload_len,
                                    et_in_place_lead_fn *lead) {
  const in_place_entry *e = find_key(k_in_place, sizeof *e, name, name_len, overload, overload_len);
  if (lead) *lead = e ? e->lead : NULL;
  return e && e->lead ? e->ahead_args : 0;
}

const char *et_registry_entry(uint32_t i, const char **overload) {
  if (i >= sizeof k_ops / sizeof k_ops[0] - 1) return NULL;
  *overload = k_ops[i].key.overload;
  return k_ops[i].key.name;
}
