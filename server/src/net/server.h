// SPDX-License-Identifier: MIT
// server.h: the TCP transport (libuv): a listener and its sessions. A session turns the byte
// stream into frames (net/frame.h) and hands each to the owner's hooks; it queues outgoing
// frames, caps its unsent output, and closes after flushing when asked to.
//
// Thread: loop thread only, except session_retain/session_release which the loop thread also
// calls on behalf of jobs.
#ifndef SENSIM_NET_SERVER_H_
#define SENSIM_NET_SERVER_H_

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

typedef struct server server_t;
typedef struct session session_t;
struct uv_loop_s;

typedef struct server_hooks {
  void* user;
  // A new session; return 0 to accept it, or a negative code with msg filled to refuse it
  // (the owner then sends its own error frame via session_send and session_close is called).
  int (*on_open)(void* user, session_t* s);
  // A complete frame; payload valid for the call only.
  void (*on_frame)(void* user, session_t* s, const uint8_t* payload, size_t len);
  // The byte stream broke (oversize or zero length); code and msg describe it. Reading has
  // stopped; the hook sends what it owes and closes the session. Without the hook the server
  // closes it.
  void (*on_stream_error)(void* user, session_t* s, int code, const char* msg);
  // Nullable. The peer shut down its sending side after the frames delivered so far; the
  // session stays open for replies until the owner calls session_close. Without this hook
  // end of stream closes the session at once.
  void (*on_eof)(void* user, session_t* s);
  // The session is closed (peer left, error, or shutdown); called once, before it is freed.
  void (*on_close)(void* user, session_t* s);
} server_hooks_t;

typedef struct server_limits {
  uint32_t max_frame_bytes;
  uint64_t max_queue_bytes;
} server_limits_t;

// Create and bind. host is an IPv4 or IPv6 literal; port 0 picks a free port. Returns NULL with
// msg filled for a bad host or no memory. When bind/listen fails it returns a closed server
// (server_port() < 0, msg filled): run the loop to finish closing, then server_destroy.
server_t* server_create(struct uv_loop_s* loop, const char* host, int port,
                        const server_limits_t* limits, const server_hooks_t* hooks,
                        err_msg_t* msg);

// Port actually bound.
int server_port(const server_t* srv);

// Close the listener and every session; cb-free: handles finish closing as the loop runs.
void server_close(server_t* srv);

// Free the server once the loop has run to completion after server_close.
void server_destroy(server_t* srv);

// Number of open sessions.
uint32_t server_sessions(const server_t* srv);

//---------------- Sessions

// Queue one frame: writes the 4-byte header and the payload. Takes ownership of payload
// (a mem_alloc'ed buffer of len bytes). Sessions that are closing drop it. Closes the session
// when its unsent output would exceed max_queue_bytes.
void session_send(session_t* s, uint8_t* payload, size_t len);

// Close after every queued frame has been written and the peer has ended its stream (input
// that arrives meanwhile is discarded), or after 5 s in which nothing moves.
void session_close(session_t* s);

int session_is_closing(const session_t* s);

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

#endif  // SENSIM_NET_SERVER_H_
