/* The only code that touches the NPU's registers. Each access is one out-of-line
 * function with a fixed instruction sequence, so that every register access the
 * driver makes is a single load or store at a known place: a debugger (or the
 * QEMU co-simulation in emlkit/deploy/npu_cosim.py, which plays the NPU through
 * QEMU's gdbstub) can observe them all. On hardware and FVPs they are plain
 * device-memory accesses with the barriers the NPU needs. */
#ifndef ETHOSU_IO_H
#define ETHOSU_IO_H

#include <stdint.h>

/* Reads the 32-bit register at `addr`. */
uint32_t ethosu_reg_read(uintptr_t addr);
/* Writes `value` to the register at `addr`; memory writes before it (inputs,
 * command stream) are complete before the register changes. */
void ethosu_reg_write(uintptr_t addr, uint32_t value);

#endif
