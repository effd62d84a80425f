/* Compile-time operator table from the X-macro .def files. */
#include "registry.h"

#define ET_OP(name, overload, fn) et_status fn(et_kernel_ctx *ctx, et_value **args, uint32_t nargs);
#include "cortex_m_ops.def"
#include "aten_ops.def"
#undef ET_OP

typedef struct {
  const char *name;
  const char *overload;
  et_op_fn fn;
} entry;

static const entry k_ops[] = {
#define ET_OP(name, overload, fn) {name, overload, fn},
#include "cortex_m_ops.def"
#include "aten_ops.def"
#undef ET_OP
    {NULL, NULL, NULL},
};

static int eq(const char *a, const char *b, uint32_t n) { return strlen(a) == n && memcmp(a, b, n) == 0; }

et_op_fn et_registry_find(const char *name, uint32_t name_len, const char *overload, uint32_t overload_len) {
  for (const entry *e = k_ops; e->name; e++)
    if (eq(e->name, name, name_len) && eq(e->overload, overload, overload_len)) return e->fn;
  return NULL;
}

const char *et_registry_entry(uint32_t i, const char **overload) {
  if (i >= sizeof k_ops / sizeof k_ops[0] - 1) return NULL;
  *overload = k_ops[i].overload;
  return k_ops[i].name;
}
