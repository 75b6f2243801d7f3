// SPDX-License-Identifier: MIT
// outbox.c: ordered reply slots. A slot knows its outbox until the outbox closes, so a job
// that finishes after its connection is gone frees its slot instead of touching freed memory.
#include "net/outbox.h"

#include "base/mem.h"

struct outbox_slot {
  list_node_t node;          // in ob->slots while the outbox is open
  outbox_t* ob;              // NULL: orphan (the outbox closed)
  uint8_t* payload;
  size_t len;
  uint64_t mem;              // counted in ob->mem_bytes: the slot, and its payload once filled
  int filled;
};


void outbox_init(outbox_t* ob, outbox_send_fn send, void* user) {
  list_init(&ob->slots);
  ob->nslot = 0;
  ob->held_bytes = 0;
  ob->mem_bytes = 0;
  ob->send = send;
  ob->user = user;
}


outbox_slot_t* outbox_reserve(outbox_t* ob) {
  outbox_slot_t* slot = mem_calloc(1, sizeof(*slot));
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
    mem_free(slot);
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
      mem_free(slot);
    } else {
      slot->ob = NULL;
    }
  }
  ob->nslot = 0;
  ob->held_bytes = 0;
  ob->mem_bytes = 0;
}
