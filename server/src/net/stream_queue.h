// SPDX-License-Identifier: MIT
// stream_queue.h: the bounded queue of whole frames of one subscription, beside a connection's
// ordered control replies. It holds references to shared frames (net/shared_buf.h); when a new
// frame would pass its bounds it drops the oldest undelivered ones, so a slow reader sees the
// newest data with gaps instead of stalling the producer or growing without bound.
//
// Thread: one owner (the loop thread).
#ifndef SENSIM_NET_STREAM_QUEUE_H_
#define SENSIM_NET_STREAM_QUEUE_H_

#include <stdint.h>

#include "base/err.h"
#include "net/shared_buf.h"

// A frame held, with the number its producer gave it (a subscription's sequence).
typedef struct stream_queue_entry {
  shared_buf_t* b;
  uint64_t tag;
} stream_queue_entry_t;

typedef struct stream_queue {
  stream_queue_entry_t* ring;  // (cap) oldest at head; grows up to max_frames as needed
  uint32_t cap;
  uint32_t max_frames;       // most frames held, >= 1
  uint32_t head;             // index of the oldest frame
  uint32_t count;            // frames held
  uint64_t max_bytes;        // most frame bytes held (0: no byte bound)
  uint64_t bytes;            // frame bytes held (shared_buf_frame_len)
  uint64_t dropped;          // frames dropped unsent, oldest first or refused
} stream_queue_t;

// Room for max_frames (>= 1) frames and max_bytes bytes (0: frames only). ERR_INVAL for
// max_frames 0, ERR_NOMEM.
int stream_queue_init(stream_queue_t* q, uint32_t max_frames, uint64_t max_bytes) CHECKRET;

// Release every frame held and the ring.
void stream_queue_close(stream_queue_t* q);

// Queue b with a reference of the queue's own (the caller keeps its own). The oldest frames
// are dropped until b fits. ERR_LIMIT, b not queued (and counted as dropped), when b alone is
// larger than max_bytes; ERR_NOMEM (not counted) when the queue cannot grow to hold it.
int stream_queue_push(stream_queue_t* q, shared_buf_t* b) CHECKRET;

// stream_queue_push with a number kept beside the frame (its sequence), which need not follow
// the one before (the producer may skip numbers).
int stream_queue_push_tag(stream_queue_t* q, shared_buf_t* b, uint64_t tag) CHECKRET;

// The oldest frame, with the queue's reference transferred to the caller; NULL when empty.
shared_buf_t* stream_queue_pop(stream_queue_t* q);

// stream_queue_pop, and the frame's number into *tag (nullable).
shared_buf_t* stream_queue_pop_tag(stream_queue_t* q, uint64_t* tag);

#endif  // SENSIM_NET_STREAM_QUEUE_H_
