/* Delegate backends: the code that runs a program's DelegateCall instructions
 * (ExecuTorch's BackendDelegate entries, e.g. "EthosUBackend").
 *
 * A backend is registered by the application (the runner) before methods are
 * built, so the runtime core links no backend it is not given. Like operators,
 * a backend validates once and then only runs:
 *   needs()   at et_method_needs_get: the bytes of planned memory this delegate
 *             call needs (its state and device buffers), from its data alone;
 *   init()    at et_method_init: validates the data fully and against the call's
 *             arguments, and binds the planned memory;
 *   execute() per call: runs, nothing else. */
#ifndef ET_BACKEND_H
#define ET_BACKEND_H

#include "et_types.h"

#define ET_MAX_BACKENDS 4
#define ET_DELEGATE_ALIGN 16u /* the planned memory each delegate call gets is aligned so */

typedef struct et_backend {
  const char *id; /* as written in the program, e.g. "EthosUBackend" */
  et_status (*needs)(const uint8_t *data, size_t len, size_t *bytes, char *msg, size_t cap);
  et_status (*init)(void *mem, size_t bytes, const uint8_t *data, size_t len, et_value *const *args, uint32_t nargs,
                    char *msg, size_t cap);
  et_status (*execute)(void *mem, et_value *const *args, uint32_t nargs, char *msg, size_t cap);
} et_backend;

/* Adds a backend (the same one twice is fine). ET_E_INTERNAL when the table is full. */
et_status et_backend_register(const et_backend *b);
/* The registered backend with this id (not NUL-terminated), or NULL. */
const et_backend *et_backend_find(const char *id, uint32_t len);

#endif
