/* Ethos-U for the runner: the backend is registered up front, the device is
 * initialised only if a delegate needs it. */
#include <inttypes.h>

#include "et_fmt.h"
#include "backend.h"
#include "ethosu_backend.h"
#include "platform.h"
#include "runner_npu.h"
#include "runtime.h"

static ethosu_device g_npu;
static char g_npu_error[ET_MSG_CAP];

et_status runner_npu_register(void) { return et_backend_register(ethosu_backend(&g_npu, g_npu_error)); }

#ifdef FW_LOAD_CHECK
et_status runner_npu_register_load_only(void) { return et_backend_register(ethosu_backend(NULL, g_npu_error)); }
#endif

void runner_npu_init(void) {
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

void runner_npu_print(void) {
  if (g_npu.invocations == 0) return;
  char name[32];
  ethosu_config_name(g_npu.config, name, sizeof name);
  plat_printf(", \"npu\": {\"config\": \"%s\", \"id\": \"0x%08" PRIx32 "\", \"invocations\": %" PRIu32
              ", \"pmu_cycles\": %" PRIu64 ", \"pmu_events\": [%" PRIu32 ", %" PRIu32 ", %" PRIu32 ", %" PRIu32 "]}",
              name, g_npu.id, g_npu.invocations, g_npu.total.cycles, g_npu.total.events[0], g_npu.total.events[1],
              g_npu.total.events[2], g_npu.total.events[3]);
}
