/* Arm semihosting calls (BKPT 0xAB on M-profile), used by the platform layer
 * for the console, files on the host and the exit status. Only valid when a
 * debugger or simulator handles semihosting (QEMU -semihosting, FVP
 * cpu0.semihosting-enable=1); on bare hardware BKPT would stop the core. */
#ifndef SEMIHOST_H
#define SEMIHOST_H

#include <stddef.h>
#include <stdint.h>

#define SH_SYS_OPEN 0x01
#define SH_SYS_CLOSE 0x02
#define SH_SYS_WRITE 0x05
#define SH_SYS_READ 0x06
#define SH_SYS_FLEN 0x0C
#define SH_SYS_EXIT 0x18
#define SH_SYS_EXIT_EXTENDED 0x20

#define SH_ADP_STOPPED_APPLICATION_EXIT 0x20026u
#define SH_ADP_STOPPED_RUNTIME_ERROR 0x20023u

/* SYS_OPEN modes (index into fopen's "r","rb","r+","r+b","w","wb",...) */
#define SH_MODE_RB 1
#define SH_MODE_W 4
#define SH_MODE_WB 5

static inline uintptr_t sh_call(uintptr_t op, const void *arg) {
  register uintptr_t r0 __asm__("r0") = op;
  register const void *r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

/* Returns a handle >= 0, or -1. */
int sh_open(const char *path, int mode);
int sh_close(int handle);
/* Returns the number of bytes NOT written (0 on success), as the spec says. */
size_t sh_write(int handle, const void *data, size_t n);
long sh_flen(int handle);
size_t sh_read(int handle, void *data, size_t n);
void sh_exit(int code) __attribute__((noreturn));

#endif
