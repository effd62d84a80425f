/* Host platform for the runner:
 *   runner MODEL.bpte [--save-outputs DIR] [--etdump PATH [--debug-buffer PATH]] [--regions BYTES[,BYTES...]] [--load-only] | runner --list-ops
 * Regions default to one 64 MiB buffer; --regions lets tests shrink them.
 * plat_counter is CLOCK_MONOTONIC in ns (unit "ns"): wall time, so it varies
 * from run to run, unlike the instruction counts of the QEMU boards.
 * Stack use is measured by painting 1 MiB below main's frame at start-up and
 * finding the deepest overwritten byte at the end. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "platform.h"

#define DEFAULT_REGION_BYTES (64u << 20)
#define MAX_REGIONS 4
#define PAINT_BYTES (1u << 20)
#define PAINT 0xA5u

static uint8_t *g_model;
static size_t g_model_size;
static const char *g_save_dir;
static const char *g_etdump_path, *g_debug_path;
static int g_load_only;
static int g_list_ops;
static plat_region g_regions[MAX_REGIONS];
static size_t g_nregions;
static char g_region_names[MAX_REGIONS][16];
static uintptr_t g_stack_top, g_stack_low;

static void die(const char *what, const char *detail) {
  /* Same one-line JSON contract as the runner's own errors. */
  printf("{\"status\": \"error\", \"error\": \"%s%s\"}\n", what, detail ? detail : "");
  fflush(stdout);
  exit(2);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_ASAN __attribute__((no_sanitize("address")))
#endif
#endif
#if !defined(NO_ASAN) && defined(__SANITIZE_ADDRESS__)
#define NO_ASAN __attribute__((no_sanitize_address))
#endif
#ifndef NO_ASAN
#define NO_ASAN
#endif

static NO_ASAN __attribute__((noinline)) void paint_stack(void) {
  volatile uint8_t buf[PAINT_BYTES];
  for (size_t i = 0; i < PAINT_BYTES; i++) buf[i] = PAINT;
  g_stack_low = (uintptr_t)buf;
}

void plat_stack_repaint(void) { paint_stack(); }

void plat_init(int argc, char **argv) {
  volatile int top;
  g_stack_top = (uintptr_t)&top;
  paint_stack();
  const char *model = NULL, *regions = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--save-outputs") == 0 && i + 1 < argc) g_save_dir = argv[++i];
    else if (strcmp(argv[i], "--etdump") == 0 && i + 1 < argc) g_etdump_path = argv[++i];
    else if (strcmp(argv[i], "--debug-buffer") == 0 && i + 1 < argc) g_debug_path = argv[++i];
    else if (strcmp(argv[i], "--regions") == 0 && i + 1 < argc) regions = argv[++i];
    else if (strcmp(argv[i], "--load-only") == 0) g_load_only = 1;
    else if (strcmp(argv[i], "--list-ops") == 0) g_list_ops = 1;
    else if (argv[i][0] != '-' && model == NULL) model = argv[i];
    else die("usage: runner MODEL.bpte [--save-outputs DIR] [--etdump PATH [--debug-buffer PATH]] [--regions BYTES[,BYTES...]] [--load-only] | runner --list-ops; bad argument ", argv[i]);
  }
  if (g_list_ops) return;
  if (model == NULL) die("usage: runner MODEL.bpte [--save-outputs DIR] [--etdump PATH [--debug-buffer PATH]] [--regions BYTES[,BYTES...]] [--load-only] | runner --list-ops", NULL);

  FILE *f = fopen(model, "rb");
  if (f == NULL) die("cannot open model file ", model);
  if (fseek(f, 0, SEEK_END) != 0) die("cannot read model file ", model);
  long n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) die("cannot read model file ", model);
  g_model_size = (size_t)n;
  /* 64-byte aligned, so the program's aligned constants stay aligned. */
  g_model = aligned_alloc(64, (g_model_size + 63) & ~(size_t)63 ? (g_model_size + 63) & ~(size_t)63 : 64);
  if (g_model == NULL) die("out of memory reading ", model);
  if (fread(g_model, 1, g_model_size, f) != g_model_size) die("cannot read model file ", model);
  fclose(f);

  const char *p = regions;
  do {
    size_t size = DEFAULT_REGION_BYTES;
    if (p) {
      char *end;
      errno = 0;
      unsigned long long v = strtoull(p, &end, 0);
      if (errno || end == p || (*end && *end != ',')) die("bad --regions value: ", regions);
      size = (size_t)v;
      p = *end ? end + 1 : NULL;
    }
    if (g_nregions == MAX_REGIONS) die("too many --regions (max 4)", NULL);
    uint8_t *base = aligned_alloc(64, size ? (size + 63) & ~(size_t)63 : 64);
    if (base == NULL) die("cannot allocate a region of ", regions ? regions : "64 MiB");
    snprintf(g_region_names[g_nregions], sizeof g_region_names[0], "host%zu", g_nregions);
    g_regions[g_nregions] = (plat_region){g_region_names[g_nregions], base, size};
    g_nregions++;
  } while (p);
}

void plat_write(const char *s, size_t n) { fwrite(s, 1, n, stdout); }

uint64_t plat_counter(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *plat_counter_unit(void) { return "ns"; }

int plat_model(const uint8_t **data, size_t *size) {
  if (g_model == NULL) return 1;
  *data = g_model;
  *size = g_model_size;
  return 0;
}

size_t plat_regions(const plat_region **regions) {
  *regions = g_regions;
  return g_nregions;
}

NO_ASAN size_t plat_stack_used(void) {
  if (g_stack_low == 0) return 0;
  const volatile uint8_t *p = (const volatile uint8_t *)g_stack_low;
  size_t i = 0;
  while (i < PAINT_BYTES && p[i] == PAINT) i++;
  uintptr_t deepest = g_stack_low + i;
  return deepest < g_stack_top ? (size_t)(g_stack_top - deepest) : 0;
}

void plat_save_output(unsigned index, const void *data, size_t nbytes) {
  if (g_save_dir == NULL) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/output_%u.bin", g_save_dir, index);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, nbytes, f) != nbytes) die("cannot write ", path);
  fclose(f);
}

int plat_etdump_wanted(void) { return g_etdump_path != NULL; }

int plat_load_only(void) { return g_load_only; }

int plat_list_ops(void) { return g_list_ops; }

static void write_file(const char *path, const void *data, size_t nbytes) {
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, nbytes, f) != nbytes) die("cannot write ", path);
  fclose(f);
}

void plat_save_etdump(const void *data, size_t nbytes) {
  if (g_etdump_path != NULL) write_file(g_etdump_path, data, nbytes);
}

int plat_debug_wanted(void) { return g_etdump_path != NULL && g_debug_path != NULL; }

void plat_save_debug(const void *data, size_t nbytes) {
  if (plat_debug_wanted()) write_file(g_debug_path, data, nbytes);
}

void plat_exit(int code) {
  fflush(stdout);
  exit(code);
}

/* ---- driver services: the host has no NPU ---- */

int plat_npu_info(plat_npu *npu) {
  (void)npu;
  return -1;
}

uint64_t plat_time_us(void) { return plat_counter() / 1000u; }
uint32_t plat_irq_save(void) { return 0; }
void plat_irq_restore(uint32_t state) { (void)state; }
void plat_wait_for_interrupt(uint64_t until_us) { (void)until_us; }

int plat_irq_attach(int irq, void (*handler)(void *), void *arg) {
  (void)irq, (void)handler, (void)arg;
  return -1;
}

void plat_dcache_clean(const void *p, size_t n) { (void)p, (void)n; }
void plat_dcache_invalidate(void *p, size_t n) { (void)p, (void)n; }
