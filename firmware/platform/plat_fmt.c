/* Formatted console output over plat_write, for the applications on top of
 * platform.h (the runner, an exported project's main.c). Lines longer than
 * the buffer are cut. */
#include <stdarg.h>
#include <stddef.h>

#include "et_fmt.h"
#include "platform.h"

void plat_printf(const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  int n = et_vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) plat_write(buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}
