/* A small flatbuffer reader where every access is bounds-checked against the
 * buffer it came from. Tables, vtables, vectors, strings and unions are
 * verified when they are reached, so a corrupt or truncated buffer yields an
 * error (false) instead of an out-of-bounds read. All reads go through memcpy
 * so unaligned data is fine. */
#ifndef ET_FB_H
#define ET_FB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  const uint8_t *base;
  size_t len;
} fb_buf;

typedef struct {
  const fb_buf *buf;
  size_t pos;      /* table start (where its soffset to the vtable is) */
  size_t vt;       /* vtable start */
  uint16_t vt_len; /* vtable size in bytes */
  uint16_t t_len;  /* inline table size in bytes */
} fb_table;

typedef struct {
  const fb_buf *buf;
  size_t data;    /* offset of element 0 */
  uint32_t len;   /* number of elements */
  uint32_t esize; /* element size in bytes */
} fb_vec;

/* Why the last check failed (static text), for error messages. */
extern const char *fb_last_error;

/* Root table of a buffer whose file identifier (bytes 4..7) must equal `ident`. */
bool fb_root(const fb_buf *b, const char ident[4], fb_table *out);
/* Verify the table starting at byte `pos`. */
bool fb_table_at(const fb_buf *b, size_t pos, fb_table *out);

/* Scalar fields: absent -> default; present but outside the table -> false. */
bool fb_u8(const fb_table *t, unsigned slot, uint8_t def, uint8_t *out);
bool fb_i32(const fb_table *t, unsigned slot, int32_t def, int32_t *out);
bool fb_u32(const fb_table *t, unsigned slot, uint32_t def, uint32_t *out);
bool fb_i64(const fb_table *t, unsigned slot, int64_t def, int64_t *out);
bool fb_u64(const fb_table *t, unsigned slot, uint64_t def, uint64_t *out);
bool fb_f64(const fb_table *t, unsigned slot, double def, double *out);

/* Offset fields. `*present` tells whether the field exists; when it does not,
 * the output is zeroed and true is returned. */
bool fb_sub_table(const fb_table *t, unsigned slot, bool *present, fb_table *out);
bool fb_vector(const fb_table *t, unsigned slot, uint32_t esize, bool *present, fb_vec *out);
/* Strings are verified to be NUL-terminated inside the buffer. */
bool fb_string(const fb_table *t, unsigned slot, bool *present, const char **s, uint32_t *len);
/* A union field `x` occupies two slots: x_type (u8) at `slot`, the table at slot+1.
 * type 0 (NONE) gives present=false. */
bool fb_union(const fb_table *t, unsigned slot, uint8_t *type, bool *present, fb_table *out);

/* Vector elements (index checked). */
bool fb_vec_table(const fb_vec *v, uint32_t i, fb_table *out);
const uint8_t *fb_vec_ptr(const fb_vec *v); /* element 0, for in-place use */
int32_t fb_vec_i32(const fb_vec *v, uint32_t i); /* caller checks i < len */
int64_t fb_vec_i64(const fb_vec *v, uint32_t i);
uint64_t fb_vec_u64(const fb_vec *v, uint32_t i);
uint8_t fb_vec_u8(const fb_vec *v, uint32_t i);

#endif
