// SPDX-License-Identifier: MIT
// test_shared_buf.c: a shared frame carries its length prefix, is freed by its last release
// whichever thread that is, and changes length only while unshared.
#include "net/shared_buf.h"

#include <pthread.h>

#include "base/mem.h"
#include "check.h"
#include "net/frame.h"


TEST(shared_buf_frame_is_length_prefix_then_payload) {
  int64_t live = mem_live_count();
  shared_buf_t* b = shared_buf_create(300);
  ASSERT_TRUE(b != NULL);
  ASSERT_EQ(shared_buf_len(b), 300);
  ASSERT_EQ(shared_buf_frame_len(b), 304);
  ASSERT_TRUE(shared_buf_memory(b) >= 304);
  uint8_t* p = shared_buf_payload(b);
  for (int i = 0; i < 300; i++) {
    p[i] = (uint8_t)(i * 7);
  }

  // 300 = 0x12c, little-endian
  const uint8_t* f = shared_buf_frame(b);
  static const uint8_t header[4] = {0x2c, 0x01, 0x00, 0x00};
  ASSERT_MEM_EQ(f, header, 4);
  ASSERT_TRUE(f + FRAME_HEADER_BYTES == p);
  ASSERT_EQ(f[4 + 299], (uint8_t)(299 * 7));

  // shrink after encoding: the header follows
  shared_buf_set_len(b, 5);
  static const uint8_t header5[4] = {5, 0, 0, 0};
  ASSERT_MEM_EQ(shared_buf_frame(b), header5, 4);
  ASSERT_EQ(shared_buf_frame_len(b), 9);
  shared_buf_release(b);
  shared_buf_release(NULL);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(shared_buf_zero_length_and_refused_sizes) {
  int64_t live = mem_live_count();
  shared_buf_t* b = shared_buf_create(0);
  ASSERT_TRUE(b != NULL);
  ASSERT_EQ(shared_buf_frame_len(b), FRAME_HEADER_BYTES);
  shared_buf_release(b);
  ASSERT_TRUE(shared_buf_create((size_t)UINT32_MAX + 1) == NULL);
  mem_fail_after(1);
  ASSERT_TRUE(shared_buf_create(10) == NULL);
  mem_fail_after(0);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(shared_buf_last_release_frees) {
  int64_t live = mem_live_count();
  shared_buf_t* b = shared_buf_create(16);
  ASSERT_TRUE(b != NULL);
  ASSERT_EQ(shared_buf_is_shared(b), 0);
  ASSERT_TRUE(shared_buf_retain(b) == b);
  ASSERT_TRUE(shared_buf_retain(b) == b);
  ASSERT_EQ(shared_buf_is_shared(b), 1);
  shared_buf_release(b);
  shared_buf_release(b);
  ASSERT_EQ(shared_buf_is_shared(b), 0);
  ASSERT_TRUE(mem_live_count() == live + 1);
  shared_buf_release(b);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


enum { NHOLDER = 8, NROUND = 20000 };

typedef struct holder {
  shared_buf_t* b;
  pthread_barrier_t* start;
  uint64_t sum;          // of the payload bytes read on each round
} holder_t;


// Each thread starts with one reference of its own, takes and drops more while reading the
// payload, and drops its own reference at the end: whichever thread is last frees.
static void* holder_main(void* arg) {
  holder_t* h = arg;
  pthread_barrier_wait(h->start);
  for (int r = 0; r < NROUND; r++) {
    shared_buf_t* b = shared_buf_retain(h->b);
    h->sum += shared_buf_frame(b)[FRAME_HEADER_BYTES + (size_t)r % 64];
    shared_buf_release(b);
  }
  shared_buf_release(h->b);
  return NULL;
}


TEST(shared_buf_is_released_from_many_threads) {
  int64_t live = mem_live_count();
  for (int trial = 0; trial < 20; trial++) {
    shared_buf_t* b = shared_buf_create(64);
    ASSERT_TRUE(b != NULL);
    uint8_t* p = shared_buf_payload(b);
    for (int i = 0; i < 64; i++) {
      p[i] = 1;
    }
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NHOLDER);
    holder_t h[NHOLDER];
    pthread_t th[NHOLDER];
    for (int i = 0; i < NHOLDER; i++) {
      h[i] = (holder_t){.b = i == 0 ? b : shared_buf_retain(b), .start = &start};
    }
    for (int i = 0; i < NHOLDER; i++) {
      ASSERT_EQ(pthread_create(&th[i], NULL, holder_main, &h[i]), 0);
    }
    for (int i = 0; i < NHOLDER; i++) {
      pthread_join(th[i], NULL);
      ASSERT_EQ(h[i].sum, NROUND);
    }
    pthread_barrier_destroy(&start);
    ASSERT_EQ(mem_live_count(), live);
  }
  return 0;
}
