// SPDX-License-Identifier: MIT
// outbox.h: the replies of one connection, kept in request order. A request reserves a slot
// when it arrives; the slot is filled when its reply is ready (at once, or when a job on the
// environment's queue finishes); the filled slots at the head leave through the send callback.
// Replies that are ready but wait behind an unfinished one are counted, for back-pressure, and
// the memory of the slots and of those replies, for the daemon's budget.
//
// Thread: loop thread. No I/O and no protocol here: the owner supplies `send`.
#ifndef SENSIM_NET_OUTBOX_H_
#define SENSIM_NET_OUTBOX_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/list.h"
#include "base/spares.h"
#include "net/shared_buf.h"

typedef struct outbox outbox_t;
typedef struct outbox_slot outbox_slot_t;

// Send one reply; takes ownership of payload (a mem_alloc'ed buffer).
typedef void (*outbox_send_fn)(void* user, uint8_t* payload, size_t len);

// Send one frame of a reply that is a shared frame (net/shared_buf.h); borrowed for the call.
typedef void (*outbox_send_shared_fn)(void* user, shared_buf_t* frame);

struct outbox {
  list_t slots;              // reserved and not yet sent, in request order
  uint32_t nslot;
  uint64_t held_bytes;       // bytes of filled slots waiting behind an unfilled one
  uint64_t mem_bytes;        // memory of the slots and of those replies (allocator included;
                             // shared frames with the buffers they refer to)
  outbox_send_fn send;
  outbox_send_shared_fn send_shared;  // nullable until outbox_set_send_shared
  void* user;
  // Slots sent, kept for the next reservations: a connection in lock-step reserves and sends
  // a slot or two per request, and takes them from here rather than the heap. Not counted in
  // mem_bytes; dropped by outbox_close.
  spares_t spare_slots;
};

void outbox_init(outbox_t* ob, outbox_send_fn send, void* user);

// How the frames of outbox_fill_shared leave (the same user).
void outbox_set_send_shared(outbox_t* ob, outbox_send_shared_fn send_shared);

// Reserve the next reply slot; NULL when out of memory.
outbox_slot_t* outbox_reserve(outbox_t* ob);

// Fill a reserved slot and send every filled slot at the head. payload NULL: the request gets
// no reply (its slot is dropped). Takes ownership of payload. After outbox_close the slot is an
// orphan: it and the payload are freed and nothing is sent.
void outbox_fill(outbox_slot_t* slot, uint8_t* payload, size_t len);

// Fill a reserved slot with a reply of n frames (a step's parts, then its StepDone), sent in
// order through send_shared when the slot's turn comes. Takes ownership of the array frames
// (mem_alloc'ed) and of one reference to each frame. While they wait, mem_bytes counts the
// array and each frame's footprint (shared_buf_footprint). After outbox_close: freed, nothing
// sent.
void outbox_fill_shared(outbox_slot_t* slot, shared_buf_t** frames, uint32_t n);

// A reply ready now: sent at once when nothing waits before it, else queued behind. Takes
// ownership of payload; ERR_NOMEM (payload freed) when it cannot be queued.
int outbox_put(outbox_t* ob, uint8_t* payload, size_t len) CHECKRET;

// Nothing reserved or waiting.
int outbox_is_empty(const outbox_t* ob);

// The connection is gone: filled slots (and the spare) are freed; unfilled ones become
// orphans, freed by their outbox_fill.
void outbox_close(outbox_t* ob);

#endif  // SENSIM_NET_OUTBOX_H_
