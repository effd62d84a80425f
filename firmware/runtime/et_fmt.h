/* The firmware's own snprintf: status messages and console lines without the
 * C library's printf, whose float and stdio machinery (dtoa, malloc, FILE
 * buffers) is most of a small image.
 *
 * Conversions: d i u x X o c s p % with flags - 0 + space #, width and
 * precision (numbers or *), lengths hh h l ll z j t. Floats (e f g E G a):
 * decimal only when built with ET_FMT_FLOAT (CMake FW_FMT_FLOAT, or
 * EMLKIT_FMT_FLOAT for the library), to about 15 significant digits (double
 * arithmetic, not a correctly rounded conversion); without it every float
 * conversion prints the exact value in C99 hex-float form (like %a).
 * Returns the length the full output has, as C's snprintf does; writes at
 * most cap bytes including the terminating NUL. */
#ifndef ET_FMT_H
#define ET_FMT_H

#include <stdarg.h>
#include <stddef.h>

int et_vsnprintf(char *buf, size_t cap, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
int et_snprintf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
