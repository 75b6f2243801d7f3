// SPDX-License-Identifier: MIT
// frame.h: the length-prefixed framing of the wire protocol (u32 little-endian length, then
// that many bytes of Envelope), as a pure parser with no I/O: bytes go in in any split, whole
// frames come out. The length is checked against the limit before the buffer grows for it.
#ifndef SENSIM_NET_FRAME_H_
#define SENSIM_NET_FRAME_H_

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define FRAME_HEADER_BYTES 4u

typedef struct frame_reader {
  buf_t in;              // bytes received and not yet consumed
  size_t pending;        // bytes of the frame returned last, consumed on the next call
  uint32_t max_bytes;    // largest payload accepted
  const char* limit_name; // what max_bytes is called in messages
  const char* limit_note; // appended to the message ("" or " (...)")
  int failed;            // sticky error code once the stream is broken
} frame_reader_t;

void frame_reader_init(frame_reader_t* r, uint32_t max_bytes);
void frame_reader_close(frame_reader_t* r);

// Append received bytes. ERR_NOMEM on allocation failure. The reader never holds more than one
// frame plus one read's worth of bytes, because the caller drains frames after each feed.
int frame_reader_feed(frame_reader_t* r, const void* data, size_t n) CHECKRET;

// Next complete frame. Returns 1 and sets *out_payload / *out_len (valid until the next call
// on r), 0 when more bytes are needed, or a negative code when the stream is broken (sticky):
// ERR_LIMIT for a length above max_bytes (msg names it), ERR_PROTO for a zero length.
int frame_reader_next(frame_reader_t* r, const uint8_t** out_payload, size_t* out_len,
                      err_msg_t* msg);

// Bytes buffered and not yet returned as frames.
size_t frame_reader_buffered(const frame_reader_t* r);

// Change the largest payload accepted from the next frame header on; limit_name and note
// (static text) name the limit in the error message: "frame length N exceeds NAME MAX NOTE".
void frame_reader_set_limit(frame_reader_t* r, uint32_t max_bytes, const char* limit_name,
                            const char* note);

// Size (header + payload) of the frame being received once its header has arrived and before
// all of its payload has; 0 otherwise. Call after frame_reader_next returned 0.
size_t frame_reader_expected(const frame_reader_t* r);

// Bytes of memory the reader holds now (its buffer's capacity).
size_t frame_reader_memory(const frame_reader_t* r);

// Where the rest of a frame of at least min_bytes (header + payload) being received can be read
// straight into the reader's buffer: sets *out and returns how many bytes the frame still
// misses, the buffer grown to the frame's size as frame_reader_feed grows it; returns 0 when no
// such frame is under way, or on allocation failure (the caller then reads into a buffer of
// its own and feeds it). The frame returned last is consumed, as by frame_reader_feed. The
// caller counts the frame against its memory budget first (frame_reader_expected).
size_t frame_reader_space(frame_reader_t* r, size_t min_bytes, uint8_t** out);

// The frame frame_reader_next returned last, when it fills the reader's buffer alone (a large
// frame read in place): the buffer is handed over (a mem_alloc'ed block, the header first,
// which the caller frees) and the reader starts an empty one. NULL otherwise (the frame stays
// the reader's).
uint8_t* frame_reader_take(frame_reader_t* r);

// Count n bytes (at most what frame_reader_space returned) written at its *out.
void frame_reader_commit(frame_reader_t* r, size_t n);

// Write the 4-byte header for a payload of len bytes.
void frame_write_header(uint8_t dest[FRAME_HEADER_BYTES], uint32_t len);

#endif  // SENSIM_NET_FRAME_H_
