// SPDX-License-Identifier: MIT
// shared_buf.h: one encoded frame (the u32 little-endian length prefix, then the payload) in a
// reference-counted buffer, so that a frame encoded once can be queued on several connections
// and written by each without a copy. The payload is written by its producer while it holds
// the only reference; once shared the buffer is immutable, and the last release frees it.
//
// A frame may also be built in pieces: bytes of its own (the message's fields, lengths and
// keys) and, between them, byte ranges of reference-counted blobs (base/blob.h) it refers to
// without copying them (a point cloud's points). Writers send it with scatter-gather writes,
// piece by piece (shared_buf_pieces).
#ifndef SENSIM_NET_SHARED_BUF_H_
#define SENSIM_NET_SHARED_BUF_H_

#include <stddef.h>
#include <stdint.h>

#include "base/blob.h"

typedef struct shared_buf shared_buf_t;

// A buffer with room for a payload of up to cap bytes, its length set to cap and its header
// written; the caller holds the one reference. NULL when cap exceeds UINT32_MAX or memory is
// short.
// Thread: any.
shared_buf_t* shared_buf_create(size_t cap);

// An empty frame to be built in pieces: room for `own` bytes of its own and `max_refs`
// references to blobs. NULL when memory is short. Thread: any.
shared_buf_t* shared_buf_create_pieces(size_t own, uint32_t max_refs);

// Append n bytes of the frame's own: returns where to write them (NULL when they would pass
// the room asked for, or the payload 4 GiB). Only while the caller holds the only reference.
uint8_t* shared_buf_put(shared_buf_t* b, size_t n);

// Append the n bytes at p, inside blob `owner`, by reference (the frame retains owner until
// it is freed). -1 when the references asked for are used up or the payload would pass 4 GiB.
// Only while the caller holds the only reference.
int shared_buf_put_ref(shared_buf_t* b, blob_t* owner, const uint8_t* p, size_t n);

// Payload to fill (cap bytes). Only while the caller holds the only reference, and only for a
// frame of shared_buf_create.
uint8_t* shared_buf_payload(shared_buf_t* b);

// Set the payload's length (<= cap) and rewrite the header, for producers that know the size
// only after encoding (compression). Only while the caller holds the only reference, and only
// for a frame of shared_buf_create.
void shared_buf_set_len(shared_buf_t* b, size_t len);

// Payload bytes (the length in the header), referenced ones included.
size_t shared_buf_len(const shared_buf_t* b);

// The whole frame to write (header + payload) and its size, FRAME_HEADER_BYTES + len. Valid
// while the caller holds a reference; shared_buf_frame only for a frame without references.
const uint8_t* shared_buf_frame(const shared_buf_t* b);
size_t shared_buf_frame_len(const shared_buf_t* b);

// The frame as pieces, in order, from its byte `skip` on (FRAME_HEADER_BYTES: the payload
// alone): up to max of them into p and n (empty pieces left out). Returns how many there are,
// which may exceed max. Valid while the caller holds a reference.
uint32_t shared_buf_pieces(const shared_buf_t* b, size_t skip, const uint8_t** p, size_t* n,
                           uint32_t max);

// Bytes of memory the buffer takes, counted once however many connections hold it (the
// blobs it refers to are not counted: they belong to their producer).
size_t shared_buf_memory(const shared_buf_t* b);

// Bytes of memory a holder of the frame keeps allocated: the buffer itself and every blob it
// refers to, at what each takes (capacity, header, the allocator's share). What a connection
// counts for a frame it has queued; a blob referred to by several frames counts in each (on
// the safe side). Valid while the caller holds a reference.
size_t shared_buf_footprint(const shared_buf_t* b);

// Add a reference; returns b. Thread: any (atomic).
shared_buf_t* shared_buf_retain(shared_buf_t* b);

// Drop a reference; the last one frees the buffer. Nullable: b. Thread: any (atomic).
void shared_buf_release(shared_buf_t* b);

// 1 while more than one reference exists (the buffer must not change). Thread: any.
int shared_buf_is_shared(const shared_buf_t* b);

#endif  // SENSIM_NET_SHARED_BUF_H_
