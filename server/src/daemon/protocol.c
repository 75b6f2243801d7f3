// SPDX-License-Identifier: MIT
// protocol.c: the session protocol. Handshake (hello: version, token, role, environment
// joined or created), routing of each decoded request, the request jobs that run environment
// work on the environment's serial queue (daemon/exec.h), and the server hooks of a
// connection's life. Replies go through daemon/reply.c. The loop only decodes, routes and
// writes.
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/text.h"
#include "daemon/daemon_impl.h"

typedef struct req_job {
  exec_job_t base;
  daemon_t* d;
  session_t* s;              // retained
  outbox_slot_t* slot;       // where the reply goes
  liveness_t* live;          // referenced
  registry_entry_t* entry;   // referenced
  wire_request_t* req;
  uint64_t held;             // counted in the memory budget until done: request and job record
  uint8_t* out;
  size_t out_len;
  int code;
  int hello;                 // the hello job: create the environment if needed
  int created;
  uint64_t deadline_ns;      // 0 = none; set when the job starts running
  int is_step;
  wire_step_t step;          // a step's reply frames (its records went to the streams)
  atomic_int expired;        // the deadline stopped it (Thread: set by tracing threads)
} req_job_t;


//---------------- environments

static void client_leave(daemon_t* d, client_t* c) {
  if (c->entry) {
    registry_leave(&d->registry, c->entry);
    c->entry = NULL;
  }
}


//---------------- request jobs

static void liveness_release(liveness_t* l) {
  if (--l->refs == 0) {
    mem_free(l);
  }
}


// wire_set_cancel hook: the daemon is stopping, the requesting client has left, or the
// request ran past --max-request-seconds (any long request polls it: raycasts, sensor steps,
// a step before each sensor). The coarse clock: a deadline of seconds is seen at most a
// scheduler tick late, and a step's polls cost a quarter as much.
static int req_cancelled(void* ctx) {
  req_job_t* rj = ctx;
  if (rj->deadline_ns && clock_coarse_ns() > rj->deadline_ns) {
    atomic_store(&rj->expired, 1);
    return 1;
  }
  return atomic_load(&rj->d->halt) || atomic_load(&rj->live->gone);
}


static void req_execute(exec_job_t* j) {
  req_job_t* rj = (req_job_t*)j;
  registry_entry_t* e = rj->entry;
  daemon_t* d = rj->d;
  if (d->cfg.max_request_ms) {
    rj->deadline_ns = j->started_ns + (uint64_t)d->cfg.max_request_ms * 1000000u;
  }
  if (rj->hello) {
    if (!e->env && !e->failed) {
      err_msg_t msg;
      e->env = env_create(e->name, &d->cfg.limits, d->device, d->pool, &msg);
      if (!e->env) {
        e->failed = 1;
        LOG_ERROR("environment '%s' could not be created: %s", e->name, msg.text);
      } else {
        rj->created = 1;
      }
    }
    return;
  }
  if (!e->env) {
    rj->code = ERR_INTERNAL;
    if (wire_encode_status(wire_id(rj->req), ERR_INTERNAL,
                           "the environment could not be created", &rj->out, &rj->out_len)) {
      rj->out = NULL;
    }
    return;
  }
  if (!rj->is_step) {
    if (wire_env_execute(rj->req, e->env, &rj->out, &rj->out_len, &rj->code)) {
      rj->out = NULL;
    }
    // a removed sensor's streams end here, before a later request can give its id to a new
    // sensor and a later step its records
    uint32_t removed;
    if (rj->code == 0 && wire_removes_sensor(rj->req, &removed)) {
      streams_sensor_removed(d->streams, e, removed);
    }
    return;
  }

  // A step's reply refers to its records' points and is sent as soon as the step is done:
  // it never waits for the subscribers' frames, which the streams make from the same
  // records, by reference, on their own threads. The reply is bounded before the step is
  // committed: what one connection may hold.
  uint64_t reply_max = d->cfg.max_queue_bytes;
  if (d->cfg.max_held_bytes && d->cfg.max_held_bytes / 2 < reply_max) {
    reply_max = d->cfg.max_held_bytes / 2;
  }
  wire_step_limits_t lim = {.max_frame_bytes = d->cfg.max_frame_bytes,
                            .max_reply_bytes = reply_max};
  if (wire_step_execute(rj->req, e->env, &lim, &rj->step) != 0) {
    rj->step.frames = NULL;
    rj->step.nframes = 0;
  }
  rj->code = rj->step.code;
  if (rj->code == 0) {
    streams_submit(d->streams, e, &rj->step.records, rj->step.start_time);
  }
  env_return_outputs(e->env, &rj->step.records);
}


// A request, then the environment's counters as it left them, for GetInfo (registry.h): a
// reply always follows the counters that include its request.
static void req_run(exec_job_t* j) {
  req_execute(j);
  registry_publish(((req_job_t*)j)->entry);
}


// The hello reply, or an error when the environment could not be created (the client then
// finishes). Returns the payload (NULL on allocation failure).
static uint8_t* hello_reply(daemon_t* d, client_t* c, req_job_t* rj, size_t* out_len) {
  registry_entry_t* e = rj->entry;
  uint8_t* out = NULL;
  if (!e->env) {
    c->finishing = 1;
    session_pause(c->s);
    d->counters.requests_failed++;
    char text[128];
    snprintf(text, sizeof(text), "hello.environment '%s' could not be created", e->name);
    return wire_encode_status(wire_id(rj->req), ERR_INTERNAL, text, &out, out_len) ? NULL : out;
  }
  wire_hello_reply_t h = {
      .server_version = SENSIM_VERSION,
      .session_id = session_id(c->s),
      .environment = e->name,
      .environment_created = rj->created,
      .threads = d->cfg.threads,
      .limits = &d->limits,
  };
  LOG_INFO("session %llu (%s, '%s', %s) joined environment '%s'%s",
           (unsigned long long)session_id(c->s), session_peer(c->s), c->name,
           c->observer ? "observer" : "controller", e->name, rj->created ? " (created)" : "");
  return wire_encode_hello_reply(wire_id(rj->req), &h, &out, out_len) ? NULL : out;
}


static void req_done(exec_job_t* j, int cancelled) {
  req_job_t* rj = (req_job_t*)j;
  daemon_t* d = rj->d;
  client_t* c = session_data(rj->s);

  // the reply fills the request's slot; an orphaned slot (client gone) just frees it
  uint8_t* out = NULL;
  size_t len = 0;
  if (!cancelled && c) {
    if (rj->hello) {
      out = hello_reply(d, c, rj, &len);
    } else {
      out = rj->out;
      len = rj->out_len;
      rj->out = NULL;
      d->counters.requests_failed += rj->code != 0;
      if (rj->code != 0 && atomic_load(&rj->expired)) {
        // stopped by its deadline: said so, instead of the generic cancellation
        d->counters.requests_timed_out++;
        wire_step_free(&rj->step);
        mem_free(out);
        char text[160];
        snprintf(text, sizeof(text), "%s took longer than max_request_ms %u and was stopped; "
                 "nothing was changed", wire_body_name(rj->req), d->cfg.max_request_ms);
        out = wire_encode_status(wire_id(rj->req), WIRE_ERR_DEADLINE, text, &out, &len) ? NULL
                                                                                         : out;
      }
    }
    if (!out && !rj->step.frames &&
        wire_encode_status(wire_id(rj->req), ERR_NOMEM, "out of memory encoding the reply",
                           &out, &len)) {
      out = NULL;
    }
  }

  // a step's frames (its parts, then its StepDone) go out by reference, in its slot's turn
  if (out || !rj->step.frames) {
    outbox_fill(rj->slot, out, len);
  } else {
    outbox_fill_shared(rj->slot, rj->step.frames, rj->step.nframes);
    rj->step.frames = NULL;
    rj->step.nframes = 0;
  }
  wire_step_free(&rj->step);
  server_hold(d->server, -(int64_t)rj->held);
  if (c) {
    c->pending_bytes -= rj->held;
    reply_moved(d, c);
  }
  mem_free(rj->out);
  wire_free(rj->req);
  registry_release(rj->entry);
  liveness_release(rj->live);
  session_release(rj->s);
  spares_give(&d->spare_jobs, rj);
}


// Queue a request on its environment's queue; takes ownership of req.
static void submit_request(daemon_t* d, client_t* c, wire_request_t* req, int hello) {
  req_job_t* rj = spares_take(&d->spare_jobs, sizeof(*rj));
  outbox_slot_t* slot = rj ? outbox_reserve(&c->out) : NULL;
  if (!slot) {
    mem_free(rj);
    reply_status(d, c->s, wire_id(req), ERR_NOMEM, "out of memory queueing %s",
                 wire_body_name(req));
    wire_free(req);
    return;
  }
  rj->d = d;
  rj->s = c->s;
  rj->slot = slot;
  rj->entry = c->entry;
  rj->req = req;
  rj->hello = hello;
  rj->is_step = !hello && wire_is_step(req);
  rj->live = c->live;
  rj->live->refs++;
  wire_set_cancel(req, req_cancelled, rj);
  rj->base.run = req_run;
  rj->base.done = req_done;
  registry_retain(c->entry);
  session_retain(c->s);
  rj->held = wire_size(req) + mem_footprint(rj);
  c->pending_bytes += rj->held;
  server_hold(d->server, (int64_t)rj->held);
  reply_check_backlog(d, c);
  // a state update or step of an environment whose recent ones all took under 50 us (an
  // IMU's, a joint's), with nothing else in flight, runs here: no hand-off to an executor
  rj->base.inline_candidate = !hello && (wire_is_step(req) || wire_is_state_update(req));
  double step_time;
  if (rj->base.inline_candidate && exec_pending(d->exec) == 0 && wire_step_time(req, &step_time)) {
    env_time_t t;  // nothing in flight: the environment is not being changed
    env_get_time(c->entry->env, &t);
    rj->base.span = t.has_time ? step_time - t.t_prev : 0.0;
    if (!(rj->base.span >= 0.0)) {
      rj->base.span = 0.0;  // a bad time: refused at once by the step itself
    }
  }
  if (exec_run_inline(d->exec, &c->entry->queue, &rj->base)) {
    return;
  }
  exec_submit(d->exec, &c->entry->queue, &rj->base);
}


//---------------- protocol

// The environments' memory past --max-scene-bytes refuses requests that add to them: the heap
// in use less what is queued for connections and what was in use at start-up (that is, the
// core's copies of meshes, tables and names),
// plus what the ray-tracing backend holds (it allocates most of its memory outside the heap;
// the part inside is counted twice, on the safe side).
#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void);  // the ASan runtime's
uint64_t protocol_heap_in_use(void) {
  return __sanitizer_get_current_allocated_bytes();  // the sanitizer's allocator replaces malloc
}
#else
uint64_t protocol_heap_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}
#endif

static int scene_memory_full(daemon_t* d, uint64_t* used) {
  server_stats_t st;
  server_get_stats(d->server, &st);
  uint64_t heap = protocol_heap_in_use();
  uint64_t errors;
  int64_t backend;
  scene_device_counters(d->device, &errors, &backend);
  uint64_t other = st.held_bytes + d->heap_base;
  *used = heap > other ? heap - other : 0;
  *used += backend > 0 ? (uint64_t)backend : 0;
  return d->cfg.max_scene_bytes && *used > d->cfg.max_scene_bytes;
}


static void handle_hello(daemon_t* d, client_t* c, wire_request_t* req) {
  session_t* s = c->s;
  uint64_t id = wire_id(req);
  wire_hello_t h;
  wire_get_hello(req, &h);
  if (h.protocol_version != WIRE_PROTOCOL_VERSION) {
    reply_status(d, s, id, ERR_STATE,
                 "hello.protocol_version = %u is not supported (this daemon speaks %u)",
                 h.protocol_version, WIRE_PROTOCOL_VERSION);
    goto refuse;
  }
  // strings hold no NUL (wire_text_error), so strlen is the full length
  if (d->cfg.token && !text_equal_secret(h.token, strlen(h.token), d->cfg.token,
                                         strlen(d->cfg.token))) {
    reply_status(d, s, id, ERR_AUTH, "hello.token is %s",
                 h.token[0] ? "wrong" : "missing");
    LOG_WARN("session %llu (%s): refused: bad token", (unsigned long long)session_id(s),
             session_peer(s));
    goto refuse;
  }
  const char* name = h.environment[0] ? h.environment : "default";
  if (!registry_name_ok(name)) {
    reply_status(d, s, id, ERR_INVAL,
                 "hello.environment must be 1 to %d bytes of printable UTF-8",
                 REGISTRY_NAME_MAX);
    goto refuse;
  }
  if (h.role < 0 || h.role > 1) {
    reply_status(d, s, id, ERR_INVAL, "hello.role = %d is unknown", h.role);
    goto refuse;
  }
  if (h.retention < 0 || h.retention > 2) {
    reply_status(d, s, id, ERR_INVAL, "hello.retention = %d is unknown", h.retention);
    goto refuse;
  }

  // join or create the environment
  // Only controllers keep environments: an observer could otherwise pin environments
  // nobody can release, up to the limit, for the life of the daemon.
  if (h.observer && h.retention == 2) {
    reply_status(d, s, id, ERR_INVAL,
                 "hello.retention = RETENTION_KEEP needs role controller");
    goto refuse;
  }
  int retain = !h.observer && (h.retention == 2 ||
                               (h.retention == 0 && d->cfg.retain_environments));
  int created;
  int rc = registry_join(&d->registry, name, retain, &c->entry, &created);
  if (rc == ERR_LIMIT) {
    reply_status(d, s, id, ERR_LIMIT,
                 "max_environments (%u) reached; hello.environment '%s' cannot be "
                 "created", d->cfg.max_environments, name);
    goto refuse;
  }
  if (rc) {
    reply_status(d, s, id, ERR_NOMEM, "out of memory creating an environment");
    goto refuse;
  }
  c->ready = 1;
  session_set_ready(s);
  c->observer = h.observer;
  text_copy(c->name, sizeof(c->name), h.client_name);  // for logs: cut, still valid UTF-8
  // recorded without the Hello itself: its token must not reach the file
  record_put(d->recorder, RECORD_HELLO, session_id(s), c->observer, c->entry->name,
             h.client_name, strlen(h.client_name));
  submit_request(d, c, req, 1);
  return;

refuse:
  wire_free(req);
  session_close(s);
}


// --record: a request accepted for its environment's queue, recorded in the order it is
// queued there (the loop queues every request of an environment in arrival order).
static void record_request(daemon_t* d, client_t* c, const uint8_t* payload, size_t len) {
  if (d->recorder) {
    record_put(d->recorder, RECORD_REQUEST, session_id(c->s), c->observer, c->entry->name,
               payload, len);
  }
}


// Frames from this size on may be taken from the session for their request
// (session_take_frame).
#define PROTOCOL_TAKE_BYTES (64u << 10)


static uint8_t* take_frame(void* s) {
  return session_take_frame(s);
}


static void on_frame(void* user, session_t* s, const uint8_t* payload, size_t len) {
  daemon_t* d = user;
  client_t* c = session_data(s);
  d->counters.frames_in++;
  d->counters.bytes_in += len + 4;

  // a large frame's request keeps the frame and points into it rather than copying its bulk
  // arrays (a raycast's rays)
  wire_request_t* req;
  err_msg_t msg;
  int rc = len >= PROTOCOL_TAKE_BYTES ? wire_decode_frame(payload, len, take_frame, s, &req, &msg)
                                      : wire_decode(payload, len, &req, &msg);
  if (rc != 0) {
    // the replies of earlier requests still leave before the error and the close
    d->counters.frames_rejected++;
    reply_status(d, s, 0, rc, "%s; closing the connection", msg.text);
    if (c->ready) {
      reply_finish(d, c);
    } else {
      session_close(s);
    }
    return;
  }
  uint64_t id = wire_id(req);
  wire_kind_t kind = wire_kind(req);

  // a NUL, a control character or an over-long string refuses the request (field named)
  if (wire_text_error(req)) {
    reply_status(d, s, id, ERR_INVAL, "%s", wire_text_error(req));
    wire_free(req);
    if (!c->ready) {
      session_close(s);
    }
    return;
  }

  // handshake first: anything else, or a hello without an id, is refused and closed
  if (!c->ready) {
    if (kind == WIRE_KIND_HELLO && id != 0) {
      handle_hello(d, c, req);
      return;
    }
    if (kind == WIRE_KIND_HELLO) {
      reply_status(d, s, 0, ERR_INVAL, "envelope.id must be > 0 in a request (hello)");
    } else {
      reply_status(d, s, id, ERR_STATE, "the first message must be hello (got %s)",
                   wire_body_name(req));
    }
    wire_free(req);
    session_close(s);
    return;
  }
  if (id == 0) {
    reply_status(d, s, 0, ERR_INVAL, "envelope.id must be > 0 in a request (%s)",
                 wire_body_name(req));
    wire_free(req);
    return;
  }

  uint8_t* out;
  size_t out_len;
  switch (kind) {
    case WIRE_KIND_HELLO:
      reply_status(d, s, id, ERR_STATE, "hello was already done on this connection");
      break;
    case WIRE_KIND_PING:
      if (wire_encode_pong(req, clock_now_ns(), &out, &out_len) == 0) {
        reply_put(d, c, out, out_len);
      }
      break;
    case WIRE_KIND_GET_INFO:
      info_submit(d, c, id);
      break;
    case WIRE_KIND_ENV_WRITE:
      if (c->observer) {
        reply_status(d, s, id, ERR_STATE,
                     "%s changes the environment; this connection's role is "
                     "observer", wire_body_name(req));
        break;
      }
      uint64_t used;
      // only what adds to the scenes is refused past max_scene_bytes (a tick's state update
      // or step, the most frequent writes, are told apart without their names)
      const char* body =
          wire_is_state_update(req) || wire_is_step(req) ? "" : wire_body_name(req);
      if ((strncmp(body, "create_", 7) == 0 || strcmp(body, "set_material") == 0) &&
          scene_memory_full(d, &used)) {
        reply_status(d, s, id, ERR_LIMIT, "%s: the environments hold %llu bytes, "
                     "past max_scene_bytes %llu (--max-scene-bytes); remove something "
                     "first", body, (unsigned long long)used,
                     (unsigned long long)d->cfg.max_scene_bytes);
        break;
      }
      record_request(d, c, payload, len);
      submit_request(d, c, req, 0);
      return;
    case WIRE_KIND_ENV_READ:
      record_request(d, c, payload, len);
      submit_request(d, c, req, 0);
      return;
    case WIRE_KIND_ENV_RELEASE:
      if (c->observer) {
        reply_status(d, s, id, ERR_STATE,
                     "remove: only a controller removes an environment");
        break;
      }
      c->entry->retain = 0;
      LOG_INFO("environment '%s': no longer kept; destroyed when its last client leaves",
               c->entry->name);
      reply_status(d, s, id, 0,
                   "environment '%s' is destroyed when its last client leaves",
                   c->entry->name);
      break;
    case WIRE_KIND_SUBSCRIBE:
      record_request(d, c, payload, len);
      subscribe_add(d, c, req);
      break;
    case WIRE_KIND_UNSUBSCRIBE:
      record_request(d, c, payload, len);
      subscribe_remove(d, c, req);
      break;
    case WIRE_KIND_NOT_SERVED:
      reply_status(d, s, id, ERR_UNIMPL, "%s is not served by this daemon yet",
                   wire_body_name(req));
      break;
    case WIRE_KIND_REPLY:
      reply_status(d, s, id, ERR_INVAL, "%s is a reply, not a request",
                   wire_body_name(req));
      break;
    case WIRE_KIND_EMPTY:
      reply_status(d, s, id, ERR_INVAL, "envelope has no body");
      break;
  }
  wire_free(req);
}


static int on_open(void* user, session_t* s) {
  daemon_t* d = user;
  d->counters.connections_total++;
  client_t* c = mem_calloc(1, sizeof(*c));
  if (!c) {
    return ERR_NOMEM;
  }
  c->live = mem_calloc(1, sizeof(*c->live));
  if (!c->live) {
    mem_free(c);
    return ERR_NOMEM;
  }
  atomic_init(&c->live->gone, 0);
  c->live->refs = 1;
  c->d = d;
  c->s = s;
  reply_init(c);
  session_set_data(s, c);
  if (server_sessions(d->server) > d->cfg.max_clients) {
    d->counters.connections_rejected++;
    LOG_WARN("session %llu (%s): refused: max_clients (%u) reached",
             (unsigned long long)session_id(s), session_peer(s), d->cfg.max_clients);
    reply_status(d, s, 0, ERR_LIMIT, "max_clients (%u) reached; try again later",
                 d->cfg.max_clients);
    return ERR_LIMIT;
  }
  LOG_DEBUG("session %llu: connected from %s", (unsigned long long)session_id(s),
            session_peer(s));
  return 0;
}


static void on_stream_error(void* user, session_t* s, int code, const char* msg) {
  daemon_t* d = user;
  d->counters.frames_rejected += code != SERVER_ERR_TIMEOUT;  // timeouts are counted apart
  LOG_WARN("session %llu (%s): %s; closing", (unsigned long long)session_id(s), session_peer(s),
           msg);
  reply_status(d, s, 0, code, "%s; closing the connection", msg);
  client_t* c = session_data(s);
  if (c && c->ready) {
    reply_finish(d, c);
  } else {
    session_close(s);
  }
}


// A reply the transport cannot queue (too large, or the memory budget is full) is replaced by
// a status naming the limit, with the same id, so that the request is answered.
_Static_assert(SERVER_ERR_TIMEOUT == WIRE_ERR_DEADLINE, "one code for deadlines");

static void on_send_refused(void* user, session_t* s, const uint8_t* payload, size_t len,
                            int code, const char* msg) {
  daemon_t* d = user;
  uint64_t id;
  uint8_t* out;
  size_t out_len;
  if (!wire_peek_id(payload, len, &id)) {
    id = 0;
  }
  d->counters.requests_failed++;
  if (wire_encode_status(id, code, msg, &out, &out_len) == 0) {
    session_send(s, out, out_len);
  }
}


static int is_busy(void* user, session_t* s) {
  (void)user;
  const client_t* c = session_data(s);
  return c && !outbox_is_empty(&c->out);
}


static void on_eof(void* user, session_t* s) {
  client_t* c = session_data(s);
  if (c) {
    reply_finish(user, c);
  } else {
    session_close(s);
  }
}


static void on_close(void* user, session_t* s) {
  daemon_t* d = user;
  client_t* c = session_data(s);
  if (!c) {
    return;
  }
  LOG_DEBUG("session %llu: closed", (unsigned long long)session_id(s));
  if (c->ready) {
    record_put(d->recorder, RECORD_CLOSE, session_id(s), c->observer,
               c->entry ? c->entry->name : NULL, NULL, 0);
    record_flush(d->recorder);
  }
  streams_session_closed(d->streams, s);
  client_leave(d, c);
  reply_close(d, c);
  atomic_store(&c->live->gone, 1);
  liveness_release(c->live);

  // jobs still in flight find no client data and only release their references
  session_set_data(s, NULL);
  mem_free(c);
}


static void on_stream_drained(void* user, session_t* s) {
  daemon_t* d = user;
  streams_drained(d->streams, s);
}


//---------------- hooks

void protocol_hooks(daemon_t* d, server_hooks_t* out) {
  *out = (server_hooks_t){
      .user = d,
      .on_open = on_open,
      .on_frame = on_frame,
      .on_stream_error = on_stream_error,
      .on_eof = on_eof,
      .on_close = on_close,
      .on_send_refused = on_send_refused,
      .is_busy = is_busy,
      .on_stream_drained = on_stream_drained,
  };
}
