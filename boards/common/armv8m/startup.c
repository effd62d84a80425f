/* Start-up code for the Armv8-M boards: vector table, reset, fault reports.
 *
 * Reset: enable the FPU/MVE (CP10/CP11), set the main stack limit (MSPLIM, so a
 * stack overflow is a UsageFault instead of silent corruption), copy .data,
 * zero .bss, paint the stack for the high-water mark, enable the separate
 * fault exceptions, run constructors, then plat_exit(main()).
 *
 * Faults print which fault, PC/LR/xPSR from the stacked frame and the fault
 * status registers, then exit with BOARD_FAULT_EXIT_CODE. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "armv8m.h"
#include "board_config.h"
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

/* ---------------------------------------------------------------- reset */

__attribute__((noreturn, used)) static void reset_c(void) {
  __asm__ volatile("msr msplim, %0" ::"r"(__stack_limit__));

  const uint32_t *src = __data_load__;
  for (uint32_t *dst = __data_start__; dst < __data_end__;) *dst++ = *src++;
  for (uint32_t *dst = __bss_start__; dst < __bss_end__;) *dst++ = 0;

  /* Paint the unused stack; plat_stack_used() finds the deepest overwritten word. */
  uintptr_t sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  for (volatile uint32_t *p = __stack_limit__; (uintptr_t)p < sp - 16u; p++) *p = ARMV8M_STACK_PAINT;

  extern const uint32_t __vector_table[];
  REG32(SCB_VTOR) = (uint32_t)(uintptr_t)__vector_table;
  REG32(SCB_SHCSR) |= SHCSR_MEMFAULTENA | SHCSR_BUSFAULTENA | SHCSR_USGFAULTENA | SHCSR_SECUREFAULTENA;
  REG32(SCB_CCR) |= CCR_DIV_0_TRP; /* integer division by zero faults instead of giving 0 */
  __asm__ volatile("dsb\n isb" ::: "memory");

  __libc_init_array();
  static char prog[] = "runner";
  static char *argv[] = {prog, NULL};
  plat_exit(main(1, argv));
}

/* Naked: nothing may run before CP10/CP11 are on, because the compiler is
 * free to use FP/MVE registers in any C function (even for memcpy). */
__attribute__((naked, noreturn)) void Reset_Handler(void) {
  __asm__ volatile(
      "ldr r0, =0xE000ED88\n" /* CPACR */
      "ldr r1, [r0]\n"
      "orr r1, r1, #(0xF << 20)\n"
      "str r1, [r0]\n"
      "dsb\n"
      "isb\n"
      "b reset_c\n");
}

/* ---------------------------------------------------------------- faults */

/* A small stack of its own: after a stack overflow the main stack is full. */
uint64_t armv8m_fault_stack[128];

static const char *const exc_names[] = {
    [2] = "NMI",         [3] = "HardFault",  [4] = "MemManage fault", [5] = "BusFault",
    [6] = "UsageFault",  [7] = "SecureFault", [11] = "SVCall",          [12] = "DebugMonitor",
    [14] = "PendSV",
};

static const struct {
  uint32_t bit;
  const char *text;
} cfsr_bits[] = {
    {1u << 0, "IACCVIOL: instruction fetch from a protected address"},
    {1u << 1, "DACCVIOL: data access to a protected address"},
    {1u << 3, "MUNSTKERR"},
    {1u << 4, "MSTKERR"},
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

static void fw_puts(const char *s) { plat_write(s, strlen(s)); }

static void fw_hex(const char *label, uint32_t v) {
  char buf[24];
  size_t n = 0;
  while (*label) buf[n++] = *label++;
  buf[n++] = '0';
  buf[n++] = 'x';
  for (int i = 7; i >= 0; i--) buf[n++] = "0123456789abcdef"[(v >> (4 * i)) & 0xFu];
  plat_write(buf, n);
}

__attribute__((noreturn, used)) static void fault_report(const uint32_t *frame, uint32_t exc_return) {
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  uint32_t exc = ipsr & 0x1FFu;
  uint32_t cfsr = REG32(SCB_CFSR), hfsr = REG32(SCB_HFSR);
  const char *name = exc < sizeof exc_names / sizeof exc_names[0] && exc_names[exc] ? exc_names[exc] : "unexpected exception";

  fw_puts("\nFAULT: ");
  fw_puts(name);
  fw_hex(" (exception ", exc);
  fw_puts(")\n");
  /* The stacked frame: r0 r1 r2 r3 r12 lr pc xpsr. With STKOF it may be
   * partial, the registers are still worth a look. */
  fw_hex("FAULT: PC=", frame[6]);
  fw_hex(" LR=", frame[5]);
  fw_hex(" xPSR=", frame[7]);
  fw_hex(" SP=", (uint32_t)(uintptr_t)frame);
  fw_hex(" EXC_RETURN=", exc_return);
  fw_puts("\n");
  fw_hex("FAULT: CFSR=", cfsr);
  fw_hex(" HFSR=", hfsr);
  if (cfsr & (1u << 7)) fw_hex(" MMFAR=", REG32(SCB_MMFAR));
  if (cfsr & (1u << 15)) fw_hex(" BFAR=", REG32(SCB_BFAR));
  if (exc == 7) fw_hex(" SFSR=", REG32(SCB_SFSR));
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
  plat_exit(ARMV8M_FAULT_EXIT_CODE);
}

/* Picks the stack the frame was pushed on (EXC_RETURN bit 2), moves to the
 * fault stack with the stack limit off, and reports. */
__attribute__((naked)) void Fault_Handler(void) {
  __asm__ volatile(
      "tst lr, #4\n"
      "ite eq\n"
      "mrseq r0, msp\n"
      "mrsne r0, psp\n"
      "mov r1, lr\n"
      "movs r2, #0\n"
      "msr msplim, r2\n"
      "ldr r2, =armv8m_fault_stack + %c0\n"
      "mov sp, r2\n"
      "b fault_report\n" ::"i"(sizeof armv8m_fault_stack));
}

/* ---------------------------------------------------------------- vectors */

/* 16 system entries + the SSE-300/SSE-320 external interrupts: the NPU's
 * (board.toml [npu].irq) goes to the platform's handler, any other is
 * unexpected and reported like a fault. */
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
