/* Link root for measuring the runtime core (python -m emlkit.deploy.program_image --core):
 * what any application calls to run a program (load, plan, build the method,
 * set an input, execute, read outputs, name a status), with no operator
 * registered, no delegate backend and no board. Whatever the linker keeps from
 * this root, with --gc-sections, is the core: loader, planner, method, status
 * and the formatter their messages use. Never run. */
#include "runtime.h"

et_status core_entry(et_program *p, const uint8_t *data, size_t len, et_method *m, void *mem, size_t mem_size,
                     const uint8_t *const *arenas, const size_t *arena_sizes, const et_tensor *in,
                     const char **status_name);

et_status core_entry(et_program *p, const uint8_t *data, size_t len, et_method *m, void *mem, size_t mem_size,
                     const uint8_t *const *arenas, const size_t *arena_sizes, const et_tensor *in,
                     const char **status_name) {
  et_method_needs needs;
  et_status st = et_program_load(p, data, len);
  if (st == ET_OK) st = et_method_needs_get(p, NULL, &needs);
  if (st == ET_OK)
    st = et_method_init(m, p, NULL, mem, mem_size, arenas, arena_sizes, needs.n_arenas, NULL, 0, NULL, 0);
  if (st == ET_OK && et_method_num_inputs(m) > 0) st = et_method_set_input_tensor(m, 0, in);
  if (st == ET_OK) st = et_method_execute(m);
  if (st == ET_OK && et_method_num_outputs(m) > 0 && et_method_output(m, 0) == NULL) st = ET_E_INTERNAL;
  *status_name = et_status_name(st);
  return st;
}
