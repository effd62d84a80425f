/* platform.h for the Cortex-M boards (Corstone-300/320, MPS2 AN385/AN386/
 * AN500/AN505, micro:bit; under QEMU, an FVP or on hardware).
 *
 * Console: semihosting SYS_WRITE (default) or the CMSDK UART (FW_CONSOLE=uart).
 * Counter: DWT CYCCNT when the core counts cycles (FVP, hardware: "cycles");
 *   otherwise the MPS2/MPS3 FPGAIO counter, or SysTick from the CPU clock,
 *   converted to nanoseconds, which under QEMU -icount shift=0 is one per
 *   instruction ("instructions"). Chosen at run time in plat_init.
 * Model: EMDL header + .bpte at BOARD_MODEL_ADDR, put there by the simulator
 *   (QEMU -device loader, FVP --data) or linked in (EMBED_MODEL).
 * Exit: semihosting SYS_EXIT_EXTENDED, so the status reaches the simulator. */
#include <stdbool.h>
#include <string.h>

#include "board_config.h"
#include "cortexm.h"
#include "et_fmt.h"
#include "platform.h"
#include "region_bounds.h"
#if !defined(FW_NO_SEMIHOSTING)
#include "semihost.h"
#endif

#if !defined(FW_CONSOLE_UART) && !defined(FW_NO_SEMIHOSTING)
#define USE_SH_CONSOLE 1
#endif

extern uint32_t __stack_limit__[], __stack_top__[];
extern uint8_t __heap_end__[];
extern uint8_t __model_end__[]; /* end of the image's model section (link.ld) */

/* ---------------------------------------------------------------- console */

#if defined(FW_CONSOLE_UART)
#ifndef BOARD_UART_BASE
#error "FW_CONSOLE=uart needs uart_base in board.toml [board]"
#endif
#define UART_DATA (BOARD_UART_BASE + 0x00u)
#define UART_STATE (BOARD_UART_BASE + 0x04u)
#define UART_CTRL (BOARD_UART_BASE + 0x08u)
#define UART_BAUDDIV (BOARD_UART_BASE + 0x10u)

static void uart_init(void) {
  REG32(UART_BAUDDIV) = BOARD_UART_HZ / 115200u; /* 115200 baud 8N1; >= 16 as the CMSDK UART requires */
  REG32(UART_CTRL) = 1u;                        /* TX enable */
}

static void uart_write(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    while (REG32(UART_STATE) & 1u) { /* TX buffer full */
    }
    REG32(UART_DATA) = (uint8_t)s[i];
  }
}
#endif

#if USE_SH_CONSOLE
static int g_tt = -1;
#endif
static bool g_console_ready;

static void console_init(void) {
  if (g_console_ready) return;
#if defined(FW_CONSOLE_UART)
  uart_init();
#elif USE_SH_CONSOLE
  g_tt = sh_open(":tt", SH_MODE_W); /* ":tt" + write mode = the host's stdout */
#endif
  g_console_ready = true;
}

void plat_write(const char *s, size_t n) {
  console_init(); /* faults may print before plat_init */
#if defined(FW_CONSOLE_UART)
  uart_write(s, n);
#elif USE_SH_CONSOLE
  if (g_tt >= 0) sh_write(g_tt, s, n);
#else
  (void)s;
  (void)n;
#endif
}

/* ---------------------------------------------------------------- counter */

/* Counter sources, chosen at run time in counter_init:
 *   DWT      the core's cycle counter when it counts (FVP, hardware), extended to
 *            64 bits with the help of a periodic SysTick interrupt;
 *   FPGAIO   the MPS2/MPS3 FPGAIO free-running COUNTER (board.toml fpgaio_base,
 *            fpgaio_hz) where DWT does not count (QEMU). Computed on read, so no
 *            timer is armed: under QEMU -icount a debugger halt (the NPU
 *            co-simulation) then cannot move the clock;
 *   SYSTICK  a periodic 24-bit SysTick from the CPU clock, wraps counted in its
 *            interrupt, where neither exists. */
enum { SRC_DWT, SRC_FPGAIO, SRC_SYSTICK };
static int g_src = SRC_SYSTICK;
static bool g_use_dwt; /* g_src == SRC_DWT, read by the SysTick handler */
static volatile uint32_t g_systick_wraps;

/* A free-running 32-bit counter extended to 64 bits: read often enough
 * (every profiled operation; DWT also from SysTick every 2^24 cycles) that
 * no wrap is missed. */
typedef struct {
  uint32_t last;
  uint64_t high;
} wide_counter;

static uint64_t wide_read(wide_counter *w, uintptr_t reg) {
  uint32_t irq = plat_irq_save();
  uint32_t c = REG32(reg);
  if (c < w->last) w->high += 1ull << 32;
  w->last = c;
  uint64_t v = w->high | c;
  plat_irq_restore(irq);
  return v;
}

static wide_counter g_dwt;
static uint64_t dwt_read(void) { return wide_read(&g_dwt, DWT_CYCCNT); }

#if defined(BOARD_FPGAIO_BASE)
#define FPGAIO_COUNTER (BOARD_FPGAIO_BASE + 0x18u)
#define FPGAIO_PRESCALE (BOARD_FPGAIO_BASE + 0x1Cu)
static wide_counter g_fpga;
static uint64_t fpgaio_read(void) { return wide_read(&g_fpga, FPGAIO_COUNTER); }
#endif

static void systick_periodic(void) {
  REG32(SYST_RVR) = 0x00FFFFFFu;
  REG32(SYST_CVR) = 0;
  REG32(SYST_CSR) = 7u; /* CLKSOURCE=CPU, TICKINT, ENABLE */
}

void SysTick_Handler(void) {
  if (g_src == SRC_FPGAIO) {
    REG32(SYST_CSR) = 0; /* a one-shot wake-up (plat_wait_for_interrupt) */
    return;
  }
  g_systick_wraps++;
  if (g_use_dwt) (void)dwt_read();
}

static void counter_init(void) {
#if !CM_BASELINE /* Armv6-M's DWT has no cycle counter */
  REG32(SCB_DEMCR) |= DEMCR_TRCENA;
  __asm__ volatile("dsb\n isb" ::: "memory");
  if (!(REG32(DWT_CTRL) & DWT_CTRL_NOCYCCNT)) {
    REG32(DWT_CYCCNT) = 0;
    REG32(DWT_CTRL) |= DWT_CTRL_CYCCNTENA;
    for (volatile int i = 0; i < 16; i++) {
    }
    /* QEMU accepts the writes but does not count. */
    g_use_dwt = REG32(DWT_CYCCNT) != 0;
  }
#endif
  if (g_use_dwt) {
    g_src = SRC_DWT;
    systick_periodic();
    return;
  }
#if defined(BOARD_FPGAIO_BASE)
  REG32(FPGAIO_PRESCALE) = 0; /* COUNTER advances every prescaler clock */
  g_src = SRC_FPGAIO;
  REG32(SYST_CSR) = 0;
#else
  g_src = SRC_SYSTICK;
  systick_periodic();
#endif
}

static uint64_t systick_ticks(void) {
  uint32_t hi, v;
  do {
    hi = g_systick_wraps;
    v = REG32(SYST_CVR);
  } while (hi != g_systick_wraps);
  return ((uint64_t)hi << 24) + (0x00FFFFFFu - v);
}

static uint64_t ticks_to_ns(uint64_t t, uint64_t hz) { return t / hz * 1000000000ull + (t % hz) * 1000000000ull / hz; }

uint64_t plat_counter(void) {
  if (g_src == SRC_DWT) return dwt_read();
  /* ticks -> ns; under QEMU -icount shift=0 one ns is one instruction */
#if defined(BOARD_FPGAIO_BASE)
  if (g_src == SRC_FPGAIO) return ticks_to_ns(fpgaio_read(), BOARD_FPGAIO_HZ);
#endif
  return ticks_to_ns(systick_ticks(), BOARD_CPU_HZ);
}

const char *plat_counter_unit(void) { return g_use_dwt ? "cycles" : "instructions"; }

/* ---------------------------------------------------------------- model */

static const uint8_t *g_model;
static size_t g_model_size;
static uint32_t g_model_flags;
static int g_model_state; /* 0 unread, 1 ok, -1 bad */

static uint32_t rd_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void model_probe(void) {
  if (g_model_state) return;
#if defined(BOARD_MODEL_IN_IMAGE)
  /* The application links its program into the image itself (emlkit export):
   * there is no EMDL slot to read, and plat_model has nothing to give. */
  g_model_state = -1;
  return;
#endif
  const uint8_t *hdr = (const uint8_t *)(uintptr_t)BOARD_MODEL_ADDR;
  char msg[200];
  if (memcmp(hdr, PLAT_MODEL_MAGIC, 4) != 0) {
    et_snprintf(msg, sizeof msg,
             "error: no model at 0x%08x (EMDL header missing): load model.bin there "
             "(QEMU -device loader,file=model.bin,addr=0x%08x / FVP --data) or build with EMBED_MODEL\n",
             (unsigned)BOARD_MODEL_ADDR, (unsigned)BOARD_MODEL_ADDR);
    plat_write(msg, strlen(msg));
    g_model_state = -1;
    return;
  }
  uint32_t size = rd_le32(hdr + 4);
  if (size == 0 || size > BOARD_MODEL_MAX - 16u) {
    et_snprintf(msg, sizeof msg,
             "error: model header says %lu bytes but the " BOARD_NAME " model slot holds %lu: "
             "use a smaller model or raise [model].max_size in board.toml\n",
             (unsigned long)size, (unsigned long)(BOARD_MODEL_MAX - 16u));
    plat_write(msg, strlen(msg));
    g_model_state = -1;
    return;
  }
  g_model = hdr + 16;
  g_model_size = size;
  g_model_flags = rd_le32(hdr + 8);
  g_model_state = 1;
}

int plat_model(const uint8_t **data, size_t *size) {
  model_probe();
  if (g_model_state != 1) return -1;
  *data = g_model;
  *size = g_model_size;
  return 0;
}

/* ---------------------------------------------------------------- arenas */

typedef struct {
  const char *name;
  uint32_t base;
  uint32_t size;
  int shared; /* 1: holds the model slot, 2: holds .data/.bss/heap (and maybe the stack) */
} board_region;

static const board_region k_regions[BOARD_ARENA_COUNT] = BOARD_ARENA_REGIONS;
static plat_region g_regions[BOARD_ARENA_COUNT];

size_t plat_regions(const plat_region **regions) {
  size_t n = 0;
  model_probe();
  for (size_t i = 0; i < BOARD_ARENA_COUNT; i++) {
    uintptr_t base = k_regions[i].base, end = (uintptr_t)k_regions[i].base + k_regions[i].size;
    /* Without a model, the region starts after its header slot. */
    uintptr_t model_used = BOARD_MODEL_ADDR + 16u + (g_model_state == 1 ? g_model_size : 0);
    if ((uintptr_t)__model_end__ > model_used) model_used = (uintptr_t)__model_end__;
    if (!cortexm_region_bounds(k_regions[i].shared, model_used, (uintptr_t)__heap_end__, (uintptr_t)__stack_limit__,
                               &base, &end))
      continue;
    g_regions[n].name = k_regions[i].name;
    g_regions[n].base = (uint8_t *)base;
    g_regions[n].size = end - base;
    n++;
  }
  *regions = g_regions;
  return n;
}

/* ---------------------------------------------------------------- stack */

__attribute__((noinline)) void plat_stack_repaint(void) {
  uintptr_t sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  for (volatile uint32_t *p = (uint32_t *)cortexm_stack_floor(); (uintptr_t)p < sp - 16u; p++) *p = CORTEXM_STACK_PAINT;
}

size_t plat_stack_used(void) {
  const uint32_t *p = __stack_limit__;
  while (p < __stack_top__ && *p == CORTEXM_STACK_PAINT) p++;
  return (size_t)((uintptr_t)__stack_top__ - (uintptr_t)p);
}

/* ---------------------------------------------------------------- outputs */

/* Only when the host asked for it (EMDL flags): files in the simulator's
 * working directory, through semihosting. */
static int host_wants(uint32_t flag) {
#if defined(FW_NO_SEMIHOSTING)
  (void)flag;
  return 0;
#else
  model_probe();
  return g_model_state == 1 && (g_model_flags & flag) != 0;
#endif
}

static void save_file(const char *name, const void *data, size_t nbytes) {
#if defined(FW_NO_SEMIHOSTING)
  (void)name, (void)data, (void)nbytes;
#else
  int h = sh_open(name, SH_MODE_WB);
  if (h < 0) {
    static const char err[] = "error: cannot create a file on the host (semihosting open failed)\n";
    plat_write(err, sizeof err - 1);
    return;
  }
  if (sh_write(h, data, nbytes) != 0) {
    static const char err[] = "error: short write of a file on the host\n";
    plat_write(err, sizeof err - 1);
  }
  sh_close(h);
#endif
}

void plat_save_output(unsigned index, const void *data, size_t nbytes) {
  if (!host_wants(PLAT_FLAG_SAVE_OUTPUTS)) return;
  char name[32];
  et_snprintf(name, sizeof name, "output_%u.bin", index);
  save_file(name, data, nbytes);
}

int plat_etdump_wanted(void) { return host_wants(PLAT_FLAG_ETDUMP); }

void plat_save_etdump(const void *data, size_t nbytes) {
  if (host_wants(PLAT_FLAG_ETDUMP)) save_file("etdump.etdp", data, nbytes);
}

int plat_debug_wanted(void) { return host_wants(PLAT_FLAG_ETDUMP) && host_wants(PLAT_FLAG_DEBUG); }

void plat_save_debug(const void *data, size_t nbytes) {
  if (plat_debug_wanted()) save_file("debug.bin", data, nbytes);
}

/* ---------------------------------------------------------------- driver services */

uint64_t plat_time_us(void) {
  if (g_src == SRC_DWT) {
    uint64_t c = dwt_read();
    return c / BOARD_CPU_HZ * 1000000ull + (c % BOARD_CPU_HZ) * 1000000ull / BOARD_CPU_HZ;
  }
  return plat_counter() / 1000u; /* ns of the FPGAIO or SysTick clock */
}

uint32_t plat_irq_save(void) {
  uint32_t primask;
  __asm__ volatile("mrs %0, primask\n cpsid i" : "=r"(primask)::"memory");
  return primask;
}

void plat_irq_restore(uint32_t state) { __asm__ volatile("msr primask, %0" ::"r"(state) : "memory"); }

void plat_wait_for_interrupt(uint64_t until_us) {
  if (g_src == SRC_FPGAIO) {
    /* No periodic tick runs: arm a one-shot SysTick so the sleep ends at the deadline. */
    uint64_t now = plat_time_us();
    uint64_t cycles = until_us > now ? (until_us - now) * (BOARD_CPU_HZ / 1000000u) : 1u;
    if (cycles > 0x00FFFFFFu) cycles = 0x00FFFFFFu;
    if (cycles == 0) cycles = 1;
    REG32(SYST_RVR) = (uint32_t)cycles;
    REG32(SYST_CVR) = 0;
    REG32(SYST_CSR) = 7u;
  }
  __asm__ volatile("dsb\n wfi" ::: "memory");
}

static void (*g_npu_handler)(void *);
static void *g_npu_arg;

/* The NPU's vector (startup.c puts it at BOARD_NPU_IRQ). */
void Npu_IRQHandler(void) {
  if (g_npu_handler) g_npu_handler(g_npu_arg);
}

int plat_npu_info(plat_npu *npu) {
#if defined(BOARD_NPU_BASE)
  npu->base = BOARD_NPU_BASE;
  npu->irq = BOARD_NPU_IRQ;
  npu->secure = BOARD_NPU_SECURE;
  npu->privileged = BOARD_NPU_PRIVILEGED;
  npu->timeout_us = BOARD_NPU_TIMEOUT_US;
  return 0;
#else
  (void)npu;
  return -1;
#endif
}

int plat_irq_attach(int irq, void (*handler)(void *), void *arg) {
#if defined(BOARD_NPU_BASE)
  if (irq != BOARD_NPU_IRQ || irq < 0) return -1;
  g_npu_arg = arg;
  g_npu_handler = handler;
  REG32(NVIC_ICPR((uint32_t)irq / 32u)) = 1u << ((uint32_t)irq % 32u);
  REG32(NVIC_ISER((uint32_t)irq / 32u)) = 1u << ((uint32_t)irq % 32u);
  __asm__ volatile("dsb\n isb" ::: "memory");
  return 0;
#else
  (void)irq, (void)handler, (void)arg;
  return -1;
#endif
}

/* By 32-byte line, only when the data cache is on (the start-up code leaves it off). */
static void dcache_op(uint32_t reg, const void *p, size_t n) {
  if (!(REG32(SCB_CCR) & CCR_DC) || n == 0) return;
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)(DCACHE_LINE - 1u), end = (uintptr_t)p + n;
  __asm__ volatile("dsb" ::: "memory");
  for (; a < end; a += DCACHE_LINE) REG32(reg) = (uint32_t)a;
  __asm__ volatile("dsb\n isb" ::: "memory");
}

void plat_dcache_clean(const void *p, size_t n) { dcache_op(SCB_DCCMVAC, p, n); }
void plat_dcache_invalidate(void *p, size_t n) { dcache_op(SCB_DCIMVAC, p, n); }

/* ---------------------------------------------------------------- init/exit */

void plat_init(int argc, char **argv) {
  (void)argc;
  (void)argv;
  console_init();
  counter_init();
  model_probe();
}

void plat_exit(int code) {
#if defined(FW_NO_SEMIHOSTING)
  /* Real hardware: nobody to report to; park the core. */
  (void)code;
  for (;;) __asm__ volatile("wfi");
#else
  sh_exit(code);
#endif
}
