/* The firmware's snprintf (see et_fmt.h). */
#include "et_fmt.h"

#include <stdint.h>
#include <string.h>

typedef struct {
  char *buf;
  size_t cap;
  size_t n; /* length of the full output so far (may pass cap) */
} out_t;

enum { F_LEFT = 1, F_ZERO = 2, F_PLUS = 4, F_SPACE = 8, F_ALT = 16 };

static void put(out_t *o, char c) {
  if (o->n + 1 < o->cap) o->buf[o->n] = c;
  o->n++;
}

static void fill(out_t *o, char c, int k) {
  while (k-- > 0) put(o, c);
}

/* prefix (sign, 0x), `zeros` leading zeros and the body, justified in `width`. */
static void emit(out_t *o, const char *prefix, const char *body, size_t len, int zeros, int width, int flags) {
  size_t plen = strlen(prefix);
  int total = (int)(plen + len) + zeros;
  if (!(flags & (F_LEFT | F_ZERO))) fill(o, ' ', width - total);
  for (size_t i = 0; i < plen; i++) put(o, prefix[i]);
  if ((flags & (F_LEFT | F_ZERO)) == F_ZERO) fill(o, '0', width - total);
  fill(o, '0', zeros);
  for (size_t i = 0; i < len; i++) put(o, body[i]);
  if (flags & F_LEFT) fill(o, ' ', width - total);
}

/* Digits of v in `base`, right-aligned in tmp[0..24); returns the count. 32-bit
 * values take the 32-bit division (no 64-bit division helper on small cores). */
static size_t digits(char tmp[24], uintmax_t v, unsigned base, int upper) {
  const char *dig = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  size_t n = 0;
  if (v <= UINT32_MAX) {
    uint32_t w = (uint32_t)v;
    do tmp[23 - n++] = dig[w % base], w /= base;
    while (w);
  } else {
    do tmp[23 - n++] = dig[v % base], v /= base;
    while (v);
  }
  return n;
}

static void fmt_uint(out_t *o, uintmax_t v, unsigned base, int upper, const char *prefix, int prec, int width,
                     int flags) {
  char tmp[24];
  size_t len = (v == 0 && prec == 0) ? 0 : digits(tmp, v, base, upper);
  int zeros = prec > (int)len ? prec - (int)len : 0;
  if (prec >= 0) flags &= ~F_ZERO; /* C: with a precision the 0 flag is ignored */
  emit(o, prefix, tmp + 24 - len, len, zeros, width, flags);
}

#ifdef ET_FMT_FLOAT
static uint64_t pow10u(int k) {
  uint64_t r = 1;
  while (k-- > 0) r *= 10;
  return r;
}

/* (double)v from two 32-bit halves: cores with a double FPU convert those in
 * hardware, a 64-bit conversion is a C library call. */
static double u64_to_double(uint64_t v) {
  return (double)(uint32_t)(v >> 32) * 4294967296.0 + (double)(uint32_t)v;
}

/* 10^k as a double, without a 64-bit integer to double conversion. */
static double pow10d(int k) {
  double r = 1.0;
  while (k-- > 0) r *= 10.0;
  return r;
}

/* v > 0 finite: scales it into [1, 10) and returns the decimal exponent. */
static int normalize(double *v) {
  int e = 0;
  while (*v >= 1e16) *v /= 1e16, e += 16;
  while (*v >= 10.0) *v /= 10.0, e++;
  while (*v < 1e-16) *v *= 1e16, e -= 16;
  while (*v < 1.0) *v *= 10.0, e--;
  return e;
}

/* The unsigned integer n as exactly `width` digits (zero-padded) at b. */
static size_t put_digits(char *b, uint64_t n, int width) {
  for (int i = width - 1; i >= 0; i--) b[i] = (char)('0' + n % 10), n /= 10;
  return (size_t)width;
}

static int ndigits(uint64_t n) {
  int k = 1;
  while (n >= 10) n /= 10, k++;
  return k;
}

/* %e of v >= 0 with p digits after the point (p <= 16). */
static size_t dec_e(char *b, double v, int p, int upper, int alt) {
  int e = 0;
  uint64_t n = 0;
  if (v > 0) {
    e = normalize(&v);
    n = (uint64_t)(v * pow10d(p) + 0.5);
    if (n >= pow10u(p + 1)) n /= 10, e++;
  }
  size_t k = 0;
  char d[20] = {0}; /* put_digits fills p + 1; zeroed only to quiet -Wmaybe-uninitialized */
  put_digits(d, n, p + 1);
  b[k++] = d[0];
  if (p > 0 || alt) b[k++] = '.';
  for (int i = 1; i <= p; i++) b[k++] = d[i];
  b[k++] = upper ? 'E' : 'e';
  b[k++] = e < 0 ? '-' : '+';
  int ae = e < 0 ? -e : e;
  k += put_digits(b + k, (uint64_t)ae, ae >= 100 ? 3 : 2);
  return k;
}

/* %f of v >= 0 with p digits after the point (p <= 17); %e from 1e18 up. */
static size_t dec_f(char *b, double v, int p, int upper, int alt) {
  if (v >= 1e18) return dec_e(b, v, p > 16 ? 16 : p, upper, alt);
  uint64_t ip = (uint64_t)v;
  uint64_t scale = pow10u(p);
  uint64_t fr = (uint64_t)((v - u64_to_double(ip)) * pow10d(p) + 0.5);
  if (fr >= scale) fr -= scale, ip++;
  size_t k = put_digits(b, ip, ndigits(ip));
  if (p > 0 || alt) b[k++] = '.';
  if (p > 0) k += put_digits(b + k, fr, p);
  return k;
}

/* Decimal e, f or g of v >= 0 finite into b (48 bytes). */
static size_t decimal(char *b, double v, char conv, int prec, int flags) {
  int upper = conv == 'E' || conv == 'G', alt = (flags & F_ALT) != 0;
  if (prec < 0) prec = 6;
  if (conv == 'f' || conv == 'F') return dec_f(b, v, prec > 17 ? 17 : prec, upper, alt);
  if (conv == 'e' || conv == 'E') return dec_e(b, v, prec > 16 ? 16 : prec, upper, alt);
  int p = prec == 0 ? 1 : prec > 17 ? 17 : prec;
  int x = 0; /* the exponent %e would print with p significant digits */
  if (v > 0) {
    double m = v;
    x = normalize(&m);
    if ((uint64_t)(m * pow10d(p - 1) + 0.5) >= pow10u(p)) x++;
  }
  size_t k = (x < p && x >= -4) ? dec_f(b, v, p - 1 - x, upper, alt) : dec_e(b, v, p - 1, upper, alt);
  if (alt) return k;
  /* %g drops trailing zeros of the fraction, and the point if nothing follows it. */
  size_t end = 0;
  while (end < k && b[end] != 'e' && b[end] != 'E') end++;
  size_t cut = end;
  if (memchr(b, '.', end) != NULL) {
    while (cut > 0 && b[cut - 1] == '0') cut--;
    if (cut > 0 && b[cut - 1] == '.') cut--;
  }
  memmove(b + cut, b + end, k - end);
  return k - (end - cut);
}
#endif

/* Floats: decimal with ET_FMT_FLOAT, else the exact value in hex-float form. */
static void fmt_float(out_t *o, double v, char conv, int prec, int width, int flags) {
  int upper = conv == 'E' || conv == 'F' || conv == 'G' || conv == 'A';
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  const char *sign = (bits >> 63) ? "-" : (flags & F_PLUS) ? "+" : (flags & F_SPACE) ? " " : "";
  unsigned e2 = (unsigned)(bits >> 52) & 0x7ffu;
  uint64_t mant = bits & ((UINT64_C(1) << 52) - 1);
  if (e2 == 0x7ffu) {
    emit(o, sign, mant ? (upper ? "NAN" : "nan") : (upper ? "INF" : "inf"), 3, 0, width, flags & ~F_ZERO);
    return;
  }
  char b[48];
  size_t k = 0;
#ifdef ET_FMT_FLOAT
  if (conv != 'a' && conv != 'A') {
    k = decimal(b, (bits >> 63) ? -v : v, conv, prec, flags);
    emit(o, sign, b, k, 0, width, flags);
    return;
  }
#else
  (void)prec;
#endif
  char prefix[4];
  size_t pl = strlen(sign);
  memcpy(prefix, sign, pl);
  prefix[pl++] = '0', prefix[pl++] = upper ? 'X' : 'x', prefix[pl] = 0;
  int e = (e2 == 0) ? (mant ? -1022 : 0) : (int)e2 - 1023;
  b[k++] = e2 ? '1' : '0';
  if (mant) {
    b[k++] = '.';
    for (int s = 48; s >= 0 && (mant & ((UINT64_C(1) << (s + 4)) - 1)); s -= 4)
      b[k++] = (upper ? "0123456789ABCDEF" : "0123456789abcdef")[(mant >> s) & 0xf];
  }
  b[k++] = upper ? 'P' : 'p';
  b[k++] = e < 0 ? '-' : '+';
  char tmp[24];
  size_t n = digits(tmp, (uintmax_t)(e < 0 ? -e : e), 10, 0);
  memcpy(b + k, tmp + 24 - n, n);
  emit(o, prefix, b, k + n, 0, width, flags);
}

/* A conversion's flags, field width, precision (-1: none) and length
 * (-2 hh, -1 h, 0 int, 1 l, 2 ll, 3 z, 4 j, 5 t, 6 L). */
typedef struct {
  int flags, width, prec, len;
} spec_t;

/* Reads the spec after a '%' from *P (left on the conversion character); '*' takes its value from AP. */
static void parse_spec(const char **pp, va_list *ap, spec_t *sp) {
  const char *p = *pp;
  sp->flags = 0, sp->width = 0, sp->prec = -1, sp->len = 0;
  for (;; p++) {
    if (*p == '-') sp->flags |= F_LEFT;
    else if (*p == '0') sp->flags |= F_ZERO;
    else if (*p == '+') sp->flags |= F_PLUS;
    else if (*p == ' ') sp->flags |= F_SPACE;
    else if (*p == '#') sp->flags |= F_ALT;
    else break;
  }
  if (*p == '*') {
    sp->width = va_arg(*ap, int);
    if (sp->width < 0) sp->flags |= F_LEFT, sp->width = -sp->width;
    p++;
  } else {
    while (*p >= '0' && *p <= '9') sp->width = sp->width * 10 + (*p++ - '0');
  }
  if (*p == '.') {
    sp->prec = 0;
    if (*++p == '*') {
      sp->prec = va_arg(*ap, int);
      if (sp->prec < 0) sp->prec = -1;
      p++;
    } else {
      while (*p >= '0' && *p <= '9') sp->prec = sp->prec * 10 + (*p++ - '0');
    }
  }
  if (*p == 'h') sp->len = (p[1] == 'h') ? (p++, -2) : -1, p++;
  else if (*p == 'l') sp->len = (p[1] == 'l') ? (p++, 2) : 1, p++;
  else if (*p == 'z') sp->len = 3, p++;
  else if (*p == 'j') sp->len = 4, p++;
  else if (*p == 't') sp->len = 5, p++;
  else if (*p == 'L') sp->len = 6, p++;
  *pp = p;
}

static intmax_t signed_arg(va_list *ap, int len) {
  switch (len) {
    case 1: return va_arg(*ap, long);
    case 2: return va_arg(*ap, long long);
    case 3:
    case 5: return va_arg(*ap, ptrdiff_t); /* the signed type of size_t's width */
    case 4: return va_arg(*ap, intmax_t);
    case -1: return (short)va_arg(*ap, int);
    case -2: return (signed char)va_arg(*ap, int);
    default: return va_arg(*ap, int);
  }
}

static uintmax_t unsigned_arg(va_list *ap, int len) {
  switch (len) {
    case 1: return va_arg(*ap, unsigned long);
    case 2: return va_arg(*ap, unsigned long long);
    case 3: return va_arg(*ap, size_t);
    case 4: return va_arg(*ap, uintmax_t);
    case 5: return (uintmax_t)va_arg(*ap, ptrdiff_t);
    case -1: return (unsigned short)va_arg(*ap, unsigned);
    case -2: return (unsigned char)va_arg(*ap, unsigned);
    default: return va_arg(*ap, unsigned);
  }
}

/* One conversion C with spec SP, its argument from AP. */
static void convert(out_t *o, char c, const spec_t *sp, va_list *ap) {
  int flags = sp->flags, width = sp->width, prec = sp->prec;
  switch (c) {
    case 'd':
    case 'i': {
      intmax_t v = signed_arg(ap, sp->len);
      uintmax_t u = v < 0 ? (uintmax_t)0 - (uintmax_t)v : (uintmax_t)v;
      fmt_uint(o, u, 10, 0, v < 0 ? "-" : (flags & F_PLUS) ? "+" : (flags & F_SPACE) ? " " : "", prec, width, flags);
      break;
    }
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
      uintmax_t v = unsigned_arg(ap, sp->len);
      unsigned base = c == 'u' ? 10u : c == 'o' ? 8u : 16u;
      const char *prefix = "";
      if ((flags & F_ALT) && v != 0) prefix = c == 'x' ? "0x" : c == 'X' ? "0X" : c == 'o' ? "0" : "";
      fmt_uint(o, v, base, c == 'X', prefix, prec, width, flags);
      break;
    }
    case 'p':
      fmt_uint(o, (uintptr_t)va_arg(*ap, void *), 16, 0, "0x", prec, width, flags);
      break;
    case 'c': {
      char ch = (char)va_arg(*ap, int);
      emit(o, "", &ch, 1, 0, width, flags & ~F_ZERO);
      break;
    }
    case 's': {
      const char *s = va_arg(*ap, const char *);
      if (s == NULL) s = "(null)";
      size_t n = 0;
      while (s[n] && (prec < 0 || n < (size_t)prec)) n++;
      emit(o, "", s, n, 0, width, flags & ~F_ZERO);
      break;
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
    case 'a':
    case 'A': {
      double v = sp->len == 6 ? (double)va_arg(*ap, long double) : va_arg(*ap, double);
      fmt_float(o, v, c, prec, width, flags);
      break;
    }
    case '%': put(o, '%'); break;
    default: /* not a conversion this formatter knows: shown as written, so the mistake is visible */
      put(o, '%');
      put(o, c);
      break;
  }
}

int et_vsnprintf(char *buf, size_t cap, const char *fmt, va_list ap) {
  out_t o = {buf, cap, 0};
  va_list args;
  va_copy(args, ap);
  for (const char *p = fmt; *p; p++) {
    if (*p != '%') {
      put(&o, *p);
      continue;
    }
    spec_t sp;
    p++;
    parse_spec(&p, &args, &sp);
    if (*p == '\0') break;
    convert(&o, *p, &sp, &args);
  }
  va_end(args);
  if (cap > 0) buf[o.n < cap ? o.n : cap - 1] = '\0';
  return o.n > (size_t)INT32_MAX ? INT32_MAX : (int)o.n;
}

int et_snprintf(char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = et_vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
  return n;
}
