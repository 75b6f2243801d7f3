// SPDX-License-Identifier: MIT
// reply.c: the replies of one connection: in request order once the handshake is done
// (net/outbox.h), counted in the daemon's totals and (while they wait in the outbox) in the
// budget of memory held for connections, and the back-pressure they exert on reading.
#include <stdarg.h>
#include <stdio.h>

#include "base/log.h"
#include "daemon/daemon_impl.h"

// Requests of one connection awaiting their reply before reading pauses.
#define REPLY_MAX_PENDING 4096

static void send_payload(daemon_t* d, session_t* s, uint8_t* payload, size_t len) {
  d->counters.frames_out++;
  d->counters.bytes_out += len + 4;
  session_send(s, payload, len);
}


// Count what the outbox holds now (its slots, replies waiting behind an unfinished request) in
// the server's budget.
static void sync_held(daemon_t* d, client_t* c) {
  if (c->out.mem_bytes != c->out_held) {
    server_hold(d->server, (int64_t)c->out.mem_bytes - (int64_t)c->out_held);
    c->out_held = c->out.mem_bytes;
  }
}


static void client_send(void* user, uint8_t* payload, size_t len) {
  client_t* c = user;

  // the reply left the outbox: its memory is counted by the session from here on, not twice
  sync_held(c->d, c);
  send_payload(c->d, c->s, payload, len);
}


// A frame of a step's reply, by reference (its points are not copied).
static void client_send_shared(void* user, shared_buf_t* frame) {
  client_t* c = user;

  // as client_send: from here on the session counts what the frame holds
  sync_held(c->d, c);
  c->d->counters.frames_out++;
  c->d->counters.bytes_out += shared_buf_frame_len(frame);
  (void)session_send_shared(c->s, frame);
}


// After replies moved: a finishing client closes once its outbox is empty; a paused one
// resumes reading when its backlog has halved.
void reply_moved(daemon_t* d, client_t* c) {
  sync_held(d, c);
  if (session_is_closing(c->s)) {
    return;
  }
  if (c->finishing) {
    if (outbox_is_empty(&c->out)) {
      session_close(c->s);
    }
    return;
  }
  if (c->paused && c->pending_bytes + c->out.held_bytes <= d->cfg.max_pending_bytes / 2 &&
      c->out.nslot <= REPLY_MAX_PENDING / 2) {
    c->paused = 0;
    session_resume(c->s);
  }
}


// Pause reading while the client's backlog (queued requests, replies held back) is too large.
void reply_check_backlog(daemon_t* d, client_t* c) {
  sync_held(d, c);
  if (!c->paused && (c->pending_bytes + c->out.held_bytes > d->cfg.max_pending_bytes ||
                     c->out.nslot > REPLY_MAX_PENDING)) {
    c->paused = 1;
    session_pause(c->s);
  }
}


// A reply to a request of a ready client, after the replies of its earlier requests. Takes
// ownership of payload.
void reply_put(daemon_t* d, client_t* c, uint8_t* payload, size_t len) {
  if (outbox_put(&c->out, payload, len) != 0) {
    session_close(c->s);
    return;
  }
  reply_check_backlog(d, c);
  reply_moved(d, c);
}


// Stop reading and close once every reply already owed has left.
void reply_finish(daemon_t* d, client_t* c) {
  c->finishing = 1;
  session_pause(c->s);
  reply_moved(d, c);
}


void reply_status(daemon_t* d, session_t* s, uint64_t id, int code, const char* fmt,
                  ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (code) {
    d->counters.requests_failed++;
    LOG_DEBUG("session %llu: %s: %s", (unsigned long long)session_id(s), err_name(code), text);
  }
  uint8_t* out;
  size_t len;
  if (wire_encode_status(id, code, text, &out, &len) != 0) {
    session_close(s);
    return;
  }
  client_t* c = session_data(s);
  if (c && c->ready) {
    reply_put(d, c, out, len);
  } else {
    send_payload(d, s, out, len);
  }
}


void reply_init(client_t* c) {
  outbox_init(&c->out, client_send, c);
  outbox_set_send_shared(&c->out, client_send_shared);
}


void reply_close(daemon_t* d, client_t* c) {
  outbox_close(&c->out);
  sync_held(d, c);
}
