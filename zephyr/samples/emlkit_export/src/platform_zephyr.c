/* The platform functions an exported main.c calls (board/platform.h of the
 * export), on Zephyr: console through printk, the counter from Zephyr's
 * hardware cycle counter, one static block of RAM for the model. No NPU: the
 * sample's CMakeLists refuses exports of Ethos-U programs. */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#include "platform.h"

#ifndef EMLKIT_SAMPLE_MEMORY
#define EMLKIT_SAMPLE_MEMORY (256u * 1024u)
#endif

static uint8_t g_memory[EMLKIT_SAMPLE_MEMORY] __aligned(16);
static const plat_region g_region = {"ram", g_memory, sizeof g_memory};
static uint32_t g_last;
static uint64_t g_high;

void plat_init(int argc, char **argv) {
  (void)argc;
  (void)argv;
}

void plat_write(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) printk("%c", s[i]);
}

/* k_cycle_get_32 extended to 64 bits; read often enough (every operator) not to miss a wrap. */
uint64_t plat_counter(void) {
  unsigned int key = irq_lock();
  uint32_t c = k_cycle_get_32();
  if (c < g_last) g_high += 1ull << 32;
  g_last = c;
  uint64_t v = g_high | c;
  irq_unlock(key);
  return v;
}

const char *plat_counter_unit(void) { return "zephyr-cycles"; }

size_t plat_regions(const plat_region **regions) {
  *regions = &g_region;
  return 1;
}

size_t plat_stack_used(void) { return 0; /* unknown here */ }
