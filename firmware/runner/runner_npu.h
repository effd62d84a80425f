/* The runner's Ethos-U part. npu.c registers the Ethos-U backend and brings up
 * the driver the first time a delegate call is built; cpu_only.c is linked
 * instead into images for programs without a delegate
 * (emlkit/deploy/program_image.py), so they carry no backend or driver. */
#ifndef RUNNER_NPU_H
#define RUNNER_NPU_H

#include <stdbool.h>

/* Registers the image's delegate backends (before eml_load). load_only: the host's load check, without a
 * device, so delegates are checked but never run. Returns 0, or -1 when the backend table is full. */
int runner_npu_register(bool load_only);
/* Appends the NPU's fields to the result line (nothing if it never ran). */
void runner_npu_print(void);

#endif
