// SPDX-License-Identifier: MIT
// table.h: entity storage keyed by uint32 id: records in stable slots (a slot keeps its index
// until the entity is removed) plus an open-addressing hash map id -> slot, so lookups are
// O(1) on average. Id 0 never names a stored entity in the map.
//
// Inserting is two-phase so that a caller can reserve memory before touching anything else:
// table_reserve() may fail with ERR_NOMEM; the table_insert() that follows cannot fail.
// Record pointers are invalidated by table_reserve (the slot array may move); slot indices
// are not.
#ifndef SENSIM_WORLD_TABLE_H_
#define SENSIM_WORLD_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define TABLE_NONE UINT32_MAX  // "no slot"

typedef struct table {
  // slots
  uint8_t* records;      // record storage (cap x elem_size bytes)
  uint32_t* slot_id;     // id stored in each slot, 0 = free (cap)
  uint32_t* free_slots;  // stack of free slot indices below `used` (nfree)
  uint32_t nfree;
  uint32_t used;         // slots [0, used) have been handed out at least once
  uint32_t cap;          // slots allocated
  uint32_t count;        // live entities
  size_t elem_size;      // bytes per record

  // id -> slot map: linear probing, backward-shift deletion, load <= 1/2
  uint32_t* map_key;     // id, 0 = empty (map_cap)
  uint32_t* map_slot;    // slot of map_key (map_cap)
  uint32_t map_cap;      // power of two, or 0
} table_t;

void table_init(table_t* t, size_t elem_size);
void table_close(table_t* t);

// Make sure `extra` more entities can be inserted without allocating. ERR_NOMEM on failure
// (the table is unchanged). Invalidates record pointers.
int table_reserve(table_t* t, uint32_t extra) CHECKRET;

// Insert id (> 0, not present) after a successful reserve; returns its slot. The record is
// zeroed.
uint32_t table_insert(table_t* t, uint32_t id);

// The lookups below are inline: a state update looks up every body it names, and a call
// each cost about as much as the lookup itself.

// Position of a key in a power-of-two map: the murmur3 32-bit finaliser, so that sequential
// ids spread over the whole table.
static inline uint32_t table_hash(uint32_t id, uint32_t mask) {
  uint32_t h = id;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h & mask;
}

// Slot of id, or TABLE_NONE.
static inline uint32_t table_find(const table_t* t, uint32_t id) {
  if (id == 0 || t->map_cap == 0) {
    return TABLE_NONE;
  }
  uint32_t mask = t->map_cap - 1;
  for (uint32_t i = table_hash(id, mask);; i = (i + 1) & mask) {
    if (t->map_key[i] == id) {
      return t->map_slot[i];
    }
    if (t->map_key[i] == 0) {
      return TABLE_NONE;
    }
  }
}

// Record in a live slot.
static inline void* table_at(const table_t* t, uint32_t slot) {
  return t->records + (size_t)slot * t->elem_size;
}

// Record of id, or NULL.
static inline void* table_get(const table_t* t, uint32_t id) {
  uint32_t slot = table_find(t, id);
  return slot == TABLE_NONE ? NULL : table_at(t, slot);
}

// Id in a slot (0 when the slot is free). slot < t->used.
uint32_t table_slot_id(const table_t* t, uint32_t slot);

// Whether `slot` (any value, TABLE_NONE included) is where id (> 0 for a true answer) is
// stored: the check of a slot remembered from an earlier lookup, which a removal or a reuse of
// the slot may have made stale. An id is stored in one slot at most, so a true answer gives
// what table_find would, at a load and two comparisons instead of a hash and a probe.
static inline int table_holds(const table_t* t, uint32_t slot, uint32_t id) {
  return id != 0 && slot < t->used && t->slot_id[slot] == id;
}

// Remove id (present); its slot is reused by a later insert.
void table_remove(table_t* t, uint32_t id);

#endif  // SENSIM_WORLD_TABLE_H_
