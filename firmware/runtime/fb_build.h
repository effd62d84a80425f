/* A small flatbuffer writer, built back to front in caller memory (no
 * allocation). Children are written before their parents, as flatbuffers
 * require: strings, vectors and sub-tables first, then the table that points
 * at them. An object is identified by its fbw_ref, the number of bytes written
 * up to and including it (its distance from the end of the buffer).
 *
 * With buf == NULL nothing is stored but every size is computed, so a first
 * pass can tell how big the buffer must be. Running out of room sets `full`
 * and makes every later call a no-op; check it (or fbw_finish's status) once
 * at the end. */
#ifndef ET_FB_BUILD_H
#define ET_FB_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define FBW_MAX_FIELDS 16

typedef uint32_t fbw_ref;

typedef struct {
  uint8_t *buf;     /* NULL: measure only */
  size_t cap;
  size_t used;      /* bytes written, from the end of buf */
  size_t minalign;  /* largest alignment used so far */
  bool full;
  bool misuse;      /* a call out of order: the result would be wrong */
  /* the table being built */
  bool in_table;
  size_t table_start;
  fbw_ref field[FBW_MAX_FIELDS]; /* 0: field absent */
  unsigned nfields;
} fbw;

void fbw_init(fbw *w, void *buf, size_t cap);

/* Scalars and references inside the table being built (fields by vtable slot). */
void fbw_table_start(fbw *w);
void fbw_add_u8(fbw *w, unsigned slot, uint8_t v);
void fbw_add_i32(fbw *w, unsigned slot, int32_t v);
void fbw_add_u32(fbw *w, unsigned slot, uint32_t v);
void fbw_add_u64(fbw *w, unsigned slot, uint64_t v);
void fbw_add_ref(fbw *w, unsigned slot, fbw_ref target);
fbw_ref fbw_table_end(fbw *w);

/* A string made of two parts (the second may be NULL), NUL-terminated. */
fbw_ref fbw_string2(fbw *w, const char *a, size_t alen, const char *b, size_t blen);
/* A vector of n 64-bit integers. */
fbw_ref fbw_i64_vector(fbw *w, const int64_t *v, uint32_t n);
/* A vector of n references; item(ctx, i) gives element i. */
fbw_ref fbw_ref_vector(fbw *w, uint32_t n, fbw_ref (*item)(const void *ctx, uint32_t i), const void *ctx);

/* Root reference and file identifier (4 characters), optionally preceded by a
 * 32-bit size prefix. On success *data and *len give the finished buffer (data is
 * NULL in measure-only mode). ET_E_ARENA_TOO_SMALL when it did not fit,
 * ET_E_INTERNAL after a call out of order. */
et_status fbw_finish(fbw *w, fbw_ref root, const char ident[4], bool size_prefix, const uint8_t **data, size_t *len);

#endif
