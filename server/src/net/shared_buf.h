// SPDX-License-Identifier: MIT
// shared_buf.h: one encoded frame (the u32 little-endian length prefix, then the payload) in a
// reference-counted buffer, so that a frame encoded once can be queued on several connections
// and written by each without a copy. The payload is written by its producer while it holds
// the only reference; once shared the buffer is immutable, and the last release frees it.
#ifndef SENSIM_NET_SHARED_BUF_H_
#define SENSIM_NET_SHARED_BUF_H_

#include <stddef.h>
#include <stdint.h>

typedef struct shared_buf shared_buf_t;

// A buffer with room for a payload of up to cap bytes, its length set to cap and its header
// written; the caller holds the one reference. NULL when cap exceeds UINT32_MAX or memory is
// short.
// Thread: any.
shared_buf_t* shared_buf_create(size_t cap);

// Payload to fill (cap bytes). Only while the caller holds the only reference.
uint8_t* shared_buf_payload(shared_buf_t* b);

// Set the payload's length (<= cap) and rewrite the header, for producers that know the size
// only after encoding (compression). Only while the caller holds the only reference.
void shared_buf_set_len(shared_buf_t* b, size_t len);

// Payload bytes (the length in the header).
size_t shared_buf_len(const shared_buf_t* b);

// The whole frame to write (header + payload) and its size, FRAME_HEADER_BYTES + len. Valid
// while the caller holds a reference.
const uint8_t* shared_buf_frame(const shared_buf_t* b);
size_t shared_buf_frame_len(const shared_buf_t* b);

// Bytes of memory the buffer takes, counted once however many connections hold it.
size_t shared_buf_memory(const shared_buf_t* b);

// Add a reference; returns b. Thread: any (atomic).
shared_buf_t* shared_buf_retain(shared_buf_t* b);

// Drop a reference; the last one frees the buffer. Nullable: b. Thread: any (atomic).
void shared_buf_release(shared_buf_t* b);

// 1 while more than one reference exists (the buffer must not change). Thread: any.
int shared_buf_is_shared(const shared_buf_t* b);

#endif  // SENSIM_NET_SHARED_BUF_H_
