// SPDX-License-Identifier: MIT
// server.h: the TCP transport (libuv): a listener and its sessions (net/session.h). The
// listener accepts connections and hands each session's frames and events to the owner's
// hooks. It enforces the connection deadlines (handshake, idle, partial frame, write progress)
// and the daemon-wide budget of bytes held for all connections (input buffers, unsent output,
// and what the owner declares with server_hold). Unsent output counts what it really takes
// (the frame's memory, with the buffers a shared frame refers to, and its write record,
// allocator overhead included), and a session whose replies (plain or shared frames) are not
// leaving stops being read (see server_limits_t.pause_unsent_bytes), so that a peer sending
// small requests and never reading cannot hold more than the budget. Once the
// connections have given most of their memory back, the allocator is told to return it to the
// system (base/mem.h mem_trim).
//
// Thread: loop thread only.
#ifndef SENSIM_NET_SERVER_H_
#define SENSIM_NET_SERVER_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/session.h"

typedef struct server server_t;
struct uv_loop_s;

typedef struct server_hooks {
  void* user;
  // A new session; return 0 to accept it, or a negative code with msg filled to refuse it
  // (the owner then sends its own error frame via session_send and session_close is called).
  int (*on_open)(void* user, session_t* s);
  // A complete frame; payload valid for the call only.
  void (*on_frame)(void* user, session_t* s, const uint8_t* payload, size_t len);
  // The byte stream broke (oversize or zero length), a frame does not fit the memory budget,
  // or a deadline passed (handshake, idle, partial frame: code SERVER_ERR_TIMEOUT); code and
  // msg describe it. Reading has stopped; the hook sends what it owes and closes the session.
  // Without the hook the server closes it.
  void (*on_stream_error)(void* user, session_t* s, int code, const char* msg);
  // Nullable. A frame given to session_send cannot be queued (code ERR_LIMIT, msg says why:
  // larger than max_frame_bytes or max_queue_bytes, or the memory budget is full). payload
  // is valid during the call only. The hook may session_send one short substitute (a status,
  // at most SERVER_SUBSTITUTE_BYTES), which bypasses the limits. (When the peer's unread
  // replies fill max_queue_bytes the session is closed instead, without the hook.)
  void (*on_send_refused)(void* user, session_t* s, const uint8_t* payload, size_t len, int code,
                          const char* msg);
  // Nullable. Non-zero while the owner still owes the session replies: it is not idle then.
  int (*is_busy)(void* user, session_t* s);
  // Nullable. The peer shut down its sending side after the frames delivered so far; the
  // session stays open for replies until the owner calls session_close. Without this hook
  // end of stream closes the session at once.
  void (*on_eof)(void* user, session_t* s);
  // The session is closed (peer left, error, or shutdown); called once, before it is freed.
  void (*on_close)(void* user, session_t* s);
  // Nullable. A frame given to session_send_stream was written to the kernel (or dropped by
  // a close): the owner may give the next one.
  void (*on_stream_drained)(void* user, session_t* s);
} server_hooks_t;

// Code of a deadline in on_stream_error (DEADLINE_EXCEEDED on the wire).
#define SERVER_ERR_TIMEOUT (-100)

// Largest substitute frame on_send_refused may send past the limits.
#define SERVER_SUBSTITUTE_BYTES 1024u

typedef struct server_limits {
  uint32_t max_frame_bytes;
  uint64_t max_queue_bytes;       // per session: unsent output
  uint32_t max_hello_bytes;       // largest frame before session_set_ready
  uint64_t max_held_bytes;        // all sessions: input buffers + unsent output + held; 0 = none
  uint64_t pause_unsent_bytes;    // per session: memory of replies not taken by the peer above
                                  // which the session is not read until it has halved; 0 = none
  uint32_t handshake_timeout_ms;  // from accept to session_set_ready; 0 = none
  uint32_t idle_timeout_ms;       // no byte either way while not busy; 0 = none
  uint32_t io_timeout_ms;         // a started frame must complete, unsent output must move;
                                  // 0 = none
} server_limits_t;

// While more than SERVER_BUSY_NUM / SERVER_BUSY_DEN of max_held_bytes are held, a session
// whose unsent replies take more than SERVER_UNSENT_FLOOR bytes is not read either, until they
// are down to half of that (or the budget to half full): the last quarter of the budget stays
// for the connections that read their replies.
#define SERVER_BUSY_NUM 3u
#define SERVER_BUSY_DEN 4u
#define SERVER_UNSENT_FLOOR (64u << 10)

// Once the bytes held have stayed at most a quarter of their peak (of at least
// SERVER_TRIM_MIN_PEAK) for SERVER_TRIM_AFTER_MS, the allocator returns its free memory.
#define SERVER_TRIM_MIN_PEAK (8u << 20)
#define SERVER_TRIM_AFTER_MS 1000u

typedef struct server_stats {
  uint64_t held_bytes;            // bytes counted against max_held_bytes now
  uint64_t timed_out;             // sessions closed by a deadline
  uint32_t blocked;               // sessions not read now because their replies do not leave
  uint64_t trims;                 // times free memory was given back to the system
  uint64_t writes;                // writes handed to the kernel writer (a turn's replies share one)
} server_stats_t;

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

// Number of open sessions that are not closing (a closing one lingers at most a few seconds).
uint32_t server_sessions(const server_t* srv);

void server_get_stats(const server_t* srv, server_stats_t* out);

// Count (delta > 0) or release (delta < 0) bytes the owner holds for sessions (decoded requests
// waiting for execution) against max_held_bytes. Held bytes are never refused: they make room
// for fewer new frames.
void server_hold(server_t* srv, int64_t delta);

#endif  // SENSIM_NET_SERVER_H_
