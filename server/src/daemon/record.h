// SPDX-License-Identifier: MIT
// record.h: sensimd --record FILE: every accepted request of every connection, in the order in
// which it was queued on its environment (the order that determines the outputs), written to a
// versioned file so that a run can be played again (sensim.replay) and a bug reported with it.
// Format (little-endian; docs/recording.md):
//   header  "SENSIMRC" (8 bytes), uint32 version = 1, uint32 flags = 0
//   record  uint32 length (of the rest of the record), uint8 type, uint8 role,
//           uint16 environment name length, uint64 session id, uint64 index (from 1),
//           then the environment name, then the payload:
//           RECORD_HELLO: the client's name (the token is never written);
//           RECORD_REQUEST: the request's Envelope as it arrived;
//           RECORD_CLOSE: nothing; RECORD_END: nothing, the recording stopped (limit, error).
// Bounded: a record that would take the file past max_bytes is not written; an END record
// takes its place and recording stops (logged), the daemon goes on. A write error (a full
// disk) stops it the same way, and so does a disk that falls 64 MiB behind. The loop thread
// only copies each record into a 1 MiB buffer; full buffers (and the partial one when a
// connection closes) are written by a thread of the recorder's own.
//
// Thread: loop (the writer thread is private).
#ifndef SENSIM_DAEMON_RECORD_H_
#define SENSIM_DAEMON_RECORD_H_

#include <stddef.h>
#include <stdint.h>

#define RECORD_MAGIC "SENSIMRC"
#define RECORD_VERSION 1u
#define RECORD_HEADER_BYTES 16u
#define RECORD_FIXED_BYTES 24u     // length field, type, role, name length, session, index

typedef enum record_type {
  RECORD_HELLO = 1,
  RECORD_REQUEST = 2,
  RECORD_CLOSE = 3,
  RECORD_END = 4,
} record_type_t;

typedef struct recorder recorder_t;

// Create (truncate) path and write the header. NULL on failure (the reason logged).
// max_bytes: the file's limit, >= 4096.
recorder_t* record_open(const char* path, uint64_t max_bytes);

// Append one record; does nothing once recording stopped. role: 0 controller, 1 observer.
void record_put(recorder_t* r, record_type_t type, uint64_t session, int role,
                const char* environment, const void* payload, size_t len);

// Write what is buffered to the file (a connection closed, the daemon stops).
void record_flush(recorder_t* r);

// Flush and close. Nullable.
void record_close(recorder_t* r);

#endif  // SENSIM_DAEMON_RECORD_H_
