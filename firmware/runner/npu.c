/* Ethos-U for the runner: the backend is registered up front; the device is
 * brought up by the first delegate call's init, so only programs with a
 * delegate touch it (eml_load builds the method in one call). */
#include <inttypes.h>

#include "et_fmt.h"
#include "backend.h"
#include "ethosu_backend.h"
#include "platform.h"
#include "runner_npu.h"
#include "runtime.h"

static ethosu_device g_npu;
static char g_npu_error[ET_MSG_CAP];
static const et_backend *g_ethosu; /* the driver's backend, which g_lazy wraps */
static et_backend g_lazy;
static bool g_up;

static void npu_up(void) {
  plat_npu info;
  if (plat_npu_info(&info) != 0) {
    et_snprintf(g_npu_error, sizeof g_npu_error,
             "this board has no Ethos-U NPU ([npu] in its board.toml): run Ethos-U programs on a board with one");
    return;
  }
  ethosu_hal hal = {
      .base = info.base, .irq = info.irq, .secure = info.secure != 0, .privileged = info.privileged != 0,
      .timeout_us = info.timeout_us, .time_us = plat_time_us, .irq_save = plat_irq_save, .irq_restore = plat_irq_restore,
      .wait_for_interrupt = plat_wait_for_interrupt, .irq_attach = plat_irq_attach, .dcache_clean = plat_dcache_clean,
      .dcache_invalidate = plat_dcache_invalidate};
  if (ethosu_init(&g_npu, &hal, g_npu_error, sizeof g_npu_error) == ET_OK) g_npu_error[0] = 0;
}

static et_status lazy_init(void *mem, size_t bytes, const uint8_t *data, size_t len, et_value *const *args, uint32_t nargs,
                           char *msg, size_t cap) {
  if (!g_up) npu_up(), g_up = true;
  return g_ethosu->init(mem, bytes, data, len, args, nargs, msg, cap);
}

int runner_npu_register(bool load_only) {
#ifdef FW_LOAD_CHECK
  if (load_only) return et_backend_register(ethosu_backend(NULL, g_npu_error)) == ET_OK ? 0 : -1;
#else
  (void)load_only;
#endif
  g_ethosu = ethosu_backend(&g_npu, g_npu_error);
  g_lazy = *g_ethosu;
  g_lazy.init = lazy_init;
  return et_backend_register(&g_lazy) == ET_OK ? 0 : -1;
}

void runner_npu_print(void) {
  if (g_npu.invocations == 0) return;
  char name[32];
  ethosu_config_name(g_npu.config, name, sizeof name);
  plat_printf(", \"npu\": {\"config\": \"%s\", \"id\": \"0x%08" PRIx32 "\", \"invocations\": %" PRIu32
              ", \"pmu_cycles\": %" PRIu64 ", \"pmu_events\": [%" PRIu32 ", %" PRIu32 ", %" PRIu32 ", %" PRIu32 "]}",
              name, g_npu.id, g_npu.invocations, g_npu.total.cycles, g_npu.total.events[0], g_npu.total.events[1],
              g_npu.total.events[2], g_npu.total.events[3]);
}
