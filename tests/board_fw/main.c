/* Board self-test: the "model" loaded at the board's model address is a
 * command word that picks what to exercise, so one image covers every case.
 *   hello   print a JSON line with counter, regions and stack figures
 *   hang    loop forever (the host must kill it at its timeout)
 *   fault   read an unmapped address (BusFault report, non-zero exit)
 *   udf     execute an undefined instruction (UsageFault report)
 *   deep    recurse until the stack limit trips (STKOF report)
 *   save    write output_0.bin / output_1.bin through plat_save_output
 *   unal    load a word from an odd address (faults on Armv6-M, and on the
 *           Armv6-M image's stand-in, where start-up sets CCR.UNALIGN_TRP)
 *   div0    divide by zero through a volatile (DIVBYZERO, or libgcc's
 *           helper on cores without a hardware divide)
 *   exitN   exit with status N (one digit)
 *   long    hello with a 100x longer loop (crosses a SysTick wrap)
 *   (a MVE smoke test runs in hello when built with MVE)                      */
#include <stdio.h>
#include <string.h>

#include "platform.h"
#if defined(__ARM_FEATURE_MVE) && !defined(FW_NO_MVE)
#include <arm_mve.h>
#endif

static void out(const char *s) { plat_write(s, strlen(s)); }

static volatile unsigned sink;
static unsigned recurse(unsigned n) {
  volatile char pad[256];
  pad[0] = (char)n;
  return n == 0 ? pad[0] : recurse(n + 1) + pad[0];
}

static int mve_check(void) {
#if defined(__ARM_FEATURE_MVE) && !defined(FW_NO_MVE)
  int8_t a[16], b[16], r[16];
  for (int i = 0; i < 16; i++) a[i] = (int8_t)(100 + i), b[i] = 100;
  vst1q_s8(r, vqaddq_s8(vld1q_s8(a), vld1q_s8(b))); /* saturates at 127 */
  for (int i = 0; i < 16; i++)
    if (r[i] != 127) return 0;
  return 1;
#else
  return -1;
#endif
}

int main(int argc, char **argv) {
  plat_init(argc, argv);
  const uint8_t *m;
  size_t n;
  if (plat_model(&m, &n) != 0) {
    out("{\"status\": \"error\", \"error\": \"no model\"}\n");
    return 2;
  }
  char cmd[16] = {0};
  memcpy(cmd, m, n < sizeof cmd - 1 ? n : sizeof cmd - 1);
  for (char *c = cmd; *c; c++)
    if (*c == '\n') *c = 0;

  if (!strcmp(cmd, "hang")) {
    out("hanging on purpose\n");
    for (;;) sink++;
  }
  if (!strcmp(cmd, "fault")) return (int)*(volatile uint32_t *)0xE0100000u; /* reserved: BusFault */
  if (!strcmp(cmd, "udf")) __asm__ volatile("udf #7");
  if (!strcmp(cmd, "deep")) sink = recurse(1);
  if (!strcmp(cmd, "unal")) {
    static uint32_t words[2] = {0x11223344u, 0x55667788u};
    volatile uintptr_t addr = (uintptr_t)words + 1u; /* opaque: the compiler must emit one LDR */
    sink = *(volatile uint32_t *)addr;
  }
  if (!strcmp(cmd, "div0")) {
    volatile int num = 7, den = 0;
    sink = (unsigned)(num / den);
  }
  if (!strncmp(cmd, "exit", 4)) return cmd[4] - '0';
  if (!strcmp(cmd, "save")) {
    static const uint8_t a[5] = {1, 2, 3, 4, 5};
    static const float b[2] = {1.5f, -2.0f};
    plat_save_output(0, a, sizeof a);
    plat_save_output(1, b, sizeof b);
  }

  /* hello: a JSON line in the runner's shape, with platform figures. */
  uint64_t t0 = plat_counter();
  unsigned iters = !strcmp(cmd, "long") ? 100u * 1000u * 1000u : 100000u;
  for (volatile unsigned i = 0; i < iters; i++) {
  }
  uint64_t t1 = plat_counter();
  const plat_region *r;
  size_t nr = plat_regions(&r);
  char buf[512];
  int k = snprintf(buf, sizeof buf,
                   "{\"status\": \"pass\", \"cmd\": \"%s\", \"model_bytes\": %u, \"loop_count\": %llu, "
                   "\"unit\": \"%s\", \"mve\": %d, \"float\": %.3f, \"stack_bytes\": %u, \"regions\": [",
                   cmd, (unsigned)n, (unsigned long long)(t1 - t0), plat_counter_unit(), mve_check(),
                   (double)1.25f, (unsigned)plat_stack_used());
  for (size_t i = 0; i < nr && k < (int)sizeof buf - 80; i++)
    k += snprintf(buf + k, sizeof buf - k, "%s{\"name\": \"%s\", \"base\": %lu, \"size\": %lu}", i ? ", " : "",
                  r[i].name, (unsigned long)(uintptr_t)r[i].base, (unsigned long)r[i].size);
  snprintf(buf + k, sizeof buf - k, "]}\n");
  out(buf);
  /* Touch the far end of every region: unmapped memory would fault here. */
  for (size_t i = 0; i < nr; i++) {
    volatile uint32_t *last = (volatile uint32_t *)(r[i].base + r[i].size - 4);
    *last = 0x12345678u;
    if (*last != 0x12345678u) return 4;
  }
  return 0;
}
