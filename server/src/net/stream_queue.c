// SPDX-License-Identifier: MIT
// stream_queue.c: a ring of frame references with a frame bound and a byte bound.
#include "net/stream_queue.h"

#include <string.h>

#include "base/mem.h"


int stream_queue_init(stream_queue_t* q, uint32_t max_frames, uint64_t max_bytes) {
  memset(q, 0, sizeof(*q));
  if (max_frames == 0) {
    return ERR_INVAL;
  }
  q->ring = mem_calloc(max_frames, sizeof(*q->ring));
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


int stream_queue_push(stream_queue_t* q, shared_buf_t* b) {
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
  q->ring[(q->head + q->count) % q->max_frames] = shared_buf_retain(b);
  q->count++;
  q->bytes += len;
  return 0;
}


shared_buf_t* stream_queue_pop(stream_queue_t* q) {
  if (q->count == 0) {
    return NULL;
  }
  shared_buf_t* b = q->ring[q->head];
  q->ring[q->head] = NULL;
  q->head = (q->head + 1) % q->max_frames;
  q->count--;
  q->bytes -= shared_buf_frame_len(b);
  return b;
}
