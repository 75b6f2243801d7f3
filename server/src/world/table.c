// SPDX-License-Identifier: MIT
// table.c: stable-slot entity storage with an open-addressing id -> slot hash map (linear
// probing, backward-shift deletion, so there are no tombstones and probes stay short).
#include "world/table.h"

#include <string.h>

#include "base/mem.h"


void table_init(table_t* t, size_t elem_size) {
  memset(t, 0, sizeof(*t));
  t->elem_size = elem_size;
}


void table_close(table_t* t) {
  mem_free(t->records);
  mem_free(t->slot_id);
  mem_free(t->free_slots);
  mem_free(t->map_key);
  mem_free(t->map_slot);
  size_t elem_size = t->elem_size;
  table_init(t, elem_size);
}


// Put (id, slot) into a map known to have room and not to contain id.
static void map_put(uint32_t* keys, uint32_t* slots, uint32_t cap, uint32_t id, uint32_t slot) {
  uint32_t mask = cap - 1;
  uint32_t i = table_hash(id, mask);
  while (keys[i] != 0) {
    i = (i + 1) & mask;
  }
  keys[i] = id;
  slots[i] = slot;
}


static int grow_map(table_t* t, uint32_t need) {
  // keep the load factor at or below one half
  uint64_t want = (uint64_t)need * 2;
  if (want <= t->map_cap) {
    return 0;
  }
  uint64_t cap = t->map_cap ? t->map_cap : 16;
  while (cap < want) {
    cap *= 2;
  }
  if (cap > (1ull << 31)) {
    return ERR_NOMEM;
  }

  // rehash into fresh arrays; the old map stays valid until both allocations succeed
  uint32_t* keys = mem_calloc((size_t)cap, sizeof(uint32_t));
  uint32_t* slots = mem_alloc((size_t)cap * sizeof(uint32_t));
  if (!keys || !slots) {
    mem_free(keys);
    mem_free(slots);
    return ERR_NOMEM;
  }
  for (uint32_t i = 0; i < t->map_cap; i++) {
    if (t->map_key[i] != 0) {
      map_put(keys, slots, (uint32_t)cap, t->map_key[i], t->map_slot[i]);
    }
  }
  mem_free(t->map_key);
  mem_free(t->map_slot);
  t->map_key = keys;
  t->map_slot = slots;
  t->map_cap = (uint32_t)cap;
  return 0;
}


static int grow_slots(table_t* t, uint32_t need) {
  if (need <= t->cap) {
    return 0;
  }
  uint64_t cap = t->cap ? t->cap : 8;
  while (cap < need) {
    cap *= 2;
  }
  if (cap > UINT32_MAX - 1) {
    return ERR_NOMEM;
  }

  // grow the three arrays one by one; a failure leaves the earlier ones larger (harmless)
  uint8_t* records = mem_realloc(t->records, (size_t)cap * t->elem_size);
  if (!records) {
    return ERR_NOMEM;
  }
  t->records = records;
  uint32_t* ids = mem_realloc(t->slot_id, (size_t)cap * sizeof(uint32_t));
  if (!ids) {
    return ERR_NOMEM;
  }
  t->slot_id = ids;
  uint32_t* free_slots = mem_realloc(t->free_slots, (size_t)cap * sizeof(uint32_t));
  if (!free_slots) {
    return ERR_NOMEM;
  }
  t->free_slots = free_slots;
  t->cap = (uint32_t)cap;
  return 0;
}


int table_reserve(table_t* t, uint32_t extra) {
  uint64_t need = (uint64_t)t->count + extra;
  if (need >= UINT32_MAX) {
    return ERR_NOMEM;
  }

  // slots: free ones are reused first, then fresh ones past `used`
  uint64_t fresh = extra > t->nfree ? extra - t->nfree : 0;
  int rc = grow_slots(t, (uint32_t)(t->used + fresh));
  if (rc == 0) {
    rc = grow_map(t, (uint32_t)need);
  }
  return rc;
}


uint32_t table_slot_id(const table_t* t, uint32_t slot) {
  return t->slot_id[slot];
}


uint32_t table_insert(table_t* t, uint32_t id) {
  uint32_t slot = t->nfree > 0 ? t->free_slots[--t->nfree] : t->used++;
  t->slot_id[slot] = id;
  memset(table_at(t, slot), 0, t->elem_size);
  map_put(t->map_key, t->map_slot, t->map_cap, id, slot);
  t->count++;
  return slot;
}


void table_remove(table_t* t, uint32_t id) {
  uint32_t mask = t->map_cap - 1;
  uint32_t i = table_hash(id, mask);
  while (t->map_key[i] != id) {
    i = (i + 1) & mask;
  }
  uint32_t slot = t->map_slot[i];

  // backward-shift: move later members of the probe run into the hole when their home
  // position does not lie cyclically within (hole, j]
  uint32_t hole = i;
  for (uint32_t j = (i + 1) & mask; t->map_key[j] != 0; j = (j + 1) & mask) {
    uint32_t home = table_hash(t->map_key[j], mask);
    int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!stays) {
      t->map_key[hole] = t->map_key[j];
      t->map_slot[hole] = t->map_slot[j];
      hole = j;
    }
  }
  t->map_key[hole] = 0;

  // release the slot
  t->slot_id[slot] = 0;
  t->free_slots[t->nfree++] = slot;
  t->count--;
}
