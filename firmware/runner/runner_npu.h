/* The runner's Ethos-U part. npu.c registers the Ethos-U backend and brings up
 * the driver; cpu_only.c is linked instead into images for programs without a
 * delegate (emlkit/deploy/program_image.py), so they carry no backend or driver. */
#ifndef RUNNER_NPU_H
#define RUNNER_NPU_H

#include "et_types.h"

/* Registers the image's delegate backends (before et_method_needs_get). */
et_status runner_npu_register(void);
#ifdef FW_LOAD_CHECK
/* The host's load check: the backends without a device, so delegates are checked but never run. */
et_status runner_npu_register_load_only(void);
#endif
/* Brings the NPU up; called only when the program has delegate data. */
void runner_npu_init(void);
/* Appends the NPU's fields to the result line (nothing if it never ran). */
void runner_npu_print(void);

#endif
