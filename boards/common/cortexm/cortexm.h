/* Registers, constants and architecture features shared by the Cortex-M board
 * start-up and platform code (Armv6-M, Armv7-M, Armv7E-M, Armv8-M Mainline,
 * Armv8.1-M Mainline). */
#ifndef CORTEXM_H
#define CORTEXM_H

#include <stdint.h>

/* ---- what the core has, from the compiler's target macros ---- */
#if defined(__ARM_ARCH_6M__) || defined(__ARM_ARCH_8M_BASE__)
/* Baseline: only HardFault (no CFSR/MMFAR/BFAR, no configurable faults), no
 * hardware divide, no IT blocks, no CYCCNT, unaligned accesses always fault. */
#define CM_BASELINE 1
#else
#define CM_BASELINE 0
#endif
#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
/* Armv8-M Mainline: stack limit registers (MSPLIM) and SecureFault. */
#define CM_V8M_MAIN 1
#else
#define CM_V8M_MAIN 0
#endif
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
/* Code may use the FPU or MVE registers: CP10/CP11 must be on before any C runs. */
#define CM_ENABLE_CP10_CP11 1
#else
#define CM_ENABLE_CP10_CP11 0
#endif

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
#define CCR_UNALIGN_TRP (1u << 3)
#define CCR_DIV_0_TRP (1u << 4)
#define ICSR_PENDSTSET (1u << 26)
#define DEMCR_TRCENA (1u << 24)

/* PMSAv7 MPU (Armv7-M; the optional Armv6-M MPU has the same registers) */
#define MPU_TYPE 0xE000ED90u
#define MPU_CTRL 0xE000ED94u
#define MPU_RNR 0xE000ED98u
#define MPU_RBAR 0xE000ED9Cu
#define MPU_RASR 0xE000EDA0u
#define MPU_CTRL_ENABLE (1u << 0)
#define MPU_CTRL_PRIVDEFENA (1u << 2)

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
#define CORTEXM_STACK_PAINT 0xC5A5C5A5u
/* Exit status after a fault report (QEMU's exit status with SYS_EXIT_EXTENDED). */
#define CORTEXM_FAULT_EXIT_CODE 3
/* Armv7-M stack guard: a read-only MPU region of this many bytes at the
 * bottom of the stack (cores without MSPLIM). */
#define CORTEXM_STACK_GUARD 1024u
uintptr_t cortexm_stack_floor(void); /* startup.c: above the stack guard */

#endif
