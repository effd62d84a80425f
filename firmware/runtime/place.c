/* Placement of a method's memory (place.h). */
#include "place.h"

uint8_t *et_place(et_block *blocks, uint32_t n, size_t size) {
  for (uint32_t i = 0; i < n; i++) {
    et_block *b = &blocks[i];
    uintptr_t start = (b->base + b->used + ET_PLACE_ALIGN - 1) & ~(uintptr_t)(ET_PLACE_ALIGN - 1);
    size_t pad = (size_t)(start - b->base);
    if (pad <= b->size && size <= b->size - pad) {
      b->used = pad + size;
      return (uint8_t *)start;
    }
  }
  return NULL;
}

uint32_t et_method_pieces(const et_method_needs *needs, size_t scratch_bytes, et_piece out[ET_MAX_PIECES]) {
  uint32_t n = 0;
  bool done[ET_MAX_ARENAS] = {0};
  for (uint32_t k = 0; k < needs->n_arenas && k < ET_MAX_ARENAS; k++) {
    uint32_t best = 0;
    bool have = false;
    for (uint32_t j = 0; j < needs->n_arenas && j < ET_MAX_ARENAS; j++)
      if (!done[j] && (!have || needs->arena_bytes[j] > needs->arena_bytes[best])) best = j, have = true;
    done[best] = true;
    size_t sz = (size_t)needs->arena_bytes[best];
    out[n++] = (et_piece){ET_PIECE_ARENA, best, sz ? sz : 1};
  }
  out[n++] = (et_piece){ET_PIECE_RUNTIME, 0, needs->runtime_bytes};
  out[n++] = (et_piece){ET_PIECE_SCRATCH, 0, scratch_bytes};
  if (needs->delegate_bytes > 0) out[n++] = (et_piece){ET_PIECE_DELEGATE, 0, needs->delegate_bytes};
  return n;
}

et_status et_place_method(et_block *blocks, uint32_t n, const et_method_needs *needs, size_t scratch_bytes,
                          et_method_memory *mem, et_piece *failed) {
  et_piece pieces[ET_MAX_PIECES];
  const uint32_t np = et_method_pieces(needs, scratch_bytes, pieces);
  memset(mem, 0, sizeof *mem);
  for (uint32_t i = 0; i < np; i++) {
    uint8_t *at = et_place(blocks, n, pieces[i].size);
    if (at == NULL) {
      *failed = pieces[i];
      if (failed->kind == ET_PIECE_ARENA) failed->size = (size_t)needs->arena_bytes[failed->arena];
      return ET_E_ARENA_TOO_SMALL;
    }
    switch (pieces[i].kind) {
      case ET_PIECE_ARENA:
        mem->arena_base[pieces[i].arena] = at;
        mem->arena_size[pieces[i].arena] = (size_t)needs->arena_bytes[pieces[i].arena];
        break;
      case ET_PIECE_RUNTIME: mem->runtime = at; break;
      case ET_PIECE_SCRATCH: mem->scratch = at; break;
      case ET_PIECE_DELEGATE: mem->delegate = at; break;
    }
  }
  return ET_OK;
}
