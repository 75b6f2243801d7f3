// SPDX-License-Identifier: MIT
// daemon_impl.h: what the daemon's own files share (private to daemon/ and daemon.c): the
// daemon's state, the protocol state of each connection, and the calls between the protocol
// (daemon/protocol.c), replies (daemon/reply.c), subscriptions (daemon/subscribe.c) and
// GetInfo (daemon/info.c).
//
// Thread: loop thread, except the fields marked otherwise.
#ifndef SENSIM_DAEMON_DAEMON_IMPL_H_
#define SENSIM_DAEMON_DAEMON_IMPL_H_

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "base/pool.h"
#include "base/spares.h"
#include "daemon.h"
#include "daemon/exec.h"
#include "daemon/record.h"
#include "daemon/registry.h"
#include "daemon/streams.h"
#include "net/outbox.h"
#include "net/server.h"
#include "net/session.h"
#include "net/wire.h"
#include "scene/scene.h"

typedef struct daemon daemon_t;

// Whether a client is still there, shared with its jobs so a long raycast can stop early.
typedef struct liveness {
  atomic_int gone;           // Thread: set on the loop, read by tracing threads
  int refs;                  // the client + each job (loop thread)
} liveness_t;

// The protocol state of one connection (its session's owner data).
typedef struct client {
  daemon_t* d;
  session_t* s;
  int ready;                 // hello done
  int observer;
  registry_entry_t* entry;   // joined environment
  liveness_t* live;
  outbox_t out;              // replies in request order
  uint64_t pending_bytes;    // decoded requests queued on the environment's queue
  uint64_t out_held;         // out.mem_bytes as last counted in the server's budget
  int paused;                // reading paused by back-pressure
  int finishing;             // half-closed or broken: close once every reply is out
  char name[64];
} client_t;

// The daemon: what daemon.c creates, and the totals the protocol keeps.
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
  recorder_t* recorder;      // --record: nullable
  // Request jobs done, kept for the next requests (protocol.c): a lock-step tick's two
  // requests take them instead of a calloc and a free each. Dropped at the end.
  spares_t spare_jobs;
};

//---------------- protocol (daemon/protocol.c)

// The server hooks that run the protocol on d's sessions.
void protocol_hooks(daemon_t* d, server_hooks_t* out);

// Bytes of heap in use now (the baseline of --max-scene-bytes is taken at start-up).
uint64_t protocol_heap_in_use(void);

//---------------- replies (daemon/reply.c)

// Set up c's replies in request order (on its arrival).
void reply_init(client_t* c);

// Reply with a status only; code 0 = OK. Replies to ready clients keep request order.
void reply_status(daemon_t* d, session_t* s, uint64_t id, int code, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// A reply to a request of a ready client, after the replies of its earlier requests. Takes
// ownership of payload.
void reply_put(daemon_t* d, client_t* c, uint8_t* payload, size_t len);

// After replies moved: a finishing client closes once its outbox is empty; a paused one
// resumes reading when its backlog has halved.
void reply_moved(daemon_t* d, client_t* c);

// Pause reading while the client's backlog (queued requests, replies held back) is too large.
void reply_check_backlog(daemon_t* d, client_t* c);

// Stop reading and close once every reply already owed has left.
void reply_finish(daemon_t* d, client_t* c);

// The connection is gone: drop the replies it was owed and release their memory.
void reply_close(daemon_t* d, client_t* c);

//---------------- subscriptions (daemon/subscribe.c)

// Subscribe / Unsubscribe of a ready client: checked, then queued on its environment's queue.
// req stays the caller's.
void subscribe_add(daemon_t* d, client_t* c, wire_request_t* req);
void subscribe_remove(daemon_t* d, client_t* c, wire_request_t* req);

//---------------- GetInfo (daemon/info.c)

// Reply to GetInfo id with the counters every environment published (registry_publish), at
// once, or behind the requester's own requests still in progress.
void info_submit(daemon_t* d, client_t* c, uint64_t id);

#endif  // SENSIM_DAEMON_DAEMON_IMPL_H_
