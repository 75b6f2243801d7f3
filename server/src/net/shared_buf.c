// SPDX-License-Identifier: MIT
// shared_buf.c: the header, the counter and the frame's own bytes in one allocation, with the
// references of a frame built in pieces after them. The count is atomic: frames are encoded
// off the loop thread and released wherever their last holder is.
#include "net/shared_buf.h"

#include <assert.h>
#include <stdalign.h>
#include <stdatomic.h>

#include "base/mem.h"
#include "net/frame.h"

// A range of a blob, inserted after `at` bytes of the frame's own payload.
typedef struct shared_ref {
  uint32_t at;
  uint32_t n;
  const uint8_t* p;
  blob_t* owner;             // one reference
} shared_ref_t;

struct shared_buf {
  atomic_uint refs;
  uint32_t cap;              // own payload capacity, bytes
  uint32_t len;              // own payload length, bytes (<= cap)
  uint32_t total;            // payload length: own + referenced
  uint32_t nref;
  uint32_t max_refs;
  shared_ref_t* ref;         // (max_refs) after the frame, nullable
  uint8_t frame[];           // (FRAME_HEADER_BYTES + cap): length prefix, then own payload
};


static void write_header(shared_buf_t* b) {
  for (unsigned i = 0; i < FRAME_HEADER_BYTES; i++) {
    b->frame[i] = (uint8_t)(b->total >> (8 * i));
  }
}


static shared_buf_t* create(size_t cap, uint32_t max_refs) {
  if (cap > UINT32_MAX) {
    return NULL;
  }
  size_t head = sizeof(shared_buf_t) + FRAME_HEADER_BYTES + cap;
  size_t align = alignof(shared_ref_t);
  size_t at = (head + align - 1) / align * align;
  shared_buf_t* b = mem_alloc(at + (size_t)max_refs * sizeof(shared_ref_t));
  if (!b) {
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->cap = (uint32_t)cap;
  b->nref = 0;
  b->max_refs = max_refs;
  b->ref = max_refs ? (shared_ref_t*)((uint8_t*)b + at) : NULL;
  return b;
}


shared_buf_t* shared_buf_create(size_t cap) {
  shared_buf_t* b = create(cap, 0);
  if (b) {
    b->len = b->total = (uint32_t)cap;
    write_header(b);
  }
  return b;
}


shared_buf_t* shared_buf_create_pieces(size_t own, uint32_t max_refs) {
  shared_buf_t* b = create(own, max_refs);
  if (b) {
    b->len = b->total = 0;
    write_header(b);
  }
  return b;
}


uint8_t* shared_buf_put(shared_buf_t* b, size_t n) {
  assert(!shared_buf_is_shared(b));
  if (n > b->cap - b->len || n > UINT32_MAX - b->total) {
    return NULL;
  }
  uint8_t* at = b->frame + FRAME_HEADER_BYTES + b->len;
  b->len += (uint32_t)n;
  b->total += (uint32_t)n;
  write_header(b);
  return at;
}


int shared_buf_put_ref(shared_buf_t* b, blob_t* owner, const uint8_t* p, size_t n) {
  assert(!shared_buf_is_shared(b));
  if (n == 0) {
    return 0;
  }
  if (b->nref == b->max_refs || n > UINT32_MAX - b->total) {
    return -1;
  }
  b->ref[b->nref++] = (shared_ref_t){b->len, (uint32_t)n, p, blob_retain(owner)};
  b->total += (uint32_t)n;
  write_header(b);
  return 0;
}


uint8_t* shared_buf_payload(shared_buf_t* b) {
  assert(!shared_buf_is_shared(b) && b->max_refs == 0);
  return b->frame + FRAME_HEADER_BYTES;
}


void shared_buf_set_len(shared_buf_t* b, size_t len) {
  assert(!shared_buf_is_shared(b) && len <= b->cap && b->max_refs == 0);
  b->len = b->total = (uint32_t)(len <= b->cap ? len : b->cap);
  write_header(b);
}


size_t shared_buf_len(const shared_buf_t* b) {
  return b->total;
}


const uint8_t* shared_buf_frame(const shared_buf_t* b) {
  assert(b->nref == 0);
  return b->frame;
}


size_t shared_buf_frame_len(const shared_buf_t* b) {
  return FRAME_HEADER_BYTES + (size_t)b->total;
}


// Piece k of the frame, counting own and referenced pieces alternately: own piece j spans the
// own bytes between references j - 1 and j (the header belongs to own piece 0).
uint32_t shared_buf_pieces(const shared_buf_t* b, size_t skip, const uint8_t** p, size_t* n,
                           uint32_t max) {
  uint32_t count = 0;
  size_t own_from = 0;   // own frame bytes (header included) before the next reference
  for (uint32_t j = 0; j <= b->nref; j++) {
    size_t own_to = j < b->nref ? FRAME_HEADER_BYTES + (size_t)b->ref[j].at
                                : FRAME_HEADER_BYTES + (size_t)b->len;
    const uint8_t* piece[2] = {b->frame + own_from, j < b->nref ? b->ref[j].p : NULL};
    size_t size[2] = {own_to - own_from, j < b->nref ? b->ref[j].n : 0};
    for (int k = 0; k < 2; k++) {
      size_t cut = skip < size[k] ? skip : size[k];
      skip -= cut;
      if (size[k] > cut) {
        if (count < max) {
          p[count] = piece[k] + cut;
          n[count] = size[k] - cut;
        }
        count++;
      }
    }
    own_from = own_to;
  }
  return count;
}


size_t shared_buf_memory(const shared_buf_t* b) {
  return sizeof(*b) + FRAME_HEADER_BYTES + (size_t)b->cap +
         (size_t)b->max_refs * sizeof(shared_ref_t);
}


size_t shared_buf_footprint(const shared_buf_t* b) {
  size_t n = mem_footprint(b);
  for (uint32_t i = 0; i < b->nref; i++) {
    // a frame refers to each blob once (a cloud's points); a repeat right after counts once,
    // any other repeat again, on the safe side
    if (i == 0 || b->ref[i].owner != b->ref[i - 1].owner) {
      n += blob_footprint(b->ref[i].owner);
    }
  }
  return n;
}


shared_buf_t* shared_buf_retain(shared_buf_t* b) {
  // relaxed: a new reference is taken from an existing one, which keeps b alive meanwhile
  atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}


void shared_buf_release(shared_buf_t* b) {
  if (!b) {
    return;
  }

  // acq_rel: each holder's reads happen before its decrement, and the last holder's decrement
  // sees all of them before it frees (a fence would do too, but sanitizers do not see fences)
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
    for (uint32_t i = 0; i < b->nref; i++) {
      blob_release(b->ref[i].owner);
    }
    mem_free(b);
  }
}


int shared_buf_is_shared(const shared_buf_t* b) {
  return atomic_load_explicit(&((shared_buf_t*)b)->refs, memory_order_acquire) > 1;
}
