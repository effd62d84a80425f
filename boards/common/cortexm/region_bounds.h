/* The part of a board's RAM region the runner may place arenas in (plat_regions in platform.c), as a pure
 * function so that the host's fit check asks the same code (boards/host/query.c, emlkit/deploy/fit.py). */
#ifndef CORTEXM_REGION_BOUNDS_H
#define CORTEXM_REGION_BOUNDS_H

#include <stdint.h>

#define CORTEXM_REGION_ALIGN 64u

/* Region [base, end) of kind `shared` (0: arenas only; 1: also holds the model slot, whose last byte in use
 * is model_used - 1; 2: also holds .data/.bss/heap up to heap_end, and maybe the stack from stack_limit).
 * Narrows *base and *end to what is free; returns 0 when nothing is. */
static inline int cortexm_region_bounds(int shared, uintptr_t model_used, uintptr_t heap_end, uintptr_t stack_limit,
                                        uintptr_t *base, uintptr_t *end) {
  if (shared == 1) {
    /* Everything after the model. */
    *base = (model_used + CORTEXM_REGION_ALIGN - 1u) & ~(uintptr_t)(CORTEXM_REGION_ALIGN - 1u);
  } else if (shared == 2) {
    /* What the image leaves free: after the libc heap, below the stack when it is here too. */
    *base = (heap_end + CORTEXM_REGION_ALIGN - 1u) & ~(uintptr_t)(CORTEXM_REGION_ALIGN - 1u);
    if (stack_limit >= *base && stack_limit <= *end) *end = stack_limit;
  }
  return *base < *end;
}

#endif
