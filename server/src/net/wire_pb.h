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

// The cancellation hook of a request (wire_set_cancel); *cancelled NULL when none.
void wire_get_cancel(const wire_request_t* r, int (**cancelled)(void* ctx), void** ctx);

// The decoded Envelope of a request.
const Sensim__V1__Envelope* wire_envelope(const wire_request_t* r);

// Pack env into a mem_alloc'ed buffer.
int wire_pack(Sensim__V1__Envelope* env, uint8_t** out, size_t* out_len) CHECKRET;

// Set id and status (code: internal err code, 0 = OK) and pack.
int wire_pack_reply(uint64_t id, int code, const char* message, Sensim__V1__Envelope* env,
                    uint8_t** out, size_t* out_len) CHECKRET;

#endif  // SENSIM_NET_WIRE_PB_H_
