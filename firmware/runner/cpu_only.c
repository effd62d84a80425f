/* The runner's NPU part for images of programs without a delegate: no backend
 * is registered, so a program that does delegate is refused by the runtime
 * ("no backend ...") instead of reaching a driver this image leaves out. */
#include "runner_npu.h"

et_status runner_npu_register(void) { return ET_OK; }

#ifdef FW_LOAD_CHECK
et_status runner_npu_register_load_only(void) { return ET_OK; }
#endif

void runner_npu_init(void) {}

void runner_npu_print(void) {}
