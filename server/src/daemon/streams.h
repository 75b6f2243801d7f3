// SPDX-License-Identifier: MIT
// streams.h: subscriptions (docs/streams.md). A connection subscribes to a sensor of its
// environment with an encoding. Each step hands its records to the streams by reference, and
// its reply leaves without waiting for them: every (sensor, encoding) wanted by a subscription
// is a lane, which frames the record at once when that costs nothing (RAW: the frame refers to
// the points) and otherwise queues it for the encoder threads, which run at a low priority
// (nice) so that an expensive encoding takes no CPU from the tracing. A lane holds at most
// STREAMS_BACKLOG records waiting for an encoder; past it the oldest is dropped and counted.
// Frames come out of each lane in step order, shared by reference by every subscription of
// that lane. A subscription's queue is bounded in bytes: past its budget the oldest whole frames
// are dropped and counted; a connection whose subscriptions together stay above the soft limit
// too long is closed, the reason logged and kept for GetInfo. One stream frame per connection
// is in the kernel writer at a time, so the loop never blocks and a slow reader costs at most
// its budget plus one frame.
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

struct uv_loop_s;
typedef struct streams streams_t;
typedef struct streams_lane streams_lane_t;   // the frames of one sensor in one encoding

// Records of a lane waiting for an encoder, at most; a newer one drops the oldest.
#define STREAMS_BACKLOG 2u

// Niceness of the encoder threads: the tracing (nice 0) gets about ten times their CPU share
// when both want it, and they still progress on a busy machine.
#define STREAMS_ENCODER_NICE 10

typedef struct streams_config {
  uint64_t max_bytes;           // per subscription: frames queued before the oldest are dropped
  uint64_t soft_bytes;          // above this for soft_ms closes the connection
  uint32_t soft_ms;             // 0: never
  uint64_t max_held_bytes;      // the daemon's budget for everything queued (0: none)
  unsigned encoders;            // encoder threads (>= 1)
} streams_config_t;

// Start the encoder threads; frames come back to the loop through a handle of its own.
streams_t* streams_create(server_t* srv, struct uv_loop_s* loop, const streams_config_t* cfg);

// Stop the encoder threads (each finishes the frame it encodes) and close the loop handle.
// Idempotent. Before the loop's last run.
void streams_stop(streams_t* st);

// After streams_stop, every session closed and the loop run to completion.
void streams_destroy(streams_t* st);

//---------------- Demand (Thread: any; one lock)

// Ask for frames of sensor_id of environment env_key in p's encoding (counted, so several
// subscriptions share one lane): *lane, the lane holding the demand, until a subscription
// takes it over (streams_subscribe) or streams_demand_remove drops it; until then the lane's
// frames wait (none is lost to a subscription not yet made). *since: the stamp of
// the next step's records (a subscription gets the records of the steps from then on).
// ERR_NOMEM.
int streams_demand_add(streams_t* st, const void* env_key, uint32_t sensor_id,
                       const wire_stream_params_t* p, streams_lane_t** lane,
                       uint64_t* since) CHECKRET;
// Thread: loop.
void streams_demand_remove(streams_t* st, streams_lane_t* lane);

//---------------- Records (Thread: the environment's queue)

// A step's records, covering (start_time, record time]: each wanted by a lane is framed or
// queued for encoding there (recs is only read: the lanes retain what they keep). Never waits
// for an encoding.
void streams_submit(streams_t* st, const void* env_key, const sensor_out_t* recs,
                    double start_time);

// The sensor was removed by the request that just ran: each lane of it ends with an
// end_of_stream frame, after the frames of the steps before; the records of later steps (a new
// sensor given the same id) go to new lanes. Called before the environment's next request runs.
void streams_sensor_removed(streams_t* st, const void* env_key, uint32_t sensor_id);

//---------------- Subscriptions (loop thread)

// A subscription of session s taking over the demand that streams_demand_add put on lane
// (since: from that call); the lane's frames wait for it meanwhile. The sensor may have been
// removed since: then it gets the lane's last frames and its end_of_stream. ERR_EXISTS when s
// is subscribed to the lane's sensor already; ERR_NOMEM. On failure the demand stays the
// caller's.
int streams_subscribe(streams_t* st, session_t* s, streams_lane_t* lane, const char* env_name,
                      uint64_t since) CHECKRET;

// End s's subscription to sensor_id (its queued frames are discarded). ERR_NOTFOUND.
int streams_unsubscribe(streams_t* st, session_t* s, uint32_t sensor_id) CHECKRET;

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
