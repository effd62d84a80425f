/* Operator registry: op name + overload -> adapter, built at compile time
 * from firmware/ops/cortex_m_ops.def, aten_ops.def, emlkit_ops.def and aten_float_ops.def. */
#ifndef ET_REGISTRY_H
#define ET_REGISTRY_H

#include "et_types.h"

/* name/overload need not be NUL-terminated; lengths are given. Returns the
 * eval function (NULL if unknown) and, where the pointers are not NULL,
 * stores the entry's prepare function (NULL when the entry has none) and its
 * bytes of per-call state (0: none). */
et_op_fn et_registry_find(const char *name, uint32_t name_len, const char *overload, uint32_t overload_len,
                          et_op_prepare_fn *prepare, uint32_t *state_bytes);
/* An entry's state bytes with this flag set are not a constant: each call of it keeps
 * as many bytes as its Int argument k says (ET_STATE_FROM_ARG(k); an argument that is
 * not an Int, or is negative or over ET_MAX_CALL_STATE, gives 0 bytes, which the
 * adapter's prepare refuses). Such state is the op's memory across executions (an
 * LSTM's h and c in streaming programs): zeroed at load and by et_method_reset_state. */
#define ET_STATE_ARG_FLAG 0x80000000u
#define ET_STATE_FROM_ARG(k) (ET_STATE_ARG_FLAG | (uint32_t)(k))
#define ET_MAX_CALL_STATE (1u << 24)

/* The inputs (bit k: argument k) over which the op's kernels may write their
 * output: the loader lets the output start exactly at such an input when its
 * elements are no larger than the input's (firmware/ops/registry.c). 0: none.
 * *tail_args (if not NULL): the inputs whose end the output may end at, with
 * as many elements, each no smaller. *list_args (if not NULL): the tensor-list
 * inputs whose items may each lie exactly where the op writes them in its
 * output (a concat's inputs planned inside it, et_list_item_in_place). */
uint32_t et_registry_in_place(const char *name, uint32_t name_len, const char *overload, uint32_t overload_len,
                              uint32_t *tail_args, uint32_t *list_args);
/* In place with a lead: the bytes by which a call's output (ARGS, NARGS: the call's arguments) must start
 * before its input argument k, the output being allowed to start further before it by whole multiples of
 * *step bytes only; -1: this call's output may not overlap that input. */
typedef int64_t (*et_in_place_lead_fn)(et_value **args, uint32_t nargs, uint32_t k, uint32_t *step);
/* The inputs (bit k: argument k) whose bytes the op's output may overlap starting before them by such a lead,
 * and (if LEAD is not NULL) the op's lead function; 0 and NULL: none. */
uint32_t et_registry_in_place_ahead(const char *name, uint32_t name_len, const char *overload, uint32_t overload_len,
                                    et_in_place_lead_fn *lead);
/* For listings: entry i (NULL name past the end). */
const char *et_registry_entry(uint32_t i, const char **overload);

#endif
