/* Start-up code for the Cortex-M boards: vector table, reset, fault reports.
 * One file for Armv6-M, Armv7-M/7E-M and Armv8-M/8.1-M Mainline; what differs
 * is chosen by the compiler's target macros (cortexm.h).
 *
 * Reset: enable the FPU/MVE (CP10/CP11) where the code may use them, guard the
 * stack (MSPLIM on Armv8-M Mainline, a read-only MPU region on Armv7-M, so an
 * overflow is a fault instead of silent corruption), copy .data, zero .bss,
 * paint the stack for the high-water mark, enable the separate fault
 * exceptions and division-by-zero trapping where the core has them, run
 * constructors, then plat_exit(main()).
 *
 * Faults print which fault, PC/LR/xPSR from the stacked frame and, beyond
 * Armv6-M, the fault status registers, then exit with CORTEXM_FAULT_EXIT_CODE. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "board_config.h"
#include "cortexm.h"
#include "platform.h"

extern uint32_t __data_start__[], __data_end__[], __data_load__[];
extern uint32_t __bss_start__[], __bss_end__[];
extern uint32_t __stack_limit__[], __stack_top__[];
extern uint8_t __heap_start__[], __heap_end__[];

extern int main(int argc, char **argv);
extern void __libc_init_array(void);

void Reset_Handler(void);
void Fault_Handler(void);
void SysTick_Handler(void);
void Npu_IRQHandler(void);

/* Bare-metal programs have no crti/crtn (-nostartfiles); newlib's
 * __libc_init_array still calls these. */
void _init(void) {}
void _fini(void) {}

/* The MPU stack guard, [guard_lo, guard_hi); empty where MSPLIM does the job
 * or the core has no MPU. */
static uintptr_t g_guard_lo, g_guard_hi;

/* Lowest stack address that may be written (above the MPU guard, if any). */
uintptr_t cortexm_stack_floor(void) { return g_guard_hi ? g_guard_hi : (uintptr_t)__stack_limit__; }

/* ---------------------------------------------------------------- reset */

#if !CM_V8M_MAIN
/* Armv7-M and Armv6-M have no stack limit register: make the lowest
 * CORTEXM_STACK_GUARD bytes of the stack a read-only MPU region (the rest of
 * the map keeps the default attributes, PRIVDEFENA). On Armv7-M a push into it
 * is a MemManage fault, and the fault handler can still read the (unwritten)
 * frame there. Armv6-M has only HardFault, whose own stacking then hits the
 * guard too: the core locks up (QEMU stops with "Lockup"), which still beats
 * running on over .bss and code. Needs an MPU (MPU_TYPE.DREGION > 0: not the
 * Cortex-M0) and a stack of at least 4 guards. */
static void stack_guard(void) {
  uint32_t regions = (REG32(MPU_TYPE) >> 8) & 0xFFu;
  uintptr_t lo = ((uintptr_t)__stack_limit__ + CORTEXM_STACK_GUARD - 1u) & ~(uintptr_t)(CORTEXM_STACK_GUARD - 1u);
  if (regions == 0 || lo + 4u * CORTEXM_STACK_GUARD > (uintptr_t)__stack_top__) return;
  uint32_t size_field = 0; /* RASR.SIZE: region of 2^(SIZE+1) bytes */
  while ((2u << size_field) < CORTEXM_STACK_GUARD) size_field++;
  REG32(MPU_RNR) = 0;
  REG32(MPU_RBAR) = (uint32_t)lo;
  REG32(MPU_RASR) = (1u << 28)        /* XN */
                    | (6u << 24)      /* AP=0b110: read-only, privileged and not */
                    | (1u << 19)      /* TEX=0b001, C=B=0: normal memory, non-cacheable */
                    | (size_field << 1) | 1u;
  REG32(MPU_CTRL) = MPU_CTRL_ENABLE | MPU_CTRL_PRIVDEFENA;
  __asm__ volatile("dsb\n isb" ::: "memory");
  g_guard_lo = lo;
  g_guard_hi = lo + CORTEXM_STACK_GUARD;
}
#endif

__attribute__((noreturn, used)) static void reset_c(void) {
#if CM_V8M_MAIN
  __asm__ volatile("msr msplim, %0" ::"r"(__stack_limit__));
#endif

  const uint32_t *src = __data_load__;
  for (uint32_t *dst = __data_start__; dst < __data_end__;) *dst++ = *src++;
  for (uint32_t *dst = __bss_start__; dst < __bss_end__;) *dst++ = 0;

  /* Paint the unused stack; plat_stack_used() finds the deepest overwritten word. */
  uintptr_t sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  for (volatile uint32_t *p = __stack_limit__; (uintptr_t)p < sp - 16u; p++) *p = CORTEXM_STACK_PAINT;

#if CM_BASELINE
  /* Unaligned word and halfword accesses fault on Armv6-M (CCR is read-only
   * there); the same image run on an Armv7-M core (a stand-in board) then
   * traps them too. */
  REG32(SCB_CCR) |= CCR_UNALIGN_TRP;
#else
  /* Armv6-M: VTOR is optional (absent on the Cortex-M0) and the table is
   * linked where the core fetches it anyway; the fault enables below do not exist. */
  extern const uint32_t __vector_table[];
  REG32(SCB_VTOR) = (uint32_t)(uintptr_t)__vector_table;
  uint32_t shcsr = SHCSR_MEMFAULTENA | SHCSR_BUSFAULTENA | SHCSR_USGFAULTENA;
#if CM_V8M_MAIN
  shcsr |= SHCSR_SECUREFAULTENA;
#endif
  REG32(SCB_SHCSR) |= shcsr;
  REG32(SCB_CCR) |= CCR_DIV_0_TRP; /* integer division by zero faults instead of giving 0 */
#endif
#if !CM_V8M_MAIN
  stack_guard();
#endif
  __asm__ volatile("dsb\n isb" ::: "memory");

  __libc_init_array();
  static char prog[] = "runner";
  static char *argv[] = {prog, NULL};
  plat_exit(main(1, argv));
}

/* Naked: nothing may run before CP10/CP11 are on, because the compiler is
 * free to use FP/MVE registers in any C function (even for memcpy). The
 * branch goes through a register: Armv6-M's B reaches only +-2 KiB. */
__attribute__((naked, noreturn)) void Reset_Handler(void) {
  __asm__ volatile(
#if CM_ENABLE_CP10_CP11
      "ldr r0, =0xE000ED88\n" /* CPACR */
      "ldr r1, [r0]\n"
      "ldr r2, =0x00F00000\n" /* CP10, CP11: full access */
      "orrs r1, r2\n"
      "str r1, [r0]\n"
      "dsb\n"
      "isb\n"
#endif
      "ldr r0, =reset_c\n"
      "bx r0\n");
}

/* ---------------------------------------------------------------- faults */

/* A small stack of its own: after a stack overflow the main stack is full.
 * 512 bytes are enough for the report; Armv7-M and later keep 1 KiB. */
uint64_t cortexm_fault_stack[CM_BASELINE ? 64 : 128];

static const char *const exc_names[] = {
    [2] = "NMI",         [3] = "HardFault",  [4] = "MemManage fault", [5] = "BusFault",
    [6] = "UsageFault",  [7] = "SecureFault", [11] = "SVCall",          [12] = "DebugMonitor",
    [14] = "PendSV",
};

static void fw_puts(const char *s) { plat_write(s, strlen(s)); }

/* `label` is short: at most 12 characters. */
static void fw_hex(const char *label, uint32_t v) {
  char buf[24];
  size_t n = 0;
  while (*label) buf[n++] = *label++;
  buf[n++] = '0';
  buf[n++] = 'x';
  for (int i = 7; i >= 0; i--) buf[n++] = "0123456789abcdef"[(v >> (4 * i)) & 0xFu];
  plat_write(buf, n);
}

#if !CM_BASELINE
static const struct {
  uint32_t bit;
  const char *text;
} cfsr_bits[] = {
    {1u << 0, "IACCVIOL: instruction fetch from a protected address"},
    {1u << 1, "DACCVIOL: data access to a protected address"},
    {1u << 3, "MUNSTKERR"},
    {1u << 4, "MSTKERR: fault while stacking the exception frame"},
    {1u << 5, "MLSPERR"},
    {1u << 8, "IBUSERR: instruction bus error"},
    {1u << 9, "PRECISERR: data bus error (BFAR holds the address)"},
    {1u << 10, "IMPRECISERR: imprecise data bus error"},
    {1u << 11, "UNSTKERR"},
    {1u << 12, "STKERR"},
    {1u << 13, "LSPERR"},
    {1u << 16, "UNDEFINSTR: undefined instruction"},
    {1u << 17, "INVSTATE: invalid EPSR state (Thumb bit clear?)"},
    {1u << 18, "INVPC: invalid EXC_RETURN"},
    {1u << 19, "NOCP: coprocessor (FPU/MVE) disabled or absent"},
    {1u << 20, "STKOF: stack overflow (MSPLIM), raise [link].stack_size"},
    {1u << 24, "UNALIGNED: unaligned access"},
    {1u << 25, "DIVBYZERO: integer division by zero"},
};
#endif

__attribute__((noreturn, used)) static void fault_report(const uint32_t *frame, uint32_t exc_return) {
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  uint32_t exc = ipsr & 0x1FFu;
  const char *name = exc < sizeof exc_names / sizeof exc_names[0] && exc_names[exc] ? exc_names[exc] : "unexpected exception";

  fw_puts("\nFAULT: ");
  fw_puts(name);
  fw_hex(" (exception ", exc);
  fw_puts(")\n");
  uintptr_t sp = (uintptr_t)frame;
  if (sp < (uintptr_t)__stack_limit__ || sp + 32u > (uintptr_t)__stack_top__) {
    /* Below the stack (an overflow where nothing guards it, e.g. Armv6-M) or
     * corrupt: the frame may be unreadable, so it is not read. */
    fw_hex("FAULT: SP=", (uint32_t)sp);
    fw_hex(" EXC_RETURN=", exc_return);
    fw_puts("\nFAULT: SP is outside the stack");
    fw_hex(" [", (uint32_t)(uintptr_t)__stack_limit__);
    fw_hex(", ", (uint32_t)(uintptr_t)__stack_top__);
    fw_puts("): stack overflow (or a corrupt SP), raise [link].stack_size\n");
  } else {
    /* The stacked frame: r0 r1 r2 r3 r12 lr pc xpsr. After a stacking fault
     * (STKOF, MSTKERR) it may be partial; the registers are still worth a look. */
    fw_hex("FAULT: PC=", frame[6]);
    fw_hex(" LR=", frame[5]);
    fw_hex(" xPSR=", frame[7]);
    fw_hex(" SP=", (uint32_t)sp);
    fw_hex(" EXC_RETURN=", exc_return);
    fw_puts("\n");
  }
#if !CM_BASELINE
  uint32_t cfsr = REG32(SCB_CFSR), hfsr = REG32(SCB_HFSR);
  fw_hex("FAULT: CFSR=", cfsr);
  fw_hex(" HFSR=", hfsr);
  if (cfsr & (1u << 7)) fw_hex(" MMFAR=", REG32(SCB_MMFAR));
  if (cfsr & (1u << 15)) fw_hex(" BFAR=", REG32(SCB_BFAR));
#if CM_V8M_MAIN
  if (exc == 7) fw_hex(" SFSR=", REG32(SCB_SFSR));
#endif
  fw_puts("\n");
  for (size_t i = 0; i < sizeof cfsr_bits / sizeof cfsr_bits[0]; i++) {
    if (cfsr & cfsr_bits[i].bit) {
      fw_puts("FAULT: ");
      fw_puts(cfsr_bits[i].text);
      fw_puts("\n");
    }
  }
  if (hfsr & (1u << 30)) fw_puts("FAULT: HardFault escalated from a configurable fault (FORCED)\n");
  if (hfsr & (1u << 1)) fw_puts("FAULT: vector table read error (VECTTBL)\n");
#endif
  /* The MPU guard: the frame was pushed into it, or a store hit it. */
  int in_guard = g_guard_hi && sp < g_guard_hi && sp + 32u > g_guard_lo;
#if !CM_BASELINE
  uintptr_t mmfar = REG32(SCB_MMFAR);
  if (g_guard_hi && (cfsr & (1u << 7)) && mmfar >= g_guard_lo && mmfar < g_guard_hi) in_guard = 1;
#endif
  if (in_guard) {
    fw_puts("FAULT: stack overflow: the stack reached its MPU guard");
    fw_hex(" at ", (uint32_t)g_guard_lo);
    fw_puts(", raise [link].stack_size\n");
  }
  plat_exit(CORTEXM_FAULT_EXIT_CODE);
}

/* Picks the stack the frame was pushed on (EXC_RETURN bit 2), moves to the
 * fault stack (with the stack limit off on Armv8-M), and reports. Armv6-M
 * instructions only, so every core runs it. */
__attribute__((naked)) void Fault_Handler(void) {
  __asm__ volatile(
      "mov r1, lr\n"
      "movs r2, #4\n"
      "tst r1, r2\n"
      "bne 1f\n"
      "mrs r0, msp\n"
      "b 2f\n"
      "1:\n"
      "mrs r0, psp\n"
      "2:\n"
#if CM_V8M_MAIN
      "movs r2, #0\n"
      "msr msplim, r2\n"
#endif
      "ldr r2, =cortexm_fault_stack + %c0\n"
      "mov sp, r2\n"
      "ldr r2, =fault_report\n"
      "bx r2\n" ::"i"(sizeof cortexm_fault_stack));
}

#if CM_BASELINE
/* No hardware divide: libgcc's division helpers call these on a zero divisor
 * (returning 0 by default). Report it like the DIVBYZERO UsageFault of the
 * bigger cores. */
__attribute__((noreturn)) static void div0_report(void) {
  uint32_t lr;
  __asm__ volatile("mov %0, lr" : "=r"(lr));
  fw_puts("\nFAULT: integer division by zero (libgcc division helper)\n");
  fw_hex("FAULT: LR=", lr);
  fw_puts("\nFAULT: DIVBYZERO: integer division by zero\n");
  plat_exit(CORTEXM_FAULT_EXIT_CODE);
}
int __aeabi_idiv0(int r) {
  (void)r;
  div0_report();
}
long long __aeabi_ldiv0(long long r) {
  (void)r;
  div0_report();
}
#endif

/* ---------------------------------------------------------------- vectors */

/* 16 system entries + up to 96 external interrupts: the NPU's (board.toml
 * [npu].irq) goes to the platform's handler, any other is unexpected and
 * reported like a fault. */
#define N_VECTORS (16 + 96)
typedef void (*vector_fn)(void);
#if defined(BOARD_NPU_IRQ) && BOARD_NPU_IRQ >= 0
_Static_assert(16 + BOARD_NPU_IRQ < N_VECTORS, "board.toml [npu].irq is beyond the vector table");
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init" /* one entry of the fault range is the NPU's */
__attribute__((section(".vectors"), used, aligned(512))) const uint32_t __vector_table[N_VECTORS] = {
    [0] = (uint32_t)(uintptr_t)__stack_top__,
    [1] = (uint32_t)(uintptr_t)Reset_Handler,
    [2 ... 14] = (uint32_t)(uintptr_t)Fault_Handler,
    [15] = (uint32_t)(uintptr_t)SysTick_Handler,
    [16 ... N_VECTORS - 1] = (uint32_t)(uintptr_t)Fault_Handler,
#if defined(BOARD_NPU_IRQ) && BOARD_NPU_IRQ >= 0
    [16 + BOARD_NPU_IRQ] = (uint32_t)(uintptr_t)Npu_IRQHandler,
#endif
};
#pragma GCC diagnostic pop

/* ---------------------------------------------------------------- libc heap */

/* newlib allocates a little on its own (e.g. float formatting in snprintf);
 * it gets a fixed region ([link].libc_heap_size). The runtime never mallocs. */
void *_sbrk(ptrdiff_t incr) {
  static uint8_t *brk = __heap_start__;
  if (incr < 0 || (size_t)(__heap_end__ - brk) < (size_t)incr) return (void *)-1;
  uint8_t *old = brk;
  brk += incr;
  return old;
}
