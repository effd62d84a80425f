/* NPU register accessors: see ethosu_io.h.
 *
 * Arm (Thumb-2): fixed sequences with global labels that mark the access,
 *   ethosu_reg_read:        mov r1, r0; ldr r0, [r1]; <ethosu_reg_read_done> bx lr
 *   ethosu_reg_write:       dsb; <ethosu_reg_write_store> str r1, [r0]; <ethosu_reg_write_done> dsb; bx lr
 * so at *_done the address is in r1 (read) or r0 (write) and the value in r0
 * (read) or r1 (write). Other hosts: plain volatile accesses. */
#include "ethosu_io.h"

#if defined(__arm__) && defined(__thumb2__)

__attribute__((naked, noinline, used)) uint32_t ethosu_reg_read(uintptr_t addr) {
  (void)addr;
  __asm__ volatile(
      "mov r1, r0\n"
      "ldr r0, [r1]\n"
      ".global ethosu_reg_read_done\n"
      ".type ethosu_reg_read_done, %function\n"
      "ethosu_reg_read_done:\n"
      "bx lr\n");
}

__attribute__((naked, noinline, used)) void ethosu_reg_write(uintptr_t addr, uint32_t value) {
  (void)addr;
  (void)value;
  __asm__ volatile(
      "dsb\n"
      ".global ethosu_reg_write_store\n"
      ".type ethosu_reg_write_store, %function\n"
      "ethosu_reg_write_store:\n"
      "str r1, [r0]\n"
      ".global ethosu_reg_write_done\n"
      ".type ethosu_reg_write_done, %function\n"
      "ethosu_reg_write_done:\n"
      "dsb\n"
      "bx lr\n");
}

#else

uint32_t ethosu_reg_read(uintptr_t addr) { return *(volatile const uint32_t *)addr; }

void ethosu_reg_write(uintptr_t addr, uint32_t value) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  *(volatile uint32_t *)addr = value;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

#endif
