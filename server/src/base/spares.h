// SPDX-License-Identifier: MIT
// spares.h: up to SPARES_MAX freed blocks of one size kept for the next allocation of that size,
// so that what a lock-step connection makes and frees once per request (a request job, an
// outbox slot, a write record) comes back from here instead of the heap. A zeroed spares_t is
// empty and ready. Thread: the one that owns it (the loop thread for every user).
#ifndef SENSIM_BASE_SPARES_H_
#define SENSIM_BASE_SPARES_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/mem.h"

#define SPARES_MAX 4

typedef struct spares {
  void* block[SPARES_MAX];
  uint32_t n;
} spares_t;

// A zeroed block of `size` bytes (the same size every call on s): a kept one, else
// mem_calloc's (NULL when out of memory).
static inline void* spares_take(spares_t* s, size_t size) {
  if (s->n == 0) {
    return mem_calloc(1, size);
  }
  void* p = s->block[--s->n];
  memset(p, 0, size);
  return p;
}

// Keep p (nullable) for a later spares_take, or free it when SPARES_MAX are kept already.
static inline void spares_give(spares_t* s, void* p) {
  if (p && s->n < SPARES_MAX) {
    s->block[s->n++] = p;
  } else {
    mem_free(p);
  }
}

// Free every kept block.
static inline void spares_drop(spares_t* s) {
  while (s->n) {
    mem_free(s->block[--s->n]);
  }
}

#endif  // SENSIM_BASE_SPARES_H_
