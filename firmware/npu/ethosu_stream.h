/* Static check of an Ethos-U register command stream before the NPU ever sees
 * it: every command must be known to the architecture, the stream must end with
 * NPU_OP_STOP, and every byte an operation reads or writes (feature maps with
 * their tiles, strides and brick layout, weight and scale streams, DMA) must lie
 * inside the region the driver binds. Also reports how many bytes of each
 * region the stream uses, which sizes the fast scratch (region 2).
 *
 * Pure computation: no device access, usable on the host and in fuzzers. */
#ifndef ETHOSU_STREAM_H
#define ETHOSU_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define ETHOSU_REGIONS 8

typedef enum { ETHOSU_ARCH_U55 = 55, ETHOSU_ARCH_U85 = 85 } ethosu_arch; /* U65 streams use the U55 map */

typedef struct {
  uint64_t used[ETHOSU_REGIONS]; /* one past the highest byte touched, per region */
  uint8_t written;               /* bit r: the stream writes region r */
  uint32_t operations;           /* NPU_OP_* commands other than STOP and waits */
} ethosu_stream_info;

/* limit[r]: bytes the driver binds for region r (0: unbound, any use is an
 * error); UINT64_MAX: unbounded (only measured, e.g. to size the fast scratch).
 * Returns ET_OK, ET_E_NPU_STREAM (out of bounds: the message names the command,
 * its offset and the bytes), ET_E_DELEGATE_CORRUPT (malformed stream) or
 * ET_E_NOT_SUPPORTED (a command this checker cannot bound). */
et_status ethosu_stream_check(const uint32_t *cmd, uint32_t nwords, ethosu_arch arch, const uint64_t limit[ETHOSU_REGIONS],
                              ethosu_stream_info *info, char *msg, size_t cap);

#endif
