/* firmware/runtime/et_fmt.c against the host C library's snprintf (tests/test_program_image.py
 * builds it with and without ET_FMT_FLOAT). Prints one line per difference; exit 0 when none. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "et_fmt.h"

static int bad;

/* Same format, same arguments, through both. */
#define SAME(...)                                                                                    \
  do {                                                                                               \
    char a[256], b[256];                                                                             \
    int na = snprintf(a, sizeof a, __VA_ARGS__), nb = et_snprintf(b, sizeof b, __VA_ARGS__);         \
    if (na != nb || strcmp(a, b) != 0) {                                                             \
      printf("differs: %s\n  libc [%s] %d\n  ours [%s] %d\n", #__VA_ARGS__, a, na, b, nb);           \
      bad++;                                                                                         \
    }                                                                                                \
  } while (0)

int main(void) {
  SAME("%d %i %u %x %X %o", -5, 42, 4000000000u, 0xbeef, 0xBEEF, 8);
  SAME("[%5d] [%-5d] [%05d] [%+d] [% d] [%.3d] [%8.3d] [%-8.3d|]", 42, 42, -42, 7, 7, 5, -5, 5);
  SAME("%ld %lu %lld %llu %" PRIu64 " %" PRId64 " %" PRIx32 " %08" PRIx32, -1L, 123456789UL, -9000000000LL,
       18446744073709551615ULL, (uint64_t)1 << 40, (int64_t)-3, (uint32_t)0xabc, (uint32_t)0xabc);
  SAME("%zu %hhd %hd %hu %hhu %jd %td", (size_t)77, 300, 70000, 70000, 300, (intmax_t)-8, (ptrdiff_t)-9);
  SAME("%s|%10s|%-10s|%.2s|%.*s|%c|%%|%5c", "abc", "abc", "abc", "abc", 3, "abcdef", 'z', 'q');
  SAME("%#x %#o %#X %x", 255, 8, 255, 0);
  SAME("%.0d|%.0u|%5.0d|", 0, 0, 0);
  SAME("%*d|%-*d|%.*d", 6, 1, 6, 2, 4, 3);
  SAME("%08x %04x %p", 0x1234u, 0x1fu, (void *)0x1000);
  SAME("%a %a %a %a %A %a", 1.0, -0.1, 0.0, 5e-324, 10.0, 1.0 / 0.0);
#ifdef ET_FMT_FLOAT
  SAME("%.9g %.9g %.9g %.9g %.9g %.9g", 0.0, 0.015625, 1.0, 0.1, 123456789.0, 1e-7);
  SAME("%g %g %g %g %g %g %g", 0.5, 100000.0, 1000000.0, 1e-4, 1e-5, 3.14159265, -2.5);
  SAME("%.3g %.3f %f %e %.2e %E %G", 0.000123456, 2.0 / 3.0, 1.5, 12345.678, -0.000999, 1e100, 1e-20);
  SAME("%.3f %.0f %.1f %10.3f %-10.2f| %+.2f %010.3f", 9.9996, 2.5001, 0.05001, 3.14159, 2.0, 1.0, -3.5);
  SAME("%g %g %g %e", 1.0 / 0.0, -1.0 / 0.0, 0.0, 0.0);
  SAME("%g %.9g %.9g %.9g", 1e300, 1e-300, 0.333333333333, 2.5e-5);
  SAME("%.9g %.9g %.9g", 0.00390625, 0.99999999999, 99999.99999);
#else
  /* Without decimal floats every float conversion prints the exact hex form. */
  {
    char a[128], b[128];
    snprintf(a, sizeof a, "%a|%a|%A", 0.015625, -2.5, 1e100);
    et_snprintf(b, sizeof b, "%g|%f|%E", 0.015625, -2.5, 1e100);
    if (strcmp(a, b) != 0) printf("hex fallback: libc %%a [%s], ours [%s]\n", a, b), bad++;
  }
#endif
  char small[5];
  int n = et_snprintf(small, sizeof small, "%s", "abcdefgh");
  if (n != 8 || strcmp(small, "abcd") != 0) printf("truncation: %d [%s]\n", n, small), bad++;
  n = et_snprintf(NULL, 0, "%d", 12345);
  if (n != 5) printf("size query: %d\n", n), bad++;
  printf("%d differences\n", bad);
  return bad != 0;
}
