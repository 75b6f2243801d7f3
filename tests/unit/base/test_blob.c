// SPDX-License-Identifier: MIT
// test_blob.c: a blob is freed by its last release, tells its writer when it holds the only
// reference, keeps its bytes when it grows, and fails cleanly when memory is short.
#include "base/blob.h"

#include <stdalign.h>
#include <string.h>

#include "base/mem.h"
#include "check.h"


TEST(blob_last_release_frees_and_exclusive_follows_the_count) {
  int64_t live = mem_live_count();
  blob_t* b = blob_create(100);
  ASSERT_TRUE(b != NULL);
  ASSERT_EQ(blob_cap(b), 100);
  ASSERT_EQ((uintptr_t)blob_data(b) % alignof(max_align_t), 0);
  ASSERT_TRUE(blob_is_exclusive(b));
  ASSERT_TRUE(blob_retain(b) == b);
  ASSERT_TRUE(!blob_is_exclusive(b));
  blob_release(b);
  ASSERT_TRUE(blob_is_exclusive(b));
  ASSERT_EQ(mem_live_count(), live + 1);
  blob_release(b);
  blob_release(NULL);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(blob_resize_keeps_the_bytes_and_fails_cleanly) {
  int64_t live = mem_live_count();
  blob_t* b = blob_create(16);
  ASSERT_TRUE(b != NULL);
  for (int i = 0; i < 16; i++) {
    blob_data(b)[i] = (uint8_t)(3 * i);
  }
  ASSERT_OK(blob_resize(&b, 1 << 20));
  ASSERT_EQ(blob_cap(b), 1 << 20);
  for (int i = 0; i < 16; i++) {
    ASSERT_EQ(blob_data(b)[i], (uint8_t)(3 * i));
  }
  mem_fail_after(1);
  blob_t* before = b;
  ASSERT_EQ(blob_resize(&b, 2 << 20), -1);
  mem_fail_after(0);
  ASSERT_TRUE(b == before && blob_cap(b) == 1 << 20 && blob_data(b)[15] == 45);
  ASSERT_OK(blob_resize(&b, 8));
  ASSERT_EQ(blob_data(b)[7], 21);
  blob_release(b);
  mem_fail_after(1);
  ASSERT_TRUE(blob_create(10) == NULL);
  mem_fail_after(0);
  ASSERT_TRUE(blob_create(SIZE_MAX) == NULL);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}
