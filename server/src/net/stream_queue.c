// SPDX-License-Identifier: MIT
// stream_queue.c: a ring of frame references with a frame bound and a byte bound.
#include "net/stream_queue.h"

#include <string.h>

#include "base/mem.h"


// Entries a queue starts with: it grows as frames pile up, so that a subscription that keeps
// up holds a few, not max_frames.
#define QUEUE_FIRST_CAP 16u

int stream_queue_init(stream_queue_t* q, uint32_t max_frames, uint64_t max_bytes) {
  memset(q, 0, sizeof(*q));
  if (max_frames == 0) {
    return ERR_INVAL;
  }
  q->cap = max_frames < QUEUE_FIRST_CAP ? max_frames : QUEUE_FIRST_CAP;
  q->ring = mem_calloc(q->cap, sizeof(*q->ring));
  if (!q->ring) {
    return ERR_NOMEM;
  }
  q->max_frames = max_frames;
  q->max_bytes = max_bytes;
  return 0;
}


void stream_queue_close(stream_queue_t* q) {
  for (shared_buf_t* b = stream_queue_pop(q); b; b = stream_queue_pop(q)) {
    shared_buf_release(b);
  }
  mem_free(q->ring);
  q->ring = NULL;
}


// Room for one more entry than held (below max_frames): the ring doubles, its entries in
// order from index 0.
static int grow(stream_queue_t* q) {
  if (q->count < q->cap || q->cap == q->max_frames) {
    return 0;
  }
  uint32_t cap = q->cap > q->max_frames / 2 ? q->max_frames : 2 * q->cap;
  stream_queue_entry_t* ring = mem_alloc((size_t)cap * sizeof(*ring));
  if (!ring) {
    return ERR_NOMEM;
  }
  for (uint32_t i = 0; i < q->count; i++) {
    ring[i] = q->ring[(q->head + i) % q->cap];
  }
  mem_free(q->ring);
  q->ring = ring;
  q->cap = cap;
  q->head = 0;
  return 0;
}


int stream_queue_push_tag(stream_queue_t* q, shared_buf_t* b, uint64_t tag) {
  uint64_t len = shared_buf_frame_len(b);
  if (q->max_bytes && len > q->max_bytes) {
    q->dropped++;
    return ERR_LIMIT;
  }

  // make room: the oldest undelivered frames go first
  while (q->count == q->max_frames || (q->max_bytes && q->bytes + len > q->max_bytes)) {
    shared_buf_release(stream_queue_pop(q));
    q->dropped++;
  }
  if (grow(q) != 0) {
    return ERR_NOMEM;
  }
  q->ring[(q->head + q->count) % q->cap] = (stream_queue_entry_t){shared_buf_retain(b), tag};
  q->count++;
  q->bytes += len;
  return 0;
}


int stream_queue_push(stream_queue_t* q, shared_buf_t* b) {
  return stream_queue_push_tag(q, b, 0);
}


shared_buf_t* stream_queue_pop_tag(stream_queue_t* q, uint64_t* tag) {
  if (q->count == 0) {
    return NULL;
  }
  stream_queue_entry_t e = q->ring[q->head];
  q->ring[q->head] = (stream_queue_entry_t){NULL, 0};
  q->head = (q->head + 1) % q->cap;
  q->count--;
  q->bytes -= shared_buf_frame_len(e.b);
  if (tag) {
    *tag = e.tag;
  }
  return e.b;
}


shared_buf_t* stream_queue_pop(stream_queue_t* q) {
  return stream_queue_pop_tag(q, NULL);
}
