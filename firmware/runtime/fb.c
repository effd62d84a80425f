/* Bounds-checked flatbuffer access; see fb.h. Offsets are size_t and every
 * sum is checked against the buffer length before it is formed, so 32-bit
 * targets cannot overflow either. */
#include "fb.h"

#include <string.h>

const char *fb_last_error = "";

static bool fail(const char *why) {
  fb_last_error = why;
  return false;
}

/* True if [pos, pos+n) lies inside the buffer. */
static bool in_buf(const fb_buf *b, size_t pos, size_t n) {
  return pos <= b->len && n <= b->len - pos;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

bool fb_table_at(const fb_buf *b, size_t pos, fb_table *out) {
  if (!in_buf(b, pos, 4)) return fail("table outside the buffer");
  int32_t soff = (int32_t)rd32(b->base + pos);
  /* vtable = pos - soff, computed without signed overflow. */
  size_t vt;
  if (soff >= 0) {
    if ((size_t)soff > pos) return fail("vtable before the buffer start");
    vt = pos - (size_t)soff;
  } else {
    uint32_t back = (uint32_t)0 - (uint32_t)soff;
    if (!in_buf(b, pos, back)) return fail("vtable outside the buffer");
    vt = pos + back;
  }
  if (!in_buf(b, vt, 4)) return fail("vtable outside the buffer");
  uint16_t vt_len = rd16(b->base + vt);
  uint16_t t_len = rd16(b->base + vt + 2);
  if (vt_len < 4 || (vt_len & 1u)) return fail("bad vtable size");
  if (!in_buf(b, vt, vt_len)) return fail("vtable outside the buffer");
  if (t_len < 4 || !in_buf(b, pos, t_len)) return fail("table body outside the buffer");
  out->buf = b;
  out->pos = pos;
  out->vt = vt;
  out->vt_len = vt_len;
  out->t_len = t_len;
  return true;
}

bool fb_root(const fb_buf *b, const char ident[4], fb_table *out) {
  if (b->base == NULL || b->len < 8) return fail("buffer too short for a flatbuffer");
  if (memcmp(b->base + 4, ident, 4) != 0) return fail("wrong file identifier");
  return fb_table_at(b, rd32(b->base), out);
}

/* Byte offset of a field inside the table, 0 if absent. Checks `size` bytes fit. */
static bool field(const fb_table *t, unsigned slot, size_t size, size_t *off) {
  size_t vo = 4u + 2u * (size_t)slot;
  *off = 0;
  if (vo + 2 > t->vt_len) return true; /* older writer: field absent */
  uint16_t fo = rd16(t->buf->base + t->vt + vo);
  if (fo == 0) return true;
  /* Bounded by the buffer, not by the vtable's table size: like flatbuffers'
   * own verifier, since Python-written tables understate that size. */
  if (fo < 4 || !in_buf(t->buf, t->pos + fo, size)) return fail("field outside the buffer");
  *off = t->pos + fo;
  return true;
}

#define SCALAR(fn, type, size, read)                                         \
  bool fn(const fb_table *t, unsigned slot, type def, type *out) {           \
    size_t off;                                                              \
    if (!field(t, slot, size, &off)) return false;                           \
    if (off == 0) {                                                          \
      *out = def;                                                            \
    } else {                                                                 \
      read;                                                                  \
    }                                                                        \
    return true;                                                             \
  }

SCALAR(fb_u8, uint8_t, 1, *out = t->buf->base[off])
SCALAR(fb_i32, int32_t, 4, *out = (int32_t)rd32(t->buf->base + off))
SCALAR(fb_u32, uint32_t, 4, *out = rd32(t->buf->base + off))
SCALAR(fb_i64, int64_t, 8, *out = (int64_t)rd64(t->buf->base + off))
SCALAR(fb_u64, uint64_t, 8, *out = rd64(t->buf->base + off))
SCALAR(fb_f64, double, 8, { uint64_t u = rd64(t->buf->base + off); memcpy(out, &u, 8); })

/* Follow the uoffset stored at `off` (relative to `off` itself). */
static bool deref(const fb_buf *b, size_t off, size_t *target) {
  if (!in_buf(b, off, 4)) return fail("offset field outside the buffer");
  uint32_t u = rd32(b->base + off);
  if (u == 0 || !in_buf(b, off, u)) return fail("offset points outside the buffer");
  *target = off + u;
  return true;
}

bool fb_sub_table(const fb_table *t, unsigned slot, bool *present, fb_table *out) {
  size_t off, target;
  memset(out, 0, sizeof *out);
  *present = false;
  if (!field(t, slot, 4, &off)) return false;
  if (off == 0) return true;
  if (!deref(t->buf, off, &target) || !fb_table_at(t->buf, target, out)) return false;
  *present = true;
  return true;
}

static bool vec_at(const fb_buf *b, size_t pos, uint32_t esize, fb_vec *out) {
  if (!in_buf(b, pos, 4)) return fail("vector length outside the buffer");
  uint32_t n = rd32(b->base + pos);
  if (esize != 0 && (size_t)n > (b->len - pos - 4) / esize) return fail("vector runs past the buffer end");
  out->buf = b;
  out->data = pos + 4;
  out->len = n;
  out->esize = esize;
  return true;
}

bool fb_vector(const fb_table *t, unsigned slot, uint32_t esize, bool *present, fb_vec *out) {
  size_t off, target;
  memset(out, 0, sizeof *out);
  *present = false;
  if (!field(t, slot, 4, &off)) return false;
  if (off == 0) return true;
  if (!deref(t->buf, off, &target) || !vec_at(t->buf, target, esize, out)) return false;
  *present = true;
  return true;
}

bool fb_string(const fb_table *t, unsigned slot, bool *present, const char **s, uint32_t *len) {
  fb_vec v;
  *s = "";
  *len = 0;
  if (!fb_vector(t, slot, 1, present, &v)) return false;
  if (!*present) return true;
  if (!in_buf(t->buf, v.data, (size_t)v.len + 1) || t->buf->base[v.data + v.len] != 0)
    return fail("string not terminated inside the buffer");
  *s = (const char *)(t->buf->base + v.data);
  *len = v.len;
  return true;
}

bool fb_union(const fb_table *t, unsigned slot, uint8_t *type, bool *present, fb_table *out) {
  if (!fb_u8(t, slot, 0, type)) return false;
  if (!fb_sub_table(t, slot + 1, present, out)) return false;
  if (*type == 0) *present = false;
  else if (!*present) return fail("union type set but value missing");
  return true;
}

bool fb_vec_table(const fb_vec *v, uint32_t i, fb_table *out) {
  size_t target;
  if (i >= v->len || v->esize != 4) return fail("vector index out of range");
  return deref(v->buf, v->data + 4u * (size_t)i, &target) && fb_table_at(v->buf, target, out);
}

const uint8_t *fb_vec_ptr(const fb_vec *v) { return v->buf ? v->buf->base + v->data : NULL; }
int32_t fb_vec_i32(const fb_vec *v, uint32_t i) { return (int32_t)rd32(v->buf->base + v->data + 4u * (size_t)i); }
int64_t fb_vec_i64(const fb_vec *v, uint32_t i) { return (int64_t)rd64(v->buf->base + v->data + 8u * (size_t)i); }
uint64_t fb_vec_u64(const fb_vec *v, uint32_t i) { return rd64(v->buf->base + v->data + 8u * (size_t)i); }
uint8_t fb_vec_u8(const fb_vec *v, uint32_t i) { return v->buf->base[v->data + i]; }
