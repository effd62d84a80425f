/* The registry's entry points of an operator overload, written once for every adapter file: each is a
 * call of the file's shared eval or prepare with the overload's fixed arguments (its name, a kind, flags).
 * `emlkit export` expands these macros (emlkit/deploy/export.py) to see which file defines which entry. */
#ifndef OP_ENTRY_H
#define OP_ENTRY_H

#include "et_types.h"

/* fn##_prepare(ctx, args, nargs) = prepare(ctx, <fixed...>, args, nargs). */
#define OP_PREPARE(fn, prepare, ...) \
  ET_PREPARE et_status fn##_prepare(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return prepare(ctx, __VA_ARGS__, args, nargs); }

/* fn(ctx, args, nargs) = eval(ctx, <fixed...>, args, nargs). */
#define OP_EVAL(fn, eval, ...) \
  et_status fn(et_kernel_ctx *ctx, et_value **args, uint32_t nargs) { return eval(ctx, __VA_ARGS__, args, nargs); }

/* Both entry points of an overload whose eval and prepare are shared helpers. */
#define OP_ENTRIES(fn, eval, prepare, ...) OP_EVAL(fn, eval, __VA_ARGS__) OP_PREPARE(fn, prepare, __VA_ARGS__)

#endif
