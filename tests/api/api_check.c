/* Host check of the emlkit C API (tests/test_api.py drives it):
 *   api_check MODEL.pte MEMORY_BYTES OUT_DIR MODEL.bpte INPUT_0.bin [INPUT_1.bin ...]
 * Loads the program with one block of MEMORY_BYTES, reports every input and
 * output (dtype, shape, dim order, bytes, scale, zero point), runs twice,
 * writes OUT_DIR/output_<i>.bin and OUT_DIR/etdump.etdp, and exercises the
 * error paths; then loads the bundled program and runs and compares each of
 * its test cases, with every call's output captured (OUT_DIR/debug.bin).
 * Prints one JSON object; exit 0 when every call behaved. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emlkit.h"

static uint64_t clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  /* 16-byte aligned, as a program in flash would be */
  void *p = aligned_alloc(16, ((size_t)len + 15u) & ~(size_t)15u);
  if (p && fread(p, 1, (size_t)len, f) != (size_t)len) free(p), p = NULL;
  fclose(f);
  *n = (size_t)len;
  return p;
}

static int write_file(const char *dir, const char *name, const void *p, size_t n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(p, 1, n, f);
  fclose(f);
  return w == n ? 0 : -1;
}

static void print_info(const eml_tensor_info *t) {
  printf("{\"dtype\": %d, \"shape\": [", (int)t->dtype);
  for (uint32_t d = 0; d < t->ndim; d++) printf("%s%" PRId32, d ? ", " : "", t->shape[d]);
  printf("], \"dim_order\": [");
  for (uint32_t d = 0; d < t->ndim; d++) printf("%s%u", d ? ", " : "", t->dim_order[d]);
  printf("], \"nbytes\": %zu, \"quantized\": %s, \"scale\": %.17g, \"zero_point\": %" PRId32 "}", t->nbytes,
         t->quantized ? "true" : "false", t->scale, t->zero_point);
}

static int g_bad;
#define EXPECT(call, want)                                                                       \
  do {                                                                                           \
    eml_status st_ = (call);                                                                     \
    if (st_ != (want)) {                                                                         \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s: %s\n", __FILE__, __LINE__, #call,   \
              eml_status_name(st_), eml_status_name(want), eml_last_error(&ctx));                \
      g_bad = 1;                                                                                 \
    }                                                                                            \
  } while (0)

static eml_context ctx;

/* Statuses (and messages) of the calls that must be refused, printed last under "checks". */
typedef struct {
  eml_status before_init, empty_cfg, before_load, tiny_load, corrupt, wrong_size, no_such_input, no_such_output,
      no_cases;
  char empty_cfg_msg[256], tiny_msg[256];
} refusals;

/* Calls out of order and bad configurations are refused with a status. */
static void early_refusals(refusals *r, const void *pte, size_t pte_len, uint8_t *mem) {
  r->before_init = eml_run(&ctx);
  eml_config bad = {0};
  r->empty_cfg = eml_init(&ctx, &bad);
  snprintf(r->empty_cfg_msg, sizeof r->empty_cfg_msg, "%s", eml_last_error(&ctx));
  eml_memory tiny_mem = {mem, 256};
  eml_config tiny = {.memory = &tiny_mem, .n_memory = 1};
  EXPECT(eml_init(&ctx, &tiny), EML_OK);
  r->before_load = eml_run(&ctx);
  r->tiny_load = eml_load(&ctx, pte, pte_len);
  snprintf(r->tiny_msg, sizeof r->tiny_msg, "%s", eml_last_error(&ctx));
  r->corrupt = eml_load(&ctx, (const uint8_t *)pte + 8, pte_len - 8);
}

/* Every input's and output's description; INPUTS[i] read from FILES[i] (kept until exit: an input the program did
 * not plan is used in place). */
static void describe_io(uint32_t nin, uint32_t nout, char **files, int nfiles, void *in_data[8], size_t in_len[8]) {
  eml_tensor_info info;
  printf("{\"inputs\": [");
  for (uint32_t i = 0; i < nin; i++) {
    EXPECT(eml_input_info(&ctx, i, &info), EML_OK);
    printf("%s", i ? ", " : "");
    print_info(&info);
    if (i < 8 && (int)i < nfiles) in_data[i] = read_file(files[i], &in_len[i]);
  }
  printf("], \"outputs\": [");
  for (uint32_t i = 0; i < nout; i++) {
    EXPECT(eml_output_info(&ctx, i, &info), EML_OK);
    printf("%s", i ? ", " : "");
    print_info(&info);
  }
  printf("]");
}

/* The program: described, run twice, its outputs, profile and ETDump written to OUT_DIR. */
static void run_program(refusals *r, const void *pte, size_t pte_len, eml_memory *m, const char *out_dir,
                        char **files, int nfiles) {
  eml_config cfg = {.memory = m, .n_memory = 1, .clock = clock_ns, .clock_unit = "ns", .profile_events = 256};
  EXPECT(eml_init(&ctx, &cfg), EML_OK);
  EXPECT(eml_load(&ctx, pte, pte_len), EML_OK);
  uint32_t nin = 0, nout = 0;
  EXPECT(eml_num_inputs(&ctx, &nin), EML_OK);
  EXPECT(eml_num_outputs(&ctx, &nout), EML_OK);
  r->wrong_size = eml_set_input(&ctx, 0, m->base, 3);
  r->no_such_input = eml_set_input(&ctx, nin, m->base, 4);
  eml_tensor_info info;
  r->no_such_output = eml_output_info(&ctx, nout, &info);
  static void *in_data[8];
  static size_t in_len[8];
  describe_io(nin, nout, files, nfiles, in_data, in_len);
  /* Inputs are set before every run: the program may reuse their memory for
   * intermediate tensors, so a run consumes them. */
  for (int run = 0; run < 2; run++) {
    for (uint32_t i = 0; i < nin && i < 8; i++)
      EXPECT(in_data[i] ? eml_set_input(&ctx, i, in_data[i], in_len[i]) : EML_E_INVALID_ARG, EML_OK);
    EXPECT(eml_run(&ctx), EML_OK);
  }
  for (uint32_t i = 0; i < nout; i++) {
    const void *data;
    size_t n;
    char name[32];
    EXPECT(eml_output(&ctx, i, &data, &n), EML_OK);
    snprintf(name, sizeof name, "output_%u.bin", (unsigned)i);
    if (write_file(out_dir, name, data, n) != 0) g_bad = 1;
  }
  uint32_t nprof = 0;
  EXPECT(eml_profile_count(&ctx, &nprof), EML_OK);
  printf(", \"profile\": [");
  for (uint32_t i = 0; i < nprof; i++) {
    eml_op_profile e;
    EXPECT(eml_profile_entry(&ctx, i, &e), EML_OK);
    printf("%s{\"name\": \"%s\", \"calls\": %" PRIu64 ", \"count\": %" PRIu64 ", \"delegate\": %s}", i ? ", " : "", e.name,
           e.calls, e.count, e.delegate ? "true" : "false");
  }
  const uint8_t *etd;
  size_t etd_len = 0;
  EXPECT(eml_etdump(&ctx, &etd, &etd_len), EML_OK);
  if (etd_len && write_file(out_dir, "etdump.etdp", etd, etd_len) != 0) g_bad = 1;
  eml_stats stats;
  EXPECT(eml_stats_get(&ctx, &stats), EML_OK);
  printf("], \"etdump_bytes\": %zu, \"memory_used\": %zu, \"arena_bytes\": %zu, \"profile_runs\": %" PRIu32, etd_len,
         stats.memory_used, stats.arena_bytes, stats.profile_runs);
  r->no_cases = eml_num_cases(&ctx, &nin);
}

/* A reset in the middle: half the cases, eml_reset_state, then every case from the first: each must pass (a
 * streaming program's cases are one sequence from the state after load; other programs pass trivially). */
static uint32_t cases_after_reset(uint32_t ncases, bool after_reset[64]) {
  const uint32_t nreset = ncases < 64 ? ncases : 64;
  uint32_t bout = 0;
  EXPECT(eml_num_outputs(&ctx, &bout), EML_OK);
  eml_output_diff rdiffs[8];
  for (uint32_t c = 0; c < ncases / 2; c++) {
    EXPECT(eml_set_case_inputs(&ctx, c), EML_OK);
    EXPECT(eml_run(&ctx), EML_OK);
  }
  EXPECT(eml_reset_state(&ctx), EML_OK);
  for (uint32_t c = 0; c < nreset; c++) {
    EXPECT(eml_set_case_inputs(&ctx, c), EML_OK);
    EXPECT(eml_run(&ctx), EML_OK);
    EXPECT(eml_compare_case(&ctx, c, rdiffs, 8), EML_OK);
    after_reset[c] = true;
    for (uint32_t i = 0; i < 8 && i < bout; i++) after_reset[c] &= rdiffs[i].pass;
  }
  EXPECT(eml_reset_state(&ctx), EML_OK); /* the cases below run from the start again */
  return nreset;
}

/* The bundled program: every test case run and compared; the first run's calls captured. */
static void run_bundle(const void *bpte, size_t bpte_len, eml_memory *m, const char *out_dir) {
  eml_config bcfg = {.memory = m, .n_memory = 1, .clock = clock_ns, .clock_unit = "ns"};
  EXPECT(eml_init(&ctx, &bcfg), EML_OK);
  EXPECT(eml_load_bundled(&ctx, bpte, bpte_len), EML_OK);
  uint32_t ncases = 0;
  EXPECT(eml_num_cases(&ctx, &ncases), EML_OK);
  eml_plan plan;
  EXPECT(eml_plan_get(&ctx, &plan), EML_OK);
  bool after_reset[64];
  const uint32_t nreset = cases_after_reset(ncases, after_reset);
  EXPECT(eml_record_runs(&ctx, ncases, true), EML_OK);
  printf(", \"bundle\": {\"cases\": %" PRIu32 ", \"after_reset\": [", ncases);
  for (uint32_t c = 0; c < nreset; c++) printf("%s%s", c ? ", " : "", after_reset[c] ? "true" : "false");
  printf("], \"plan_arenas\": [");
  for (uint32_t k = 0; k < plan.n_arenas; k++) printf("%s%" PRIu64, k ? ", " : "", plan.arena_bytes[k]);
  printf("], \"runtime_bytes\": %zu, \"prepared_at_load\": %s, \"diffs\": [", plan.runtime_bytes,
         plan.prepared_at_load ? "true" : "false");
  eml_output_diff diffs[8];
  for (uint32_t c = 0; c < ncases; c++) {
    EXPECT(eml_set_case_inputs(&ctx, c), EML_OK);
    EXPECT(eml_run(&ctx), EML_OK);
    EXPECT(eml_compare_case(&ctx, c, diffs, 8), EML_OK);
    printf("%s{\"max_steps\": %" PRId64 ", \"pass\": %s}", c ? ", " : "", diffs[0].max_steps, diffs[0].pass ? "true" : "false");
  }
  eml_status few_diffs = eml_compare_case(&ctx, 0, diffs, 0);
  eml_status no_such_case = eml_set_case_inputs(&ctx, ncases);
  const uint8_t *dbg, *etd;
  size_t dbg_len = 0, etd_len = 0;
  uint32_t missed = 0;
  EXPECT(eml_debug_outputs(&ctx, &dbg, &dbg_len, &missed), EML_OK);
  if (dbg_len && write_file(out_dir, "debug.bin", dbg, dbg_len) != 0) g_bad = 1;
  EXPECT(eml_etdump(&ctx, &etd, &etd_len), EML_OK);
  if (etd_len && write_file(out_dir, "bundle_etdump.etdp", etd, etd_len) != 0) g_bad = 1;
  void *block;
  eml_status huge = eml_take(&ctx, "a huge block", m->size, &block);
  char huge_msg[256];
  snprintf(huge_msg, sizeof huge_msg, "%s", eml_last_error(&ctx));
  EXPECT(eml_take(&ctx, "a small block", 64, &block), EML_OK);
  uint32_t nops = 0;
  eml_operator_info op;
  while (eml_operator(nops, &op) == EML_OK) nops++;
  printf("], \"debug_bytes\": %zu, \"debug_missed\": %" PRIu32 ", \"etdump_bytes\": %zu, \"operators\": %" PRIu32
         ", \"few_diffs\": \"%s\", \"no_such_case\": \"%s\", \"huge\": \"%s\", \"huge_msg\": \"%s\"}",
         dbg_len, missed, etd_len, nops, eml_status_name(few_diffs), eml_status_name(no_such_case), eml_status_name(huge), huge_msg);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: api_check MODEL.pte MEMORY_BYTES OUT_DIR MODEL.bpte [INPUT.bin...]\n");
    return 2;
  }
  size_t pte_len, bpte_len;
  void *pte = read_file(argv[1], &pte_len);
  size_t mem_bytes = (size_t)strtoull(argv[2], NULL, 0);
  uint8_t *mem = malloc(mem_bytes);
  if (!pte || !mem) {
    fprintf(stderr, "cannot read %s or allocate memory\n", argv[1]);
    return 2;
  }
  static refusals r;
  early_refusals(&r, pte, pte_len, mem);
  eml_memory m = {mem, mem_bytes};
  run_program(&r, pte, pte_len, &m, argv[3], argv + 5, argc - 5);
  void *bpte = read_file(argv[4], &bpte_len);
  if (!bpte) {
    fprintf(stderr, "cannot read %s\n", argv[4]);
    return 2;
  }
  run_bundle(bpte, bpte_len, &m, argv[3]);
  free(bpte);
  printf(", \"checks\": {\"no_cases\": \"%s\", \"before_init\": \"%s\", \"empty_config\": \"%s\", \"empty_config_msg\": \"%s\", "
         "\"before_load\": \"%s\", \"tiny_memory\": \"%s\", \"tiny_memory_msg\": \"%s\", \"corrupt\": \"%s\", "
         "\"wrong_size\": \"%s\", \"no_such_input\": \"%s\", \"no_such_output\": \"%s\"}}\n",
         eml_status_name(r.no_cases), eml_status_name(r.before_init), eml_status_name(r.empty_cfg), r.empty_cfg_msg,
         eml_status_name(r.before_load), eml_status_name(r.tiny_load), r.tiny_msg, eml_status_name(r.corrupt),
         eml_status_name(r.wrong_size), eml_status_name(r.no_such_input), eml_status_name(r.no_such_output));
  free(pte);
  free(mem);
  return g_bad;
}
