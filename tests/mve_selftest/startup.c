/* Start-up for the MVE self-test image (the same recipe as boards/common/cortexm):
 * enable the FPU/MVE coprocessors, copy .data, zero .bss, open the
 * semihosting handles, run constructors, then exit(main()). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern uint32_t __data_load, __data_start, __data_end, __bss_start__, __bss_end__, __stack_top;
extern int main(void);
extern void initialise_monitor_handles(void);
extern void __libc_init_array(void);

void _init(void) {}
void _fini(void) {}

void Reset_Handler(void) {
  *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: CP10/CP11 full access */
  __asm volatile("dsb\n isb");
  memcpy(&__data_start, &__data_load, (size_t)((char *)&__data_end - (char *)&__data_start));
  memset(&__bss_start__, 0, (size_t)((char *)&__bss_end__ - (char *)&__bss_start__));
  initialise_monitor_handles();
  __libc_init_array();
  exit(main());
}

static void Fault_Handler(void) {
  for (;;) {
  }
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))&__stack_top, Reset_Handler, Fault_Handler, Fault_Handler, Fault_Handler,
    Fault_Handler, Fault_Handler, 0, 0, 0, 0, Fault_Handler, 0, 0, Fault_Handler, Fault_Handler,
};
