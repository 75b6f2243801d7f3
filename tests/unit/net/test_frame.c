// SPDX-License-Identifier: MIT
// test_frame.c: the framing parser under every split of a valid stream, bad lengths and
// garbage.
#include "net/frame.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

// Build a stream of `n` frames whose payloads are 1..n bytes of distinct values.
static size_t make_stream(uint8_t* out, int n) {
  size_t pos = 0;
  for (int f = 1; f <= n; f++) {
    frame_write_header(out + pos, (uint32_t)f);
    pos += FRAME_HEADER_BYTES;
    for (int i = 0; i < f; i++) {
      out[pos++] = (uint8_t)(f * 16 + i);
    }
  }
  return pos;
}


// Drain the reader, checking the frames are 1, 2, ... in order; returns frames seen or -1.
static int drain(frame_reader_t* r, int* next_len) {
  const uint8_t* p;
  size_t len;
  int got = 0, rc;
  while ((rc = frame_reader_next(r, &p, &len, NULL)) == 1) {
    if ((int)len != *next_len) {
      return -1;
    }
    for (size_t i = 0; i < len; i++) {
      if (p[i] != (uint8_t)(*next_len * 16 + (int)i)) {
        return -1;
      }
    }
    (*next_len)++;
    got++;
  }
  return rc < 0 ? -1 : got;
}


TEST(frame_header_is_little_endian) {
  uint8_t h[4];
  frame_write_header(h, 0x01020304u);
  ASSERT_EQ(h[0], 0x04);
  ASSERT_EQ(h[1], 0x03);
  ASSERT_EQ(h[2], 0x02);
  ASSERT_EQ(h[3], 0x01);
  return 0;
}


TEST(frame_every_single_split_point) {
  uint8_t stream[512];
  size_t n = make_stream(stream, 12);
  for (size_t cut = 0; cut <= n; cut++) {
    frame_reader_t r;
    frame_reader_init(&r, 1024);
    int next = 1, total = 0, got;
    ASSERT_OK(frame_reader_feed(&r, stream, cut));
    ASSERT_TRUE((got = drain(&r, &next)) >= 0);
    total += got;
    ASSERT_OK(frame_reader_feed(&r, stream + cut, n - cut));
    ASSERT_TRUE((got = drain(&r, &next)) >= 0);
    total += got;
    ASSERT_EQ(total, 12);
    ASSERT_EQ(frame_reader_buffered(&r), 0);
    frame_reader_close(&r);
  }
  return 0;
}


TEST(frame_every_pair_of_split_points) {
  uint8_t stream[256];
  size_t n = make_stream(stream, 6);
  for (size_t a = 0; a <= n; a++) {
    for (size_t b = a; b <= n; b++) {
      frame_reader_t r;
      frame_reader_init(&r, 64);
      int next = 1, total = 0, got;
      size_t cuts[4] = {0, a, b, n};
      for (int k = 0; k < 3; k++) {
        ASSERT_OK(frame_reader_feed(&r, stream + cuts[k], cuts[k + 1] - cuts[k]));
        ASSERT_TRUE((got = drain(&r, &next)) >= 0);
        total += got;
      }
      ASSERT_EQ(total, 6);
      frame_reader_close(&r);
    }
  }
  return 0;
}


TEST(frame_byte_at_a_time) {
  uint8_t stream[512];
  size_t n = make_stream(stream, 20);
  frame_reader_t r;
  frame_reader_init(&r, 1024);
  int next = 1, total = 0, got;
  for (size_t i = 0; i < n; i++) {
    ASSERT_OK(frame_reader_feed(&r, stream + i, 1));
    ASSERT_TRUE((got = drain(&r, &next)) >= 0);
    total += got;
  }
  ASSERT_EQ(total, 20);
  frame_reader_close(&r);
  return 0;
}


TEST(frame_rejects_zero_length) {
  frame_reader_t r;
  frame_reader_init(&r, 1024);
  uint8_t zero[4] = {0, 0, 0, 0};
  ASSERT_OK(frame_reader_feed(&r, zero, 4));
  const uint8_t* p;
  size_t len;
  err_msg_t msg;
  ASSERT_EQ(frame_reader_next(&r, &p, &len, &msg), ERR_PROTO);
  ASSERT_CONTAINS(msg.text, "length is 0");
  // the failure is sticky: later bytes are refused
  ASSERT_EQ(frame_reader_feed(&r, zero, 4), ERR_PROTO);
  frame_reader_close(&r);
  return 0;
}


TEST(frame_rejects_oversized_length_before_payload_arrives) {
  frame_reader_t r;
  frame_reader_init(&r, 100);
  uint8_t h[4];
  frame_write_header(h, 101);
  ASSERT_OK(frame_reader_feed(&r, h, 4));
  const uint8_t* p;
  size_t len;
  err_msg_t msg;
  ASSERT_EQ(frame_reader_next(&r, &p, &len, &msg), ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "101");
  ASSERT_CONTAINS(msg.text, "max_frame_bytes 100");
  frame_reader_close(&r);
  return 0;
}


TEST(frame_accepts_exactly_max_length) {
  frame_reader_t r;
  frame_reader_init(&r, 100);
  uint8_t data[104] = {0};
  frame_write_header(data, 100);
  ASSERT_OK(frame_reader_feed(&r, data, sizeof(data)));
  const uint8_t* p;
  size_t len;
  ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 1);
  ASSERT_EQ(len, 100);
  ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 0);
  frame_reader_close(&r);
  return 0;
}


TEST(frame_garbage_is_refused_or_waits_never_crashes) {
  // Random bytes either look like a length over the limit, a zero length, or a frame whose
  // payload decoding is the caller's business; the parser must never read out of bounds.
  srand(7);
  for (int round = 0; round < 2000; round++) {
    frame_reader_t r;
    frame_reader_init(&r, 4096);
    uint8_t junk[64];
    size_t n = (size_t)(rand() % 64);
    for (size_t i = 0; i < n; i++) {
      junk[i] = (uint8_t)rand();
    }
    ASSERT_OK(frame_reader_feed(&r, junk, n));
    const uint8_t* p;
    size_t len;
    int rc;
    while ((rc = frame_reader_next(&r, &p, &len, NULL)) == 1) {
      ASSERT_TRUE(len > 0 && len <= 4096);
    }
    ASSERT_TRUE(rc == 0 || rc == ERR_LIMIT || rc == ERR_PROTO);
    frame_reader_close(&r);
  }
  return 0;
}


TEST(frame_reader_releases_the_buffer_of_a_large_frame) {
  // one 4 MiB frame, then small ones: the reader must not keep megabytes for the connection
  size_t big = 4u << 20;
  uint8_t* data = calloc(1, FRAME_HEADER_BYTES + big);
  ASSERT_TRUE(data != NULL);
  frame_write_header(data, (uint32_t)big);
  frame_reader_t r;
  frame_reader_init(&r, 8u << 20);
  ASSERT_OK(frame_reader_feed(&r, data, FRAME_HEADER_BYTES + big));
  free(data);
  const uint8_t* p;
  size_t len;
  ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 1);
  ASSERT_EQ(len, big);
  ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 0);
  ASSERT_TRUE(r.in.cap <= (1u << 20));
  uint8_t small[5] = {1, 0, 0, 0, 42};
  ASSERT_OK(frame_reader_feed(&r, small, sizeof(small)));
  ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 1);
  ASSERT_EQ(p[0], 42);
  frame_reader_close(&r);
  return 0;
}


TEST(frame_limit_can_change_between_frames_and_is_named) {
  frame_reader_t r;
  frame_reader_init(&r, 1000);
  frame_reader_set_limit(&r, 16, "max_hello_bytes", " (until Hello)");
  uint8_t data[4 + 16 + 4];
  frame_write_header(data, 16);
  for (int i = 0; i < 16; i++) {
    data[4 + i] = (uint8_t)i;
  }
  frame_write_header(data + 20, 17);
  ASSERT_OK(frame_reader_feed(&r, data, 20));
  const uint8_t* p;
  size_t len;
  err_msg_t msg;
  ASSERT_EQ(frame_reader_next(&r, &p, &len, &msg), 1);
  ASSERT_EQ(len, 16);

  // raised after the first frame: the next header is measured against the new limit
  frame_reader_set_limit(&r, 1000, "max_frame_bytes", "");
  ASSERT_OK(frame_reader_feed(&r, data + 20, 4));
  ASSERT_EQ(frame_reader_next(&r, &p, &len, &msg), 0);
  frame_reader_close(&r);

  frame_reader_init(&r, 1000);
  frame_reader_set_limit(&r, 16, "max_hello_bytes", " (until Hello)");
  ASSERT_OK(frame_reader_feed(&r, data + 20, 4));
  ASSERT_EQ(frame_reader_next(&r, &p, &len, &msg), ERR_LIMIT);
  ASSERT_STREQ(msg.text, "frame length 17 exceeds max_hello_bytes 16 (until Hello)");
  frame_reader_close(&r);
  return 0;
}


TEST(frame_in_progress_is_measured_and_buffered_at_its_own_size) {
  frame_reader_t r;
  frame_reader_init(&r, 1u << 24);
  enum { N = 3000000 };  // not a power of two: the buffer must not round up to 4 MiB
  uint8_t* data = calloc(1, FRAME_HEADER_BYTES + N);
  ASSERT_TRUE(data != NULL);
  frame_write_header(data, N);
  const uint8_t* p;
  size_t len;
  ASSERT_EQ(frame_reader_expected(&r), 0);
  ASSERT_OK(frame_reader_feed(&r, data, 2));
  ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 0);
  ASSERT_EQ(frame_reader_expected(&r), 0);  // header incomplete
  size_t pos = 2;
  while (pos < FRAME_HEADER_BYTES + N) {
    size_t n = FRAME_HEADER_BYTES + N - pos < 65536 ? FRAME_HEADER_BYTES + N - pos : 65536;
    ASSERT_OK(frame_reader_feed(&r, data + pos, n));
    pos += n;
    if (pos < FRAME_HEADER_BYTES + N) {
      ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 0);
      ASSERT_EQ(frame_reader_expected(&r), FRAME_HEADER_BYTES + N);
      ASSERT_TRUE(frame_reader_memory(&r) <= FRAME_HEADER_BYTES + N);
    }
  }
  ASSERT_EQ(frame_reader_memory(&r), FRAME_HEADER_BYTES + N);
  ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 1);
  ASSERT_EQ(len, N);
  ASSERT_EQ(frame_reader_expected(&r), 0);  // a whole frame is not "in progress"
  ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 0);
  ASSERT_EQ(frame_reader_memory(&r), 0);    // a large buffer is released once drained
  frame_reader_close(&r);
  free(data);
  return 0;
}


TEST(frame_large_frame_is_read_in_place_after_its_header) {
  // a 3 MB frame whose first bytes came through feed: the rest is written into the reader's
  // own buffer, and the frame after it still arrives through feed
  enum { N = 3000000 };
  uint8_t* data = malloc(FRAME_HEADER_BYTES + N + 5);
  ASSERT_TRUE(data != NULL);
  frame_write_header(data, N);
  for (size_t i = 0; i < N; i++) {
    data[FRAME_HEADER_BYTES + i] = (uint8_t)(i * 7 + 1);
  }
  frame_write_header(data + FRAME_HEADER_BYTES + N, 1);
  data[2 * FRAME_HEADER_BYTES + N] = 99;
  frame_reader_t r;
  frame_reader_init(&r, 1u << 24);
  uint8_t* at = NULL;
  ASSERT_EQ(frame_reader_space(&r, 1, &at), 0);  // nothing under way
  ASSERT_OK(frame_reader_feed(&r, data, 2));
  ASSERT_EQ(frame_reader_space(&r, 1, &at), 0);  // header incomplete
  ASSERT_OK(frame_reader_feed(&r, data + 2, 1000));
  ASSERT_EQ(frame_reader_space(&r, FRAME_HEADER_BYTES + N + 1, &at), 0);  // below min_bytes
  size_t pos = 1002;
  while (pos < FRAME_HEADER_BYTES + N) {
    size_t room = frame_reader_space(&r, FRAME_HEADER_BYTES + N, &at);
    ASSERT_EQ(room, FRAME_HEADER_BYTES + N - pos);
    size_t n = room < 700001 ? room : 700001;
    memcpy(at, data + pos, n);
    frame_reader_commit(&r, n);
    pos += n;
    ASSERT_TRUE(frame_reader_memory(&r) == FRAME_HEADER_BYTES + N);
  }
  ASSERT_EQ(frame_reader_space(&r, 1, &at), 0);  // complete: nothing missing
  ASSERT_OK(frame_reader_feed(&r, data + pos, 5));
  const uint8_t* p;
  size_t len;
  ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 1);
  ASSERT_EQ(len, N);
  ASSERT_TRUE(memcmp(p, data + FRAME_HEADER_BYTES, N) == 0);
  ASSERT_EQ(frame_reader_next(&r, &p, &len, NULL), 1);
  ASSERT_EQ(len, 1);
  ASSERT_EQ(p[0], 99);
  frame_reader_close(&r);

  // a frame over the limit is never read in place
  frame_reader_init(&r, 1u << 24);
  ASSERT_OK(frame_reader_feed(&r, data, 1000));
  frame_reader_set_limit(&r, 1000, "max_frame_bytes", "");
  ASSERT_EQ(frame_reader_space(&r, 1, &at), 0);
  frame_reader_close(&r);
  free(data);
  return 0;
}
