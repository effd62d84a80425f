/* Flatbuffer writer: see fb_build.h. Layout rules (flatbuffers' binary format):
 * little-endian scalars at their natural alignment; a table starts with a
 * signed 32-bit offset back to its vtable ([vtable bytes, table bytes, field
 * offsets from the table start] as uint16); references are unsigned 32-bit
 * offsets forward from where they are stored; strings and vectors start with a
 * 32-bit length. */
#include "fb_build.h"

#include <string.h>

void fbw_init(fbw *w, void *buf, size_t cap) {
  memset(w, 0, sizeof *w);
  w->buf = buf;
  w->cap = buf ? cap : SIZE_MAX;
  w->minalign = 1;
}

static uint8_t *front(fbw *w) { return w->buf + (w->cap - w->used); }

static bool grow(fbw *w, size_t n) {
  if (w->full) return false;
  if (n > w->cap - w->used || w->used + n > UINT32_MAX) {
    w->full = true;
    return false;
  }
  w->used += n;
  return true;
}

static void push(fbw *w, const void *p, size_t n) {
  if (grow(w, n) && w->buf && n) memcpy(front(w), p, n);
}

static void push_zeros(fbw *w, size_t n) {
  if (grow(w, n) && w->buf && n) memset(front(w), 0, n);
}

static void push_le(fbw *w, uint64_t v, size_t n) {
  uint8_t b[8];
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8u * i));
  push(w, b, n);
}

/* Pad so that once `len` more bytes are written, the size is a multiple of `align`. */
static void prealign(fbw *w, size_t len, size_t align) {
  if (align > w->minalign) w->minalign = align;
  push_zeros(w, (size_t)(0u - (w->used + len)) & (align - 1u));
}

/* A reference stored at the next 4 bytes, to an object written earlier. */
static uint32_t ref_to(fbw *w, fbw_ref target) {
  prealign(w, 4, 4);
  return (uint32_t)(w->used + 4u - target);
}

void fbw_table_start(fbw *w) {
  w->in_table = true;
  w->table_start = w->used;
  w->nfields = 0;
  memset(w->field, 0, sizeof w->field);
}

static void add_field(fbw *w, unsigned slot, uint64_t v, size_t n) {
  if (!w->in_table || slot >= FBW_MAX_FIELDS) {
    w->misuse = true;
    return;
  }
  prealign(w, n, n);
  push_le(w, v, n);
  w->field[slot] = (fbw_ref)w->used;
  if (slot + 1u > w->nfields) w->nfields = slot + 1u;
}

void fbw_add_u8(fbw *w, unsigned slot, uint8_t v) { add_field(w, slot, v, 1); }
void fbw_add_i32(fbw *w, unsigned slot, int32_t v) { add_field(w, slot, (uint32_t)v, 4); }
void fbw_add_u32(fbw *w, unsigned slot, uint32_t v) { add_field(w, slot, v, 4); }
void fbw_add_u64(fbw *w, unsigned slot, uint64_t v) { add_field(w, slot, v, 8); }

void fbw_add_ref(fbw *w, unsigned slot, fbw_ref target) {
  if (!w->in_table || slot >= FBW_MAX_FIELDS) {
    w->misuse = true;
    return;
  }
  push_le(w, ref_to(w, target), 4);
  w->field[slot] = (fbw_ref)w->used;
  if (slot + 1u > w->nfields) w->nfields = slot + 1u;
}

fbw_ref fbw_table_end(fbw *w) {
  if (!w->in_table) {
    w->misuse = true;
    return 0;
  }
  w->in_table = false;
  prealign(w, 4, 4);
  push_zeros(w, 4); /* the offset to the vtable, filled in below */
  size_t table = w->used;
  size_t object = table - w->table_start;
  if (object > UINT16_MAX) w->full = true;
  for (unsigned i = w->nfields; i-- > 0;) push_le(w, w->field[i] ? table - w->field[i] : 0u, 2);
  push_le(w, object, 2);
  push_le(w, 4u + 2u * w->nfields, 2);
  if (w->buf && !w->full && !w->misuse) {
    uint32_t soff = (uint32_t)(w->used - table); /* the vtable lies this far before the table */
    uint8_t *p = w->buf + (w->cap - table);
    for (unsigned i = 0; i < 4; i++) p[i] = (uint8_t)(soff >> (8u * i));
  }
  return (fbw_ref)table;
}

fbw_ref fbw_string2(fbw *w, const char *a, size_t alen, const char *b, size_t blen) {
  if (b == NULL) blen = 0;
  prealign(w, alen + blen + 1u, 4);
  push_zeros(w, 1);
  push(w, b, blen);
  push(w, a, alen);
  push_le(w, alen + blen, 4);
  return (fbw_ref)w->used;
}

fbw_ref fbw_i64_vector(fbw *w, const int64_t *v, uint32_t n) {
  prealign(w, 8u * (size_t)n, 8); /* the elements 8-aligned; the length word right before them */
  for (uint32_t i = n; i-- > 0;) push_le(w, (uint64_t)v[i], 8);
  push_le(w, n, 4);
  return (fbw_ref)w->used;
}

fbw_ref fbw_ref_vector(fbw *w, uint32_t n, fbw_ref (*item)(const void *ctx, uint32_t i), const void *ctx) {
  prealign(w, 4u * (size_t)n, 4);
  for (uint32_t i = n; i-- > 0;) push_le(w, ref_to(w, item(ctx, i)), 4);
  push_le(w, n, 4);
  return (fbw_ref)w->used;
}

et_status fbw_finish(fbw *w, fbw_ref root, const char ident[4], bool size_prefix, const uint8_t **data, size_t *len) {
  prealign(w, (size_prefix ? 4u : 0u) + 8u, w->minalign > 4 ? w->minalign : 4);
  push(w, ident, 4);
  push_le(w, ref_to(w, root), 4);
  if (size_prefix) push_le(w, w->used, 4);
  if (w->misuse || w->in_table) return ET_E_INTERNAL;
  if (w->full) return ET_E_ARENA_TOO_SMALL;
  *data = w->buf ? front(w) : NULL;
  *len = w->used;
  return ET_OK;
}
