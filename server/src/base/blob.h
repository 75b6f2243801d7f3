// SPDX-License-Identifier: MIT
// blob.h: a reference-counted block of bytes, so that data written once (a lidar's points) can
// be handed on by reference (to a step's records, to the frames of a reply and of every
// subscriber) instead of being copied at each hand-off. Its writer fills it while it holds the
// only reference; once shared it is read only, and the last release frees it.
//
// Thread: any; the count is atomic.
#ifndef SENSIM_BASE_BLOB_H_
#define SENSIM_BASE_BLOB_H_

#include <stddef.h>
#include <stdint.h>

typedef struct blob blob_t;

// A blob of cap bytes (contents undefined, aligned for any scalar type); the caller holds the
// one reference. NULL when memory is short.
blob_t* blob_create(size_t cap);

// The bytes (cap of them). Writable only while the caller holds the only reference.
uint8_t* blob_data(const blob_t* b);

// Capacity, bytes.
size_t blob_cap(const blob_t* b);

// Bytes of memory the blob takes (its capacity, header and the allocator's share).
size_t blob_footprint(const blob_t* b);

// Change the capacity of *b, keeping its first min(old, new) bytes, while the caller holds the
// only reference (*b may move). Returns 0, or -1 (nothing changed) when memory is short.
int blob_resize(blob_t** b, size_t cap);

// Add a reference; returns b.
blob_t* blob_retain(blob_t* b);

// Drop a reference; the last one frees the blob. Nullable: b.
void blob_release(blob_t* b);

// 1 when the caller's reference is the only one (its writer may write again).
int blob_is_exclusive(const blob_t* b);

#endif  // SENSIM_BASE_BLOB_H_
