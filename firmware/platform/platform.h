/* What a board provides to the runner. Only the platform layer prints. */
#ifndef PLATFORM_H
#define PLATFORM_H

#include <stddef.h>
#include <stdint.h>

/* One memory region the runner may place planned arenas in. */
typedef struct {
  const char *name;
  uint8_t *base;
  size_t size;
} plat_region;

void plat_init(int argc, char **argv);
/* Console output (semihosting, UART or stdout). */
void plat_write(const char *s, size_t n);
/* Free-running counter for profiling and its unit ("cycles" or "instructions"). */
uint64_t plat_counter(void);
const char *plat_counter_unit(void);
/* The model bytes (.bpte) the runner should execute; returns 0 on success. */
int plat_model(const uint8_t **data, size_t *size);
/* Regions free for arenas, largest first not required. Returns the count. */
size_t plat_regions(const plat_region **regions);
/* Lowest stack address touched so far, in bytes used (0 if unknown). */
size_t plat_stack_used(void);
/* Hand an output buffer to the host (host board: write .npy; devices: no-op). */
void plat_save_output(unsigned index, const void *data, size_t nbytes);
void plat_exit(int code) __attribute__((noreturn));

#endif

/* Boards whose simulator loads the model into memory (QEMU -device loader,
 * FVP --data) find at the board's model address a 16-byte header followed by
 * the .bpte bytes (16 keeps the flatbuffer's alignment):
 *   bytes 0..3  magic "EMDL"
 *   bytes 4..7  little-endian uint32: size of the .bpte in bytes
 *   bytes 8..11 little-endian uint32: flags (PLAT_FLAG_*)
 *   bytes 12..15 reserved, zero */
#define PLAT_MODEL_MAGIC "EMDL"
#define PLAT_FLAG_SAVE_OUTPUTS 1u /* write output_<i>.bin through plat_save_output */
