// SPDX-License-Identifier: MIT
// registry.h: the daemon's named environments. Clients join an environment by name (created
// on first use); each environment has its own serial queue of jobs (daemon/exec.h). When the
// last client leaves, a non-retained environment leaves the registry and is destroyed by a
// last job on its queue, after every job queued before it.
//
// Thread: loop thread, except the fields marked otherwise.
#ifndef SENSIM_DAEMON_REGISTRY_H_
#define SENSIM_DAEMON_REGISTRY_H_

#include <stdint.h>

#include <uv.h>

#include "base/list.h"
#include "daemon/exec.h"
#include "world/env.h"

#define REGISTRY_NAME_MAX 63

typedef struct registry_entry {
  char name[REGISTRY_NAME_MAX + 1];
  env_t* env;                // Thread: the entry's queue (created by the first job, NULL after
                             //   destruction)
  int failed;                // Thread: the entry's queue; creation failed
  uint32_t clients;          // clients joined
  int retain;                // kept when the last client leaves
  exec_queue_t queue;        // every job on env runs here, in order
  // The environment's counters as its last job left them (registry_publish): GetInfo reads
  // them at once, never waiting for the job in progress. Thread: any, under info_lock.
  uv_mutex_t info_lock;
  env_info_t info;
  // private: owned by registry.c
  list_node_t node;          // in registry.entries while registered
  int refs;                  // registry membership + one per holder (clients, jobs)
  int registered;
} registry_entry_t;

// Counters of destroyed environments, so daemon totals survive them.
typedef struct registry_totals {
  uint64_t steps;
  uint64_t rays_traced;
  uint64_t rays_culled;
  uint64_t rays_invalid;
  uint64_t geometry_builds;
  uint64_t instance_updates;
  uint64_t commits;
} registry_totals_t;

typedef struct registry {
  list_t entries;
  uint32_t n;                // registered entries
  uint32_t max;              // most registered entries at once
  exec_t* exec;              // borrowed: runs the entries' queues
  registry_totals_t retired;
} registry_t;

void registry_init(registry_t* r, exec_t* exec, uint32_t max);

// 1 when name is 1 to REGISTRY_NAME_MAX bytes of printable UTF-8.
int registry_name_ok(const char* name);

// Join `name`, creating its entry (env still NULL: the caller queues its creation) when it
// does not exist; retain applies to a new entry. On success the caller holds one reference and
// counts as a client; *out_new tells whether the entry was created. ERR_LIMIT when max
// environments exist, ERR_NOMEM.
int registry_join(registry_t* r, const char* name, int retain, registry_entry_t** out,
                  int* out_new) CHECKRET;

// Leave: the caller's client count and reference are dropped; the last client of a
// non-retained environment retires it.
void registry_leave(registry_t* r, registry_entry_t* e);

void registry_retain(registry_entry_t* e);
void registry_release(registry_entry_t* e);

// The registered entries, each referenced for the caller (registry_release each, then mem_free
// the array). ERR_NOMEM on failure.
int registry_snapshot(registry_t* r, registry_entry_t*** out, uint32_t* out_n) CHECKRET;

// Publish the environment's counters for registry_read_info: the end of every job that may
// change them calls it. Thread: the entry's queue.
void registry_publish(registry_entry_t* e);

// The counters published last (all zero before the environment exists). Thread: any.
void registry_read_info(registry_entry_t* e, env_info_t* out);

// Add an environment's counters to totals.
void registry_totals_add(registry_totals_t* t, const env_info_t* info);

// Destroy every environment still registered (retained ones). Thread: loop, after
// exec_stop.
void registry_close(registry_t* r);

#endif  // SENSIM_DAEMON_REGISTRY_H_
