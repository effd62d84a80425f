/* Registers and constants shared by the Armv8-M board start-up and platform code. */
#ifndef ARMV8M_H
#define ARMV8M_H

#include <stdint.h>

#define REG32(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

#define SCB_ICSR 0xE000ED04u
#define SCB_VTOR 0xE000ED08u
#define SCB_CCR 0xE000ED14u
#define SCB_SHCSR 0xE000ED24u
#define SCB_CFSR 0xE000ED28u
#define SCB_HFSR 0xE000ED2Cu
#define SCB_MMFAR 0xE000ED34u
#define SCB_BFAR 0xE000ED38u
#define SCB_SFSR 0xE000EDE4u
#define SCB_DEMCR 0xE000EDFCu

#define SHCSR_MEMFAULTENA (1u << 16)
#define SHCSR_BUSFAULTENA (1u << 17)
#define SHCSR_USGFAULTENA (1u << 18)
#define SHCSR_SECUREFAULTENA (1u << 19)
#define CCR_DIV_0_TRP (1u << 4)
#define ICSR_PENDSTSET (1u << 26)
#define DEMCR_TRCENA (1u << 24)

#define NVIC_ISER(n) (0xE000E100u + 4u * (n))
#define NVIC_ICPR(n) (0xE000E280u + 4u * (n))
#define SCB_DCIMVAC 0xE000EF5Cu /* invalidate data cache line by address */
#define SCB_DCCMVAC 0xE000EF68u /* clean data cache line by address */
#define CCR_DC (1u << 16)       /* data cache enabled */
#define DCACHE_LINE 32u

#define SYST_CSR 0xE000E010u
#define SYST_RVR 0xE000E014u
#define SYST_CVR 0xE000E018u

#define DWT_CTRL 0xE0001000u
#define DWT_CYCCNT 0xE0001004u
#define DWT_CTRL_CYCCNTENA (1u << 0)
#define DWT_CTRL_NOCYCCNT (1u << 25)

/* Value written over the free stack at reset. */
#define ARMV8M_STACK_PAINT 0xC5A5C5A5u
/* Exit status after a fault report (QEMU's exit status with SYS_EXIT_EXTENDED). */
#define ARMV8M_FAULT_EXIT_CODE 3

#endif
