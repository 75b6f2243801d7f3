// SPDX-License-Identifier: MIT
// daemon.c: the composition root. Creates, in order, the loop, the ray-tracing device and
// worker pool, the executors, the listener and the signal handlers, and tears them down in
// reverse. Owns the sessions' protocol state (handshake, role, environment) and the registry
// of named environments. Environment work is a job on the environment's serial queue
// (daemon/exec.h); the loop only decodes, routes and writes.
#include "daemon.h"

#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "base/clock.h"
#include "base/list.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/pool.h"
#include "base/text.h"
#include "daemon/exec.h"
#include "daemon/registry.h"
#include "daemon/streams.h"
#include "net/outbox.h"
#include "net/server.h"
#include "net/wire.h"

// Requests of one connection awaiting their reply before reading pauses.
#define SESSION_MAX_PENDING_REPLIES 4096

typedef struct daemon daemon_t;

// Whether a client is still there, shared with its jobs so a long raycast can stop early.
typedef struct liveness {
  atomic_int gone;           // Thread: set on the loop, read by tracing threads
  int refs;                  // the client + each job (loop thread)
} liveness_t;

typedef struct client {
  daemon_t* d;
  session_t* s;
  int ready;                 // hello done
  int observer;
  registry_entry_t* entry;   // joined environment
  liveness_t* live;
  outbox_t out;              // replies in request order
  uint64_t pending_bytes;    // decoded requests queued on the environment's queue
  int paused;                // reading paused by back-pressure
  int finishing;             // half-closed or broken: close once every reply is out
  char name[64];
} client_t;

struct daemon {
  daemon_config_t cfg;
  uv_loop_t loop;
  uv_signal_t sigint;
  uv_signal_t sigterm;
  server_t* server;
  exec_t* exec;
  pool_t* pool;
  scene_device_t* device;
  wire_limits_t limits;
  wire_counters_t counters;  // daemon totals (environment counters are added on demand)
  registry_t registry;
  streams_t* streams;        // subscriptions (daemon/streams.h)
  uint64_t start_ns;
  int stopping;
  uint64_t heap_base;        // heap in use once started (scene_memory_full)
  atomic_int halt;           // set when stopping: running raycasts end early
};

typedef struct req_job {
  exec_job_t base;
  daemon_t* d;
  session_t* s;              // retained
  outbox_slot_t* slot;       // where the reply goes
  liveness_t* live;          // referenced
  registry_entry_t* entry;   // referenced
  wire_request_t* req;
  uint8_t* out;
  size_t out_len;
  int code;
  int hello;                 // the hello job: create the environment if needed
  int created;
  uint64_t deadline_ns;      // 0 = none; set when the job starts running
  streams_batch_t* batch;    // a step's frames for subscribers (set by run)
  atomic_int expired;        // the deadline stopped it (Thread: set by tracing threads)
} req_job_t;

// GetInfo reads each environment on its own queue (one part per environment) and replies when
// the last part is done.
typedef struct info_job info_job_t;

typedef struct info_part {
  exec_job_t base;
  info_job_t* ij;
  uint32_t i;                // index in entries and infos
} info_part_t;

struct info_job {
  daemon_t* d;
  session_t* s;              // retained
  outbox_slot_t* slot;
  uint64_t id;
  registry_entry_t** entries;  // (n) retained
  wire_env_info_t* infos;    // (n) infos[i] written by part i
  info_part_t* parts;        // (n)
  uint32_t n;
  uint32_t remaining;        // parts not yet done
  int cancelled;             // a part was cancelled (the daemon is stopping)
};

void daemon_config_default(daemon_config_t* cfg) {
  memset(cfg, 0, sizeof(*cfg));
  snprintf(cfg->host, sizeof(cfg->host), "%s", DAEMON_DEFAULT_HOST);
  cfg->port = DAEMON_DEFAULT_PORT;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  cfg->threads = cores > 0 ? (unsigned)cores : 1;
  cfg->max_frame_bytes = 64u << 20;
  cfg->max_clients = 64;
  cfg->max_environments = 64;
  cfg->max_queue_bytes = 256ull << 20;
  cfg->max_pending_bytes = 64ull << 20;
  cfg->max_hello_bytes = 64u << 10;
  cfg->handshake_timeout_ms = 5000;
  cfg->io_timeout_ms = 30000;
  cfg->max_request_ms = 60000;

  // half of the physical memory: a scene too large for the machine fails with an error
  // instead of the daemon being killed by the kernel
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  cfg->max_scene_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 2 : 0;

  // a sixteenth of it (at least 256 MiB) for everything queued on connections
  cfg->max_held_bytes = cfg->max_scene_bytes / 8;
  if (cfg->max_held_bytes < (256ull << 20)) {
    cfg->max_held_bytes = 256ull << 20;
  }
  cfg->retain_environments = 0;
  cfg->subscriber_max_bytes = 32ull << 20;
  cfg->subscriber_soft_bytes = 16ull << 20;
  cfg->subscriber_soft_ms = 10000;
  cfg->log_level = LOG_LEVEL_INFO;
  cfg->limits = env_default_limits();
}


//---------------- replies

static void send_payload(daemon_t* d, session_t* s, uint8_t* payload, size_t len) {
  d->counters.frames_out++;
  d->counters.bytes_out += len + 4;
  session_send(s, payload, len);
}


static void client_send(void* user, uint8_t* payload, size_t len) {
  client_t* c = user;
  send_payload(c->d, c->s, payload, len);
}


// After replies moved: a finishing client closes once its outbox is empty; a paused one
// resumes reading when its backlog has halved.
static void client_after_reply(daemon_t* d, client_t* c) {
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
      c->out.nslot <= SESSION_MAX_PENDING_REPLIES / 2) {
    c->paused = 0;
    session_resume(c->s);
  }
}


// Pause reading while the client's backlog (queued requests, replies held back) is too large.
static void client_check_backlog(daemon_t* d, client_t* c) {
  if (!c->paused && (c->pending_bytes + c->out.held_bytes > d->cfg.max_pending_bytes ||
                     c->out.nslot > SESSION_MAX_PENDING_REPLIES)) {
    c->paused = 1;
    session_pause(c->s);
  }
}


// A reply to a request of a ready client, after the replies of its earlier requests. Takes
// ownership of payload.
static void client_reply(daemon_t* d, client_t* c, uint8_t* payload, size_t len) {
  if (outbox_put(&c->out, payload, len) != 0) {
    session_close(c->s);
    return;
  }
  client_check_backlog(d, c);
  client_after_reply(d, c);
}


// Stop reading and close once every reply already owed has left.
static void client_finish(daemon_t* d, client_t* c) {
  c->finishing = 1;
  session_pause(c->s);
  client_after_reply(d, c);
}


// Reply with a status only; code 0 = OK. Replies to ready clients keep request order.
static void reply_status(daemon_t* d, session_t* s, uint64_t id, int code, const char* fmt,
                         ...) __attribute__((format(printf, 5, 6)));

static void reply_status(daemon_t* d, session_t* s, uint64_t id, int code, const char* fmt,
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
    client_reply(d, c, out, len);
  } else {
    send_payload(d, s, out, len);
  }
}


//---------------- environments

static void client_leave(daemon_t* d, client_t* c) {
  if (c->entry) {
    registry_leave(&d->registry, c->entry);
    c->entry = NULL;
  }
}


static void add_env_counters(wire_counters_t* c, const registry_totals_t* t) {
  c->steps += t->steps;
  c->rays_traced += t->rays_traced;
  c->mesh_builds += t->geometry_builds;
  c->instance_updates += t->instance_updates;
  c->scene_commits += t->commits;
}


//---------------- request jobs

static void liveness_release(liveness_t* l) {
  if (--l->refs == 0) {
    mem_free(l);
  }
}


// wire_set_cancel hook: the daemon is stopping, the requesting client has left, or the
// request ran past --max-request-seconds (any long request polls it: raycasts, sensor steps).
static int req_cancelled(void* ctx) {
  req_job_t* rj = ctx;
  if (rj->deadline_ns && clock_now_ns() > rj->deadline_ns) {
    atomic_store(&rj->expired, 1);
    return 1;
  }
  return atomic_load(&rj->d->halt) || atomic_load(&rj->live->gone);
}


static void req_run(exec_job_t* j) {
  req_job_t* rj = (req_job_t*)j;
  registry_entry_t* e = rj->entry;
  daemon_t* d = rj->d;
  if (d->cfg.max_request_ms) {
    rj->deadline_ns = clock_now_ns() + (uint64_t)d->cfg.max_request_ms * 1000000u;
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
  env_time_t t0;
  env_get_time(e->env, &t0);
  if (wire_env_execute(rj->req, e->env, &rj->out, &rj->out_len, &rj->code)) {
    rj->out = NULL;
  }

  // a step's outputs, encoded here for the subscribers (never on the loop thread)
  if (rj->code == 0 && wire_is_step(rj->req)) {
    rj->batch = streams_encode(d->streams, e, env_outputs(e->env), t0.t_prev);
  }
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

  // subscribers get a step's frames before the stepping client's reply
  uint32_t removed;
  if (!cancelled && rj->batch) {
    streams_publish(d->streams, rj->entry, rj->batch);
  } else {
    streams_batch_free(rj->batch);
  }
  rj->batch = NULL;
  if (!cancelled && rj->code == 0 && !rj->hello && wire_removes_sensor(rj->req, &removed)) {
    streams_sensor_removed(d->streams, rj->entry, removed);
  }

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
        mem_free(out);
        char text[160];
        snprintf(text, sizeof(text), "%s took longer than max_request_ms %u and was stopped; "
                 "nothing was changed", wire_body_name(rj->req), d->cfg.max_request_ms);
        out = wire_encode_status(wire_id(rj->req), WIRE_ERR_DEADLINE, text, &out, &len) ? NULL
                                                                                         : out;
      }
    }
    if (!out && wire_encode_status(wire_id(rj->req), ERR_NOMEM,
                                   "out of memory encoding the reply", &out, &len)) {
      out = NULL;
    }
  }
  outbox_fill(rj->slot, out, len);
  server_hold(d->server, -(int64_t)wire_size(rj->req));
  if (c) {
    c->pending_bytes -= wire_size(rj->req);
    client_after_reply(d, c);
  }
  mem_free(rj->out);
  wire_free(rj->req);
  registry_release(rj->entry);
  liveness_release(rj->live);
  session_release(rj->s);
  mem_free(rj);
}


// Queue a request on its environment's queue; takes ownership of req.
static void submit_request(daemon_t* d, client_t* c, wire_request_t* req, int hello) {
  req_job_t* rj = mem_calloc(1, sizeof(*rj));
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
  rj->live = c->live;
  rj->live->refs++;
  wire_set_cancel(req, req_cancelled, rj);
  rj->base.run = req_run;
  rj->base.done = req_done;
  registry_retain(c->entry);
  session_retain(c->s);
  c->pending_bytes += wire_size(req);
  server_hold(d->server, (int64_t)wire_size(req));
  client_check_backlog(d, c);
  exec_submit(d->exec, &c->entry->queue, &rj->base);
}


//---------------- subscriptions

// Subscribe runs on the environment's queue, in order with the requests before it: the sensor
// must exist there, and the demand is added before any later step runs.
typedef struct sub_job {
  exec_job_t base;
  daemon_t* d;
  session_t* s;              // retained
  outbox_slot_t* slot;
  registry_entry_t* entry;   // referenced
  uint64_t id;
  uint32_t sensor_id;
  wire_stream_params_t p;
  int unsubscribe;           // an Unsubscribe: queued only to keep its order
  int code;                  // 0, ERR_NOTFOUND or ERR_NOMEM
} sub_job_t;


static void sub_run(exec_job_t* j) {
  sub_job_t* sj = (sub_job_t*)j;
  registry_entry_t* e = sj->entry;
  if (sj->unsubscribe) {
    return;
  }
  if (!e->env || env_sensor_kind(e->env, sj->sensor_id) == 0) {
    sj->code = ERR_NOTFOUND;
    return;
  }
  sj->code = streams_demand_add(sj->d->streams, e, sj->sensor_id, &sj->p);
}


static void sub_done(exec_job_t* j, int cancelled) {
  sub_job_t* sj = (sub_job_t*)j;
  daemon_t* d = sj->d;
  client_t* c = session_data(sj->s);
  int code = cancelled ? ERR_STATE : sj->code;
  uint8_t* out = NULL;
  size_t len = 0;
  char text[160] = "";
  if (sj->unsubscribe) {
    if (code == 0 && c) {
      code = streams_unsubscribe(d->streams, sj->s, sj->sensor_id);
    }
    if (code == 0) {
      snprintf(text, sizeof(text), "unsubscribed from sensor %u", sj->sensor_id);
    } else if (code == ERR_NOTFOUND) {
      snprintf(text, sizeof(text), "unsubscribe.sensor_id = %u: this connection is not "
               "subscribed to it", sj->sensor_id);
    }
  } else if (code == 0 && (!c || session_is_closing(sj->s))) {
    streams_demand_remove(d->streams, sj->entry, sj->sensor_id, &sj->p);
  } else if (code == 0) {
    code = streams_subscribe(d->streams, sj->s, sj->entry, sj->entry->name, sj->sensor_id,
                             &sj->p);
    if (code != 0) {
      streams_demand_remove(d->streams, sj->entry, sj->sensor_id, &sj->p);
    }
  }
  if (sj->unsubscribe) {
    // the text is set
  } else if (code == ERR_NOTFOUND) {
    snprintf(text, sizeof(text), "subscribe.sensor_id = %u: no such sensor", sj->sensor_id);
  } else if (code == ERR_EXISTS) {
    snprintf(text, sizeof(text), "subscribe.sensor_id = %u: this connection is subscribed "
             "already (unsubscribe first)", sj->sensor_id);
  }
  if (code != 0 && !text[0]) {
    snprintf(text, sizeof(text), "%s: %s", sj->unsubscribe ? "unsubscribe" : "subscribe",
             err_str(code));
  }
  if (c) {
    d->counters.requests_failed += code != 0;
    if (wire_encode_status(sj->id, code, text, &out, &len) != 0) {
      out = NULL;
    }
  }
  outbox_fill(sj->slot, out, len);
  if (c) {
    client_after_reply(d, c);
  }
  registry_release(sj->entry);
  session_release(sj->s);
  mem_free(sj);
}


static void submit_sub_job(daemon_t* d, client_t* c, uint64_t id, uint32_t sensor_id,
                           const wire_stream_params_t* p, int unsubscribe);


static void handle_subscribe(daemon_t* d, client_t* c, wire_request_t* req) {
  uint64_t id = wire_id(req);
  wire_subscribe_t w;
  wire_get_subscribe(req, &w);
  if (w.encoding < CODEC_RAW || w.encoding > CODEC_QZSTD) {
    reply_status(d, c->s, id, ERR_INVAL, "subscribe.encoding = %d is unknown", w.encoding);
    return;
  }
  codec_params_t p = {.encoding = (codec_encoding_t)w.encoding, .level = w.level ? w.level : 1,
                      .precision = w.has_precision ? w.precision : CODEC_DEFAULT_PRECISION};
  if (w.level < 0 || w.level > 19) {
    reply_status(d, c->s, id, ERR_INVAL, "subscribe.level = %d must be in [1, 19] (0: 1)",
                 w.level);
    return;
  }
  if (p.encoding == CODEC_QZSTD &&
      !(p.precision >= CODEC_MIN_PRECISION && p.precision <= CODEC_MAX_PRECISION)) {
    reply_status(d, c->s, id, ERR_INVAL, "subscribe.precision = %g must be in [%g, %g] m",
                 p.precision, CODEC_MIN_PRECISION, CODEC_MAX_PRECISION);
    return;
  }
  if (p.encoding != CODEC_QZSTD) {
    p.precision = 0.0;
  }
  if (p.encoding == CODEC_RAW) {
    p.level = 1;
  }

  // the fields asked for: names of a point field, no repeats
  wire_stream_params_t sp = {.codec = p};
  if (w.nfield > WIRE_STREAM_MAX_FIELDS) {
    reply_status(d, c->s, id, ERR_INVAL, "subscribe.fields has %zu names, at most %d",
                 w.nfield, WIRE_STREAM_MAX_FIELDS);
    return;
  }
  for (size_t i = 0; i < w.nfield; i++) {
    size_t len = strlen(w.fields[i]);
    if (len == 0 || len >= WIRE_STREAM_FIELD_NAME) {
      reply_status(d, c->s, id, ERR_INVAL, "subscribe.fields[%zu] must be 1 to %d bytes",
                   i, WIRE_STREAM_FIELD_NAME - 1);
      return;
    }
    for (size_t k = 0; k < i; k++) {
      if (strcmp(w.fields[k], w.fields[i]) == 0) {
        reply_status(d, c->s, id, ERR_INVAL, "subscribe.fields[%zu] = \"%s\" is repeated", i,
                     w.fields[i]);
        return;
      }
    }
    memcpy(sp.fields[i], w.fields[i], len + 1);
  }
  sp.nfield = (uint32_t)w.nfield;
  submit_sub_job(d, c, id, w.sensor_id, &sp, 0);
}


// Unsubscribe goes through the environment's queue too, so that it follows a Subscribe sent
// before it.
static void handle_unsubscribe(daemon_t* d, client_t* c, wire_request_t* req) {
  wire_subscribe_t w;
  wire_get_subscribe(req, &w);
  wire_stream_params_t none = {0};
  submit_sub_job(d, c, wire_id(req), w.sensor_id, &none, 1);
}


static void submit_sub_job(daemon_t* d, client_t* c, uint64_t id, uint32_t sensor_id,
                           const wire_stream_params_t* p, int unsubscribe) {
  sub_job_t* sj = mem_calloc(1, sizeof(*sj));
  outbox_slot_t* slot = sj ? outbox_reserve(&c->out) : NULL;
  if (!slot) {
    mem_free(sj);
    reply_status(d, c->s, id, ERR_NOMEM, "out of memory queueing %s",
                 unsubscribe ? "unsubscribe" : "subscribe");
    return;
  }
  sj->base.run = sub_run;
  sj->base.done = sub_done;
  sj->d = d;
  sj->s = c->s;
  sj->slot = slot;
  sj->entry = c->entry;
  sj->id = id;
  sj->sensor_id = sensor_id;
  sj->p = *p;
  sj->unsubscribe = unsubscribe;
  registry_retain(c->entry);
  session_retain(c->s);
  exec_submit(d->exec, &c->entry->queue, &sj->base);
}


static void on_stream_drained(void* user, session_t* s) {
  daemon_t* d = user;
  streams_drained(d->streams, s);
}


//---------------- info

static void info_part_run(exec_job_t* j) {
  info_part_t* part = (info_part_t*)j;
  registry_entry_t* e = part->ij->entries[part->i];
  if (e->env) {
    env_get_info(e->env, &part->ij->infos[part->i].info);
  }
}


// Every part is done: reply and free.
static void info_finish(info_job_t* ij) {
  daemon_t* d = ij->d;
  client_t* client = session_data(ij->s);
  uint8_t* out = NULL;
  size_t len = 0;
  if (!ij->cancelled && client) {
    wire_info_t info = {
        .server_version = SENSIM_VERSION,
        .uptime_s = (double)(clock_now_ns() - d->start_ns) * 1e-9,
        .connections = server_sessions(d->server),
        .threads = d->cfg.threads,
        .counters = d->counters,
        .envs = ij->infos,
        .nenv = ij->n,
        .limits = &d->limits,
    };
    wire_counters_t* c = &info.counters;
    server_stats_t st;
    server_get_stats(d->server, &st);
    c->held_bytes = st.held_bytes;
    c->connections_timed_out = st.timed_out;
    add_env_counters(c, &d->registry.retired);
    for (uint32_t i = 0; i < ij->n; i++) {
      ij->infos[i].name = ij->entries[i]->name;
      ij->infos[i].clients = ij->entries[i]->clients;
      ij->infos[i].retention = ij->entries[i]->retain ? 2 : 1;
      registry_totals_t t = {0};
      registry_totals_add(&t, &ij->infos[i].info);
      add_env_counters(c, &t);
    }
    streams_totals(d->streams, &c->frames_dropped, &c->bytes_dropped, &c->subscribers_closed);
    wire_sub_info_t* subs = NULL;
    info.nsub = streams_info(d->streams, &subs);
    info.subs = subs;
    int64_t bytes;
    scene_device_counters(d->device, &c->backend_errors, &bytes);
    c->backend_bytes = bytes > 0 ? (uint64_t)bytes : 0;
    if (wire_encode_info(ij->id, &info, &out, &len) != 0 &&
        wire_encode_status(ij->id, ERR_NOMEM, "out of memory encoding info", &out, &len) != 0) {
      out = NULL;
    }
    mem_free(subs);
  }
  outbox_fill(ij->slot, out, len);
  if (client) {
    client_after_reply(d, client);
  }
  for (uint32_t i = 0; i < ij->n; i++) {
    registry_release(ij->entries[i]);
  }
  mem_free(ij->entries);
  mem_free(ij->infos);
  mem_free(ij->parts);
  session_release(ij->s);
  mem_free(ij);
}


static void info_part_done(exec_job_t* j, int cancelled) {
  info_job_t* ij = ((info_part_t*)j)->ij;
  ij->cancelled |= cancelled;
  if (--ij->remaining == 0) {
    info_finish(ij);
  }
}


static void submit_info(daemon_t* d, client_t* c, uint64_t id) {
  info_job_t* ij = mem_calloc(1, sizeof(*ij));
  registry_entry_t** entries = NULL;
  uint32_t n = 0;
  if (ij && registry_snapshot(&d->registry, &entries, &n) != 0) {
    entries = NULL;
  }
  wire_env_info_t* infos = mem_calloc(n ? n : 1, sizeof(*infos));
  info_part_t* parts = mem_calloc(n ? n : 1, sizeof(*parts));
  outbox_slot_t* slot = ij && entries && infos && parts ? outbox_reserve(&c->out) : NULL;
  if (!slot) {
    for (uint32_t i = 0; entries && i < n; i++) {
      registry_release(entries[i]);
    }
    mem_free(ij);
    mem_free(entries);
    mem_free(infos);
    mem_free(parts);
    reply_status(d, c->s, id, ERR_NOMEM, "out of memory collecting info");
    return;
  }
  ij->d = d;
  ij->s = c->s;
  ij->id = id;
  ij->entries = entries;
  ij->infos = infos;
  ij->parts = parts;
  ij->n = n;
  ij->remaining = n;
  ij->slot = slot;
  session_retain(c->s);
  client_check_backlog(d, c);
  if (n == 0) {
    info_finish(ij);
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    parts[i] = (info_part_t){.base = {.run = info_part_run, .done = info_part_done, .brief = 1},
                             .ij = ij, .i = i};
    exec_submit(d->exec, &entries[i]->queue, &parts[i].base);
  }
}


//---------------- protocol

// The environments' memory past --max-scene-bytes refuses requests that add to them: the heap
// in use less what is queued for connections and what was in use at start-up (that is, the
// core's copies of meshes, tables and names),
// plus what the ray-tracing backend holds (it allocates most of its memory outside the heap;
// the part inside is counted twice, on the safe side).
#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void);  // the ASan runtime's
static uint64_t heap_in_use(void) {
  return __sanitizer_get_current_allocated_bytes();  // the sanitizer's allocator replaces malloc
}
#else
static uint64_t heap_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}
#endif

static int scene_memory_full(daemon_t* d, uint64_t* used) {
  server_stats_t st;
  server_get_stats(d->server, &st);
  uint64_t heap = heap_in_use();
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
    reply_status(d, s, id, ERR_AUTH, "hello.token is %s", h.token[0] ? "wrong" : "missing");
    LOG_WARN("session %llu (%s): refused: bad token", (unsigned long long)session_id(s),
             session_peer(s));
    goto refuse;
  }
  const char* name = h.environment[0] ? h.environment : "default";
  if (!registry_name_ok(name)) {
    reply_status(d, s, id, ERR_INVAL,
                 "hello.environment must be 1 to %d bytes of printable UTF-8", REGISTRY_NAME_MAX);
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
    reply_status(d, s, id, ERR_INVAL, "hello.retention = RETENTION_KEEP needs role controller");
    goto refuse;
  }
  int retain = !h.observer && (h.retention == 2 ||
                               (h.retention == 0 && d->cfg.retain_environments));
  int created;
  int rc = registry_join(&d->registry, name, retain, &c->entry, &created);
  if (rc == ERR_LIMIT) {
    reply_status(d, s, id, ERR_LIMIT, "max_environments (%u) reached; hello.environment '%s'"
                 " cannot be created", d->cfg.max_environments, name);
    goto refuse;
  }
  if (rc) {
    reply_status(d, s, id, ERR_NOMEM, "out of memory creating an environment");
    goto refuse;
  }
  c->ready = 1;
  session_set_ready(s);
  c->observer = h.observer;
  snprintf(c->name, sizeof(c->name), "%s", h.client_name);
  submit_request(d, c, req, 1);
  return;

refuse:
  wire_free(req);
  session_close(s);
}


static void on_frame(void* user, session_t* s, const uint8_t* payload, size_t len) {
  daemon_t* d = user;
  client_t* c = session_data(s);
  d->counters.frames_in++;
  d->counters.bytes_in += len + 4;

  wire_request_t* req;
  err_msg_t msg;
  int rc = wire_decode(payload, len, &req, &msg);
  if (rc != 0) {
    // the replies of earlier requests still leave before the error and the close
    d->counters.frames_rejected++;
    reply_status(d, s, 0, rc, "%s; closing the connection", msg.text);
    if (c->ready) {
      client_finish(d, c);
    } else {
      session_close(s);
    }
    return;
  }
  uint64_t id = wire_id(req);
  wire_kind_t kind = wire_kind(req);
  const char* body = wire_body_name(req);

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
      reply_status(d, s, id, ERR_STATE, "the first message must be hello (got %s)", body);
    }
    wire_free(req);
    session_close(s);
    return;
  }
  if (id == 0) {
    reply_status(d, s, 0, ERR_INVAL, "envelope.id must be > 0 in a request (%s)", body);
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
        client_reply(d, c, out, out_len);
      }
      break;
    case WIRE_KIND_GET_INFO:
      submit_info(d, c, id);
      break;
    case WIRE_KIND_ENV_WRITE:
      if (c->observer) {
        reply_status(d, s, id, ERR_STATE,
                     "%s changes the environment; this connection's role is observer", body);
        break;
      }
      uint64_t used;
      if ((strncmp(body, "create_", 7) == 0 || strcmp(body, "set_material") == 0) &&
          scene_memory_full(d, &used)) {
        reply_status(d, s, id, ERR_LIMIT, "%s: the environments hold %llu bytes, past "
                     "max_scene_bytes %llu (--max-scene-bytes); remove something first", body,
                     (unsigned long long)used, (unsigned long long)d->cfg.max_scene_bytes);
        break;
      }
      submit_request(d, c, req, 0);
      return;
    case WIRE_KIND_ENV_READ:
      submit_request(d, c, req, 0);
      return;
    case WIRE_KIND_ENV_RELEASE:
      if (c->observer) {
        reply_status(d, s, id, ERR_STATE, "remove: only a controller removes an environment");
        break;
      }
      c->entry->retain = 0;
      LOG_INFO("environment '%s': no longer kept; destroyed when its last client leaves",
               c->entry->name);
      reply_status(d, s, id, 0, "environment '%s' is destroyed when its last client leaves",
                   c->entry->name);
      break;
    case WIRE_KIND_SUBSCRIBE:
      handle_subscribe(d, c, req);
      break;
    case WIRE_KIND_UNSUBSCRIBE:
      handle_unsubscribe(d, c, req);
      break;
    case WIRE_KIND_NOT_SERVED:
      reply_status(d, s, id, ERR_UNIMPL, "%s is not served by this daemon yet", body);
      break;
    case WIRE_KIND_REPLY:
      reply_status(d, s, id, ERR_INVAL, "%s is a reply, not a request", body);
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
  outbox_init(&c->out, client_send, c);
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
    client_finish(d, c);
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
    client_finish(user, c);
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
  streams_session_closed(d->streams, s);
  client_leave(d, c);
  outbox_close(&c->out);
  atomic_store(&c->live->gone, 1);
  liveness_release(c->live);

  // jobs still in flight find no client data and only release their references
  session_set_data(s, NULL);
  mem_free(c);
}


//---------------- life cycle

static void stop(daemon_t* d, const char* why) {
  if (d->stopping) {
    return;
  }
  d->stopping = 1;
  atomic_store(&d->halt, 1);
  LOG_INFO("%s: shutting down", why);
  uv_close((uv_handle_t*)&d->sigint, NULL);
  uv_close((uv_handle_t*)&d->sigterm, NULL);
  server_close(d->server);

  // running jobs finish; queued ones are cancelled and release what they hold
  exec_stop(d->exec);
}


static void on_signal(uv_signal_t* h, int signum) {
  stop(h->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}


int daemon_run(const daemon_config_t* cfg) {
  daemon_t* d = mem_calloc(1, sizeof(*d));
  if (!d) {
    LOG_ERROR("out of memory");
    return 1;
  }
  d->cfg = *cfg;
  // a step's outputs travel in its StepDone: they must fit in one frame with room to spare
  uint64_t frame_room = cfg->max_frame_bytes > (128u << 10) ? cfg->max_frame_bytes - (64u << 10)
                                                             : cfg->max_frame_bytes / 2;
  if (d->cfg.limits.max_output_bytes > frame_room) {
    d->cfg.limits.max_output_bytes = frame_room;
  }
  d->start_ns = clock_now_ns();
  atomic_init(&d->halt, 0);
  log_set_level(cfg->log_level);
  d->limits = (wire_limits_t){cfg->max_frame_bytes, cfg->max_clients, cfg->max_environments,
                              cfg->max_queue_bytes, cfg->max_scene_bytes, cfg->limits,
                              cfg->max_held_bytes, cfg->handshake_timeout_ms,
                              cfg->idle_timeout_ms, cfg->io_timeout_ms, cfg->max_request_ms,
                              cfg->max_hello_bytes, cfg->subscriber_max_bytes,
                              cfg->subscriber_soft_bytes, cfg->subscriber_soft_ms};
  signal(SIGPIPE, SIG_IGN);
  int rc = 1;
  err_msg_t msg;

  // construction, in order
  uv_replace_allocator(mem_alloc, mem_realloc, mem_calloc, mem_free);
  uv_loop_init(&d->loop);
  d->device = scene_device_create(&msg);
  if (!d->device) {
    LOG_ERROR("ray-tracing device: %s", msg.text);
    goto out_loop;
  }
  scene_device_set_budget(d->device, (int64_t)cfg->max_scene_bytes);
  d->pool = pool_create(cfg->threads);
  d->exec = exec_create(&d->loop, cfg->max_environments);
  registry_init(&d->registry, d->exec, cfg->max_environments);
  if (!d->pool || !d->exec) {
    LOG_ERROR("cannot start worker threads");
    if (d->exec) {
      exec_stop(d->exec);
      uv_run(&d->loop, UV_RUN_DEFAULT);
    }
    goto out_threads;
  }
  server_limits_t lim = {
      .max_frame_bytes = cfg->max_frame_bytes,
      .max_queue_bytes = cfg->max_queue_bytes,
      .max_hello_bytes = cfg->max_hello_bytes,
      .max_held_bytes = cfg->max_held_bytes,
      .handshake_timeout_ms = cfg->handshake_timeout_ms,
      .idle_timeout_ms = cfg->idle_timeout_ms,
      .io_timeout_ms = cfg->io_timeout_ms,
  };
  server_hooks_t hooks = {
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
  d->server = server_create(&d->loop, cfg->host, cfg->port, &lim, &hooks, &msg);
  if (!d->server || server_port(d->server) < 0) {
    LOG_ERROR("--listen %s:%d: %s", cfg->host, cfg->port, msg.text);
    if (d->server) {
      server_close(d->server);
    }
    exec_stop(d->exec);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    goto out_server;
  }
  streams_config_t scfg = {cfg->subscriber_max_bytes, cfg->subscriber_soft_bytes,
                           cfg->subscriber_soft_ms, cfg->max_held_bytes};
  d->streams = streams_create(d->server, d->pool, &scfg);
  if (!d->streams) {
    LOG_ERROR("out of memory");
    server_close(d->server);
    exec_stop(d->exec);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    goto out_server;
  }
  uv_signal_init(&d->loop, &d->sigint);
  uv_signal_init(&d->loop, &d->sigterm);
  d->sigint.data = d;
  d->sigterm.data = d;
  uv_signal_start(&d->sigint, on_signal, SIGINT);
  uv_signal_start(&d->sigterm, on_signal, SIGTERM);
  d->heap_base = heap_in_use();

  int loopback = strcmp(cfg->host, "127.0.0.1") == 0 || strcmp(cfg->host, "::1") == 0 ||
                 strncmp(cfg->host, "127.", 4) == 0;
  if (!loopback && !cfg->token) {
    LOG_WARN("listening on non-loopback address %s without --token: anyone who can reach it "
             "can control the daemon", cfg->host);
  }
  LOG_INFO("sensimd %s: %u threads, max frame %u bytes, max %u clients", SENSIM_VERSION,
           cfg->threads, cfg->max_frame_bytes, cfg->max_clients);
  int colon6 = strchr(cfg->host, ':') != NULL;
  printf("sensimd listening on %s%s%s:%d\n", colon6 ? "[" : "", cfg->host, colon6 ? "]" : "",
         server_port(d->server));
  fflush(stdout);

  // serve until a signal stops the listener, the sessions and the executors
  uv_run(&d->loop, UV_RUN_DEFAULT);
  rc = 0;

out_server:
  // environments still registered (kept ones) are destroyed here, on the loop thread
  registry_close(&d->registry);
  streams_destroy(d->streams);
  if (d->server) {
    server_destroy(d->server);
  }
out_threads:
  exec_destroy(d->exec);
  pool_destroy(d->pool);
  scene_device_destroy(d->device);
out_loop:
  // a handle left open is a bug: report it in the exit code, which the tests check
  if (uv_loop_close(&d->loop) != 0) {
    LOG_ERROR("event loop closed with handles still open");
    rc = 1;
  }
  mem_free(d);
  if (rc == 0) {
    LOG_INFO("stopped cleanly");
  }
  return rc;
}
