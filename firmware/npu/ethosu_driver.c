/* Ethos-U driver: see ethosu_driver.h. Behaviour follows the public Ethos-U
 * programming model (soft reset, CONFIG/ID check, QBASE/QSIZE/BASEP/REGIONCFG,
 * CMD start, IRQ with STATUS decode, soft reset after any fault). */
#include "et_fmt.h"
#include "ethosu_driver.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "ethosu_blob.h"
#include "ethosu_io.h"
#include "ethosu_regs.h"

#define RESET_TIMEOUT_US 10000u
/* AXI configuration index per region (REGIONCFG, 2 bits each) and for the command stream (QCONFIG):
 * 0 and 1 for the scratch regions, 2 for the command stream, 3 for the weights (region 0). */
#define QCONFIG_INDEX 2u
static const uint8_t k_region_cfg[NPU_BASEP_COUNT] = {3, 0, 1, 1, 1, 1, 1, 1};


static uint32_t rd(const ethosu_device *d, uint32_t off) { return ethosu_reg_read(d->hal.base + off); }
static void wr(const ethosu_device *d, uint32_t off, uint32_t v) { ethosu_reg_write(d->hal.base + off, v); }
static uint32_t pmu(const ethosu_device *d) { return d->product == ETHOSU_PRODUCT_U85 ? NPU_PMU_BASE_U85 : NPU_PMU_BASE_U55; }

void ethosu_config_name(uint32_t config, char *out, size_t cap) {
  et_snprintf(out, cap, "%s-%u", ethosu_product_name(ETHOSU_CFG_PRODUCT(config)), 1u << ETHOSU_CFG_MACS_LOG2(config));
}

static void config_target(uint32_t config, char *out, size_t cap) {
  char name[32];
  ethosu_config_name(config, name, sizeof name);
  size_t i = 0;
  for (; name[i] && i + 1 < cap; i++) out[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
  out[i] = 0;
}

/* Reset to a known state; the NPU then runs at the requested security and privilege level. */
static et_status soft_reset(ethosu_device *d, char *msg, size_t cap) {
  uint32_t want = (d->hal.privileged ? PROT_PRIVILEGED : 0u) | (d->hal.secure ? 0u : PROT_NONSECURE);
  wr(d, NPU_RESET, want);
  uint64_t t0 = d->hal.time_us();
  while (rd(d, NPU_STATUS) & STATUS_RESET_BUSY) {
    if (d->hal.time_us() - t0 > RESET_TIMEOUT_US)
      return et_msgf(msg, cap, ET_E_NPU_TIMEOUT, "Ethos-U soft reset did not finish within %u us", RESET_TIMEOUT_US);
  }
  uint32_t prot = rd(d, NPU_PROT) & (PROT_PRIVILEGED | PROT_NONSECURE);
  if (prot != want)
    return et_msgf(msg, cap, ET_E_NPU_CONFIG,
                "Ethos-U stayed at %s/%s after reset, %s/%s was requested: check the NPU's security configuration in board.toml [npu]",
                prot & PROT_NONSECURE ? "non-secure" : "secure", prot & PROT_PRIVILEGED ? "privileged" : "user",
                d->hal.secure ? "secure" : "non-secure", d->hal.privileged ? "privileged" : "user");
  if (d->product == ETHOSU_PRODUCT_U85) {
    /* configurations 0-1 on the SRAM port, 2-3 on the external port; device, non-shareable */
    for (uint32_t i = 0; i < 4; i++) wr(d, NPU85_MEM_ATTR(i), i >= 2 ? (1u << 2) : 0u);
    uint32_t axi = (16u - 1u) | ((16u - 1u) << 8) | (2u << 16); /* outstanding reads/writes, 256-byte bursts */
    wr(d, NPU85_AXI_SRAM, axi);
    wr(d, NPU85_AXI_EXT, axi);
    wr(d, NPU85_POWER_CTRL, 0); /* no MAC power ramping */
  } else {
    /* 32 outstanding reads, 16 writes, no burst split, normal memtype 0, for every configuration */
    uint32_t lim = ((32u - 1u) << 16) | ((16u - 1u) << 24);
    for (uint32_t i = 0; i < 4; i++) wr(d, NPU_AXI_LIMIT(i), lim);
  }
  return ET_OK;
}

void ethosu_irq(void *arg) {
  ethosu_device *d = arg;
  uint32_t st = rd(d, NPU_STATUS);
  wr(d, NPU_CMD, (rd(d, NPU_CMD) & CMD_KEEP_MASK) | CMD_CLEAR_IRQ);
  d->irq_status = st;
  d->done = true;
}

et_status ethosu_init(ethosu_device *d, const ethosu_hal *hal, char *msg, size_t cap) {
  memset(d, 0, sizeof *d);
  if (hal == NULL || hal->base == 0 || hal->time_us == NULL)
    return et_msgf(msg, cap, ET_E_NPU_CONFIG, "this board has no Ethos-U NPU (no [npu] section in its board.toml)");
  d->hal = *hal;
  d->config = rd(d, NPU_CONFIG);
  d->product = ETHOSU_CFG_PRODUCT(d->config);
  if (d->config == 0 && rd(d, NPU_ID) == 0)
    return et_msgf(msg, cap, ET_E_NPU_CONFIG,
                "no Ethos-U responds at 0x%08lx (ID and CONFIG read 0): on QEMU the NPU is co-simulated only when "
                "run through emlkit run / emlkit.deploy.sim_qemu",
                (unsigned long)hal->base);
  if (d->product > ETHOSU_PRODUCT_U85)
    return et_msgf(msg, cap, ET_E_NPU_CONFIG,
                "no Ethos-U at 0x%08lx: CONFIG reads 0x%08" PRIx32 " (product %" PRIu32 "): check [npu].base in board.toml",
                (unsigned long)hal->base, d->config, d->product);
  et_status st = soft_reset(d, msg, cap);
  if (st != ET_OK) return st;
  d->id = rd(d, NPU_ID);
  d->config = rd(d, NPU_CONFIG);
  if (hal->irq >= 0) {
    if (hal->irq_attach == NULL || hal->irq_save == NULL || hal->irq_restore == NULL || hal->wait_for_interrupt == NULL)
      return et_msgf(msg, cap, ET_E_NPU_CONFIG, "the board declares NPU interrupt %d but provides no interrupt services", hal->irq);
    if (hal->irq_attach(hal->irq, ethosu_irq, d) != 0)
      return et_msgf(msg, cap, ET_E_NPU_CONFIG, "the board cannot route NPU interrupt %d: check board.toml [npu].irq", hal->irq);
  }
  d->ready = true;
  return ET_OK;
}

et_status ethosu_check(const ethosu_device *d, uint32_t cfg, uint32_t arch_id, char *msg, size_t cap) {
  char want[32], have[32], target[32];
  ethosu_config_name(cfg, want, sizeof want);
  ethosu_config_name(d->config, have, sizeof have);
  config_target(d->config, target, sizeof target);
  uint32_t hw = d->config;
  if (ETHOSU_CFG_PRODUCT(cfg) != ETHOSU_CFG_PRODUCT(hw) || ETHOSU_CFG_MACS_LOG2(cfg) != ETHOSU_CFG_MACS_LOG2(hw))
    return et_msgf(msg, cap, ET_E_NPU_CONFIG,
                "the program was compiled for %s, this NPU is %s: recompile with --target %s", want, have, target);
  if (ETHOSU_CFG_CMD_VERSION(cfg) != ETHOSU_CFG_CMD_VERSION(hw))
    return et_msgf(msg, cap, ET_E_NPU_CONFIG,
                "the command stream has version %" PRIu32 ", this %s runs version %" PRIu32 ": recompile with this toolkit's Vela",
                ETHOSU_CFG_CMD_VERSION(cfg), have, ETHOSU_CFG_CMD_VERSION(hw));
  if (ETHOSU_CFG_CUSTOM_DMA(cfg) && !ETHOSU_CFG_CUSTOM_DMA(hw))
    return et_msgf(msg, cap, ET_E_NPU_CONFIG, "the command stream needs the custom DMA, which this %s lacks", have);
  if (ETHOSU_ID_ARCH_MAJOR(arch_id) != ETHOSU_ID_ARCH_MAJOR(d->id) || ETHOSU_ID_ARCH_MINOR(d->id) < ETHOSU_ID_ARCH_MINOR(arch_id))
    return et_msgf(msg, cap, ET_E_NPU_CONFIG,
                "the command stream needs NPU architecture %" PRIu32 ".%" PRIu32 ".%" PRIu32 ", this %s is %" PRIu32 ".%" PRIu32
                ".%" PRIu32,
                ETHOSU_ID_ARCH_MAJOR(arch_id), ETHOSU_ID_ARCH_MINOR(arch_id), ETHOSU_ID_ARCH_PATCH(arch_id), have,
                ETHOSU_ID_ARCH_MAJOR(d->id), ETHOSU_ID_ARCH_MINOR(d->id), ETHOSU_ID_ARCH_PATCH(d->id));
  return ET_OK;
}

static void pmu_start(const ethosu_device *d) {
  static const uint32_t events[ETHOSU_PMU_EVENTS] = {PMU_EVENT_NPU_ACTIVE, PMU_EVENT_MAC_ACTIVE, PMU_EVENT_AXI0_RD_BEATS,
                                                     PMU_EVENT_AXI0_WR_BEATS};
  uint32_t p = pmu(d);
  for (uint32_t i = 0; i < ETHOSU_PMU_EVENTS; i++) wr(d, p + NPU_PMEVTYPER(i), events[i]);
  wr(d, p + NPU_PMOVSCLR, 0xFFFFFFFFu);
  wr(d, p + NPU_PMCNTENSET, PMCNT_CYCLE | ((1u << ETHOSU_PMU_EVENTS) - 1u));
  wr(d, p + NPU_PMCR, PMCR_CNT_EN | PMCR_EVENT_RESET | PMCR_CYCLE_RESET);
}

static void pmu_stop(ethosu_device *d) {
  uint32_t p = pmu(d);
  uint32_t lo = rd(d, p + NPU_PMCCNTR), hi = rd(d, p + NPU_PMCCNTR_HI) & 0xFFFFu;
  d->last.cycles = ((uint64_t)hi << 32) | lo;
  for (uint32_t i = 0; i < ETHOSU_PMU_EVENTS; i++) d->last.events[i] = rd(d, p + NPU_PMEVCNTR(i));
  wr(d, p + NPU_PMCR, 0);
  d->total.cycles += d->last.cycles;
  for (uint32_t i = 0; i < ETHOSU_PMU_EVENTS; i++) d->total.events[i] += d->last.events[i];
}

static const char *channel_name(uint32_t ch) {
  static const char *const names[16] = {"command stream", "IFM", "weights", "scale/bias", "memory-to-memory DMA", "?", "?", "?",
                                        "OFM", "memory-to-memory DMA write", "?", "?", "?", "?", "?", "?"};
  return names[ch & 15u];
}

/* Wait for the completion interrupt (or poll STATUS without one). */
static bool wait_done(ethosu_device *d) {
  uint64_t t0 = d->hal.time_us();
  for (;;) {
    if (d->hal.irq < 0) {
      uint32_t st = rd(d, NPU_STATUS);
      if (!(st & STATUS_STATE_RUNNING) || (st & STATUS_IRQ_RAISED)) {
        ethosu_irq(d);
        return true;
      }
      if (d->hal.time_us() - t0 > d->hal.timeout_us) return false;
      continue;
    }
    uint32_t k = d->hal.irq_save();
    if (d->done) {
      d->hal.irq_restore(k);
      return true;
    }
    if (d->hal.time_us() - t0 > d->hal.timeout_us) {
      d->hal.irq_restore(k);
      return false;
    }
    d->hal.wait_for_interrupt(t0 + d->hal.timeout_us + 1u); /* a pending interrupt wakes it even while masked */
    d->hal.irq_restore(k);
  }
}

et_status ethosu_run(ethosu_device *d, const uint32_t *cmd, uint32_t words, const uint64_t *bases, uint32_t n, char *msg,
                     size_t cap) {
  if (!d->ready) return et_msgf(msg, cap, ET_E_NPU_CONFIG, "the Ethos-U driver is not initialised");
  if (n > NPU_BASEP_COUNT) return et_msgf(msg, cap, ET_E_INVALID_ARG, "%" PRIu32 " base addresses, the NPU has %u", n, NPU_BASEP_COUNT);
  d->done = false;
  d->irq_status = 0;
  pmu_start(d);
  uint64_t q = (uintptr_t)cmd;
  wr(d, NPU_QBASE, (uint32_t)q);
  wr(d, NPU_QBASE_HI, (uint32_t)(q >> 32));
  wr(d, NPU_QSIZE, 4u * words);
  wr(d, NPU_QCONFIG, QCONFIG_INDEX);
  uint32_t rcfg = 0;
  for (uint32_t i = 0; i < n; i++) {
    wr(d, NPU_BASEP(i), (uint32_t)bases[i]);
    wr(d, NPU_BASEP(i) + 4u, (uint32_t)(bases[i] >> 32));
    rcfg |= (uint32_t)k_region_cfg[i] << (2u * i);
  }
  wr(d, NPU_REGIONCFG, rcfg);
  wr(d, NPU_CMD, (rd(d, NPU_CMD) & CMD_KEEP_MASK) | CMD_START);
  bool ok = wait_done(d);
  d->invocations++;
  if (!ok) {
    uint32_t st = rd(d, NPU_STATUS), qread = rd(d, NPU_QREAD);
    bool finished = (st & STATUS_CMD_END_REACHED) && !(st & STATUS_STATE_RUNNING);
    et_status r;
    if (finished)
      r = et_msgf(msg, cap, ET_E_NPU_TIMEOUT,
               "Ethos-U finished but its completion interrupt (IRQ %d) did not arrive within %" PRIu32
               " ms (STATUS 0x%08" PRIx32 "): check board.toml [npu].irq and the interrupt wiring",
               d->hal.irq, d->hal.timeout_us / 1000u, st);
    else
      r = et_msgf(msg, cap, ET_E_NPU_TIMEOUT,
               "Ethos-U did not complete within %" PRIu32 " ms (STATUS 0x%08" PRIx32 ", %" PRIu32 " of %" PRIu32
               " command bytes read): the NPU hangs",
               d->hal.timeout_us / 1000u, st, qread, 4u * words);
    /* Stop the NPU before its memory is reused. */
    char ignore[8];
    (void)soft_reset(d, ignore, sizeof ignore);
    return r;
  }
  pmu_stop(d);
  uint32_t st = d->irq_status;
  et_status r = ET_OK;
  if (st & STATUS_BUS_ERROR)
    r = et_msgf(msg, cap, ET_E_NPU_BUS_ERROR,
             "Ethos-U bus error reading %s (AXI interface %" PRIu32 ", %" PRIu32 " of %" PRIu32
             " command bytes read): a base address points to memory the NPU cannot reach",
             channel_name(STATUS_FAULT_CHANNEL(st)), STATUS_FAULT_IFACE(st), rd(d, NPU_QREAD), 4u * words);
  else if (st & (STATUS_CMD_PARSE_ERROR | STATUS_WD_FAULT | STATUS_ECC_FAULT | STATUS_BRANCH_FAULT))
    r = et_msgf(msg, cap, ET_E_NPU_FAULT, "Ethos-U stopped with a %s (STATUS 0x%08" PRIx32 ", QREAD %" PRIu32 ")",
             st & STATUS_CMD_PARSE_ERROR ? "command stream parse error"
             : st & STATUS_WD_FAULT     ? "weight decoder fault"
             : st & STATUS_ECC_FAULT    ? "RAM ECC fault"
                                        : "branch fault",
             st, rd(d, NPU_QREAD));
  else if (!(st & STATUS_CMD_END_REACHED))
    r = et_msgf(msg, cap, ET_E_NPU_FAULT, "Ethos-U interrupted before the end of the command stream (STATUS 0x%08" PRIx32 ")", st);
  if (r != ET_OK) {
    char ignore[8];
    (void)soft_reset(d, ignore, sizeof ignore);
  }
  return r;
}
