/* "EthosUBackend": runs the Ethos-U delegates of an ExecuTorch program on the
 * NPU through ethosu_driver. Per delegate call, in planned memory: its state,
 * the scratch (region 1, inputs and outputs live there at the offsets Vela
 * chose) and, for streams that use it, the fast scratch (region 2, sized from
 * the command stream). Region 0 (weights) and the command stream stay in the
 * program, used in place.
 *
 * init (once): parses and validates the delegate data, bounds-checks the command
 * stream against the regions (ethosu_stream), refuses a stream built for another
 * NPU (ethosu_check), checks every input and output against the method's tensors.
 * execute: copies inputs in, runs, copies outputs out. */
#ifndef ETHOSU_BACKEND_H
#define ETHOSU_BACKEND_H

#include "backend.h"
#include "ethosu_driver.h"

/* The backend, bound to `dev` (initialised or not: delegate calls fail with
 * ET_E_NPU_CONFIG and the driver's reason when it is not). In the host's load
 * check (FW_LOAD_CHECK builds), `dev` NULL only loads: init checks the delegate
 * data and the call, not the NPU's config, and execute fails. */
const et_backend *ethosu_backend(ethosu_device *dev, const char *init_error);

#endif
