// SPDX-License-Identifier: MIT
// fuzz_frame.c: the framing parser (server/src/net/frame.c) against a model of the framing
// written from its specification (u32 little-endian length, then that many bytes; a zero
// length or one over the limit breaks the stream for good), fed in pieces as a socket
// delivers them: the input's first bytes choose the piece sizes and whether each piece is
// appended (frame_reader_feed) or read straight into the frame (frame_reader_space/commit),
// as NATS fuzzes its parser with split inputs. The first frame has its own limit (the
// daemon's Hello limit), the others the second one. Every split must give the frames, errors
// and pending sizes of the unsplit stream.
//
// Input: 8 bytes of split seed, 1 byte per limit (two), then the stream.
#include <string.h>

#include "fuzz.h"
#include "net/frame.h"

#define HEAD 10u

// The reader reserves a whole frame once its header is in (the daemon counts it against
// --max-held-bytes first), so the limits stay at sizes a fuzzing process can allocate often.
static const uint32_t kLimits[] = {1, 7, 64, 300, 4096, 65536, 1u << 20, 16u << 20};
#define NLIMIT (sizeof(kLimits) / sizeof(kLimits[0]))


// The model's verdict on the stream: its frames (payload offsets and lengths), then either an
// error for the frame header at `end` or an incomplete tail from `end`.
typedef struct model {
  size_t nframe;
  size_t* offset;
  size_t* len;
  int error;                  // 0, ERR_PROTO or ERR_LIMIT
  size_t end;                 // first byte after the last whole frame
} model_t;


static void model_run(const uint8_t* s, size_t n, uint32_t limit0, uint32_t limit1, model_t* m) {
  size_t pos = 0;
  m->nframe = 0;
  m->error = 0;
  while (n - pos >= 4) {
    uint32_t len = fuzz_rd32(s + pos);
    uint32_t limit = m->nframe == 0 ? limit0 : limit1;
    if (len == 0 || len > limit) {
      m->error = len == 0 ? ERR_PROTO : ERR_LIMIT;
      break;
    }
    if (n - pos - 4 < len) {
      break;
    }
    m->offset[m->nframe] = pos + 4;
    m->len[m->nframe] = len;
    m->nframe++;
    pos += 4 + (size_t)len;
  }
  m->end = pos;
}


int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t head[HEAD] = {0};
  memcpy(head, data, size < HEAD ? size : HEAD);
  const uint8_t* s = size > HEAD ? data + HEAD : data;
  size_t n = size > HEAD ? size - HEAD : 0;
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 8; i++) {
    seed ^= (uint64_t)head[i] << (8 * i);
  }
  uint32_t limit0 = kLimits[head[8] % NLIMIT];
  uint32_t limit1 = kLimits[head[9] % NLIMIT];

  // the model's frames: at most one per 5 bytes
  model_t m;
  m.offset = malloc((n / 5 + 1) * sizeof(size_t));
  m.len = malloc((n / 5 + 1) * sizeof(size_t));
  FUZZ_ASSERT(m.offset && m.len, "out of memory");
  model_run(s, n, limit0, limit1, &m);

  frame_reader_t r;
  frame_reader_init(&r, limit0);
  size_t fed = 0, got = 0, consumed = 0;
  int failed = 0;
  while (fed < n && !failed) {
    // the next piece: one byte, a few, a read's worth, or the rest
    uint64_t x = fuzz_next(&seed);
    size_t left = n - fed;
    size_t piece = (x & 3) == 0 ? 1 : (x & 3) == 1 ? 1 + (x >> 8) % 16
                 : (x & 3) == 2 ? 1 + (x >> 8) % 4096 : left;
    piece = piece < left ? piece : left;

    // in place when a frame is under way and the reader offers its buffer, else appended
    uint8_t* at = NULL;
    size_t room = (x >> 40) & 1 ? frame_reader_space(&r, (x >> 41) % 128, &at) : 0;
    if (room > 0) {
      size_t expected = frame_reader_expected(&r);
      FUZZ_ASSERT(expected > 0 && room == expected - frame_reader_buffered(&r),
                  "space %zu for a frame of %zu with %zu buffered", room, expected,
                  frame_reader_buffered(&r));
      piece = piece < room ? piece : room;
      memcpy(at, s + fed, piece);
      frame_reader_commit(&r, piece);
    } else {
      int rc = frame_reader_feed(&r, s + fed, piece);
      FUZZ_ASSERT(rc == 0, "feed of %zu bytes failed: %d", piece, rc);
    }
    fed += piece;

    // drain, comparing each frame with the model's
    for (;;) {
      const uint8_t* payload;
      size_t len;
      err_msg_t msg;
      int rc = frame_reader_next(&r, &payload, &len, &msg);
      if (rc == 0) {
        break;
      }
      if (rc < 0) {
        FUZZ_ASSERT(rc == m.error && got == m.nframe && fed >= m.end + 4,
                    "error %d after %zu frames (%zu fed); model: error %d after %zu at %zu", rc,
                    got, fed, m.error, m.nframe, m.end);
        FUZZ_ASSERT(msg.text[0] != '\0', "error %d without a message", rc);
        FUZZ_ASSERT(frame_reader_next(&r, &payload, &len, &msg) == rc, "error not sticky");
        FUZZ_ASSERT(frame_reader_feed(&r, "x", 1) == rc, "feed after the error succeeded");
        FUZZ_ASSERT(frame_reader_expected(&r) == 0, "a frame expected after the error");
        failed = 1;
        break;
      }
      FUZZ_ASSERT(got < m.nframe, "frame %zu (%zu bytes) beyond the model's %zu", got, len,
                  m.nframe);
      FUZZ_ASSERT(len == m.len[got] && memcmp(payload, s + m.offset[got], len) == 0,
                  "frame %zu: %zu bytes, model %zu", got, len, m.len[got]);
      consumed = m.offset[got] + len;
      got++;
      if (got == 1) {
        frame_reader_set_limit(&r, limit1, "max_frame_bytes", "");
      }
    }
    if (!failed) {
      FUZZ_ASSERT(!(m.error && got == m.nframe && fed >= m.end + 4),
                  "the header at %zu (error %d) is in, the stream did not fail", m.end, m.error);

      // what stays buffered is the stream after the last frame, and a frame under way is known
      // by its size once its header is in
      FUZZ_ASSERT(frame_reader_buffered(&r) == fed - consumed, "buffered %zu, fed %zu - %zu",
                  frame_reader_buffered(&r), fed, consumed);
      size_t tail = fed - consumed;
      size_t want = tail >= 4 ? 4 + (size_t)fuzz_rd32(s + consumed) : 0;
      FUZZ_ASSERT(frame_reader_expected(&r) == (want > tail ? want : 0),
                  "expected %zu with %zu of a %zu-byte frame", frame_reader_expected(&r),
                  tail, want);
    }
  }
  FUZZ_ASSERT(failed || (got == m.nframe && m.error == 0) || fed < n,
              "%zu frames, model %zu (error %d)", got, m.nframe, m.error);
  frame_reader_close(&r);
  free(m.offset);
  free(m.len);
  return 0;
}
