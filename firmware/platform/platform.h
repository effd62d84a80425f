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
/* printf-style over plat_write, at most 255 characters (plat_fmt.c, the same for every board). */
void plat_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Free-running counter for profiling and its unit ("cycles" or "instructions"). */
uint64_t plat_counter(void);
const char *plat_counter_unit(void);
/* The model bytes (.bpte) the runner should execute; returns 0 on success. */
int plat_model(const uint8_t **data, size_t *size);
/* Regions free for arenas, largest first not required. Returns the count. */
size_t plat_regions(const plat_region **regions);
/* Lowest stack address touched so far, in bytes used (0 if unknown). */
size_t plat_stack_used(void);
/* Paint the stack again below the caller's frame, so that the next
 * plat_stack_used() measures only what runs after this call. */
void plat_stack_repaint(void);
/* Hand an output buffer to the host (host board: write .npy; devices: no-op). */
void plat_save_output(unsigned index, const void *data, size_t nbytes);
/* Whether the host asked for an ETDump of the measured runs (EMDL flag
 * PLAT_FLAG_ETDUMP, host runner --etdump), and where it goes: etdump.etdp in
 * the simulator's working directory through semihosting, or the host path. */
int plat_etdump_wanted(void);
void plat_save_etdump(const void *data, size_t nbytes);
/* Whether the host also asked for every call's output in the ETDump (EMDL flag
 * PLAT_FLAG_DEBUG, host runner --debug-buffer), and where the debug buffer the
 * ETDump's debug events point into goes: debug.bin beside etdump.etdp, or the
 * host path. Only with an ETDump. */
int plat_debug_wanted(void);
void plat_save_debug(const void *data, size_t nbytes);
#ifdef FW_LOAD_CHECK
/* Host build only (FW_LOAD_CHECK), for the compiler. plat_load_only: the runner loads, places and
 * prepares the program, prints {"status": "loaded", ...} and stops before the first inference (host
 * runner --load-only), so compile refuses what the device would refuse. plat_list_ops: the runner
 * prints its operator registry, {"ops": [[name, overload, state bytes], ...]}, and stops (--list-ops). */
int plat_load_only(void);
int plat_list_ops(void);
#endif
void plat_exit(int code) __attribute__((noreturn));

/* ---- services for device drivers (the Ethos-U NPU) ---- */

/* The board's NPU, from board.toml [npu]. */
typedef struct {
  uintptr_t base;       /* register block */
  int irq;              /* interrupt line; < 0: none wired (the driver polls) */
  int secure;           /* security and privilege level the NPU runs at */
  int privileged;
  uint32_t timeout_us;  /* per inference */
} plat_npu;

/* Fills `npu` and returns 0 when the board has an NPU; -1 otherwise. */
int plat_npu_info(plat_npu *npu);
/* Microseconds since start (monotonic), for driver timeouts. */
uint64_t plat_time_us(void);
/* Mask interrupts and return the previous mask state; restore it. */
uint32_t plat_irq_save(void);
void plat_irq_restore(uint32_t state);
/* Sleep until an interrupt is pending or until_us (plat_time_us) has passed; call with
 * interrupts masked, so none is missed. */
void plat_wait_for_interrupt(uint64_t until_us);
/* Route interrupt `irq` to handler(arg) and enable it; returns 0, or -1 for a line the board cannot route. */
int plat_irq_attach(int irq, void (*handler)(void *), void *arg);
/* Data cache maintenance by address range (no-ops when the data cache is off or absent). */
void plat_dcache_clean(const void *p, size_t n);
void plat_dcache_invalidate(void *p, size_t n);

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
#define PLAT_FLAG_ETDUMP 2u       /* write etdump.etdp through plat_save_etdump */
#define PLAT_FLAG_DEBUG 4u        /* with PLAT_FLAG_ETDUMP: record every call's output, debug.bin */
