// SPDX-License-Identifier: MIT
// daemon.h: the composition root of sensimd: configuration, and the one function that runs the
// daemon until SIGINT or SIGTERM.
#ifndef SENSIM_DAEMON_H_
#define SENSIM_DAEMON_H_

#include <stdint.h>

#include "base/log.h"
#include "world/env.h"

#define DAEMON_DEFAULT_HOST "127.0.0.1"
#define DAEMON_DEFAULT_PORT 7700
#define DAEMON_MAX_THREADS 256     // --threads bound

typedef struct daemon_config {
  char host[64];              // listen address (IPv4 or IPv6 literal)
  int port;                   // 0 = pick a free port
  unsigned threads;           // worker threads for ray tracing (>= 1)
  const char* token;          // nullable: no authentication
  uint32_t max_frame_bytes;   // largest accepted frame payload
  uint32_t max_clients;       // simultaneous connections
  uint32_t max_environments;
  uint64_t max_queue_bytes;   // per session: unsent output before the session is closed
  uint64_t max_pending_bytes; // per session: received requests not yet executed, or replies
                              // not taken by the peer, before reading pauses
  uint64_t max_scene_bytes;   // memory the ray-tracing backend may hold, all environments
  uint64_t max_held_bytes;    // all connections: input buffers, requests waiting, unsent
                              // replies (0 = unlimited)
  uint32_t max_hello_bytes;   // largest frame accepted before Hello succeeds
  uint32_t handshake_timeout_ms; // Hello must succeed within this (0 = no limit)
  uint32_t idle_timeout_ms;   // a connection without traffic or work is closed (0 = never)
  uint32_t io_timeout_ms;     // a started frame must arrive, unsent replies move (0 = never)
  uint32_t max_request_ms;    // one request's execution time (0 = unlimited)
  int retain_environments;    // 1: keep an environment when its last client leaves
  uint64_t subscriber_max_bytes;  // per subscription: queued frames before the oldest drop
  uint64_t subscriber_soft_bytes; // above this for subscriber_soft_ms closes the connection
  uint32_t subscriber_soft_ms;    // 0: never
  log_level_t log_level;
  env_limits_t limits;
  const char* record_path;    // nullable: --record FILE (daemon/record.h)
  uint64_t record_max_bytes;  // the recording's size limit
} daemon_config_t;

// Defaults: 127.0.0.1:7700, threads = online cores, 64 MiB frames, 64 clients.
void daemon_config_default(daemon_config_t* cfg);

// Run until SIGINT/SIGTERM. Prints "sensimd listening on HOST:PORT" to stdout once listening.
// Returns 0 on a clean shutdown, non-zero if start-up failed (the reason is logged).
int daemon_run(const daemon_config_t* cfg);

#endif  // SENSIM_DAEMON_H_
