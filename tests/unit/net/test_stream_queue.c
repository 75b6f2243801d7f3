// SPDX-License-Identifier: MIT
// test_stream_queue.c: a subscription's frame queue keeps order, drops the oldest frames to
// respect its frame and byte bounds, refuses a frame that can never fit, and holds its own
// references.
#include "net/stream_queue.h"

#include "base/mem.h"
#include "check.h"
#include "net/frame.h"


// A frame whose payload is len bytes, the first one being tag.
static shared_buf_t* tagged(size_t len, uint8_t tag) {
  shared_buf_t* b = shared_buf_create(len);
  if (b && len) {
    memset(shared_buf_payload(b), 0, len);
    shared_buf_payload(b)[0] = tag;
  }
  return b;
}


static int tag_of(shared_buf_t* b) {
  return shared_buf_frame(b)[FRAME_HEADER_BYTES];
}


TEST(stream_queue_keeps_order_and_drops_oldest_past_frame_bound) {
  int64_t live = mem_live_count();
  stream_queue_t q;
  ASSERT_OK(stream_queue_init(&q, 3, 0));
  for (int i = 1; i <= 5; i++) {
    shared_buf_t* b = tagged(10, (uint8_t)i);
    ASSERT_TRUE(b != NULL);
    ASSERT_OK(stream_queue_push(&q, b));
    shared_buf_release(b);               // the queue holds its own reference
  }
  ASSERT_EQ(q.count, 3);
  ASSERT_EQ(q.dropped, 2);
  ASSERT_EQ(q.bytes, 3 * (10 + FRAME_HEADER_BYTES));
  for (int want = 3; want <= 5; want++) {
    shared_buf_t* b = stream_queue_pop(&q);
    ASSERT_TRUE(b != NULL);
    ASSERT_EQ(tag_of(b), want);
    shared_buf_release(b);
  }
  ASSERT_TRUE(stream_queue_pop(&q) == NULL);
  ASSERT_EQ(q.bytes, 0);
  stream_queue_close(&q);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(stream_queue_byte_bound_drops_as_many_as_needed) {
  int64_t live = mem_live_count();
  stream_queue_t q;
  ASSERT_OK(stream_queue_init(&q, 100, 100));   // frames of 20 + 4 bytes: 4 fit
  for (int i = 1; i <= 4; i++) {
    shared_buf_t* b = tagged(20, (uint8_t)i);
    ASSERT_OK(stream_queue_push(&q, b));
    shared_buf_release(b);
  }
  ASSERT_EQ(q.count, 4);
  ASSERT_EQ(q.dropped, 0);

  // 60 + 4 bytes: three of the oldest go (96 - 72 + 64 = 88 <= 100)
  shared_buf_t* big = tagged(60, 9);
  ASSERT_OK(stream_queue_push(&q, big));
  shared_buf_release(big);
  ASSERT_EQ(q.dropped, 3);
  ASSERT_EQ(q.count, 2);
  ASSERT_EQ(q.bytes, 24 + 64);
  shared_buf_t* b = stream_queue_pop(&q);
  ASSERT_EQ(tag_of(b), 4);
  shared_buf_release(b);

  // larger than the bound alone: refused, nothing else changes
  shared_buf_t* huge = tagged(97, 7);
  ASSERT_EQ(stream_queue_push(&q, huge), ERR_LIMIT);
  ASSERT_EQ(q.count, 1);
  ASSERT_EQ(q.dropped, 4);
  ASSERT_EQ(shared_buf_is_shared(huge), 0);
  shared_buf_release(huge);

  // close releases what is left
  stream_queue_close(&q);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(stream_queue_one_frame_shared_by_several_queues) {
  int64_t live = mem_live_count();
  stream_queue_t q[3];
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(stream_queue_init(&q[i], 2, 0));
  }
  shared_buf_t* b = tagged(1000, 42);
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(stream_queue_push(&q[i], b));
  }
  shared_buf_release(b);

  // every queue sends the same bytes (no copy); the last holder frees them
  const uint8_t* frame = shared_buf_frame(b);
  for (int i = 0; i < 3; i++) {
    shared_buf_t* got = stream_queue_pop(&q[i]);
    ASSERT_TRUE(got == b && shared_buf_frame(got) == frame);
    shared_buf_release(got);
  }
  ASSERT_EQ(mem_live_count(), live + 3);       // three rings
  for (int i = 0; i < 3; i++) {
    stream_queue_close(&q[i]);
  }
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(stream_queue_init_refuses_zero_frames_and_fails_cleanly) {
  int64_t live = mem_live_count();
  stream_queue_t q;
  ASSERT_EQ(stream_queue_init(&q, 0, 0), ERR_INVAL);
  mem_fail_after(1);
  ASSERT_EQ(stream_queue_init(&q, 4, 0), ERR_NOMEM);
  mem_fail_after(0);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}
