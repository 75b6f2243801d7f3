// SPDX-License-Identifier: MIT
// wire_pb.h: private to the protobuf adapter (net/wire*.c): the generated protobuf-c types and
// the shared packing helpers. Nothing else includes this.
#ifndef SENSIM_NET_WIRE_PB_H_
#define SENSIM_NET_WIRE_PB_H_

#include <stddef.h>
#include <stdint.h>

#include "net/wire.h"
#include "sensim.pb-c.h"

extern ProtobufCAllocator wire_allocator;

// A varint's size on the wire, and writing it at `at` (returns the byte after it).
static inline size_t wire_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80u) {
    v >>= 7;
    n++;
  }
  return n;
}

static inline uint8_t* wire_put_varint(uint8_t* at, uint64_t v) {
  while (v >= 0x80u) {
    *at++ = (uint8_t)(v | 0x80u);
    v >>= 7;
  }
  *at++ = (uint8_t)v;
  return at;
}

// The cancellation hook of a request (wire_set_cancel); *cancelled NULL when none.
void wire_get_cancel(const wire_request_t* r, int (**cancelled)(void* ctx), void** ctx);

// The decoded Envelope of a request.
const Sensim__V1__Envelope* wire_envelope(const wire_request_t* r);

// Pack env into a mem_alloc'ed buffer.
int wire_pack(Sensim__V1__Envelope* env, uint8_t** out, size_t* out_len) CHECKRET;

// The bytes of Envelope{id, status{code OK, message ""}} (as protobuf-c packs it) into out;
// returns their number. A reply's head, before its body field.
#define WIRE_OK_HEAD_MAX 17u
size_t wire_ok_head(uint64_t id, uint8_t out[WIRE_OK_HEAD_MAX]);

// Set id and status (code: internal err code, 0 = OK) and pack.
int wire_pack_reply(uint64_t id, int code, const char* message, Sensim__V1__Envelope* env,
                    uint8_t** out, size_t* out_len) CHECKRET;

// RaycastResult.hits_bytes: one little-endian record per ray, float64 distance at 0, float64
// normal x y z at 8, uint32 object_id at 32, uint32 label at 36, 8 reserved bytes (zero) at 40.
#define WIRE_HIT_RECORD_BYTES 48u

// Write n hits as hits_bytes records into out (n * WIRE_HIT_RECORD_BYTES bytes).
void wire_hit_records(const scene_hit_t* hits, size_t n, uint8_t* out);
// A hit's record in the reply to Raycast.omit_misses: the 48-byte one without its reserved bytes.
#define WIRE_HIT_MASKED_RECORD_BYTES 40u
// Write RaycastResult.hit_mask of n hits into mask ((n + 7) / 8 bytes, ray i at bit i % 8 of
// byte i / 8) and the records of the hits that are not the miss record, in ray order, into out
// (WIRE_HIT_MASKED_RECORD_BYTES each).
void wire_hit_mask_records(const scene_hit_t* hits, size_t n, uint8_t* mask, uint8_t* out);
// The same in place: of n hits_bytes records (WIRE_HIT_RECORD_BYTES each) at records, those
// that are not the miss record moved to the start as WIRE_HIT_MASKED_RECORD_BYTES records, in
// ray order, and hit_mask written into mask ((n + 7) / 8 bytes). Returns the records kept.
size_t wire_hit_pack(uint8_t* records, size_t n, uint8_t* mask);
// wire_hit_pack with the kept records written from `to` on, which may be records itself or any
// place before it (to <= records: a record is read whole before anything is written, and the
// k-th kept one ends before the (k+1)-th record read), the bytes from `to` up to where the
// records start free to overwrite.
size_t wire_hit_pack_to(uint8_t* records, size_t n, uint8_t* mask, uint8_t* to);

#endif  // SENSIM_NET_WIRE_PB_H_
