// SPDX-License-Identifier: MIT
// daemon.c: the composition root. Creates, in order, the loop, the ray-tracing device and
// worker pool, the environment thread, the listener and the signal handlers, and tears them
// down in reverse. Owns the sessions' protocol state (handshake, role, environment) and the
// registry of named environments. Environment work is a job on the environment thread; the
// loop only decodes, routes and writes.
#include "daemon.h"

#include <signal.h>
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
#include "net/jobs.h"
#include "net/registry.h"
#include "net/server.h"
#include "net/wire.h"

#define SESSION_MAX_PENDING_JOBS 4096

typedef struct client {
  session_t* s;
  int ready;                 // hello done
  int observer;
  registry_entry_t* entry;   // joined environment
  uint64_t pending_bytes;    // decoded requests queued on the environment thread
  uint32_t pending_jobs;
  int eof;                   // the peer half-closed: close once every reply is out
  char name[64];
} client_t;

typedef struct daemon {
  daemon_config_t cfg;
  uv_loop_t loop;
  uv_signal_t sigint;
  uv_signal_t sigterm;
  server_t* server;
  jobs_t* jobs;
  pool_t* pool;
  scene_device_t* device;
  wire_limits_t limits;
  wire_counters_t counters;  // daemon totals (environment counters are added on demand)
  registry_t registry;
  uint64_t start_ns;
  int stopping;
} daemon_t;

typedef struct req_job {
  job_t base;
  daemon_t* d;
  session_t* s;              // retained
  registry_entry_t* entry;   // referenced
  wire_request_t* req;
  uint8_t* out;
  size_t out_len;
  int code;
  int hello;                 // the hello job: create the environment if needed
  int created;
} req_job_t;

typedef struct info_job {
  job_t base;
  daemon_t* d;
  session_t* s;
  uint64_t id;
  registry_entry_t** entries;
  wire_env_info_t* infos;
  uint32_t n;
} info_job_t;

// A reply that is ready at once but must wait for the connection's earlier jobs, so that
// replies leave in request order.
typedef struct ordered_job {
  job_t base;
  daemon_t* d;
  session_t* s;              // retained
  uint8_t* out;
  size_t len;
} ordered_job_t;

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
  cfg->max_pending_bytes = 256ull << 20;
  cfg->retain_environments = 0;
  cfg->log_level = LOG_LEVEL_INFO;
  cfg->limits = env_default_limits();
}


//---------------- replies

static void send_payload(daemon_t* d, session_t* s, uint8_t* payload, size_t len) {
  d->counters.frames_out++;
  d->counters.bytes_out += len + 4;
  session_send(s, payload, len);
}


// A half-closed client is closed once its last reply is queued.
static void client_check_eof(client_t* c) {
  if (c->eof && c->pending_jobs == 0) {
    session_close(c->s);
  }
}


// Queue a job that answers a request of client c: it holds the session until done and counts
// as pending, so that later replies wait for it.
static void client_submit(daemon_t* d, client_t* c, job_t* j, void (*run)(job_t*),
                          void (*done)(job_t*, int)) {
  j->run = run;
  j->done = done;
  session_retain(c->s);
  c->pending_jobs++;
  jobs_submit(d->jobs, j);
}


static void ordered_run(job_t* j) {
  (void)j;
}


static void ordered_done(job_t* j, int cancelled) {
  ordered_job_t* oj = (ordered_job_t*)j;
  client_t* c = session_data(oj->s);
  if (c) {
    c->pending_jobs--;
  }
  if (!cancelled && c && !session_is_closing(oj->s)) {
    send_payload(oj->d, oj->s, oj->out, oj->len);
    oj->out = NULL;
    client_check_eof(c);
  }
  mem_free(oj->out);
  session_release(oj->s);
  mem_free(oj);
}


// Send a reply to a request of a ready client, after the replies of its earlier requests.
// Takes ownership of payload.
static void client_reply(daemon_t* d, client_t* c, uint8_t* payload, size_t len) {
  if (c->pending_jobs == 0) {
    send_payload(d, c->s, payload, len);
    return;
  }
  ordered_job_t* oj = mem_calloc(1, sizeof(*oj));
  if (!oj) {
    mem_free(payload);
    session_close(c->s);
    return;
  }
  oj->d = d;
  oj->s = c->s;
  oj->out = payload;
  oj->len = len;
  client_submit(d, c, &oj->base, ordered_run, ordered_done);
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
  if (c && c->ready && id != 0) {
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

static void req_run(job_t* j) {
  req_job_t* rj = (req_job_t*)j;
  registry_entry_t* e = rj->entry;
  daemon_t* d = rj->d;
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
  if (wire_env_execute(rj->req, e->env, &rj->out, &rj->out_len, &rj->code)) {
    rj->out = NULL;
  }
}


static void client_job_finished(daemon_t* d, client_t* c, size_t bytes) {
  c->pending_bytes -= bytes;
  c->pending_jobs--;
  if (!session_is_closing(c->s) && c->pending_bytes <= d->cfg.max_pending_bytes / 2 &&
      c->pending_jobs <= SESSION_MAX_PENDING_JOBS / 2) {
    session_resume(c->s);
  }
}


static void send_hello_reply(daemon_t* d, session_t* s, client_t* c, req_job_t* rj) {
  registry_entry_t* e = rj->entry;
  if (!e->env) {
    reply_status(d, s, wire_id(rj->req), ERR_INTERNAL,
                 "hello.environment '%s' could not be created", e->name);
    session_close(s);
    return;
  }
  wire_hello_reply_t h = {
      .server_version = SENSIM_VERSION,
      .session_id = session_id(s),
      .environment = e->name,
      .environment_created = rj->created,
      .threads = d->cfg.threads,
      .limits = &d->limits,
  };
  uint8_t* out;
  size_t len;
  if (wire_encode_hello_reply(wire_id(rj->req), &h, &out, &len) == 0) {
    send_payload(d, s, out, len);
  }
  LOG_INFO("session %llu (%s, '%s', %s) joined environment '%s'%s",
           (unsigned long long)session_id(s), session_peer(s), c->name,
           c->observer ? "observer" : "controller", e->name, rj->created ? " (created)" : "");
}


static void req_done(job_t* j, int cancelled) {
  req_job_t* rj = (req_job_t*)j;
  daemon_t* d = rj->d;
  session_t* s = rj->s;
  client_t* c = session_data(s);
  if (c) {
    client_job_finished(d, c, wire_size(rj->req));
  }
  if (!cancelled && !session_is_closing(s) && c) {
    if (rj->hello) {
      send_hello_reply(d, s, c, rj);
    } else if (rj->out) {
      if (rj->code) {
        d->counters.requests_failed++;
      }
      send_payload(d, s, rj->out, rj->out_len);
      rj->out = NULL;
    } else {
      reply_status(d, s, wire_id(rj->req), ERR_NOMEM, "out of memory encoding the reply");
    }
    client_check_eof(c);
  }
  mem_free(rj->out);
  wire_free(rj->req);
  registry_unref(rj->entry);
  session_release(s);
  mem_free(rj);
}


// Queue a request on the environment thread; takes ownership of req.
static void submit_request(daemon_t* d, client_t* c, wire_request_t* req, int hello) {
  req_job_t* rj = mem_calloc(1, sizeof(*rj));
  if (!rj) {
    reply_status(d, c->s, wire_id(req), ERR_NOMEM, "out of memory queueing %s",
                 wire_body_name(req));
    wire_free(req);
    return;
  }
  rj->d = d;
  rj->s = c->s;
  rj->entry = c->entry;
  rj->req = req;
  rj->hello = hello;
  registry_ref(c->entry);
  c->pending_bytes += wire_size(req);

  // back-pressure: stop reading this client until its queue drains
  if (c->pending_bytes > d->cfg.max_pending_bytes ||
      c->pending_jobs + 1 > SESSION_MAX_PENDING_JOBS) {
    session_pause(c->s);
  }
  client_submit(d, c, &rj->base, req_run, req_done);
}


//---------------- info

static void info_run(job_t* j) {
  info_job_t* ij = (info_job_t*)j;
  for (uint32_t i = 0; i < ij->n; i++) {
    if (ij->entries[i]->env) {
      env_get_info(ij->entries[i]->env, &ij->infos[i].info);
    }
  }
}


static void info_done(job_t* j, int cancelled) {
  info_job_t* ij = (info_job_t*)j;
  daemon_t* d = ij->d;
  client_t* client = session_data(ij->s);
  if (client) {
    client->pending_jobs--;
  }
  if (!cancelled && !session_is_closing(ij->s)) {
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
    add_env_counters(c, &d->registry.retired);
    for (uint32_t i = 0; i < ij->n; i++) {
      ij->infos[i].name = ij->entries[i]->name;
      ij->infos[i].clients = ij->entries[i]->clients;
      ij->infos[i].retention = ij->entries[i]->retain ? 2 : 1;
      registry_totals_t t = {0};
      registry_totals_add(&t, &ij->infos[i].info);
      add_env_counters(c, &t);
    }
    int64_t bytes;
    scene_device_counters(d->device, &c->backend_errors, &bytes);
    c->backend_bytes = bytes > 0 ? (uint64_t)bytes : 0;
    uint8_t* out;
    size_t len;
    if (wire_encode_info(ij->id, &info, &out, &len) == 0) {
      send_payload(d, ij->s, out, len);
    }
    if (client) {
      client_check_eof(client);
    }
  }
  for (uint32_t i = 0; i < ij->n; i++) {
    registry_unref(ij->entries[i]);
  }
  mem_free(ij->entries);
  mem_free(ij->infos);
  session_release(ij->s);
  mem_free(ij);
}


static void submit_info(daemon_t* d, client_t* c, uint64_t id) {
  info_job_t* ij = mem_calloc(1, sizeof(*ij));
  registry_entry_t** entries = NULL;
  uint32_t n = 0;
  if (ij && registry_snapshot(&d->registry, &entries, &n) != 0) {
    entries = NULL;
  }
  wire_env_info_t* infos = mem_calloc(n ? n : 1, sizeof(*infos));
  if (!ij || !entries || !infos) {
    for (uint32_t i = 0; entries && i < n; i++) {
      registry_unref(entries[i]);
    }
    mem_free(ij);
    mem_free(entries);
    mem_free(infos);
    reply_status(d, c->s, id, ERR_NOMEM, "out of memory collecting info");
    return;
  }
  ij->d = d;
  ij->s = c->s;
  ij->id = id;
  ij->entries = entries;
  ij->infos = infos;
  ij->n = n;
  client_submit(d, c, &ij->base, info_run, info_done);
}


//---------------- protocol

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
  if (d->cfg.token && strcmp(h.token, d->cfg.token) != 0) {
    reply_status(d, s, id, ERR_AUTH, "hello.token is %s", h.token[0] ? "wrong" : "missing");
    LOG_WARN("session %llu (%s): refused: bad token", (unsigned long long)session_id(s),
             session_peer(s));
    goto refuse;
  }
  const char* name = h.environment[0] ? h.environment : "default";
  if (!registry_name_ok(name)) {
    reply_status(d, s, id, ERR_INVAL,
                 "hello.environment must be 1 to %d printable characters", REGISTRY_NAME_MAX);
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
  int retain = h.retention == 2 || (h.retention == 0 && d->cfg.retain_environments);
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
  if (wire_decode(payload, len, &req, &msg) != 0) {
    d->counters.frames_rejected++;
    reply_status(d, s, 0, ERR_PROTO, "%s; closing the connection", msg.text);
    session_close(s);
    return;
  }
  uint64_t id = wire_id(req);
  wire_kind_t kind = wire_kind(req);
  const char* body = wire_body_name(req);
  if (id == 0) {
    reply_status(d, s, 0, ERR_INVAL, "envelope.id must be > 0 in a request (%s)", body);
    wire_free(req);
    return;
  }

  // handshake first
  if (!c->ready) {
    if (kind == WIRE_KIND_HELLO) {
      handle_hello(d, c, req);
    } else {
      reply_status(d, s, id, ERR_STATE, "the first message must be hello (got %s)", body);
      wire_free(req);
      session_close(s);
    }
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
      submit_request(d, c, req, 0);
      return;
    case WIRE_KIND_ENV_READ:
      submit_request(d, c, req, 0);
      return;
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
  c->s = s;
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
  d->counters.frames_rejected++;
  LOG_WARN("session %llu (%s): %s; closing", (unsigned long long)session_id(s), session_peer(s),
           msg);
  reply_status(d, s, 0, code, "%s; closing the connection", msg);
}


static void on_eof(void* user, session_t* s) {
  (void)user;
  client_t* c = session_data(s);
  if (c) {
    c->eof = 1;
    client_check_eof(c);
  }
}


static void on_close(void* user, session_t* s) {
  daemon_t* d = user;
  client_t* c = session_data(s);
  if (!c) {
    return;
  }
  LOG_DEBUG("session %llu: closed", (unsigned long long)session_id(s));
  client_leave(d, c);

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
  LOG_INFO("%s: shutting down", why);
  uv_close((uv_handle_t*)&d->sigint, NULL);
  uv_close((uv_handle_t*)&d->sigterm, NULL);
  server_close(d->server);

  // the running job finishes; queued ones are cancelled and release what they hold
  jobs_stop(d->jobs);
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
  d->start_ns = clock_now_ns();
  log_set_level(cfg->log_level);
  d->limits = (wire_limits_t){cfg->max_frame_bytes, cfg->max_clients, cfg->max_environments,
                              cfg->max_queue_bytes, cfg->limits};
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
  d->pool = pool_create(cfg->threads);
  d->jobs = jobs_create(&d->loop);
  registry_init(&d->registry, d->jobs, cfg->max_environments);
  if (!d->pool || !d->jobs) {
    LOG_ERROR("cannot start worker threads");
    if (d->jobs) {
      jobs_stop(d->jobs);
      uv_run(&d->loop, UV_RUN_DEFAULT);
    }
    goto out_threads;
  }
  server_limits_t lim = {cfg->max_frame_bytes, cfg->max_queue_bytes};
  server_hooks_t hooks = {
      .user = d,
      .on_open = on_open,
      .on_frame = on_frame,
      .on_stream_error = on_stream_error,
      .on_eof = on_eof,
      .on_close = on_close,
  };
  d->server = server_create(&d->loop, cfg->host, cfg->port, &lim, &hooks, &msg);
  if (!d->server || server_port(d->server) < 0) {
    LOG_ERROR("%s", d->server ? msg.text : "cannot create the listener");
    if (d->server) {
      server_close(d->server);
    }
    jobs_stop(d->jobs);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    goto out_server;
  }
  uv_signal_init(&d->loop, &d->sigint);
  uv_signal_init(&d->loop, &d->sigterm);
  d->sigint.data = d;
  d->sigterm.data = d;
  uv_signal_start(&d->sigint, on_signal, SIGINT);
  uv_signal_start(&d->sigterm, on_signal, SIGTERM);

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

  // serve until a signal stops the listener, the sessions and the environment thread
  uv_run(&d->loop, UV_RUN_DEFAULT);
  rc = 0;

out_server:
  // environments still registered (kept ones) are destroyed here, on the loop thread
  registry_close(&d->registry);
  if (d->server) {
    server_destroy(d->server);
  }
out_threads:
  jobs_destroy(d->jobs);
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
