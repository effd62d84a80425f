/* Semihosting wrappers; see semihost.h. */
#include "semihost.h"

#include <string.h>

int sh_open(const char *path, int mode) {
  uintptr_t blk[3] = {(uintptr_t)path, (uintptr_t)mode, strlen(path)};
  return (int)sh_call(SH_SYS_OPEN, blk);
}

int sh_close(int handle) {
  uintptr_t blk[1] = {(uintptr_t)handle};
  return (int)sh_call(SH_SYS_CLOSE, blk);
}

size_t sh_write(int handle, const void *data, size_t n) {
  uintptr_t blk[3] = {(uintptr_t)handle, (uintptr_t)data, n};
  return (size_t)sh_call(SH_SYS_WRITE, blk);
}

size_t sh_read(int handle, void *data, size_t n) {
  uintptr_t blk[3] = {(uintptr_t)handle, (uintptr_t)data, n};
  return (size_t)sh_call(SH_SYS_READ, blk);
}

long sh_flen(int handle) {
  uintptr_t blk[1] = {(uintptr_t)handle};
  return (long)sh_call(SH_SYS_FLEN, blk);
}

/* SYS_EXIT_EXTENDED carries the status to the simulator's own exit status;
 * it is optional (feature bit 0 of the ":semihosting-features" file), so
 * check for it and fall back to SYS_EXIT, which only tells success from
 * failure. */
static int sh_has_exit_extended(void) {
  int h = sh_open(":semihosting-features", SH_MODE_RB);
  if (h < 0) return 0;
  unsigned char buf[5] = {0};
  long len = sh_flen(h);
  int ok = 0;
  if (len >= 5 && sh_read(h, buf, 5) == 0)
    ok = buf[0] == 'S' && buf[1] == 'H' && buf[2] == 'F' && buf[3] == 'B' && (buf[4] & 1u);
  sh_close(h);
  return ok;
}

void sh_exit(int code) {
  if (sh_has_exit_extended()) {
    uintptr_t blk[2] = {SH_ADP_STOPPED_APPLICATION_EXIT, (uintptr_t)code};
    sh_call(SH_SYS_EXIT_EXTENDED, blk);
  } else {
    /* On AArch32 SYS_EXIT takes the reason code itself, not a block. */
    sh_call(SH_SYS_EXIT, (const void *)(uintptr_t)(code == 0 ? SH_ADP_STOPPED_APPLICATION_EXIT
                                                                : SH_ADP_STOPPED_RUNTIME_ERROR));
  }
  for (;;) __asm__ volatile("wfi");
}
