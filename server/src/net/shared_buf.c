// SPDX-License-Identifier: MIT
// shared_buf.c: the header, the counter and the frame in one allocation. The count is atomic:
// frames are encoded off the loop thread and released wherever their last holder is.
#include "net/shared_buf.h"

#include <assert.h>
#include <stdatomic.h>

#include "base/mem.h"
#include "net/frame.h"

struct shared_buf {
  atomic_uint refs;
  uint32_t cap;              // payload capacity, bytes
  uint32_t len;              // payload length, bytes (<= cap)
  uint8_t frame[];           // (FRAME_HEADER_BYTES + cap): length prefix, then payload
};


static void write_header(shared_buf_t* b) {
  for (unsigned i = 0; i < FRAME_HEADER_BYTES; i++) {
    b->frame[i] = (uint8_t)(b->len >> (8 * i));
  }
}


shared_buf_t* shared_buf_create(size_t cap) {
  if (cap > UINT32_MAX) {
    return NULL;
  }
  shared_buf_t* b = mem_alloc(sizeof(*b) + FRAME_HEADER_BYTES + cap);
  if (!b) {
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->cap = (uint32_t)cap;
  b->len = (uint32_t)cap;
  write_header(b);
  return b;
}


uint8_t* shared_buf_payload(shared_buf_t* b) {
  assert(!shared_buf_is_shared(b));
  return b->frame + FRAME_HEADER_BYTES;
}


void shared_buf_set_len(shared_buf_t* b, size_t len) {
  assert(!shared_buf_is_shared(b) && len <= b->cap);
  b->len = (uint32_t)(len <= b->cap ? len : b->cap);
  write_header(b);
}


size_t shared_buf_len(const shared_buf_t* b) {
  return b->len;
}


const uint8_t* shared_buf_frame(const shared_buf_t* b) {
  return b->frame;
}


size_t shared_buf_frame_len(const shared_buf_t* b) {
  return FRAME_HEADER_BYTES + (size_t)b->len;
}


size_t shared_buf_memory(const shared_buf_t* b) {
  return sizeof(*b) + FRAME_HEADER_BYTES + (size_t)b->cap;
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
    mem_free(b);
  }
}


int shared_buf_is_shared(const shared_buf_t* b) {
  return atomic_load_explicit(&((shared_buf_t*)b)->refs, memory_order_acquire) > 1;
}
