// SPDX-License-Identifier: MIT
// sensim.h: the public C client of sensimd (protocol v1). One opaque handle per connection;
// every call returns a sensim_status_t and keeps its detail message on the handle.
#ifndef SENSIM_SENSIM_H
#define SENSIM_SENSIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SENSIM_API __attribute__((visibility("default")))
#else
#define SENSIM_API
#endif

//---------------------------------------------------------------- Status

// Result of every client call. The values up to 100 equal sensim.v1.StatusCode on the wire and
// never change; the values above 100 are raised by the client itself.
typedef enum sensim_status {
  SENSIM_OK = 0,                    // success
  SENSIM_INVALID_ARGUMENT = 3,      // a field or argument is malformed; recoverable: fix the input
  SENSIM_NOT_FOUND = 5,             // an id does not exist; recoverable
  SENSIM_ALREADY_EXISTS = 6,        // an id is taken; recoverable
  SENSIM_RESOURCE_EXHAUSTED = 8,    // a daemon limit was hit; recoverable unless the daemon
                                    //   closed the connection (frame size, client count)
  SENSIM_FAILED_PRECONDITION = 9,   // valid but not now; recoverable, except during the handshake
  SENSIM_UNIMPLEMENTED = 12,        // defined by the protocol, not served yet; recoverable
  SENSIM_INTERNAL = 13,             // a daemon bug or backend failure; not recoverable
  SENSIM_UNAUTHENTICATED = 16,      // token missing or wrong; not recoverable (connection closed)

  SENSIM_EIO = 101,                 // socket error; not recoverable (connection closed)
  SENSIM_ECLOSED = 102,             // the connection is closed; not recoverable
  SENSIM_ETIMEDOUT = 103,           // no reply within the timeout; not recoverable (closed)
  SENSIM_EPROTO = 104,              // the daemon sent something undecodable; not recoverable
  SENSIM_ENOMEM = 105,              // allocation failed; recoverable if memory is freed
  SENSIM_ECONNECT = 106,            // name resolution or TCP connect failed; retry with a new
                                    //   sensim_client_connect
} sensim_status_t;

// Return the name of a status, e.g. "INVALID_ARGUMENT"; "UNKNOWN" for other values.
// Ownership: static text, never freed.
// Thread: any.
SENSIM_API const char* sensim_status_name(sensim_status_t status);

// Return a one-line description of a status, e.g. "invalid argument".
// Ownership: static text, never freed.
// Thread: any.
SENSIM_API const char* sensim_status_str(sensim_status_t status);

//---------------------------------------------------------------- Connection

// An open connection to sensimd. Opaque; create with sensim_client_connect.
typedef struct sensim_client sensim_client_t;

// Role of a session (sensim.v1.Role).
typedef enum sensim_role {
  SENSIM_ROLE_CONTROLLER = 0,       // may describe the world, update state and step
  SENSIM_ROLE_OBSERVER = 1,         // may only read: info, raycast, subscribe
} sensim_role_t;

// Connection options. Initialize with sensim_options_init, then change what you need.
typedef struct sensim_options {
  const char* environment;          // environment to join or create; NULL or "" = "default"
  const char* token;                // shared token of a daemon run with --token; NULL = none
  const char* client_name;          // free text shown in the daemon's logs; NULL = "sensim-c"
  sensim_role_t role;               // default SENSIM_ROLE_CONTROLLER
  int timeout_ms;                   // connect and per-request timeout, ms; <= 0 = wait forever
  uint32_t max_frame_bytes;         // largest frame accepted from the daemon; default 64 MiB
} sensim_options_t;

// Fill opts with the defaults documented on sensim_options_t (timeout 10 s).
// Thread: any.
SENSIM_API void sensim_options_init(sensim_options_t* opts);

// Connect to sensimd at host:port and perform the Hello handshake. On return *out is a handle
// even on failure (then closed, holding the reason in sensim_client_last_error), or NULL only
// when memory ran out; release it with sensim_client_close in every case.
// Returns SENSIM_OK, SENSIM_ECONNECT, SENSIM_ETIMEDOUT, SENSIM_UNAUTHENTICATED (token),
// SENSIM_FAILED_PRECONDITION (protocol version), SENSIM_RESOURCE_EXHAUSTED (too many clients),
// SENSIM_EIO, SENSIM_EPROTO or SENSIM_ENOMEM.
// Nullable: opts (defaults).
// Ownership: strings in opts are copied; *out is owned by the caller.
// Thread: any; the returned handle is used by one thread at a time.
SENSIM_API sensim_status_t sensim_client_connect(const char* host, uint16_t port,
                                                 const sensim_options_t* opts,
                                                 sensim_client_t** out);

// Close the connection and free the handle. NULL is a no-op.
// Thread: the thread using the handle.
SENSIM_API void sensim_client_close(sensim_client_t* cli);

// Return the detail message of the last failed call on this handle ("" if none), e.g. the
// daemon's status message naming the offending field.
// Ownership: owned by the handle; valid until the next call on it.
// Thread: the thread using the handle.
SENSIM_API const char* sensim_client_last_error(const sensim_client_t* cli);

// Return the daemon's version string from the handshake ("" before it completed).
// Ownership: owned by the handle; valid until sensim_client_close.
// Thread: the thread using the handle.
SENSIM_API const char* sensim_client_server_version(const sensim_client_t* cli);

//---------------------------------------------------------------- Requests

// Send a Ping carrying len bytes of payload (at most 256) and wait for the echo. On SENSIM_OK
// the echo matched and *server_time_ns, if given, is the daemon's monotonic clock.
// Returns SENSIM_INVALID_ARGUMENT for a payload over 256 bytes, SENSIM_EPROTO if the echo
// differs, or a transport status.
// Nullable: payload (when len is 0), server_time_ns.
// Thread: one thread per client handle.
SENSIM_API sensim_status_t sensim_ping(sensim_client_t* cli, const void* payload, size_t len,
                                       uint64_t* server_time_ns);

// Counters of the daemon (sensim.v1.Counters), totals since it started.
typedef struct sensim_counters {
  uint64_t frames_in;               // frames received
  uint64_t frames_out;              // frames sent
  uint64_t bytes_in;                // bytes received
  uint64_t bytes_out;               // bytes sent
  uint64_t requests_failed;         // replies with a status other than OK
  uint64_t connections_total;       // connections accepted
  uint64_t connections_rejected;    // connections refused over --max-clients
  uint64_t frames_rejected;         // oversize, zero-length or undecodable frames
  uint64_t steps;                   // steps evaluated
  uint64_t rays_traced;             // rays traced by sensors and raycasts
  uint64_t rays_culled;             // lidar rays above the step's horizon (misses, not traced)
  uint64_t rays_invalid;            // rays no sensor should make (misses, never traced)
  uint64_t scene_commits;           // top-level scene commits
  uint64_t frames_dropped;          // sensor frames dropped for slow subscribers
} sensim_counters_t;

// What sensim_get_info reports about the daemon.
typedef struct sensim_info {
  char server_version[32];          // NUL-terminated
  uint32_t protocol_version;        // 1 for this header
  double uptime_s;                  // s since the daemon started
  uint32_t connections;             // open client connections, this one included
  uint32_t threads;                 // worker threads
  uint32_t environments;            // number of environments alive
  uint32_t max_frame_bytes;         // daemon limit; 0 if not reported
  uint32_t max_clients;             // daemon limit; 0 if not reported
  sensim_counters_t counters;       // daemon totals
} sensim_info_t;

// Ask the daemon for its state and counters (GetInfo). On SENSIM_OK *out is filled; on any
// other status it is left zeroed.
// Thread: one thread per client handle.
SENSIM_API sensim_status_t sensim_get_info(sensim_client_t* cli, sensim_info_t* out);

//---------------------------------------------------------------- Point clouds

// PointCloud.encoding (sensim.v1.Encoding).
typedef enum sensim_encoding {
  SENSIM_ENCODING_RAW = 0,
  SENSIM_ENCODING_ZSTD = 1,
  SENSIM_ENCODING_QUANTIZED_ZSTD = 2,
} sensim_encoding_t;

// Decode the `len` bytes of a PointCloud's data, in `encoding`, into `count` points of
// `point_step` bytes (out: at least count * point_step bytes, out_cap its size). Every
// encoding of docs/streams.md; QUANTIZED_ZSTD (byte format SQZ2, any other is refused)
// rebuilds positions exactly as the daemon's encoder measured them. Returns SENSIM_OK,
// SENSIM_INVALID_ARGUMENT when out_cap is too small, SENSIM_EPROTO when the bytes are not a
// valid encoding of such a cloud, SENSIM_ENOMEM.
// Nullable: data and out when count * point_step is 0.
// Thread: any (no client handle).
SENSIM_API sensim_status_t sensim_point_cloud_decode(sensim_encoding_t encoding, const void* data,
                                                     size_t len, uint32_t count,
                                                     uint32_t point_step, void* out,
                                                     size_t out_cap);

#ifdef __cplusplus
}
#endif

#endif  // SENSIM_SENSIM_H
