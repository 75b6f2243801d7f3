// SPDX-License-Identifier: MIT
// test_table.c: the id -> slot entity table against a reference array, under random inserts
// and removals (backward-shift deletion, slot reuse, growth), and its failure on OOM.
#include "world/table.h"

#include <stdlib.h>

#include "base/mem.h"
#include "check.h"

typedef struct rec {
  uint32_t id;
  uint32_t payload;
} rec_t;


TEST(table_matches_a_reference_under_random_churn) {
  enum { RANGE = 4096 };
  static uint32_t ref_slot[RANGE];  // TABLE_NONE = absent
  for (int i = 0; i < RANGE; i++) {
    ref_slot[i] = TABLE_NONE;
  }
  table_t t;
  table_init(&t, sizeof(rec_t));
  uint32_t live = 0;
  uint64_t x = 88172645463325252ull;
  for (int step = 0; step < 200000; step++) {
    // xorshift64: a deterministic mix of ids, dense and colliding in the low bits
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint32_t id = 1 + (uint32_t)(x % (RANGE - 1));
    if (ref_slot[id] == TABLE_NONE) {
      ASSERT_OK(table_reserve(&t, 1));
      uint32_t slot = table_insert(&t, id);
      rec_t* r = table_at(&t, slot);
      ASSERT_EQ(r->id, 0);  // zeroed
      r->id = id;
      r->payload = id * 7;
      ref_slot[id] = slot;
      live++;
    } else {
      ASSERT_EQ(table_find(&t, id), ref_slot[id]);
      table_remove(&t, id);
      ref_slot[id] = TABLE_NONE;
      live--;
    }
    ASSERT_EQ(t.count, live);

    // every so often, check every id
    if (step % 20000 == 0) {
      for (uint32_t k = 1; k < RANGE; k++) {
        uint32_t slot = table_find(&t, k);
        ASSERT_EQ(slot, ref_slot[k]);
        if (slot != TABLE_NONE) {
          const rec_t* r = table_get(&t, k);
          ASSERT_EQ(r->id, k);
          ASSERT_EQ(r->payload, k * 7);
          ASSERT_EQ(table_slot_id(&t, slot), k);
        }
      }
    }
  }

  // slots are reused, so the high-water mark stays near the peak population
  ASSERT_TRUE(t.used <= RANGE);
  ASSERT_EQ(table_find(&t, 0), TABLE_NONE);
  ASSERT_TRUE(table_get(&t, RANGE + 5) == NULL);
  table_close(&t);
  return 0;
}


TEST(table_reserve_fails_cleanly_when_allocation_fails) {
  table_t t;
  table_init(&t, sizeof(rec_t));
  int64_t live = mem_live_count();
  for (int64_t n = 1; n <= 5; n++) {
    mem_fail_after(n);
    int rc = table_reserve(&t, 100);
    mem_fail_after(0);
    if (rc == 0) {
      break;
    }
    ASSERT_EQ(rc, ERR_NOMEM);
    ASSERT_EQ(t.count, 0);
  }
  ASSERT_OK(table_reserve(&t, 100));
  for (uint32_t id = 1; id <= 100; id++) {
    table_insert(&t, id * 1000003u);
  }
  for (uint32_t id = 1; id <= 100; id++) {
    ASSERT_NE(table_find(&t, id * 1000003u), TABLE_NONE);
  }
  table_close(&t);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}
