// SPDX-License-Identifier: MIT
// session.c: one connection of the listener (net/server.c). Reads accumulate in a frame
// reader; writes are owned by their request and freed in the write callback; a session closed
// from inside its own callback is only marked, and freed when both its handle is closed and no
// job holds it. A session whose replies are not taken by its peer stops being read until they
// leave (back-pressure on the peer, server.h). The listener's timer checks each session's
// deadlines here.
#include "net/session.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "base/list.h"
#include "base/log.h"
#include "base/mem.h"
#include "net/frame.h"
#include "net/server_impl.h"

// How long a closing session waits for its peer to take the last replies.
#define SESSION_LINGER_MS 5000

// Bytes read at a time into the server's read buffer (a frame too large for it goes in place).
#define SESSION_READ_BYTES 65536

// Frames a session delivers in one turn of the loop; the rest wait in its reader for the next
// turn, after every other connection's. A read of 64 KiB holds thousands of pings, and libuv
// reads the same socket up to 32 times in a row: a peer flooding small requests would keep
// the others waiting for each of its reads. Bulk frames never reach it.
#define SESSION_TURN_FRAMES 256

// A frame at least this large (header + payload) is read straight into the frame reader's
// buffer once its header has arrived: one copy fewer, and reads as large as the socket has.
// The size from which the daemon's request takes the frame rather than copy its bulk arrays
// (daemon/protocol.c): such a frame is read once, into the memory its request keeps.
#define SESSION_IN_PLACE_BYTES (64u << 10)

typedef struct session_write {
  uv_write_t req;
  session_t* s;
  uint8_t header[FRAME_HEADER_BYTES + SESSION_STREAM_PREFIX_MAX];  // + a stream's prefix
  uint8_t* payload;
  size_t len;                // bytes after the header
  uint64_t cost;             // memory counted in srv->held until the write completes
  shared_buf_t* shared;      // a shared frame (then payload is NULL)
  int stream;                // shared is a stream frame (session_send_stream), not a reply
  size_t head_len;           // a shared frame's bytes of header (and prefix) before its pieces
  size_t skip;               // the shared frame's byte its pieces start at
  uint64_t total;            // bytes counted in queued and sent_total
  struct session_write* next;  // the next write of a batch (one uv_write for all of them)
} session_write_t;

// Pieces of a shared frame written without a heap array (more are rare: a reply with many
// clouds).
#define SESSION_INLINE_BUFS 16u

// Pieces libuv keeps in the write request itself; it copies a longer list into an array of
// its own, held until the write completes (uv_write).
#define SESSION_UV_INLINE_BUFS 4u

// A corked session's writes wait in a batch up to these many bytes or pieces; then the batch
// leaves and the next one starts.
#define SESSION_BATCH_BYTES (256u << 10)
#define SESSION_BATCH_BUFS 64u


void session_release(session_t* s) {
  if (--s->refs > 0) {
    return;
  }
  frame_reader_close(&s->reader);
  mem_free(s);
}


// Count the reader's memory, or the frame it is receiving when that is larger, against the
// budget. ERR_LIMIT (msg filled, nothing counted) when a frame in progress does not fit.
static int account_input(session_t* s, err_msg_t* msg) {
  server_t* srv = s->srv;
  uint64_t want = frame_reader_expected(&s->reader);
  uint64_t mem = frame_reader_memory(&s->reader);
  uint64_t now = want > mem ? want : mem;
  uint64_t others = srv->held - s->in_held;
  if (want > s->in_held && srv->limits.max_held_bytes &&
      others + now > srv->limits.max_held_bytes) {
    return err_set(msg, ERR_LIMIT,
                   "a frame of %llu bytes does not fit the daemon's memory budget now "
                   "(%llu of max_held_bytes %llu held for all connections)",
                   (unsigned long long)want, (unsigned long long)others,
                   (unsigned long long)srv->limits.max_held_bytes);
  }
  srv->held = others;
  server_held_add(srv, now);
  s->in_held = now;
  return 0;
}


// The reader's memory no longer counts: it was closed, or it gave its frame away.
static void release_input(session_t* s) {
  s->srv->held -= s->in_held;
  s->in_held = 0;
}


static void flush_batch(session_t* s);


static void on_linger_closed(uv_handle_t* h) {
  session_release(h->data);
}


static void on_session_closed(uv_handle_t* h) {
  session_t* s = (session_t*)h;
  server_t* srv = s->srv;
  list_remove(&s->node);
  if (srv->hooks.on_close) {
    srv->hooks.on_close(srv->hooks.user, s);
  }

  // input nobody will read is released now, not when the last job lets go of the session
  frame_reader_close(&s->reader);
  release_input(s);

  // the session's memory goes with its last handle
  uv_close((uv_handle_t*)&s->linger, on_linger_closed);
}


static void on_linger(uv_timer_t* t) {
  session_t* s = t->data;
  LOG_DEBUG("session %llu: peer did not take its last %llu bytes in time; closing",
            (unsigned long long)s->id, (unsigned long long)s->queued);
  session_close_now(s);
}


// The session's slot is free from the moment it starts closing: a reset peer's slot goes at
// once, and a lingering close (bounded by its timer) does not keep a client out.
static void leave(session_t* s) {
  if (!s->left) {
    s->left = 1;
    s->srv->nlive--;
  }
}


void session_close_now(session_t* s) {
  if (uv_is_closing((uv_handle_t*)&s->tcp)) {
    return;  // closed before; its batch left then
  }
  flush_batch(s);  // what was queued before is written as far as the close lets it

  // a batch libuv refuses closes the session from inside the flush (submit): closed already
  if (uv_is_closing((uv_handle_t*)&s->tcp)) {
    return;
  }
  leave(s);
  s->closing = 1;
  uv_close((uv_handle_t*)&s->tcp, on_session_closed);
}


static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* out);


static void on_shutdown(uv_shutdown_t* req, int status) {
  session_t* s = (session_t*)req->handle;
  s->shut = 1;

  // Closing a socket with unread input resets the connection, and a reset throws away the
  // replies the kernel has not delivered yet: wait for the peer's end of stream (a lingering
  // close), bounded by the linger timer.
  if (status < 0 || s->eof) {
    session_close_now(s);
  }
}


void session_close(session_t* s) {
  if (s->closing) {
    return;
  }
  flush_batch(s);  // the shutdown goes after every reply queued before it
  if (uv_is_closing((uv_handle_t*)&s->tcp)) {
    return;
  }
  leave(s);
  s->closing = 1;
  s->paused = 0;

  // keep reading (and discarding) until the peer's end of stream
  if (!s->eof && !s->reading &&
      uv_read_start((uv_stream_t*)&s->tcp, on_alloc, on_read) == 0) {
    s->reading = 1;
  }

  // shutdown completes after every queued write; a peer that stops reading or never closes
  // would keep the session forever: the linger timer bounds the wait while nothing moves
  if (uv_shutdown(&s->shutdown, (uv_stream_t*)&s->tcp, on_shutdown) != 0) {
    session_close_now(s);
    return;
  }
  uv_timer_start(&s->linger, on_linger, SESSION_LINGER_MS, 0);
}


int session_is_closing(const session_t* s) {
  return s->closing;
}


// Whether the replies s has not got rid of should stop its reading: more than
// pause_unsent_bytes of them, or more than a small floor while the budget is nearly full.
static int should_block(const session_t* s) {
  const server_t* srv = s->srv;
  const server_limits_t* lim = &srv->limits;
  if (lim->pause_unsent_bytes && s->unsent_held > lim->pause_unsent_bytes) {
    return 1;
  }
  return lim->max_held_bytes && s->unsent_held > SERVER_UNSENT_FLOOR &&
         srv->held > lim->max_held_bytes / SERVER_BUSY_DEN * SERVER_BUSY_NUM;
}


// A blocked session is read again once its replies have halved, and either are down to half
// the floor or the budget is half free (hysteresis: a peer that reads slowly is not switched on
// and off at every reply).
static int may_unblock(const session_t* s) {
  const server_t* srv = s->srv;
  const server_limits_t* lim = &srv->limits;
  if (lim->pause_unsent_bytes && s->unsent_held > lim->pause_unsent_bytes / 2) {
    return 0;
  }
  return !lim->max_held_bytes || s->unsent_held <= SERVER_UNSENT_FLOOR / 2 ||
         srv->held <= lim->max_held_bytes / 2;
}


static void block(session_t* s) {
  s->blocked = 1;
  if (s->reading) {
    uv_read_stop((uv_stream_t*)&s->tcp);
    s->reading = 0;
  }
  LOG_DEBUG("session %llu (%s): %llu bytes of replies not taken by the peer; not reading",
            (unsigned long long)s->id, s->peer, (unsigned long long)s->unsent_held);
}


static void take_turn(session_t* s);
static void start_reading(session_t* s);


static void unblock(session_t* s) {
  s->blocked = 0;
  if (s->paused) {
    return;  // session_resume reads again
  }

  // frames already buffered first; a partial frame's deadline restarts, since it was not read
  s->in_frame = 0;
  take_turn(s);
  start_reading(s);
}


// A write is done with (written, cancelled or refused): its bytes leave the session's queue
// and its memory the budget, as count_write counted them.
static void release_counts(session_t* s, const session_write_t* w) {
  s->queued -= w->total;
  s->stream_queued -= w->stream ? w->total : 0;
  s->unsent_held -= w->stream ? 0 : w->cost;  // a reply's, plain or shared frames
  s->srv->held -= w->cost;
}


// A zeroed write record: a spare one of the server's, else a new one.
static session_write_t* write_new(server_t* srv) {
  return spares_take(&srv->spare_writes, sizeof(session_write_t));
}


static void free_write(server_t* srv, session_write_t* w) {
  mem_free(w->payload);
  shared_buf_release(w->shared);
  spares_give(&srv->spare_writes, w);
}


// One write of a batch is done (status: the batch's).
static void write_done(session_write_t* w, int status) {
  session_t* s = w->s;
  release_counts(s, w);
  s->active_ms = uv_now(s->srv->loop);

  // a closing session that still makes progress is not cut off: the linger time is idle time
  if (s->closing && status == 0 && !uv_is_closing((uv_handle_t*)&s->tcp)) {
    uv_timer_start(&s->linger, on_linger, SESSION_LINGER_MS, 0);
  }
  if (status < 0 && status != UV_ECANCELED && !s->closing) {
    LOG_DEBUG("session %llu: write failed: %s", (unsigned long long)s->id, uv_strerror(status));
    session_close_now(s);
  }
  int reply = !w->stream;
  free_write(s->srv, w);
  if (!reply && s->srv->hooks.on_stream_drained && !s->closing) {
    s->srv->hooks.on_stream_drained(s->srv->hooks.user, s);
  }

  // the write's reference keeps s alive while frames waiting in the reader are delivered
  if (reply && s->blocked && !s->closing && may_unblock(s)) {
    unblock(s);
  }
  session_release(s);
}


// A batch of writes (one, usually) left through w's request: each is done, in order.
static void on_write(uv_write_t* req, int status) {
  session_write_t* w = (session_write_t*)req;
  while (w) {
    session_write_t* next = w->next;
    write_done(w, status);
    w = next;
  }
}


// Count w (its bytes and the memory it holds) as queued output of s.
static void count_write(session_t* s, session_write_t* w) {
  server_t* srv = s->srv;
  if (s->queued == 0) {
    // the write-progress deadline counts from the moment output starts to wait
    s->progress_ms = uv_now(srv->loop);
    s->progress_mark = s->sent_total;
  }
  s->refs++;
  s->queued += w->total;
  s->stream_queued += w->stream ? w->total : 0;
  s->sent_total += w->total;
  s->unsent_held += w->stream ? 0 : w->cost;
  server_held_add(srv, w->cost);
}


// Drop the writes from w (a chain through next, each counted) that never reached libuv:
// count_write undone, each freed. No hook runs.
static void drop_writes(session_t* s, session_write_t* w) {
  while (w) {
    session_write_t* next = w->next;
    release_counts(s, w);
    s->sent_total -= w->total;
    s->refs--;  // never the last: the session's handle holds one until it is closed
    free_write(s->srv, w);
    w = next;
  }
}


// The pieces of w: up to max of them into p and n. Returns how many there are (may exceed
// max).
static uint32_t write_bufs(const session_write_t* w, const uint8_t** p, size_t* n, uint32_t max) {
  if (!w->shared) {
    if (max >= 2) {
      p[0] = w->header;
      n[0] = FRAME_HEADER_BYTES;
      p[1] = w->payload;
      n[1] = w->len;
    }
    return 2;
  }
  uint32_t k = 0;
  if (w->head_len) {
    if (max > 0) {
      p[0] = w->header;
      n[0] = w->head_len;
    }
    k = 1;
  }
  if (max <= k) {
    return k + shared_buf_pieces(w->shared, w->skip, NULL, NULL, 0);
  }
  return k + shared_buf_pieces(w->shared, w->skip, p + k, n + k, max - k);
}


// A write the kernel took whole at once: its bytes and memory no longer count; no hook runs
// (the caller may be inside one: see try_write).
static void done_now(session_write_t* w) {
  session_t* s = w->s;
  release_counts(s, w);
  s->active_ms = uv_now(s->srv->loop);
  s->refs--;  // never the last: the open handle holds one
  free_write(s->srv, w);
}


// Write the chain from w at once when nothing waits in libuv's queue: a write the socket takes
// whole is done here, without a write request (libuv's request would end with its completion
// callback in the next loop turn and a change of the socket's epoll registration, a system
// call, after every reply). Only when no completion hook is due: not for stream frames
// (on_stream_drained) and not for a blocked session (it is read again from on_write). 0 when
// everything was written (the chain done and freed); otherwise *first is the first of bufs
// still to write (partly written pieces advanced), and the chain stays for uv_write.
static int try_write(session_t* s, session_write_t* w, uv_buf_t* bufs, uint32_t count,
                     uint32_t* first) {
  *first = 0;
  if (s->blocked || s->closing || uv_is_closing((uv_handle_t*)&s->tcp) ||
      uv_stream_get_write_queue_size((uv_stream_t*)&s->tcp) != 0) {
    return -1;
  }
  for (session_write_t* x = w; x; x = x->next) {
    if (x->stream) {
      return -1;
    }
  }
  int n = uv_try_write((uv_stream_t*)&s->tcp, bufs, count);
  if (n < 0) {
    return -1;  // UV_EAGAIN: the socket is full; anything else shows again in uv_write
  }
  s->srv->writes++;
  size_t k = (size_t)n;
  while (*first < count && k >= bufs[*first].len) {
    k -= bufs[*first].len;
    (*first)++;
  }
  if (*first == count) {
    while (w) {
      session_write_t* next = w->next;
      done_now(w);
      w = next;
    }
    return 0;
  }
  bufs[*first].base += k;
  bufs[*first].len -= k;
  return -1;
}


// Hand the writes from w on (a chain through next, each counted) to libuv as one write: one
// system call for the replies of a turn, and one wake-up of the peer. What libuv's copy of a
// long list of pieces takes is counted with the first write. Nonzero (nothing counted any
// more, every write of the chain freed, the session closed) when uv_write refuses or memory is
// short.
static int submit(session_t* s, session_write_t* w) {
  server_t* srv = s->srv;
  uint32_t count = 0;
  for (session_write_t* x = w; x; x = x->next) {
    count += write_bufs(x, NULL, NULL, 0);
  }
  const uint8_t* small_p[SESSION_INLINE_BUFS];
  size_t small_n[SESSION_INLINE_BUFS];
  uv_buf_t small[SESSION_INLINE_BUFS];
  const uint8_t** p = small_p;
  size_t* n = small_n;
  uv_buf_t* bufs = small;
  int rc = 0;
  if (count > SESSION_INLINE_BUFS) {
    // uv_write copies the array of bufs: a temporary one is enough
    p = mem_alloc(count * sizeof(*p));
    n = mem_alloc(count * sizeof(*n));
    bufs = mem_alloc(count * sizeof(*bufs));
    rc = p && n && bufs ? 0 : ERR_NOMEM;
  }
  if (rc == 0) {
    uint32_t at = 0;
    for (session_write_t* x = w; x; x = x->next) {
      at += write_bufs(x, p + at, n + at, count - at);
    }
    for (uint32_t i = 0; i < count; i++) {
      bufs[i] = uv_buf_init((char*)p[i], (unsigned)n[i]);
    }

    // what the socket takes at once is done now (no write request); the rest is queued
    uint32_t first = 0;
    if (try_write(s, w, bufs, count, &first) == 0) {
      rc = 0;
      goto done;
    }
    uint32_t left = count - first;
    uint64_t extra =
        left > SESSION_UV_INLINE_BUFS ? mem_footprint_of(left * sizeof(uv_buf_t)) : 0;
    w->cost += extra;
    s->unsent_held += w->stream ? 0 : extra;
    server_held_add(srv, extra);
    rc = uv_write(&w->req, (uv_stream_t*)&s->tcp, bufs + first, left, on_write);
    srv->writes += rc == 0;
  }
done:
  if (bufs != small) {
    mem_free(p);
    mem_free(n);
    mem_free(bufs);
  }
  if (rc != 0) {
    drop_writes(s, w);
    session_close_now(s);
  }
  return rc;
}


// The batch of a corked session leaves.
static void flush_batch(session_t* s) {
  session_write_t* w = s->batch;
  s->batch = s->batch_tail = NULL;
  s->batch_bytes = 0;
  s->batch_bufs = 0;
  if (w) {
    (void)submit(s, w);  // a failure closed s
  }
}


// Queue w (counted) for writing: at once, or at the end of the turn while s is corked; a
// batch that grew large leaves first. Nonzero when w was refused: then it is uncounted and
// freed, and the session closed (see submit).
static int enqueue(session_t* s, session_write_t* w) {
  w->next = NULL;
  if (!s->corked) {
    return submit(s, w);
  }
  uint32_t pieces = write_bufs(w, NULL, NULL, 0);
  if (s->batch && (s->batch_bytes + w->total > SESSION_BATCH_BYTES ||
                   s->batch_bufs + pieces > SESSION_BATCH_BUFS)) {
    flush_batch(s);
  }
  if (uv_is_closing((uv_handle_t*)&s->tcp)) {
    drop_writes(s, w);  // the flush was refused and closed the session: w cannot leave
    return ERR_STATE;
  }
  if (s->batch_tail) {
    s->batch_tail->next = w;
  } else {
    s->batch = w;
  }
  s->batch_tail = w;
  s->batch_bytes += w->total;
  s->batch_bufs += pieces;
  return 0;
}


// Writes made while a session is corked wait for the end of its turn and leave together
// (nested corks: the outermost uncork sends).
static void cork(session_t* s) {
  s->corked++;
}


static void uncork(session_t* s) {
  if (--s->corked == 0) {
    flush_batch(s);
  }
}


// A frame that cannot be queued: the owner may send a short substitute (a status naming the
// limit). When the peer does not read its replies, no status could reach it: the session is
// closed at once and the reason logged.
static void refuse_send(session_t* s, uint8_t* payload, size_t len, int close_after,
                        const char* fmt, ...) __attribute__((format(printf, 5, 6)));

static void refuse_send(session_t* s, uint8_t* payload, size_t len, int close_after,
                        const char* fmt, ...) {
  server_t* srv = s->srv;
  err_msg_t msg;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg.text, sizeof(msg.text), fmt, ap);
  va_end(ap);
  if (close_after) {
    LOG_WARN("session %llu (%s): %s; closing", (unsigned long long)s->id, s->peer, msg.text);
    mem_free(payload);
    session_close_now(s);
    return;
  }
  LOG_DEBUG("session %llu (%s): %s", (unsigned long long)s->id, s->peer, msg.text);
  if (srv->hooks.on_send_refused) {
    s->substituting = 1;
    srv->hooks.on_send_refused(srv->hooks.user, s, payload, len, ERR_LIMIT, msg.text);
    s->substituting = 0;
  }
  mem_free(payload);
}


void session_send(session_t* s, uint8_t* payload, size_t len) {
  // after session_close the stream is shut down: uv_write would fail with EPIPE and
  // session_close_now would cancel the frames still queued ahead of the shutdown
  if (s->closing) {
    mem_free(payload);
    return;
  }
  server_t* srv = s->srv;
  const server_limits_t* lim = &srv->limits;
  uint64_t total = FRAME_HEADER_BYTES + (uint64_t)len;
  session_write_t* w = write_new(srv);
  if (!w) {
    mem_free(payload);
    session_close_now(s);
    return;
  }

  // What the reply holds until it is written: a small reply's write record and the
  // allocator's share take many times its own bytes.
  uint64_t cost = mem_footprint(payload) + mem_footprint(w);
  int refused = 1;
  if (s->substituting && len <= SERVER_SUBSTITUTE_BYTES) {
    // the substitute for a refused frame: short, and the only way to say why
    refused = 0;
  } else if (len > lim->max_frame_bytes) {
    refuse_send(s, payload, len, 0, "a reply of %zu bytes would exceed max_frame_bytes %u",
                len, lim->max_frame_bytes);
  } else if (total > lim->max_queue_bytes ||
             (lim->max_held_bytes && cost > lim->max_held_bytes)) {
    refuse_send(s, payload, len, 0, "a reply of %zu bytes can never fit max_queue_bytes %llu "
                "or max_held_bytes %llu", len, (unsigned long long)lim->max_queue_bytes,
                (unsigned long long)lim->max_held_bytes);
  } else if (s->queued + total > lim->max_queue_bytes) {
    refuse_send(s, payload, len, 1, "%llu bytes of replies are not read by the peer; a reply "
                "of %zu more would exceed max_queue_bytes %llu", (unsigned long long)s->queued,
                len, (unsigned long long)lim->max_queue_bytes);
  } else if (lim->max_held_bytes && srv->held + cost > lim->max_held_bytes) {
    refuse_send(s, payload, len, 0, "a reply of %zu bytes does not fit the daemon's memory "
                "budget now (%llu of max_held_bytes %llu held for all connections)", len,
                (unsigned long long)srv->held, (unsigned long long)lim->max_held_bytes);
  } else {
    refused = 0;
  }
  if (refused) {
    free_write(srv, w);
    return;
  }
  w->s = s;
  w->payload = payload;
  w->len = len;
  w->cost = cost;
  w->shared = NULL;
  w->stream = 0;
  w->head_len = 0;
  w->skip = 0;
  w->total = total;
  frame_write_header(w->header, (uint32_t)len);
  count_write(s, w);
  if (enqueue(s, w) != 0) {
    return;  // refused: freed, the session closed
  }

  // Replies the peer does not take stop its reading: requests it keeps sending stay in the
  // kernel's buffers (and then its own) instead of piling up replies here.
  if (!s->blocked && should_block(s)) {
    block(s);
  }
}


// Queue the shared frame of w (its header and prefix, then the frame's pieces from byte
// `skip`), counted as `total` bytes of output and at the memory the write holds in the budget
// (w->cost; a reply's also as unsent, which may stop reading the session). Nonzero when it
// was refused: w freed with its reference, the session closed.
static int write_pieces(session_t* s, session_write_t* w, size_t head_len, size_t skip,
                        uint64_t total) {
  // What the write holds until it completes: its record (header and prefix inside), the frame
  // and the buffers it refers to (a cloud's points, which it keeps alive); libuv's copy of a
  // long list of pieces is counted when the write leaves (submit). Small frames cost mostly
  // the records and the allocator's share.
  w->head_len = head_len;
  w->skip = skip;
  w->total = total;
  w->cost = mem_footprint(w) + shared_buf_footprint(w->shared);
  count_write(s, w);
  return enqueue(s, w);
}


int session_send_stream(session_t* s, shared_buf_t* b, const uint8_t* prefix,
                        size_t prefix_len) {
  if (s->closing) {
    return 0;
  }
  session_write_t* w = write_new(s->srv);
  if (!w || prefix_len > SESSION_STREAM_PREFIX_MAX) {
    mem_free(w);
    session_close_now(s);
    return ERR_NOMEM;
  }
  w->s = s;
  w->shared = shared_buf_retain(b);
  w->stream = 1;
  w->len = prefix_len + shared_buf_len(b);
  frame_write_header(w->header, (uint32_t)w->len);

  // one length header for the prefix and the shared payload (the frame's own header skipped)
  memcpy(w->header + FRAME_HEADER_BYTES, prefix, prefix_len);
  if (write_pieces(s, w, FRAME_HEADER_BYTES + prefix_len, FRAME_HEADER_BYTES,
                   FRAME_HEADER_BYTES + (uint64_t)w->len) != 0) {
    return ERR_NOMEM;  // freed, the session closed
  }
  return 0;
}


int session_send_shared(session_t* s, shared_buf_t* b) {
  if (s->closing) {
    return 0;
  }
  server_t* srv = s->srv;
  uint64_t total = shared_buf_frame_len(b);
  if (s->queued + total > srv->limits.max_queue_bytes) {
    LOG_WARN("session %llu (%s): %llu bytes of replies are not read by the peer; a reply of "
             "%llu more would exceed max_queue_bytes %llu; closing", (unsigned long long)s->id,
             s->peer, (unsigned long long)s->queued, (unsigned long long)total,
             (unsigned long long)srv->limits.max_queue_bytes);
    session_close_now(s);
    return ERR_LIMIT;
  }
  session_write_t* w = write_new(s->srv);
  if (!w) {
    session_close_now(s);
    return ERR_NOMEM;
  }
  w->s = s;
  w->shared = shared_buf_retain(b);
  w->len = shared_buf_len(b);
  if (write_pieces(s, w, 0, 0, total) != 0) {
    return ERR_NOMEM;  // freed, the session closed
  }

  // a reply in shared frames stops the reading of a peer that does not take it, as any other
  if (!s->blocked && should_block(s)) {
    block(s);
  }
  return 0;
}


uint64_t session_stream_bytes(const session_t* s) {
  return s->stream_queued;
}


static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* out) {
  session_t* s = (session_t*)h;
  uint8_t* at = NULL;
  size_t room = s->closing ? 0 : frame_reader_space(&s->reader, SESSION_IN_PLACE_BYTES, &at);
  s->in_place = room != 0;
  s->head_only = 0;
  if (room) {
    *out = uv_buf_init((char*)at, room < UINT32_MAX ? (unsigned)room : UINT32_MAX);
    return;
  }

  // large frames come in runs (a raycast in parts): after one read in place, the next
  // frame's length is read alone, so that its payload goes in place too rather than its
  // first 64 KiB through the server's buffer and then copied again (one more read a run)
  if (!s->closing && s->after_bulk && frame_reader_buffered(&s->reader) == 0) {
    s->head_only = 1;
    *out = uv_buf_init((char*)s->head, FRAME_HEADER_BYTES);
    return;
  }
  // the server's buffer, copied from before the next read: not 64 KiB allocated and freed
  // per read (a free of that size also consolidates malloc's small free chunks each time)
  (void)suggested;
  server_t* srv = s->srv;
  if (!srv->read_buf) {
    srv->read_buf = mem_alloc(SESSION_READ_BYTES);
  }
  *out = uv_buf_init((char*)srv->read_buf, srv->read_buf ? SESSION_READ_BYTES : 0);
}


// Nothing more can be read: the owner answers and closes (after its pending replies).
static void stream_fail(session_t* s, int code, const char* msg) {
  server_t* srv = s->srv;
  session_pause(s);
  if (srv->hooks.on_stream_error) {
    srv->hooks.on_stream_error(srv->hooks.user, s, code, msg);
  } else {
    session_close(s);
  }
}


// Hand every complete buffered frame to the owner; a hook may close or pause the session, which
// stops delivery. A broken stream, or a frame that does not fit the memory budget, is reported
// once and the session closed. Delivers at most max frames; returns how many it delivered.
static int deliver_frames(session_t* s, int max) {
  server_t* srv = s->srv;
  const uint8_t* payload;
  size_t len;
  err_msg_t msg;
  int delivered = 0;
  while (!s->closing && !s->paused && !s->blocked && delivered < max) {
    int rc = frame_reader_next(&s->reader, &payload, &len, &msg);
    if (rc == 0) {
      if (account_input(s, &msg) != 0) {
        stream_fail(s, ERR_LIMIT, msg.text);
        return delivered;
      }
      break;
    }
    if (rc < 0) {
      stream_fail(s, rc, msg.text);
      return delivered;
    }
    delivered++;
    srv->hooks.on_frame(srv->hooks.user, s, payload, len);
  }
  if (!uv_is_closing((uv_handle_t*)&s->tcp) && account_input(s, &msg) != 0) {
    stream_fail(s, ERR_LIMIT, msg.text);
    return delivered;
  }

  // the partial-frame deadline runs from a frame's first byte, or from the last complete one
  if (frame_reader_buffered(&s->reader) == 0) {
    s->in_frame = 0;
  } else if (delivered || !s->in_frame) {
    s->in_frame = 1;
    s->frame_ms = uv_now(srv->loop);
  }
  return delivered;
}


// Deliver this turn's frames; a session that may have more waits for the loop's next turn
// (server_yield), without reading meanwhile.
static void take_turn(session_t* s) {
  // the replies made during the turn (a state update's and the step's behind it, a burst of
  // pings) leave in one write: one system call here, one wake-up of the peer
  cork(s);
  int delivered = deliver_frames(s, SESSION_TURN_FRAMES);
  uncork(s);
  if (delivered < SESSION_TURN_FRAMES || s->closing || s->paused || s->blocked) {
    return;
  }
  if (s->reading) {
    uv_read_stop((uv_stream_t*)&s->tcp);  // also ends libuv's run of reads on the socket
    s->reading = 0;
  }
  s->yielded = 1;
  server_yield(s->srv);
}


static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  session_t* s = (session_t*)stream;
  server_t* srv = s->srv;

  // closing: input is discarded until the peer's end of stream (see on_shutdown)
  if (s->closing) {
    if (nread < 0) {
      uv_read_stop(stream);
      s->reading = 0;
      s->eof = 1;
      if (s->shut || nread != UV_EOF) {
        session_close_now(s);
      }
    }
    return;
  }
  if (nread < 0) {
    if (nread == UV_EOF && srv->hooks.on_eof) {
      // half close: the peer sent everything; its pending requests are still answered
      uv_read_stop(stream);
      s->reading = 0;
      s->eof = 1;
      srv->hooks.on_eof(srv->hooks.user, s);
      return;
    }
    if (nread != UV_EOF) {
      LOG_DEBUG("session %llu: read error: %s", (unsigned long long)s->id,
                uv_strerror((int)nread));
    }
    session_close_now(s);
    return;
  }
  if (nread == 0) {
    return;
  }
  s->active_ms = uv_now(srv->loop);
  int rc = 0;
  s->after_bulk = s->in_place || (s->after_bulk && !s->head_only);
  if (s->in_place) {
    frame_reader_commit(&s->reader, (size_t)nread);
  } else {
    rc = frame_reader_feed(&s->reader, buf->base, (size_t)nread);
  }
  if (rc) {
    session_close_now(s);
    return;
  }

  take_turn(s);
}


static void start_reading(session_t* s) {
  if (!s->reading && !s->closing && !s->paused && !s->blocked && !s->yielded && !s->eof) {
    if (uv_read_start((uv_stream_t*)&s->tcp, on_alloc, on_read) == 0) {
      s->reading = 1;
    }
  }
}


void session_next_turn(session_t* s) {
  s->yielded = 0;
  take_turn(s);
  start_reading(s);
}


void session_pause(session_t* s) {
  s->paused = 1;
  if (s->reading) {
    uv_read_stop((uv_stream_t*)&s->tcp);
    s->reading = 0;
  }
}


void session_resume(session_t* s) {
  if (!s->paused || s->closing) {
    return;
  }
  s->paused = 0;

  // frames already buffered are delivered before reading more; a partial frame's deadline
  // restarts, since the daemon, not the peer, held it up
  s->in_frame = 0;
  take_turn(s);
  start_reading(s);
}


uint8_t* session_take_frame(session_t* s) {
  uint8_t* frame = frame_reader_take(&s->reader);
  if (frame) {
    // the reader is empty now; the frame is the owner's to count (server_hold), at once: the
    // owner's request may be answered before the reader is counted again
    release_input(s);
  }
  return frame;
}


void session_set_ready(session_t* s) {
  s->ready = 1;
  frame_reader_set_limit(&s->reader, s->srv->limits.max_frame_bytes, "max_frame_bytes", "");
}


void session_retain(session_t* s) {
  s->refs++;
}


void session_set_data(session_t* s, void* data) {
  s->data = data;
}


void* session_data(const session_t* s) {
  return s->data;
}


uint64_t session_id(const session_t* s) {
  return s->id;
}


const char* session_peer(const session_t* s) {
  return s->peer;
}


uint64_t session_queued_bytes(const session_t* s) {
  return s->queued;
}


static void describe_peer(session_t* s) {
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  snprintf(s->peer, sizeof(s->peer), "?");
  if (uv_tcp_getpeername(&s->tcp, (struct sockaddr*)&ss, &len) != 0) {
    return;
  }
  char ip[48] = "";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in* a = (const struct sockaddr_in*)&ss;
    uv_ip4_name(a, ip, sizeof(ip));
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const struct sockaddr_in6* a = (const struct sockaddr_in6*)&ss;
    uv_ip6_name(a, ip, sizeof(ip));
    port = ntohs(a->sin6_port);
  }
  snprintf(s->peer, sizeof(s->peer), "%s:%d", ip, port);
}


void session_accept(server_t* srv) {
  session_t* s = mem_calloc(1, sizeof(*s));
  if (!s) {
    LOG_ERROR("out of memory accepting a connection");
    return;
  }
  s->srv = srv;
  s->id = ++srv->next_id;
  s->refs = 1;
  s->opened_ms = s->active_ms = uv_now(srv->loop);

  // until Hello succeeds only a small frame is accepted: an unauthenticated peer cannot make
  // the daemon buffer max_frame_bytes
  frame_reader_init(&s->reader, srv->limits.max_hello_bytes);
  frame_reader_set_limit(&s->reader, srv->limits.max_hello_bytes, "max_hello_bytes",
                         " (the limit until Hello succeeds; then max_frame_bytes)");
  uv_tcp_init(srv->loop, &s->tcp);
  uv_timer_init(srv->loop, &s->linger);
  s->linger.data = s;
  list_push_back(&srv->sessions, &s->node);
  srv->nlive++;
  if (uv_accept((uv_stream_t*)&srv->listener, (uv_stream_t*)&s->tcp) != 0) {
    session_close_now(s);
    return;
  }
  uv_tcp_nodelay(&s->tcp, 1);
  describe_peer(s);
  if (srv->hooks.on_open && srv->hooks.on_open(srv->hooks.user, s) != 0) {
    session_close(s);
    return;
  }
  start_reading(s);
}


// Close a session whose deadline passed, with a status frame when it can still be read.
static void expire(session_t* s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

static void expire(session_t* s, const char* fmt, ...) {
  char text[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  s->srv->timed_out++;
  stream_fail(s, SERVER_ERR_TIMEOUT, text);
}


void session_check_deadlines(session_t* s, uint64_t now) {
  server_t* srv = s->srv;
  const server_limits_t* lim = &srv->limits;

  // a session that is not reading (paused, half closed) would notice a reset only when a
  // write fails: ask the socket, so that the slot is given back within a tick
  uv_os_fd_t fd;
  if (!s->reading && uv_fileno((uv_handle_t*)&s->tcp, &fd) == 0) {
    int err = 0;
    socklen_t n = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n) == 0 && err != 0) {
      LOG_DEBUG("session %llu (%s): %s; closing", (unsigned long long)s->id, s->peer,
                strerror(err));
      session_close_now(s);
      return;
    }
  }

  // replies that do not move: the peer does not read, no status frame can reach it
  if (lim->io_timeout_ms && s->queued > 0) {
    uint64_t mark = s->sent_total - uv_stream_get_write_queue_size((uv_stream_t*)&s->tcp);
    if (mark != s->progress_mark) {
      s->progress_mark = mark;
      s->progress_ms = now;
    } else if (now - s->progress_ms >= lim->io_timeout_ms) {
      LOG_WARN("session %llu (%s): %llu unsent bytes did not move for %u ms; closing",
               (unsigned long long)s->id, s->peer, (unsigned long long)s->queued,
               lim->io_timeout_ms);
      srv->timed_out++;
      session_close_now(s);
      return;
    }
  }
  if (!s->ready && lim->handshake_timeout_ms && now - s->opened_ms >= lim->handshake_timeout_ms) {
    expire(s, "no successful hello within handshake_timeout_ms %u", lim->handshake_timeout_ms);
  } else if (lim->io_timeout_ms && s->in_frame && !s->paused && !s->blocked && !s->eof &&
             now - s->frame_ms >= lim->io_timeout_ms) {
    size_t have = frame_reader_buffered(&s->reader);
    size_t want = frame_reader_expected(&s->reader);
    if (want) {
      expire(s, "a frame did not arrive completely within io_timeout_ms %u (%zu of %zu bytes)",
             lim->io_timeout_ms, have, want);
    } else {
      // the length itself is incomplete: there is no frame size to give yet
      expire(s, "a frame did not arrive completely within io_timeout_ms %u (%zu of the %u "
             "bytes of its length)", lim->io_timeout_ms, have, FRAME_HEADER_BYTES);
    }
  } else if (s->ready && lim->idle_timeout_ms && s->queued == 0 &&
             now - s->active_ms >= lim->idle_timeout_ms &&
             !(srv->hooks.is_busy && srv->hooks.is_busy(srv->hooks.user, s))) {
    expire(s, "no traffic for idle_timeout_ms %u", lim->idle_timeout_ms);
  }
}
