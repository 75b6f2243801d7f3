// SPDX-License-Identifier: MIT
// session.h: one connection of the listener (net/server.h). A session turns the byte stream
// into frames (net/frame.h) for the owner's hooks, queues outgoing frames, caps its unsent
// output, and closes after flushing when asked to.
//
// Thread: loop thread only, including session_retain/session_release, which the loop thread
// calls on behalf of jobs.
#ifndef SENSIM_NET_SESSION_H_
#define SENSIM_NET_SESSION_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/shared_buf.h"

typedef struct session session_t;

// Queue one frame: writes the 4-byte header and the payload. Takes ownership of payload
// (a mem_alloc'ed buffer of len bytes). Sessions that are closing drop it. A frame larger than
// max_frame_bytes or max_queue_bytes, or one that does not fit the memory budget now, is
// dropped and reported to on_send_refused; when the session's unsent output would exceed
// max_queue_bytes the session is closed (logged).
void session_send(session_t* s, uint8_t* payload, size_t len);

// Longest prefix of session_send_stream.
#define SESSION_STREAM_PREFIX_MAX 16u

// Queue one shared frame (net/shared_buf.h) preceded by `prefix` (<= SESSION_STREAM_PREFIX_MAX
// bytes, copied), both under one length header: the frame is prefix + the buffer's payload. A
// reference is held until the write completes, and the memory the write holds (the frame, the
// buffers it refers to, the write record) is counted in the budget meanwhile. Not subject to
// max_queue_bytes, and not a reply that stops reading: the owner bounds its streams itself
// and gives the next frame on on_stream_drained. Dropped when the
// session is closing (0 returned: nothing to wait for); ERR_NOMEM closes the session.
int session_send_stream(session_t* s, shared_buf_t* b, const uint8_t* prefix,
                        size_t prefix_len);

// Queue one shared frame (net/shared_buf.h, possibly built in pieces) as a reply: written
// piece by piece with one scatter-gather write, a reference held until the write completes.
// Counted as unsent output and in the memory budget at what the write holds (the frame, the
// buffers it refers to, the write record), and never refused for the budget: the owner
// bounded it before (a step's reply, checked before the step changed anything). Like
// session_send's replies, it stops the session's reading while the peer does not take it
// (server.h, pause_unsent_bytes). When the session's unsent output would exceed
// max_queue_bytes the session is closed (logged), as for session_send. Dropped when the
// session is closing (0 returned); ERR_LIMIT or ERR_NOMEM closes the session.
int session_send_shared(session_t* s, shared_buf_t* b);

// Stream bytes handed to the kernel writer and not yet written (0: give the next frame).
uint64_t session_stream_bytes(const session_t* s);

// The handshake succeeded: frames up to max_frame_bytes are accepted from now on and the
// handshake deadline no longer applies.
void session_set_ready(session_t* s);

// Close after every queued frame has been written and the peer has ended its stream (input
// that arrives meanwhile is discarded), or after 5 s in which nothing moves.
void session_close(session_t* s);

int session_is_closing(const session_t* s);

// Inside on_frame: the frame being delivered, when it fills the session's read buffer alone (a
// large frame is read in place into a buffer of its size), handed over to the owner with that
// buffer (a mem_alloc'ed block: the 4-byte header, then the payload on_frame got; the owner
// frees it), so that its request may point into it instead of copying; from then on its memory
// is not counted as the session's input (server_stats_t.held_bytes) but is the owner's to count
// (server_hold). NULL otherwise.
uint8_t* session_take_frame(session_t* s);

// Stop / resume reading (back-pressure from the owner's work queue).
void session_pause(session_t* s);
void session_resume(session_t* s);

// Keep the session's memory alive past its close (for work queued on its behalf).
void session_retain(session_t* s);
void session_release(session_t* s);

// Owner data.
void session_set_data(session_t* s, void* data);
void* session_data(const session_t* s);

uint64_t session_id(const session_t* s);

// Peer address as text ("127.0.0.1:51234").
const char* session_peer(const session_t* s);

// Bytes queued for writing and not yet written.
uint64_t session_queued_bytes(const session_t* s);

#endif  // SENSIM_NET_SESSION_H_
