/* Placement of a method's memory in the caller's blocks of RAM: the one rule the runner
 * (runner/main.c), the C API (api/emlkit.c) and the host's fit check (emlkit/deploy/fit.py, through the
 * host library boards/host/query.c) all follow. The pieces go in et_method_pieces' order, each into the
 * first block with room, ET_PLACE_ALIGN-aligned. */
#ifndef ET_PLACE_H
#define ET_PLACE_H

#include "runtime.h"

#define ET_PLACE_ALIGN 16u
#define ET_MAX_PIECES (ET_MAX_ARENAS + 3)

typedef struct {
  uintptr_t base;
  size_t size;
  size_t used; /* bytes taken from base, alignment padding included */
} et_block;

typedef enum { ET_PIECE_ARENA, ET_PIECE_RUNTIME, ET_PIECE_SCRATCH, ET_PIECE_DELEGATE } et_piece_kind;
typedef struct {
  et_piece_kind kind;
  uint32_t arena; /* ET_PIECE_ARENA: memory id - 1 */
  size_t size;    /* bytes asked for (a 0-byte arena is placed as 1 byte, so that it has an address) */
} et_piece;

/* The method's pieces, where et_place_method put them. */
typedef struct {
  const uint8_t *arena_base[ET_MAX_ARENAS];
  size_t arena_size[ET_MAX_ARENAS];
  uint8_t *runtime;
  uint8_t *scratch;
  uint8_t *delegate; /* NULL when the program has no delegate */
} et_method_memory;

/* `size` bytes from the first of the n blocks with room; NULL if none has. */
uint8_t *et_place(et_block *blocks, uint32_t n, size_t size);
/* The order pieces are placed in: the planned arenas largest first, the runtime's tables, `scratch_bytes`
 * of kernel scratch, the delegates' memory (if any). Returns how many it wrote to out. */
uint32_t et_method_pieces(const et_method_needs *needs, size_t scratch_bytes, et_piece out[ET_MAX_PIECES]);
/* Place every piece; ET_E_ARENA_TOO_SMALL with *failed set to the first that finds no room. */
et_status et_place_method(et_block *blocks, uint32_t n, const et_method_needs *needs, size_t scratch_bytes,
                          et_method_memory *mem, et_piece *failed);

#endif
