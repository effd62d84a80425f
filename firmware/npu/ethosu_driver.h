/* Register-level driver for one Arm Ethos-U55, U65 or U85 NPU (the product is
 * read from the NPU itself). Bare metal: no allocation, no printf; the board
 * supplies time, interrupts and cache maintenance through ethosu_hal.
 *
 *   ethosu_init()    soft reset, security/privilege check, AXI set-up, IRQ hook;
 *                    reads ID and CONFIG.
 *   ethosu_check()   refuses a command stream compiled for another product,
 *                    MAC count, command-stream version or architecture.
 *   ethosu_run()     QBASE/QSIZE, BASEP0..n, REGIONCFG, PMU, CMD start, then
 *                    waits for the completion interrupt (or polls) with a
 *                    timeout, decodes STATUS. Each failure has its own status:
 *                    ET_E_NPU_TIMEOUT, ET_E_NPU_BUS_ERROR, ET_E_NPU_FAULT. */
#ifndef ETHOSU_DRIVER_H
#define ETHOSU_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define ETHOSU_PMU_EVENTS 4

typedef struct {
  uintptr_t base;       /* register block */
  int irq;              /* interrupt line, < 0: no interrupt wired, poll STATUS */
  bool secure;          /* the NPU's security level after reset */
  bool privileged;      /* and privilege level */
  uint32_t timeout_us;  /* per inference */
  uint64_t (*time_us)(void);
  uint32_t (*irq_save)(void);     /* mask interrupts, return the previous state */
  void (*irq_restore)(uint32_t);
  void (*wait_for_interrupt)(uint64_t until_us); /* with interrupts masked: wakes on a pending one or at until_us */
  int (*irq_attach)(int irq, void (*handler)(void *), void *arg); /* install + enable; 0 ok */
  void (*dcache_clean)(const void *p, size_t n);      /* CPU writes -> memory, before the NPU reads */
  void (*dcache_invalidate)(void *p, size_t n);       /* drop stale lines, after the NPU wrote */
} ethosu_hal;

typedef struct {
  uint64_t cycles;                       /* PMU cycle counter over the inference */
  uint32_t events[ETHOSU_PMU_EVENTS];    /* NPU active, MAC active, AXI read beats, AXI write beats */
} ethosu_pmu;

typedef struct {
  ethosu_hal hal;
  uint32_t id, config, product;
  bool ready;
  volatile bool done;              /* set by the interrupt handler */
  volatile uint32_t irq_status;    /* STATUS as the handler saw it */
  uint32_t invocations;
  ethosu_pmu last, total;          /* PMU of the last inference and the sum over all */
} ethosu_device;

et_status ethosu_init(ethosu_device *dev, const ethosu_hal *hal, char *msg, size_t cap);
et_status ethosu_check(const ethosu_device *dev, uint32_t config, uint32_t arch_id, char *msg, size_t cap);
/* Runs `words` command words at `cmd` with region base addresses bases[0..n-1]. */
et_status ethosu_run(ethosu_device *dev, const uint32_t *cmd, uint32_t words, const uint64_t *bases, uint32_t n, char *msg,
                     size_t cap);
/* The interrupt handler body (installed by ethosu_init through hal.irq_attach). */
void ethosu_irq(void *dev);
/* "Ethos-U55-128"-style name of a CONFIG word. */
void ethosu_config_name(uint32_t config, char *out, size_t cap);

#endif
