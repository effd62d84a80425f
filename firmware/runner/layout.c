/* Sizes the host's memory-fit check (emlkit/deploy/fit.py) needs to predict the
 * runner's memory use for a program before running it: each symbol's size is
 * one figure of this build's ABI. The linker script puts .fw_layout in a
 * section that is not loaded (INFO), so the image does not grow; on the host
 * build they are a few bytes of data. */
#include <stdint.h>

#include "runtime.h"

#define FW_LAYOUT(name, bytes) __attribute__((used, section(".fw_layout"))) const uint8_t fw_layout_##name[bytes]

FW_LAYOUT(et_value, sizeof(et_value));
FW_LAYOUT(et_tensor, sizeof(et_tensor));
FW_LAYOUT(et_op_slot, sizeof(et_op_slot));
FW_LAYOUT(et_instr, sizeof(et_instr));
FW_LAYOUT(pointer, sizeof(et_value *));
