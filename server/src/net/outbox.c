// SPDX-License-Identifier: MIT
// outbox.c: ordered reply slots. A slot knows its outbox until the outbox closes, so a job
// that finishes after its connection is gone frees its slot instead of touching freed memory.
#include "net/outbox.h"

#include "base/mem.h"

struct outbox_slot {
  list_node_t node;          // in ob->slots while the outbox is open
  outbox_t* ob;              // NULL: orphan (the outbox closed)
  uint8_t* payload;
  size_t len;                // bytes of the payload, or of every frame
  shared_buf_t** frames;     // (nframes) a reply of shared frames, instead of payload
  uint32_t nframes;
  uint64_t mem;              // counted in ob->mem_bytes: the slot, and its reply once filled
  int filled;
};


static void free_frames(outbox_slot_t* slot) {
  for (uint32_t i = 0; i < slot->nframes; i++) {
    shared_buf_release(slot->frames[i]);
  }
  mem_free(slot->frames);
  slot->frames = NULL;
  slot->nframes = 0;
}


void outbox_init(outbox_t* ob, outbox_send_fn send, void* user) {
  list_init(&ob->slots);
  ob->nslot = 0;
  ob->held_bytes = 0;
  ob->mem_bytes = 0;
  ob->send = send;
  ob->send_shared = NULL;
  ob->user = user;
  ob->spare_slots = (spares_t){0};
}


void outbox_set_send_shared(outbox_t* ob, outbox_send_shared_fn send_shared) {
  ob->send_shared = send_shared;
}


outbox_slot_t* outbox_reserve(outbox_t* ob) {
  outbox_slot_t* slot = spares_take(&ob->spare_slots, sizeof(*slot));
  if (!slot) {
    return NULL;
  }
  slot->ob = ob;
  slot->mem = mem_footprint(slot);
  list_push_back(&ob->slots, &slot->node);
  ob->nslot++;
  ob->mem_bytes += slot->mem;
  return slot;
}


// Send (or drop) every filled slot at the head.
static void flush(outbox_t* ob) {
  list_node_t* n;
  while ((n = list_front(&ob->slots)) != NULL) {
    outbox_slot_t* slot = container_of(n, outbox_slot_t, node);
    if (!slot->filled) {
      return;
    }
    list_remove(n);
    ob->nslot--;
    ob->held_bytes -= slot->len;
    ob->mem_bytes -= slot->mem;
    if (slot->payload) {
      ob->send(ob->user, slot->payload, slot->len);
    }
    for (uint32_t i = 0; i < slot->nframes && ob->send_shared; i++) {
      ob->send_shared(ob->user, slot->frames[i]);
    }
    free_frames(slot);
    spares_give(&ob->spare_slots, slot);
  }
}


void outbox_fill(outbox_slot_t* slot, uint8_t* payload, size_t len) {
  outbox_t* ob = slot->ob;
  if (!ob) {
    mem_free(payload);
    mem_free(slot);
    return;
  }
  slot->payload = payload;
  slot->len = payload ? len : 0;
  slot->filled = 1;
  ob->held_bytes += slot->len;
  slot->mem += mem_footprint(payload);
  ob->mem_bytes += mem_footprint(payload);
  flush(ob);
}


void outbox_fill_shared(outbox_slot_t* slot, shared_buf_t** frames, uint32_t n) {
  outbox_t* ob = slot->ob;
  slot->frames = frames;
  slot->nframes = n;
  if (!ob) {
    free_frames(slot);
    mem_free(slot);
    return;
  }
  slot->len = 0;
  uint64_t mem = mem_footprint(frames);
  for (uint32_t i = 0; i < n; i++) {
    slot->len += shared_buf_len(frames[i]);
    mem += shared_buf_footprint(frames[i]);
  }
  slot->filled = 1;
  ob->held_bytes += slot->len;

  // what the frames hold: themselves and the buffers they refer to (a step's clouds)
  slot->mem += mem;
  ob->mem_bytes += mem;
  flush(ob);
}


int outbox_put(outbox_t* ob, uint8_t* payload, size_t len) {
  if (list_is_empty(&ob->slots)) {
    ob->send(ob->user, payload, len);
    return 0;
  }
  outbox_slot_t* slot = outbox_reserve(ob);
  if (!slot) {
    mem_free(payload);
    return ERR_NOMEM;
  }
  outbox_fill(slot, payload, len);
  return 0;
}


int outbox_is_empty(const outbox_t* ob) {
  return list_is_empty(&ob->slots);
}


void outbox_close(outbox_t* ob) {
  list_node_t* n;
  while ((n = list_front(&ob->slots)) != NULL) {
    outbox_slot_t* slot = container_of(n, outbox_slot_t, node);
    list_remove(n);
    if (slot->filled) {
      mem_free(slot->payload);
      free_frames(slot);
      mem_free(slot);
    } else {
      slot->ob = NULL;
    }
  }
  ob->nslot = 0;
  ob->held_bytes = 0;
  ob->mem_bytes = 0;
  spares_drop(&ob->spare_slots);
}
