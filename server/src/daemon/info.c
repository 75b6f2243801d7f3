// SPDX-License-Identifier: MIT
// info.c: GetInfo: the daemon's totals, limits and subscriptions, and each environment's
// counters read on its own queue.
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "daemon/daemon_impl.h"

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


static void add_env_counters(wire_counters_t* c, const registry_totals_t* t) {
  c->steps += t->steps;
  c->rays_traced += t->rays_traced;
  c->rays_culled += t->rays_culled;
  c->rays_invalid += t->rays_invalid;
  c->mesh_builds += t->geometry_builds;
  c->instance_updates += t->instance_updates;
  c->scene_commits += t->commits;
}


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
    reply_moved(d, client);
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


void info_submit(daemon_t* d, client_t* c, uint64_t id) {
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
  reply_check_backlog(d, c);
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
