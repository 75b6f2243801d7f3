// SPDX-License-Identifier: MIT
// info.c: GetInfo: the daemon's totals, limits and subscriptions, and each environment's
// counters as its last finished job published them (registry_publish): a step in progress,
// however long, delays no GetInfo, and a client still sees the effect of every request it sent
// before (its GetInfo then waits behind them on its environment's queue).
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "daemon/daemon_impl.h"

static void add_env_counters(wire_counters_t* c, const registry_totals_t* t) {
  c->steps += t->steps;
  c->rays_traced += t->rays_traced;
  c->rays_culled += t->rays_culled;
  c->rays_invalid += t->rays_invalid;
  c->mesh_builds += t->geometry_builds;
  c->instance_updates += t->instance_updates;
  c->scene_commits += t->commits;
}


// GetInfo behind the requester's own earlier requests: a job on its environment's queue that
// does nothing; once it is done, every job before it has published its counters.
typedef struct info_job {
  exec_job_t base;
  daemon_t* d;
  session_t* s;              // retained
  registry_entry_t* entry;   // referenced
  outbox_slot_t* slot;
  uint64_t id;
} info_job_t;


// The Info reply to request id, or a status when memory runs out (NULL when even that does).
static uint8_t* info_encode(daemon_t* d, uint64_t id, size_t* len) {
  uint8_t* out = NULL;
  registry_entry_t** entries = NULL;
  uint32_t n = 0;
  wire_env_info_t* infos = NULL;
  if (registry_snapshot(&d->registry, &entries, &n) != 0 ||
      !(infos = mem_calloc(n ? n : 1, sizeof(*infos)))) {
    for (uint32_t i = 0; entries && i < n; i++) {
      registry_release(entries[i]);
    }
    mem_free(entries);
    return wire_encode_status(id, ERR_NOMEM, "out of memory collecting info", &out, len) ? NULL
                                                                                          : out;
  }
  wire_info_t info = {
      .server_version = SENSIM_VERSION,
      .uptime_s = (double)(clock_now_ns() - d->start_ns) * 1e-9,
      .connections = server_sessions(d->server),
      .threads = d->cfg.threads,
      .counters = d->counters,
      .envs = infos,
      .nenv = n,
      .limits = &d->limits,
  };
  wire_counters_t* c = &info.counters;
  server_stats_t st;
  server_get_stats(d->server, &st);
  c->held_bytes = st.held_bytes;
  c->connections_timed_out = st.timed_out;
  add_env_counters(c, &d->registry.retired);
  for (uint32_t i = 0; i < n; i++) {
    registry_read_info(entries[i], &infos[i].info);
    infos[i].name = entries[i]->name;
    infos[i].clients = entries[i]->clients;
    infos[i].retention = entries[i]->retain ? 2 : 1;
    registry_totals_t t = {0};
    registry_totals_add(&t, &infos[i].info);
    add_env_counters(c, &t);
  }
  streams_totals(d->streams, &c->frames_dropped, &c->bytes_dropped, &c->subscribers_closed);
  wire_sub_info_t* subs = NULL;
  info.nsub = streams_info(d->streams, &subs);
  info.subs = subs;
  int64_t bytes;
  scene_device_counters(d->device, &c->backend_errors, &bytes);
  c->backend_bytes = bytes > 0 ? (uint64_t)bytes : 0;
  if (wire_encode_info(id, &info, &out, len) != 0 &&
      wire_encode_status(id, ERR_NOMEM, "out of memory encoding info", &out, len) != 0) {
    out = NULL;
  }
  mem_free(subs);
  for (uint32_t i = 0; i < n; i++) {
    registry_release(entries[i]);
  }
  mem_free(entries);
  mem_free(infos);
  return out;
}


static void info_wait_run(exec_job_t* j) {
  (void)j;
}


static void info_wait_done(exec_job_t* j, int cancelled) {
  info_job_t* ij = (info_job_t*)j;
  client_t* client = session_data(ij->s);
  uint8_t* out = NULL;
  size_t len = 0;
  if (!cancelled && client) {
    out = info_encode(ij->d, ij->id, &len);
  }
  outbox_fill(ij->slot, out, len);
  if (client) {
    reply_moved(ij->d, client);
  }
  registry_release(ij->entry);
  session_release(ij->s);
  mem_free(ij);
}


void info_submit(daemon_t* d, client_t* c, uint64_t id) {
  if (outbox_is_empty(&c->out) || !c->entry) {
    // every earlier request of this client is done, its counters published: reply now
    size_t len = 0;
    uint8_t* out = info_encode(d, id, &len);
    if (out) {
      reply_put(d, c, out, len);
    }
    return;
  }
  info_job_t* ij = mem_calloc(1, sizeof(*ij));
  outbox_slot_t* slot = ij ? outbox_reserve(&c->out) : NULL;
  if (!slot) {
    mem_free(ij);
    reply_status(d, c->s, id, ERR_NOMEM, "out of memory collecting info");
    return;
  }
  ij->base.run = info_wait_run;
  ij->base.done = info_wait_done;
  ij->base.brief = 1;
  ij->d = d;
  ij->s = c->s;
  ij->entry = c->entry;
  ij->slot = slot;
  ij->id = id;
  registry_retain(c->entry);
  session_retain(c->s);
  reply_check_backlog(d, c);
  exec_submit(d->exec, &c->entry->queue, &ij->base);
}
