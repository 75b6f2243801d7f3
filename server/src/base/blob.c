// SPDX-License-Identifier: MIT
// blob.c: the counter and the bytes in one allocation (see blob.h).
#include "base/blob.h"

#include <assert.h>
#include <stdalign.h>
#include <stdatomic.h>

#include "base/mem.h"

struct blob {
  atomic_uint refs;
  size_t cap;
  alignas(max_align_t) uint8_t data[];
};


blob_t* blob_create(size_t cap) {
  if (cap > SIZE_MAX - sizeof(blob_t)) {
    return NULL;
  }
  blob_t* b = mem_alloc(sizeof(blob_t) + cap);
  if (!b) {
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->cap = cap;
  return b;
}


uint8_t* blob_data(const blob_t* b) {
  return (uint8_t*)b->data;
}


size_t blob_cap(const blob_t* b) {
  return b->cap;
}


size_t blob_footprint(const blob_t* b) {
  return mem_footprint(b);
}


int blob_resize(blob_t** b, size_t cap) {
  assert(blob_is_exclusive(*b));
  if (cap > SIZE_MAX - sizeof(blob_t)) {
    return -1;
  }
  blob_t* grown = mem_realloc(*b, sizeof(blob_t) + cap);
  if (!grown) {
    return -1;
  }
  grown->cap = cap;
  *b = grown;
  return 0;
}


blob_t* blob_retain(blob_t* b) {
  // relaxed: a new reference is taken from an existing one, which keeps b alive meanwhile
  atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}


void blob_release(blob_t* b) {
  if (!b) {
    return;
  }

  // acq_rel: each holder's reads happen before its decrement, and the last holder's decrement
  // sees all of them before it frees (or before the writer writes again, blob_is_exclusive)
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
    mem_free(b);
  }
}


int blob_is_exclusive(const blob_t* b) {
  return atomic_load_explicit(&((blob_t*)b)->refs, memory_order_acquire) == 1;
}
