// SPDX-License-Identifier: MIT
// streams.h: subscriptions (docs/streams.md). A connection subscribes to a sensor of its
// environment with an encoding; each step's records are encoded once per wanted encoding on
// the worker pool (called from the environment's executor, never from the loop thread) into
// shared frames, which every subscription of that encoding queues by reference. A
// subscription's queue is bounded in bytes: past its budget the oldest whole frames are
// dropped and counted; a connection whose
// subscription stays above the soft limit too long is closed, the reason logged and kept for
// GetInfo. One stream frame per connection is in the kernel writer at a time, so the loop
// never blocks and a slow reader costs at most its budget plus one frame.
//
// Thread: loop thread, except where marked.
#ifndef SENSIM_DAEMON_STREAMS_H_
#define SENSIM_DAEMON_STREAMS_H_

#include <stdint.h>

#include "base/err.h"
#include "codec/codec.h"
#include "net/server.h"
#include "net/session.h"
#include "net/wire.h"
#include "net/wire_stream.h"
#include "sensor/sensor.h"

typedef struct streams streams_t;
typedef struct streams_batch streams_batch_t;

typedef struct streams_config {
  uint64_t max_bytes;           // per subscription: frames queued before the oldest are dropped
  uint64_t soft_bytes;          // above this for soft_ms closes the connection
  uint32_t soft_ms;             // 0: never
  uint64_t max_held_bytes;      // the daemon's budget for everything queued (0: none)
} streams_config_t;

typedef struct pool pool_t;

// pool: nullable; the worker pool that encodes a step's frames (borrowed).
streams_t* streams_create(server_t* srv, pool_t* pool, const streams_config_t* cfg);

// After every session closed.
void streams_destroy(streams_t* st);

//---------------- Demand (Thread: any; one lock)

// Ask (add) or stop asking (remove) for frames of sensor_id of environment env_key in p's
// encoding; counted, so several subscriptions share one encoding.
int streams_demand_add(streams_t* st, const void* env_key, uint32_t sensor_id,
                       const wire_stream_params_t* p) CHECKRET;
void streams_demand_remove(streams_t* st, const void* env_key, uint32_t sensor_id,
                           const wire_stream_params_t* p);

//---------------- Encoding (Thread: the environment's queue)

// Encode the records a step produced for every encoding wanted now, the frames in parallel
// on the pool; NULL when none is wanted. start_time: the start of the step's interval.
streams_batch_t* streams_encode(streams_t* st, const void* env_key, const sensor_out_t* recs,
                                double start_time);

// Nullable. Thread: any.
void streams_batch_free(streams_batch_t* b);

//---------------- Subscriptions (loop thread)

// A subscription of session s (its demand already added). ERR_EXISTS when s is subscribed
// to sensor_id already; ERR_NOMEM.
int streams_subscribe(streams_t* st, session_t* s, const void* env_key, const char* env_name,
                      uint32_t sensor_id, const wire_stream_params_t* p) CHECKRET;

// End s's subscription to sensor_id (its queued frames are discarded). ERR_NOTFOUND.
int streams_unsubscribe(streams_t* st, session_t* s, uint32_t sensor_id) CHECKRET;

// Queue a step's frames on the subscriptions that want them, then free the batch.
void streams_publish(streams_t* st, const void* env_key, streams_batch_t* b);

// The sensor was removed: each subscription to it gets a last end_of_stream frame.
void streams_sensor_removed(streams_t* st, const void* env_key, uint32_t sensor_id);

// A stream frame of s was written: send the next one (server hook on_stream_drained).
void streams_drained(streams_t* st, session_t* s);

// s is closing: its subscriptions end.
void streams_session_closed(streams_t* st, session_t* s);

// Every subscription, then the last closed ones (closed_reason set); *out mem_alloc'ed
// (strings valid until the next call into streams). Returns the count; 0 and NULL on failure.
uint32_t streams_info(streams_t* st, wire_sub_info_t** out);

// Daemon totals: frames and bytes dropped, connections closed as slow subscribers.
void streams_totals(const streams_t* st, uint64_t* frames_dropped, uint64_t* bytes_dropped,
                    uint64_t* closed);

#endif  // SENSIM_DAEMON_STREAMS_H_
