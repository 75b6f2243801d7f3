// SPDX-License-Identifier: MIT
// test_outbox.c: ordered reply slots: order whatever the fill order, held-back bytes and the
// memory they take (plain payloads and replies of shared frames), dropped replies, and orphaned
// slots after close.
#include "net/outbox.h"

#include <string.h>

#include "base/blob.h"
#include "base/mem.h"
#include "check.h"

typedef struct sink {
  int sent[64];
  int n;
} sink_t;


static void sink_send(void* user, uint8_t* payload, size_t len) {
  sink_t* k = user;
  (void)len;
  k->sent[k->n++] = payload[0];
  mem_free(payload);
}


static uint8_t* byte(int v) {
  uint8_t* p = mem_alloc(1);
  p[0] = (uint8_t)v;
  return p;
}


TEST(outbox_sends_in_reservation_order_whatever_the_fill_order) {
  int64_t live = mem_live_count();
  sink_t k = {{0}, 0};
  outbox_t ob;
  outbox_init(&ob, sink_send, &k);
  outbox_slot_t* a = outbox_reserve(&ob);
  outbox_slot_t* b = outbox_reserve(&ob);
  ASSERT_OK(outbox_put(&ob, byte(3), 1));  // ready at once, but behind a and b
  outbox_slot_t* c = outbox_reserve(&ob);
  ASSERT_EQ(ob.nslot, 4);
  ASSERT_EQ(ob.held_bytes, 1);

  outbox_fill(c, byte(4), 1);
  outbox_fill(b, byte(2), 1);
  ASSERT_EQ(k.n, 0);
  ASSERT_EQ(ob.held_bytes, 3);
  outbox_fill(a, byte(1), 1);
  ASSERT_EQ(k.n, 4);
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(k.sent[i], i + 1);
  }
  ASSERT_TRUE(outbox_is_empty(&ob));
  ASSERT_EQ(ob.held_bytes, 0);

  // nothing waiting: a ready reply leaves at once
  ASSERT_OK(outbox_put(&ob, byte(9), 1));
  ASSERT_EQ(k.n, 5);
  outbox_close(&ob);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(outbox_dropped_reply_lets_the_next_one_go) {
  sink_t k = {{0}, 0};
  outbox_t ob;
  outbox_init(&ob, sink_send, &k);
  outbox_slot_t* a = outbox_reserve(&ob);
  ASSERT_OK(outbox_put(&ob, byte(2), 1));
  outbox_fill(a, NULL, 0);
  ASSERT_EQ(k.n, 1);
  ASSERT_EQ(k.sent[0], 2);
  ASSERT_TRUE(outbox_is_empty(&ob));
  outbox_close(&ob);  // frees the slot kept for the next reservation
  return 0;
}


TEST(outbox_slots_filled_after_close_are_freed_not_sent) {
  int64_t live = mem_live_count();
  sink_t k = {{0}, 0};
  outbox_t ob;
  outbox_init(&ob, sink_send, &k);
  outbox_slot_t* a = outbox_reserve(&ob);
  ASSERT_OK(outbox_put(&ob, byte(2), 1));
  outbox_close(&ob);
  ASSERT_TRUE(outbox_is_empty(&ob));
  outbox_fill(a, byte(1), 1);  // the job finished after its connection left
  ASSERT_EQ(k.n, 0);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(outbox_counts_the_memory_of_its_slots_and_of_the_replies_held_back) {
  int64_t live = mem_live_count();
  sink_t k = {{0}, 0};
  outbox_t ob;
  outbox_init(&ob, sink_send, &k);
  outbox_slot_t* a = outbox_reserve(&ob);
  uint64_t slot = ob.mem_bytes;
  ASSERT_TRUE(slot > sizeof(list_node_t));

  // a 1-byte reply waiting behind a counts the allocator's share too, not one byte
  uint8_t* p = byte(2);
  size_t block = mem_footprint(p);
  ASSERT_TRUE(block > 1);
  ASSERT_OK(outbox_put(&ob, p, 1));
  ASSERT_EQ(ob.held_bytes, 1);
  ASSERT_EQ(ob.mem_bytes, 2 * slot + block);

  // everything leaves: nothing is counted; a closed outbox counts nothing either
  outbox_fill(a, byte(1), 1);
  ASSERT_EQ(k.n, 2);
  ASSERT_EQ(ob.mem_bytes, 0);
  outbox_slot_t* b = outbox_reserve(&ob);
  ASSERT_EQ(ob.mem_bytes, slot);
  outbox_close(&ob);
  ASSERT_EQ(ob.mem_bytes, 0);
  outbox_fill(b, NULL, 0);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


// Shared frames sent: each one's first payload byte.
static void sink_send_shared(void* user, shared_buf_t* frame) {
  sink_t* k = user;
  const uint8_t* p[4];
  size_t n[4];
  shared_buf_pieces(frame, 4, p, n, 4);
  k->sent[k->n++] = p[0][0];
}


// A frame of one own byte v and 100 bytes referred to in a blob of 64 KiB.
static shared_buf_t* shared_frame(int v) {
  blob_t* x = blob_create(64u << 10);
  shared_buf_t* b = shared_buf_create_pieces(1, 1);
  if (!x || !b) {
    blob_release(x);
    shared_buf_release(b);
    return NULL;
  }
  *shared_buf_put(b, 1) = (uint8_t)v;
  int rc = shared_buf_put_ref(b, x, blob_data(x), 100);
  blob_release(x);
  if (rc != 0) {
    shared_buf_release(b);
    return NULL;
  }
  return b;
}


TEST(outbox_counts_a_reply_of_shared_frames_at_what_they_hold) {
  int64_t live = mem_live_count();
  sink_t k = {{0}, 0};
  outbox_t ob;
  outbox_init(&ob, sink_send, &k);
  outbox_set_send_shared(&ob, sink_send_shared);
  outbox_slot_t* a = outbox_reserve(&ob);
  outbox_slot_t* b = outbox_reserve(&ob);
  uint64_t slots = ob.mem_bytes;

  // two frames waiting behind a: 101 bytes each for back-pressure, but what they hold for the
  // budget: the array, the frames and their blobs whole (64 KiB each, not the 100 bytes used)
  shared_buf_t** frames = mem_alloc(2 * sizeof(*frames));
  ASSERT_TRUE(frames != NULL);
  frames[0] = shared_frame(7);
  frames[1] = shared_frame(8);
  ASSERT_TRUE(frames[0] && frames[1]);
  uint64_t held = mem_footprint(frames) + shared_buf_footprint(frames[0]) +
                  shared_buf_footprint(frames[1]);
  ASSERT_TRUE(shared_buf_footprint(frames[0]) > (64u << 10));
  outbox_fill_shared(b, frames, 2);
  ASSERT_EQ(k.n, 0);
  ASSERT_EQ(ob.held_bytes, 202);
  ASSERT_EQ(ob.mem_bytes, slots + held);

  // they leave in order once a is filled; nothing is counted any more
  outbox_fill(a, byte(1), 1);
  ASSERT_EQ(k.n, 3);
  ASSERT_EQ(k.sent[0], 1);
  ASSERT_EQ(k.sent[1], 7);
  ASSERT_EQ(k.sent[2], 8);
  ASSERT_EQ(ob.held_bytes, 0);
  ASSERT_EQ(ob.mem_bytes, 0);

  // held back, then the connection goes: freed, nothing counted; after close, an orphan's
  // frames are freed too
  outbox_slot_t* c = outbox_reserve(&ob);
  outbox_slot_t* d = outbox_reserve(&ob);
  frames = mem_alloc(sizeof(*frames));
  ASSERT_TRUE(frames != NULL);
  frames[0] = shared_frame(9);
  outbox_fill_shared(d, frames, 1);
  ASSERT_TRUE(ob.mem_bytes > (64u << 10));
  outbox_close(&ob);
  ASSERT_EQ(ob.mem_bytes, 0);
  frames = mem_alloc(sizeof(*frames));
  ASSERT_TRUE(frames != NULL);
  frames[0] = shared_frame(10);
  outbox_fill_shared(c, frames, 1);
  ASSERT_EQ(k.n, 3);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}
