/* The runner's NPU part for images of programs without a delegate: no backend
 * is registered, so a program that does delegate is refused by the runtime
 * ("no backend ...") instead of reaching a driver this image leaves out. */
#include "runner_npu.h"

int runner_npu_register(bool load_only) {
  (void)load_only;
  return 0;
}

void runner_npu_print(void) {}
