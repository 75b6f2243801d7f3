// SPDX-License-Identifier: MIT
// wire_tick.h: private to the protobuf adapter (net/wire*.c): the hand decoder of a lock-step
// tick's two requests, an Envelope holding an UpdateState or a Step, into protobuf-c's structs.
#ifndef SENSIM_NET_WIRE_TICK_H_
#define SENSIM_NET_WIRE_TICK_H_

#include <stddef.h>
#include <stdint.h>

#include "net/wire_pb.h"

// Decode payload p (n bytes) into *out, every part taken from a (as protobuf-c would take them,
// so that sensim__v1__envelope__free_unpacked with a releases them). Only the plain form of a
// tick's request: the Envelope's id and sequence and one update_state or step, each field of
// each message at most once, with its own wire type, packed repeated fields, bytes and packed
// fields not empty, varints in their shortest form, no unknown field. Returns 1 when decoded,
// 0 for anything else (nothing is left allocated): then protobuf-c decodes it as always, so
// that what is accepted and refused, and how, stays protobuf-c's.
int wire_tick_decode(const uint8_t* p, size_t n, ProtobufCAllocator* a,
                     Sensim__V1__Envelope** out);

#endif  // SENSIM_NET_WIRE_TICK_H_
