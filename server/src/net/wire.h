// SPDX-License-Identifier: MIT
// wire.h: the protobuf adapter (protobuf-c). Decodes request Envelopes, classifies them,
// translates environment requests into core calls, and encodes replies. No protobuf type
// crosses this header: the daemon sees opaque requests and plain structs.
#ifndef SENSIM_NET_WIRE_H_
#define SENSIM_NET_WIRE_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/shared_buf.h"
#include "world/env.h"

#define WIRE_PROTOCOL_VERSION 1u

// Longest status message sent (sensim.options: Status.message max_size 512 with its NUL).
#define WIRE_STATUS_MAX 511

// A request that ran out of its time (DEADLINE_EXCEEDED on the wire). Beside the err_code_t
// codes, for wire_encode_status and wire_status_code.
#define WIRE_ERR_DEADLINE (-100)

typedef struct wire_request wire_request_t;

typedef enum wire_kind {
  WIRE_KIND_EMPTY = 0,       // an Envelope without a body
  WIRE_KIND_HELLO,
  WIRE_KIND_PING,
  WIRE_KIND_GET_INFO,
  WIRE_KIND_ENV_READ,        // an environment request that changes nothing (raycast, describe)
  WIRE_KIND_ENV_WRITE,       // an environment request that changes it (controllers only)
  WIRE_KIND_ENV_RELEASE,     // remove the connection's environment itself (controllers only)
  WIRE_KIND_SUBSCRIBE,       // Subscribe (any role)
  WIRE_KIND_UNSUBSCRIBE,     // Unsubscribe (any role)
  WIRE_KIND_NOT_SERVED,      // defined by the protocol, not served by this daemon yet
  WIRE_KIND_REPLY,           // a reply or pushed message sent as a request
} wire_kind_t;

// A decoded request may take at most WIRE_DECODE_FACTOR times its frame plus WIRE_DECODE_SLACK
// bytes. Bulk data (packed arrays, bytes) decodes 1:1; the slack covers the sub-messages of a
// legitimate request, whose numbers are limited (e.g. 1024 dipoles decode to about 200 KiB),
// while a frame of many tiny unknown or empty fields is refused before it costs much.
#define WIRE_DECODE_FACTOR 4u
#define WIRE_DECODE_SLACK (4u * 1024u * 1024u)

// Decode one frame payload. Returns 0 and *out (free with wire_free), or ERR_PROTO with msg, or
// ERR_LIMIT when it would decode to more than the budget above.
int wire_decode(const uint8_t* payload, size_t len, wire_request_t** out, err_msg_t* msg);

// The block holding a frame's payload, given up by its owner (a mem_alloc'ed block, then
// owned by the caller), or NULL when the owner cannot give it (session_take_frame).
typedef uint8_t* (*wire_take_fn)(void* ctx);

// wire_decode of a payload whose frame block its owner may give up: when the body has large
// bytes fields (at least 4 KiB: a raycast's rays, a mesh's vertices), take(take_ctx) is asked
// for the block; a block it gives is kept by the request until wire_free (freed on failure
// too), and those fields are not copied but point into it. A frame with nothing to borrow (or
// two bodies, or a borrowed field repeated), whose block is then never asked for, or whose
// block is not given, is decoded as by wire_decode, with the same errors.
int wire_decode_frame(const uint8_t* payload, size_t len, wire_take_fn take, void* take_ctx,
                      wire_request_t** out, err_msg_t* msg);
void wire_free(wire_request_t* r);

// NULL, or why a string field of the request is refused: a NUL or control character, invalid
// UTF-8, or more than TEXT_NAME_MAX bytes (base/text.h); the message names the field
// ("create_body.name").
// Such a request must be answered INVALID_ARGUMENT and not executed.
const char* wire_text_error(const wire_request_t* r);

// The envelope id at the start of an encoded reply of this daemon; 1 and *id when found.
int wire_peek_id(const uint8_t* payload, size_t len, uint64_t* id);

uint64_t wire_id(const wire_request_t* r);
wire_kind_t wire_kind(const wire_request_t* r);

// Field name of the body ("create_mesh"), or "(none)".
const char* wire_body_name(const wire_request_t* r);

// Memory the request holds: its frame plus what decoding allocated (back-pressure accounting).
size_t wire_size(const wire_request_t* r);

typedef struct wire_hello {
  uint32_t protocol_version;
  const char* client_name;   // valid while the request lives
  const char* environment;   // "" when absent
  const char* token;         // "" when absent
  int observer;              // role OBSERVER
  int role;                  // as sent (0 when absent): 0 controller, 1 observer, else unknown
  int retention;             // 0 default, 1 destroy, 2 keep
} wire_hello_t;

void wire_get_hello(const wire_request_t* r, wire_hello_t* out);

typedef struct wire_subscribe {
  uint32_t sensor_id;
  int encoding;              // as sent: 0 raw, 1 zstd, 2 quantized zstd, else unknown
  int has_precision;
  double precision;          // m
  int level;                 // as sent (0: absent)
  const char* const* fields; // (nfield) valid while the request lives
  size_t nfield;
} wire_subscribe_t;

// Subscribe or Unsubscribe (only sensor_id then).
void wire_get_subscribe(const wire_request_t* r, wire_subscribe_t* out);

// 1 and *sensor_id when r is Remove{kind: ENTITY_SENSOR}.
int wire_removes_sensor(const wire_request_t* r, uint32_t* sensor_id);

// 1 when r is a Step.
int wire_is_step(const wire_request_t* r);

// 1 when r is an UpdateState.
// A step's time: 1 and *out for a Step request with its time set, else 0.
int wire_step_time(const wire_request_t* r, double* out);

int wire_is_state_update(const wire_request_t* r);

//---------------- Replies (each returns a mem_alloc'ed payload; 0 or ERR_NOMEM)

// A reply carrying only a status (code 0 = OK, else an err_code_t mapped to StatusCode).
int wire_encode_status(uint64_t id, int code, const char* message, uint8_t** out,
                       size_t* out_len) CHECKRET;

// StatusCode number for an internal code (exposed for tests).
int wire_status_code(int code);

typedef struct wire_limits {
  uint32_t max_frame_bytes;
  uint32_t max_clients;
  uint32_t max_environments;
  uint64_t max_queue_bytes;
  uint64_t max_scene_bytes;
  env_limits_t env;
  uint64_t max_held_bytes;
  uint32_t handshake_timeout_ms;
  uint32_t idle_timeout_ms;
  uint32_t io_timeout_ms;
  uint32_t max_request_ms;
  uint32_t max_hello_bytes;
  uint64_t subscriber_max_bytes;
  uint64_t subscriber_soft_bytes;
  uint32_t subscriber_soft_ms;
} wire_limits_t;

typedef struct wire_hello_reply {
  const char* server_version;
  uint64_t session_id;
  const char* environment;
  int environment_created;
  uint32_t threads;
  const wire_limits_t* limits;
} wire_hello_reply_t;

int wire_encode_hello_reply(uint64_t id, const wire_hello_reply_t* h, uint8_t** out,
                            size_t* out_len) CHECKRET;

int wire_encode_pong(const wire_request_t* ping, uint64_t now_ns, uint8_t** out,
                     size_t* out_len) CHECKRET;

typedef struct wire_counters {
  uint64_t frames_in;
  uint64_t frames_out;
  uint64_t bytes_in;
  uint64_t bytes_out;
  uint64_t requests_failed;
  uint64_t connections_total;
  uint64_t connections_rejected;
  uint64_t frames_rejected;
  uint64_t steps;
  uint64_t rays_traced;
  uint64_t rays_culled;
  uint64_t rays_invalid;
  uint64_t mesh_builds;
  uint64_t instance_updates;
  uint64_t scene_commits;
  uint64_t backend_errors;
  uint64_t backend_bytes;
  uint64_t frames_dropped;
  uint64_t held_bytes;
  uint64_t connections_timed_out;
  uint64_t requests_timed_out;
  uint64_t bytes_dropped;
  uint64_t subscribers_closed;
} wire_counters_t;

typedef struct wire_env_info {
  const char* name;
  uint32_t clients;
  int retention;             // 1 destroy, 2 keep
  env_info_t info;
} wire_env_info_t;

typedef struct wire_sub_info {
  uint64_t session_id;
  const char* environment;
  const char* peer;
  const char* closed_reason; // nullable: a live subscription
  uint32_t sensor_id;
  int encoding;
  double precision;
  uint64_t queued_bytes;
  uint32_t queued_frames;
  uint64_t frames_sent;
  uint64_t bytes_sent;
  uint64_t frames_dropped;
  uint64_t bytes_dropped;
} wire_sub_info_t;

typedef struct wire_info {
  const char* server_version;
  double uptime_s;
  uint32_t connections;
  uint32_t threads;
  wire_counters_t counters;
  const wire_env_info_t* envs;
  uint32_t nenv;
  const wire_limits_t* limits;
  const wire_sub_info_t* subs;
  uint32_t nsub;
} wire_info_t;

int wire_encode_info(uint64_t id, const wire_info_t* info, uint8_t** out,
                     size_t* out_len) CHECKRET;

//---------------- Environment requests (Thread: the environment's queue, daemon/exec.h)

// Let a long request (a raycast) stop early when cancelled() returns non-zero; polled from
// tracing threads. Thread: loop, before the request is queued.
void wire_set_cancel(wire_request_t* r, int (*cancelled)(void* ctx), void* ctx);

// Execute an ENV_READ or ENV_WRITE request against e and encode its reply (always produced;
// ERR_NOMEM only if even the status reply cannot be allocated). *out_code receives the
// internal code of the outcome (0 on success) for the counters. A Step's reply comes in one
// payload here, copied together (for tests and tools; the daemon uses wire_step_execute).
int wire_env_execute(const wire_request_t* r, env_t* e, uint8_t** out, size_t* out_len,
                     int* out_code) CHECKRET;

// What a step's reply may take.
typedef struct wire_step_limits {
  uint32_t max_frame_bytes;     // one frame
  uint64_t max_reply_bytes;     // every frame of the reply together
} wire_step_limits_t;

// A step executed: its reply and (on success) its records.
typedef struct wire_step {
  shared_buf_t** frames;        // (nframes) the reply in order: the records it sends ahead
                                //   (parts), then the StepDone, or a status; one reference each
  uint32_t nframes;
  int code;                     // internal code of the outcome (0 on success)
  sensor_out_t records;         // every record of the step, taken from the environment (their
                                //   clouds' buffers with them), whatever Step.outputs selects
  double start_time;            // start of the step's interval
} wire_step_t;

// Execute a Step request against e. Step.outputs selects the records its reply carries (all,
// none or the listed sensors; an unknown or repeated id refuses the step before anything
// changes, naming output_sensors[i]). The reply refers to the records' points instead of
// copying them: one StepDone frame when they fit in lim->max_frame_bytes, else each record in
// a frame of its own with the Step's id, then the StepDone with their count
// (outputs_in_parts). A reply past lim->max_reply_bytes refuses the step before it is
// committed. *out is always filled (ERR_NOMEM only if not even a status could be); free with
// wire_step_free.
int wire_step_execute(const wire_request_t* r, env_t* e, const wire_step_limits_t* lim,
                      wire_step_t* out) CHECKRET;
void wire_step_free(wire_step_t* s);

#endif  // SENSIM_NET_WIRE_H_
