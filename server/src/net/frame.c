// SPDX-License-Identifier: MIT
// frame.c: length-prefix framing parser. A returned frame stays in the buffer until the next
// call so that the caller can decode it in place without a copy.
#include "net/frame.h"

#include "base/mem.h"

// Capacity an empty reader keeps between frames.
#define FRAME_KEEP_BYTES (1u << 20)


void frame_reader_init(frame_reader_t* r, uint32_t max_bytes) {
  buf_init(&r->in);
  r->pending = 0;
  r->max_bytes = max_bytes;
  r->limit_name = "max_frame_bytes";
  r->limit_note = "";
  r->failed = 0;
}


void frame_reader_close(frame_reader_t* r) {
  buf_close(&r->in);
  r->pending = 0;
}


static void drop_pending(frame_reader_t* r) {
  if (r->pending) {
    buf_consume(&r->in, r->pending);
    r->pending = 0;

    // one large frame must not pin its buffer for the life of the connection
    if (r->in.len == 0 && r->in.cap > FRAME_KEEP_BYTES) {
      buf_close(&r->in);
    }
  }
}


int frame_reader_feed(frame_reader_t* r, const void* data, size_t n) {
  drop_pending(r);
  if (r->failed) {
    return r->failed;
  }

  // a large frame gets a buffer of its own size, not the next power of two: the daemon's
  // memory budget counts what the reader holds
  size_t want = frame_reader_expected(r);
  if (want && want - FRAME_HEADER_BYTES <= r->max_bytes) {
    want = want > r->in.len + n ? want : r->in.len + n;
    if (want > r->in.cap) {
      uint8_t* d = mem_realloc(r->in.data, want);
      if (!d) {
        return ERR_NOMEM;
      }
      r->in.data = d;
      r->in.cap = want;
    }
  }
  return buf_append(&r->in, data, n);
}


int frame_reader_next(frame_reader_t* r, const uint8_t** out_payload, size_t* out_len,
                      err_msg_t* msg) {
  drop_pending(r);
  if (r->failed) {
    return err_set(msg, r->failed, "stream already failed");
  }
  if (r->in.len < FRAME_HEADER_BYTES) {
    return 0;
  }

  // decode and check the length before waiting for (and buffering) the payload
  const uint8_t* h = r->in.data;
  uint32_t len = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 |
                 (uint32_t)h[3] << 24;
  if (len == 0) {
    r->failed = ERR_PROTO;
    return err_set(msg, ERR_PROTO, "frame length is 0 (an Envelope is never empty)");
  }
  if (len > r->max_bytes) {
    r->failed = ERR_LIMIT;
    return err_set(msg, ERR_LIMIT, "frame length %u exceeds %s %u%s", len, r->limit_name,
                   r->max_bytes, r->limit_note);
  }
  if (r->in.len - FRAME_HEADER_BYTES < len) {
    return 0;
  }

  // hand out the payload in place; it is consumed on the next call
  *out_payload = r->in.data + FRAME_HEADER_BYTES;
  *out_len = len;
  r->pending = FRAME_HEADER_BYTES + (size_t)len;
  return 1;
}


size_t frame_reader_buffered(const frame_reader_t* r) {
  return r->in.len - r->pending;
}


void frame_reader_set_limit(frame_reader_t* r, uint32_t max_bytes, const char* limit_name,
                            const char* note) {
  r->max_bytes = max_bytes;
  r->limit_name = limit_name;
  r->limit_note = note;
}


size_t frame_reader_expected(const frame_reader_t* r) {
  size_t have = r->in.len - r->pending;
  if (r->failed || have < FRAME_HEADER_BYTES) {
    return 0;
  }
  const uint8_t* h = r->in.data + r->pending;
  size_t len = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 | (size_t)h[3] << 24;
  return have < FRAME_HEADER_BYTES + len ? FRAME_HEADER_BYTES + len : 0;
}


size_t frame_reader_memory(const frame_reader_t* r) {
  return r->in.cap;
}


size_t frame_reader_space(frame_reader_t* r, size_t min_bytes, uint8_t** out) {
  drop_pending(r);
  size_t want = frame_reader_expected(r);
  if (!want || want < min_bytes || want - FRAME_HEADER_BYTES > r->max_bytes) {
    return 0;
  }
  if (want > r->in.cap) {
    // a buffer of the frame's own size, as frame_reader_feed reserves it
    uint8_t* d = mem_realloc(r->in.data, want);
    if (!d) {
      return 0;
    }
    r->in.data = d;
    r->in.cap = want;
  }
  *out = r->in.data + r->in.len;
  return want - r->in.len;
}


uint8_t* frame_reader_take(frame_reader_t* r) {
  if (!r->pending || r->in.len != r->pending) {
    return NULL;
  }
  uint8_t* block = r->in.data;
  buf_init(&r->in);
  r->pending = 0;
  return block;
}


void frame_reader_commit(frame_reader_t* r, size_t n) {
  r->in.len += n;
}


void frame_write_header(uint8_t dest[FRAME_HEADER_BYTES], uint32_t len) {
  dest[0] = (uint8_t)(len & 0xff);
  dest[1] = (uint8_t)((len >> 8) & 0xff);
  dest[2] = (uint8_t)((len >> 16) & 0xff);
  dest[3] = (uint8_t)((len >> 24) & 0xff);
}
