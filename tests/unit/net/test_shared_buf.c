// SPDX-License-Identifier: MIT
// test_shared_buf.c: a shared frame carries its length prefix, is freed by its last release
// whichever thread that is, and changes length only while unshared.
#include "net/shared_buf.h"

#include <pthread.h>
#include <string.h>

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


// The frame's pieces from byte `skip` on, gathered.
static size_t gather(const shared_buf_t* b, size_t skip, uint8_t* out) {
  const uint8_t* p[8];
  size_t n[8];
  uint32_t count = shared_buf_pieces(b, skip, p, n, 8);
  size_t at = 0;
  for (uint32_t i = 0; i < count && i < 8; i++) {
    memcpy(out + at, p[i], n[i]);
    at += n[i];
  }
  return at;
}


TEST(shared_buf_in_pieces_refers_to_blobs_and_holds_them) {
  // own "ab", 3 bytes of blob x, own "cde", 2 bytes of blob y, nothing more: the frame is
  // "ab" x0 x1 x2 "cde" y0 y1 behind its length, and the pieces are those ranges themselves
  int64_t live = mem_live_count();
  blob_t* x = blob_create(8);
  blob_t* y = blob_create(8);
  ASSERT_TRUE(x && y);
  memcpy(blob_data(x), "XYZW", 4);
  memcpy(blob_data(y), "QR", 2);
  shared_buf_t* b = shared_buf_create_pieces(5, 2);
  ASSERT_TRUE(b != NULL);
  memcpy(shared_buf_put(b, 2), "ab", 2);
  ASSERT_OK(shared_buf_put_ref(b, x, blob_data(x), 3));
  memcpy(shared_buf_put(b, 3), "cde", 3);
  ASSERT_OK(shared_buf_put_ref(b, y, blob_data(y), 2));
  ASSERT_OK(shared_buf_put_ref(b, y, blob_data(y), 0));   // nothing: no piece, no reference
  ASSERT_TRUE(shared_buf_put(b, 1) == NULL);              // past the room asked for
  ASSERT_EQ(shared_buf_put_ref(b, x, blob_data(x), 1), -1);   // references used up
  ASSERT_EQ(shared_buf_len(b), 10);
  ASSERT_EQ(shared_buf_frame_len(b), 14);

  uint8_t all[32];
  ASSERT_EQ(gather(b, 0, all), 14);
  ASSERT_MEM_EQ(all, "\x0a\x00\x00\x00" "abXYZcdeQR", 14);
  ASSERT_EQ(gather(b, FRAME_HEADER_BYTES, all), 10);
  ASSERT_MEM_EQ(all, "abXYZcdeQR", 10);
  ASSERT_EQ(gather(b, 7, all), 7);                        // inside the first reference
  ASSERT_MEM_EQ(all, "YZcdeQR", 7);
  const uint8_t* p[8];
  size_t n[8];
  ASSERT_EQ(shared_buf_pieces(b, 0, p, n, 8), 4);
  ASSERT_TRUE(p[1] == blob_data(x) && n[1] == 3 && p[3] == blob_data(y) && n[3] == 2);
  ASSERT_EQ(shared_buf_pieces(b, 0, p, n, 2), 4);          // the count, whatever max

  // what a holder keeps allocated: the frame and both blobs whole, whatever it refers to
  ASSERT_EQ(shared_buf_footprint(b), mem_footprint(b) + blob_footprint(x) + blob_footprint(y));
  ASSERT_TRUE(blob_footprint(x) >= 8 && shared_buf_footprint(b) > shared_buf_memory(b));

  // the frame holds its blobs: they outlive their producer's references
  blob_release(x);
  blob_release(y);
  ASSERT_EQ(gather(b, FRAME_HEADER_BYTES, all), 10);
  ASSERT_MEM_EQ(all, "abXYZcdeQR", 10);
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
