// SPDX-License-Identifier: MIT
// server_impl.h: the state of the listener and of its sessions, shared by net/server.c (the
// listener, the deadline timer, the budget of held bytes) and net/session.c (one connection).
// Private to those two files.
//
// Thread: loop thread.
#ifndef SENSIM_NET_SERVER_IMPL_H_
#define SENSIM_NET_SERVER_IMPL_H_

#include <stdint.h>
#include <uv.h>

#include "base/list.h"
#include "base/spares.h"
#include "net/frame.h"
#include "net/server.h"
#include "net/session.h"

struct session {
  uv_tcp_t tcp;              // must stay first: handle callbacks cast back to the session
  server_t* srv;
  list_node_t node;          // in srv->sessions
  frame_reader_t reader;
  uint64_t id;
  uint64_t queued;           // bytes handed to uv_write and not yet completed
  uint64_t stream_queued;    // of which stream frames (session_send_stream)
  uint64_t unsent_held;      // memory of the replies among them (payloads or shared frames
                             // and what they refer to, write records), as counted in
                             // srv->held
  int refs;                  // 1 for the open handle + 1 per retain
  int closing;
  int reading;
  int paused;                // by the owner (session_pause)
  int blocked;               // by its own replies: too many are not taken by the peer
  int yielded;               // had its turn: read again in the loop's next turn
  uv_shutdown_t shutdown;
  uv_timer_t linger;         // bounds how long a closing session may wait for its peer
  int eof;                   // the peer shut down its sending side
  int shut;                  // our shutdown is done: every queued byte went to the kernel
  int ready;                 // session_set_ready: the handshake succeeded
  int substituting;          // inside on_send_refused: its substitute bypasses the limits
  int in_frame;              // a partial frame is buffered since frame_ms
  int left;                  // no longer counted in srv->nlive
  int in_place;              // the read under way goes straight into the reader's buffer
  int head_only;             // the read under way takes the next frame's length prefix alone
  int after_bulk;            // the last read went in place: the next frame's length is read
                             //   alone (session.c, on_alloc)
  uint8_t head[FRAME_HEADER_BYTES];  // where head_only reads go
  int corked;                // > 0: writes wait in the batch until the turn ends (session.c)
  struct session_write* batch;       // counted writes not yet given to libuv, in order
  struct session_write* batch_tail;
  uint64_t batch_bytes;
  uint32_t batch_bufs;
  uint64_t in_held;          // bytes of the reader counted in srv->held
  uint64_t sent_total;       // bytes ever handed to uv_write
  uint64_t progress_mark;    // bytes handed to the kernel at progress_ms
  uint64_t opened_ms;        // loop times (uv_now)
  uint64_t active_ms;        // last byte read or write completed
  uint64_t frame_ms;         // first byte of the partial frame (or last frame completed)
  uint64_t progress_ms;
  void* data;
  char peer[64];
};

struct server {
  uv_loop_t* loop;
  uv_tcp_t listener;
  server_limits_t limits;
  server_hooks_t hooks;
  list_t sessions;
  uv_timer_t tick;           // deadline checks; initialized when the listener is
  int ticking;
  uv_idle_t turn;            // sessions that yielded take their next turn (an active idle
                             // handle also keeps the poll from blocking meanwhile)
  int turn_active;
  uint64_t held;             // bytes counted against limits.max_held_bytes
  uint64_t held_peak;        // highest held since the allocator last gave memory back
  uint64_t low_since_ms;     // held has been at most a quarter of held_peak since (0: not)
  uint64_t trims;
  uint64_t writes;           // uv_write calls of the sessions
  uint8_t* read_buf;         // lent to the read under way when it does not go in place
                             // (session.c): reads are one at a time on the loop thread
  uint64_t timed_out;
  // Write records of finished writes, kept for the next ones (session.c): a lock-step tick's
  // replies take them instead of a calloc and a free each. Freed by server_destroy.
  spares_t spare_writes;
  uint32_t nlive;            // not closing: what server_sessions reports and max_clients counts
  uint64_t next_id;
  int port;
  int closed;
};

// Count n more bytes in srv->held (and in its peak).
static inline void server_held_add(server_t* srv, uint64_t n) {
  srv->held += n;
  if (srv->held > srv->held_peak) {
    srv->held_peak = srv->held;
  }
}

// Accept a pending connection of srv's listener into a new session; the on_open hook accepts
// or refuses it.
void session_accept(server_t* srv);

// A session stopped reading for the rest of the loop's turn (session.c): read it again after
// the others have had theirs.
void server_yield(server_t* srv);

// Read s again after it yielded (server_yield).
void session_next_turn(session_t* s);

// Close now, without waiting for the peer to take what is queued (a reset, a failed write,
// the server closing).
void session_close_now(session_t* s);

// Close s when one of its deadlines has passed at loop time now (ms), with a status frame
// through on_stream_error when the peer can still read one.
void session_check_deadlines(session_t* s, uint64_t now);

#endif  // SENSIM_NET_SERVER_IMPL_H_
